"""Datasets: where samples come from, which are usable, and how one becomes a tensor.

A *source* is a random-access store of ``(image bytes, label)``: an LMDB
(:class:`~crnn.data.lmdb.LmdbReader`) or an image folder with a ``gt.txt``
(:class:`FolderSource`). :class:`RecognitionDataset` combines sources, filters
labels the model cannot learn (counting each reason and saying so), and turns a
sample into a ``uint8`` image tensor and its target ids. :class:`SynthDataset` does
the same for the on-the-fly synthetic generator.
"""

from __future__ import annotations

import logging
import os
import random
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from PIL import Image
from torch.utils.data import Dataset

from crnn.data.formats import FolderSource
from crnn.data.gt import GT_NAME
from crnn.data.image import (
    INFERENCE_MAX_WIDTH,
    ImageDecodeError,
    ImageSpec,
    fit_width,
    from_array,
    load_image,
    open_image,
    oriented_size,
    preprocess_array,
    resize,
    resized_width,
    to_model_height,
)
from crnn.data.lmdb import LmdbFormatError, LmdbReader, find_lmdb_roots, is_lmdb_dir
from crnn.data.transforms import TrainAugment, to_tensor
from crnn.text.alphabet import Charset, UnknownCharacterError

log = logging.getLogger(__name__)

# Datasets up to this size without stored image sizes get their headers scanned for
# width bucketing; larger ones estimate widths from label lengths.
_MAX_HEADER_SCAN = 200_000
# Skip reasons, in the order they are reported.
SKIP_REASONS = ("empty", "unknown_chars", "too_long")


class Source(Protocol):
    name: str

    def __len__(self) -> int: ...
    def image_bytes(self, index0: int) -> bytes: ...
    def label(self, index0: int) -> str: ...
    def labels(self) -> list[str]: ...
    def sizes(self) -> list[tuple[int, int]] | None: ...
    def at_model_height(self, index0: int, spec: ImageSpec) -> Image.Image | np.ndarray:
        """Decoded and resized to the model's height, whole width kept (PIL, or
        ``(C, H, W)`` uint8 from a prepared LMDB). Raises ``ImageDecodeError``."""
        ...


class _LmdbSource(LmdbReader):
    @property
    def name(self) -> str:
        return self.path.name

    def check_prepared(self, spec: ImageSpec) -> None:
        """Refuse a prepared LMDB whose pixels do not fit the model's input."""
        meta = self.prepared
        if meta is None:
            return
        if (meta["height"], meta["channels"]) != (spec.height, spec.channels):
            raise LmdbFormatError(
                f"{str(self.path)!r} is a prepared LMDB of {meta['channels']}-channel images "
                f"{meta['height']} px high, but the model reads {spec.channels}-channel images "
                f"{spec.height} px high. Recreate it from the images with tools/create_lmdb.py "
                f"--prepared --height {spec.height}{' --rgb' if spec.rgb else ''}, or train "
                "on an LMDB of image files."
            )
        if (meta.get("min_width"), meta.get("width_multiple")) != (
            spec.min_width,
            spec.width_multiple,
        ):
            log.info(
                "%s: prepared with min_width %s and width_multiple %s, the model uses %d and "
                "%d: images are re-fitted from the stored pixels (same as the image files "
                "give up to rounding)",
                self.path,
                meta.get("min_width"),
                meta.get("width_multiple"),
                spec.min_width,
                spec.width_multiple,
            )

    def at_model_height(self, index0: int, spec: ImageSpec) -> Image.Image | np.ndarray:
        if self.prepared is not None:
            return self.pixels(index0)
        return to_model_height(load_image(self.image_bytes(index0), spec.rgb), spec)

    def describe(self, index0: int) -> str:
        return f"{self.path}#{index0 + 1}"


def open_sources(
    paths: Sequence[str | os.PathLike[str]], index_file: str | os.PathLike[str] | None = None
) -> list[Source]:
    """LMDB directories, folders holding LMDBs, image folders with a ``gt.txt`` or with a
    ``NAME.txt`` beside each image, or a label file (``gt``, PaddleOCR or index-list
    format, image paths relative to its folder). ``index_file``: the alphabet file an
    index list's numbers refer to (the charset file)."""
    from crnn.data.formats import IMAGE_SUFFIXES

    sources: list[Source] = []
    for p in paths:
        path = Path(p)
        if path.is_file() and path.name.endswith(".txt"):
            sources.append(FolderSource(path.parent, path.name, index_file))
        elif (path / GT_NAME).is_file() and not is_lmdb_dir(path):
            sources.append(FolderSource(path, GT_NAME, index_file))
        elif (
            path.is_dir()
            and not is_lmdb_dir(path)
            and not find_lmdb_roots(path)
            and any(q.suffix == ".txt" for q in path.iterdir())
            and any(q.suffix.lower() in IMAGE_SUFFIXES for q in path.iterdir())
        ):
            sources.append(FolderSource(path, None))
        else:
            sources.extend(_LmdbSource(root) for root in find_lmdb_roots(path))
    return sources


def _header_sizes(source: Source) -> list[tuple[int, int]]:
    sizes = []
    for i in range(len(source)):
        try:
            with open_image(source.image_bytes(i)) as im:
                sizes.append(oriented_size(im))
        except Exception:  # noqa: BLE001 -- unreadable images are reported when loaded
            sizes.append((0, 0))
    return sizes


def ctc_steps_needed(ids: Sequence[int]) -> int:
    """Frames CTC needs for a label: one per character plus a blank between repeats."""
    return len(ids) + sum(1 for a, b in zip(ids, ids[1:]) if a == b)


class LabelWidth:
    """The narrowest input width (a multiple of ``multiple``) whose output fits a label."""

    def __init__(self, output_length: Callable[[int], int], multiple: int) -> None:
        self.output_length = output_length
        self.multiple = multiple
        self._cache: dict[int, int] = {}

    def __call__(self, target: Sequence[int]) -> int:
        steps = ctc_steps_needed(target)
        if steps not in self._cache:
            w = self.multiple
            while self.output_length(w) < steps:
                w += self.multiple
            self._cache[steps] = w
        return self._cache[steps]


class RecognitionDataset(Dataset):
    """Samples from one or more sources, filtered and preprocessed.

    Args:
        sources: from :func:`open_sources`.
        charset: labels are normalised and encoded with it.
        spec: image preprocessing.
        output_length: ``width -> time steps`` of the model (``CRNN.output_length``):
            labels longer than the widest image can hold are skipped, and narrower
            images are widened so their label fits.
        unknown_chars: ``"skip"`` (count) or ``"error"`` (raise) for labels with
            characters outside the charset.
        max_label_length: skip longer labels (0: no limit but the model's).
        augment: training augmentations, or None for evaluation.
        evaluation: keep labels with unknown characters or too long for the model
            (they count as errors, as they should in a benchmark); only empty labels
            are skipped.

    ``self.skipped`` counts samples left out by reason; ``self.widths`` holds each kept
    sample's resized width (exact when the source stores sizes, else estimated) for
    width-bucketed batching. Items are dicts (see :meth:`__getitem__`).
    """

    def __init__(
        self,
        sources: Sequence[Source],
        charset: Charset,
        spec: ImageSpec,
        output_length: Callable[[int], int],
        unknown_chars: str = "skip",
        max_label_length: int = 0,
        augment: TrainAugment | None = None,
        evaluation: bool = False,
        squeeze: bool = False,
    ) -> None:
        self.sources = list(sources)
        self.evaluation = evaluation
        self.charset = charset
        self.spec = spec
        self.augment = augment
        self.min_width = LabelWidth(output_length, spec.width_multiple)
        self._unknown = unknown_chars
        # Evaluation reads images as inference does, whole (never squeezed to the
        # training cap, unless ``squeeze``); training caps them at spec.max_width.
        self._max_width = INFERENCE_MAX_WIDTH if evaluation and not squeeze else spec.max_width
        max_steps = output_length(spec.max_width // spec.width_multiple * spec.width_multiple)
        src_ids: list[int] = []
        indices: list[int] = []
        targets: list[int] = []
        offsets = [0]
        widths: list[int] = []
        eval_labels: list[str] = []
        self.skipped: Counter[str] = Counter()
        self.skip_examples: dict[str, list[str]] = defaultdict(list)
        for s_id, src in enumerate(self.sources):
            if isinstance(src, _LmdbSource):
                src.check_prepared(spec)
            labels = src.labels()
            sizes = src.sizes()
            if sizes is None and len(src) <= _MAX_HEADER_SCAN:
                sizes = _header_sizes(src)
            before = Counter(self.skipped)
            for i, raw in enumerate(labels):
                reason, ids = self._check_label(raw, max_steps, max_label_length, src, i)
                if reason:
                    self.skipped[reason] += 1
                    if len(self.skip_examples[reason]) < 3:
                        self.skip_examples[reason].append(f"{raw!r} ({src.describe(i)})")  # type: ignore[attr-defined]
                    continue
                src_ids.append(s_id)
                indices.append(i)
                if self.evaluation:
                    eval_labels.append(self.charset.normalize(raw))
                targets.extend(ids)
                offsets.append(len(targets))
                if sizes is not None and sizes[i][0] > 0:
                    widths.append(resized_width(sizes[i][0], sizes[i][1], spec, 0, self._max_width))
                else:  # no size known: about 0.6 height per character
                    guess = int(0.6 * spec.height * len(ids)) + 1
                    widths.append(resized_width(guess, spec.height, spec, 0, self._max_width))
            dropped = self.skipped - before
            kept = len(labels) - sum(dropped.values())
            msg = f"{src.name}: {kept} of {len(labels)} samples kept"
            if dropped:
                msg += (
                    " (skipped "
                    + ", ".join(f"{r.replace('_', ' ')}: {n}" for r, n in dropped.items())
                    + ")"
                )
            log.info(msg)
        if self.skipped:
            for reason in SKIP_REASONS:
                if self.skipped[reason]:
                    log.warning(
                        "skipped %d labels (%s), e.g. %s%s",
                        self.skipped[reason],
                        reason.replace("_", " "),
                        ", ".join(self.skip_examples[reason]),
                        _SKIP_HINTS[reason],
                    )
        id_dtype = np.int16 if charset.num_classes < 2**15 else np.int32
        self._src = np.asarray(src_ids, dtype=np.int32)
        self._idx = np.asarray(indices, dtype=np.int64)
        self._targets = np.asarray(targets, dtype=id_dtype)
        self._offsets = np.asarray(offsets, dtype=np.int64)
        self.widths = np.asarray(widths, dtype=np.int32)
        self._eval_labels = eval_labels

    def _check_label(
        self, raw: str, max_steps: int, max_len: int, src: Source, i: int
    ) -> tuple[str, list[int]]:
        text = self.charset.normalize(raw)
        if not text.strip():
            return "empty", []
        if self.evaluation:
            # The label as the model would have to write it; characters it cannot write
            # are left out of the width computation only.
            return "", [self.charset.index(c) for c in text if c in self.charset]
        try:
            ids = self.charset.encode(text)
        except UnknownCharacterError as e:
            if self._unknown == "error":
                raise UnknownCharacterError(
                    raw, e.unknown, f"{self.charset.name} ({src.describe(i)})"
                ) from None  # type: ignore[attr-defined]
            return "unknown_chars", []
        if ctc_steps_needed(ids) > max_steps or (max_len and len(ids) > max_len):
            return "too_long", []
        return "", ids

    def __len__(self) -> int:
        return len(self._idx)

    def width_hint(self, i: int) -> float:
        """Item ``i``'s width after resizing (read from the image header, or guessed from
        its label): what the training sampler batches similar widths by."""
        return float(self.widths[i])

    def target(self, i: int) -> list[int]:
        return self._targets[self._offsets[i] : self._offsets[i + 1]].tolist()

    def label(self, i: int) -> str:
        """The text the model should output for sample ``i`` (charset-normalised)."""
        if self.evaluation:
            return self._eval_labels[i]
        return self.charset.decode(self.target(i))

    def original(self, i: int) -> tuple[bytes | np.ndarray, str, str]:
        """Sample ``i`` as a reader takes it: its image file's bytes (a prepared LMDB's
        stored pixels, ``(H, W)`` or ``(H, W, 3)``), its raw label and where it is from.
        Raises ``LmdbFormatError`` for a damaged record."""
        src = self.sources[int(self._src[i])]
        j = int(self._idx[i])
        if isinstance(src, _LmdbSource) and src.prepared is not None:
            a = src.pixels(j)
            image: bytes | np.ndarray = a[0] if a.shape[0] == 1 else a.transpose(1, 2, 0)
        else:
            image = src.image_bytes(j)
        return image, src.label(j), src.describe(j)  # type: ignore[attr-defined]

    def __getitem__(self, key: int | tuple[int, int]) -> dict[str, Any]:
        """``key`` is an index, or ``(index, seed)`` to seed this sample's augmentation.

        Returns ``{"image": (C, H, W) uint8, "target": list[int], "label": str,
        "raw_label": str}``, or ``{"error": message}`` for an image that won't decode
        (the collate function drops and counts those).
        """
        i, seed = key if isinstance(key, tuple) else (key, key)
        src = self.sources[int(self._src[i])]
        j = int(self._idx[i])
        target = self.target(i)
        try:
            # Two steps, the first of which a prepared LMDB has done once for all epochs:
            # to the model's height (whole width), then fitted to this sample's limits.
            img = src.at_model_height(j, self.spec)
        except ImageDecodeError as e:
            return {"error": f"{src.describe(j)}: {e}"}  # type: ignore[attr-defined]
        min_width = min(self.min_width(target), self.spec.max_width)
        img = fit_width(img, self.spec, min_width, self._max_width)
        if self.augment is not None:
            if isinstance(img, np.ndarray):
                img = from_array(img)
            img = self.augment(img, random.Random(seed))
        return {
            "image": to_tensor(img),
            "target": target,
            "label": self.label(i),
            "raw_label": src.label(j),
            "source": src.describe(j),  # type: ignore[attr-defined]
        }


_SKIP_HINTS = {
    "empty": ". Empty labels teach nothing; fix the ground truth or leave them out.",
    "unknown_chars": (
        ". Choose a charset that holds them (--set data.charset=ascii94 or a .txt file), "
        "or --set data.unknown_chars=error to stop on them."
    ),
    "too_long": (
        ". They need more CTC frames than the widest image gives; raise data.max_width "
        "(or data.max_label_length if you set it)."
    ),
}


class SynthDataset(Dataset):
    """Synthetic samples rendered on the fly: item ``i`` is ``generator.render(offset + i)``.

    Deterministic in the index, so DDP ranks and DataLoader workers, which are given
    disjoint indices by the sampler, never see the same stream, and a resumed run sees
    the same images.
    """

    def __init__(
        self,
        generator: Any,
        charset: Charset,
        spec: ImageSpec,
        output_length: Callable[[int], int],
        length: int = 2**62,
        offset: int = 0,
        augment: TrainAugment | None = None,
    ) -> None:
        self.generator = generator
        self.charset = charset
        self.spec = spec
        self.length = length
        self.offset = offset
        self.augment = augment
        self.min_width = LabelWidth(output_length, spec.width_multiple)

    def __len__(self) -> int:
        return self.length

    def width_hint(self, i: int) -> float:
        """About how many pixels wide item ``i`` comes out, from its label alone (a
        full-width character about one line height, others about half): what the
        training sampler batches similar widths by. Nothing is drawn."""
        text = self.generator.label(self.offset + i)
        wide = sum(unicodedata.east_asian_width(c) in "WF" for c in text)
        return self.spec.height * (wide + 0.55 * (len(text) - wide))

    def __getitem__(self, key: int | tuple[int, int]) -> dict[str, Any]:
        i, seed = key if isinstance(key, tuple) else (key, key)
        img, text = self.generator.render(self.offset + i)
        target = self.charset.encode(text)
        img = load_image(img, self.spec.rgb)
        img = resize(img, self.spec, self.min_width(target))
        if self.augment is not None:
            img = self.augment(img, random.Random(seed))
        label = self.charset.decode(target)
        return {
            "image": to_tensor(img),
            "target": target,
            "label": label,
            "raw_label": label,
            "source": f"synth#{self.offset + i}",
        }


class MixedDataset(Dataset):
    """Several datasets behind one index: items are ``(part, index, seed)`` keys, as
    :class:`~crnn.data.batching.MixedBatchSampler` yields them."""

    def __init__(self, parts: Sequence[Dataset]) -> None:
        self.parts = list(parts)

    def __getitem__(self, key: tuple[int, int, int]) -> dict[str, Any]:
        part, index, seed = key
        return {**self.parts[part][(index, seed)], "part": part}


def sample_images(
    charset: Charset,
    spec: ImageSpec,
    count: int,
    data: Sequence[str] | None = None,
    offset: int = 0,
    seed: int = 0,
) -> list[np.ndarray]:
    """``count`` preprocessed ``(C, H, W)`` uint8 images, e.g. to calibrate or check an
    int8 export.

    From ``data`` (LMDBs or image folders, as for training; a seeded shuffle, images
    ``offset .. offset + count`` of it, so two calls with different offsets give
    disjoint sets), or when ``data`` is empty rendered by the synthetic generator
    (indices from ``offset``). Images that do not decode are left out.
    """
    out: list[np.ndarray] = []
    if data:
        sources = open_sources(data)
        items = [(s, i) for s in sources for i in range(len(s))]
        order = np.random.default_rng(seed).permutation(len(items))[offset : offset + count]
        for k in order.tolist():
            src, i = items[k]
            try:
                if getattr(src, "prepared", None) is not None:
                    out.append(src.pixels(i))  # type: ignore[attr-defined]
                else:
                    out.append(preprocess_array(src.image_bytes(i), spec))
            except ImageDecodeError:
                continue
        return out
    from crnn.config import SynthConfig
    from crnn.data.synth import SynthGenerator

    gen = SynthGenerator(charset, SynthConfig(), seed=seed, height=spec.height, rgb=spec.rgb)
    for i in range(offset, offset + count):
        img, _ = gen.render(i)
        out.append(preprocess_array(img, spec))
    return out
