"""The orientation classifier: what it sees, how it is trained and exported, and how the
reader uses it (a crop it calls upside down is also read turned)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT
from PIL import Image

from crnn.reading.orientation import (
    HEIGHT,
    MAX_WINDOWS,
    UPSIDE_DOWN,
    WIDTH,
    bundled_classifier,
    windows,
)
from crnn.reading.recognizer import Recognizer, Turns

SAMPLES = ROOT / "data" / "samples"


def test_windows_pad_a_narrow_crop_and_spread_over_a_wide_one():
    narrow = windows(Image.new("L", (50, 40), 200))
    assert narrow.shape == (1, 1, HEIGHT, WIDTH) and narrow.dtype == np.float32
    assert np.allclose(narrow, 200 / 127.5 - 1.0)  # padded with the crop's own grey
    ramp = Image.fromarray(np.tile(np.linspace(0, 255, 2000).astype(np.uint8), (40, 1)))
    wide = windows(ramp)
    assert wide.shape == (MAX_WINDOWS, 1, HEIGHT, WIDTH)
    assert wide[0].mean() < wide[1].mean() < wide[2].mean()  # left, middle, right
    assert wide.min() >= -1.0 and wide.max() <= 1.0


class Fixed:
    def __init__(self, p: float) -> None:
        self.p, self.calls = p, 0

    def upside_down(self, image: Image.Image) -> float:
        self.calls += 1
        return self.p


@pytest.mark.parametrize(("p", "turned"), [(UPSIDE_DOWN + 0.05, True), (UPSIDE_DOWN - 0.05, False)])
def test_a_crop_the_classifier_calls_upside_down_is_also_read_turned(p, turned):
    rec = Recognizer.bundled("word", orientation=Fixed(p))  # a classifier passed in
    flipped = Image.open(SAMPLES / "word_01.png").rotate(180)
    item = rec.preprocess(flipped)
    assert isinstance(item, Turns) == turned
    if turned:
        assert item.turns == (0, 180)
    pred = rec.predict([flipped])[0]
    assert (pred.text, pred.rotation) == (("homeland", 180) if turned else (pred.text, 0))
    assert pred.text != "homeland" or turned


def test_the_classifier_is_not_consulted_without_rotate_pages():
    for rotate in ("none", "auto"):
        rec = Recognizer.bundled("word", rotate=rotate)
        rec.orientation = spy = Fixed(1.0)
        rec.preprocess(SAMPLES / "word_01.png")
        assert spy.calls == 0


def test_training_writes_a_classifier_that_the_reader_loads(tmp_path):
    from crnn.cli.orientation import main
    from crnn.reading.orientation import OrientationClassifier

    out = tmp_path / "m"
    code = main(
        [
            "--real",
            str(SAMPLES),
            "--epochs",
            "1",
            "--holdout",
            "0.25",
            "-o",
            str(out),
            "--channels",
            "4,6,8,10,12",
            "--json",
            str(tmp_path / "r.json"),
        ]
    )
    assert code == 0
    (path,) = out.glob("orient-*.onnx")
    import onnx

    convs = [n for n in onnx.load(str(path)).graph.node if n.op_type == "Conv"]
    assert len(convs) == 5
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["model"] == path.name and report["held_out"]["samples"]["crops"] == 3  # of 12
    weights = {i.name: tuple(i.dims) for i in onnx.load(str(path)).graph.initializer}
    assert [weights[c.input[1]][0] for c in convs] == [4, 6, 8, 10, 12]
    p = OrientationClassifier(path).upside_down(Image.open(SAMPLES / "word_02.png"))
    assert 0.0 <= p <= 1.0
    rec = Recognizer.bundled("word", orientation=path)
    assert isinstance(rec.orientation, OrientationClassifier)
    assert main(["--synth", "nonsense", "-o", str(out)]) == 2


def test_the_bundled_classifier_turns_turned_samples_and_leaves_upright_ones():
    """At the reader's threshold most turned samples are called turned (orient-56b88e8f: 9
    of 12, as orient-632243c3) and at most one upright sample is (orient-56b88e8f gives
    word_03 0.93); every upright sample still reads as given, since a turn is kept only
    where it reads more probably."""
    clf = bundled_classifier()
    # The package ships one: a reader that cannot find it turns nothing (it looked in
    # crnn/reading/assets/ after the reading package moved, and this test skipped).
    assert clf is not None, "the bundled orientation classifier was not found"
    samples = [Image.open(f) for f in sorted(Path(SAMPLES).glob("word_*.png"))]
    assert sum(clf.upside_down(im) >= UPSIDE_DOWN for im in samples) <= 1
    assert sum(clf.upside_down(im.rotate(180)) >= UPSIDE_DOWN for im in samples) >= 8
    assert all(p.rotation == 0 for p in Recognizer.bundled("word").predict(samples))
    pred = Recognizer.bundled("word").predict([samples[0].rotate(180)])[0]
    assert (pred.text, pred.rotation) == ("homeland", 180)
    assert (
        Recognizer.bundled("word", orientation=None).predict([samples[0].rotate(180)])[0].text
        != "homeland"
    )
