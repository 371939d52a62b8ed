"""Synthetic detection scenes (crnn/data/scenes.py): drawn from a seed alone, every drawn
pixel inside a box and every box around ink, real grounds with their text painted out and
kept as don't care, and a share of a detector run's crops drawn from them."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from PIL import Image, ImageDraw

from crnn.config.synth import SynthConfig
from crnn.data import scenes
from crnn.data.detection import DetAugment, DetectionDataset
from crnn.data.quads import find_labelled
from crnn.data.scenes import SceneMaker, paint_out
from crnn.data.synth import SynthGenerator
from crnn.text.alphabet import Charset


@pytest.fixture(scope="module")
def generator() -> SynthGenerator:
    return SynthGenerator(Charset.from_spec("alnum36"), SynthConfig(), seed=0, rgb=True)


def _flat(colour: int):
    def ground(rng, limit_side):
        return np.full((limit_side, limit_side, 3), colour, np.uint8)

    return ground


def test_a_scene_is_a_function_of_its_seed(generator):
    maker = SceneMaker(generator, [], limit_side=320)
    a, b, c = maker.draw(5), maker.draw(5), maker.draw(6)
    np.testing.assert_array_equal(a.image, b.image)
    np.testing.assert_array_equal(a.quads, b.quads)
    assert a.image.shape != c.image.shape or not np.array_equal(a.image, c.image)


@pytest.mark.parametrize("colour", [230, 20])
def test_every_drawn_pixel_lies_in_a_box_and_every_box_holds_ink(generator, monkeypatch, colour):
    monkeypatch.setattr(scenes, "plain_ground", _flat(colour))
    maker = SceneMaker(generator, [], limit_side=320)
    lines = 0
    for seed in range(12):
        s = maker.draw(seed)
        assert s.quads.shape[1:] == (4, 2) and not s.ignore.any()
        inside = np.zeros(s.image.shape[:2], np.uint8)
        for q in s.quads:
            one = np.zeros_like(inside)
            cv2.fillPoly(one, [np.round(q).astype(np.int32)], 1)
            # Each box holds ink: pixels that are not the ground.
            assert (np.abs(s.image.astype(int) - colour).max(axis=2)[one > 0] > 40).any()
            inside |= one
        grown = cv2.dilate(inside, np.ones((5, 5), np.uint8))
        drawn = np.abs(s.image.astype(int) - colour).max(axis=2) > 40
        assert not (drawn & (grown == 0)).any(), f"seed {seed}: ink outside every box"
        # Corners clockwise from the top-left (image y down: positive shoelace area).
        for q in s.quads:
            x, y = q[:, 0], q[:, 1]
            assert (x * np.roll(y, -1) - np.roll(x, -1) * y).sum() > 0
        lines += len(s.quads)
    assert lines >= 12


def test_a_real_ground_has_its_lines_painted_out_and_kept_as_dont_care(generator, tmp_path):
    (tmp_path / "images").mkdir()
    (tmp_path / "labels").mkdir()
    img = Image.new("RGB", (400, 300), (240, 240, 240))
    ImageDraw.Draw(img).rectangle([50, 100, 250, 130], fill=(10, 10, 10))
    img.save(tmp_path / "images" / "a.png")
    (tmp_path / "labels" / "a.txt").write_text("50,100,250,100,250,130,50,130,text\n")
    (item,) = find_labelled(tmp_path)
    painted, quads = paint_out(np.asarray(img), item.quads, 960)
    assert painted[100:131, 50:251].min() > 150  # the dark line is gone
    np.testing.assert_allclose(quads, item.quads)
    scene = SceneMaker(generator, [item], limit_side=960).draw(1)
    # The painted line comes back as don't care (some seeds draw a plain ground).
    grounds = [SceneMaker(generator, [item]).draw(s) for s in range(6)]
    assert any(g.ignore.any() for g in grounds + [scene])
    for g in grounds:
        if g.ignore.any():
            np.testing.assert_allclose(g.quads[g.ignore][0], item.quads[0])


def test_a_share_of_the_crops_are_scenes_and_none_without_a_maker(generator, tmp_path):
    (tmp_path / "images").mkdir()
    (tmp_path / "labels").mkdir()
    Image.new("RGB", (128, 96), (200, 200, 200)).save(tmp_path / "images" / "a.png")
    (tmp_path / "labels" / "a.txt").write_text("10,10,60,10,60,30,10,30,x\n")
    items = find_labelled(tmp_path)
    aug = DetAugment(crop=64, limit_side=128)
    plain = DetectionDataset(items, aug)
    off = DetectionDataset(items, aug, SceneMaker(generator, items, 128), 0.0)
    mixed = DetectionDataset(items, aug, SceneMaker(generator, items, 128), 0.5)
    differ = 0
    for seed in range(40):
        a, b, c = plain[(0, seed)], off[(0, seed)], mixed[(0, seed)]
        assert np.array_equal(a["image"], b["image"])  # share 0: the run as before
        differ += not np.array_equal(a["image"], c["image"])
    assert 10 <= differ <= 30
