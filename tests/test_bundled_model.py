"""The English model shipped in crnn/assets/models: it loads, reads the sample images,
its ONNX twin agrees with it, and ``tools/predict.py`` uses it with no checkpoint given."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from crnn.reading import recognizer as inference

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "data" / "samples"

pytestmark = pytest.mark.skipif(
    not inference.bundled_models(), reason="no model bundled in crnn/assets/models"
)


def _samples() -> list[tuple[Path, str]]:
    rows = [line.split("\t") for line in (SAMPLES / "gt.txt").read_text().splitlines() if line]
    return [(SAMPLES / name, label) for name, label in rows]


def test_bundled_release_is_small_and_describes_itself():
    from crnn.checkpoint import load_checkpoint

    for path in inference.bundled_models(".pt") + inference.bundled_models(".onnx"):
        assert path.stat().st_size < 20 * 2**20, f"{path} is over the 20 MB budget"
    ckpt = load_checkpoint(inference.bundled_models(".pt", "word")[-1])
    assert ckpt["charset"], "release has no charset"
    assert "optimizer" not in ckpt, "release still carries optimizer state"


def test_bundled_model_reads_the_samples():
    rec = inference.Recognizer.from_checkpoint(
        inference.bundled_models(".pt", "word")[-1], device="cpu"
    )
    samples = _samples()
    preds = rec.predict([p for p, _ in samples])
    right = sum(pred.text == label for pred, (_, label) in zip(preds, samples))
    # The samples are synthetic renders of dictionary words, the kind of image the
    # model was mostly trained on; a working model reads nearly all of them.
    assert right >= len(samples) - 2, [(p.text, lab) for p, (_, lab) in zip(preds, samples)]


@pytest.mark.skipif(
    importlib.util.find_spec("onnxruntime") is None, reason="onnxruntime not installed"
)
def test_bundled_onnx_agrees_with_the_pytorch_release():
    onnx = [
        p for p in inference.bundled_models(".onnx", "word") if not p.name.endswith(".int8.onnx")
    ]
    if not onnx:
        pytest.skip("no ONNX model bundled")
    images = [p for p, _ in _samples()]
    torch_rec = inference.Recognizer.from_checkpoint(
        inference.bundled_models(".pt", "word")[-1], device="cpu"
    )
    onnx_rec = inference.Recognizer.from_checkpoint(onnx[-1])
    for a, b in zip(torch_rec.predict(images), onnx_rec.predict(images)):
        assert a.text == b.text
        assert a.confidence == pytest.approx(b.confidence, abs=2e-2)


@pytest.mark.slow
def test_predict_without_checkpoint_uses_the_bundled_model():
    out = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "predict.py"), "--json", str(SAMPLES)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)
    texts = {Path(r["path"]).name: r["text"] for r in rows}
    labels = {p.name: label for p, label in _samples()}
    assert set(texts) == set(labels)
    assert sum(texts[k] == labels[k] for k in labels) >= len(labels) - 2


LINES = ROOT / "data" / "lines"


def _lines() -> list[tuple[Path, str]]:
    rows = [line.split("\t") for line in (LINES / "gt.txt").read_text().splitlines() if line]
    return [(LINES / name, label) for name, label in rows]


@pytest.mark.skipif(not inference.bundled_models(".pt", "line"), reason="no line model bundled")
def test_bundled_line_model_reads_printed_lines_whole():
    """Three printed lines in fonts it trained on, 228-348 px wide: read to within a
    character each, spaces and punctuation included; the word model cannot (no spaces,
    no capitals), and --model line is what picks this one."""
    from rapidfuzz.distance import Levenshtein

    line = inference.Recognizer.bundled("line", device="cpu")
    assert line.charset.name == "ascii95" and " " in line.charset.chars
    rows = _lines()
    preds = line.predict([p for p, _ in rows])
    edits = [Levenshtein.distance(p.text, label) for p, (_, label) in zip(preds, rows)]
    assert max(edits) <= 1, [(p.text, label) for p, (_, label) in zip(preds, rows)]
    word = inference.Recognizer.bundled("word", device="cpu")
    assert all(" " not in p.text for p in word.predict([p for p, _ in rows]))
    onnx = inference.default_checkpoint(model="line")
    if onnx.suffix == ".onnx":  # the exported twin reads the same
        assert [
            p.text for p in inference.Recognizer.from_checkpoint(onnx).predict([p for p, _ in rows])
        ] == [p.text for p in preds]


@pytest.mark.skipif(not inference.bundled_models(".pt", "line"), reason="no line model bundled")
def test_predict_model_line_picks_the_line_model(capsys):
    from ckpt_helpers import run_main

    from crnn.cli import predict

    path, label = _lines()[0]
    rc, out, _ = run_main(predict.main, "--model", "line", path, capsys=capsys)
    assert rc == 0 and out.split("\t")[1] == label
    rc, out, _ = run_main(predict.main, path, capsys=capsys)  # the word model by default
    assert rc == 0 and " " not in out.split("\t")[1]
    with pytest.raises(SystemExit) as e:
        run_main(predict.main, "--model", "page", path, capsys=capsys)
    assert e.value.code == 2 and "invalid choice: 'page'" in capsys.readouterr().err


ZH_LINES = ROOT / "data" / "zh_lines"


def _zh_lines() -> list[tuple[Path, str]]:
    text = (ZH_LINES / "gt.txt").read_text(encoding="utf-8")
    return [(ZH_LINES / n, label) for n, label in (r.split("\t") for r in text.splitlines() if r)]


@pytest.mark.skipif(not inference.bundled_models(".pt", "zh"), reason="no Chinese model bundled")
def test_bundled_chinese_model_reads_printed_lines_in_a_font_it_never_saw():
    """Four 32 px Chinese lines (219-317 px, the size the Chinese CRNN projects train
    on) drawn in WenQuanYi Micro Hei, which its training held out: within a character
    each; the release holds chineseocr's 5,530 classes, `|` twice; the .onnx twin agrees."""
    from rapidfuzz.distance import Levenshtein

    zh = inference.Recognizer.bundled("zh", device="cpu")
    assert zh.charset.num_classes == 5530
    rows = _zh_lines()
    preds = zh.predict([p for p, _ in rows])
    edits = [Levenshtein.distance(p.text, label) for p, (_, label) in zip(preds, rows)]
    assert max(edits) <= 1 and sum(edits) <= 2, [(p.text, t) for p, (_, t) in zip(preds, rows)]
    onnx = inference.default_checkpoint(model="zh")
    if onnx.suffix == ".onnx":
        assert [
            p.text for p in inference.Recognizer.from_checkpoint(onnx).predict([p for p, _ in rows])
        ] == [p.text for p in preds]


@pytest.mark.skipif(not inference.bundled_models(".pt", "zh"), reason="no Chinese model bundled")
def test_predict_model_zh_reads_chinese(capsys):
    from ckpt_helpers import run_main

    from crnn.cli import predict

    path, label = _zh_lines()[2]
    rc, out, _ = run_main(predict.main, "--model", "zh", path, capsys=capsys)
    assert rc == 0 and out.split("\t")[1] == label
