"""CTC: the loss from batch-first logits, and decoding.

The model returns ``(B, T, K)``; this module is the only place that transposes to
the ``(T, B, K)`` layout ``torch.nn.functional.ctc_loss`` wants, so nothing wrapped
by DataParallel/DDP ever sees a time-first tensor.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from crnn.charset import BLANK, Charset


def ctc_loss_per_sample(
    logits: torch.Tensor,
    targets: torch.Tensor,
    input_lengths: torch.Tensor,
    target_lengths: torch.Tensor,
) -> torch.Tensor:
    """Negative log-likelihood of each label, ``(B,)``, in float32.

    Args:
        logits: ``(B, T, K)`` raw scores, any float dtype (computed in fp32 here:
            CTC's forward-backward sums underflow in half precision).
        targets: ``(B, S)`` class ids padded with anything past each target length.
        input_lengths: ``(B,)`` valid time steps per sample (from its unpadded width).
        target_lengths: ``(B,)`` label lengths.

    Impossible alignments (label too long for the input) give 0 rather than ``inf``
    (``zero_infinity``) so one bad sample cannot poison a batch; the data pipeline
    filters or widens such samples beforehand, so this is a safety net.
    """
    log_probs = logits.float().log_softmax(dim=-1).transpose(0, 1)  # (T, B, K)
    return F.ctc_loss(
        log_probs,
        targets,
        input_lengths,
        target_lengths,
        blank=BLANK,
        reduction="none",
        zero_infinity=True,
    )


def ctc_loss(
    logits: torch.Tensor,
    targets: torch.Tensor,
    input_lengths: torch.Tensor,
    target_lengths: torch.Tensor,
) -> torch.Tensor:
    """Mean over the batch of :func:`ctc_loss_per_sample` (a scalar)."""
    return ctc_loss_per_sample(logits, targets, input_lengths, target_lengths).mean()


@dataclass(frozen=True)
class Prediction:
    """A decoded text line.

    ``confidence`` is the product of the character confidences (the probability of the
    best path's characters); for an empty prediction it is the least confident frame's
    blank probability. ``char_confidences[i]`` is the highest probability of character
    ``i`` over the frames that emitted it.
    """

    text: str
    confidence: float
    char_confidences: tuple[float, ...] = ()


def greedy_decode(
    logits: torch.Tensor,
    charset: Charset,
    lengths: torch.Tensor | None = None,
) -> list[Prediction]:
    """Best-path decoding: arg-max per frame, merge repeats, drop blanks.

    Args:
        logits: ``(B, T, K)``.
        lengths: ``(B,)`` valid frames per sample; frames beyond are ignored.
    """
    probs = logits.detach().float().softmax(dim=-1)
    best_p, best = probs.max(dim=-1)  # (B, T)
    best_p, best = best_p.cpu().tolist(), best.cpu().tolist()
    lens = lengths.cpu().tolist() if lengths is not None else [len(b) for b in best]
    out = []
    for ids, ps, n in zip(best, best_p, lens):
        chars: list[int] = []
        confs: list[float] = []
        prev = BLANK
        for c, p in zip(ids[:n], ps[:n]):
            if c != BLANK:
                if c != prev:
                    chars.append(c)
                    confs.append(p)
                elif p > confs[-1]:
                    confs[-1] = p
            prev = c
        if confs:
            conf = 1.0
            for p in confs:
                conf *= p
        else:
            conf = min(ps[:n]) if n else 0.0
        out.append(Prediction(charset.decode(chars), conf, tuple(confs)))
    return out
