"""Other projects' label files through create_lmdb: the Synthetic Chinese String
Dataset's index lists (with a GBK char_std file), PaddleOCR's path<TAB>label files, one
.txt per image; bad lines reported by file and number with what to run, the rest kept;
an index list is never stored with its numbers as labels."""

from __future__ import annotations

import lmdb
import pytest
from ckpt_helpers import run_main
from PIL import Image

from crnn.cli import create_lmdb as create_cli
from crnn.data.formats import LabelFormatError, read_labels, repaired_mojibake

CHAR_STD = ["blank", "，", "的", "。", "一", "是", "0", "不", "在", "有", "鑫"]


def _image(path, w=60):
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("L", (w, 32), 200).save(path)


def _labels(out) -> list[str]:
    env = lmdb.open(str(out), readonly=True, lock=False)
    with env.begin() as tx:
        n = int(tx.get(b"num-samples"))
        got = [tx.get(b"label-%09d" % i).decode() for i in range(1, n + 1)]
    env.close()
    return got


@pytest.fixture
def scsd(tmp_path):
    """A tiny dataset in the Synthetic Chinese String Dataset's layout."""
    root = tmp_path / "images"
    for name in ("a.jpg", "b.jpg", "c.jpg", "d.jpg"):
        _image(root / name)
    (tmp_path / "char_std_5990.txt").write_bytes("\n".join(CHAR_STD).encode("gbk") + b"\n")
    (tmp_path / "train.txt").write_text(
        "a.jpg 2 5 1 10\n"  # 的是，鑫
        "b.jpg 4 7 8\n"  # 一不在
        "c.jpg 3 99\n"  # 99: outside the file
        "e.jpg 1 2\n"  # no such image
        "d.jpg 0 2\n",  # 0: the blank's placeholder
        encoding="utf-8",
    )
    return tmp_path


def test_an_index_list_converts_with_its_gbk_alphabet_file(scsd, capsys):
    out = scsd / "lmdb"
    rc, _, err = run_main(
        create_cli.main,
        "--root",
        scsd / "images",
        "--gt",
        scsd / "train.txt",
        "--charset",
        scsd / "char_std_5990.txt",
        "--out",
        out,
        "--workers",
        "1",
        capsys=capsys,
    )
    assert rc == 1, err  # some lines left out
    assert _labels(out) == ["的是，鑫", "一不在"]
    assert "labels read as index" in err
    assert "train.txt:3: index 99 is outside char_std_5990.txt (11 lines, 0-10)" in err
    assert "train.txt:5: index 0 is the blank's placeholder line 'blank'" in err
    assert "train.txt:4:" in err and "not found" in err
    assert "wrote 2 samples" in err


def test_an_index_list_given_as_a_gt_file_is_refused_not_stored_as_digits(scsd, capsys):
    out = scsd / "lmdb"
    rc, _, err = run_main(
        create_cli.main,
        "--root",
        scsd / "images",
        "--gt",
        scsd / "train.txt",
        "--out",
        out,
        capsys=capsys,
    )
    assert rc == 2
    assert "is an index list" in err and "--charset char_std_5990.txt" in err
    assert not (out / "data.mdb").exists()
    # Said to be a gt file, it is read as one: the user asked for digits.
    rc, _, err = run_main(
        create_cli.main,
        "--root",
        scsd / "images",
        "--gt",
        scsd / "train.txt",
        "--out",
        out,
        "--format",
        "gt",
        "--workers",
        "1",
        capsys=capsys,
    )
    assert _labels(out)[0] == "2 5 1 10"


def test_paddleocr_label_files_keep_spaces_in_labels(tmp_path, capsys):
    _image(tmp_path / "train" / "word_1.png")
    _image(tmp_path / "train" / "word_2.png")
    (tmp_path / "rec_gt_train.txt").write_text(
        "train/word_1.png\t简单 可依赖\ntrain/word_2.png\tPaddle OCR\n", encoding="utf-8"
    )
    parsed, fmt = read_labels(tmp_path, tmp_path / "rec_gt_train.txt", "paddle")
    assert [line.label for line in parsed.lines] == ["简单 可依赖", "Paddle OCR"]
    out = tmp_path / "lmdb"
    rc, _, err = run_main(
        create_cli.main,
        "--root",
        tmp_path,
        "--gt",
        tmp_path / "rec_gt_train.txt",
        "--out",
        out,
        "--workers",
        "1",
        capsys=capsys,
    )
    assert rc == 0, err
    assert _labels(out) == ["简单 可依赖", "Paddle OCR"]


def test_one_txt_per_image_folders(tmp_path, capsys):
    root = tmp_path / "lines"
    for i, label in enumerate(["中国人民", "你好，世界"]):
        _image(root / f"{i}.jpg")
        (root / f"{i}.txt").write_bytes(label.encode("utf-8" if i == 0 else "gbk") + b"\r\n")
    _image(root / "2.jpg")  # no label file
    out = tmp_path / "lmdb"
    rc, _, err = run_main(
        create_cli.main, "--root", root, "--out", out, "--workers", "1", capsys=capsys
    )
    assert rc == 1
    assert _labels(out) == ["中国人民", "你好，世界"]
    assert "no label file '2.txt' for '2.jpg'" in err


def test_mojibake_labels_are_reported_with_their_repaired_text(tmp_path, capsys):
    """UTF-8 text decoded as GBK by some tool ('我们' -> '鎴戜滑') is never stored."""
    assert repaired_mojibake("鎴戜滑") == "我们"
    for real in ("我们", "的", "中华人民共和国", "abc", "年", "Café"):
        assert repaired_mojibake(real) is None
    _image(tmp_path / "a.png")
    _image(tmp_path / "b.png")
    (tmp_path / "gt.txt").write_text("a.png\t鎴戜滑\nb.png\t我们\n", encoding="utf-8")
    out = tmp_path / "lmdb"
    rc, _, err = run_main(
        create_cli.main, "--root", tmp_path, "--out", out, "--workers", "1", capsys=capsys
    )
    assert rc == 1
    assert _labels(out) == ["我们"]
    assert "gt.txt:1: label '鎴戜滑' looks like UTF-8 text decoded as GBK" in err
    assert "reads '我们' when undone" in err and "iconv -f UTF-8 -t GB18030" in err


def test_a_gbk_label_file_read_as_utf8_says_to_pass_its_encoding(tmp_path, capsys):
    _image(tmp_path / "a.png")
    (tmp_path / "gt.txt").write_bytes("a.png\t我们\n".encode("gbk"))
    out = tmp_path / "lmdb"
    rc, _, err = run_main(
        create_cli.main, "--root", tmp_path, "--out", out, "--workers", "1", capsys=capsys
    )
    assert rc == 1 and "it reads as GBK: create_lmdb --encoding gbk" in err
    rc, _, err = run_main(
        create_cli.main,
        "--root",
        tmp_path,
        "--out",
        out,
        "--overwrite",
        "--encoding",
        "gbk",
        "--workers",
        "1",
        capsys=capsys,
    )
    assert rc == 0 and _labels(out) == ["我们"]


def test_unknown_format_and_missing_labels_are_clear(tmp_path):
    with pytest.raises(LabelFormatError, match="unknown label format"):
        read_labels(tmp_path, None, "csv")
    with pytest.raises(FileNotFoundError, match="no gt.txt and no NAME.txt"):
        read_labels(tmp_path, None, "auto")


def test_training_reads_an_index_list_with_its_charset_file_and_refuses_it_without(scsd, capsys):
    """data.train can be the index list itself: its numbers are lines of the charset
    file. With a built-in charset instead, it is refused, never trained on as digits."""
    from conftest import TINY_MODEL

    from crnn.cli import train as train_cli

    for name in ("a.jpg", "b.jpg"):
        _image(scsd / name)  # paths are relative to the label file's folder
    (scsd / "train.txt").write_text("a.jpg 2 5 1 10\nb.jpg 4 7 8\n", encoding="utf-8")
    common = [
        *TINY_MODEL,
        f'data.train=["{scsd / "train.txt"}"]',
        f'data.val=["{scsd / "train.txt"}"]',
        "data.num_workers=0",
        "train.batch_size=2",
        "train.max_steps=2",
        "train.val_every=2",
        "train.log_images=0",
    ]
    rc, _, err = run_main(
        train_cli.main,
        "--set",
        *common,
        f"data.charset={scsd / 'char_std_5990.txt'}",
        f"train.output_dir={scsd / 'run'}",
        capsys=capsys,
    )
    assert rc == 0, err[-2000:]
    assert "train.txt: 2 of 2 samples kept" in err
    rc, _, err = run_main(
        train_cli.main,
        "--set",
        *common,
        "data.charset=zh5529",
        f"train.output_dir={scsd / 'run2'}",
        capsys=capsys,
    )
    assert rc == 2 and "is an index list" in err and "Traceback" not in err
