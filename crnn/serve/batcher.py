"""Dynamic batching of concurrent requests through one Backend, apart from any HTTP code.

Requests put preprocessed images ``(C, H, W)`` uint8 on a queue and await their logits.
A worker takes the first waiting image, then whatever else arrives within ``max_wait_ms``
(up to ``max_batch`` images), pads each to a multiple of ``width_step`` pixels (its last
column repeated; the padding's frames are cut off again, so a read never depends on the
images batched with it beyond that padding), stacks images of equal padded width and
runs each stack through the backend on a worker thread, so the event loop never blocks.
This is Triton's and Ray Serve's dynamic batcher in miniature: a queue, a maximum batch, a
maximum wait, one future per request.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class BatchStats:
    """What the batcher has done: batches run, images in them, the largest batch."""

    batches: int = 0
    images: int = 0
    largest: int = 0
    sizes: list[int] = field(default_factory=list)

    def add(self, n: int) -> None:
        self.batches += 1
        self.images += n
        self.largest = max(self.largest, n)
        if len(self.sizes) < 10_000:
            self.sizes.append(n)


class Overloaded(RuntimeError):
    """More images wait for a forward pass than the batcher's queue holds."""


class MicroBatcher:
    """Batches backend forward passes of concurrent callers.

    Args:
        backend: a ``crnn.backends.Backend`` (uint8 ``(B, C, H, W)`` -> logits ``(B, T, K)``,
            ``output_length(widths)``).
        max_batch: most images in one forward pass (1: no batching).
        max_wait_ms: how long the first image of a batch waits for others.
        width_step: images are padded to a multiple of this width to share batches.
        max_queue: most images waiting for a forward pass (0: no bound); past it,
            :meth:`logits` raises :class:`Overloaded` at once instead of queueing.
    """

    def __init__(
        self, backend: Any, max_batch: int = 32, max_wait_ms: float = 5.0, width_step: int = 64,
        max_queue: int = 0,
    ) -> None:
        if max_batch < 1 or max_wait_ms < 0 or width_step < 1:
            raise ValueError(
                f"max_batch={max_batch}, max_wait_ms={max_wait_ms}, width_step={width_step}: "
                "expected max_batch >= 1, max_wait_ms >= 0, width_step >= 1"
            )
        self.backend = backend
        self.max_batch = max_batch
        self.max_wait = max_wait_ms / 1000.0
        self.width_step = width_step
        self.max_queue = max_queue
        self.stats = BatchStats()
        self._queue: asyncio.Queue[tuple[np.ndarray, int, asyncio.Future[np.ndarray]]] | None = None
        self._task: asyncio.Task[None] | None = None
        # One thread: the backend runs one batch at a time (it parallelises inside).
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="crnn-batch")

    async def start(self) -> None:
        if self._task is None:
            self._queue = asyncio.Queue(self.max_queue)
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            # Cancelled until it is done: on Python 3.11 a cancellation that meets a
            # finishing queue.get() inside asyncio.wait_for can be swallowed, and the
            # runner would go on for ever (a test that stopped it mid-batch hung).
            while not self._task.done():
                self._task.cancel()
                await asyncio.wait([self._task], timeout=0.1)
            with contextlib.suppress(asyncio.CancelledError, Exception):
                self._task.result()
            self._task = None
        self._pool.shutdown(wait=False, cancel_futures=True)

    async def logits(self, image: np.ndarray, width: int | None = None) -> np.ndarray:
        """The logits ``(T, K)`` of one preprocessed image ``(C, H, W)``, its own frames
        only: those of its first ``width`` columns when it comes padded (a page's line),
        else of its whole width."""
        if self._queue is None:
            await self.start()
        fut: asyncio.Future[np.ndarray] = asyncio.get_running_loop().create_future()
        try:
            self._queue.put_nowait((image, width or image.shape[-1], fut))  # type: ignore[union-attr]
        except asyncio.QueueFull:
            raise Overloaded(f"the server is busy: {self.max_queue} images already wait for the model "
                             "(--max-queue); try again shortly") from None  # fmt: skip
        return await fut

    async def _run(self) -> None:
        queue = self._queue
        assert queue is not None
        loop = asyncio.get_running_loop()
        while True:
            batch = [await queue.get()]
            deadline = time.monotonic() + self.max_wait
            while len(batch) < self.max_batch:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                try:
                    batch.append(await asyncio.wait_for(queue.get(), left))
                except asyncio.TimeoutError:
                    break
            batch = [(im, w, f) for im, w, f in batch if not f.cancelled()]
            if not batch:
                continue
            try:
                results = await loop.run_in_executor(self._pool, self._forward, [im for im, _, _ in batch],
                                                     [w for _, w, _ in batch])  # fmt: skip
            except Exception as e:  # noqa: BLE001 -- every waiter hears of it
                for _, _, f in batch:
                    if not f.done():
                        f.set_exception(e)
                continue
            for (_, _, f), out in zip(batch, results):
                if not f.done():
                    f.set_result(out)

    def _forward(self, images: list[np.ndarray], widths: list[int] | None = None) -> list[np.ndarray]:
        """Run the images in stacks of equal padded width; each one's logits trimmed to
        the frames of its real width (``widths``; default: its own width)."""
        widths = widths or [im.shape[-1] for im in images]
        self.stats.add(len(images))
        groups: dict[int, list[int]] = defaultdict(list)
        padded = []
        for i, im in enumerate(images):
            w = im.shape[-1]
            target = -(-w // self.width_step) * self.width_step
            if target != w:
                im = np.concatenate([im, np.repeat(im[..., -1:], target - w, axis=-1)], axis=-1)
            padded.append(im)
            groups[target].append(i)
        out: list[np.ndarray] = [None] * len(images)  # type: ignore[list-item]
        for idx in groups.values():
            logits = self.backend(np.stack([padded[i] for i in idx]))
            logits = logits.detach().cpu().numpy() if hasattr(logits, "detach") else np.asarray(logits)
            lengths = np.asarray(self.backend.output_length(np.array([widths[i] for i in idx])))
            for j, i in enumerate(idx):
                out[i] = logits[j, : int(min(lengths[j], logits.shape[1]))]
        return out
