"""DBNet's loss, per sample, so that it can be computed inside DataParallel replicas.

``L = alpha * L_prob + beta * L_thresh + L_binary`` (PaddleOCR's DBLoss weights: alpha 5,
beta 10): balanced binary cross-entropy on the probability map with hard negatives mined
at 3 negatives per positive, L1 on the threshold map inside its border mask, Dice on the
approximate binary map. All in fp32 whatever the forward pass ran in.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

ALPHA = 5.0
BETA = 10.0
NEG_RATIO = 3.0
EPS = 1e-6


def balanced_bce(pred: torch.Tensor, gt: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``(B, H, W)`` each -> ``(B,)``: BCE over positives and the hardest
    ``3 x positives`` negatives of each sample."""
    loss = F.binary_cross_entropy(pred.clamp(EPS, 1 - EPS), gt, reduction="none")
    pos = (gt * mask).flatten(1)
    neg = ((1 - gt) * mask).flatten(1)
    loss = loss.flatten(1)
    n_pos = pos.sum(1)
    n_neg = torch.minimum(neg.sum(1), (n_pos * NEG_RATIO).clamp(min=100.0)).long()
    neg_loss = (loss * neg).sort(dim=1, descending=True).values
    keep = torch.arange(loss.shape[1], device=loss.device)[None, :] < n_neg[:, None]
    hard = (neg_loss * keep).sum(1)
    return ((loss * pos).sum(1) + hard) / (n_pos + n_neg + EPS)


def masked_l1(pred: torch.Tensor, gt: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    m = mask.flatten(1)
    return ((pred - gt).abs().flatten(1) * m).sum(1) / (m.sum(1) + EPS)


def dice(pred: torch.Tensor, gt: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    p, g, m = pred.flatten(1), gt.flatten(1), mask.flatten(1)
    inter = (p * g * m).sum(1)
    union = (p * m).sum(1) + (g * m).sum(1) + EPS
    return 1 - 2 * inter / union


def db_loss(maps: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """``maps`` ``(B, 3, H, W)`` (probability, threshold, binary) and ``targets``
    ``(B, 4, H, W)`` (probability, its mask, threshold, its mask) -> ``(B,)``."""
    maps, targets = maps.float(), targets.float()
    prob, thresh, binary = maps[:, 0], maps[:, 1], maps[:, 2]
    gt, gt_mask, gt_thresh, thresh_mask = targets.unbind(1)
    return (
        ALPHA * balanced_bce(prob, gt, gt_mask)
        + BETA * masked_l1(thresh, gt_thresh, thresh_mask)
        + dice(binary, gt, gt_mask)
    )
