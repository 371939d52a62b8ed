"""ICDAR 2015 detection metrics: precision, recall and hmean at IoU 0.5, with
don't-care regions.

As in the ICDAR 2015 Robust Reading protocol (and mmocr's ``textdet`` evaluation): a
detection that lies mostly (area share > 0.5) inside a don't-care region is set aside,
neither true nor false; detections and legible lines are matched one to one, greedily
by IoU, a pair counting when its IoU exceeds 0.5. Sums add over images (and ranks), so
the metrics of a whole set are computed once from them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from crnn.detect.geometry import convex_hull, convex_intersection_area, convex_iou, polygon_area

IOU = 0.5
DONT_CARE_SHARE = 0.5


@dataclass
class DetCounts:
    """Matched pairs, detections counted, legible lines counted."""

    matched: int = 0
    detections: int = 0
    lines: int = 0

    def add(self, other: DetCounts) -> None:
        self.matched += other.matched
        self.detections += other.detections
        self.lines += other.lines

    def as_list(self) -> list[int]:
        return [self.matched, self.detections, self.lines]

    def compute(self) -> dict[str, float]:
        p = self.matched / self.detections if self.detections else 0.0
        r = self.matched / self.lines if self.lines else 0.0
        h = 2 * p * r / (p + r) if p + r else 0.0
        return {"precision": p, "recall": r, "hmean": h}


def match_image(
    dets: list[np.ndarray], gts: np.ndarray, ignore: np.ndarray, iou: float = IOU
) -> DetCounts:
    """One image: detections (each ``(4, 2)``) against labelled lines ``(N, 4, 2)``
    with don't-care flags ``(N,)``."""
    det_polys = [convex_hull(d) for d in dets]
    gt_polys = [convex_hull(g) for g in gts]
    care = [i for i in range(len(gt_polys)) if not ignore[i]]
    dont = [i for i in range(len(gt_polys)) if ignore[i]]
    kept = []
    for j, d in enumerate(det_polys):
        area = polygon_area(d)
        if area <= 0:
            continue
        if any(convex_intersection_area(d, gt_polys[i]) / area > DONT_CARE_SHARE for i in dont):
            continue
        kept.append(j)
    pairs = []
    for j in kept:
        for i in care:
            v = convex_iou(det_polys[j], gt_polys[i])
            if v > iou:
                pairs.append((v, j, i))
    pairs.sort(reverse=True)
    used_d, used_g = set(), set()
    for _, j, i in pairs:
        if j not in used_d and i not in used_g:
            used_d.add(j)
            used_g.add(i)
    return DetCounts(len(used_d), len(kept), len(care))


def char_counts(read: str, truth: list[str]) -> tuple[int, int, int]:
    """End to end, order-free: ``(common, read, truth)`` character counts of one image,
    whitespace left out, NFKC on both sides. The detector and the recognizer are judged
    together: a line missed loses its characters' recall, a false line costs precision."""
    import unicodedata
    from collections import Counter

    def chars(text: str) -> Counter[str]:
        return Counter(c for c in unicodedata.normalize("NFKC", text) if not c.isspace())

    r, t = chars(read), chars("".join(truth))
    return sum((r & t).values()), sum(r.values()), sum(t.values())


def f1_of(common: int, read: int, truth: int) -> dict[str, float]:
    p = common / read if read else 0.0
    r = common / truth if truth else 0.0
    return {"char_precision": p, "char_recall": r, "char_f1": 2 * p * r / (p + r) if p + r else 0.0}
