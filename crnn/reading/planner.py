"""Reading whole images as pages: the page planner a
:class:`~crnn.reading.recognizer.Recognizer` reads pages with (``Recognizer.planner``).

``plan_page`` decides how one image is read: one line (a crop, with its turns), a page of
lines found by ``crnn.layout.lines`` (in reading order, turned over when it reads more
probably upside down), one vertical column of Chinese characters, or a page of such
columns (``crnn.layout.vertical``); ``read_pages`` batches the planned lines of many
images together by width. Imports nothing of the training engine.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import cv2
import numpy as np
from PIL import Image

from crnn.data.image import ImageSource, ImageTooWideError, load_image, preprocess_array
from crnn.reading.views import DETECTED_LEAN_MIN_HEIGHT

if TYPE_CHECKING:
    from crnn.ctc.decode import Prediction
    from crnn.layout import Page

log = logging.getLogger("crnn.reading.recognizer")

# Auto finder: a picture the classical finder sees no page in goes to the detector first.
FIRST_LOOK = True
# A detected line whose characters the recognizer is this sure of on average, or less, is
# no text (a pattern, a picture's edge): left out, as PaddleOCR's drop_score leaves out its
# reads under 0.5. On the detector's 82 validation web images (a development set, every
# picture sent to the detector first): char F1 61.2 % keeping every line, 62.6 % at 0.5,
# 62.5 % at 0.6, 58.5 % at 0.8.
DROP_MEAN_CONFIDENCE = 0.5


def reads_as_text(line: Any) -> bool:
    """Whether a detected line's read is text: something read, its characters' mean
    confidence over :data:`DROP_MEAN_CONFIDENCE`."""
    conf = line.char_confidences
    return bool(line.text.strip()) and bool(conf) and sum(conf) / len(conf) > DROP_MEAN_CONFIDENCE


class PagePlanner:
    """How a :class:`~crnn.reading.recognizer.Recognizer` (``reader``) reads whole images:
    the page decisions (a line or a page, the learned detector or the classical finder,
    vertical, sideways, upside down) and the reading of their lines through the reader's
    views and Decoder. Holds nothing but its reader: ``Recognizer.planner`` makes one on
    each use, so a copied reader (the server's, per request) plans with itself."""

    def __init__(self, reader: Any) -> None:
        self.reader = reader

    def read_pages(
        self, images: Sequence[ImageSource], layout: str = "auto", errors: str = "raise"
    ) -> list[Any]:
        """Each image as a :class:`~crnn.layout.Page`: its text lines found (printed
        pages, screenshots, slides, receipts; ``crnn.layout.lines``), read at their own
        widths and put in reading order. ``layout``: ``"page"`` always finds lines,
        ``"line"`` reads each image whole, ``"auto"`` finds lines in an image that holds
        several and reads a line or word whole (and one it cannot place whole, with a
        warning and a ``note``). The lines of all the images are batched together by
        width. An image that is not readable raises ``ImageDecodeError``, or with
        ``errors="return"`` is given that error in place of its page."""
        return list(self.read_rounds(images, layout, errors))

    def read_rounds(
        self,
        images: Iterable[Any],
        layout: str = "auto",
        errors: str = "raise",
        round_lines: int = 0,
        round_pages: int = 0,
    ) -> Iterator[Any]:
        """:meth:`read_pages`, in rounds, lazily: each image's page in order, the images
        planned until their lines reach ``round_lines`` (or ``round_pages`` images are
        planned; 0: no bound), then those lines read together, batched by width. An
        exception or a :class:`~crnn.layout.Page` given in place of an image (a file that
        could not be opened, a PDF page's text layer) is passed through as its page."""
        from crnn.data.image import ImageDecodeError
        from crnn.layout import Page

        pages: list[Any] = []
        jobs: list[tuple[int, Any, int | None, list[int]]] = []  # (page, pixels, width, box)
        planned = 0
        for image in images:
            if isinstance(image, (Exception, Page)):
                pages.append(image)
                continue
            try:
                page, lines = self.plan_page(image, layout)
            except ImageDecodeError as e:
                if errors != "return":
                    raise
                pages.append(e)
                continue
            jobs.extend((len(pages), *job) for job in lines)
            pages.append(page)
            planned += 1
            if (round_lines and len(jobs) >= round_lines) or (
                round_pages and planned >= round_pages
            ):
                yield from self.read_planned(pages, jobs)
                pages, jobs, planned = [], [], 0
        yield from self.read_planned(pages, jobs)

    def read_planned(
        self, pages: list[Any], jobs: list[tuple[int, Any, int | None, list[int]]]
    ) -> list[Any]:
        """The second half of :meth:`read_pages`: the planned lines of ``pages`` (what
        :meth:`plan_page` gave for each, as ``(page index, pixels, real width, box)``)
        read together, batched by width, and put on their pages, which are returned
        (an exception in place of a page is passed through). The server plans a request's
        image and then reads its lines here, through a backend that batches them with
        other requests' lines."""
        from crnn.layout import Line, Page

        # Lines the detector found are read at its views (Recognizer.detected_views).
        found = [isinstance(pages[j[0]], Page) and pages[j[0]].finder == "detector" for j in jobs]
        preds: list[Any] = [None] * len(jobs)
        for detected, views in ((False, None), (True, self.reader.detected_views)):
            at = [i for i, f in enumerate(found) if f == detected]
            if not at:
                continue
            read = self.reader.predict_preprocessed(
                [jobs[i][1] for i in at], [jobs[i][2] for i in at], views=views
            )
            for i, p in zip(at, read):
                preds[i] = p
        for (k, item, width, box), p in zip(jobs, preds):
            page = pages[k]
            i = len(page.lines)
            place = page.placements[i]  # the lines' places, in the jobs' order
            p = self.reader.locate(p, item, place.size, width, place)
            quad = tuple(map(tuple, page.quads[i])) if page.quads else ()
            page.lines.append(
                Line(p.text, p.confidence, box, p.char_confidences, p.rotation, p.char_boxes, quad)
            )
        for page in pages:  # a detected line that reads as nothing, or as noise, is no line
            if isinstance(page, Page) and page.finder == "detector":
                page.lines = [line for line in page.lines if reads_as_text(line)]
        return pages

    def plan_page(
        self, image: ImageSource, layout: str = "auto"
    ) -> tuple[Page, list[tuple[Any, int | None, list[int]]]]:
        """How :meth:`read_pages` reads one image: its :class:`~crnn.layout.Page` (no lines
        read yet) and, per line to read, ``(pixels, real width, box)``: the preprocessed
        line padded to a multiple of :data:`PAGE_WIDTH_STEP` px (width None: an image
        read whole, as :meth:`preprocess` gives it). Raises ``ImageDecodeError``."""
        from crnn.layout import Page, choose_layout, find_lines
        from crnn.layout.page import LINE_MAX_HEIGHT, lone_line

        if layout not in ("auto", "page", "line"):
            raise ValueError(f"layout={layout!r}: expected 'auto', 'page' or 'line'")
        detector = getattr(self.reader, "detector", None)
        finder = getattr(self.reader, "finder", "auto")
        # Decoded once: the line finder reads it grey, the detector in colour, the
        # recognizer in its own mode.
        img = load_image(
            image, rgb=self.reader.spec.rgb or (detector is not None and finder != "classical")
        )
        grey = np.asarray(img.convert("L") if img.mode != "L" else img)
        h, w = grey.shape
        rgb = img
        found_once: list[Any] = []  # the detector's plan of this image, asked for once
        reads = _Reads(self)  # the checks' reads of this image's lines, each made once

        def detected() -> Any:
            if not found_once:
                found_once.append(self._detected(rgb, detector))
            return found_once[0]

        if (
            detector is not None
            and finder == "detector"
            and layout != "line"
            and h > LINE_MAX_HEIGHT
        ):
            planned = detected()
            if planned is not None:
                return planned
        if img.mode == "RGB" and not self.reader.spec.rgb:
            img = img.convert("L")
        laid_out = None
        if layout == "auto" and detector is not None and finder == "auto" and FIRST_LOOK:
            from crnn.detect.choice import finds_more, is_picture, prefers_detector

            # A picture (photograph, product or web image) the classical finder would read
            # whole, seeing no page of print in it: the detector's, before the classical
            # column check and the rest. The classical finder looks at it halved first
            # (a quarter of the pixels), where its print stays large enough there to judge
            # (FIRST_LOOK_MIN_CHAR); a page candidate halved, or nothing the detector
            # finds, is looked at whole, as before.
            if is_picture(grey):
                half = _half_look(grey)
                if half is not None and half[0] == "line" and prefers_detector(grey, half[2]):
                    planned = detected()
                    if planned is not None:
                        return planned
                laid_out = choose_layout(grey, layout)
                # A page candidate of the classical finder's only where the detector
                # finds text that it left out (a printed page, a photo on it included,
                # stays its own: the detector splits a line at wide word gaps).
                if prefers_detector(grey, laid_out[2]):
                    planned = detected()
                    if planned is not None and (
                        laid_out[0] == "line"
                        or finds_more([job[2] for job in planned[1]], laid_out[2])
                    ):
                        return planned
        if layout == "auto":
            column = self._vertical(img, grey)
            if column is not None:
                return column
        if laid_out is None and layout == "auto" and LINE_HALF_LOOK and _line_shaped(grey):
            # A line crop, large enough that the classical finder can judge it halved: where
            # it finds one line there (no page, no lone line on a larger ground), read whole.
            half = _half_look(grey, LINE_LOOK_HEIGHT)
            # (lone_line against the height looked at: the finder's page is the image it
            # was given, at its size.)
            if (
                half is not None
                and half[0] == "line"
                and lone_line(half[2], half[2].page.shape[0]) is None
            ):
                _say(image, half[1])
                return self._whole(img, grey, half[1])
        choice, note, found = laid_out or choose_layout(grey, layout)
        # Other ways to read a page, each kept only when it reads more probably than the
        # rows as given: on its side, and (Chinese) in columns; both: the more probable.
        rows = found if choice == "page" else None
        vertical = None
        cjk_page = found is not None and self._writes_cjk and min(h, w) > 2 * found.char_height
        # A line crop (the finder's "line", LINE_CROP_ASPECT times as wide as high or more)
        # is taken for neither a page of columns nor a page on its side: not looked at so.
        line_crop = choice == "line" and w >= LINE_CROP_ASPECT * h
        if layout != "line" and cjk_page and not line_crop:
            vertical = self._vertical_page(img, grey, reads, rows)
        # Columns may also be a page's lines on their side (their characters lying down read
        # as columns more probably than the rows across them): then it is tried on its side.
        others = []
        if (
            layout != "line"
            and not line_crop
            and self.reader.rotate != "none"
            and found is not None
            and (_maybe_sideways(found, h, w) or vertical is not None)
        ):
            others.append(self._sideways(img, grey, reads, rows))
        others = [o for o in (*others, vertical) if o is not None]
        if others:
            return (
                others[0]
                if len(others) == 1 or self._reads_better(others[0][1], others[1][1], reads)
                else others[1]
            )
        _say(image, note)
        lines, turn, places = [], 0, []
        if choice == "page" and found is not None:
            lines, places = self._page_lines(found, (w, h))
            # Page or line first, as given; then, for a page, which way up.
            if layout == "auto" and not self._reads_better_as_page(img, lines, reads):
                lines = []
            if (
                lines
                and detector is not None
                and finder == "auto"
                and layout == "auto"
                and _picture_shaped(grey)
                and self._reads_poorly(lines, reads)
            ):
                # A picture the classical finder took for a page of print whose lines read
                # poorly (a poster's rows cut across its text blocks): the detector's
                # lines where they read more probably.
                planned = detected()
                if planned is not None and self._reads_better(planned[1], lines, reads):
                    return planned
            if (
                lines and self.reader.rotate != "none" and self._upside_down(lines)
            ):  # read it turned over
                turn, found = 180, find_lines(np.ascontiguousarray(grey[::-1, ::-1]))
                lines, places = self._page_lines(found, (w, h), turn)
                lines = [(a, wd, [w - b[2], h - b[3], w - b[0], h - b[1]]) for a, wd, b in lines]
        if not lines and detector is not None and finder == "auto" and layout == "auto":
            from crnn.detect.choice import prefers_detector

            # What the classical finder would read whole, as one line: a picture's lines
            # are the detector's, unless the image is shaped like a line crop.
            if prefers_detector(grey, found):
                planned = detected()
                if planned is not None:
                    return planned
        if not lines and layout == "auto" and found is not None and choice == "line":
            # One small line on a larger image: cut out and read, if it reads better so.
            lone = lone_line(found, h)
            if lone is not None:
                lines, places = self._page_lines(lone, (w, h))
                if not self._reads_better_as_page(img, lines, reads):
                    lines = []
        if not lines and detector is not None and finder == "auto" and layout == "auto":
            from crnn.detect.choice import SMALL_PICTURE_LINES, is_small_picture

            # A small picture (a photographed sign): its detected lines where they are
            # several and read more probably than the image read whole.
            if is_small_picture(grey):
                planned = detected()
                if (
                    planned is not None
                    and len(planned[1]) >= SMALL_PICTURE_LINES
                    and self._reads_better_as_page(img, planned[1], reads)
                ):
                    return planned
        if not lines:
            return self._whole(img, grey, note)
        return Page([], "page", found.angle, note, rotation=turn, placements=places), lines

    def _whole(
        self, img: Any, grey: np.ndarray, note: str
    ) -> tuple[Page, list[tuple[Any, int | None, list[int]]]]:
        """The image read whole, as :meth:`predict` reads it (rotations included), its flat
        margins trimmed; ``note``: why no line was found, if none was."""
        from crnn.layout import Page
        from crnn.layout.chars import Placement
        from crnn.layout.page import flat_margins_trimmed

        h, w = grey.shape
        box = flat_margins_trimmed(grey) or (0, 0, w, h)
        cut = img if box == (0, 0, w, h) else img.crop(box)
        whole = [Placement(tuple(float(v) for v in box), (w, h))]
        return Page([], "line", 0.0, note, placements=whole), [
            (self.reader.preprocess(cut), None, list(box))
        ]

    def _detected(
        self, img: Any, detector: Any
    ) -> tuple[Page, list[tuple[Any, int | None, list[int]]]] | None:
        """The lines the detector (``crnn.detect.runtime``) finds, in reading order, each
        cut perspective-corrected from its quadrilateral; a column of Chinese is cut into
        its characters and read as a line (``crnn.layout.vertical``), another upright
        line turned a quarter. None when it finds no line, or one line that fills the
        image (a crop: read whole as before)."""
        from crnn.detect.order import cut_line, is_column
        from crnn.layout import Page
        from crnn.layout.chars import Placement
        from crnn.layout.vertical import looks_vertical, stack_cells

        rgb = np.asarray(img.convert("RGB"))
        h, w = rgb.shape[:2]
        found = detector.find(rgb)
        if not found:
            return None
        if is_crop(found, (w, h)):
            return None
        jobs, places, quads = [], [], []
        columns = 0  # lines read as columns of Chinese, top to bottom
        cuts: list[tuple[Any, Any, bool]] = []  # (line, its source image, read as a column)
        for d in found:
            stacked = False
            cut = cut_line(rgb, d.quad)
            grey = np.asarray(Image.fromarray(cut).convert("L"))
            source: Any = Image.fromarray(cut) if self.reader.spec.rgb else Image.fromarray(grey)
            if is_column(d.quad):
                maybe, cells, ink = looks_vertical(grey) if self._writes_cjk else (False, [], None)
                if maybe and cells:
                    source, _ = stack_cells(grey, cells, ink)
                    stacked = True
                else:
                    source = Image.fromarray(np.ascontiguousarray(np.rot90(np.asarray(source))))
            cuts.append((d, source, stacked))
        for d, source, stacked in self._turned_over(cuts):
            # A line whose writing leans (italic display faces: a poster's headline) is
            # also read sheared upright, as a leaning crop is (the reader's deslant).
            measured = not stacked and source.height >= DETECTED_LEAN_MIN_HEIGHT
            lean = self.reader.lean(source) if measured else 0.0
            try:
                if lean:
                    base = [(0, source, 0.0)]
                    viewed = self.reader.viewed(base, self.reader.detected_views, lean)
                    job = (viewed, viewed[0].shape[-1])  # unpadded, each read its own width
                else:
                    arr = preprocess_array(source, self.reader.spec)
                    job = (_pad_to(arr, PAGE_WIDTH_STEP), arr.shape[-1])
            except ImageTooWideError:  # wider than the recognizer reads: no line
                continue
            x0, y0 = (float(v) for v in d.quad.min(axis=0))
            x1, y1 = (float(v) for v in d.quad.max(axis=0))
            box = [int(x0), int(y0), int(np.ceil(x1)), int(np.ceil(y1))]
            jobs.append((*job, box))
            places.append(Placement((x0, y0, x1, y1), (w, h)))
            quads.append(d.quad)
            columns += stacked
        if not jobs:
            return None
        # A page of columns (every line found upright and read top to bottom) says so,
        # as the classical finder's column pages do.
        direction = "ttb" if columns == len(jobs) else "ltr"
        page = Page(
            [], "page", 0.0, direction=direction, placements=places, quads=quads, finder="detector"
        )
        return page, jobs

    def _turned_over(self, cuts: list[tuple[Any, Any, bool]]) -> list[tuple[Any, Any, bool]]:
        """Detected lines (``(line, source image, read as a column)``) with those written
        upside down turned over: a line (not a column) that the orientation classifier
        gives at least ``UPSIDE_DOWN`` of being turned is read both ways, and turned where
        that reads more probably (PaddleOCR's angle classifier turns on its word alone;
        the crops' path checks the read too). A detector's rectangle has no up: a label
        printed upside down on a photographed package is cut as it lies."""
        from crnn.detect.postprocess import Detection
        from crnn.reading.orientation import UPSIDE_DOWN

        classifier = self.reader.orientation
        if classifier is None or not cuts:
            return cuts
        rows = [i for i, (_, _, stacked) in enumerate(cuts) if not stacked]
        odds = classifier.upside_down_many([cuts[i][1] for i in rows])
        asked = [i for i, p in zip(rows, odds) if p >= UPSIDE_DOWN]
        flat, pairs = [], []
        for i in asked:
            source = cuts[i][1]
            try:
                both = [
                    preprocess_array(im, self.reader.spec) for im in (source, source.rotate(180))
                ]
            except ImageTooWideError:
                continue
            flat += both
            pairs.append(i)
        if not flat:
            return cuts
        scored = [sc for sc, _, _ in self.reader._predict_flat(flat, score=True)]
        out = list(cuts)
        for k, i in enumerate(pairs):
            if scored[2 * k + 1] > scored[2 * k]:  # its quad then starts at the text's top left
                d, source, stacked = cuts[i]
                out[i] = (
                    Detection(np.roll(d.quad, 2, axis=0), d.score),
                    source.rotate(180),
                    stacked,
                )
        return out

    def _vertical(
        self, img: Any, grey: np.ndarray
    ) -> tuple[Page, list[tuple[Any, int | None, list[int]]]] | None:
        """``auto``'s check of a tall image: one vertical column of characters (cut into
        cells and read as a line, ``crnn.layout.vertical``) when it may be one and its
        cells read more probably than the image read whole; else None."""
        from crnn.layout import Page, reads_better_as_page
        from crnn.layout.page import mean_log
        from crnn.layout.vertical import (
            COLUMN_MIN_LOG_CONFIDENCE,
            looks_vertical,
            one_per_cell,
            stack_cells,
        )

        maybe, cells, ink = looks_vertical(grey)
        if not maybe:
            return None
        line, place = stack_cells(grey, cells, ink)
        stacked = preprocess_array(line, self.reader.spec)
        whole, column = self.reader.predict_preprocessed(
            [self._as_given(img), stacked], stretch=(1.0,)
        )
        if not (
            one_per_cell(column.text, cells)
            and mean_log(column.char_confidences) >= COLUMN_MIN_LOG_CONFIDENCE
            and reads_better_as_page(whole.char_confidences, [column.char_confidences])
        ):
            return None
        h, w = grey.shape
        return Page([], "line", 0.0, direction="ttb", placements=[place]), [
            (stacked, None, [0, 0, w, h])
        ]

    @property
    def _writes_cjk(self) -> bool:
        """Whether the model writes Chinese characters (only they are set in columns)."""
        return self.reader.writes_chinese

    def _vertical_page(
        self, img: Any, grey: np.ndarray, reads: _Reads, rows: Any = None
    ) -> tuple[Page, list[tuple[Any, int | None, list[int]]]] | None:
        """A page set in vertical columns (classical print, some signs and notices): its
        columns found as the lines of the page turned a quarter (the rightmost column
        first, then leftwards; bands top to bottom), each cut into cells and read top to
        bottom (``crnn.layout.vertical``). A grid of Chinese characters is a page either
        way, so the columns are kept only when their widest read more probably than the
        rows ``rows`` (the line finder's on the image as given) or, without rows, than
        the image read whole. None when it is not such a page."""
        from crnn.layout import Page, decide_layout, find_lines, unrotate_box
        from crnn.layout.vertical import (
            column_cells,
            grid_cells,
            ink_mask,
            runs_across,
            stack_cells,
        )

        h, w = grey.shape
        turned = np.ascontiguousarray(np.rot90(grey))  # turned[i, j] = grey[j, w - 1 - i]
        found = find_lines(turned)
        if decide_layout(found, turned.shape[0])[0] != "page":
            return None
        jobs, places, spans, cut = [], [], [], []
        for b in found.lines:
            t0, u0, t1, u1 = unrotate_box(b, found.angle, (h, w))  # on the turned image
            x0, x1, y0, y1 = max(0, w - u1), min(w, w - u0), max(0, t0), min(h, t1)
            column = grey[y0:y1, x0:x1]
            ink = ink_mask(column)
            cells = grid_cells(ink) or column_cells(ink)
            if not cells:
                continue
            spans.append((x0, x1))
            cut.append(cells)
            line, place = stack_cells(column, cells, ink)
            place.origin = (x0, y0)
            place.size = (w, h)
            arr = preprocess_array(line, self.reader.spec)
            jobs.append((_pad_to(arr, PAGE_WIDTH_STEP), arr.shape[-1], [x0, y0, x1, y1]))
            places.append(place)
        if len(jobs) < 2 or runs_across(spans, cut):
            return None
        if not self._beats_rows(img, jobs, rows, (w, h), reads):
            return None
        return Page([], "page", 0.0, direction="ttb", placements=places), jobs

    def _sideways(
        self, img: Any, grey: np.ndarray, reads: _Reads, rows: Any = None
    ) -> tuple[Page, list[tuple[Any, int, list[int]]]] | None:
        """A page lying on its side (a scan fed sideways, a photo of a page in landscape):
        its lines found on the page turned a quarter clockwise, turned the other way
        instead when its widest lines read more probably so (:meth:`_upside_down`), and
        kept only when they read more probably than the rows ``rows`` found as given (or,
        without rows, than the image read whole). None when it is not such a page."""
        from crnn.layout import Page, decide_layout, find_lines

        h, w = grey.shape
        turn, turned = 90, np.ascontiguousarray(np.rot90(grey, -1))  # clockwise: (h, w) -> (w, h)
        found = find_lines(turned)
        if decide_layout(found, turned.shape[0])[0] != "page":
            return None
        lines, places = self._page_lines(found, (h, w), turn)
        if self._upside_down(lines):
            turn, turned = 270, np.ascontiguousarray(turned[::-1, ::-1])
            found = find_lines(turned)
            lines, places = self._page_lines(found, (h, w), turn)
        if not lines:
            return None
        if not self._beats_rows(img, lines, rows, (w, h), reads):
            return None
        # Boxes from the turned page onto the image as given (as Placement.box maps them).
        back = (
            (lambda b: [b[1], h - b[2], b[3], h - b[0]])
            if turn == 90
            else (lambda b: [w - b[3], b[0], w - b[1], b[2]])
        )
        lines = [(a, wd, back(b)) for a, wd, b in lines]
        return Page([], "page", found.angle, "", rotation=turn, placements=places), lines

    def _page_lines(
        self, found: Any, size: tuple[int, int], turn: int = 0
    ) -> tuple[list[tuple[Any, int, list[int]]], list[Any]]:
        """The found lines as ``(pixels padded to PAGE_WIDTH_STEP, real width, box on the
        image of ``size``)``, and where each sits (``crnn.layout.chars.Placement``;
        ``turn``: 180 when ``found`` is the page turned over)."""
        from crnn.data.image import INFERENCE_MAX_WIDTH
        from crnn.layout import unrotate_box
        from crnn.layout.chars import Placement
        from crnn.layout.lines import crop_rect, split_wide

        out, places = [], []
        for line in found.lines:
            # A line wider than the recognizer reads (at its height) is read in pieces.
            scale = (
                self.reader.spec.height / max(1.0, line.height * 1.3) * self.reader.spec.width_scale
            )
            for box in split_wide(found.page, line, int(0.9 * INFERENCE_MAX_WIDTH / scale)):
                x0, y0, x1, y1 = crop_rect(
                    found.page.shape, box, found.char_height, found.line_height
                )
                arr = preprocess_array(found.page[y0:y1, x0:x1], self.reader.spec)
                out.append(
                    (
                        _pad_to(arr, PAGE_WIDTH_STEP),
                        arr.shape[-1],
                        unrotate_box(box, found.angle, size),
                    )
                )
                places.append(Placement((x0, y0, x1, y1), size, found.angle, turn))
        return out, places

    def _upside_down(self, lines: list[tuple[Any, int, list[int]]]) -> bool:
        """``rotate="pages"`` or ``"auto"`` on a page: whether its
        :data:`ORIENTATION_CHECK_LINES` widest lines read more probably turned by 180
        degrees, counted by the characters of the more probable reads (each line's text
        scored over its CTC alignments)."""
        flat = []
        for a, wd, _ in _widest(lines)[:ORIENTATION_CHECK_LINES]:
            flat += [a[..., :wd], np.ascontiguousarray(a[..., :wd][..., ::-1, ::-1])]
        scored = (
            [(sc, p) for sc, _, p in self.reader._predict_flat(flat, score=True)] if flat else []
        )
        pairs = list(zip(scored[::2], scored[1::2]))
        turned = sum(len(t[1].text) for u, t in pairs if t[0] > u[0])
        return turned > sum(len((t if t[0] > u[0] else u)[1].text) for u, t in pairs) / 2

    def _beats_rows(
        self,
        img: Any,
        lines: list[tuple[Any, int, list[int]]],
        rows: Any,
        size: tuple[int, int],
        reads: _Reads,
    ) -> bool:
        """Whether another reading's planned ``lines`` read more probably than the rows
        ``rows`` the line finder found on the image as given (of ``size``), or, without
        rows, than the image read whole (as a page candidate is checked)."""
        if rows is None:
            return self._reads_better_as_page(img, lines, reads)
        return self._reads_better(lines, self._page_lines(rows, size)[0], reads)

    def _reads_poorly(self, lines: list[tuple[Any, int, list[int]]], reads: _Reads) -> bool:
        """Whether a page candidate's widest lines read at a mean log confidence per
        character under :data:`POOR_PAGE_LOG`."""
        from crnn.layout.page import mean_log

        score = mean_log([c for p in reads.lines(_widest(lines)) for c in p.char_confidences])
        log.debug("page candidate's widest lines: mean log confidence %.3f", score)
        return score < POOR_PAGE_LOG

    def _reads_better(
        self,
        these: list[tuple[Any, int, list[int]]],
        those: list[tuple[Any, int, list[int]]],
        reads: _Reads,
    ) -> bool:
        """Whether the widest of ``these`` planned lines read more probably than the widest
        of ``those`` (``crnn.layout.reads_better_as_page``)."""
        from crnn.layout import reads_better_as_page

        read = reads.lines([*_widest(those), *_widest(these)])
        b = len(_widest(those))
        return reads_better_as_page(
            [c for p in read[:b] for c in p.char_confidences],
            [p.char_confidences for p in read[b:]],
        )

    def _reads_better_as_page(
        self, img: Any, lines: list[tuple[Any, int, list[int]]], reads: _Reads
    ) -> bool:
        """``auto``'s check of a page candidate: the image read whole against its
        :data:`PAGE_CHECK_LINES` widest lines (``crnn.layout.reads_better_as_page``)."""
        from crnn.layout import reads_better_as_page

        whole, *read = reads.lines(_widest(lines), whole=img)
        return reads_better_as_page(
            whole.char_confidences,
            [p.char_confidences for p in read],
            PAGE_MIN_CHARS_PER_LINE,
        )

    def _as_given(self, img: Any) -> np.ndarray:
        """An image preprocessed as given, without its turns: what the layout checks read
        whole (a turn read whole is no page and no column)."""
        return self.reader._seen(
            preprocess_array(img, self.reader.spec, inference=not self.reader.squeeze)
        )

    def read_page(self, image: ImageSource, layout: str = "auto") -> Page:
        """One image's :class:`~crnn.layout.Page` (see :meth:`read_pages`)."""
        return self.read_pages([image], layout)[0]  # type: ignore[no-any-return]


class _Reads:
    """One image's reads for the planner's checks, each line (and the image read whole)
    read once however many checks ask for it: every check reads at the natural width
    (``stretch=(1.0,)``), and lines of equal width batch unpadded, so a read does not
    depend on the reads beside it."""

    def __init__(self, planner: PagePlanner) -> None:
        self.planner = planner
        # id of a line's pixels -> (the pixels, kept so the id stays theirs; its read)
        self.done: dict[int, tuple[Any, Prediction]] = {}
        self.whole: dict[int, tuple[Any, Prediction]] = {}

    def lines(self, jobs: list[tuple[Any, Any, Any]], whole: Any = None) -> list[Prediction]:
        """The reads of the planned lines ``jobs`` (``(pixels, real width, box)``), after
        that of the image ``whole`` read as given where one is passed."""
        todo = list({id(j[0]): j for j in jobs if id(j[0]) not in self.done}.values())
        given = [] if whole is None or id(whole) in self.whole else [whole]
        if todo or given:
            made = self.planner.reader.predict_preprocessed(
                [*(self.planner._as_given(g) for g in given), *(j[0] for j in todo)],
                [*(None for _ in given), *(j[1] for j in todo)],
                stretch=(1.0,),
            )
            for g, p in zip(given, made):
                self.whole[id(g)] = (g, p)
            for j, p in zip(todo, made[len(given) :]):
                self.done[id(j[0])] = (j[0], p)
        out = [self.done[id(j[0])][1] for j in jobs]
        return out if whole is None else [self.whole[id(whole)][1], *out]


# One row of detected lines this high a share of the image is the image itself: a crop,
# read whole as it always was.
CROP_FILL = 0.25


def is_crop(found: Any, size: tuple[int, int]) -> bool:
    """Whether the detector's lines are the image itself: one row of lines (each
    overlapping the first across half the lower one's height) that spans
    :data:`CROP_FILL` of the image's height (a line crop; a photograph with one small
    line on it is no crop; nor are columns side by side: a page of columns)."""
    from crnn.detect.order import is_column

    quads = [d.quad for d in found]
    if len(quads) > 1 and all(is_column(q) for q in quads):
        return False
    y0s, y1s = [q[:, 1].min() for q in quads], [q[:, 1].max() for q in quads]
    for a0, a1 in zip(y0s[1:], y1s[1:]):
        if min(a1, y1s[0]) - max(a0, y0s[0]) < 0.5 * min(a1 - a0, y1s[0] - y0s[0]):
            return False
    pts = np.concatenate(quads)
    return bool(pts[:, 1].max() - pts[:, 1].min() >= CROP_FILL * size[1])


# A page candidate of --layout auto is checked by reading the image whole and at most this
# many of its widest lines (crnn.layout.reads_better_as_page).
PAGE_CHECK_LINES = 4
# A picture's page candidate whose widest lines read at a mean log confidence per
# character under this is asked of the detector too (see plan_page).
POOR_PAGE_LOG = -0.5
# ... and those lines must read at least this many characters each on average: a page's
# widest lines (6 or more heights wide) hold many; two real sign photographs cut into
# stacked strokes read 3 and 4 characters over 4 lines, taken for pages at 102 % CER.
PAGE_MIN_CHARS_PER_LINE = 2.0
# A page is turned over when most characters of this many of its widest lines read more
# probably upside down (2 read both ways: +11-23 % of an upright page's time on 2 busy
# cores, against 4: +23-77 %; the 48 benchmark pages turned over all read as upright).
ORIENTATION_CHECK_LINES = 2


def _maybe_sideways(found: Any, h: int, w: int) -> bool:
    """Whether an image more than two characters high may be a page lying on its side:
    the line finder found no lines, lines of median width under
    :data:`SIDEWAYS_MAX_ASPECT` heights, or three or more lines that make no page."""
    from crnn.layout import decide_layout

    if min(h, w) <= 2 * max(found.char_height, 8.0):
        return False
    if not found.lines or (len(found.lines) >= 3 and decide_layout(found, h)[0] == "line"):
        return True
    return float(np.median([b.width / max(1, b.height) for b in found.lines])) < SIDEWAYS_MAX_ASPECT


# An image the line finder reads as one line and at least this many times as wide as high
# is read as a line crop: it is not also looked at as a page of vertical columns or a page
# on its side (docs/reading.md).
LINE_CROP_ASPECT = 2.0


# A page whose found lines are of median width under this many heights is also tried on
# its side (the 48 benchmark pages: 14-32 upright, 0.5-9.9 turned a quarter).
SIDEWAYS_MAX_ASPECT = 8.0


# The classical finder's look at a line crop (LINE_CROP_ASPECT times as wide as high or
# more, over twice LINE_MAX_HEIGHT px high) is made on it halved first, as a picture's is.
LINE_HALF_LOOK = True


def _line_shaped(grey: np.ndarray) -> bool:
    from crnn.layout.page import LINE_MAX_HEIGHT

    h, w = grey.shape
    return w >= LINE_CROP_ASPECT * h and h // 2 > LINE_MAX_HEIGHT


def _say(image: ImageSource, note: str) -> None:
    """Log ``note`` (why an image's lines were not found) with the image's name."""
    if note:
        name = image if isinstance(image, (str, os.PathLike)) else "an image"
        log.warning("%s: %s", name, note)


def _picture_shaped(grey: np.ndarray) -> bool:
    from crnn.detect.choice import is_picture, is_small_picture

    return is_picture(grey) or is_small_picture(grey)


def _widest(lines: list[tuple[Any, int, list[int]]]) -> list[tuple[Any, int, list[int]]]:
    """The :data:`PAGE_CHECK_LINES` widest of a page's planned lines (by real width): the
    lines the page checks read."""
    return sorted(lines, key=lambda job: -job[1])[:PAGE_CHECK_LINES]


# Lines of a page are padded (their last column repeated, as in training batches) to a
# multiple of this many pixels, so that lines of about the same width share a batch.
PAGE_WIDTH_STEP = 64


# The classical finder's first look at a picture is at half its size where the print it
# finds there is at least this high (px, halved), else at full size (on the 80 validation
# web pictures: 20 against 73 ms an image, the same decision on 79; the one other, 7 rows
# whole and 5 halved, is looked at whole again as every halved page candidate is).
FIRST_LOOK_MIN_CHAR = 8.0


# A line crop's look (LINE_HALF_LOOK) is made at half its size or smaller, at most this
# many px high: on the 216 such crops of the development photographs (zh_real_dev) every
# plan was the same at 50, 64, 80 and 100 px as halved (at 96, one crop of 1,135 x 255
# was planned otherwise), and the plans cost 33.5 -> 27.6 ms a crop over the 420 at 100
# px (halved, a 1,849 x 379 crop is still 925 x 190).
LINE_LOOK_HEIGHT = 100


def _half_look(grey: np.ndarray, at_most: int | None = None) -> tuple[str, str, Any] | None:
    """``choose_layout`` of ``grey`` halved (or made ``at_most`` px high, where that is
    smaller), where the print it finds there is large enough to judge
    (:data:`FIRST_LOOK_MIN_CHAR`); else None."""
    from crnn.layout import choose_layout

    h, w = grey.shape
    f = max(2.0, h / at_most) if at_most else 2.0
    half = cv2.resize(grey, (max(1, int(w / f)), max(1, int(h / f))), interpolation=cv2.INTER_AREA)
    look = choose_layout(half, "auto")
    found = look[2]
    if found is None or found.char_height < FIRST_LOOK_MIN_CHAR:
        return None
    return look


def _pad_to(arr: np.ndarray, step: int) -> np.ndarray:
    w = arr.shape[-1]
    target = -(-w // step) * step
    if target == w:
        return arr
    return np.concatenate([arr, np.repeat(arr[..., -1:], target - w, axis=-1)], axis=-1)
