"""Unlucky input that once read wrong or was refused: transparency, odd arrays, decoding
options that make no sense."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFont

from crnn.data.image import ImageDecodeError, load_image
from crnn.data.synth.fonts import bundled_font_dir
from crnn.reading.recognizer import Recognizer

SANS = bundled_font_dir() / "liberation" / "LiberationSans-Bold.ttf"


def word_on_transparent(ink: tuple[int, int, int]) -> bytes:
    img = Image.new("RGBA", (220, 60), (*ink, 0))  # transparent pixels of the ink's colour
    ImageDraw.Draw(img).text(
        (8, 8), "window", font=ImageFont.truetype(str(SANS), 38), fill=(*ink, 255)
    )
    buf = io.BytesIO()
    img.save(buf, "PNG")
    return buf.getvalue()


@pytest.mark.parametrize("ink", [(255, 255, 255), (0, 0, 0), (250, 220, 40)])
def test_text_on_a_transparent_png_stands_out_from_its_flattened_background(ink) -> None:
    grey = np.asarray(load_image(word_on_transparent(ink)))
    background, strokes = np.median(grey), grey.min() if np.median(grey) > 128 else grey.max()
    assert abs(float(background) - float(strokes)) > 150
    assert Recognizer.bundled("word").predict(word_on_transparent(ink))[0].text == "window"


def test_a_grey_and_alpha_array_is_read() -> None:
    rgba = np.asarray(Image.open(io.BytesIO(word_on_transparent((0, 0, 0)))))
    la = np.stack([rgba[:, :, :3].mean(axis=2).astype(np.uint8), rgba[:, :, 3]], axis=2)
    assert load_image(la).size == (220, 60)
    with pytest.raises(ImageDecodeError, match=r"\(H, W, 2\) grey and alpha"):
        load_image(np.zeros((4, 4, 5), np.uint8))


@pytest.mark.parametrize("weight", [float("inf"), float("nan"), 1e308, -0.5])
def test_a_language_prior_weight_that_outweighs_the_image_is_refused(weight) -> None:
    from crnn.ctc.lm import resolve_prior
    from crnn.reading.recognizer import Recognizer

    rec = Recognizer.bundled("zh")
    with pytest.raises(ValueError, match="lm_weight must be between 0"):
        resolve_prior(None, weight, rec.charset)


def test_a_zero_frame_input_reads_empty_with_no_confidence_whatever_the_decoder() -> None:
    from crnn.ctc.decode import decode
    from crnn.text.alphabet import Charset

    charset = Charset.from_spec("alnum36")
    logits = np.random.default_rng(0).normal(size=(2, 5, charset.num_classes)).astype(np.float32)
    for beam in (0, 4):
        p = decode(logits, charset, lengths=np.array([0, 5]), beam_width=beam)
        assert (p[0].text, p[0].confidence) == ("", 0.0)
        assert p[1].confidence > 0


def test_a_part_file_torn_by_a_kill_loses_only_the_torn_record_which_is_read_again(
    tmp_path,
) -> None:
    import json

    from crnn.sharding import JsonlParts, Shard

    out = tmp_path / "reads.jsonl"
    parts = JsonlParts(out, Shard(0, 1))
    parts.write({"path": "a.png", "text": "a"})
    with open(parts.path, "a", encoding="utf-8") as f:
        f.write('{"path": "b.png", "te')  # killed mid-write
    parts._log.close()
    again = JsonlParts(out, Shard(0, 1))
    assert again.done_keys() == {"a.png"}  # b.png is read again
    again.write({"path": "b.png", "text": "b"})
    again.finish()
    rows = [json.loads(line) for line in again.path.read_text().splitlines()]
    assert [r["path"] for r in rows] == ["a.png", "b.png"]
