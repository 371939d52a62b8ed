import io
import random

import numpy as np
import pytest
import torch
from conftest import render_word
from PIL import Image

from crnn.backends.torch import normalize
from crnn.config import AugmentConfig
from crnn.data.image import ImageDecodeError, ImageSpec, load_image, resized_width
from crnn.data.transforms import TrainAugment, pad_batch, preprocess


def test_resize_keeps_ratio_rounds_and_clamps():
    spec = ImageSpec(height=32, min_width=16, max_width=128, width_multiple=4)
    assert resized_width(100, 32, spec) == 100
    assert resized_width(101, 32, spec) == 104  # rounded up to a multiple of 4
    assert resized_width(50, 64, spec) == 28  # 25 -> 28
    assert resized_width(5, 64, spec) == 16  # min width
    assert resized_width(1000, 32, spec) == 128  # max width
    assert resized_width(10, 32, spec, min_width=60) == 60  # widened for a long label


@pytest.mark.parametrize("rgb", [False, True])
def test_preprocess_shapes_and_dtype(rgb):
    img = render_word("hello").convert("RGB").resize((120, 48))
    t = preprocess(img, ImageSpec(rgb=rgb))
    assert t.dtype == torch.uint8
    assert t.shape == (3 if rgb else 1, 32, 80)


def test_all_input_kinds_agree(tmp_path):
    img = render_word("abc")
    path = tmp_path / "a.png"
    img.save(path)
    spec = ImageSpec()
    ref = preprocess(img, spec)
    assert torch.equal(preprocess(str(path), spec), ref)
    assert torch.equal(preprocess(path.read_bytes(), spec), ref)
    assert torch.equal(preprocess(np.asarray(img), spec), ref)
    assert torch.equal(preprocess(np.asarray(img).astype(np.float32) / 255, spec), ref)


def test_transparent_text_is_composited_on_white():
    rgba = Image.new("RGBA", (40, 32), (0, 0, 0, 0))
    rgba.putpixel((5, 5), (0, 0, 0, 255))
    gray = load_image(rgba)
    assert gray.getpixel((0, 0)) == 255 and gray.getpixel((5, 5)) == 0


@pytest.mark.parametrize(
    "source, message",
    [
        (b"definitely not an image", "not a readable image"),
        ("/no/such/file.png", "file not found"),
        (42, "cannot read an image"),
    ],
)
def test_bad_inputs_say_what_went_wrong(source, message):
    with pytest.raises(ImageDecodeError, match=message):
        load_image(source)


def test_truncated_png_is_an_error():
    buf = io.BytesIO()
    render_word("cut").save(buf, format="PNG")
    with pytest.raises(ImageDecodeError):
        load_image(buf.getvalue()[:60])


def test_pad_batch_repeats_the_last_column_and_keeps_widths():
    a = torch.arange(2 * 3, dtype=torch.uint8).view(1, 2, 3)
    b = torch.full((1, 2, 5), 9, dtype=torch.uint8)
    batch, widths = pad_batch([a, b])
    assert batch.shape == (2, 1, 2, 5) and widths.tolist() == [3, 5]
    assert torch.equal(batch[0, :, :, :3], a)
    assert torch.equal(batch[0, :, :, 3], a[:, :, 2]) and torch.equal(batch[0, :, :, 4], a[:, :, 2])


def test_normalize_maps_to_minus_one_one():
    x = normalize(torch.tensor([[[[0, 255]]]], dtype=torch.uint8))
    assert x.tolist() == [[[[-1.0, 1.0]]]]


def test_augment_is_deterministic_per_seed_and_keeps_size():
    img = render_word("augment")
    cfg = AugmentConfig(affine_p=1, perspective_p=1, blur_p=1, color_p=1, noise_p=1)
    aug = TrainAugment(cfg)
    a = aug(img, random.Random(7))
    b = aug(img, random.Random(7))
    c = aug(img, random.Random(8))
    assert a.size == img.size
    assert a.tobytes() == b.tobytes() and a.tobytes() != c.tobytes()
    assert TrainAugment(AugmentConfig(enabled=False))(img, random.Random(0)) is img
