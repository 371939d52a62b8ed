"""Detection labels as users have them: line quadrilaterals with their transcripts.

Two layouts are read, both into :class:`LabelledImage`:

- ICDAR 2015 / RCTW / MTWI text files, one per image: ``x1,y1,x2,y2,x3,y3,x4,y4,text``,
  the corners in any order, the text everything after the eighth comma (commas inside it
  kept), ``###`` an illegible line (a "don't care" region). A UTF-8 byte-order mark, CRLF
  line ends and ICDAR 2015's trailing spaces are accepted.
- PaddleOCR's ``Label.txt``: ``image_path<TAB>[{"transcription": ..., "points": [[x, y],
  ...]}, ...]``, one line per image (``"###"`` or ``"difficult": true`` = don't care).

Corners come back clockwise from the top-left one (in image coordinates, y down). Boxes
that cannot be used are never kept silently: each is named in :attr:`LabelledImage.problems`
and counted by kind (:data:`PROBLEMS`); a self-crossing quadrilateral whose corners were
merely listed out of order is put in order, which is no problem.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from crnn.data.errors import DataError

DONT_CARE = "###"
# What a box can be wrong with, as counted in LabelledImage.problems.
PROBLEMS = {
    "unparsable": "not 8 numbers and a text",
    "not finite": "a corner is NaN or infinite",
    "degenerate": "area under 1 px² (corners on one line or on one point)",
    "outside": "lies wholly outside the image",
    "clipped": "reaches outside the image: cut to the image",
    "self-crossing": "edges cross in every corner order",
}
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".webp", ".tif", ".tiff", ".gif")


@dataclass
class LabelledImage:
    """One image's lines: ``quads`` ``(N, 4, 2)`` float32 pixels (clockwise from the
    top-left corner), ``texts`` (N,), ``ignore`` (N,) bool (don't care).

    ``problems`` names each box that was dropped or changed, as ``(line number, kind)``.
    """

    image: Path
    quads: np.ndarray
    texts: list[str]
    ignore: np.ndarray
    problems: list[tuple[int, str]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.texts)


def order_corners(quad: np.ndarray) -> np.ndarray | None:
    """Four corners ``(4, 2)`` clockwise from the top-left, or None when no order of
    them makes a simple (non-self-crossing) quadrilateral of area >= 1 px².

    The listed order is kept when it is simple (a concave box stays as drawn); else the
    corners are sorted by angle around their centre, the usual fix for labels whose
    corners come in any order.
    """
    q = np.asarray(quad, dtype=np.float64).reshape(4, 2)
    if not _is_simple(q):
        centre = q.mean(axis=0)
        q = q[np.argsort(np.arctan2(q[:, 1] - centre[1], q[:, 0] - centre[0]))]
        if not _is_simple(q):
            return None
    if _signed_area(q) < 0:  # counter-clockwise on screen (y down): reverse
        q = q[::-1]
    if abs(_signed_area(q)) < 1.0:
        return None
    # Start at the corner nearest the top-left of the box's bounds (ties: the top one).
    lo = q.min(axis=0)
    start = int(np.argmin(((q - lo) ** 2).sum(axis=1) + 1e-6 * q[:, 1]))
    return np.roll(q, -start, axis=0).astype(np.float32)


def _signed_area(q: np.ndarray) -> float:
    x, y = q[:, 0], q[:, 1]
    return 0.5 * float(np.dot(x, np.roll(y, -1)) - np.dot(np.roll(x, -1), y))


def _crosses(a: np.ndarray, b: np.ndarray, c: np.ndarray, d: np.ndarray) -> bool:
    """Segments ab and cd cross at a point inside both."""

    def side(p: np.ndarray, q: np.ndarray, r: np.ndarray) -> float:
        return float((q[0] - p[0]) * (r[1] - p[1]) - (q[1] - p[1]) * (r[0] - p[0]))

    d1, d2 = side(c, d, a), side(c, d, b)
    d3, d4 = side(a, b, c), side(a, b, d)
    return d1 * d2 < 0 and d3 * d4 < 0


def _is_simple(q: np.ndarray) -> bool:
    # A quadrilateral is simple unless one pair of opposite edges crosses.
    return not (_crosses(q[0], q[1], q[2], q[3]) or _crosses(q[1], q[2], q[3], q[0]))


def check_box(
    numbers: Iterable[float], size: tuple[int, int] | None
) -> tuple[np.ndarray | None, str | None]:
    """A quadrilateral from 8 numbers, checked: ``(corners, None)``, ``(corners,
    "clipped")`` or ``(None, problem)``. ``size`` is ``(width, height)`` when known."""
    q = np.asarray(list(numbers), dtype=np.float64)
    if q.shape != (8,):
        return None, "unparsable"
    if not np.isfinite(q).all():
        return None, "not finite"
    q = q.reshape(4, 2)
    ordered = order_corners(q)
    if ordered is None:
        area = abs(_signed_area(q))
        return None, "degenerate" if area < 1.0 or _collinear(q) else "self-crossing"
    problem = None
    if size is not None:
        w, h = size
        if (
            ordered[:, 0].max() <= 0
            or ordered[:, 1].max() <= 0
            or ordered[:, 0].min() >= w
            or ordered[:, 1].min() >= h
        ):
            return None, "outside"
        tol = 1.0  # labels often put the last pixel's far edge on the border
        if (
            (ordered < -tol).any()
            or (ordered[:, 0] > w + tol).any()
            or (ordered[:, 1] > h + tol).any()
        ):
            problem = "clipped"
        ordered = np.stack([ordered[:, 0].clip(0, w), ordered[:, 1].clip(0, h)], axis=1)
        ordered = order_corners(ordered)
        if ordered is None:
            return None, "degenerate"
    return ordered.astype(np.float32), problem


def _collinear(q: np.ndarray) -> bool:
    span = q.max(axis=0) - q.min(axis=0)
    return bool(span.min() < 1.0)


def parse_icdar_line(line: str) -> tuple[list[float], str] | None:
    """``x1,y1,...,x4,y4,text`` -> (8 numbers, text), or None when it is not that."""
    parts = line.split(",", 8)
    if len(parts) < 8:
        return None
    try:
        numbers = [float(p) for p in parts[:8]]
    except ValueError:
        return None
    text = parts[8].strip() if len(parts) == 9 else ""
    return numbers, text


def read_icdar(label_file: Path, image: Path, size: tuple[int, int] | None = None) -> LabelledImage:
    """One ICDAR/MTWI label file (see the module docstring). ``size`` = the image's
    ``(width, height)`` for the outside-the-image checks (read from the image when None)."""
    if size is None:
        size = image_size(image)
    rows = label_file.read_text(encoding="utf-8-sig", errors="replace").splitlines()
    entries = []
    for n, row in enumerate(rows, 1):
        if not row.strip():
            continue
        parsed = parse_icdar_line(row)
        entries.append((n, parsed))
    return _collect(image, entries, size)


def read_paddle_label(label_file: Path, root: Path | None = None) -> list[LabelledImage]:
    """PaddleOCR's ``Label.txt``: one :class:`LabelledImage` per line. Image paths are
    relative to ``root`` (default: the folder above the label file's, as PPOCRLabel
    writes ``folder/image.jpg``; the label file's own folder is tried too)."""
    base = root if root is not None else label_file.parent.parent
    out = []
    for n, row in enumerate(label_file.read_text(encoding="utf-8-sig").splitlines(), 1):
        if not row.strip():
            continue
        name, sep, payload = row.partition("\t")
        if not sep:
            raise DataError(
                f"{label_file}:{n}: expected 'image_path<TAB>[{{...}}]' (PaddleOCR's Label.txt), "
                f"got {row[:80]!r}"
            )
        try:
            boxes = json.loads(payload)
        except json.JSONDecodeError as e:
            raise DataError(f"{label_file}:{n}: the boxes are not JSON ({e})") from e
        image = base / name
        if not image.exists() and (label_file.parent / Path(name).name).exists():
            image = label_file.parent / Path(name).name
        entries = []
        for b in boxes:
            try:
                pts = [float(v) for p in b["points"] for v in p]
                text = str(b.get("transcription", ""))
                if b.get("difficult"):
                    text = DONT_CARE
            except (KeyError, TypeError, ValueError):
                entries.append((n, None))
                continue
            if len(pts) != 8:  # a polygon of other than 4 points: its bounding quad
                arr = np.asarray(pts).reshape(-1, 2)
                if len(arr) < 3:
                    entries.append((n, None))
                    continue
                pts = _min_area_quad(arr).reshape(-1).tolist()
            entries.append((n, (pts, text)))
        out.append(_collect(image, entries, image_size(image) if image.exists() else None))
    return out


def _min_area_quad(points: np.ndarray) -> np.ndarray:
    import cv2

    return cv2.boxPoints(cv2.minAreaRect(points.astype(np.float32)))


def _collect(
    image: Path,
    entries: list[tuple[int, tuple[list[float], str] | None]],
    size: tuple[int, int] | None,
) -> LabelledImage:
    quads, texts, ignore, problems = [], [], [], []
    for n, parsed in entries:
        if parsed is None:
            problems.append((n, "unparsable"))
            continue
        numbers, text = parsed
        quad, problem = check_box(numbers, size)
        if problem is not None:
            problems.append((n, problem))
        if quad is None:
            continue
        quads.append(quad)
        texts.append(text)
        ignore.append(text == DONT_CARE or text == "")
    arr = np.stack(quads) if quads else np.zeros((0, 4, 2), np.float32)
    return LabelledImage(image, arr, texts, np.asarray(ignore, dtype=bool), problems)


def image_size(path: Path) -> tuple[int, int]:
    """``(width, height)`` of an image file, read from its header."""
    from PIL import Image

    try:
        with Image.open(path) as im:
            return im.size
    except (OSError, ValueError) as e:
        raise DataError(f"{path}: not a readable image ({e})") from e


def find_labelled(folder: str | Path) -> list[LabelledImage]:
    """A labelled detection set from a folder, in whichever layout it holds:

    - ``images/`` + ``labels/NAME.txt`` (this project's and MTWI's layout), or
      ``gt_NAME.txt`` beside the images (ICDAR 2015's);
    - a ``Label.txt`` (PaddleOCR).
    """
    root = Path(folder)
    if (root / "Label.txt").is_file():
        return read_paddle_label(root / "Label.txt", root.parent)
    images_dir = root / "images" if (root / "images").is_dir() else root
    labels_dir = root / "labels" if (root / "labels").is_dir() else root
    images = sorted(p for p in images_dir.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
    if not images:
        raise DataError(
            f"{root}: no images found; expected images/ with labels/NAME.txt, ICDAR's "
            "gt_NAME.txt beside the images, or a PaddleOCR Label.txt"
        )
    out = []
    for image in images:
        for label in (labels_dir / f"{image.stem}.txt", labels_dir / f"gt_{image.stem}.txt"):
            if label.is_file():
                out.append(read_icdar(label, image))
                break
    if not out:
        raise DataError(
            f"{root}: {len(images)} images but no label files beside them "
            "(expected labels/NAME.txt or gt_NAME.txt)"
        )
    return out


def count_problems(sets: Iterable[LabelledImage]) -> Counter[str]:
    """How many boxes of each problem kind the images' labels had."""
    c: Counter[str] = Counter()
    for s in sets:
        c.update(kind for _, kind in s.problems)
    return c


def describe_problems(counts: Counter[str]) -> str:
    """One line: ``3 boxes degenerate (area under 1 px² ...), 1 clipped (...)``."""
    return ", ".join(f"{n} {kind} ({PROBLEMS[kind]})" for kind, n in counts.most_common())


def split_by_image(
    items: list[LabelledImage], val_share: float, seed: int = 0
) -> tuple[list[LabelledImage], list[LabelledImage]]:
    """A stable split by image: each image's side depends on its file name alone, so
    adding images never moves one from training to validation."""
    import hashlib

    def side(item: LabelledImage) -> float:
        h = hashlib.sha256(f"{seed}:{item.image.name}".encode()).digest()
        return int.from_bytes(h[:8], "big") / 2**64

    train = [i for i in items if side(i) >= val_share]
    val = [i for i in items if side(i) < val_share]
    return train, val


def iter_lines(items: Iterable[LabelledImage]) -> Iterator[tuple[LabelledImage, int]]:
    """Every legible line, as (image, index)."""
    for item in items:
        for i in range(len(item)):
            if not item.ignore[i]:
                yield item, i


def quad_size(quad: np.ndarray) -> tuple[float, float]:
    """A quadrilateral's (width, height): the mean lengths of its top/bottom and
    left/right edges."""
    q = np.asarray(quad, dtype=np.float64)
    w = (math.dist(q[0], q[1]) + math.dist(q[3], q[2])) / 2
    h = (math.dist(q[0], q[3]) + math.dist(q[1], q[2])) / 2
    return w, h
