"""One reader behind every front end: ``crnn-eval`` reads each image exactly as
``crnn-predict`` does (the same views, turns, page finding and blank check), so its
figures are the figures users get."""

from __future__ import annotations

import csv
import json

import pytest
from ckpt_helpers import run_main
from conftest import render_word, word_labels, write_folder
from PIL import Image


def _hard_set(root):
    """Rendered words, and what the batched loader path reads differently from predict:
    a blank image, a word upside down, two words stacked as two lines."""
    write_folder(root, word_labels(20, seed=3), seed=100)
    extra = []
    Image.new("L", (160, 48), 128).save(root / "images" / "blank.png")
    extra.append("images/blank.png\tx")
    render_word("homeland", seed=7).rotate(180).save(root / "images" / "turned.png")
    extra.append("images/turned.png\thomeland")
    a, b = render_word("river", seed=8), render_word("stone", seed=9)
    two = Image.new("L", (max(a.width, b.width), a.height + b.height + 12), 255)
    two.paste(a.convert("L"), (0, 0))
    two.paste(b.convert("L"), (0, a.height + 12))
    two.save(root / "images" / "two.png")
    extra.append("images/two.png\triver")
    with open(root / "gt.txt", "a", encoding="utf-8") as f:
        f.write("\n".join(extra) + "\n")
    return root


@pytest.mark.parametrize("layout", ["auto", "line"])
def test_eval_reads_every_image_as_predict_does(tmp_path, capsys, layout):
    from crnn.cli import eval as eval_cli
    from crnn.cli import predict as predict_cli
    from crnn.text.alphabet import Charset

    root = _hard_set(tmp_path / "set")
    labels = dict(line.split("\t") for line in (root / "gt.txt").read_text().splitlines())
    rc, out, _ = run_main(
        predict_cli.main,
        "--model",
        "word",
        "--layout",
        layout,
        "--format",
        "json",
        root / "images",
        capsys=capsys,
    )
    assert rc == 0
    norm = Charset.from_spec("alnum36").normalize
    predicted = {r["path"]: r["text"] for r in json.loads(out)}
    wrong = {p: t for p, t in predicted.items() if t != norm(labels["images/" + p.split("/")[-1]])}
    assert predicted[str(root / "images" / "blank.png")] == ""  # the blank check
    rc, _, _ = run_main(
        eval_cli.main,
        "word",
        root,
        "--layout",
        layout,
        "--errors",
        tmp_path / "err",
        "--json",
        tmp_path / "r.json",
        capsys=capsys,
    )
    assert rc == 0
    row = json.loads((tmp_path / "r.json").read_text())[0]
    rows = list(csv.DictReader(open(tmp_path / "err" / "set" / "errors.tsv"), delimiter="\t"))
    assert {r["source"]: r["prediction"] for r in rows} == wrong
    assert row["accuracy"] == pytest.approx(1 - len(wrong) / len(predicted), abs=1e-12)
    assert len(predicted) == row["count"] == 23


def test_predict_eval_and_serve_parse_one_set_of_reading_options():
    """The reading options are one typed object (``ReadOptions``), parsed by one piece of
    code with one set of defaults for the three front ends that read."""
    from crnn.cli.eval import build_parser as eval_parser
    from crnn.cli.predict import build_parser as predict_parser
    from crnn.cli.serve import build_parser as serve_parser
    from crnn.reading.options import ReadOptions

    given = ["--beam", "3", "--zoom", "1.0,1.2", "--rotate", "none", "--finder", "classical"]
    predict = ReadOptions.from_args(predict_parser().parse_args(["x.png", *given]))
    evaluate = ReadOptions.from_args(eval_parser().parse_args(["zh", "data", *given]))
    serve = ReadOptions.from_args(serve_parser().parse_args(given))
    assert predict == evaluate == serve
    assert (predict.beam, predict.zoom, predict.rotate, predict.finder) == (
        3,
        (1.0, 1.2),
        "none",
        "classical",
    )
    defaults = ReadOptions.from_args(predict_parser().parse_args(["x.png"]))
    assert defaults == ReadOptions()
    with pytest.raises(ValueError, match="must be >= 0"):
        ReadOptions(beam=-1)


def test_a_folder_of_crops_is_read_in_rounds_of_lines_not_of_16_pages(tmp_path, monkeypatch):
    """``read_inputs`` (what crnn-predict reads a folder with) plans images until their
    lines reach ``ROUND_LINES`` and reads them in one round, batched by width: 40 word
    crops are one round (three at 16 pages a round, as before: web lines 44-50 -> 38 ms a
    line), a bad file among them still comes back in its place, and smaller rounds read
    the same texts."""
    from crnn.data.image import ImageDecodeError
    from crnn.reading import inputs
    from crnn.reading.planner import PagePlanner
    from crnn.reading.recognizer import Recognizer

    write_folder(tmp_path, word_labels(40, seed=5), seed=300)
    files = sorted(str(p) for p in (tmp_path / "images").glob("*.png"))
    (tmp_path / "images" / "0007.png").write_bytes(b"not an image")
    rounds: list[int] = []
    read_planned = PagePlanner.read_planned

    def spy(self, pages, jobs):
        rounds.append(len(jobs))
        return read_planned(self, pages, jobs)

    monkeypatch.setattr(PagePlanner, "read_planned", spy)
    rec = Recognizer.bundled("word")
    got = list(inputs.read_inputs(rec, files))
    assert [f for f, _ in got] == files and rounds == [39]
    assert isinstance(got[7][1], ImageDecodeError)
    rounds.clear()
    monkeypatch.setattr(inputs, "ROUND_LINES", 16)
    again = list(inputs.read_inputs(rec, files))
    assert rounds == [16, 16, 7]
    assert [p.text for _, p in again if not isinstance(p, Exception)] == [
        p.text for _, p in got if not isinstance(p, Exception)
    ]
