"""Images that never stop a run: a decompression bomb, a truncated file and pixel modes
that do not convert are reported by name and skipped in predict, eval, create_lmdb and
training (the rest are read, exit code 1 where a tool reports); a phone photo's EXIF
orientation is applied wherever images are loaded."""

from __future__ import annotations

import io
import shutil
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
from ckpt_helpers import run_main
from conftest import TINY_MODEL
from PIL import Image

from crnn.cli import create_lmdb as create_lmdb_cli
from crnn.cli import eval as eval_cli
from crnn.cli import predict as predict_cli
from crnn.cli import train as train_cli
from crnn.data.image import MAX_PIXELS, ImageDecodeError, load_image
from crnn.reading.recognizer import Recognizer, default_checkpoint

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "data" / "samples" / "word_01.png"  # "homeland"


def png_bomb(width: int = 30_000, height: int = 30_000) -> bytes:
    """A valid 1-bit PNG of width x height white pixels: a few KB on disk."""
    raw = b"".join(b"\x00" + b"\xff" * ((width + 7) // 8) for _ in range(1))
    comp = zlib.compressobj(9)
    row = b"\x00" + b"\xff" * ((width + 7) // 8)
    data = b"".join(comp.compress(row) for _ in range(height)) + comp.flush()
    del raw

    def chunk(tag: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + tag + body + struct.pack(">I", zlib.crc32(tag + body))

    ihdr = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", data) + chunk(b"IEND", b"")


def bad_files(folder: Path) -> dict[str, str]:
    """Bad images in ``folder``: name -> what the report must say."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "bomb.png").write_bytes(png_bomb())
    buf = io.BytesIO()
    Image.open(SAMPLE).convert("RGB").save(buf, "JPEG")
    (folder / "truncated.jpg").write_bytes(buf.getvalue()[: len(buf.getvalue()) // 2])
    (folder / "notanimage.png").write_bytes(b"hello")
    return {
        "bomb.png": "pixels",
        "truncated.jpg": "truncated.jpg",
        "notanimage.png": "notanimage.png",
    }


def test_a_bomb_is_refused_before_its_pixels_are_decoded(tmp_path: Path) -> None:
    data = png_bomb()
    assert len(data) < 200_000
    with pytest.raises(ImageDecodeError, match=r"30000 x 30000 pixels.*MAX_PIXELS|too many pixels"):
        load_image(data)
    assert 30_000 * 30_000 > MAX_PIXELS


def test_our_own_pixel_limit_trips_below_pillows(tmp_path: Path) -> None:
    """11,000 x 11,000 (121 MP) is over MAX_PIXELS (120 MP) and under the size at which
    Pillow itself refuses (2 x 89.5 MP): only our check stands between it and 121 MB of
    pixels, so this fails if that check goes."""
    assert MAX_PIXELS < 11_000 * 11_000 < 2 * Image.MAX_IMAGE_PIXELS
    with pytest.raises(ImageDecodeError, match=r"11000 x 11000 pixels, more than the 120,000,000"):
        load_image(png_bomb(11_000, 11_000))


def test_postscript_never_reaches_ghostscript(monkeypatch) -> None:
    """An EPS upload is refused at open: Pillow would hand it to Ghostscript to render."""
    from PIL import EpsImagePlugin

    called = []
    monkeypatch.setattr(EpsImagePlugin, "Ghostscript", lambda *a, **k: called.append(a))
    eps = (
        b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 10 10\n"
        b"0 0 moveto 10 10 lineto stroke\nshowpage\n%%EOF\n"
    )
    with pytest.raises(
        ImageDecodeError, match="convert other formats, PDF and PostScript included"
    ):
        load_image(eps)
    assert not called


def test_sixteen_bit_and_float_greys_are_scaled_not_clipped_white() -> None:
    arr = (np.arange(64 * 32).reshape(32, 64) * 30).astype(np.uint16)
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, "PNG")  # uint16: a 16-bit grey PNG
    img = load_image(buf.getvalue())
    out = np.asarray(img)
    assert img.mode == "L" and out.min() == 0 and out.max() == 255


def test_predict_reads_a_folder_past_bad_images_and_names_each(tmp_path: Path, capsys) -> None:
    folder = tmp_path / "in"
    expected = bad_files(folder)
    shutil.copy(SAMPLE, folder / "good.png")
    rc, out, err = run_main(predict_cli.main, str(folder), capsys=capsys)
    assert rc == 1
    assert "good.png\thomeland" in out
    for name, words in expected.items():
        line = next((x for x in err.splitlines() if name in x), "")
        assert line and words in line, (name, err)
    assert "Traceback" not in err


def test_exif_orientation_is_applied_where_images_are_loaded(tmp_path: Path, capsys) -> None:
    # The word stored as a phone does: sensor-sideways pixels, orientation 8 in EXIF.
    sideways = Image.open(SAMPLE).convert("RGB").transpose(Image.Transpose.ROTATE_270)
    exif = Image.Exif()
    exif[0x0112] = 8
    path = tmp_path / "phone.jpg"
    sideways.save(path, "JPEG", quality=95, exif=exif)
    assert Image.open(path).size[0] < Image.open(path).size[1]  # stored taller than wide
    assert load_image(path).size[0] > load_image(path).size[1]  # read upright
    rc, out, _ = run_main(predict_cli.main, str(path), capsys=capsys)
    assert rc == 0 and out.strip().split("\t")[1] == "homeland"
    # A PIL image opened by the caller keeps its tag too.
    assert Recognizer.bundled("word").predict([Image.open(path)])[0].text == "homeland"
    # create_lmdb stores the size as shown (bucketing sorts by it).
    (tmp_path / "gt.txt").write_text("phone.jpg\thomeland\n", encoding="utf-8")
    rc, _, err = run_main(
        create_lmdb_cli.main, "--root", tmp_path, "--out", tmp_path / "db", capsys=capsys
    )
    assert rc == 0, err
    from crnn.data.lmdb import LmdbReader

    ((w, h),) = LmdbReader(tmp_path / "db").sizes()
    assert w > h


def test_eval_create_lmdb_and_training_skip_bad_images_and_count_them(
    tmp_path: Path, capsys, word_folder: Path
) -> None:
    data = tmp_path / "data"
    shutil.copytree(word_folder, data)
    bad = bad_files(data / "images")
    with open(data / "gt.txt", "a", encoding="utf-8") as f:
        for name in bad:
            f.write(f"images/{name}\tcat\n")
    rc, _, err = run_main(
        create_lmdb_cli.main, "--root", data, "--out", tmp_path / "db", capsys=capsys
    )
    assert rc == 1 and all(name in err for name in bad), err
    # No worker processes: forked beside ONNX Runtime's threads (the .onnx model, loaded in
    # this pytest process) they once hung for good.
    rc, _, err = run_main(
        eval_cli.main, default_checkpoint(), data, "--workers", "0", capsys=capsys
    )
    assert "Traceback" not in err and rc == 1
    assert "3 images could not be read" in err and all(name in err for name in bad), err
    args = [
        "--train",
        str(data),
        "--val",
        str(word_folder),
        "--output-dir",
        str(tmp_path / "run"),
        "--set",
        *TINY_MODEL,
        "data.num_workers=0",
        "train.batch_size=8",
        "train.max_steps=10",
        "train.val_every=10",
        "train.log_every=5",
        "train.warmup_steps=1",
    ]
    rc, _, err = run_main(train_cli.main, *args, capsys=capsys)
    assert rc == 0, err
    assert "bomb.png" in err and "Traceback" not in err
