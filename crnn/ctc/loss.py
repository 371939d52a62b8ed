"""The CTC loss from batch-first logits.

The model returns ``(B, T, K)``; this module is the only place that transposes to the
``(T, B, K)`` layout ``torch.nn.functional.ctc_loss`` wants, so nothing wrapped by
DataParallel/DDP ever sees a time-first tensor.
"""

from __future__ import annotations

import torch

from crnn.text.alphabet import BLANK


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
    import torch.nn.functional as F

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
