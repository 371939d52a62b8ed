"""Checkpoints that load anywhere: wrapper prefixes, strict-load messages, safe loading,
release files, foreign layouts (against reference networks built here from the published
layer lists), fine-tuning on another charset, and the convert_checkpoint command."""

import contextlib
import hashlib
import logging
import pickle
import re

import pytest
import torch
from ckpt_helpers import TINY, native_checkpoint, randomise, run_main, tiny_model
from conftest import run_tool
from torch import nn

from crnn import checkpoint as ck
from crnn.backends.torch import normalize
from crnn.checkpoint.grow import grow_hidden
from crnn.cli import convert_checkpoint
from crnn.config import load_config
from crnn.config.image_spec import ImageSpec
from crnn.engine.distributed import DistInfo
from crnn.engine.trainer import Trainer
from crnn.io import atomic_save
from crnn.model import CRNN, classifier_name
from crnn.reading.recognizer import Recognizer
from crnn.text.alphabet import Charset

ALNUM = "0123456789abcdefghijklmnopqrstuvwxyz"


def _images(b=2, w=100, seed=0):
    g = torch.Generator().manual_seed(seed)
    return normalize(torch.randint(0, 256, (b, 1, 32, w), dtype=torch.uint8, generator=g))


# ---- prefixes and strict loading -------------------------------------------------------


class _Compiled(nn.Module):
    """Names its child as ``torch.compile``'s OptimizedModule does (``_orig_mod``),
    without the seconds it takes to import torch._dynamo."""

    def __init__(self, module):
        super().__init__()
        self._orig_mod = module


def _wrapped_state_dicts(model):
    """State dicts as the wrappers name them, in every combination, plus doubled ones."""
    dp = nn.DataParallel  # on a CPU-only machine it wraps without replicating
    return {
        "bare": model.state_dict(),
        "DataParallel/DDP": dp(model).state_dict(),
        "torch.compile": _Compiled(model).state_dict(),
        "DP(compile)": dp(_Compiled(model)).state_dict(),
        "compile(DP)": _Compiled(dp(model)).state_dict(),
        "DP(DP)": dp(dp(model)).state_dict(),
        "compile(DP(compile))": _Compiled(dp(_Compiled(model))).state_dict(),
    }


def test_every_prefix_combination_loads(tmp_path):
    model = tiny_model()
    x = _images()
    with torch.no_grad():
        want = model(x)
    seen = set()
    for name, sd in _wrapped_state_dicts(model).items():
        prefix = next(iter(sd)).split("cnn.")[0]
        seen.add(prefix)
        fresh = CRNN(37, **TINY).eval()
        ck.load_state_dict_checked(fresh, sd, name)
        with torch.no_grad():
            torch.testing.assert_close(fresh(x), want, rtol=0, atol=0, msg=name)
        # ...and from a file, through the loader every tool uses.
        path = atomic_save(
            native_checkpoint(fresh, Charset(ALNUM)) | {"model": sd}, tmp_path / "c.pt"
        )
        loaded, _, _ = ck.model_from_checkpoint(ck.load_checkpoint(path))
        with torch.no_grad():
            torch.testing.assert_close(loaded.eval()(x), want, rtol=0, atol=0, msg=name)
    assert seen == {
        "",
        "module.",
        "_orig_mod.",
        "module._orig_mod.",
        "_orig_mod.module.",
        "module.module.",
        "_orig_mod.module._orig_mod.",
    }


def test_strict_load_names_missing_unexpected_and_both_shapes():
    model = CRNN(37, **TINY)
    sd = dict(model.state_dict())
    del sd["cnn.bn2.running_var"]
    sd["rnn.2.proj.weight"] = torch.zeros(3)
    sd["rnn.1.proj.weight"] = torch.zeros(20, 32)
    with pytest.raises(ck.CheckpointError) as e:
        ck.load_state_dict_checked(model, {"module." + k: v for k, v in sd.items()}, "x.pt")
    msg = str(e.value)
    assert "missing keys (1): cnn.bn2.running_var" in msg
    assert "unexpected keys (1): rnn.2.proj.weight" in msg
    assert "rnn.1.proj.weight: checkpoint (20, 32) vs model (37, 32)" in msg
    assert msg.startswith("x.pt does not fit the model")


def test_convert_single_and_dp_round_trip():
    model = tiny_model()
    native = native_checkpoint(model, Charset(ALNUM), optimizer={"state": {}})
    dp = ck.convert_prefixes(native, "dp")
    assert all(k.startswith("module.") and not k.startswith("module.module.") for k in dp["model"])
    assert dp["optimizer"] == native["optimizer"] and dp["charset"] == native["charset"]
    assert ck.convert_prefixes(dp, "single")["model"].keys() == model.state_dict().keys()
    compiled = _Compiled(nn.DataParallel(model)).state_dict()
    bare = ck.convert_prefixes(compiled, "single")
    assert bare.keys() == model.state_dict().keys()
    assert set(ck.convert_prefixes(bare, "dp")) == {"module." + k for k in bare}
    wrapped = {"epoch": 3, "state_dict": compiled}
    assert ck.convert_prefixes(wrapped, "single")["state_dict"].keys() == bare.keys()


# ---- safe loading ----------------------------------------------------------------------


class _RunsCode:
    """Unpickling this calls exec(), which creates a marker file."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (exec, (f"open({self.marker!r}, 'w').close()",))


def test_a_checkpoint_that_calls_os_system_is_refused_in_torchs_current_wording(tmp_path):
    """torch 2.6+ says "Trying to load unsupported GLOBAL posix.system whose module posix
    is blocked" after its advice to retry with weights_only=False: name the call, never
    repeat the advice."""
    path = tmp_path / "evil.pt"
    torch.save({"model": _System("true")}, path)
    with pytest.raises(ck.CheckpointError) as e:
        ck.load_checkpoint(path)
    msg = str(e.value)
    assert "refusing to load" in msg and "system" in msg and "would run code" in msg
    assert "weights_only` set to `False`" not in msg and "weights_only=False" not in msg


class _System:
    def __init__(self, cmd: str) -> None:
        self.cmd = cmd

    def __reduce__(self):
        import os

        return (os.system, (self.cmd,))


@pytest.mark.parametrize("kind", ["torch.save", "legacy torch.save", "plain pickle"])
def test_a_checkpoint_that_would_run_code_is_refused(tmp_path, kind):
    marker = tmp_path / "pwned"
    payload = {"model": tiny_model().state_dict(), "extra": _RunsCode(marker)}
    path = tmp_path / "evil.pt"
    if kind == "plain pickle":
        path.write_bytes(pickle.dumps(payload, protocol=2))
    else:
        torch.save(payload, path, _use_new_zipfile_serialization=kind == "torch.save")
    with pytest.raises(ck.CheckpointError) as e:
        ck.load_checkpoint(path)
    assert not marker.exists()
    msg = str(e.value)
    assert "refusing to load" in msg and "exec" in msg and "would run code" in msg
    assert "weights_only=True" in msg and "state_dict" in msg
    assert "weights_only` set to `False`" not in msg and "weights_only=False" not in msg
    with pytest.raises(ck.CheckpointError):
        Recognizer.from_checkpoint(path)
    assert not marker.exists()
    # The payload is real: an unsafe load runs it.
    with pytest.raises(Exception) if kind == "plain pickle" else contextlib.nullcontext():
        torch.load(path, weights_only=False)  # (a plain pickle then fails the magic number)
    assert marker.exists()


def test_files_that_are_not_checkpoints_get_clear_errors(tmp_path):
    cases = {
        "text.pt": b"hello, I am a text file\n",
        "empty.pt": b"",
        "noise.pt": bytes(range(256)) * 8,
    }
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
        with pytest.raises(ck.CheckpointError, match="not a PyTorch checkpoint|empty, truncated"):
            ck.load_checkpoint(tmp_path / name)
    good = tmp_path / "good.pt"
    torch.save(native_checkpoint(tiny_model(), Charset(ALNUM)), good)
    (tmp_path / "cut.pt").write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    with pytest.raises(ck.CheckpointError, match="truncated"):
        ck.load_checkpoint(tmp_path / "cut.pt")
    torch.save(torch.zeros(3), tmp_path / "tensor.pt")
    with pytest.raises(ck.CheckpointError, match="holds a Tensor, expected a dict"):
        ck.load_checkpoint(tmp_path / "tensor.pt")
    with pytest.raises(ck.CheckpointError, match="not found"):
        ck.load_checkpoint(tmp_path / "nope.pt")
    with pytest.raises(ck.CheckpointError, match="top-level keys are 'epoch', 'lr'"):
        ck.extract_state_dict({"epoch": 1, "lr": 0.1})


# ---- release files ---------------------------------------------------------------------


@pytest.mark.parametrize("fp16", [False, True])
def test_release_file_is_hash_named_inference_only_and_loads(tmp_path, fp16):
    model = tiny_model()
    charset = Charset(ALNUM, name="alnum36")
    train_ckpt = native_checkpoint(
        model,
        charset,
        step=1234,
        optimizer={"state": {0: {"exp_avg": torch.ones(3)}}, "param_groups": []},
        scheduler={},
        rng={},
        metrics={"accuracy": 0.5},
    )
    src = atomic_save(train_ckpt, tmp_path / "best.pt")
    out = ck.save_release(ck.load_checkpoint(src), tmp_path / "rel" / "crnn_en.pt", fp16=fp16)
    m = re.fullmatch(r"crnn_en-([0-9a-f]{8})\.pt", out.name)
    assert m, out.name
    assert hashlib.sha256(out.read_bytes()).hexdigest()[:8] == m.group(1)
    assert sorted(p.name for p in out.parent.iterdir()) == [out.name]  # no temp file left
    rel = ck.load_checkpoint(out)
    assert not {"optimizer", "scheduler", "rng"} & set(rel)
    assert rel["release"]["step"] == 1234 and rel["release"]["metrics"] == {"accuracy": 0.5}
    dtype = torch.float16 if fp16 else torch.float32
    assert rel["model"]["cnn.conv0.weight"].dtype == dtype
    if fp16:
        assert out.stat().st_size < 0.6 * src.stat().st_size
    loaded, cs, spec = ck.model_from_checkpoint(rel)
    assert all(p.dtype == torch.float32 for p in loaded.parameters())  # upcast on load
    assert cs == charset and spec == ImageSpec()
    x = _images()
    with torch.no_grad():
        tol = 2e-2 if fp16 else 0.0
        torch.testing.assert_close(loaded.eval()(x), model(x), rtol=0, atol=tol)
    rec = Recognizer.from_checkpoint(out, device="cpu")
    assert len(rec.predict(torch.randint(0, 256, (32, 80), dtype=torch.uint8).numpy())) == 1
    # Releasing a release file replaces the hash instead of stacking a second one.
    again = ck.save_release(rel, out, fp16=fp16)
    assert re.fullmatch(r"crnn_en-[0-9a-f]{8}\.pt", again.name)


def test_average_is_the_weighted_mean_and_refuses_another_model(tmp_path, capsys):
    """3,1 shares of a float32 training checkpoint (its EMA ``model``) and an fp16 release
    give 0.75 a + 0.25 b in every float tensor, counters from the first; the release file
    names its inputs. A different width or alphabet is refused, nothing written."""
    a, b = tiny_model(seed=1), tiny_model(seed=2)
    cs = Charset(ALNUM, name="alnum36")
    raw = {k: v + 1 for k, v in a.state_dict().items()}
    src_a = atomic_save(
        native_checkpoint(a, cs, step=700, model_raw=raw, optimizer={}), tmp_path / "a.pt"
    )
    rel_b = ck.save_release(native_checkpoint(b, cs, step=900), tmp_path / "b.pt", fp16=True)
    main = convert_checkpoint.main
    args = ["average", src_a, rel_b, "--shares", "3,1", "-o", tmp_path / "avg.pt"]
    rc, out, err = run_main(main, *args, capsys=capsys)
    assert rc == 0 and "a.pt 75%, " in err, err
    avg = ck.load_checkpoint(out.strip())
    sb = ck.load_checkpoint(rel_b)["model"]
    for k, v in a.state_dict().items():
        want = 0.75 * v + 0.25 * sb[k].float() if v.is_floating_point() else v
        torch.testing.assert_close(avg["model"][k], want, rtol=0, atol=1e-6, msg=k)
    assert [(x["source"], x["step"], x["share"]) for x in avg["release"]["averaged"]] == [
        ("a.pt", 700, 0.75),
        (rel_b.name, 900, 0.25),
    ]
    assert avg["release"]["step"] == 900
    wide = CRNN(37, channels=TINY["channels"], hidden=24)
    other = atomic_save(native_checkpoint(wide, cs), tmp_path / "wide.pt")
    backwards = atomic_save(native_checkpoint(b, Charset(ALNUM[::-1])), tmp_path / "back.pt")
    for bad, said in ((other, "different architecture"), (backwards, "different alphabet")):
        rc, _, err = run_main(main, "average", src_a, bad, "-o", tmp_path / "x.pt", capsys=capsys)
        assert rc == 2 and said in err and bad.name in err, err
    rc, _, err = run_main(
        main, "average", src_a, rel_b, "--shares", "1", "-o", tmp_path / "x.pt", capsys=capsys
    )
    assert rc == 2 and "gives 1 parts for 2 files" in err
    rc, _, err = run_main(main, "average", tmp_path, "-o", tmp_path / "x.pt", capsys=capsys)
    assert rc == 2 and "without kept steps" in err and "train.keep_every" in err
    assert not list(tmp_path.glob("x*.pt"))


# ---- foreign layouts -------------------------------------------------------------------
# Reference networks written here from the published layer lists (see docs/checkpoints.md),
# with the foreign projects' parameter names. No code from those projects.


class _MeijieruBiLSTM(nn.Module):
    """Sequence-first BiLSTM (``rnn``) and a per-step linear layer (``embedding``)."""

    def __init__(self, n_in, hidden, n_out):
        super().__init__()
        self.rnn = nn.LSTM(n_in, hidden, bidirectional=True)
        self.embedding = nn.Linear(2 * hidden, n_out)

    def forward(self, x):  # (T, B, C) -> (T, B, n_out)
        y, _ = self.rnn(x)
        steps, batch, feat = y.shape
        return self.embedding(y.reshape(steps * batch, feat)).reshape(steps, batch, -1)


class _MeijieruCRNN(nn.Module):
    """CRNN(imgH=32, nc=1, nclass, nh): 7 convs (BN after 2, 4, 6), 4 max-pools, 2 BiLSTMs."""

    def __init__(self, nclass, nh=256, nc=1):
        super().__init__()
        widths = [64, 128, 256, 256, 512, 512, 512]
        self.cnn = nn.Sequential()
        c_in = nc
        # max-pool after conv 0, 1, 3, 5: (kernel, stride, padding)
        pools = {0: ((2, 2), (2, 2), (0, 0)), 1: ((2, 2), (2, 2), (0, 0))}
        pools |= {3: ((2, 2), (2, 1), (0, 1)), 5: ((2, 2), (2, 1), (0, 1))}
        for i, c in enumerate(widths):
            k, p = (2, 0) if i == 6 else (3, 1)
            self.cnn.add_module(f"conv{i}", nn.Conv2d(c_in, c, k, 1, p))
            if i in (2, 4, 6):
                self.cnn.add_module(f"batchnorm{i}", nn.BatchNorm2d(c))
            self.cnn.add_module(f"relu{i}", nn.ReLU(True))
            if i in pools:
                self.cnn.add_module(f"pooling{sorted(pools).index(i)}", nn.MaxPool2d(*pools[i]))
            c_in = c
        self.rnn = nn.Sequential(_MeijieruBiLSTM(512, nh, nh), _MeijieruBiLSTM(nh, nh, nclass))

    def forward(self, x):  # (B, 1, 32, W) -> (T, B, nclass)
        f = self.cnn(x)
        assert f.shape[2] == 1
        return self.rnn(f.squeeze(2).permute(2, 0, 1))


class _ClovaBiLSTM(nn.Module):
    def __init__(self, n_in, hidden, n_out):
        super().__init__()
        self.rnn = nn.LSTM(n_in, hidden, bidirectional=True, batch_first=True)
        self.linear = nn.Linear(2 * hidden, n_out)

    def forward(self, x):  # (B, T, C)
        return self.linear(self.rnn(x)[0])


class _ClovaFeatures(nn.Module):
    def __init__(self):
        super().__init__()
        conv, relu, pool = nn.Conv2d, nn.ReLU, nn.MaxPool2d
        self.ConvNet = nn.Sequential(
            conv(1, 64, 3, 1, 1),
            relu(True),
            pool(2, 2),  # 0 1 2
            conv(64, 128, 3, 1, 1),
            relu(True),
            pool(2, 2),  # 3 4 5
            conv(128, 256, 3, 1, 1),
            relu(True),  # 6 7
            conv(256, 256, 3, 1, 1),
            relu(True),
            pool((2, 1), (2, 1)),  # 8 9 10
            conv(256, 512, 3, 1, 1, bias=False),
            nn.BatchNorm2d(512),
            relu(True),  # 11 12 13
            conv(512, 512, 3, 1, 1, bias=False),
            nn.BatchNorm2d(512),
            relu(True),  # 14 15 16
            pool((2, 1), (2, 1)),  # 17
            conv(512, 512, 2, 1, 0),
            relu(True),  # 18 19
        )


class _ClovaNoneVGGBiLSTMCTC(nn.Module):
    def __init__(self, num_class):
        super().__init__()
        self.FeatureExtraction = _ClovaFeatures()
        self.AdaptiveAvgPool = nn.AdaptiveAvgPool2d((None, 1))
        self.SequenceModeling = nn.Sequential(
            _ClovaBiLSTM(512, 256, 256), _ClovaBiLSTM(256, 256, 256)
        )
        self.Prediction = nn.Linear(256, num_class)

    def forward(self, x):  # (B, 1, 32, W) -> (B, T, num_class)
        f = self.FeatureExtraction.ConvNet(x)  # (B, C, H, W')
        f = self.AdaptiveAvgPool(f.permute(0, 3, 1, 2)).squeeze(3)  # [b, w, c, h] -> (B, W', C)
        return self.Prediction(self.SequenceModeling(f))


def _save_foreign(ref, path, drop_bn_counter=False):
    """As those projects save: the state_dict of the DataParallel-wrapped model."""
    sd = nn.DataParallel(ref).state_dict()
    if drop_bn_counter:  # files written before PyTorch 0.4.1 have no BN batch counter
        sd = {k: v for k, v in sd.items() if not k.endswith("num_batches_tracked")}
    torch.save(sd, path)
    return sd


@pytest.fixture(scope="module")
def meijieru(tmp_path_factory):
    torch.manual_seed(11)
    ref = randomise(_MeijieruCRNN(nclass=37), seed=11)
    path = tmp_path_factory.mktemp("meijieru") / "crnn.pth"
    sd = _save_foreign(ref, path, drop_bn_counter=True)
    assert "module.cnn.batchnorm2.running_var" in sd and "module.rnn.1.embedding.weight" in sd
    return ref, path


@pytest.fixture(scope="module")
def clova(tmp_path_factory):
    torch.manual_seed(12)
    ref = randomise(_ClovaNoneVGGBiLSTMCTC(num_class=37), seed=12)
    path = tmp_path_factory.mktemp("clova") / "None-VGG-BiLSTM-CTC.pth"
    sd = _save_foreign(ref, path)
    assert {"module.FeatureExtraction.ConvNet.12.running_mean", "module.Prediction.bias"} <= set(sd)
    assert "module.FeatureExtraction.ConvNet.11.bias" not in sd
    return ref, path


@pytest.mark.parametrize("layout", ["meijieru", "clova"])
def test_imported_foreign_weights_give_the_reference_logits(layout, request, tmp_path):
    ref, path = request.getfixturevalue(layout)
    ckpt = ck.import_state_dict(ck.load_checkpoint(path), Charset(ALNUM), "auto", None, str(path))
    assert ckpt["imported"]["layout"] == layout
    assert ckpt["model_config"]["arch"] == {"meijieru": "crnn", "clova": "vgg"}[layout]
    model, charset, spec = ck.model_from_checkpoint(
        ck.load_checkpoint(atomic_save(ckpt, tmp_path / "n.pt"))
    )
    model.eval()
    for width in (100, 164):
        x = _images(b=3, w=width, seed=width)
        with torch.no_grad():
            want = ref(x)
            if layout == "meijieru":
                want = want.transpose(0, 1)  # it is sequence-first
            got = model(x)
        assert got.shape == want.shape == (3, model.output_length(width), 37)
        assert (got - want).abs().max().item() < 1e-5
    assert charset.chars == ALNUM and spec.height == 32 and not spec.rgb


def test_import_checks_the_alphabet_size_and_the_layout(meijieru, clova):
    _, path = meijieru
    sd = ck.load_checkpoint(path)
    with pytest.raises(ck.CheckpointError) as e:
        ck.import_state_dict(sd, Charset("abcdefghijklmnopqrstuvwxyz"), source="crnn.pth")
    msg = str(e.value)
    assert "37 classes (36 characters + blank)" in msg and "27 (26 characters + blank)" in msg
    with pytest.raises(ck.CheckpointError, match="looks like the meijieru layout, not clova"):
        ck.import_state_dict(sd, Charset(ALNUM), layout="clova")
    attn = dict(ck.load_checkpoint(clova[1]))
    attn["module.Transformation.LocalizationNetwork.fc2.weight"] = torch.zeros(40, 256)
    with pytest.raises(ck.CheckpointError, match="1 keys are not part of the clova layout"):
        ck.import_state_dict(attn, Charset(ALNUM))
    with pytest.raises(ck.CheckpointError, match="cannot tell which network"):
        ck.import_state_dict({"backbone.weight": torch.zeros(2)}, Charset(ALNUM))


# ---- fine-tuning with another charset --------------------------------------------------


@pytest.mark.parametrize("arch", ["crnn", "vgg"])
def test_charset_change_keeps_the_rows_of_shared_characters(arch):
    old_cs = Charset(ALNUM, name="alnum36")
    new_chars = "ZYXWVUTSRQPONMLKJIHGFEDCBA" + ALNUM[::-1].replace("q", "") + "-"
    new_cs = Charset(new_chars, case_fold=False, name="mixed")
    old = tiny_model(arch, old_cs.num_classes, seed=1)
    new = tiny_model(arch, new_cs.num_classes, seed=2)
    fresh = {k: v.clone() for k, v in new.state_dict().items()}
    sd, report = ck.adapt_to_charset(old.state_dict(), old_cs, new_cs, new)
    assert len(report.kept) == 35 and report.dropped == ["q"]
    assert "".join(report.added) == "ZYXWVUTSRQPONMLKJIHGFEDCBA-"
    summary = report.summary()
    assert "kept 35 rows" in summary and "initialised 27 new ones ('ZYX" in summary
    assert "dropped 1 ('q')" in summary
    new.load_state_dict(sd)
    x = _images(b=2, w=64)
    with torch.no_grad():
        lo, ln = old(x), new.eval()(x)
    # Same features, so shared characters (and the blank) get the very same logits...
    torch.testing.assert_close(ln[..., 0], lo[..., 0], rtol=0, atol=1e-6)
    for ch in report.kept:
        i, j = new_cs.index(ch), old_cs.index(ch)
        torch.testing.assert_close(ln[..., i], lo[..., j], rtol=0, atol=1e-6)
    # ...new characters keep the new model's fresh rows, everything else is the old model.
    cls = classifier_name(arch)
    for ch in report.added:
        i = new_cs.index(ch)
        assert torch.equal(sd[f"{cls}.weight"][i], fresh[f"{cls}.weight"][i])
    for k, v in old.state_dict().items():
        if not k.startswith(cls + "."):
            assert torch.equal(sd[k], v), k


def test_fine_tuning_from_another_charset_through_the_trainer(tiny_overrides, tmp_path, caplog):
    old_cs = Charset.from_spec("alnum36")
    old = tiny_model("crnn", old_cs.num_classes, seed=3)
    src = atomic_save(native_checkpoint(old, old_cs), tmp_path / "alnum36.pt")
    cfg = load_config(None, [*tiny_overrides, "data.charset=alnum62", f"train.init_from={src}"])
    with caplog.at_level(logging.INFO, logger="crnn"):
        t = Trainer(cfg, DistInfo())
    assert (
        "kept 36 rows (and the blank), initialised 26 new ones ('ABCDEFGHIJKLMNOPQRSTUVWXYZ')"
        in caplog.text
    )
    assert "dropped 0" in caplog.text
    w_new = t.model.state_dict()["rnn.1.proj.weight"]
    w_old = old.state_dict()["rnn.1.proj.weight"]
    assert w_new.shape[0] == 63
    assert torch.equal(w_new[0], w_old[0])
    for ch in old_cs.chars:
        assert torch.equal(w_new[t.charset.index(ch)], w_old[old_cs.index(ch)])
    assert torch.equal(
        t.model.state_dict()["cnn.conv3.weight"], old.state_dict()["cnn.conv3.weight"]
    )
    assert "keeps its scale" not in caplog.text  # both read lines 32 px high
    caplog.clear()
    cfg = load_config(None, [*tiny_overrides, "data.height=48", f"train.init_from={src}"])
    with caplog.at_level(logging.INFO, logger="crnn"):
        Trainer(cfg, DistInfo())
    assert "read lines 32 px high and this run trains at 48 (data.height)" in caplog.text
    assert "1.50x" in caplog.text and "--set data.height=32 keeps its scale" in caplog.text


# ---- a wider model from a trained one ---------------------------------------------------


@pytest.mark.parametrize("arch", ["crnn", "vgg", "crnn_s8"])
def test_a_model_grown_wider_reads_as_the_trained_one_and_its_new_units_learn(arch):
    old = tiny_model(arch, 37, seed=4).eval()
    torch.manual_seed(5)
    wide = CRNN(37, arch=arch, **{**TINY, "hidden": 24})
    sd, note = grow_hidden(old.state_dict(), wide)
    assert "from 16 to 24 hidden units" in note
    wide.load_state_dict(sd)
    x = _images(b=2, w=64)
    with torch.no_grad():
        torch.testing.assert_close(wide.eval()(x), old(x), rtol=0, atol=1e-5)
    # A new unit's own weights are random; its weights into the trained units are zero...
    for lstm in (wide.rnn[0].lstm, wide.rnn[1].lstm):
        for gate in range(4):
            rows = slice(gate * 24, gate * 24 + 16)
            assert lstm.weight_hh_l0[rows, 16:].abs().sum() == 0
            assert lstm.weight_hh_l0[gate * 24 + 16 : (gate + 1) * 24].abs().sum() > 0
    # ...and the first backward pass gives those a gradient, so the new units start to count.
    head = wide.fc if arch == "vgg" else wide.rnn[1].proj
    wide.train()(x).logsumexp(-1).sum().backward()
    assert head.weight.grad[:, 16:24].abs().sum() > 0


def test_growing_and_a_new_charset_together_and_never_shrinking():
    old_cs, new_cs = Charset.from_spec("alnum36"), Charset.from_spec("alnum62")
    old = tiny_model("crnn", old_cs.num_classes, seed=6).eval()
    wide = CRNN(new_cs.num_classes, arch="crnn", **{**TINY, "hidden": 32})
    wide.load_state_dict(ck.init_state_dict(native_checkpoint(old, old_cs), wide, new_cs))
    x = _images(b=2, w=64)
    with torch.no_grad():
        lo, ln = old(x), wide.eval()(x)
    for ch in "0a9z":
        torch.testing.assert_close(
            ln[..., new_cs.index(ch)], lo[..., old_cs.index(ch)], rtol=0, atol=1e-5
        )
    narrow = CRNN(old_cs.num_classes, arch="crnn", **{**TINY, "hidden": 8})
    with pytest.raises(ck.CheckpointError, match="narrower than the checkpoint's BiLSTMs"):
        ck.init_state_dict(native_checkpoint(old, old_cs), narrow, old_cs, "old.pt")


# ---- the command line ------------------------------------------------------------------


def test_convert_cli_each_mode(tmp_path, capsys, meijieru, clova):
    model = tiny_model()
    src = atomic_save(native_checkpoint(model, Charset(ALNUM), optimizer={}), tmp_path / "last.pt")
    main = convert_checkpoint.main
    rc, _, err = run_main(main, "dp", src, "-o", tmp_path / "dp.pt", capsys=capsys)
    assert rc == 0 and "dp names" in err
    assert all(k.startswith("module.") for k in ck.load_checkpoint(tmp_path / "dp.pt")["model"])
    rc, _, _ = run_main(
        main, "single", tmp_path / "dp.pt", "-o", tmp_path / "single.pt", capsys=capsys
    )
    assert rc == 0
    assert ck.load_checkpoint(tmp_path / "single.pt")["model"].keys() == model.state_dict().keys()
    rc, out, _ = run_main(
        main, "release", src, "-o", tmp_path / "crnn_en.pt", "--fp16", capsys=capsys
    )
    assert rc == 0 and re.fullmatch(r".*crnn_en-[0-9a-f]{8}\.pt", out.strip())
    assert (
        Recognizer.from_checkpoint(out.strip(), device="cpu").backend.model.hparams == model.hparams
    )
    for layout, (_, path) in {"meijieru": meijieru, "clova": clova}.items():
        dst = tmp_path / f"{layout}.pt"
        rc, _, err = run_main(main, "import", path, "--alphabet", ALNUM, "-o", dst, capsys=capsys)
        assert rc == 0 and f"({layout} layout)" in err, err
        assert ck.model_from_checkpoint(ck.load_checkpoint(dst))[1].chars == ALNUM
    rc, _, err = run_main(main, "dp", src, "-o", tmp_path / "dp.pt", capsys=capsys)
    assert rc == 2 and "exists; pass --overwrite" in err


def test_convert_cli_bad_input_is_a_usage_error(tmp_path, capsys, meijieru):
    main = convert_checkpoint.main
    rc, _, err = run_main(
        main, "single", tmp_path / "nope.pt", "-o", tmp_path / "o.pt", capsys=capsys
    )
    assert rc == 2 and "nope.pt' not found" in err
    (tmp_path / "notes.txt").write_text("not a checkpoint\n")
    rc, _, err = run_main(
        main, "release", tmp_path / "notes.txt", "-o", tmp_path / "r.pt", capsys=capsys
    )
    assert rc == 2 and "not a PyTorch checkpoint" in err
    torch.save({"epoch": 3}, tmp_path / "meta.pt")
    rc, _, err = run_main(main, "dp", tmp_path / "meta.pt", "-o", tmp_path / "o.pt", capsys=capsys)
    assert rc == 2 and "neither a crnn-ocr checkpoint nor a state_dict" in err
    rc, _, err = run_main(
        main, "import", meijieru[1], "--alphabet", "abc", "-o", tmp_path / "o.pt", capsys=capsys
    )
    assert rc == 2 and "37 classes" in err and "gives 4 (3 characters + blank)" in err
    assert not any(p.name.startswith("o.pt") or p.name == "r.pt" for p in tmp_path.iterdir())


@pytest.mark.slow
def test_convert_tool_imports_then_predict_reads_with_the_result(tmp_path, clova, word_folder):
    """The shim end to end, as a user runs it: import a clova file, then predict with it."""
    out = tmp_path / "clova_native.pt"
    r = run_tool(
        "convert_checkpoint", "import", str(clova[1]), "--charset", "alnum36", "-o", str(out)
    )
    assert r.returncode == 0, r.stderr
    assert "arch vgg, 37 classes" in r.stderr
    rec = Recognizer.from_checkpoint(out, device="cpu")
    preds = rec.predict(sorted((word_folder / "images").iterdir())[:3])
    assert len(preds) == 3 and all(0.0 <= p.confidence <= 1.0 for p in preds)
