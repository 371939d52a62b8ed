"""Dynamic batching of concurrent requests through one Backend, apart from any HTTP code.

Requests put preprocessed images ``(C, H, W)`` uint8 on a queue and await their logits.
A worker thread takes the first waiting image, then whatever else waits or arrives until
that image has waited ``max_wait_ms`` since it was queued (up to ``max_batch`` images),
stacks images of equal width and runs each stack through the backend unpadded, as
``Recognizer.predict`` does (a page's lines come padded as ``read_page`` pads them, their
padding's frames cut off again), so a served read is exactly predict's, whatever it was
batched with; the event loop only queues images and hands out results, so it never blocks and
never stands between two batches. With ``workers`` > 1 that many batches run at once: a
single-threaded ONNX Runtime session per core reads small batches 1.1-1.5x faster than
one session spread over the cores (docs/benchmarks.md, "Serving under load").
This is Triton's and Ray Serve's dynamic batcher in miniature: a queue, a maximum batch, a
maximum wait, one future per request.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import queue
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

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


class _Item(NamedTuple):
    """One image waiting for a forward pass."""

    image: np.ndarray
    width: int  # its real width: its frames are those of its first ``width`` columns
    future: asyncio.Future[Any]
    then: Callable[[np.ndarray], Any] | None
    queued: float  # time.monotonic() when it was queued


class Overloaded(RuntimeError):
    """More images wait for a forward pass than the batcher's queue holds."""


class MicroBatcher:
    """Batches backend forward passes of concurrent callers.

    Args:
        backend: a ``crnn.backends.Backend`` (uint8 ``(B, C, H, W)`` -> logits ``(B, T, K)``,
            ``output_length(widths)``).
        max_batch: most images in one forward pass (1: no batching).
        max_wait_ms: how long the first image of a batch waits for others, counted from
            when it was queued.
        max_queue: most images waiting for a forward pass (0: no bound); past it,
            :meth:`logits` raises :class:`Overloaded` at once instead of queueing.
        workers: batches run at once, each on its own thread (the backend must take
            concurrent calls, as an ONNX Runtime session does). A worker gathers its
            batch when it is free, so each takes what has waited meanwhile.
    """

    def __init__(
        self,
        backend: Any,
        max_batch: int = 32,
        max_wait_ms: float = 1.0,
        max_queue: int = 0,
        workers: int = 1,
    ) -> None:
        if max_batch < 1 or max_wait_ms < 0 or workers < 1:
            raise ValueError(
                f"max_batch={max_batch}, max_wait_ms={max_wait_ms}, workers={workers}: "
                "expected max_batch >= 1, max_wait_ms >= 0, workers >= 1"
            )
        self.backend = backend
        self.max_batch = max_batch
        self.max_wait = max_wait_ms / 1000.0
        self.max_queue = max_queue
        self.workers = workers
        self.stats = BatchStats()
        self._queue: queue.Queue[_Item | None] = queue.Queue(max_queue)  # None stops a worker
        self._threads: list[threading.Thread] = []
        self._loop: asyncio.AbstractEventLoop | None = None

    async def start(self) -> None:
        """Start the worker threads (the first :meth:`logits` does it too)."""
        if not self._threads:
            self._loop = asyncio.get_running_loop()
            self._threads = [
                threading.Thread(target=self._worker, name=f"crnn-batch_{i}", daemon=True)
                for i in range(self.workers)
            ]
            for t in self._threads:
                t.start()

    async def stop(self) -> None:
        """Stop the workers once their current batch is done; images still queued get
        ``asyncio.CancelledError``."""
        if not self._threads:
            return
        while True:  # what waits is dropped: its callers hear so
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is not None and not item.future.done():
                item.future.cancel()
        for _ in self._threads:
            self._queue.put(None)
        threads, self._threads = self._threads, []
        await asyncio.get_running_loop().run_in_executor(None, _join, threads, 5.0)

    async def logits(
        self,
        image: np.ndarray,
        width: int | None = None,
        then: Callable[[np.ndarray], Any] | None = None,
    ) -> Any:
        """The logits ``(T, K)`` of one preprocessed image ``(C, H, W)``, its own frames
        only: those of its first ``width`` columns when it comes padded (a page's line),
        else of its whole width. ``then``: what the caller does with them (decoding), run
        on the batch's worker thread right after the forward pass, its result returned
        instead (its exception raised to this caller alone): one hand-off between
        threads less per image."""
        if not self._threads:
            await self.start()
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        try:
            self._queue.put_nowait(
                _Item(image, width or image.shape[-1], fut, then, time.monotonic())
            )
        except queue.Full:
            raise Overloaded(
                f"the server is busy: {self.max_queue} images already wait for the model "
                "(--max-queue); try again shortly"
            ) from None
        return await fut

    def _worker(self) -> None:
        """A worker thread: gather a batch straight from the queue (no trip through the
        event loop between two batches: under load a worker that waited for the loop
        idled its core), run it, hand the results to the loop."""
        while True:
            first = self._queue.get()
            if first is None:
                return
            batch = [first]
            # The first image waits at most max_wait since it was queued: under load it
            # has already waited for a free worker, and the batch leaves with what is there.
            deadline = first.queued + self.max_wait
            while len(batch) < self.max_batch:
                try:
                    item = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    break
                if item is None:  # stopping: this batch is the last
                    self._queue.put(None)
                    break
                batch.append(item)
            batch = [b for b in batch if not b.future.done()]  # a cancelled request's images
            if not batch:
                continue
            try:
                results: Any = self._work(
                    [b.image for b in batch], [b.width for b in batch], [b.then for b in batch]
                )
            except Exception as e:  # noqa: BLE001 -- every waiter hears of it
                results = e
            assert self._loop is not None
            try:
                self._loop.call_soon_threadsafe(self._deliver, batch, results)
            except RuntimeError:  # the loop has closed: nobody waits any more
                return

    def _deliver(self, batch: list[_Item], results: Any) -> None:
        """On the event loop: each waiter's result, or the batch's exception."""
        self.stats.add(len(batch))
        for i, item in enumerate(batch):
            fut = item.future
            if fut.done():
                continue
            if isinstance(results, BaseException):
                fut.set_exception(results)
            else:
                ok, out = results[i]
                fut.set_result(out) if ok else fut.set_exception(out)

    def _work(
        self, images: list[np.ndarray], widths: list[int], thens: list[Any]
    ) -> list[tuple[bool, Any]]:
        """:meth:`_forward`, then each image's ``then`` on its logits: ``(True, result)``
        or ``(False, its exception)``."""
        out: list[tuple[bool, Any]] = []
        for logits, then in zip(self._forward(images, widths), thens):
            try:
                out.append((True, logits if then is None else then(logits)))
            except Exception as e:  # noqa: BLE001 -- that caller's error, not the batch's
                out.append((False, e))
        return out

    def _forward(
        self, images: list[np.ndarray], widths: list[int] | None = None
    ) -> list[np.ndarray]:
        """Run the images in stacks of equal width, unpadded (padding a crop changes what
        the BiLSTM reads: the served read then differs from predict's); each one's logits
        trimmed to the frames of its real width (``widths``; default: its own width)."""
        widths = widths or [im.shape[-1] for im in images]
        groups: dict[int, list[int]] = defaultdict(list)
        for i, im in enumerate(images):
            groups[im.shape[-1]].append(i)
        out: list[np.ndarray] = [None] * len(images)  # type: ignore[list-item]
        for idx in groups.values():
            logits = self.backend(np.stack([images[i] for i in idx]))
            logits = (
                logits.detach().cpu().numpy() if hasattr(logits, "detach") else np.asarray(logits)
            )
            lengths = np.asarray(self.backend.output_length(np.array([widths[i] for i in idx])))
            for j, i in enumerate(idx):
                out[i] = logits[j, : int(min(lengths[j], logits.shape[1]))]
        return out


def _join(threads: list[threading.Thread], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))


class BatchedBackend:
    """A Backend whose forward passes go through a :class:`MicroBatcher`, for a reader
    running on a worker thread (never the event loop's): each image of a call waits for
    its logits among whatever other requests' images share its batch, so the served
    reader is the Recognizer itself and the batcher decides only which lines share a
    forward pass. :meth:`cancel` drops what a request still waits for (its timeout)."""

    def __init__(self, batcher: MicroBatcher, loop: asyncio.AbstractEventLoop) -> None:
        self._batcher, self._loop = batcher, loop
        self._waiting: list[Any] = []
        self._cancelled = threading.Event()

    def __getattr__(self, name: str) -> Any:  # charset, spec, output_length, temperature...
        return getattr(self._batcher.backend, name)

    def __call__(self, images: Any) -> np.ndarray:
        if self._cancelled.is_set():
            raise asyncio.CancelledError("the request was cancelled")
        waits = [
            asyncio.run_coroutine_threadsafe(
                self._batcher.logits(np.ascontiguousarray(im)), self._loop
            )
            for im in np.asarray(images)
        ]
        self._waiting = waits
        # The first failure (a full queue: Overloaded) is raised at once, the rest dropped.
        done, _ = concurrent.futures.wait(waits, return_when=concurrent.futures.FIRST_EXCEPTION)
        failed = next((w for w in done if not w.cancelled() and w.exception() is not None), None)
        if failed is not None:
            for w in waits:
                w.cancel()
            raise failed.exception()  # type: ignore[misc]
        return np.stack([w.result() for w in waits])

    def cancel(self) -> None:
        """Stop: the next forward pass raises, the images queued are dropped."""
        self._cancelled.set()
        for w in self._waiting:
            w.cancel()
