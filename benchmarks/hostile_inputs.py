"""What hostile and unlucky inputs cost: each one read through the code users run, with
its wall time, the peak memory Python allocated (tracemalloc: NumPy and PIL buffers
included, PDFium's own not) and what came back.

    python benchmarks/hostile_inputs.py --json docs/bench/hostile_inputs.json

The inputs: a PDF bomb (a 100 pt page drawing a 4,000 px Flate image ten times: 16 kB,
160 MP drawn), a vector page of 300,000 rectangles (no image: 0.7 MB, drawn whole and
stopped by a close), a 3-page PDF sent to the server (how often it is opened), a body trickled
past the server's timeout (slowloris), more bodies arriving at once than allowed, a part
file torn mid-line by a kill, a two-line screenshot strip, a 33,000 px screenshot of
1,100 log lines, and beam decoding of 64 page
lines of the Chinese model (its memory against the logits').
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import platform
import sys
import time
import tracemalloc
import zlib
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
from PIL import Image, ImageDraw, ImageFont  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def measured(fn):
    """``(result or the exception's text, seconds, peak MB)`` of ``fn()``."""
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        out = fn()
    except Exception as e:  # noqa: BLE001 -- what the input costs, refusals included
        out = f"{type(e).__name__}: {e}"
    secs = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return out, round(secs, 3), round(peak, 1)


def pdf_bytes(objs: list[bytes]) -> bytes:
    """A PDF file of the numbered objects ``objs`` (1 the catalog), with its xref table."""
    out, offsets = bytearray(b"%PDF-1.4\n"), []
    for i, o in enumerate(objs, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % i + o + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objs) + 1)
    for off in offsets:
        out += b"%010d 00000 n \n" % off
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objs) + 1, xref)
    return bytes(out)


def bomb_pdf(side: int, times: int) -> bytes:
    data = zlib.compress(bytes(side * side), 9)
    draws = b"".join(b"q 100 0 0 100 0 0 cm /Im0 Do Q\n" for _ in range(times))
    objs = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 100 100] "
        b"/Resources << /XObject << /Im0 5 0 R >> >> /Contents 4 0 R >>",
        b"<< /Length %d >>\nstream\n" % len(draws) + draws + b"\nendstream",
        b"<< /Type /XObject /Subtype /Image /Width %d /Height %d /ColorSpace /DeviceGray "
        b"/BitsPerComponent 8 /Filter /FlateDecode /Length %d >>\nstream\n"
        % (side, side, len(data))
        + data
        + b"\nendstream",
    ]
    return pdf_bytes(objs)


def vector_pdf(rects: int) -> bytes:
    """A 600 pt page of ``rects`` large filled rectangles: no image, so no pixel limit sees
    it, and drawing it costs what its vector content costs (300,000: 0.7 MB)."""
    draws = b"".join(b"%d %d 300 300 re f\n" % (i % 290, (i // 290) % 290) for i in range(rects))
    data = zlib.compress(draws, 9)
    objs = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 600 600] /Contents 4 0 R >>",
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(data) + data + b"\nendstream",
    ]
    return pdf_bytes(objs)


def vector_bomb() -> list[dict]:
    """The vector page drawn whole, and closed 0.2 s into its render (as the server
    closes a timed-out request's PDFs): how long until the PDFium lock is free again."""
    import threading

    from crnn.data.pdf import _LOCK, OpenedPdf, PdfError, render

    data = vector_pdf(300_000)
    out, secs, mb = measured(lambda: render(data, 1, 72).size)
    rows = [
        {
            "input": f"vector PDF page ({len(data):,} bytes, 300,000 rectangles), drawn",
            "got": str(out),
            "s": secs,
            "peak_mb": mb,
        }
    ]
    pdf = OpenedPdf(data)
    got: list[str] = []

    def draw() -> None:
        try:
            got.append(str(pdf.render(1, 72).size))
        except PdfError as e:
            got.append(str(e))

    t = threading.Thread(target=draw)
    t.start()
    time.sleep(0.2)
    t0 = time.perf_counter()
    pdf.close()
    with _LOCK:  # free again when the render has stopped
        freed = time.perf_counter() - t0
    t.join()
    rows.append(
        {
            "input": "the same, closed 0.2 s into its render: lock free after",
            "got": got[0][:160],
            "s": freed,
            "peak_mb": 0.0,
        }
    )
    return rows


def pdf_bomb() -> dict:
    from crnn.data.pdf import render

    data = bomb_pdf(4000, 10)
    out, secs, mb = measured(lambda: render(data, 1).size)
    return {
        "input": f"PDF bomb ({len(data):,} bytes, 160 MP drawn)",
        "got": str(out)[:160],
        "s": secs,
        "peak_mb": mb,
    }


def served_pdf_opens() -> dict:
    import httpx

    from crnn.data import pdf as pdf_mod
    from crnn.reading.recognizer import Recognizer
    from crnn.serve.app import create_app

    word = Image.open(ROOT / "data" / "samples" / "word_01.png").convert("RGB")
    buf = io.BytesIO()
    word.save(buf, "PDF", resolution=72, save_all=True, append_images=[word] * 7)
    opens, real = [], pdf_mod._open
    pdf_mod._open = lambda *a, **k: opens.append(1) or real(*a, **k)
    app = create_app(Recognizer.bundled("word"))

    async def go():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            files = [("file", ("eight.pdf", buf.getvalue(), "application/pdf"))]
            r = await c.post("/v1/recognize", files=files, data={"dpi": "72"})
            return [x.get("text") for x in r.json()["results"]]

    try:
        out, secs, mb = measured(lambda: asyncio.run(go()))
    finally:
        pdf_mod._open = real
    return {
        "input": "an 8-page PDF sent to crnn-serve",
        "got": f"{out}; opened {len(opens)}x",
        "s": secs,
        "peak_mb": mb,
    }


def slow_bodies() -> list[dict]:
    from crnn.serve.app import BodyLimit

    async def app(scope, receive, send):
        while (await receive()).get("more_body"):
            pass
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    scope = {"type": "http", "method": "POST", "headers": []}

    def client(chunks, delay, stall=None):
        got, left = [], [chunks]

        async def receive():
            if stall is not None:
                await stall.wait()
            await asyncio.sleep(delay)
            left[0] -= 1
            return {"type": "http.request", "body": b"x", "more_body": left[0] > 0}

        async def send(msg):
            if msg["type"] == "http.response.start":
                got.append(msg["status"])

        return receive, send, got

    async def trickle():
        mw = BodyLimit(app, 10**6, timeout_s=1.0)
        r, s, got = client(30, 0.1)  # 3 s of body against a 1 s timeout
        await mw(scope, r, s)
        return got

    async def crowd():
        mw = BodyLimit(app, 10**6, timeout_s=1.0, max_uploads=4)
        stall = asyncio.Event()
        stalled = [client(1, 0.0, stall) for _ in range(4)]
        tasks = [asyncio.ensure_future(mw(scope, r, s)) for r, s, _ in stalled]
        await asyncio.sleep(0.05)
        r, s, late = client(1, 0.0)
        await mw(scope, r, s)
        await asyncio.gather(*tasks)
        return [g[0] for _, _, g in stalled], late

    a = measured(lambda: asyncio.run(trickle()))
    b = measured(lambda: asyncio.run(crowd()))
    return [
        {
            "input": "a body trickled over 3 s, --timeout-s 1",
            "got": str(a[0]),
            "s": a[1],
            "peak_mb": a[2],
        },
        {
            "input": "a 5th body while 4 stall, --max-uploads 4",
            "got": str(b[0]),
            "s": b[1],
            "peak_mb": b[2],
        },
    ]


def torn_part(tmp: Path) -> dict:
    from crnn import sharding

    out = tmp / "out.jsonl"
    part = sharding.part_path(out, 0, 1)
    part.write_text('{"path": "a", "text": "x"}\n{"path": "b", "te', encoding="utf-8")
    parts = sharding.JsonlParts(out, sharding.Shard(0, 1))
    r, secs, mb = measured(lambda: sorted(parts.done_keys()))
    return {
        "input": "a part file torn mid-line by a kill",
        "got": f"done: {r}",
        "s": secs,
        "peak_mb": mb,
    }


def strip() -> dict:
    from crnn.data.synth.fonts import bundled_font_dir
    from crnn.reading.recognizer import Recognizer

    font = ImageFont.truetype(
        str(bundled_font_dir() / "liberation" / "LiberationSans-Regular.ttf"), 17
    )
    img = Image.new("RGB", (1167, 54), (255, 255, 255))
    d = ImageDraw.Draw(img)
    d.text(
        (8, 4), "Build finished: 214 tests passed, 3 skipped, 0 failed in 6 min", font=font, fill=0
    )
    d.text(
        (8, 29), "Artifacts uploaded to storage; the release notes are attached", font=font, fill=0
    )
    rec = Recognizer.bundled("line")
    page, secs, mb = measured(lambda: rec.read_page(img))
    got = (
        page if isinstance(page, str) else f"{page.layout}, {len(page.lines)} lines: {page.text!r}"
    )
    return {
        "input": "a two-line screenshot strip, 1,167 x 54 px",
        "got": got[:160],
        "s": secs,
        "peak_mb": mb,
    }


def long_screenshot() -> dict:
    """A 1,200 x 33,000 px screenshot of 1,100 log lines read with every default but the
    line model (the word model writes no spaces or capitals to score)."""
    import random

    from rapidfuzz.distance import Levenshtein

    from crnn.data.synth.fonts import bundled_font_dir
    from crnn.reading.recognizer import Recognizer

    font = ImageFont.truetype(str(bundled_font_dir() / "dejavu" / "DejaVuSansMono-Bold.ttf"), 16)
    r = random.Random(0)
    words = "build test passed failed error warning module import request server".split()
    levels = ["INFO", "WARN", "DEBUG"]
    lines = [
        f"{i:04d} {r.choice(levels)} " + " ".join(r.choice(words) for _ in range(r.randint(3, 9)))
        for i in range(1100)
    ]
    img = Image.new("RGB", (1200, 33000), "white")
    d = ImageDraw.Draw(img)
    for i, t in enumerate(lines):
        d.text((10, 10 + i * 30), t, font=font, fill="black")
    rec = Recognizer.bundled("line")
    page, secs, mb = measured(lambda: rec.read_page(img))
    truth = "\n".join(lines)
    cer = Levenshtein.distance(page.text, truth) / len(truth)
    return {
        "input": "a 1,200 x 33,000 px screenshot of 1,100 log lines",
        "got": f"{page.layout}, {len(page.lines)} lines, CER {100 * cer:.2f} %",
        "s": secs,
        "peak_mb": mb,
    }


def beam_memory() -> dict:
    from crnn.ctc import decode
    from crnn.reading.recognizer import Recognizer

    rec = Recognizer.bundled("zh")
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(64, 100, rec.charset.num_classes)).astype(np.float32)
    logits[..., 0] += 6
    _, secs, mb = measured(lambda: decode(logits, rec.charset, None, 8, None, 2, rec.lm, 0.8))
    return {
        "input": "beam 8 + prior over 64 lines x 100 frames x 5,531 classes",
        "got": f"peak {mb / (logits.nbytes / 2**20):.1f}x the logits' "
        f"{logits.nbytes / 2**20:.0f} MB",
        "s": secs,
        "peak_mb": mb,
    }


def main() -> int:
    import tempfile

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    rows = [pdf_bomb(), *vector_bomb(), served_pdf_opens(), *slow_bodies()]
    with tempfile.TemporaryDirectory() as tmp:
        rows.append(torn_part(Path(tmp)))
    rows += [strip(), long_screenshot(), beam_memory()]
    print(f"{'input':<58} {'s':>7} {'peak MB':>8}  got")
    for r in rows:
        print(f"{r['input']:<58} {r['s']:>7.3f} {r['peak_mb']:>8.1f}  {r['got']}")
    if args.json:
        meta = {"machine": platform.machine(), "python": platform.python_version()}
        args.json.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
