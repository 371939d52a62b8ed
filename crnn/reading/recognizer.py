"""A small Python API for applications.

```python
from crnn import Recognizer
rec = Recognizer.from_checkpoint("runs/default/best.pt")   # or a release file
for text, confidence in rec.predict(["word.png", pil_image, uint8_array]):
    print(text, confidence)

rec = Recognizer.from_checkpoint("crnn_en-1a2b3c4d.pt", beam_width=10, lexicon="words.txt")
rec = Recognizer.from_checkpoint("crnn_en.onnx")           # ONNX Runtime, no PyTorch
```

Images are grouped by their resized width and each group is run unpadded, so a
prediction never depends on which other images share its batch.

With an ONNX model this module imports no PyTorch (preprocessing is
``crnn.data.image``, decoding ``crnn.ctc``, the model ``crnn.backends.onnx``): reading
one image from the command line then takes a fraction of a second instead of the
1.5-3 s that ``import torch`` alone costs on a small CPU.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from crnn.backends import Backend, load_backend
from crnn.bundled import (  # noqa: F401 (re-exported)
    BUNDLED,
    MODELS_DIR,
    bundled_models,
    default_checkpoint,
    prefers_onnx,
)
from crnn.ctc import Lexicon, Prediction, log_softmax_np, sequence_log_probs
from crnn.ctc.lm import CharBigram
from crnn.data.image import (
    ImageSource,
    ImageTooWideError,
    load_image,
    preprocess_array,
    stretch_line,
    zoom_rows,
)
from crnn.reading.decoder import Decoder
from crnn.reading.orientation import UPSIDE_DOWN, OrientationClassifier, bundled_classifier
from crnn.reading.planner import PAGE_CHECK_LINES, PAGE_WIDTH_STEP, PagePlanner, _pad_to  # noqa: F401 (re-exported)
from crnn.reading.views import (  # noqa: F401 (re-exported)
    AS_GIVEN,
    CJK_DESLANT,
    CJK_STRETCH,
    CJK_ZOOM,
    DETECTED_STRETCH,
    QUARTER_MARGIN,
    ROTATE_MARGIN,
    ROTATIONS,
    VIEW_SURE,
    Turns,
    View,
    factors,
)

log = logging.getLogger(__name__)

# Warn (once) about inputs this many times wider than the model's training width.
WIDE_FACTOR = 3
# Reads decoded in one batch (Recognizer._decode_pool) hold at most this many frames, each
# padded to the longest: 4,096 frames of the Chinese model's 5,531 classes are 90 MB of
# float32 logits (and as much again of log-probabilities where the reads are scored).
DECODE_FRAMES = 4096

# An image whose pixels all lie within this many grey levels of each other holds no text
# and reads as "" (the word model read a blank page as "t"). The real crops of
# ../shared/data span 20 grey levels or more after preprocessing (29 or more but for SVT).
BLANK_RANGE = 8


def is_blank(image: Any, width: int | None = None) -> bool:
    """Whether a preprocessed ``(C, H, W)`` uint8 image (its first ``width`` columns) has
    no contrast to read (:data:`BLANK_RANGE`)."""
    a = np.asarray(image)[..., :width]
    return a.size == 0 or int(a.max()) - int(a.min()) < BLANK_RANGE


def _numpy(x: Any) -> np.ndarray:
    return x.detach().float().cpu().numpy() if hasattr(x, "detach") else np.asarray(x)


# How read_pages finds the lines of an image (Recognizer's finder).
FINDERS = ("auto", "detector", "classical")


class Recognizer:
    """Reads text from word or line images: preprocess -> a :class:`crnn.backends.Backend`
    (PyTorch or ONNX Runtime) -> CTC decoding.

    Args:
        backend: the model (see :func:`crnn.backends.load_backend`); its charset and
            image spec are used.
        batch_size: images per forward pass.
        beam_width: 0 for greedy decoding, else CTC prefix beam search with this many
            prefixes (``crnn.ctc.prefix_beam_search``); None: ``LM_BEAM`` with a prior, else 0.
        lexicon: a word list (a file with one word per line, words, or a
            :class:`crnn.ctc.Lexicon`): each text is snapped to the most probable word
            within ``max_edits`` edits, if there is one.
        max_edits: how far a lexicon word may be from the decoded text.
        lm, lm_weight: a language prior for the beam search, which character follows
            which, and its weight (see :func:`crnn.ctc.lm.resolve_prior`): by default the
            bundled Chinese word counts' for a model that writes Chinese characters, at
            :data:`crnn.ctc.lm.LM_WEIGHT`; ``False``: none.
        rotate: ``"pages"`` (the default): a page is turned over when its widest lines
            read more probably upside down, and an image taller than wide is also read
            turned by 90 and 270 degrees; ``"auto"``: besides, every image is also read
            upside down; ``"none"``: everything is read as given. A turn is kept only
            when its text is more probable (under CTC, summed over its alignments) than
            the image's as given by :data:`ROTATE_MARGIN` (a quarter turn of a crop squeezed
            as given: per frame, :data:`QUARTER_MARGIN`); the prediction's ``rotation``
            says which. With ``"pages"``, a crop wider than tall that the orientation
            classifier (:mod:`crnn.reading.orientation`) calls upside down is also read turned.
        orientation: that classifier: ``"bundled"`` (the default; none when no
            classifier is bundled), a path to one, a classifier object (anything with
            ``upside_down(image) -> probability``), or None (never consulted); used
            only with ``rotate="pages"``.
        squeeze: cap each image's width at the model's training width (``max_width`` of
            its image spec) as training does, instead of reading it whole. Better for a
            word model on word crops wider than that, wrong for lines (the bundled word
            model: IC13-857 79.8 % squeezed, 79.1 % whole).
        numerals: read an o or O inside a number as 0 (``4,ooo`` -> ``4,000``; see
            :func:`crnn.ctc.numerals.fix_numerals`): old-style figures draw 0 like an o.
            Only for a model that writes both, and not with a lexicon.
        stretch: the widths, as multiples of its natural width, at which each line is
            read; the most confident read is kept (its ``stretch`` says which; a tie
            keeps the first width listed). ``(1.0,)`` reads each line once, as given.
            None (the default): :data:`CJK_STRETCH` for a model that writes Chinese
            characters, else ``(1.0,)``.
        zoom: how far each line is also read zoomed in: at zoom ``z`` the central ``1/z``
            of its height, enlarged ``z`` times both ways (then at every width of
            ``stretch``); the most confident of all reads is kept (its ``zoom`` says
            which). ``(1.0,)`` reads the whole height only. None (the default):
            :data:`CJK_ZOOM` for a model that writes Chinese characters, else ``(1.0,)``.
        deslant: a crop (not a page's line) whose writing leans at least this many
            degrees (:func:`crnn.layout.slant.lean_of`) is also read sheared upright, at
            every view; the most confident read is kept (its ``lean`` says which). 0: never.
            None (the default): :data:`CJK_DESLANT` for a model that writes Chinese
            characters, else 0.
        view_sure: a line whose read as given (the first view) is at least this
            confident keeps it, and its other views (widths, zooms, shear) are not read;
            1: every view is always read. None (the default): :data:`VIEW_SURE`. Images
            read at more than one turn read every view.
        detector: the text line detector (``crnn.detect.runtime``) that finds the lines of
            photographs and web images for :meth:`read_pages`: ``"bundled"`` (the default;
            loaded on first use, none where none is bundled), a detector object, or None:
            the classical page finder (``crnn.layout``) alone.
        finder: ``"auto"`` (the default): the detector where
            ``crnn.detect.choice.prefers_detector`` says (not clean pages, scans, long
            screenshots or line crops), the classical finder elsewhere; ``"detector"`` or
            ``"classical"``: always that one.
    """

    def __init__(
        self,
        backend: Backend,
        batch_size: int = 64,
        beam_width: int | None = None,
        lexicon: Lexicon | str | os.PathLike[str] | Sequence[str] | None = None,
        max_edits: int = 2,
        lm: CharBigram | str | os.PathLike[str] | bool | None = None,
        lm_weight: float | None = None,
        rotate: str = "pages",
        squeeze: bool = False,
        numerals: bool = True,
        orientation: Any = "bundled",
        stretch: Sequence[float] | None = None,
        zoom: Sequence[float] | None = None,
        deslant: float | None = None,
        detector: Any = "bundled",
        finder: str = "auto",
        view_sure: float | None = None,
    ) -> None:
        if finder not in FINDERS:
            raise ValueError(f"finder must be one of {', '.join(FINDERS)}, got {finder!r}")
        if detector == "bundled":
            from crnn.detect.runtime import bundled_detector

            detector = bundled_detector()
        self.detector = detector
        self.finder = finder
        self.squeeze = squeeze
        self.charset = backend.charset
        once = (1.0,)
        given_stretch = stretch
        if stretch is None:
            stretch = CJK_STRETCH if self.writes_chinese else once
        if zoom is None:
            zoom = CJK_ZOOM if self.writes_chinese else once
        self.stretch = factors(
            stretch,
            0.25,
            4,
            "stretch must be one or more widths between 0.25 and 4 (1.0: as given)",
        )
        self.zoom = factors(
            zoom, 1, 2, "zoom must be one or more zooms between 1 and 2 (1.0: the whole height)"
        )
        if deslant is None:
            deslant = CJK_DESLANT if self.writes_chinese else 0.0
        if not 0 <= deslant <= 90:
            raise ValueError(f"deslant must be 0 (never) or degrees up to 90, got {deslant!r}")
        self.deslant = float(deslant)
        view_sure = VIEW_SURE if view_sure is None else view_sure
        if not 0 <= view_sure <= 1:
            raise ValueError(
                f"view_sure must be a confidence between 0 and 1 (1: read every view), "
                f"got {view_sure!r}"
            )
        self.view_sure = float(view_sure)
        # Every read of a line, the one as given first (ties keep it; the sort is stable).
        views = [(s, z, 0.0) for z in self.zoom for s in self.stretch]
        self.views: tuple[View, ...] = tuple(sorted(views, key=lambda v: v != AS_GIVEN))
        # The views of a line the detector found on a whole image: at its natural width
        # alone where the widths are the default (DETECTED_STRETCH), else the reader's.
        self.detected_views = self.views
        if given_stretch is None:
            self.detected_views = (
                tuple(v for v in self.views if v[0] in DETECTED_STRETCH) or self.views
            )
        # Consulted only by rotate="pages" (auto reads every turn, none none): loaded only then.
        self.orientation = (
            None
            if orientation is None or rotate != "pages"
            else bundled_classifier()
            if orientation == "bundled"
            else OrientationClassifier(orientation)
            if isinstance(orientation, (str, os.PathLike))
            else orientation  # a classifier passed in: anything with upside_down(image)
        )
        if rotate not in ("none", "pages", "auto"):
            raise ValueError(f"rotate must be 'none', 'pages' or 'auto', got {rotate!r}")
        self.rotate = rotate
        self._warned_wide = False
        self.backend = backend
        self.spec = backend.spec
        self.batch_size = batch_size
        self.decoder = Decoder.build(
            self.charset,
            getattr(backend, "temperature", 1.0),
            beam_width,
            lexicon,
            max_edits,
            lm,
            lm_weight,
            numerals,
        )

    @property
    def writes_chinese(self) -> bool:
        """Whether the model writes Chinese (``Charset.writes_chinese``): the Chinese
        defaults (views, vertical columns, the language prior) apply."""
        if not hasattr(self, "_chinese"):
            self._chinese = self.charset.writes_chinese
        return self._chinese

    # ---- whole images: the page planner (crnn/reading/planner.py) -----------------

    @property
    def planner(self) -> PagePlanner:
        """The page decisions and line reading, over this reader (made on each use)."""
        return PagePlanner(self)

    def read_pages(
        self, images: Sequence[ImageSource], layout: str = "auto", errors: str = "raise"
    ) -> list[Any]:
        """Each image as a :class:`~crnn.layout.Page` (:meth:`PagePlanner.read_pages
        <crnn.reading.planner.PagePlanner.read_pages>`): its lines found, read and put in
        reading order; ``layout`` auto, page or line; ``errors="return"`` gives an
        unreadable image's ``ImageDecodeError`` in place of its page."""
        return self.planner.read_pages(images, layout, errors)

    def read_page(self, image: ImageSource, layout: str = "auto") -> Any:
        """One image's :class:`~crnn.layout.Page` (see :meth:`read_pages`)."""
        return self.planner.read_page(image, layout)

    def plan_page(self, image: ImageSource, layout: str = "auto") -> Any:
        """How one image is read: its Page (no lines read yet) and its lines' jobs
        (:meth:`PagePlanner.plan_page <crnn.reading.planner.PagePlanner.plan_page>`)."""
        return self.planner.plan_page(image, layout)

    def read_planned(self, pages: list[Any], jobs: list[Any]) -> list[Any]:
        """The planned lines of ``pages`` read and put on them
        (:meth:`PagePlanner.read_planned <crnn.reading.planner.PagePlanner.read_planned>`)."""
        return self.planner.read_planned(pages, jobs)

    # The decoding options, as the Decoder holds them (it is immutable: setting one gives
    # this reader a new Decoder, so a copy of a reader may decode differently).
    @property
    def beam_width(self) -> int:
        return self.decoder.beam_width

    @beam_width.setter
    def beam_width(self, value: int) -> None:
        if value < 0:
            raise ValueError(f"beam_width must be >= 0 (0: greedy), got {value}")
        self.decoder = dataclasses.replace(self.decoder, beam_width=value)

    @property
    def lm(self) -> CharBigram | None:
        return self.decoder.lm

    @property
    def lm_weight(self) -> float:
        return self.decoder.lm_weight

    @property
    def lexicon(self) -> Lexicon | None:
        return self.decoder.lexicon

    @property
    def max_edits(self) -> int:
        return self.decoder.max_edits

    @property
    def numerals(self) -> bool:
        return self.decoder.numerals

    @classmethod
    def from_checkpoint(
        cls,
        path: str | os.PathLike[str],
        device: Any = None,
        amp: str = "none",
        channels_last: bool | None = None,
        threads: int | None = None,
        providers: list[str] | None = None,
        spinning: bool = True,
        **decoding: Any,
    ) -> Recognizer:
        """Load a training checkpoint, a run directory (its best.pt), a release file, or
        an ``.onnx`` export (run by ONNX Runtime, without PyTorch); see
        :func:`crnn.backends.load_backend` for the backend options. ``decoding``:
        ``batch_size``, ``beam_width``, ``lexicon``, ``max_edits``, ``lm``, ``lm_weight``, ..."""
        backend = load_backend(
            path,
            device=device,
            amp=amp,
            channels_last=channels_last,
            threads=threads,
            providers=providers,
            spinning=spinning,
        )
        return cls(backend, **decoding)

    @classmethod
    def bundled(cls, model: str = "word", **options: Any) -> Recognizer:
        """A bundled model: ``"word"`` (English scene-text words, ``0-9a-z``), ``"line"``
        (printed English text lines, printable ASCII with spaces) or ``"zh"`` (printed
        Chinese lines, the 5,530 classes of ``zh5529``); ``options`` as for
        :meth:`from_checkpoint`."""
        path = default_checkpoint(prefers_onnx(options.get("device")), model)
        return cls.from_checkpoint(path, **options)

    def preprocess(self, image: ImageSource) -> Any:
        """One image -> ``(C, H, W)`` uint8, or where it is to be read more than once a
        :class:`Turns` of such arrays (the first as given): its turns (with
        ``rotate="auto"`` every image's 180, and 90 and 270 when it is taller than wide;
        with ``"pages"`` a tall image's 90 and 270 only), each at every width of
        ``stretch`` and zoom of ``zoom``; a leaning crop (``deslant``) also sheared
        upright, at each. Raises ``ImageDecodeError``."""
        img = load_image(image, self.spec.rgb)
        tall = img.height > img.width
        turns = (
            (0,)
            if self.rotate == "none"
            else ((0, 180, 90, 270) if tall else (0, 180))
            if self.rotate == "auto"
            else (0, 90, 270)
            if tall
            else (0,)
        )
        if (
            turns == (0,)
            and self.rotate == "pages"
            and self.orientation is not None
            and self.orientation.upside_down(img) >= UPSIDE_DOWN
        ):
            turns = (0, 180)
        lean = self.lean(img)
        if turns == (0,) and self.views == (AS_GIVEN,) and not lean:
            return self._seen(preprocess_array(img, self.spec, inference=not self.squeeze))
        # (PIL turns counter-clockwise.)
        bases = [(d, img if d == 0 else img.rotate(-d, expand=True), 0.0) for d in turns]
        return self.viewed(bases, self.views, lean, inference=not self.squeeze)

    def viewed(
        self,
        bases: list[tuple[int, Any, float]],
        views: Sequence[View],
        lean: float = 0.0,
        inference: bool = True,
    ) -> Turns:
        """The reads of ``bases`` (``(turn, PIL image turned so, 0.0)``, the image as given
        first) at each of ``views``, and of the image as given sheared upright where its
        writing leans ``lean`` degrees (:meth:`lean`): a :class:`Turns` that
        :meth:`predict_preprocessed` reads whole (a crop, or a detected line that leans)."""
        if lean:
            from crnn.layout.slant import unslant

            bases = [bases[0], (0, unslant(bases[0][1], lean), lean), *bases[1:]]
        reads, tags = [], []
        for d, turned, leaned in bases:
            for s, z, _ in views:
                height, top = zoom_rows(self.spec.height, z)
                spec = (
                    self.spec
                    if (s, z) == (1.0, 1.0)
                    else dataclasses.replace(
                        self.spec, height=height, width_scale=self.spec.width_scale * s
                    )
                )
                try:
                    arr = preprocess_array(turned, spec, inference=inference)
                except ImageTooWideError:  # a thin crop on its side, a long line widened
                    if d == 0 and not leaned and (s, z, 0.0) == views[-1] and not tags:
                        raise
                    continue
                reads.append(self._seen(arr[:, top : top + self.spec.height]))
                tags.append((d, (s, z, leaned)))
        return Turns(reads, [t for t, _ in tags], [v for _, v in tags])

    def lean(self, img: Any) -> float:
        """How far a crop's or a detected line's writing leans (degrees), where it is to
        be read upright too (``deslant``): else 0."""
        if not self.deslant:
            return 0.0
        from crnn.layout.slant import lean_of

        lean = lean_of(img)
        return lean if abs(lean) >= self.deslant else 0.0

    def _seen(self, arr: np.ndarray) -> np.ndarray:
        """Warn once when images are far wider than anything the model was trained on:
        they are read whole (never squeezed), but a word model reads long lines poorly."""
        width = arr.shape[-1]
        if width > WIDE_FACTOR * self.spec.max_width and not self._warned_wide:
            self._warned_wide = True
            log.warning(
                "an image is %d px wide at height %d, %.0fx the widest the model was trained "
                "on (%d px): it is read whole, but expect errors on long lines; a model trained "
                "on lines reads them better",
                width,
                self.spec.height,
                width / self.spec.max_width,
                self.spec.max_width,
            )
        return arr

    def predict_preprocessed(
        self,
        images: Sequence[Any],
        widths: Sequence[int | None] | None = None,
        stretch: Sequence[float] | None = None,
        views: Sequence[View] | None = None,
    ) -> list[Prediction]:
        """Predict what :meth:`preprocess` returned: ``(C, H, W)`` uint8 images (arrays
        or tensors), or tuples of rotations of one image (the first as given). Images of
        equal width are batched together unpadded; ``widths`` (one per image, without
        rotations) are the real widths of images padded on the right, whose padding is
        then never decoded; ``stretch``: the widths each is read at, its whole height
        (default: the reader's ``stretch`` and ``zoom``), the most confident read kept;
        ``views``: in place of ``stretch``, the :data:`View` s each is read at.

        A turn is kept only when its text is more probable than the image's as given by
        :data:`ROTATE_MARGIN` nats (summed over its CTC alignments): on the real crops
        of ``../shared/data``, keeping any better-scoring upside-down read cost 617 more
        edits than it saved (``docs/reading.md``). A quarter turn with twice the frames of
        the image as given is compared per frame, by :data:`QUARTER_MARGIN`."""
        if stretch is not None:
            views = tuple((float(s), 1.0, 0.0) for s in stretch)
        # Every read to make: each image's turns (the first as given) at each view.
        reads: dict[bool, list[tuple[Any, int, tuple[int, int, View]]]] = {False: [], True: []}
        turns: list[list[int]] = []  # each image's, in order
        for i, item in enumerate(images):
            mine = self.reads_of(item, None if widths is None else widths[i], views)
            turns.append(list(dict.fromkeys(t for t, _, _, _ in mine)))
            reads[len(turns[i]) > 1].extend((im, wd, (i, t, s)) for t, s, im, wd in mine)
        # The most confident view of each turn of each image; a turn's scored by its text's
        # probability (only images with turns need it).
        chosen: dict[tuple[int, int], tuple[float, int, Prediction]] = {}
        # An image read at one turn is read at its first view first, and at the others only
        # where that read is less confident than view_sure (VIEW_SURE; 1: all in one pass).
        first: list[tuple[Any, int, tuple[int, int, View]]] = []
        rest: list[tuple[Any, int, tuple[int, int, View]]] = []
        for b in reads[False]:
            later = self.view_sure < 1 and first and first[-1][2][0] == b[2][0]
            (rest if later else first).append(b)
        for score, batch in ((True, reads[True]), (False, first), (False, rest)):
            if batch is rest:
                batch = [b for b in batch if chosen[b[2][:2]][2].confidence < self.view_sure]
            if not batch:
                continue
            done = self._predict_flat(
                [b[0] for b in batch], score=score, widths=[b[1] for b in batch]
            )
            for (_, _, (i, turn, v)), (sc, frames, p) in zip(batch, done):
                if (i, turn) not in chosen or p.confidence > chosen[i, turn][2].confidence:
                    if v != AS_GIVEN:
                        p = dataclasses.replace(p, stretch=v[0], zoom=v[1], lean=v[2])
                    chosen[i, turn] = (sc, frames, p)
        out: list[Prediction | None] = [None] * len(images)
        for i in range(len(images)):
            sc0, frames0, given = chosen[i, turns[i][0]]
            out[i] = given
            best = 0.0  # how far (nats per frame) the kept turn beats the image as given
            for turn in turns[i][1:]:
                sc, frames, p = chosen[i, turn]
                # the image as given, squeezed (frames per natural width compared)
                natural = frames / (p.stretch * p.zoom)
                squeezed = natural >= 2 * frames0 / (given.stretch * given.zoom)
                if turn % 180 and squeezed:
                    gain = sc / frames - sc0 / frames0 - max(QUARTER_MARGIN, ROTATE_MARGIN / frames)
                else:
                    gain = (sc - sc0 - ROTATE_MARGIN) / frames
                if gain > best:
                    best, out[i] = gain, dataclasses.replace(p, rotation=turn)
        return out  # type: ignore[return-value]

    def reads_of(
        self, item: Any, real: int | None = None, views: Sequence[View] | None = None
    ) -> list[tuple[int, View, Any, int]]:
        """What reading one item of :meth:`preprocess` (or a page's line, ``real`` its real
        width) takes, ``(turn, (stretch, zoom, lean), pixels, real width)`` each: each of
        its turns at each :data:`View` of ``views`` (default: the reader's, and the reads
        of a crop sheared upright that :meth:`preprocess` made), from its :class:`Turns`
        where :meth:`preprocess` resized the image itself so, else resampled from the read
        as given (its first ``real`` columns; padded again to :data:`PAGE_WIDTH_STEP` if it
        was padded)."""
        if isinstance(item, tuple):
            turns = getattr(item, "turns", ROTATIONS)[: len(item)]
            have = dict(zip(zip(turns, getattr(item, "views", (AS_GIVEN,) * len(item))), item))
        else:
            have = {(0, AS_GIVEN): item}
        # The reads of a crop (or a detected line) sheared upright that preprocessing made.
        views = tuple(
            dict.fromkeys(
                (*(self.views if views is None else views), *(v for _, v in have if v[2]))
            )
        )
        out = []
        for t in dict.fromkeys(t for t, _ in have):
            for v in views:
                im = have.get((t, v))
                if im is not None:
                    wd = im.shape[-1] if real is None or v != AS_GIVEN else int(real)
                    out.append((t, v, im, wd))
                    continue
                if isinstance(item, Turns) or v[2]:  # too wide to read so; leans: crops only
                    continue
                base = np.asarray(have[t, AS_GIVEN])
                wd = base.shape[-1] if real is None else int(real)
                arr, w = stretch_line(base, wd, v[0], self.spec, zoom=v[1])
                out.append((t, v, _pad_to(arr, PAGE_WIDTH_STEP) if wd < base.shape[-1] else arr, w))
        return out

    def _predict_flat(
        self, images: list[Any], score: bool, widths: list[int] | None = None
    ) -> list[tuple[float, int, Prediction]]:
        """Each image's ``(score, frames, prediction)``: with ``score``, the CTC
        log-probability of its text (else 0) over its ``frames`` (the logits' columns it
        was read from); ``widths``: the images' real widths (the rest is padding)."""
        widths = [
            im.shape[-1] if widths is None or widths[i] is None else int(widths[i])
            for i, im in enumerate(images)
        ]
        # The network reads images of one width together; the decoder reads its logits
        # pooled over widths (_decode_pool): a crop read whole is a width of its own, and
        # the beam's per-frame work is then shared by a pool of reads instead of one. The
        # reads are those of each alone (frames past a read's length are surely blank).
        groups: dict[int, list[int]] = defaultdict(list)
        for i, im in enumerate(images):
            groups[im.shape[-1]].append(i)
        out: list[tuple[float, int, Prediction] | None] = [None] * len(images)
        pool: list[tuple[int, np.ndarray, int, bool]] = []  # (image, logits, frames, blank)
        longest = 0  # the pool's most frames
        for width in sorted(groups):
            idx = groups[width]
            for k in range(0, len(idx), self.batch_size):
                chunk = idx[k : k + self.batch_size]
                logits = self.backend(np.stack([np.asarray(images[i]) for i in chunk]))
                logits = np.asarray(_numpy(self.decoder.scale(logits)), np.float32)
                frames = np.full(len(chunk), logits.shape[1])
                if any(widths[i] < width for i in chunk):  # padded: its real frames only
                    real = self.backend.output_length(np.array([widths[i] for i in chunk]))
                    frames = np.minimum(np.asarray(real), logits.shape[1])
                for j, i in enumerate(chunk):
                    n = int(frames[j])
                    if (
                        len(pool) >= self.batch_size
                        or (len(pool) + 1) * max(n, longest) > DECODE_FRAMES
                    ):
                        self._decode_pool(pool, score, out)
                        longest = 0
                    pool.append((i, logits[j, :n], n, is_blank(images[i], widths[i])))
                    longest = max(longest, n)
        self._decode_pool(pool, score, out)
        return out  # type: ignore[return-value]

    def _decode_pool(
        self,
        pool: list[tuple[int, np.ndarray, int, bool]],
        score: bool,
        out: list[tuple[float, int, Prediction] | None],
    ) -> None:
        """Decode the pooled reads ``(image, its logits (frames, K), frames, blank)`` in
        one batch, padded to the longest, into ``out[image]`` as ``(score, frames,
        prediction)`` (see :meth:`_predict_flat`); empties ``pool``."""
        if not pool:
            return
        t_max = max(n for _, _, n, _ in pool)
        logits = np.zeros((len(pool), t_max, pool[0][1].shape[-1]), np.float32)
        for j, (_, row, n, _) in enumerate(pool):
            logits[j, :n] = row
        lengths = np.array([n for _, _, n, _ in pool])
        # Scored reads' log-probabilities, computed once for the decoder and the scores
        # (in float32; the scores' sums in float64).
        lp = log_softmax_np(logits) if score else None
        preds = self.decoder.decode_scaled(logits, lengths, [b for *_, b in pool], lp)
        for j, ((i, _, n, _), p) in enumerate(zip(pool, preds)):
            s = sequence_log_probs(lp[j][:n], [self.charset.encode(p.text)])[0] if score else 0.0
            out[i] = (s, n, p)
        pool.clear()

    def predict(self, images: ImageSource | Sequence[ImageSource]) -> list[Prediction]:
        """Paths, encoded bytes, PIL images or arrays -> one :class:`Prediction` each
        (``text``, ``confidence``, ``char_confidences``; unpacks as ``text, confidence``).

        A single image (not in a list) gives a list of one.
        """
        if isinstance(images, (str, os.PathLike, bytes, Path)) or not isinstance(images, Sequence):
            images = [images]
        loaded = [load_image(im, self.spec.rgb) for im in images]
        items = [self.preprocess(img) for img in loaded]
        preds = self.predict_preprocessed(items)
        return [self.locate(p, item, img.size) for p, item, img in zip(preds, items, loaded)]

    def locate(
        self,
        p: Prediction,
        item: Any,
        size: tuple[int, int],
        width: int | None = None,
        placement: Any = None,
    ) -> Prediction:
        """``p`` with its ``char_boxes``: each character's box on the image of ``size``
        (W, H) that :meth:`preprocess` made ``item`` of (a line of a page: ``width``, its
        real width, and ``placement``, where it sits; see ``crnn.layout.chars``)."""
        from crnn.layout.chars import Placement, char_boxes
        from crnn.layout.slant import shear_margin

        if not p.char_frames:
            return p
        # The pixels that gave p: the same read made again where preprocess() did not keep it.
        view = (p.stretch, p.zoom, p.lean)
        reads = self.reads_of(item, width, (view,))
        (read, wd), *_ = [(im, wd) for t, _, im, wd in reads if t == p.rotation]
        read = np.asarray(read)
        n = int(np.asarray(self.backend.output_length(np.array([wd])))[0])
        place = placement or Placement((0.0, 0.0, float(size[0]), float(size[1])), size)
        if p.lean:  # a crop sheared upright was widened on each side; its middle row stayed
            x0, y0, x1, y1 = place.rect
            pad = shear_margin(round(y1 - y0), p.lean)
            place = dataclasses.replace(place, rect=(x0 - pad, y0, x1 + pad, y1))
        boxes = char_boxes(read, wd, n, p.char_frames, p.text)
        # A zoomed read is the central rows of a read zoom times as tall: boxes on that one.
        height, top = zoom_rows(read.shape[-2], p.zoom)
        on_image = [
            place.box((b[0], b[1] + top, b[2], b[3] + top), wd, height, p.rotation) for b in boxes
        ]
        return dataclasses.replace(p, char_boxes=tuple(tuple(b) for b in on_image))
