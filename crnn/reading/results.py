"""The one result builder: a read page as the JSON that ``crnn-predict`` writes and
``crnn-serve`` answers with, so a served page and a predicted one are the same fields."""

from __future__ import annotations

from typing import Any


def page_result(
    page: Any, path: str = "", rotate: bool = False, floor: float | None = None
) -> dict[str, Any]:
    """A read :class:`~crnn.layout.Page` as the JSON every front end writes (``crnn-predict
    --format json``, ``crnn-serve``'s results, ``--output`` lines): ``path`` (a PDF page's
    ``doc.pdf#page=N`` also gives ``"page"``), text, confidence, layout, lines, and for an
    image read as one line its ``char_confidences`` (and ``rotation``: always with
    ``rotate``, else where it turned); ``floor``: reads below this confidence are marked
    ``"uncertain"``."""
    from crnn.data.pdf import split_ref

    out = page.to_dict(path)
    if page.layout == "line" and page.lines and page.lines[0].rotation:
        out["rotation"] = page.lines[0].rotation
    ref = split_ref(path)
    if ref is not None:
        out["page"] = ref[1]
    if page.layout == "line" and page.lines:
        line = page.lines[0]
        out["char_confidences"] = [round(c, 6) for c in line.char_confidences]
        if rotate:
            out["rotation"] = line.rotation
    if floor is not None:
        for line, d in zip(page.lines, out["lines"]):
            d["uncertain"] = line.confidence < floor
        out["uncertain"] = page.confidence < floor
    return out
