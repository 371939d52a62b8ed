"""``crnn-serve`` / ``tools/serve.py``: serve a model over HTTP, with a web page.

    crnn-serve --model zh                       # http://127.0.0.1:8000/
    crnn-serve -c runs/exp/best.pt --port 9000 --max-batch 64 --max-wait-ms 10
    curl -F file=@word.png -F file=@line.png http://127.0.0.1:8000/v1/recognize

Needs the serve extra: pip install 'crnn-ocr[serve]' (FastAPI, uvicorn, python-multipart).
Images of concurrent requests are batched through the model (--max-batch, --max-wait-ms);
every per-file problem is answered as that file's error and the rest are read.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

from crnn.cli import EXIT_OK, EXIT_USAGE, Parser, setup_logging
from crnn.cli.reading_args import add_reading_args

log = logging.getLogger("crnn.serve")


def build_parser() -> argparse.ArgumentParser:
    from crnn.serve.app import Limits

    d = Limits()
    p = Parser(
        prog="crnn-serve", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "-c", "--checkpoint", help="a checkpoint, release or .onnx file (default: --model)"
    )
    p.add_argument(
        "--model",
        choices=("word", "line", "zh"),
        default="word",
        help="without -c, the bundled model to serve (default word)",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    add_reading_args(p, layout=False)
    p.add_argument(
        "--max-batch", type=int, default=32, help="most images per forward pass (1: no batching)"
    )
    p.add_argument(
        "--max-wait-ms",
        type=float,
        default=1.0,
        help="how long an image waits, from when it is queued, for others to share its batch "
        "(default 1)",
    )
    p.add_argument(
        "--max-file-bytes",
        type=int,
        default=d.max_file_bytes,
        help=f"largest upload per image (default {d.max_file_bytes:,})",
    )
    p.add_argument(
        "--max-request-bytes",
        type=int,
        default=d.max_request_bytes,
        help=f"largest request body (default {d.max_request_bytes:,})",
    )
    p.add_argument(
        "--max-files",
        type=int,
        default=d.max_files,
        help=f"most images per request (default {d.max_files})",
    )
    p.add_argument(
        "--max-pixels",
        type=int,
        default=d.max_pixels,
        help=f"largest image, width x height (default {d.max_pixels:,})",
    )
    p.add_argument(
        "--timeout-s",
        type=float,
        default=d.timeout_s,
        help="longest a request may take; its remaining work is then dropped (default "
        f"{d.timeout_s:g})",
    )
    p.add_argument(
        "--max-request-pixels",
        type=int,
        default=d.max_request_pixels,
        help="most pixels (width x height) in one request's images together (default "
        f"{d.max_request_pixels:,})",
    )
    p.add_argument(
        "--max-uploads",
        type=int,
        default=d.max_uploads,
        help="most request bodies arriving at once; past it requests are answered 503, and "
        f"each body must arrive within --timeout-s (else 408) (default {d.max_uploads})",
    )
    p.add_argument(
        "--header-timeout-s",
        type=float,
        default=d.header_timeout_s,
        help="a request's headers must arrive within this many seconds of its connection "
        f"opening, else 408 and the connection closes (default {d.header_timeout_s:g})",
    )
    p.add_argument(
        "--max-queue",
        type=int,
        default=d.max_queue,
        help="most images waiting for the model; past it requests are answered 503 (default "
        f"{d.max_queue})",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=0,
        help="images decoded and laid out at once (default: the machine's cores)",
    )
    p.add_argument(
        "--model-workers",
        type=int,
        default=0,
        help="batches run through the model at once; an ONNX model then runs each on "
        "cores/N threads (default: one per core for an ONNX model on the CPU, "
        "else 1)",
    )
    p.add_argument("-v", "--verbose", action="store_true")
    return p


def forward_workers(path: Any, asked: int) -> tuple[int, int | None]:
    """How many batches run through the model at once, and each one's threads.

    An ONNX model runs one single-threaded batch per core: on 2 cores, batches of 1-16
    word crops went through 1.1-1.5x faster than one batch at a time on 2 threads, whose
    threads wait for each other at every LSTM step (docs/benchmarks.md, "Serving under
    load"). A PyTorch model keeps one batch at a time (it parallelises inside; a GPU
    queues the calls anyway) unless ``asked``."""
    if asked < 0:
        raise ValueError(f"--model-workers {asked}: expected 0 (automatic) or more")
    if not str(path).endswith(".onnx"):
        return asked or 1, None
    from crnn.data import usable_cores

    cores = usable_cores()
    workers = asked or cores
    return workers, max(1, cores // workers)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    setup_logging(args.verbose)
    try:
        import uvicorn

        from crnn.serve.app import Limits, create_app
        from crnn.serve.connection import timed_headers
    except ImportError as e:
        log.error("crnn-serve needs the serve extra (%s): pip install 'crnn-ocr[serve]'", e.name)
        return EXIT_USAGE
    from crnn.cli.reading_args import checkpoint_arg, load_reader

    try:
        path = checkpoint_arg(args)
        model_workers, threads = forward_workers(path, args.model_workers)
        args.checkpoint, args.threads = path, args.threads or threads
        # ONNX Runtime's threads sleep between batches instead of spinning: a server shares
        # its cores with its event loop, its clients and other work (docs/benchmarks.md).
        rec = load_reader(args, spinning=False)
        limits = Limits(
            args.max_file_bytes,
            args.max_request_bytes,
            args.max_files,
            args.max_pixels,
            args.timeout_s,
            max_request_pixels=args.max_request_pixels,
            max_queue=args.max_queue,
            workers=args.workers,
            max_uploads=args.max_uploads,
            header_timeout_s=args.header_timeout_s,
        )
        protocol = timed_headers(args.header_timeout_s)
        app = create_app(
            rec,
            limits,
            args.max_batch,
            args.max_wait_ms,
            name=str(path),
            model_workers=model_workers,
        )
    except (FileNotFoundError, RuntimeError, ValueError) as e:
        log.error("%s", e)
        return EXIT_USAGE
    log.info("web page and API at http://%s:%d/ (Ctrl-C stops)", args.host, args.port)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning", http=protocol)
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
