"""The one Decoder: logits to :class:`~crnn.ctc.Prediction` objects, the same chain for
every path that reads (the Recognizer, hence predict, eval and the server, and training's
validation through :func:`crnn.evaluation.evaluate`):

    temperature -> greedy or prefix beam search (a language prior) -> lexicon
      -> the numeral fix -> the blank check (an image with no contrast reads "")

Built once from the reading options (:meth:`Decoder.build`: the Chinese model's beam and
prior by default); immutable, so a reader copied for one request swaps in another with
:func:`dataclasses.replace`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from crnn.ctc import Lexicon, Prediction, decode
from crnn.ctc.lm import CharBigram, default_beam, resolve_prior
from crnn.ctc.numerals import fix_prediction, fixes_numerals
from crnn.reading.calibration import scale_logits


@dataclass(frozen=True)
class Decoder:
    """How logits become text; see the module docstring. ``numerals`` is already the
    decision (the model writes both o and 0 and no lexicon is used)."""

    charset: Any
    temperature: float = 1.0
    beam_width: int = 0
    lexicon: Lexicon | None = None
    max_edits: int = 2
    lm: CharBigram | None = None
    lm_weight: float = 0.0
    numerals: bool = False

    @classmethod
    def build(
        cls,
        charset: Any,
        temperature: float = 1.0,
        beam_width: int | None = None,
        lexicon: Lexicon | str | os.PathLike[str] | Sequence[str] | None = None,
        max_edits: int = 2,
        lm: CharBigram | str | os.PathLike[str] | bool | None = None,
        lm_weight: float | None = None,
        numerals: bool = True,
    ) -> Decoder:
        """From the reading options as users give them: ``lm`` and ``lm_weight`` as
        :func:`crnn.ctc.lm.resolve_prior` reads them (the bundled prior for a Chinese
        model), ``beam_width`` None for the default (a beam with a prior, else greedy),
        ``lexicon`` a file, words or a Lexicon; ``numerals`` where the model can use it.
        Raises ``ValueError`` for a bad option."""
        lm, lm_weight = resolve_prior(lm, lm_weight, charset)
        beam = default_beam(beam_width, lm, lm_weight)
        if beam < 0:
            raise ValueError(f"beam_width must be >= 0 (0: greedy), got {beam}")
        if lexicon is not None and not isinstance(lexicon, Lexicon):
            if isinstance(lexicon, (str, os.PathLike)):
                lexicon = Lexicon.from_file(lexicon, charset)
            else:
                lexicon = Lexicon(lexicon, charset)
        fix = numerals and fixes_numerals(charset.chars, lexicon)
        return cls(charset, temperature, beam, lexicon, max_edits, lm, lm_weight, fix)

    def scale(self, logits: Any) -> Any:
        """The logits at this decoder's temperature (what scores and decoding both read)."""
        return scale_logits(logits, self.temperature)

    def __call__(
        self, logits: Any, lengths: Any = None, blank: Sequence[bool] | None = None
    ) -> list[Prediction]:
        """``(B, T, K)`` raw logits (``lengths``: each one's valid frames) -> one
        prediction each; ``blank``: which images hold nothing to read (they read "")."""
        return self.decode_scaled(self.scale(logits), lengths, blank)

    def decode_scaled(
        self,
        scaled: Any,
        lengths: Any = None,
        blank: Sequence[bool] | None = None,
        log_probs: Any = None,
    ) -> list[Prediction]:
        """:meth:`__call__` on logits already at this decoder's temperature
        (``log_probs``: their ``log_softmax``, where the caller has it)."""
        preds = decode(
            scaled,
            self.charset,
            lengths,
            beam_width=self.beam_width,
            lexicon=self.lexicon,
            max_edits=self.max_edits,
            lm=self.lm,
            lm_weight=self.lm_weight,
            log_probs=log_probs,
        )
        out = []
        for k, p in enumerate(preds):
            if blank is not None and blank[k]:
                p = Prediction("", 1.0)
            out.append(fix_prediction(p) if self.numerals else p)
        return out
