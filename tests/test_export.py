"""ONNX export: ONNX Runtime agrees with PyTorch for any batch and width, the file carries
its charset and image spec, and tools/export.py checks what it writes."""

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from ckpt_helpers import TINY, native_checkpoint, randomise, run_main
from conftest import run_tool

pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import onnx  # noqa: E402

from crnn.backends.torch import TorchBackend, normalize  # noqa: E402
from crnn.cli import export as export_cli  # noqa: E402
from crnn.cli import predict as predict_cli  # noqa: E402
from crnn.ctc import greedy_decode  # noqa: E402
from crnn.data.image import ImageSpec  # noqa: E402
from crnn.export import export_onnx  # noqa: E402
from crnn.io import atomic_save  # noqa: E402
from crnn.model import CRNN  # noqa: E402
from crnn.reading.recognizer import Recognizer  # noqa: E402
from crnn.text.alphabet import Charset  # noqa: E402

CHARSET = Charset.from_spec("alnum36")
WIDTHS = [32, 48, 100, 128, 257, 400]
SIZES = {  # the published size for crnn, a smaller one for vgg (keeps the test quick)
    "crnn": {"channels": [64, 128, 256, 256, 512, 512, 512], "hidden": 256},
    "vgg": {"channels": [16, 32, 64, 64, 128, 128, 128], "hidden": 64},
}


@pytest.fixture(scope="module", params=["crnn", "vgg"])
def exported(request, tmp_path_factory):
    arch = request.param
    torch.manual_seed(5)
    model = randomise(CRNN(CHARSET.num_classes, arch=arch, **SIZES[arch]), seed=5)
    spec = ImageSpec(max_width=400)
    path = export_onnx(model, CHARSET, spec, tmp_path_factory.mktemp("onnx") / f"{arch}.onnx")
    return model, spec, path


def test_onnx_runtime_matches_pytorch_for_any_batch_and_width(exported):
    model, _, path = exported
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    g = torch.Generator().manual_seed(0)
    worst = {}
    for batch in (1, 3):
        for width in WIDTHS:
            x = torch.randint(0, 256, (batch, 1, 32, width), dtype=torch.uint8, generator=g)
            (got,) = session.run(["logits"], {"images": x.numpy()})
            with torch.no_grad():
                want = model(normalize(x)).numpy()
            assert got.shape == want.shape == (batch, model.output_length(width), 37)
            worst[(batch, width)] = float(np.abs(got - want).max())
    assert max(worst.values()) < 1e-4, worst
    assert min(worst.values()) > 0  # two engines really ran
    print(f"\n{model.arch}: max |ONNX - PyTorch| per (batch, width): {worst}")


def test_the_onnx_file_is_all_a_consumer_needs(exported):
    model, spec, path = exported
    proto = onnx.load(str(path))
    (inp,) = proto.graph.input
    assert inp.name == "images"
    assert inp.type.tensor_type.elem_type == onnx.TensorProto.UINT8
    dims = [d.dim_param or d.dim_value for d in inp.type.tensor_type.shape.dim]
    assert dims == ["batch", 1, 32, "width"]
    meta = {p.key: p.value for p in proto.metadata_props}
    assert json.loads(meta["crnn_ocr.charset"]) == CHARSET.to_dict()
    assert json.loads(meta["crnn_ocr.image"]) == spec.to_dict()
    assert meta["crnn_ocr.blank"] == "0" and "uint8" in meta["crnn_ocr.input"]
    # A consumer with onnxruntime and numpy only: metadata -> alphabet -> greedy text.
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    chars = json.loads(session.get_modelmeta().custom_metadata_map["crnn_ocr.charset"])["chars"]
    x = torch.randint(0, 256, (4, 1, 32, 120), dtype=torch.uint8, generator=torch.Generator())
    (logits,) = session.run(None, {"images": x.numpy()})
    texts = []
    for best in logits.argmax(-1):
        keep = [c for i, c in enumerate(best) if c != 0 and (i == 0 or c != best[i - 1])]
        texts.append("".join(chars[c - 1] for c in keep))
    with torch.no_grad():
        assert texts == [p.text for p in greedy_decode(model(normalize(x)), CHARSET)]


def test_recognizer_from_onnx_reads_like_the_pytorch_one(exported, word_folder):
    model, spec, path = exported
    images = sorted((word_folder / "images").iterdir())[:6]
    torch_rec = Recognizer(TorchBackend(model, CHARSET, spec, device="cpu"))
    onnx_rec = Recognizer.from_checkpoint(path, threads=1)
    assert onnx_rec.charset == CHARSET and onnx_rec.spec == spec
    for a, b in zip(torch_rec.predict(images), onnx_rec.predict(images)):
        assert a.text == b.text
        assert a.confidence == pytest.approx(b.confidence, rel=1e-3, abs=1e-6)
    beam = Recognizer.from_checkpoint(path, beam_width=3).predict(images)
    assert [p.text for p in beam] == [
        p.text
        for p in Recognizer(TorchBackend(model, CHARSET, spec, "cpu"), beam_width=3).predict(images)
    ]


@pytest.mark.slow
def test_export_tool_writes_and_checks_the_file(tmp_path):
    torch.manual_seed(0)
    model = randomise(CRNN(37, **TINY), seed=0)
    src = atomic_save(native_checkpoint(model, CHARSET), tmp_path / "best.pt")
    out = tmp_path / "model.onnx"
    r = run_tool("export", str(src), "-o", str(out), "--check-widths", "32,100,400")
    assert r.returncode == 0, r.stderr
    assert "batch 3, width 400: max |ONNX - PyTorch|" in r.stderr
    assert "ONNX Runtime matches PyTorch" in r.stderr
    assert Recognizer.from_checkpoint(out).charset == CHARSET


def test_export_usage_errors(tmp_path, capsys, monkeypatch):
    rc, _, err = run_main(
        export_cli.main, tmp_path / "none.pt", "-o", tmp_path / "m.onnx", capsys=capsys
    )
    assert rc == 2 and "none.pt' not found" in err
    torch.manual_seed(0)
    src = atomic_save(native_checkpoint(CRNN(37, **TINY), CHARSET), tmp_path / "c.pt")
    (tmp_path / "old.onnx").write_bytes(b"keep me")
    rc, _, err = run_main(export_cli.main, src, "-o", tmp_path / "old.onnx", capsys=capsys)
    assert rc == 2 and "exists; pass --overwrite" in err
    assert (tmp_path / "old.onnx").read_bytes() == b"keep me"
    monkeypatch.setitem(sys.modules, "onnx", None)  # as if onnx were not installed
    rc, _, err = run_main(export_cli.main, src, "-o", tmp_path / "m.onnx", capsys=capsys)
    assert rc == 2 and "needs the onnx package" in err and "pip install 'crnn-ocr[onnx]'" in err
    assert not (tmp_path / "m.onnx").exists()


def test_predict_cli_runs_an_onnx_file(exported, word_folder, tmp_path, capsys):
    model, spec, path = exported
    ckpt = native_checkpoint(model, CHARSET) | {"image": spec.to_dict()}
    src = atomic_save(ckpt, tmp_path / "best.pt")
    images = [str(p) for p in sorted((word_folder / "images").iterdir())[:3]]
    rc, from_onnx, _ = run_main(predict_cli.main, "-c", path, *images, capsys=capsys)
    assert rc == 0
    rc, from_torch, _ = run_main(predict_cli.main, "-c", src, *images, capsys=capsys)
    assert rc == 0
    rows = [line.split("\t") for line in from_onnx.splitlines()]
    assert [r[:2] for r in rows] == [line.split("\t")[:2] for line in from_torch.splitlines()]
    assert [r[0] for r in rows] == images


@pytest.mark.slow
def test_eval_cli_scores_an_onnx_export_like_its_checkpoint(tmp_path, word_lmdb):
    # A trained reader (so accuracy is neither 0 nor 1 by accident), evaluated on padded,
    # width-bucketed batches: the ONNX path needs exact per-sample CTC lengths too.
    reader = str(Path(__file__).parent / "fixtures" / "tiny_reader.pt")
    onnx_path = tmp_path / "reader.onnx"
    assert run_tool("export", reader, "-o", str(onnx_path)).returncode == 0
    rows = {}
    for name, model in (("pt", reader), ("onnx", str(onnx_path))):
        out = tmp_path / f"{name}.json"
        r = run_tool("eval", model, str(word_lmdb), "--json", str(out), "--batch-size", "16")
        assert r.returncode == 0, r.stderr[-2000:]
        rows[name] = json.loads(out.read_text())[0]
    assert rows["onnx"]["count"] == rows["pt"]["count"] == 64
    assert 0 < rows["pt"]["accuracy"]
    for k in ("accuracy", "alnum_accuracy", "cer", "ned"):
        assert rows["onnx"][k] == pytest.approx(rows["pt"][k], abs=1e-9), k
    missing = run_tool("eval", str(tmp_path / "nope.onnx"), str(word_lmdb))
    assert missing.returncode == 2 and "nope.onnx" in missing.stderr
