"""benchmarks/zh_web_lines.py --upright: training lines cut upside down are turned upright
(found by reading each both ways against its label), the others left as they are."""

from __future__ import annotations

import shutil

import pytest
from conftest import ROOT
from PIL import Image

from benchmarks.zh_sets import folder_pairs
from benchmarks.zh_web_lines import upright


def test_upright_turns_the_lines_cut_upside_down_and_only_them(tmp_path):
    src = ROOT / "data" / "zh_lines"
    rows = folder_pairs(src)
    for name in [n for n, _ in rows] + ["gt.txt"]:
        shutil.copy(src / name, tmp_path / name)
    turned_name = rows[1][0]
    Image.open(src / turned_name).rotate(180).save(tmp_path / turned_name)

    assert upright(tmp_path) == [turned_name]
    assert (tmp_path / "turned.txt").read_text("utf-8") == f"{turned_name}\n"
    # turned back upright, pixel for pixel (saved in colour); the others as they were
    for name, _ in rows:
        got, want = (Image.open(d / name).convert("RGB") for d in (tmp_path, src))
        assert got.tobytes() == want.tobytes(), name


def test_upright_says_what_is_missing(tmp_path):
    with pytest.raises(SystemExit, match="gt.txt is missing or empty"):
        upright(tmp_path)
