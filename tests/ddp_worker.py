"""One rank of the two-process DDP checks in test_distributed.py (not a test itself).

Started by the test as plain processes with RANK/LOCAL_RANK/WORLD_SIZE/MASTER_ADDR/
MASTER_PORT set, the way torchrun starts ranks. It trains with the real
:class:`~crnn.engine.trainer.Trainer` on gloo and records what the tests compare
against one process:

* phase 1: ``fit()`` (resuming a checkpoint when given), recording the sample indices
  each optimizer step fed this rank, the validation metrics, the final parameters and
  buffers;
* phase 2: a fresh run with gradient accumulation, two steps by hand: the gradients at
  the first optimizer step, and which DDP all-reduce buckets ran during each micro-step.

Usage: ``python tests/ddp_worker.py SPEC.json``; writes ``SPEC["result"]-rank{r}.pt``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import torch
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

from crnn.cli import setup_logging
from crnn.config import load_config
from crnn.data.datasets import RecognitionDataset
from crnn.engine.distributed import cleanup, env_rank, init_distributed
from crnn.engine.trainer import Trainer


def record_grads(trainer: Trainer, store: list[dict[str, torch.Tensor]]) -> None:
    """Keep a copy of every parameter's gradient as the optimizer steps."""

    def record(*_: Any) -> None:
        store.append({n: p.grad.detach().clone() for n, p in trainer.model.named_parameters()})

    trainer.optimizer.register_step_pre_hook(record)


def main(spec_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text())
    ranks = env_rank()
    assert ranks is not None, "start this with RANK/WORLD_SIZE set"
    setup_logging(rank=ranks[0])
    info = init_distributed([torch.device("cpu")], "gloo", timeout_s=60)
    try:
        # Phase 1: which samples each step gives this rank, and where training ends up.
        trainer = Trainer(load_config(None, spec["phase1"]), info, resume=spec.get("resume"))
        seen: dict[tuple[int, int], list[int]] = {}
        getitem = RecognitionDataset.__getitem__

        def recording_getitem(self: RecognitionDataset, item: Any) -> dict[str, Any]:
            if self is trainer.data.dataset:
                seen.setdefault((trainer.state.epoch, trainer.state.step), []).append(int(item[0]))
            return getitem(self, item)

        RecognitionDataset.__getitem__ = recording_getitem  # type: ignore[method-assign]
        trainer.fit()
        RecognitionDataset.__getitem__ = getitem  # type: ignore[method-assign]
        result: dict[str, Any] = {
            "seen": seen,
            "metrics": trainer.state.metrics,
            "params": {n: p.detach().clone() for n, p in trainer.model.named_parameters()},
            "buffers": {n: b.clone() for n, b in trainer.model.named_buffers()},
        }

        # Phase 2: accumulation under DDP; count all-reduces per micro-step.
        acc = Trainer(load_config(None, spec["phase2"]), info)
        calls: list[list[bool]] = []  # per micro-step: is_last() of each bucket all-reduced

        def counting_hook(state, bucket):  # type: ignore[no-untyped-def]  # DDP checks annotations
            calls[-1].append(bucket.is_last())
            return allreduce_hook(state, bucket)

        acc.train_module.register_comm_hook(None, counting_hook)  # type: ignore[operator]
        grads: list[dict[str, torch.Tensor]] = []
        record_grads(acc, grads)
        forward = acc.train_module.forward

        def forward_marking_micro_steps(*args: Any, **kwargs: Any) -> Any:
            calls.append([])
            return forward(*args, **kwargs)

        acc.train_module.forward = forward_marking_micro_steps  # type: ignore[method-assign]
        batches = acc.batches()
        acc.train_module.train()
        for _ in range(spec["phase2_steps"]):
            acc.train_step(batches)
        result["accum_grads"] = grads[0]
        result["allreduce_calls"] = calls
        torch.save(result, f"{spec['result']}-rank{info.rank}.pt")
    finally:
        cleanup()


if __name__ == "__main__":
    main(sys.argv[1])
