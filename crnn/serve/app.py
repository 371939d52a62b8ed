"""The HTTP API and the web page of ``crnn-serve`` (FastAPI), over a Recognizer.

    GET  /             a web page: pick, drop or paste images, see their text
    GET  /healthz      {"status": "ok"}
    GET  /v1/model     what is served: charset size, input height, version, device, limits,
                       and the forward passes so far (images, passes, the largest batch)
    POST /v1/recognize multipart form: one or more ``file`` fields, and the options
                       ``beam`` (0 = greedy; default: the reader's, 8 with the
                       Chinese model's language prior), ``min_confidence``, ``layout``
                       (auto|line|page),
                       ``dpi`` (PDF pages' resolution, default 200)
                       -> {"results": [{"filename", "text", "confidence",
                           "char_confidences", ...}]} in request order; a PDF gives
                           one result per page, in order, each with its "page" (from 1)

Images of concurrent requests share forward passes (:class:`~crnn.serve.batcher.
MicroBatcher`); decoding, image decoding and line finding run on worker threads, so the
event loop only moves bytes. Bad input never takes the server down: every per-file
problem is that file's own error entry, and a request whose files all fail (or that is
malformed, too large, or too slow) gets a 4xx/5xx answer ``{"error": ...}`` naming the
file and the limit. Logs say what was served, never the images.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
import time
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, HTMLResponse

from crnn.data import usable_cores
from crnn.data.image import (
    MAX_PIXELS,
    ImageDecodeError,
    ImageTooLargeError,
    ImageTooWideError,
    open_image,
)
from crnn.data.pdf import (
    DEFAULT_DPI,
    OpenedPdf,
    PdfError,
    is_pdf,
    page_count,
    page_sizes,
    render,
)
from crnn.reading.results import page_result
from crnn.serve.batcher import BatchedBackend, MicroBatcher, Overloaded

log = logging.getLogger("crnn.serve")

STATIC = Path(str(resources.files("crnn") / "serve" / "static"))
LABEL_FONT = Path(
    str(resources.files("crnn") / "assets" / "label_fonts" / "crnn-ocr-LabelCJK-Regular.otf")
)


@dataclass
class Limits:
    """What one request may hold (each settable on the command line)."""

    max_file_bytes: int = 20 * 2**20  # one uploaded image
    max_request_bytes: int = 100 * 2**20  # the whole body
    max_files: int = 64  # images per request
    max_pixels: int = 40_000_000  # width x height of one image (at most MAX_PIXELS)
    timeout_s: float = 60.0  # a request's time from its body read to its answer
    max_beam: int = 32
    max_request_pixels: int = 120_000_000  # width x height summed over a request's images
    max_queue: int = 2048  # images waiting for a forward pass; past it, 503
    workers: int = 0  # images decoded and laid out at once (0: the machine's cores)
    # Requests whose bodies are arriving at once; past it, 503 (a slow client's body must
    # arrive within timeout_s too: slowloris).
    max_uploads: int = 256
    # A request's headers must arrive within this many seconds of its connection opening
    # (crnn.serve.connection: a client trickling its headers, or sending nothing).
    header_timeout_s: float = 10.0

    def __post_init__(self) -> None:
        if self.max_pixels > MAX_PIXELS:
            raise ValueError(
                f"max_pixels={self.max_pixels:,}: at most {MAX_PIXELS:,} "
                "(crnn.data.image.MAX_PIXELS)"
            )
        if self.workers <= 0:
            self.workers = usable_cores()


# Images up to this many pixels are laid out without waiting for a planning slot (their
# temporaries are small): three 6,300 x 6,300 px images in one request held up one-word
# requests by up to 3.0 s while they held both slots of a 2-core server.
SMALL_IMAGE_PIXELS = 2_000_000


class RequestError(Exception):
    """A problem with a request or one of its files: an HTTP status and a message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class BodyLimit:
    """ASGI middleware: a request body longer than ``limit`` bytes is answered 413 before
    it is all read (by its Content-Length, or while it streams in); one that has not
    arrived within ``timeout_s`` of its request is answered 408, and past ``max_uploads``
    bodies arriving at once a request is answered 503 at once (a slow client, or many,
    holding connections open by trickling their bodies: slowloris)."""

    def __init__(
        self, app: Any, limit: int, timeout_s: float = 60.0, max_uploads: int = 256
    ) -> None:
        self.app, self.limit = app, limit
        self.timeout_s, self.max_uploads = timeout_s, max_uploads
        self.uploading = 0

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            await _send_json(send, 413, {"error": self._message(int(declared))})
            return
        if scope.get("method") == "POST" and self.uploading >= self.max_uploads:
            await _send_json(
                send,
                503,
                {
                    "error": f"the server is busy: {self.max_uploads} uploads are arriving "
                    "(--max-uploads); try again shortly"
                },
            )
            return
        seen = 0
        started = False
        arrived = False
        deadline = asyncio.get_running_loop().time() + self.timeout_s

        async def counted() -> dict[str, Any]:
            nonlocal seen, arrived
            if arrived:  # the body is in: what follows (a disconnect) is not timed
                return await receive()
            try:
                msg = await asyncio.wait_for(
                    receive(), max(0.0, deadline - asyncio.get_running_loop().time())
                )
            except asyncio.TimeoutError:
                raise _TooSlow from None
            if msg["type"] == "http.request":
                seen += len(msg.get("body", b""))
                if seen > self.limit:
                    raise _TooLarge(seen)
                arrived = not msg.get("more_body", False)
                if arrived:
                    done_uploading()
            return msg

        def done_uploading() -> None:
            nonlocal uploading
            if uploading:
                uploading = False
                self.uploading -= 1

        async def tracking_send(msg: dict[str, Any]) -> None:
            nonlocal started
            started = started or msg["type"] == "http.response.start"
            await send(msg)

        self.uploading += 1
        uploading = True
        try:
            await self.app(scope, counted, tracking_send)
        except _TooLarge as e:
            if not started:
                await _send_json(send, 413, {"error": self._message(e.args[0], streamed=True)})
        except _TooSlow:
            if not started:
                await _send_json(
                    send,
                    408,
                    {
                        "error": f"the request body took over {self.timeout_s:g} s to arrive "
                        "(--timeout-s)"
                    },
                )
        finally:
            done_uploading()

    def _message(self, size: int, streamed: bool = False) -> str:
        what = "more than" if streamed else ""
        return (
            f"request body is {what} {size:,} bytes, over the limit of {self.limit:,} "
            "(crnn-serve --max-request-bytes); send fewer or smaller images per request"
        ).replace("  ", " ")


class _TooSlow(Exception):
    """The request body did not arrive in time (raised by BodyLimit's receive)."""


class _TooLarge(Exception):
    pass


class Direct:
    """ASGI: ``routes`` (POST path -> handler of a Starlette ``Request`` returning a
    ``Response``) answered without the framework's middleware and routing, every other
    request by ``app``. Under 16 clients the event loop was the server's one serial
    part, and FastAPI's eight middleware layers and router around ``/v1/recognize`` were
    a quarter of its time (docs/benchmarks.md, "Serving under load"). The route stays
    declared in ``app`` for its OpenAPI page."""

    def __init__(self, app: Any, routes: dict[str, Any]) -> None:
        self.app, self.routes = app, routes

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        handler = (
            self.routes.get(scope.get("path", ""))
            if scope["type"] == "http" and scope["method"] == "POST"
            else None
        )
        if handler is None:
            await self.app(scope, receive, send)
            return
        try:
            response = await handler(Request(scope, receive))
        except _TooLarge:
            raise  # BodyLimit answers it
        except Exception:  # noqa: BLE001 -- as the framework would: a 500, and the log
            log.exception("%s failed", scope.get("path"))
            response = _json_response(
                {"error": "the server failed on this request (see its log)"}, 500
            )
        await response(scope, receive, send)


def _json_bytes(body: dict[str, Any]) -> bytes:
    """Every JSON answer of the server, errors included, in one encoding (UTF-8, the
    text as it is: Chinese reads as Chinese, not as \\u escapes)."""
    import json

    return json.dumps(body, ensure_ascii=False).encode()


def _json_response(body: dict[str, Any], status: int = 200) -> Any:
    """``body`` as JSON, encoded once here (FastAPI's validation of a returned dict cost
    more than the rest of the answer)."""
    from fastapi.responses import Response

    return Response(_json_bytes(body), status, media_type="application/json")


async def _send_json(send: Any, status: int, body: dict[str, Any]) -> None:
    data = _json_bytes(body)
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(data)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": data})


class Service:
    """What the routes call: a Recognizer (for its preprocessing and line finding), its
    backend behind a :class:`MicroBatcher`, and the limits."""

    def __init__(
        self, recognizer: Any, limits: Limits, batcher: MicroBatcher, info: dict[str, Any]
    ) -> None:
        self.rec, self.limits, self.batcher, self.info = recognizer, limits, batcher, info
        self.served = 0
        # Decoding and line finding hold an image's float temporaries (about 16 bytes a
        # pixel): at most ``workers`` at once, whatever the thread pool's size.
        self._planning = asyncio.Semaphore(limits.workers)

    async def read_file(
        self,
        name: str,
        data: bytes,
        beam: int | None,
        layout: str,
        page: int | None = None,
        dpi: int = DEFAULT_DPI,
        pixels: int | None = None,
        pdf: OpenedPdf | None = None,
    ) -> dict[str, Any]:
        """One uploaded image's (or a PDF's ``page``'s) result entry (raises
        :class:`RequestError` for its error)."""
        if len(data) > self.limits.max_file_bytes:
            raise RequestError(
                413,
                f"{name}: {len(data):,} bytes, over the limit of "
                f"{self.limits.max_file_bytes:,} per file (--max-file-bytes)",
            )
        if not data:
            raise RequestError(400, f"{name}: the file is empty")
        loop = asyncio.get_running_loop()
        # Large images take a planning slot (a cancelled request stops here, before any more
        # work); small ones go by, so a request of huge images cannot hold up every word.
        small = (
            page is None
            and 0 < (header_pixels(data) if pixels is None else pixels) <= SMALL_IMAGE_PIXELS
        )
        if small:
            planned, jobs = await loop.run_in_executor(
                None, self._plan, name, data, layout, page, dpi, pdf
            )
        else:
            # The slot is freed when the layout thread ends, not when this request does: a
            # request that hangs up or times out leaves its thread running, and its slot
            # with it (else --workers large images would be laid out N times over).
            await self._planning.acquire()
            work = loop.run_in_executor(None, self._plan, name, data, layout, page, dpi, pdf)
            work.add_done_callback(lambda _: self._planning.release())
            planned, jobs = await asyncio.shield(work)
        # The lines are read by the Recognizer itself (views, turns, decoding, the blank
        # check, the result built as predict builds it), its forward passes shared with
        # other requests' lines through the batcher: a served read is a predicted one.
        served = copy.copy(self.rec)
        served.backend = BatchedBackend(self.batcher, loop)
        if beam is not None:
            served.beam_width = beam
        try:
            (read,) = await loop.run_in_executor(
                None, served.read_planned, [planned], [(0, *job) for job in jobs]
            )
        except Overloaded as e:
            raise RequestError(503, f"{name}: {e}") from None
        except BaseException:  # cancelled (the request's timeout): drop what still waits
            served.backend.cancel()
            raise
        out: dict[str, Any] = {"filename": name}
        if page is not None:
            out["page"] = page
        out.update(page_result(read, rotate=self.rec.rotate == "auto"))
        if read.layout == "line":
            line = read.lines[0] if read.lines else None
            out["chars"] = line.to_dict().get("chars", []) if line else []
        else:
            out["char_confidences"] = [
                [round(c, 6) for c in ln.char_confidences] for ln in read.lines
            ]
        return out

    def _plan(
        self,
        name: str,
        data: bytes,
        layout: str,
        page: int | None,
        dpi: int,
        pdf: OpenedPdf | None = None,
    ) -> Any:
        try:
            if page is None:
                with open_image(data, name) as im:
                    size = im.size
                source: Any = data
            else:  # a PDF's page: its size from the PDF before it is rendered
                size = (pdf.sizes(dpi) if pdf is not None else page_sizes(data, dpi))[page - 1]
            if size[0] * size[1] > self.limits.max_pixels:
                what = name if page is None else f"{name}, page {page} at {dpi} dpi,"
                raise RequestError(
                    413,
                    f"{what}: {size[0]} x {size[1]} pixels, over the limit of "
                    f"{self.limits.max_pixels:,} (--max-pixels)",
                )
            if page is not None:
                rgb = self.rec.spec.rgb
                source = (
                    pdf.render(page, dpi, rgb)
                    if pdf is not None
                    else render(data, page, dpi, rgb=rgb)
                )
            return self.rec.plan_page(source, layout)
        except ImageDecodeError as e:  # too many pixels: 413; too wide a line: 422; else 415
            status = (
                413
                if isinstance(e, ImageTooLargeError)
                else 422
                if isinstance(e, ImageTooWideError)
                else 415
            )
            raise RequestError(status, f"{name}: {str(e).removeprefix(f'{name}: ')}") from None


def header_pixels(data: bytes, dpi: int = DEFAULT_DPI, pdf: OpenedPdf | None = None) -> int:
    """Width x height of an encoded image from its header, or a PDF's pages at ``dpi``
    summed (``pdf``: it opened already; 0 when it is not one: that file's own read
    reports it)."""
    if is_pdf(data):
        try:
            sizes = pdf.sizes(dpi) if pdf is not None else page_sizes(data, dpi)
            return sum(w * h for w, h in sizes)
        except PdfError:
            return 0
    try:
        with open_image(data) as im:
            return int(im.width * im.height)
    except ImageDecodeError:
        return 0


async def _finished_unless_hung_up(
    work: asyncio.Future[Any], request: Any, timeout_s: float
) -> bool:
    """Wait for ``work``; cancel it (its files not yet laid out or batched are dropped)
    when ``timeout_s`` passes (raising ``asyncio.TimeoutError``) or the client hangs up
    (returning False)."""
    deadline = time.monotonic() + timeout_s
    try:
        while not work.done():
            left = deadline - time.monotonic()
            if left <= 0:
                raise asyncio.TimeoutError
            await asyncio.wait([work], timeout=min(0.25, left))
            if not work.done() and await request.is_disconnected():
                return False
        return True
    finally:
        if not work.done():
            work.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await work


def options(form: Any, limits: Limits) -> tuple[int | None, float | None, str, int]:
    """``beam`` (None: the reader's), ``min_confidence``, ``layout`` and ``dpi`` from the
    form, checked."""
    try:
        raw = form.get("beam")
        beam = None if raw in (None, "") else int(raw)
        floor = form.get("min_confidence")
        floor = None if floor in (None, "") else float(floor)
        dpi = int(form.get("dpi") or DEFAULT_DPI)
    except ValueError:
        raise RequestError(
            400, "beam and dpi must be whole numbers and min_confidence a number in [0, 1]"
        ) from None
    if not 36 <= dpi <= 600:
        raise RequestError(400, f"dpi={dpi}: expected 36 to 600 (PDF pages' resolution)")
    layout = str(form.get("layout") or "auto")
    if beam is not None and not 0 <= beam <= limits.max_beam:
        raise RequestError(400, f"beam={beam}: expected 0 (greedy) to {limits.max_beam}")
    if floor is not None and not 0.0 <= floor <= 1.0:
        raise RequestError(400, f"min_confidence={floor}: expected a number in [0, 1]")
    if layout not in ("auto", "line", "page"):
        raise RequestError(400, f"layout={layout!r}: expected auto, line or page")
    return beam, floor, layout, dpi


def survey(
    names: list[str], datas: list[bytes], dpi: int, max_file_bytes: int
) -> tuple[list[list[int | None]], list[int], dict[int, OpenedPdf]]:
    """Each upload's pages (:func:`pdf_pages`) and pixels (:func:`header_pixels`), on a
    worker thread, and each PDF opened once for all its pages (:class:`OpenedPdf`, by
    upload index; the caller closes them); a file over ``max_file_bytes`` is left
    unparsed (one item, 0 pixels: ``Service.read_file`` answers its 413)."""
    pages, pixels, pdfs = [], [], {}
    for k, (n, d) in enumerate(zip(names, datas)):
        if len(d) > max_file_bytes:
            pages.append([None])
            pixels.append(0)
            continue
        if is_pdf(d):
            try:
                pdfs[k] = OpenedPdf(d)
            except PdfError:  # its read names the reason
                pages.append([1])
                pixels.append(0)
                continue
        pages.append(pdf_pages(n, d, pdfs.get(k)))
        pixels.append(header_pixels(d, dpi, pdfs.get(k)))
    return pages, pixels, pdfs


def pdf_pages(name: str, data: bytes, pdf: OpenedPdf | None = None) -> list[int | None]:
    """The pages (from 1) an upload is read as: each page of a PDF (``pdf``: it opened
    already), or [None] for an image (and for a PDF that cannot be opened: its read
    reports why)."""
    if not is_pdf(data):
        return [None]
    try:
        n = len(pdf) if pdf is not None else page_count(data)
    except PdfError:
        return [1]
    if n == 0:
        raise RequestError(422, f"{name}: the PDF has no pages")
    return list(range(1, n + 1))


def create_app(
    recognizer: Any,
    limits: Limits | None = None,
    max_batch: int = 32,
    max_wait_ms: float = 1.0,
    name: str = "",
    model_workers: int = 1,
) -> Any:
    """The FastAPI application serving ``recognizer`` (see the module docstring)."""
    from crnn import __version__

    limits = limits or Limits()
    batcher = MicroBatcher(
        recognizer.backend,
        max_batch=max_batch,
        max_wait_ms=max_wait_ms,
        max_queue=limits.max_queue,
        workers=model_workers,
    )
    info = {
        "name": name,
        "version": __version__,
        "charset_size": len(recognizer.charset),
        "num_classes": recognizer.charset.num_classes,
        "height": recognizer.spec.height,
        "rgb": recognizer.spec.rgb,
        "backend": type(recognizer.backend).__name__,
        "device": str(getattr(recognizer.backend, "device", "cpu")),
        "max_batch": max_batch,
        "max_wait_ms": max_wait_ms,
        "model_workers": model_workers,
        "limits": asdict(limits),
    }
    service = Service(recognizer, limits, batcher, info)

    @contextlib.asynccontextmanager
    async def lifespan(_app: Any) -> Any:
        await batcher.start()
        log.info(
            "serving %s (%s, %d classes) with batches of up to %d",
            name or "a model",
            info["backend"],
            info["num_classes"],
            max_batch,
        )
        yield
        await batcher.stop()

    app = FastAPI(title="crnn-ocr", version=__version__, lifespan=lifespan)
    app.state.service = service

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/v1/model")
    async def model() -> dict[str, Any]:
        st = batcher.stats  # how the forward passes were shared so far
        return {
            **info,
            "served": {
                "images": st.images,
                "forward_passes": st.batches,
                "largest_batch": st.largest,
            },
        }

    @app.get("/", response_class=HTMLResponse)
    async def page() -> Any:
        return HTMLResponse((STATIC / "index.html").read_text(encoding="utf-8"))

    @app.get("/static/label-cjk.otf")
    async def font() -> Any:
        return FileResponse(LABEL_FONT, media_type="font/otf")

    @app.post("/v1/recognize")
    async def recognize(request: Request) -> Any:
        t0 = time.perf_counter()
        try:
            form = await request.form(max_files=limits.max_files + 1, max_fields=64)
        except _TooSlow:  # BodyLimit answers it
            raise
        except _TooLarge as e:  # raised by BodyLimit while the body streams in
            return _json_response(
                {"error": BodyLimit(None, limits.max_request_bytes)._message(e.args[0], True)}, 413
            )
        except Exception as e:  # noqa: BLE001 -- a malformed body, or too many files in it
            if "too many files" in str(e).lower():  # Starlette's parser stops at max_files
                return _json_response(
                    {
                        "error": f"more than {limits.max_files} files, over the limit per "
                        "request (--max-files)"
                    },
                    413,
                )
            return _json_response(
                {"error": f"the body is not a readable multipart form ({e})"}, 400
            )
        pdfs: dict[int, OpenedPdf] = {}  # each PDF upload opened once, closed at the end
        try:
            beam, floor, layout, dpi = options(form, limits)
            files = form.getlist("file")
            if not files:
                raise RequestError(
                    400, "no 'file' field: send images as multipart/form-data fields named 'file'"
                )
            if len(files) > limits.max_files:
                raise RequestError(
                    413,
                    f"{len(files)} files, over the limit of {limits.max_files} per request "
                    "(--max-files)",
                )
            uploads = [
                (getattr(f, "filename", None) or f"file {i + 1}", f) for i, f in enumerate(files)
            ]
            if any(isinstance(f, str) for _, f in uploads):
                raise RequestError(
                    400, "a 'file' field holds text, not a file: send images as file uploads"
                )
            datas = [await f.read() for _, f in uploads]
            # What the files hold (a PDF's pages, each image's pixels from its header), on
            # a worker thread: parsing a PDF waits for the PDFium lock, which renders hold,
            # and the event loop must never wait (it froze /healthz and every request).
            # A file over the per-file byte limit is not parsed at all: its 413 comes first.
            names = [n for n, _ in uploads]
            pages, pixels, pdfs = await asyncio.get_running_loop().run_in_executor(
                None, survey, names, datas, dpi, limits.max_file_bytes
            )
            # A PDF is read page by page, each page a file against --max-files.
            items = [(n, d, pg, k) for k, (n, d) in enumerate(zip(names, datas)) for pg in pages[k]]
            if len(items) > limits.max_files:
                raise RequestError(
                    413,
                    f"{len(items)} images and PDF pages, over the limit of {limits.max_files} "
                    "per request (--max-files): send fewer pages per request",
                )
            # The request's pixels from the headers, before any work (each file's count also
            # decides whether it needs a planning slot).
            total = sum(pixels)
            if total > limits.max_request_pixels:
                raise RequestError(
                    413,
                    f"{total:,} pixels in this request's images, over the limit of "
                    f"{limits.max_request_pixels:,} (--max-request-pixels): send fewer or "
                    "smaller images",
                )

            async def one(n: str, data: bytes, pg: int | None, k: int) -> dict[str, Any]:
                where = {"filename": n} if pg is None else {"filename": n, "page": pg}
                try:
                    return await service.read_file(
                        n, data, beam, layout, pg, dpi, pixels[k], pdfs.get(k)
                    )
                except RequestError as e:
                    return {**where, "error": str(e), "status": e.status}
                except Exception:  # noqa: BLE001 -- one file's bug must not fail the others
                    log.exception("reading %s failed", n)
                    return {
                        **where,
                        "error": f"{n}: the server could not read it (see its log)",
                        "status": 500,
                    }

            work = asyncio.ensure_future(asyncio.gather(*(one(*item) for item in items)))
            if not await _finished_unless_hung_up(work, request, limits.timeout_s):
                log.info("a client hung up: its request's remaining work is dropped")
                return _json_response({"error": "the client hung up"}, 499)
            results = work.result()
        except RequestError as e:
            return _json_response({"error": str(e)}, e.status)
        except asyncio.TimeoutError:
            return _json_response(
                {"error": f"the request took over {limits.timeout_s:g} s (--timeout-s)"}, 504
            )
        finally:
            await form.close()
            for pdf in pdfs.values():
                pdf.close()  # a page being rendered stops at its next pause
        if floor is not None:
            for r in results:
                if "confidence" in r:
                    r["uncertain"] = r["confidence"] < floor
        bad = [r for r in results if "error" in r]
        ms = 1000 * (time.perf_counter() - t0)
        service.served += len(results) - len(bad)
        # A request with errors is logged; a clean one only with -v (a line a request cost
        # the event loop 5 % of its time under load).
        log.log(
            logging.INFO if bad else logging.DEBUG,
            "served %d file(s), %d error(s), in %.0f ms",
            len(results),
            len(bad),
            ms,
        )
        if bad and len(bad) == len(results):
            status = bad[0]["status"] if len({r["status"] for r in bad}) == 1 else 400
            for r in bad:
                r.pop("status")
            return _json_response(
                {"error": "; ".join(r["error"] for r in bad), "results": results}, status
            )
        for r in bad:
            r.pop("status")
        return _json_response({"results": results})

    return BodyLimit(
        Direct(app, {"/v1/recognize": recognize}),
        limits.max_request_bytes,
        limits.timeout_s,
        limits.max_uploads,
    )
