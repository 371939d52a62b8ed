"""Coming from the Chinese CRNN ecosystem: chineseocr and Sierkinhane weights give the
original code's outputs (fixtures made by running that code, tests/fixtures/foreign),
and their alphabet files (keys.py, char_std_5990.txt in GBK, PaddleOCR dictionaries)
read exactly, a character listed twice included."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from ckpt_helpers import run_main
from foreign_weights import NCLASS, deterministic_weights

from crnn import checkpoint as ck
from crnn.backends.torch import TorchBackend
from crnn.cli import convert_checkpoint
from crnn.model import CRNN
from crnn.text.alphabet import Charset
from crnn.text.alphabet_files import CharsetFileError, index_table, read_alphabet

FIXTURES = Path(__file__).parent / "fixtures" / "foreign"
# NCLASS - 1 characters, in class order (class 0 is the blank).
ALPHABET = "我们的是中国人一不了有在他这为之大来以个上0123"[: NCLASS - 1]


def _fixture(name: str) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
    f = np.load(FIXTURES / f"{name}.npz")
    shapes = {str(k): ast.literal_eval(str(s)) for k, s in zip(f["keys"], f["shapes"])}
    return deterministic_weights(shapes), f["images"], f["output"]


def _keys_py(path: Path, alphabet: str, name: str = "alphabetChinese") -> Path:
    # As chineseocr writes it: a u'' literal among other assignments.
    path.write_text(
        f"#!/usr/bin/env python3\n# -*- coding: utf-8 -*-\n{name} = u{alphabet!r}\n"
        "alphabetEnglish = '01234567890abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ*'\n",
        encoding="utf-8",
    )
    return path


def _import(tmp_path, capsys, src: Path, *args: str, said: list | None = None) -> dict:
    """Import with the CLI; what it logged is appended to ``said``."""
    out = tmp_path / "imported.pt"
    rc, _, err = run_main(
        convert_checkpoint.main, "import", src, "-o", out, "--overwrite", *args, capsys=capsys
    )
    assert rc == 0, err
    if said is not None:
        said.append(err)
    return ck.load_checkpoint(out)


def _our_outputs(ckpt: dict, images: np.ndarray) -> np.ndarray:
    """Logits (T, B, K) of the imported model on uint8 images, through the same backend
    predict uses (its normalisation from the stored image spec)."""
    model, charset, spec = ck.ModelBundle.from_checkpoint(ckpt, "imported")
    backend = TorchBackend(model, charset, spec, device="cpu", channels_last=False)
    return backend(images).numpy().transpose(1, 0, 2)


@pytest.mark.parametrize("variant", ["lstm", "dense"])
@pytest.mark.parametrize("prefix", ["", "module."])
def test_chineseocr_weights_give_the_original_codes_logits(tmp_path, capsys, variant, prefix):
    sd, images, want = _fixture(f"chineseocr_{variant}")
    src = tmp_path / f"ocr-{variant}.pth"
    torch.save({prefix + k: torch.from_numpy(v) for k, v in sd.items()}, src)
    keys = _keys_py(tmp_path / "keys.py", ALPHABET)
    ckpt = _import(tmp_path, capsys, src, "--layout", "chineseocr", "--charset", keys)
    assert ckpt["model_config"]["arch"] == ("crnn" if variant == "lstm" else "dense")
    got = _our_outputs(ckpt, images)
    assert got.shape == want.shape
    assert np.abs(got - want).max() < 1e-4
    # auto detection finds the same layout
    again = _import(tmp_path, capsys, src, "--charset", keys)
    assert again["imported"]["layout"] == ("meijieru" if variant == "lstm" else "chineseocr")


def test_sierkinhane_checkpoints_give_the_original_codes_log_probabilities(tmp_path, capsys):
    sd, images, want = _fixture("sierkinhane")
    src = tmp_path / "checkpoint_9_acc_0.9700.pth"
    # As its train.py saves: the weights under state_dict, with the epoch and best accuracy.
    torch.save(
        {
            "state_dict": {k: torch.from_numpy(v) for k, v in sd.items()},
            "epoch": 10,
            "best_acc": 0.97,
        },
        src,
    )
    alpha = tmp_path / "alphabets.py"
    alpha.write_text(f'alphabet = """{ALPHABET[:10]}\\\n{ALPHABET[10:]}"""\n', encoding="utf-8")
    ckpt = _import(tmp_path, capsys, src, "--charset", alpha)  # layout detected
    assert ckpt["imported"]["layout"] == "sierkinhane"
    spec = ckpt["image"]
    assert (spec["mean"], spec["std"]) == (0.588, 0.193)
    assert spec["width_scale"] == pytest.approx(160 / 280)
    got = torch.from_numpy(_our_outputs(ckpt, images)).log_softmax(-1).numpy()
    assert np.abs(got - want).max() < 1e-4


def test_sierkinhane_preprocessing_squeezes_lines_as_its_demo_does(tmp_path, capsys):
    """demo.py: height 32 keeping the ratio, then the width times 160/280."""
    from crnn.data.image import ImageSpec, preprocess_array

    spec = ImageSpec(mean=0.588, std=0.193, width_scale=160 / 280)
    img = np.full((64, 560, 3), 200, dtype=np.uint8)  # 280 px at height 32
    assert preprocess_array(img, spec).shape == (1, 32, 160)
    # stored and read back; older files without the fields mean our defaults
    assert ImageSpec.from_dict(spec.to_dict()) == spec
    assert "mean" not in ImageSpec().to_dict()


def test_our_own_5530_class_chineseocr_checkpoint_with_module_keys_and_a_doubled_bar(
    tmp_path, capsys
):
    """The user's case: chineseocr's alphabet size (5,529 characters, '|' twice: 5,530
    classes), weights saved from DataParallel. The import keeps every class, says why,
    and both '|' classes read as '|'."""
    zh = Charset.from_spec("zh5529").chars
    chars = zh.replace("的", "|")  # a second '|', as in chineseocr's keys.py
    assert len(chars) == 5529 and chars.count("|") == 2
    ref = CRNN(5530).eval()
    rename = {"bn": "batchnorm", "lstm": "rnn", "proj": "embedding"}
    sd = {}
    for k, v in ref.state_dict().items():
        parts = k.split(".")
        parts[1] = re.sub(r"^(bn|lstm|proj)", lambda m: rename[m.group(1)], parts[1])
        if parts[0] == "rnn":
            parts[2] = rename.get(parts[2], parts[2])
        sd["module." + ".".join(parts)] = v
    src = tmp_path / "ocr-lstm.pth"
    torch.save(sd, src)
    keys = _keys_py(tmp_path / "keys.py", chars)
    said: list[str] = []
    ckpt = _import(tmp_path, capsys, src, "--layout", "chineseocr", "--charset", keys, said=said)
    assert "'|' (classes 93, " in said[0] and "Every class is kept" in said[0]
    model, charset, _ = ck.ModelBundle.from_checkpoint(ckpt, "x")
    assert model.num_classes == charset.num_classes == 5530
    x = torch.randint(0, 256, (2, 1, 32, 100), dtype=torch.uint8)
    with torch.no_grad():
        torch.testing.assert_close(
            TorchBackend(model, charset, ck.ModelBundle.from_checkpoint(ckpt, "x")[2], "cpu")(x),
            TorchBackend(ref, charset, ck.ModelBundle.from_checkpoint(ckpt, "x")[2], "cpu")(x),
        )
    second = [i for i, c in enumerate(charset.chars, start=1) if c == "|"]
    assert charset.decode(second) == "||" and charset.encode("|") == [second[0]]


def _as_chineseocr(model: CRNN) -> dict[str, torch.Tensor]:
    """Our CRNN's weights under chineseocr's names, saved from DataParallel."""
    rename = {"bn": "batchnorm", "lstm": "rnn", "proj": "embedding"}
    sd = {}
    for k, v in model.state_dict().items():
        parts = k.split(".")
        parts[1] = re.sub(r"^(bn|lstm|proj)", lambda m: rename[m.group(1)], parts[1])
        if parts[0] == "rnn":
            parts[2] = rename.get(parts[2], parts[2])
        sd["module." + ".".join(parts)] = v
    return sd


def test_fine_tuning_an_imported_chineseocr_model_as_the_readme_says(tmp_path, capsys):
    """README: import chineseocr's weights, then `train.init_from=` them with its keys.py
    on your own lines and the default model config. The run starts from exactly the
    imported weights (the default config is chineseocr's network) and trains."""
    from PIL import Image

    from crnn.config import load_config
    from crnn.engine.distributed import DistInfo
    from crnn.engine.trainer import Trainer

    torch.manual_seed(0)
    ref = CRNN(NCLASS).eval()
    src = tmp_path / "ocr-lstm.pth"
    torch.save(_as_chineseocr(ref), src)
    keys = _keys_py(tmp_path / "keys.py", ALPHABET)
    _import(tmp_path, capsys, src, "--layout", "chineseocr", "--charset", keys)
    lines = tmp_path / "lines"
    lines.mkdir()
    rng = np.random.default_rng(0)
    rows = []
    for i in range(8):
        Image.fromarray(rng.integers(0, 256, (32, 160), dtype=np.uint8)).save(lines / f"{i}.png")
        rows.append(f"{i}.png\t{''.join(rng.choice(list(ALPHABET), 5))}")
    (lines / "gt.txt").write_text("\n".join(rows) + "\n", encoding="utf-8")
    cfg = load_config(
        None,
        [
            f'data.train=["{lines}"]',
            f'data.val=["{lines}"]',
            f"data.charset={keys}",
            "data.max_width=280",
            f"train.init_from={tmp_path / 'imported.pt'}",
            "train.lr=1e-4",
            "data.num_workers=0",
            "train.batch_size=4",
            "train.max_steps=1",
            "train.val_every=1",
            "train.log_images=0",
            f"train.output_dir={tmp_path / 'run'}",
        ],
    )
    t = Trainer(cfg, DistInfo())
    for k, v in ref.state_dict().items():
        assert torch.equal(t.model.state_dict()[k], v), k
    result = t.fit()
    assert result.step == 1 and (tmp_path / "run" / "best.pt").is_file()
    assert not torch.equal(
        t.model.state_dict()["cnn.conv0.weight"], ref.state_dict()["cnn.conv0.weight"]
    )


# ---- alphabet files ---------------------------------------------------------------------


def test_keys_py_is_read_without_running_it(tmp_path):
    p = tmp_path / "keys.py"
    p.write_text("import os\nos.remove('x')\nalphabetChinese = u'我们' + '的'\n", encoding="utf-8")
    assert read_alphabet(str(p)).chars == "我们的"  # never executed: no NameError, no removal
    two = tmp_path / "two.py"
    two.write_text("a = '12'\nb = '345'\n", encoding="utf-8")
    with pytest.raises(CharsetFileError, match=r"several strings \(a \(2 characters\), b"):
        read_alphabet(str(two))
    assert read_alphabet(f"{two}#b").chars == "345"
    bad = tmp_path / "bad.py"
    bad.write_text("alphabet = '12\n", encoding="utf-8")
    with pytest.raises(CharsetFileError, match=r"bad.py:1: not Python"):
        read_alphabet(str(bad))


def test_char_std_in_gbk_with_its_placeholder_line(tmp_path, caplog):
    """The Synthetic Chinese String Dataset's char_std_5990.txt: GBK, line 0 'blank'."""
    chars = ["blank", "，", "的", "。", "一", "0", "鑫", "a"]
    p = tmp_path / "char_std_5990.txt"
    p.write_bytes("\n".join(chars).encode("gbk") + b"\n")
    with caplog.at_level("INFO"):
        cs = Charset.from_spec(str(p))
    assert cs.chars == "，的。一0鑫a" and cs.num_classes == len(chars)
    assert "GB18030" in caplog.text and "placeholder" in caplog.text
    assert index_table(p).lines[6] == "鑫"  # index 6 of a label is line 6 (from 0)


def test_a_bad_charset_file_names_the_line_and_the_fix(tmp_path):
    p = tmp_path / "chars.txt"
    p.write_text("a\nb\ncd\ne\n", encoding="utf-8")
    with pytest.raises(
        CharsetFileError, match=r"chars.txt:3: expected one character per line, got 'cd'"
    ):
        Charset.from_spec(str(p))
    p.write_bytes(b"a\n\xff\xfe\xfd\n")
    with pytest.raises(CharsetFileError, match=r"chars.txt:2: not UTF-8 .* no East Asian encoding"):
        Charset.from_spec(str(p))


def test_paddleocr_dictionary_with_its_space_class(tmp_path):
    p = tmp_path / "ppocr_keys_v1.txt"
    p.write_text("'\n疗\n绚\n", encoding="utf-8")
    assert Charset.from_spec(str(p)).num_classes == 4
    spaced = Charset.from_spec(f"{p}+space")
    assert spaced.chars == "'疗绚 " and spaced.num_classes == 5


@pytest.mark.parametrize(
    ("encoding", "text", "named"),
    [
        ("big5", "我們的國家學習電腦開發語言資料庫網路", "big5"),
        ("cp932", "あいうえおカキクケコ日本語漢字", "cp932"),
        ("cp949", "".join(chr(0xAC00 + 37 * i) for i in range(60)), "cp949"),
    ],
)
def test_alphabets_in_big5_shift_jis_and_euc_kr_are_read_as_written(
    tmp_path, encoding, text, named
):
    # All three decode as GB18030 too, into wrong characters: that reading must lose.
    p = tmp_path / "alphabet.txt"
    p.write_bytes("\n".join(text).encode(encoding))
    got = read_alphabet(str(p))
    assert got.chars == text and got.encoding == named


def test_an_alphabet_no_encoding_reads_plausibly_is_refused_naming_a_line(tmp_path):
    p = tmp_path / "cyrillic.txt"
    p.write_bytes("\n".join("абвгдежзийкл").encode("cp1251"))
    with pytest.raises(CharsetFileError, match=r"cyrillic.txt:1: not UTF-8.*iconv"):
        read_alphabet(str(p))
    short = tmp_path / "short.txt"
    short.write_bytes("\n".join("한국어글자").encode("cp949"))
    with pytest.raises(CharsetFileError, match="too short to tell EUC-KR"):
        read_alphabet(str(short))
