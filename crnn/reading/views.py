"""Which reads the :class:`crnn.reading.recognizer.Recognizer` makes of each image, and the margins
that choose among them: its turns (``rotate``), widths (``stretch``), zooms (``zoom``) and
a leaning crop sheared upright (``deslant``), each read a :data:`View`; an image's reads
travel as a :class:`Turns`. Numbers only, no model: the Recognizer (``crnn.reading.recognizer``) and
its page methods (``crnn.reading.planner``) read by them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

# Clockwise turns tried by rotate="auto", in the order preprocess() returns them.
ROTATIONS = (0, 180, 90, 270)
# A turn of an image is kept only when its text is more probable by this many nats: with
# rotate="pages" (tall crops tried sideways), at 0 IC13 and IIIT5K lost 2 and 3 exact
# reads; at 2 every real set reads as well or better, IC15 3,539 -> 3,558 exact.
ROTATE_MARGIN = 2.0
# A quarter turn of a tall crop with at least twice the frames of the crop squeezed as
# given (whose few frames sum to a more probable short read: a word on its side read as
# "s") is kept when its text's log-probability per frame beats the as-given read's by this
# many nats, and by ROTATE_MARGIN over its frames. On the crops of ../shared/data turned on
# their side, exact reads against the summed margin: IC13 531 -> 631 of 851, SVT 357 ->
# 411 of 635, IIIT5K 1,377 -> 1,564 of 1,876, IC15 2,626 -> 3,102 of 4,094; their upright
# tall crops as well or better (IC15 165 -> 174 of 345 exact, 547 -> 527 edits; SVT one
# edit fewer). Near-square crops (one Chinese character) keep the summed margin: per frame,
# zh_real_dev lost 3 single characters.
QUARTER_MARGIN = 0.2
# The widths (times a line's natural width) a model that writes Chinese reads each line at
# by default, keeping the more confident read. The bundled crnn_zh on the development
# sets, CER as given -> with 1.1 too: Kai 3.18 -> 2.78 %, Ming 0.94 -> 0.82 %, photograph-
# like 21.93 -> 21.69 %, real photographs 24.87 -> 24.21 % (docs/training/crnn_zh.md).
CJK_STRETCH = (1.0, 1.1)
# The widths a line the detector found on a whole image is read at where the reader's are
# the default: its natural width alone (both zooms kept). On the detector's 82 validation
# web images (a development set, 2-core EPYC, one machine), char F1 and seconds an image:
# both widths and zooms 68.2 % at 0.73 s, natural width with both zooms 67.9 % at 0.56 s,
# both widths at zoom 1 67.7 % at 0.56 s, one view 67.1 % at 0.53 s; the second width
# bought 0.3 points for a third of the image's time.
DETECTED_STRETCH = (1.0,)
# The zooms (the line's central 1/z of its height read, enlarged z times both ways) a model
# that writes Chinese reads each line at by default, at each width of CJK_STRETCH, keeping
# the most confident read: many photographed lines sit in looser boxes than the generator
# draws. The bundled crnn_zh on the development sets through crnn-predict (at both widths),
# CER at 1.0 -> with 1.2 too: Kai 2.78 -> 2.33 %, Ming 0.82 % both, photograph-like 21.69
# -> 20.86 %, real photographs 24.21 -> 23.59 %, columns 0.98 -> 1.02 % (one edit), pages
# 3.71 -> 3.54 % (docs/training/crnn_zh.md, "Reading zoomed in").
CJK_ZOOM = (1.0, 1.2)
# A crop whose writing leans at least this many degrees (crnn.layout.slant.lean_of: italic
# and oblique display faces, signs seen at an angle) is also read sheared upright, at every
# width and zoom, keeping the most confident read; a model that writes Chinese does so by
# default. The bundled crnn_zh on the development sets through crnn-predict, CER before ->
# after: real photographs 23.59 -> 22.52 % (80 of 420 crops lean 8 degrees or more),
# photograph-like 20.86 -> 20.67 %, the other rows unchanged; 6 and 10 degrees read the
# real photographs at 22.57 % (docs/reading.md). The English word model loses (IC13 691 ->
# 690 exact of 857, SVT 440 -> 437 of 647), so others read as given.
CJK_DESLANT = 8.0
# A detected line is measured for its lean (and read sheared upright where it leans) only
# from this height (px, as cut): below the recognizer's 32-px input its strokes are too
# few pixels to measure (the measure resamples a line to 48 rows), and most of the small
# print of a web image measured as leaning (median 16 px high: 148 of 519 detected lines
# on 30 validation web images, a fifth of them at the 20-degree edge of the range tried).
DETECTED_LEAN_MIN_HEIGHT = 32
# A line whose read as given (natural width, whole height, not sheared) is at least this
# confident keeps it: its other views (the second width, the zoom, the shear upright) are
# not read. On the 1,439 lines of the development sets (569 web-image lines, the 420 real
# photographs of zh_real_dev, 150 each of Ming, Kai and photograph-like print), with the
# bundled crnn_zh-e1c35400, every text read exactly as with every view at 0.9, and 309 of
# the lines (21 %; 30 % of the web lines) were read once; at 0.8, 418 lines, and one Ming
# line lost an edit; at 0.5, 634 lines and 5 more edits in all. At 0.7 (through
# crnn-predict, 2026-12-08) one Ming line lost an edit and one photograph gained one, every
# other line read the same, and the rows took 17-35 % less time than at 0.9 (Ming 52.5 ->
# 33.9 ms a line, Kai 57.2 -> 43.9, photograph-like 53.6 -> 41.9, web lines 26.9 -> 22.4),
# the real photographs, most of whose time is planning, alike (docs/reading.md).
VIEW_SURE = 0.7


# A read's (stretch, zoom, lean): its width and zoom, and the lean (degrees) its crop was
# sheared upright from (0: not sheared).
View = tuple[float, float, float]
AS_GIVEN: View = (1.0, 1.0, 0.0)  # the line as given


def factors(given: Sequence[float], low: float, high: float, rule: str) -> tuple[float, ...]:
    """A reader's ``stretch`` or ``zoom``: each factor once, in order, all within
    ``[low, high]``; else ValueError with ``rule``."""
    out = tuple(dict.fromkeys(float(x) for x in given))
    if not out or not all(low <= x <= high for x in out):
        raise ValueError(f"{rule}, got {given!r}")
    return out


class Turns(tuple):  # type: ignore[type-arg]
    """An image's preprocessed reads (the first as given): which clockwise turn in degrees
    each is (``turns``) and its :data:`View`, ``(stretch, zoom, lean)`` (``views``)."""

    turns: tuple[int, ...]
    views: tuple[View, ...]

    def __new__(
        cls, items: Any, turns: Sequence[int], views: Sequence[View] | None = None
    ) -> Turns:
        self = super().__new__(cls, items)
        self.turns = tuple(turns)
        self.views = (AS_GIVEN,) * len(self.turns) if views is None else tuple(views)
        return self
