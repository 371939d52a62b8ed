"""The reading options as one typed object: what a front end asks of the reader
(decoding, views, layout, line finding, where the model runs), parsed once from the
command line (``crnn/cli/reading_args.py``) for predict, eval and serve, and turned into
a Recognizer by :meth:`ReadOptions.reader`."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ReadOptions:
    """See ``crnn-predict --help`` for each; None: the model's default (a Chinese
    model's beam, prior and views)."""

    # decoding
    beam: int | None = None
    lm: str | None = None
    lm_weight: float | None = None
    lexicon: str | None = None
    max_edits: int = 2
    numerals: bool = True
    # views and turns
    squeeze: bool = False
    rotate: str = "pages"
    stretch: tuple[float, ...] | None = None
    zoom: tuple[float, ...] | None = None
    deslant: float | None = None
    view_sure: float | None = None
    # layout and line finding
    layout: str = "auto"
    finder: str = "auto"
    detector: Any = "bundled"  # "bundled", a path, "none", or a detector object
    # where the model runs
    batch_size: int = 64
    device: str | None = None
    threads: int | None = None

    def __post_init__(self) -> None:
        if (self.beam or 0) < 0 or self.max_edits < 0:
            raise ValueError(
                f"--beam and --max-edits must be >= 0, got {self.beam} and {self.max_edits}"
            )

    @classmethod
    def from_args(cls, args: Any) -> ReadOptions:
        """The options an argparse namespace holds (those it lacks keep their defaults)."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in vars(args).items() if k in names and v is not None})

    def detector_object(self) -> Any:
        """The detector these options name (None: the classical finder only)."""
        from crnn.detect.runtime import bundled_detector, load_detector

        if self.detector in (None, "none") or self.layout == "line" or self.finder == "classical":
            return None
        if self.detector == "bundled":
            det = bundled_detector(threads=self.threads)
            if det is None and self.finder == "detector":
                raise ValueError("--finder detector: no detector is bundled; pass --detector PATH")
            return det
        if isinstance(self.detector, str):
            return load_detector(self.detector, threads=self.threads)
        return self.detector

    def reader(self, checkpoint: str, **extra: Any) -> Any:
        """The Recognizer of ``checkpoint`` read with these options (``extra``: more of
        ``Recognizer.from_checkpoint``'s)."""
        from crnn.reading.recognizer import Recognizer

        return Recognizer.from_checkpoint(
            checkpoint,
            device=self.device,
            threads=self.threads,
            batch_size=self.batch_size,
            beam_width=self.beam,
            lexicon=self.lexicon,
            max_edits=self.max_edits,
            rotate=self.rotate,
            squeeze=self.squeeze,
            numerals=self.numerals,
            stretch=self.stretch,
            zoom=self.zoom,
            deslant=self.deslant,
            view_sure=self.view_sure,
            lm=self.lm,
            lm_weight=self.lm_weight,
            detector=self.detector_object(),
            finder=self.finder,
            **extra,
        )
