"""Prepared LMDBs (training-ready pixels) and the parallel LMDB writer.

A prepared LMDB must give the very pixels the image LMDB gives, for every kind of image
(narrow ones widened for their label, wide ones squeezed to the training cap, colour,
transparency, other heights), with augmentation off and on, in training and evaluation;
and the parallel writer must lose, duplicate or reorder nothing.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch
from conftest import render_word
from PIL import Image

from crnn.config import AugmentConfig
from crnn.data import create as lm
from crnn.data.batching import collate
from crnn.data.create import create_lmdb
from crnn.data.datasets import RecognitionDataset, open_sources, sample_images
from crnn.data.image import ImageDecodeError, ImageSpec
from crnn.data.lmdb import LmdbFormatError, LmdbReader
from crnn.data.transforms import TrainAugment
from crnn.model import CRNN
from crnn.text.alphabet import Charset

T = CRNN(37).output_length
SPEC = ImageSpec(height=32, max_width=128)


def _varied_folder(root, n=40):
    """Images of every kind the two paths could treat differently."""
    (root / "images").mkdir(parents=True)
    rng = random.Random(0)
    lines = []
    for i in range(n):
        kind = i % 5
        label = rng.choice(["cat", "road", "lamp", "stone"])
        img = render_word(label, height=rng.choice([20, 32, 47, 64]), seed=i)
        if kind == 1:  # long line: squeezed to max_width in training
            img = img.resize((img.width * 5, img.height))
        elif kind == 2:  # narrow image, long label: widened so the label fits
            img, label = img.resize((12, img.height)), "abcdefghijkl"
        elif kind == 3:  # colour
            img = Image.merge("RGB", (img, img.point(lambda v: v // 2), img))
        elif kind == 4:  # transparency: composited on white
            img = img.convert("LA")
        name = f"images/{i:03d}.png"
        img.save(root / name)
        lines.append(f"{name}\t{label}")
    (root / "gt.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    root = _varied_folder(tmp_path_factory.mktemp("varied"))
    out = tmp_path_factory.mktemp("lmdbs")
    create_lmdb(root, root / "gt.txt", out / "images", progress=False)
    create_lmdb(root, root / "gt.txt", out / "prepared", progress=False, prepared=True)
    return out / "images", out / "prepared"


def _dataset(path, augment=None, evaluation=False, spec=SPEC):
    return RecognitionDataset(
        open_sources([path]),
        Charset.from_spec("alnum36"),
        spec,
        T,
        augment=augment,
        evaluation=evaluation,
    )


@pytest.mark.parametrize("evaluation", [False, True])
@pytest.mark.parametrize("augment", [False, True])
def test_prepared_lmdb_gives_the_same_pixels_as_the_image_lmdb(both, augment, evaluation):
    aug = TrainAugment(AugmentConfig()) if augment else None
    a, b = _dataset(both[0], aug, evaluation), _dataset(both[1], aug, evaluation)
    assert len(a) == len(b) == 40
    assert a.widths.tolist() == b.widths.tolist()
    widths = set()
    for i in range(len(a)):
        x, y = a[(i, 7 + i)], b[(i, 7 + i)]
        assert x["label"] == y["label"] and x["target"] == y["target"]
        assert x["image"].shape == y["image"].shape, i
        assert torch.equal(x["image"], y["image"]), f"sample {i} differs"
        widths.add(x["image"].shape[-1])
    # The cases that matter were exercised: squeezed to the cap, and widened.
    assert (128 in widths) != evaluation
    assert max(widths) > 128 or not evaluation


def test_prepared_lmdb_trains_through_the_loader(both):
    ds = _dataset(both[1], TrainAugment(AugmentConfig()))
    batch = collate([ds[(i, i)] for i in range(8)])
    assert batch["images"].dtype == torch.uint8 and batch["images"].shape[:3] == (8, 1, 32)
    assert not batch["errors"]
    assert len(sample_images(Charset.from_spec("alnum36"), SPEC, 5, [str(both[1])])) == 5


def test_a_prepared_lmdb_for_another_height_or_channels_is_refused(both):
    with pytest.raises(LmdbFormatError, match="1-channel images 32 px high.*--height 48 --rgb"):
        _dataset(both[1], spec=ImageSpec(height=48, rgb=True))
    with pytest.raises(LmdbFormatError, match="prepared LMDB"):
        LmdbReader(both[1]).image_bytes(0)


def _contents(path):
    import lmdb

    env = lmdb.open(str(path), readonly=True, lock=False)
    with env.begin() as txn:
        items = dict(txn.cursor())
    env.close()
    return items


@pytest.mark.parametrize("prepared", [False, True])
def test_the_parallel_writer_loses_duplicates_and_reorders_nothing(tmp_path, monkeypatch, prepared):
    root = _varied_folder(tmp_path / "src", n=30)
    gt = (root / "gt.txt").read_text().splitlines()
    gt.insert(5, "images/missing.png\tlost")  # reported, the rest written in order
    (root / "images" / "broken.png").write_bytes(b"not a png")
    gt.insert(11, "images/broken.png\tbroken")
    (root / "gt.txt").write_text("\n".join(gt) + "\n")
    serial = create_lmdb(
        root, root / "gt.txt", tmp_path / "serial", progress=False, prepared=prepared, workers=1
    )
    monkeypatch.setattr(lm, "_MIN_POOL_IMAGES", 0)
    pooled = create_lmdb(
        root, root / "gt.txt", tmp_path / "pooled", progress=False, prepared=prepared, workers=2
    )
    assert serial.written == pooled.written == 30
    assert [n for n, _ in serial.bad] == [n for n, _ in pooled.bad] == [6, 12]
    assert _contents(tmp_path / "serial") == _contents(tmp_path / "pooled")
    labels = [line.split("\t")[1] for line in gt if "missing" not in line and "broken" not in line]
    assert LmdbReader(tmp_path / "pooled").labels() == labels
    if prepared:
        px = LmdbReader(tmp_path / "pooled").pixels(0)
        assert px.dtype == np.uint8 and px.shape[:2] == (1, 32)


def test_images_1_and_50000_px_wide_train_without_trouble(tmp_path):
    """A sliver and a page-wide strip: both load (widened to the label's need, squeezed
    to the training cap), from image files and from a prepared LMDB alike."""
    (tmp_path / "src" / "images").mkdir(parents=True)
    Image.new("L", (1, 40), 200).save(tmp_path / "src" / "images" / "thin.png")
    Image.new("L", (50_000, 40), 200).save(tmp_path / "src" / "images" / "wide.png")
    (tmp_path / "src" / "gt.txt").write_text("images/thin.png\tab\nimages/wide.png\tlong\n")
    for prepared in (False, True):
        out = tmp_path / f"db{prepared}"
        report = create_lmdb(
            tmp_path / "src", tmp_path / "src" / "gt.txt", out, progress=False, prepared=prepared
        )
        assert report.written == 2 and not report.bad
        ds = _dataset(out)
        shapes = [tuple(ds[i]["image"].shape) for i in range(2)]
        assert shapes[0][:2] == (1, 32) and 16 <= shapes[0][2] <= 128
        assert shapes[1] == (1, 32, 128)


# ---- checking PNGs without rebuilding their pixels --------------------------------------


def _png(im: Image.Image, **kw) -> bytes:
    import io

    buf = io.BytesIO()
    im.save(buf, format="PNG", **kw)
    return buf.getvalue()


def _pillow_reads(data: bytes) -> bool:
    import io

    try:
        with Image.open(io.BytesIO(data)) as im:
            im.load()
        return True
    except Exception:  # noqa: BLE001
        return False


def _kinds() -> dict[str, bytes]:
    rng = np.random.default_rng(0)
    rgba = Image.fromarray(rng.integers(0, 255, (23, 37, 4), dtype=np.uint8), "RGBA")
    return {
        "L": _png(rgba.convert("L")),
        "RGB": _png(rgba.convert("RGB")),
        "RGBA": _png(rgba),
        "LA": _png(rgba.convert("LA")),
        "P": _png(rgba.convert("P")),
        "1": _png(rgba.convert("1")),
        "I;16": _png(Image.fromarray(rng.integers(0, 65535, (9, 11), dtype=np.uint16))),
        "1x1": _png(Image.new("L", (1, 1))),
        "wide": _png(Image.new("RGB", (4000, 3))),
    }


def test_png_check_gives_the_size_for_every_kind_of_png():
    import io

    for kind, data in _kinds().items():
        assert lm.check_png(data) == Image.open(io.BytesIO(data)).size, kind
    assert lm.check_png(b"not a png") is None  # left to the decoder
    import struct
    import zlib

    png = _png(Image.new("L", (9, 9)))  # marked interlaced (Pillow writes none): idem
    ihdr = png[12:28] + b"\x01"  # type and data, the interlace byte last
    interlaced = png[:12] + ihdr + struct.pack(">I", zlib.crc32(ihdr)) + png[33:]
    assert lm.check_png(interlaced) is None


def test_png_check_refuses_what_pillow_cannot_read_and_corrupted_pixels():
    """Every truncation that Pillow refuses is refused (none that it reads); a flipped
    byte is caught by the chunk's CRC even where Pillow would decode wrong pixels; a row
    with an unknown filter type, behind a valid CRC, is refused as Pillow refuses it."""
    import struct
    import zlib

    def ours_read(data: bytes) -> bool:
        try:
            size = lm.check_png(data)
        except ImageDecodeError:
            return False
        return _pillow_reads(data) if size is None else True

    for kind, data in _kinds().items():
        for cut in range(8, len(data), max(1, len(data) // 40)):
            assert ours_read(data[:cut]) == _pillow_reads(data[:cut]), (kind, cut)
    data = _kinds()["RGB"]
    start = data.index(b"IDAT") + 4
    flipped = data[: start + 50] + bytes([data[start + 50] ^ 1]) + data[start + 51 :]
    with pytest.raises(ImageDecodeError, match="IDAT chunk fails its CRC"):
        lm.check_png(flipped)
    # Pixel data recompressed behind a valid CRC: an unknown filter type (9) on the
    # first row, or half the rows missing.
    n = struct.unpack(">I", data[start - 8 : start - 4])[0]
    raw = zlib.decompress(data[start : start + n])

    def with_pixels(pixels: bytes) -> bytes:
        body = zlib.compress(pixels)
        crc = struct.pack(">I", zlib.crc32(b"IDAT" + body))
        return (
            data[: start - 8]
            + struct.pack(">I", len(body))
            + b"IDAT"
            + body
            + crc
            + data[start + n + 4 :]
        )

    for pixels, why in (
        (b"\x09" + raw[1:], "unknown filter type"),
        (raw[: len(raw) // 2], "ends early"),
    ):
        assert not _pillow_reads(with_pixels(pixels))
        with pytest.raises(ImageDecodeError, match=why):
            lm.check_png(with_pixels(pixels))
