"""crnn-serve: the micro-batcher on its own, then a real server process on localhost
(answers in request order, limits, bad uploads answered 4xx while good requests keep
being served), and the web page in a real headless browser (the system's Chromium)."""

from __future__ import annotations

import asyncio
import io
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO

import numpy as np
import pytest
from conftest import free_port

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")

from crnn.serve.batcher import MicroBatcher  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
WORD = REPO / "data" / "samples" / "word_01.png"  # "homeland"
SAMPLES = {
    p.name: t
    for p, t in (
        (REPO / "data" / "samples" / line.split("\t")[0], line.split("\t")[1].strip())
        for line in (REPO / "data" / "samples" / "gt.txt").read_text().splitlines()
        if "\t" in line
    )
}


class CountingBackend:
    """Logits that say which image they came from: frame t of image i is class i + 1."""

    def __init__(self) -> None:
        self.calls: list[int] = []

    def __call__(self, images: np.ndarray) -> np.ndarray:
        self.calls.append(len(images))
        b, w = images.shape[0], images.shape[-1]
        out = np.zeros((b, w // 4, 8), np.float32)
        for j in range(b):
            out[j, :, int(images[j, 0, 0, 0]) + 1] = 1.0
        return out

    def output_length(self, widths: np.ndarray) -> np.ndarray:
        return np.asarray(widths) // 4


def test_concurrent_images_share_forward_passes_and_keep_their_own_frames() -> None:
    backend = CountingBackend()

    async def go(max_batch: int) -> list[np.ndarray]:
        b = MicroBatcher(backend, max_batch=max_batch, max_wait_ms=50)
        await b.start()
        imgs = [np.full((1, 32, 40 + 8 * (i % 2)), i, np.uint8) for i in range(6)]
        out = await asyncio.gather(*(b.logits(im) for im in imgs))
        await b.stop()
        return out

    out = asyncio.run(go(32))
    assert sorted(backend.calls) == [3, 3], backend.calls  # one stack per width, unpadded
    for i, lg in enumerate(out):
        assert lg.shape[0] == (40 + 8 * (i % 2)) // 4  # its own frames
        assert int(lg[0].argmax()) == i + 1  # its own logits
    backend.calls.clear()
    asyncio.run(go(1))
    assert backend.calls == [1] * 6  # batching off


def test_model_workers_one_batch_per_core_for_onnx_and_one_for_pytorch() -> None:
    from crnn.cli.serve import forward_workers

    cores = len(os.sched_getaffinity(0))
    assert forward_workers("m.onnx", 0) == (cores, 1)
    assert forward_workers("m.onnx", 1) == (1, cores)
    assert forward_workers("m.pt", 0) == (1, None) and forward_workers("m.pt", 3) == (3, None)
    with pytest.raises(ValueError, match="--model-workers -1"):
        forward_workers("m.onnx", -1)


def test_a_failing_backend_fails_every_waiter_and_the_batcher_goes_on() -> None:
    class Flaky(CountingBackend):
        def __call__(self, images: np.ndarray) -> np.ndarray:
            if len(self.calls) == 0:
                self.calls.append(-1)
                raise RuntimeError("device lost")
            return super().__call__(images)

    async def go() -> tuple[list[object], np.ndarray]:
        b = MicroBatcher(Flaky(), max_batch=8, max_wait_ms=30)
        await b.start()
        first = await asyncio.gather(
            *(b.logits(np.zeros((1, 32, 64), np.uint8)) for _ in range(3)), return_exceptions=True
        )
        later = await b.logits(np.zeros((1, 32, 64), np.uint8))
        await b.stop()
        return first, later

    first, later = asyncio.run(go())
    assert all(isinstance(e, RuntimeError) for e in first) and later.shape == (16, 8)


def test_then_runs_on_the_logits_and_its_error_fails_its_caller_alone() -> None:
    """The server decodes on the batch's worker thread (``then``): each caller gets what
    its own ``then`` made of its own logits; one that raises fails only its caller."""

    def broken(_lg: np.ndarray) -> None:
        raise ValueError("cannot decode")

    async def go() -> list[object]:
        b = MicroBatcher(CountingBackend(), max_batch=8, max_wait_ms=30)
        await b.start()
        out = await asyncio.gather(
            b.logits(
                np.full((1, 32, 64), 0, np.uint8), then=lambda lg: ("first", int(lg[0].argmax()))
            ),
            b.logits(np.full((1, 32, 64), 1, np.uint8), then=broken),
            b.logits(np.full((1, 32, 64), 2, np.uint8)),
            return_exceptions=True,
        )
        await b.stop()
        return out

    first, second, third = asyncio.run(go())
    assert first == ("first", 1) and isinstance(second, ValueError) and int(third[0].argmax()) == 3


def test_with_two_workers_two_batches_run_through_the_backend_at_once() -> None:
    """``workers=2``: a second batch starts while the first is in the backend (each
    call waits at a barrier for the other; with one worker the barrier times out)."""
    import threading

    class Meeting(CountingBackend):
        def __init__(self) -> None:
            super().__init__()
            self.barrier = threading.Barrier(2, timeout=10)

        def __call__(self, images: np.ndarray) -> np.ndarray:
            self.barrier.wait()
            return super().__call__(images)

    backend = Meeting()

    async def go() -> list[np.ndarray]:
        b = MicroBatcher(backend, max_batch=1, max_wait_ms=0, workers=2)
        await b.start()
        out = await asyncio.gather(*(b.logits(np.full((1, 32, 64), i, np.uint8)) for i in range(4)))
        await b.stop()
        return out

    out = asyncio.run(go())
    assert [int(lg[0].argmax()) for lg in out] == [1, 2, 3, 4] and backend.calls == [1, 1, 1, 1]


# ---- a real server ------------------------------------------------------------------------


def start_server(port: int, log: IO[str]) -> subprocess.Popen | None:
    """Start the server on ``port`` and wait for /healthz; None when the port was taken
    (a free port is closed before the server binds it, so a test beside this one may
    take it first). Any other failure to start fails the test with the server's log."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "crnn.cli.serve",
            "--model",
            "word",
            "--port",
            str(port),
            "--max-request-bytes",
            "2000000",
            "--max-files",
            "8",
            "--max-pixels",
            "4000000",
            "--max-request-pixels",
            "10000000",
        ],
        cwd=REPO,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    for _ in range(150):
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            if proc.poll() is not None:
                break
            time.sleep(0.2)
    proc.kill()
    proc.wait()
    log.seek(0)
    text = log.read()
    if "address already in use" in text.lower():
        return None
    pytest.fail("the server did not start:\n" + text)


@pytest.fixture(scope="module")
def server():
    for _ in range(3):
        port = free_port()
        log = open(Path(os.environ.get("TMPDIR", "/tmp")) / f"crnn-serve-{port}.log", "w+")
        proc = start_server(port, log)
        if proc is not None:
            break
        log.close()
    else:
        pytest.fail(
            f"three free ports were each taken before the server bound them (the last: {port})"
        )
    yield f"http://127.0.0.1:{port}", log
    proc.terminate()
    proc.wait(timeout=20)


def post(url: str, files: list[tuple[str, bytes]], **form: str) -> httpx.Response:
    return httpx.post(
        url + "/v1/recognize", files=[("file", (n, b)) for n, b in files], data=form, timeout=60
    )


@pytest.mark.slow
def test_the_server_reads_images_in_request_order_and_describes_its_model(server) -> None:
    url, _ = server
    model = httpx.get(url + "/v1/model").json()
    assert model["charset_size"] == 36 and model["height"] == 32 and model["version"]
    names = sorted(SAMPLES)[:5]
    r = post(
        url,
        [(n, (REPO / "data" / "samples" / n).read_bytes()) for n in names],
        beam="5",
        min_confidence="0.5",
    )
    assert r.status_code == 200
    results = r.json()["results"]
    assert [x["filename"] for x in results] == names
    assert [x["text"] for x in results] == [SAMPLES[n] for n in names]
    assert all(len(x["char_confidences"]) == len(x["text"]) and "uncertain" in x for x in results)


def _reads(item):
    """What Recognizer.preprocess gave, as its reads: one array, or the reads of a Turns
    (the first as given) where the orientation classifier asks for the turned read too."""
    return tuple(item) if isinstance(item, tuple) else (item,)


@pytest.mark.slow
def test_concurrent_clients_get_every_answer_right_and_batches_form(server) -> None:
    url, log = server
    names = sorted(SAMPLES)
    data = {n: (REPO / "data" / "samples" / n).read_bytes() for n in names}

    def client(k: int) -> list[bool]:
        with httpx.Client(timeout=60) as c:
            oks = []
            for j in range(10):
                n = names[(k + j) % len(names)]
                r = c.post(url + "/v1/recognize", files=[("file", (n, data[n]))])
                oks.append(r.status_code == 200 and r.json()["results"][0]["text"] == SAMPLES[n])
            return oks

    before = httpx.get(url + "/v1/model").json()["served"]
    with ThreadPoolExecutor(16) as pool:
        answers = [ok for oks in pool.map(client, range(16)) for ok in oks]
    assert len(answers) == 160 and all(answers)
    # Batches formed: 16 clients at once shared forward passes (with --max-batch 1 each
    # image would take a pass of its own).
    after = httpx.get(url + "/v1/model").json()["served"]
    images, passes = (
        after["images"] - before["images"],
        after["forward_passes"] - before["forward_passes"],
    )
    # Each request counts its image once, twice where the orientation classifier asks for
    # the turned read too (preprocess gives both: Turns).
    from crnn.reading.recognizer import Recognizer

    rec = Recognizer.bundled("word")
    reads = {n: len(_reads(rec.preprocess(x))) for n, x in zip(names, data.values())}
    sent = sum(reads[names[(k + j) % len(names)]] for k in range(16) for j in range(10))
    assert images == sent and passes < images * 0.8 and after["largest_batch"] > 1, (
        images,
        passes,
        after,
    )


def bad_uploads() -> dict[str, tuple[list[tuple[str, bytes]], int, str]]:
    from test_bad_images import png_bomb

    big = io.BytesIO()
    from PIL import Image

    Image.fromarray((np.random.default_rng(0).random((1800, 1800)) * 255).astype(np.uint8)).save(
        big, "PNG"
    )
    wide = io.BytesIO()
    Image.new("L", (6000, 40), 255).save(wide, "PNG")
    white = io.BytesIO()
    Image.new("L", (2000, 2000), 255).save(white, "PNG")
    return {
        "not an image": ([("notes.txt", b"hello")], 415, "notes.txt: not a readable image"),
        "a decompression bomb": ([("bomb.png", png_bomb())], 413, "bomb.png: too many pixels"),
        "an oversized body": ([("big.png", big.getvalue())], 413, "over the limit of 2,000,000"),
        "too many files": ([("w.png", WORD.read_bytes())] * 9, 413, "9 files, over the limit of 8"),
        # past what the form parser itself accepts (it stops at the limit + 1): 413 too
        "far too many files": (
            [("w.png", WORD.read_bytes())] * 12,
            413,
            "more than 8 files, over the limit",
        ),
        # a readable image too wide to read as one line: 422, not "not an image" (415)
        "a line too wide": ([("wide.png", wide.getvalue())], 422, "Crop it into lines"),
        # each image under --max-pixels, together over --max-request-pixels (a few KB each)
        "too many pixels in all": (
            [("white.png", white.getvalue())] * 3,
            413,
            "12,000,000 pixels in this request",
        ),
    }


@pytest.mark.slow
def test_bad_uploads_are_answered_4xx_and_good_requests_keep_being_served(server) -> None:
    url, log = server
    for what, (files, status, says) in bad_uploads().items():
        for _ in range(3):
            r = post(url, files)
            assert r.status_code == status and says in r.json()["error"], (
                what,
                r.status_code,
                r.text,
            )
        assert post(url, [("w.png", WORD.read_bytes())]).json()["results"][0]["text"] == "homeland"
    r = httpx.post(url + "/v1/recognize", data={"beam": "2"})
    assert r.status_code == 400 and "no 'file' field" in r.json()["error"]
    r = post(url, [("w.png", WORD.read_bytes())], beam="-3")
    assert r.status_code == 400 and "beam=-3" in r.json()["error"]
    # In a request of several files, a bad one gets its own error; the others are read.
    r = post(
        url,
        [
            ("a.png", WORD.read_bytes()),
            ("bad.png", b"\x89PNG broken"),
            ("b.png", WORD.read_bytes()),
        ],
    )
    results = r.json()["results"]
    assert r.status_code == 200 and [x.get("text") for x in results] == [
        "homeland",
        None,
        "homeland",
    ]
    assert "bad.png" in results[1]["error"]
    log.flush()
    log.seek(0)
    text = log.read()
    assert "served 3 file(s), 1 error(s)" in text and "Traceback" not in text


def words_pdf(names: list[str]) -> bytes:
    """A PDF whose pages are the given sample word images, at 72 dpi (a page's pixels
    are the image's at dpi=72)."""
    from PIL import Image

    imgs = [Image.open(REPO / "data" / "samples" / n).convert("L") for n in names]
    buf = io.BytesIO()
    imgs[0].save(buf, "PDF", resolution=72, save_all=True, append_images=imgs[1:])
    return buf.getvalue()


@pytest.mark.slow
def test_a_pdf_is_served_page_by_page_and_its_pages_count_against_max_files(server) -> None:
    url, _ = server
    names = ["word_01.png", "word_02.png"]
    r = post(url, [("two.pdf", words_pdf(names)), ("w.png", WORD.read_bytes())], dpi="72")
    assert r.status_code == 200, r.text
    res = r.json()["results"]
    assert [(x["filename"], x.get("page")) for x in res] == [
        ("two.pdf", 1),
        ("two.pdf", 2),
        ("w.png", None),
    ]
    assert [x["text"] for x in res] == [SAMPLES[n] for n in names] + ["homeland"]
    r = post(url, [("nine.pdf", words_pdf(["word_01.png"] * 9))], dpi="72")
    assert r.status_code == 413 and "PDF pages" in r.json()["error"]
    r = post(url, [("cut.pdf", words_pdf(names)[:200]), ("w.png", WORD.read_bytes())])
    assert r.status_code == 200 and "not a readable PDF" in r.json()["results"][0]["error"]


@pytest.mark.slow
def test_the_web_page_reads_an_uploaded_image_in_a_headless_browser(server) -> None:
    sync_api = pytest.importorskip("playwright.sync_api")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("no Chromium on this machine (apt-get install chromium)")
    url, _ = server
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=chromium,
            args=[
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--no-first-run",
                "--disable-sync",
            ],
        )
        try:
            page = browser.new_page()
            page.goto(url + "/")
            page.wait_for_selector("#model:not(:has-text('loading'))")
            page.set_input_files("#pick", str(WORD))
            page.wait_for_selector(".card .text", timeout=30_000)
            assert page.inner_text(".card .text").strip() == "homeland"
            shading = page.eval_on_selector(".card .text span", "s => s.style.background")
            assert shading.startswith("rgba(")
            pdf = Path(os.environ.get("TMPDIR", "/tmp")) / f"crnn-web-{os.getpid()}.pdf"
            pdf.write_bytes(words_pdf(["word_01.png", "word_02.png"]))
            page.set_input_files("#pick", str(pdf))  # a PDF: one part per page, in order
            page.wait_for_selector(".card:first-child .text >> nth=1", timeout=30_000)
            card = page.inner_text(".card:first-child")
            assert (
                "page 1" in card
                and "page 2" in card
                and card.index("page 1") < card.index("page 2")
            )
        finally:
            browser.close()


def _served(rec, data: bytes, layout: str = "auto", max_queue: int = 0) -> dict:
    """One file read through the server's path (Service.read_file and its batcher)."""
    from crnn.serve.app import Limits, Service

    async def go() -> dict:
        batcher = MicroBatcher(rec.backend, max_queue=max_queue)
        await batcher.start()
        try:
            return await Service(rec, Limits(), batcher, {}).read_file(
                "f.png", data, rec.beam_width, layout
            )
        finally:
            await batcher.stop()

    return asyncio.run(go())


@pytest.mark.parametrize(
    ("stretch", "zoom"), [(None, None), ((1.0, 1.1), None), (None, (1.0, 1.2))]
)
def test_a_served_page_reads_exactly_as_read_page(stretch, zoom) -> None:
    """The server decoded a page line's padding (up to 63 repeated columns): its texts
    and confidences differed from predict --json's. It now trims by the real width; and
    reads each line at the Recognizer's widths (``stretch``) and zooms as read_page does."""
    from test_pages import two_column_page

    from crnn.reading.recognizer import Recognizer

    rec = Recognizer.bundled("line", stretch=stretch, zoom=zoom)
    buf = io.BytesIO()
    two_column_page().save(buf, "PNG")
    served, page = _served(rec, buf.getvalue()), rec.read_page(buf.getvalue())
    assert served["layout"] == "page" == page.layout
    assert [ln["text"] for ln in served["lines"]] == [ln.text for ln in page.lines]
    assert [ln["confidence"] for ln in served["lines"]] == [
        round(ln.confidence, 4) for ln in page.lines
    ]
    assert served["char_confidences"] == [
        [round(c, 6) for c in ln.char_confidences] for ln in page.lines
    ]
    assert [ln["chars"] for ln in served["lines"]] == [ln.to_dict()["chars"] for ln in page.lines]


def test_a_served_read_gets_the_recognizers_post_processing() -> None:
    """The numeral fix (an o inside a number is a 0) ran in predict but not in the
    server, which decoded on its own."""
    from PIL import Image
    from test_inference import _Says

    from crnn.reading.recognizer import Recognizer
    from crnn.text.alphabet import Charset

    cs = Charset.from_spec("ascii95")
    rec = Recognizer(_Says(cs, "sold 5o,ooo copies"))
    ink = np.full((32, 100), 255, np.uint8)
    ink[8:24, 10:90:4] = 0  # something to read: a blank image reads as ""
    assert rec.predict([ink])[0].text == "sold 50,000 copies"
    buf = io.BytesIO()
    Image.fromarray(ink).save(buf, "PNG")
    assert _served(rec, buf.getvalue())["text"] == "sold 50,000 copies"


def test_a_served_page_equals_a_predicted_page_field_for_field() -> None:
    """The server wrote its own view loop, lines and JSON and refused a reader that
    turns: served reads were never turned and a served vertical column lost
    ``"direction": "ttb"``. It now reads through the Recognizer itself (the batcher only
    shares forward passes), so each result is predict's JSON with the file's name."""
    from test_pages import two_column_page
    from test_vertical import COLUMNS, column

    from crnn.reading.recognizer import Recognizer
    from crnn.reading.results import page_result

    def png(img) -> bytes:
        buf = io.BytesIO()
        img.save(buf, "PNG")
        return buf.getvalue()

    from PIL import Image

    word = Recognizer.bundled("word", rotate="auto")
    turned = png(Image.open(WORD).rotate(180, expand=True))
    zh, line = Recognizer.bundled("zh"), Recognizer.bundled("line")
    for rec, data, layout in (
        (word, turned, "auto"),
        (zh, png(column(COLUMNS[0])), "auto"),
        (line, png(two_column_page()), "auto"),
    ):
        served = _served(rec, data, layout)
        want = page_result(rec.read_page(data, layout), rotate=rec.rotate == "auto")
        assert served.pop("filename") == "f.png"
        served.pop("chars" if served["layout"] == "line" else "char_confidences")
        assert served == want
    assert _served(word, turned)["rotation"] == 180
    assert _served(zh, png(column(COLUMNS[0])))["direction"] == "ttb"


def test_a_served_crop_reads_exactly_as_predict_at_any_width() -> None:
    """The batcher padded every image to a multiple of 16 px (its last column repeated)
    so that more of them shared a stack: the BiLSTM saw those columns, so a served crop's
    confidences, and on real photographs its text, differed from predict's, which reads
    each width unpadded. Crops of widths that are no multiple of 16 read exactly alike."""
    from crnn.reading.recognizer import Recognizer

    rec = Recognizer.bundled("word")
    paths = [WORD.parent / name for name in SAMPLES]
    # The read as given (word_03 with orient-56b88e8f is read turned too).
    widths = {p.name: _reads(rec.preprocess(p.read_bytes()))[0].shape[-1] for p in paths}
    assert any(w % 16 for w in widths.values()), widths  # the case that differed
    for path in paths:
        (p,) = rec.predict([path.read_bytes()])
        served = _served(rec, path.read_bytes(), layout="line")
        assert served["text"] == p.text, path.name
        assert served["confidence"] == round(p.confidence, 4), (path.name, widths[path.name])
        assert served["char_confidences"] == [round(c, 6) for c in p.char_confidences], path.name


@pytest.mark.parametrize("view", ["stretch", "zoom"])
def test_a_served_line_is_read_at_each_view_and_keeps_the_most_confident(view) -> None:
    """Each width (``stretch``) and zoom is read through the batcher; the most confident
    read is kept and its boxes land where predict's do."""
    from PIL import Image
    from test_inference import _bars, _Inky, _Wider

    from crnn.reading.recognizer import Recognizer
    from crnn.text.alphabet import Charset

    backend = (_Wider if view == "stretch" else _Inky)(Charset.from_spec("alnum36"), "abcd")
    rec = Recognizer(backend, rotate="none", **{view: (1.0, 1.5)})
    buf = io.BytesIO()
    Image.fromarray(_bars()).save(buf, "PNG")
    (p,) = rec.predict(buf.getvalue())
    served = _served(rec, buf.getvalue(), layout="line")
    assert getattr(p, view) == 1.5 and served["confidence"] == round(p.confidence, 4)
    assert [c["box"] for c in served["chars"]] == [list(b) for b in p.char_boxes]


def test_a_served_leaning_crop_is_read_upright_as_predict_reads_it() -> None:
    """A crop whose writing leans is also read sheared upright (``deslant``) through the
    batcher: the served read keeps the same read, confidence and boxes as predict's."""
    from test_inference import _leaning, _Upright

    from crnn.reading.recognizer import Recognizer
    from crnn.text.alphabet import Charset

    rec = Recognizer(_Upright(Charset.from_spec("alnum36"), "abcd"), rotate="none", deslant=8)
    buf = io.BytesIO()
    _leaning(14.0, width=128).save(buf, "PNG")
    (p,) = rec.predict(buf.getvalue())
    served = _served(rec, buf.getvalue(), layout="line")
    assert p.lean == 14.0 and served["confidence"] == round(p.confidence, 4)
    assert [c["box"] for c in served["chars"]] == [list(b) for b in p.char_boxes]


def test_a_full_queue_answers_503_at_once_instead_of_growing() -> None:
    """The batcher's queue is bounded: past it a caller hears "busy" at once (the server
    answers 503), rather than every request waiting behind an unbounded queue."""
    import threading

    from test_pages import two_column_page

    from crnn.reading.recognizer import Recognizer
    from crnn.serve.app import RequestError
    from crnn.serve.batcher import Overloaded

    backend = CountingBackend()

    async def go() -> list:
        b = MicroBatcher(backend, max_batch=1, max_queue=2)
        await b.start()
        try:
            return await asyncio.gather(
                *(b.logits(np.zeros((1, 32, 40), np.uint8)) for _ in range(6)),
                return_exceptions=True,
            )
        finally:
            await b.stop()

    out = asyncio.run(go())
    assert sum(isinstance(x, Overloaded) for x in out) == 4 and "--max-queue" in str(out[-1])
    buf = io.BytesIO()
    two_column_page().save(buf, "PNG")  # seven lines: more than a queue of 2 holds
    rec = Recognizer.bundled("line")
    go = threading.Event()

    class Stalled:  # the batcher's model holds its first batch: the queue fills behind it
        def __getattr__(self, name):
            return getattr(rec.backend, name)

        def __call__(self, images):
            go.wait(1.0)
            return rec.backend(images)

    async def serve() -> dict:
        from crnn.serve.app import Limits, Service

        batcher = MicroBatcher(Stalled(), max_batch=1, max_queue=2)
        await batcher.start()
        try:
            return await Service(rec, Limits(), batcher, {}).read_file(
                "f.png", buf.getvalue(), rec.beam_width, "auto"
            )
        finally:
            go.set()
            await batcher.stop()

    with pytest.raises(RequestError) as e:
        asyncio.run(serve())
    assert e.value.status == 503 and "busy" in str(e.value)


def test_a_timeout_or_a_hang_up_drops_the_requests_remaining_work() -> None:
    from crnn.serve.app import _finished_unless_hung_up

    class Client:
        def __init__(self, gone: bool) -> None:
            self.gone = gone

        async def is_disconnected(self) -> bool:
            return self.gone

    async def go(gone: bool, timeout_s: float):
        work = asyncio.ensure_future(asyncio.sleep(30))
        try:
            return await _finished_unless_hung_up(work, Client(gone), timeout_s), work
        except asyncio.TimeoutError:
            return "timeout", work

    said, work = asyncio.run(go(True, 10))
    assert said is False and work.cancelled()
    said, work = asyncio.run(go(False, 0.3))
    assert said == "timeout" and work.cancelled()


def test_a_blank_image_reads_as_nothing_served_or_predicted() -> None:
    """The word model read an all-white image (a page, or 6,300 x 6,300 px sent to the
    server) as "t" at confidence 0.08: an image with no contrast now reads as ""."""
    from PIL import Image

    from crnn.reading.recognizer import Recognizer

    rec = Recognizer.bundled("word")
    blanks = [
        Image.new("L", (100, 32), 255),
        Image.new("L", (300, 300), 0),
        Image.new("L", (120, 32), 200),
    ]
    assert [p.text for p in rec.predict(blanks)] == ["", "", ""]
    buf = io.BytesIO()
    blanks[0].save(buf, "PNG")
    assert _served(rec, buf.getvalue())["text"] == ""
    word = Image.open(Path(__file__).resolve().parents[1] / "data" / "samples" / "word_01.png")
    assert rec.predict([word])[0].text != ""  # contrast is still read


def test_a_small_image_is_read_while_large_ones_hold_every_planning_slot() -> None:
    """Three 6,300 px images in one request held both planning slots of a 2-core server
    and one-word requests waited up to 3.0 s; small images now go by the slots, large
    ones (and PDF pages) still wait for one."""
    from PIL import Image

    from crnn.reading.recognizer import Recognizer
    from crnn.serve.app import SMALL_IMAGE_PIXELS, Limits, Service

    rec = Recognizer.bundled("word")
    word = (Path(__file__).resolve().parents[1] / "data" / "samples" / "word_01.png").read_bytes()
    big = io.BytesIO()
    Image.new("L", (1500, 1500), 255).save(big, "PNG")
    assert 1500 * 1500 > SMALL_IMAGE_PIXELS

    async def go() -> tuple:
        batcher = MicroBatcher(rec.backend)
        await batcher.start()
        service = Service(rec, Limits(workers=1), batcher, {})
        try:
            await service._planning.acquire()  # a large image is being laid out
            small = await asyncio.wait_for(service.read_file("w.png", word, 0, "auto"), 30)
            large = asyncio.ensure_future(service.read_file("big.png", big.getvalue(), 0, "auto"))
            await asyncio.sleep(0.5)
            waited = not large.done()
            service._planning.release()
            await asyncio.wait_for(large, 30)
            return small, waited
        finally:
            await batcher.stop()

    small, waited = asyncio.run(go())
    assert small["text"] == "homeland", small
    assert waited  # the large image waited for its slot


def test_the_server_runs_one_single_threaded_batch_per_core_that_sleeps_between_batches(
    monkeypatch,
) -> None:
    """crnn-serve builds its ONNX session with spinning off (its idle intra-op threads
    burned 2-3 ms of CPU a request: docs/benchmarks.md, "Serving under load") and one
    thread, and runs a batch per core at once; the library keeps ONNX Runtime's default
    (spinning, every core on one batch), which a batch read of a folder is fastest with."""
    import uvicorn

    from crnn.cli import serve
    from crnn.reading.recognizer import Recognizer

    served = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: served.setdefault("app", app))
    assert serve.main(["--model", "word"]) == 0
    session = served["app"].app.app.state.service.rec.backend.session
    assert (
        session.get_session_options().get_session_config_entry("session.intra_op.allow_spinning")
        == "0"
    )
    service = served["app"].app.app.state.service
    cores = len(os.sched_getaffinity(0))
    assert (
        service.batcher.workers == cores and session.get_session_options().intra_op_num_threads == 1
    )
    library = Recognizer.bundled("word").backend.session.get_session_options()
    with pytest.raises(RuntimeError, match="does not have configuration"):
        library.get_session_config_entry("session.intra_op.allow_spinning")  # the default: spin


def test_a_cancelled_requests_layout_keeps_its_worker_slot_until_it_ends() -> None:
    """A request that hung up or timed out freed its --workers slot while its layout
    thread ran on (with workers=2, six 20 MP images were laid out at once). The slot is
    now freed when the thread ends."""
    import threading

    from crnn.reading.recognizer import Recognizer
    from crnn.serve.app import Limits, Service

    rec = Recognizer.bundled("word")
    started, release = [], threading.Event()

    class Slow(Service):
        def _plan(self, name, *a):
            started.append(name)
            release.wait(10)
            return super()._plan(name, *a)

    async def go() -> list[str]:
        batcher = MicroBatcher(rec.backend)
        await batcher.start()
        service = Slow(rec, Limits(workers=1), batcher, {})
        data = WORD.read_bytes()
        first = asyncio.ensure_future(service.read_file("a", data, None, "auto", pixels=10**9))
        await asyncio.sleep(0.2)
        first.cancel()  # the client hung up; its thread still lays out "a"
        second = asyncio.ensure_future(service.read_file("b", data, None, "auto", pixels=10**9))
        await asyncio.sleep(0.3)
        seen = list(started)  # "b" must still wait for the slot
        release.set()
        await second
        await batcher.stop()
        return seen

    assert asyncio.run(go()) == ["a"]
    assert started == ["a", "b"]


def test_uploads_are_surveyed_off_the_event_loop_and_oversized_ones_never_parsed(monkeypatch):
    """Counting a PDF's pages and reading image headers ran on the event loop (waiting for
    the PDFium lock renders hold: one PDF froze /healthz for 6 s), and before the per-file
    byte limit (a 52 MiB PDF was parsed before its 413). Both run on a worker thread now,
    and only for files within the limit."""
    import threading

    from crnn.reading.recognizer import Recognizer
    from crnn.serve import app as app_mod

    seen = []
    real = app_mod.pdf_pages

    def spy(name, data, *rest):
        seen.append((name, threading.get_ident()))
        return real(name, data, *rest)

    monkeypatch.setattr(app_mod, "pdf_pages", spy)
    application = app_mod.create_app(
        Recognizer.bundled("word"), app_mod.Limits(max_file_bytes=50_000)
    )

    async def go():
        transport = httpx.ASGITransport(app=application)
        files = [
            ("file", ("w.png", WORD.read_bytes(), "image/png")),
            ("file", ("big.pdf", b"%PDF-1.4\n" + b"0" * 60_000, "application/pdf")),
        ]
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            r = await c.post("/v1/recognize", files=files)
        return threading.get_ident(), r

    loop_thread, r = asyncio.run(go())
    assert [name for name, _ in seen] == ["w.png"]  # the oversized PDF was never opened
    assert all(t != loop_thread for _, t in seen)
    results = r.json()["results"]
    assert results[0]["text"] == "homeland" and "max-file-bytes" in results[1]["error"]


def test_a_trickled_body_times_out_and_uploads_arriving_at_once_are_bounded() -> None:
    """Slowloris: with --timeout-s 5 a body trickled over 9 s still got 200, and 200
    stalled connections all stayed open. A body must now arrive within the timeout (408),
    and past --max-uploads bodies arriving at once a request is answered 503 at once."""
    from crnn.serve.app import BodyLimit

    async def app(scope, receive, send):
        while (await receive()).get("more_body"):
            pass
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    def client(chunks: int, delay: float, stall: asyncio.Event | None = None):
        sent: list[int] = []
        left = [chunks]

        async def receive():
            if stall is not None:
                await stall.wait()
            await asyncio.sleep(delay)
            left[0] -= 1
            return {"type": "http.request", "body": b"x" * 10, "more_body": left[0] > 0}

        async def send(msg):
            if msg["type"] == "http.response.start":
                sent.append(msg["status"])

        return receive, send, sent

    scope = {"type": "http", "method": "POST", "headers": []}

    async def go():
        mw = BodyLimit(app, 10**6, timeout_s=0.3, max_uploads=1)
        r, s, slow = client(6, 0.1)
        await mw(scope, r, s)
        r, s, quick = client(2, 0.01)
        await mw(scope, r, s)
        stall = asyncio.Event()
        r, s, stalled = client(1, 0.0, stall)
        first = asyncio.ensure_future(mw(scope, r, s))
        await asyncio.sleep(0.05)
        r, s, turned_away = client(1, 0.0)
        await mw(scope, r, s)
        await first
        r, s, after = client(1, 0.0)
        await mw(scope, r, s)
        return slow, quick, stalled, turned_away, after

    slow, quick, stalled, turned_away, after = asyncio.run(go())
    assert (slow, quick) == ([408], [200])
    assert (stalled, turned_away, after) == ([408], [503], [200])


def test_a_pdf_upload_is_opened_once_for_all_its_pages(monkeypatch, tmp_path):
    """The server reopened the whole document twice a page (its sizes, then the render)
    and twice more per upload: 11 s for 8 pages of a 17.7 MiB PDF without an xref table.
    Each PDF upload is now opened once for all of its pages."""
    from PIL import Image

    from crnn.data import pdf as pdf_mod
    from crnn.reading.recognizer import Recognizer
    from crnn.serve import app as app_mod

    word = Image.open(WORD).convert("RGB")
    path = tmp_path / "three.pdf"
    word.save(path, "PDF", resolution=72, save_all=True, append_images=[word, word])
    opens = []
    real = pdf_mod._open
    monkeypatch.setattr(pdf_mod, "_open", lambda *a, **k: opens.append(1) or real(*a, **k))
    application = app_mod.create_app(Recognizer.bundled("word"))

    async def go():
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            files = [("file", ("three.pdf", path.read_bytes(), "application/pdf"))]
            return await c.post("/v1/recognize", files=files, data={"dpi": "72"})

    results = asyncio.run(go()).json()["results"]
    assert [r["page"] for r in results] == [1, 2, 3]
    assert all(r["text"] == "homeland" for r in results), results
    assert len(opens) == 1


def test_headers_trickled_or_never_sent_are_answered_408_and_the_connection_closed() -> None:
    """Slowloris before the body: uvicorn timed nothing before a request's headers were
    complete, so a client trickling them (or sending nothing) held its connection as long
    as it liked. crnn-serve's protocol (crnn.serve.connection) gives each request's
    headers --header-timeout-s from the connection opening, or from the next request's
    first byte on a kept-alive connection; complete requests are untouched."""
    import socket
    import threading
    import time

    import uvicorn

    from crnn.serve.connection import timed_headers

    async def app(scope, receive, send):
        if scope["type"] != "http":
            return
        headers = [(b"content-length", b"2")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b"ok"})

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=port,
        log_level="error",
        http=timed_headers(0.5),
        lifespan="off",
        timeout_keep_alive=30,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)

    def read_all(c: socket.socket) -> bytes:
        out = b""
        while chunk := c.recv(4096):
            out += chunk
        return out

    try:
        request = b"GET / HTTP/1.1\r\nhost: t\r\n\r\n"
        with socket.create_connection(("127.0.0.1", port), timeout=5) as c:
            c.sendall(b"GET / HTTP/1.1\r\nhost: t\r\n")
            for _ in range(10):  # one header every 0.15 s: never complete in 0.5 s
                time.sleep(0.15)
                try:
                    c.sendall(b"x-a: b\r\n")
                except OSError:
                    break
            got = read_all(c)
        assert got.startswith(b"HTTP/1.1 408") and b"header-timeout-s" in got, got
        with socket.create_connection(("127.0.0.1", port), timeout=5) as c:
            assert read_all(c).startswith(b"HTTP/1.1 408")  # connected, sent nothing
        with socket.create_connection(("127.0.0.1", port), timeout=5) as c:
            c.sendall(request)
            first = c.recv(4096)
            assert first.startswith(b"HTTP/1.1 200") and first.endswith(b"ok")
            time.sleep(0.8)  # idle past the header deadline: kept alive (its own timeout)
            c.sendall(request)
            assert c.recv(4096).startswith(b"HTTP/1.1 200")
            c.sendall(b"GET / HTTP/1.1\r\n")  # the next request's headers, never finished
            assert read_all(c).startswith(b"HTTP/1.1 408")
    finally:
        server.should_exit = True
        thread.join(10)
