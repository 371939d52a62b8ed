"""Load on ``crnn-serve`` from N concurrent clients on localhost, with dynamic batching on
and off, against ``predict``'s batch throughput on the same images in one process.

    python benchmarks/serve_load.py --json docs/bench/serve_load.json
    python benchmarks/serve_load.py --requests 500 --clients 8 --model zh --images data/zh_lines

Each run starts a server process (``python -m crnn.cli.serve``), waits for /healthz, then
``--clients`` threads each send one image per request until ``--requests`` answers are in
or ``--seconds`` have passed. Every answer is checked against the image's label (the
images' ``gt.txt``); requests that fail or read wrong are counted. Then ``--bad`` uploads
of each bad kind (not an image, a decompression bomb, a body over the limit, a missing
field) are sent from one client while the others keep sending good images: every bad one
must get its 4xx and every good one its right answer. Figures: images/s served, p50/p99
latency (ms), and ``crnn-predict`` reading the same images as files (the command, start-up
included), and the library's in-memory batch read (batches of 64) as the floor.
"""

from __future__ import annotations

import argparse
import http.client
import json
import platform
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start(model: str, max_batch: int, extra: list[str]) -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "crnn.cli.serve",
            "--model",
            model,
            "--port",
            str(port),
            "--max-batch",
            str(max_batch),
            *extra,
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("the server did not start")


def load_images(folder: Path) -> list[tuple[str, bytes, str]]:
    rows = []
    for line in (folder / "gt.txt").read_text(encoding="utf-8").splitlines():
        if "\t" in line:
            name, label = line.split("\t", 1)
            rows.append((name, (folder / name).read_bytes(), label.strip()))
    return rows


def multipart(name: str, data: bytes) -> tuple[bytes, str]:
    """One ``file`` field as a multipart body, built once per image (the load generator
    shares the machine's cores with the server: it should spend as little as it can)."""
    boundary = "crnn-serve-load-7d1e"
    head = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{name}"\r\n'
        "Content-Type: application/octet-stream\r\n\r\n"
    ).encode()
    return (
        head + data + f"\r\n--{boundary}--\r\n".encode(),
        f"multipart/form-data; boundary={boundary}",
    )


def hammer(url: str, images: list, clients: int, requests: int, seconds: float) -> dict[str, float]:
    """``clients`` threads, each on one keep-alive connection (``http.client``: a tenth of
    httpx's CPU per request), sending one image per request until ``requests`` answers
    are in or ``seconds`` have passed."""
    lat: list[float] = []
    wrong = failed = 0
    lock = threading.Lock()
    sent = iter(range(10**9))
    deadline = time.perf_counter() + seconds
    bodies = [multipart(name, data) for name, data, _ in images]
    host, port = url.removeprefix("http://").split(":")

    def client(k: int) -> None:
        nonlocal wrong, failed
        conn = http.client.HTTPConnection(host, int(port), timeout=120)
        try:
            while time.perf_counter() < deadline:
                with lock:
                    i = next(sent)
                if i >= requests:
                    return
                body, ctype = bodies[i % len(images)]
                label = images[i % len(images)][2]
                t0 = time.perf_counter()
                try:
                    conn.request(
                        "POST", "/v1/recognize", body=body, headers={"Content-Type": ctype}
                    )
                    r = conn.getresponse()
                    payload = r.read()
                    ok_http = r.status == 200
                    text = json.loads(payload)["results"][0].get("text") if ok_http else None
                except (OSError, http.client.HTTPException):
                    conn.close()
                    conn = http.client.HTTPConnection(host, int(port), timeout=120)
                    ok_http, text = False, None
                dt = time.perf_counter() - t0
                with lock:
                    lat.append(dt)
                    failed += not ok_http
                    wrong += ok_http and text != label
        finally:
            conn.close()

    t0 = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(client, range(clients)))
    wall = time.perf_counter() - t0
    lat.sort()
    return {
        "answers": len(lat),
        "images_per_s": len(lat) / wall,
        "p50_ms": 1000 * statistics.median(lat),
        "p99_ms": 1000 * lat[min(len(lat) - 1, int(0.99 * len(lat)))],
        "wrong": wrong,
        "failed": failed,
    }


def bomb() -> bytes:
    w = h = 30000
    comp = zlib.compressobj(9)
    row = b"\x00" + b"\xff" * ((w + 7) // 8)
    data = b"".join(comp.compress(row) for _ in range(h)) + comp.flush()

    def chunk(tag: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + tag + body + struct.pack(">I", zlib.crc32(tag + body))

    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 1, 0, 0, 0, 0))
        + chunk(b"IDAT", data)
        + chunk(b"IEND", b"")
    )


def bad_kinds(limit: int) -> dict[str, tuple[dict, int]]:
    return {
        "not an image": ({"files": [("file", ("notes.txt", b"hello"))]}, 415),
        "decompression bomb": ({"files": [("file", ("bomb.png", bomb()))]}, 413),
        "body over the limit": ({"files": [("file", ("big.bin", b"\0" * (limit + 1)))]}, 413),
        "missing field": ({"data": {"beam": "0"}}, 400),
    }


def bad_under_load(url: str, images: list, count: int, limit: int) -> dict[str, object]:
    stop = threading.Event()
    good = {"ok": 0, "wrong": 0}

    def keep_serving() -> None:
        with httpx.Client(timeout=60) as c:
            i = 0
            while not stop.is_set():
                name, data, label = images[i % len(images)]
                r = c.post(url + "/v1/recognize", files=[("file", (name, data))])
                good[
                    "ok"
                    if r.status_code == 200 and r.json()["results"][0].get("text") == label
                    else "wrong"
                ] += 1
                i += 1

    threads = [threading.Thread(target=keep_serving) for _ in range(4)]
    for t in threads:
        t.start()
    answered = {}
    with httpx.Client(timeout=60) as c:
        for kind, (kw, status) in bad_kinds(limit).items():
            codes = [c.post(url + "/v1/recognize", **kw).status_code for _ in range(count)]
            answered[kind] = {
                "expected": status,
                "right": sum(x == status for x in codes),
                "sent": count,
            }
    stop.set()
    for t in threads:
        t.join()
    return {"bad": answered, "good_meanwhile": good}


def white_png(side: int) -> bytes:
    """An all-white ``side`` x ``side`` greyscale PNG: a few KB on the wire, ``side``\u00b2
    pixels once decoded."""
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.new("L", (side, side), 255).save(buf, "PNG")
    return buf.getvalue()


def rss_mb(pid: int) -> float:
    """The process's peak resident memory so far (VmHWM), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def hostile(
    url: str, pid: int, images: list, count: int, side: int, clients: int = 4
) -> dict[str, object]:
    """``count`` all-white ``side``-px PNGs in one request (the hostile-input replay: 64 of 6,300
    px answered 200 after 43 s at 3.8 GB and starved every other client) while
    ``clients`` threads keep sending one good word each: the hostile request's status and
    time, the good requests' latencies meanwhile, the server's peak memory."""
    stop = threading.Event()
    lat: list[float] = []
    bad = [0]

    def keep_serving() -> None:
        with httpx.Client(timeout=60) as c:
            i = 0
            while not stop.is_set():
                name, data, label = images[i % len(images)]
                t0 = time.perf_counter()
                try:
                    r = c.post(url + "/v1/recognize", files=[("file", (name, data))])
                    ok = r.status_code == 200 and r.json()["results"][0].get("text") == label
                except httpx.HTTPError:
                    ok = False
                lat.append(time.perf_counter() - t0)
                bad[0] += not ok
                i += 1

    threads = [threading.Thread(target=keep_serving) for _ in range(clients)]
    for t in threads:
        t.start()
    time.sleep(1.0)
    body = white_png(side)
    t0 = time.perf_counter()
    with httpx.Client(timeout=600) as c:
        r = c.post(
            url + "/v1/recognize", files=[("file", (f"white{k}.png", body)) for k in range(count)]
        )
    took = time.perf_counter() - t0
    time.sleep(1.0)
    stop.set()
    for t in threads:
        t.join()
    lat.sort()
    return {
        "request": f"{count} x {side} x {side} white PNGs ({len(body):,} bytes each)",
        "status": r.status_code,
        "seconds": round(took, 2),
        "answer": r.text[:200],
        "good_requests": len(lat),
        "good_wrong_or_failed": bad[0],
        "good_p50_ms": round(1000 * statistics.median(lat), 1),
        "good_max_ms": round(1000 * lat[-1], 1),
        "server_peak_rss_mb": round(rss_mb(pid)),
    }


def predict_throughput(model: str, images: list, n: int) -> float:
    """The library's batch read of ``n`` images in memory (batches of 64): no files, no
    start-up, the floor under any per-request cost."""
    from crnn.reading.recognizer import Recognizer

    rec = Recognizer.bundled(model, batch_size=64)
    batch = [images[i % len(images)][1] for i in range(n)]
    rec.predict(batch[:64])
    t0 = time.perf_counter()
    rec.predict(batch)
    return n / (time.perf_counter() - t0)


def predict_cli_throughput(model: str, images: list, n: int) -> float:
    """``crnn-predict --model MODEL FOLDER`` over the same ``n`` images written as files,
    timed as a user runs it (start-up included): the command the server replaces."""
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(n):
            name, data, _ = images[i % len(images)]
            (Path(tmp) / f"{i:06d}{Path(name).suffix}").write_bytes(data)
        cmd = [sys.executable, "-m", "crnn.cli.predict", "--model", model, tmp]
        subprocess.run(cmd, cwd=ROOT, capture_output=True, check=True)  # warm the file cache
        t0 = time.perf_counter()
        out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=True)
        dt = time.perf_counter() - t0
    if len(out.stdout.splitlines()) != n:
        raise SystemExit(f"predict printed {len(out.stdout.splitlines())} lines for {n} images")
    return n / dt


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--model", default="word", choices=("word", "line", "zh"))
    ap.add_argument(
        "--images", type=Path, default=ROOT / "data" / "samples", help="a folder with gt.txt"
    )
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--seconds", type=float, default=300.0, help="stop each run after this long")
    ap.add_argument("--bad", type=int, default=50, help="bad uploads of each kind")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    images = load_images(args.images)
    limit = 2_000_000
    rows: dict[str, object] = {}
    for name, max_batch in (
        ("batching on (max batch 32, 1 ms)", 32),
        ("batching off (max batch 1)", 1),
    ):
        proc, url = start(args.model, max_batch, ["--max-request-bytes", str(limit)])
        try:
            hammer(url, images, args.clients, 4 * args.clients, 30)  # warm-up
            rows[name] = hammer(url, images, args.clients, args.requests, args.seconds)
            if max_batch > 1:
                rows["bad uploads under load"] = bad_under_load(url, images, args.bad, limit)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
        print(name, json.dumps(rows[name]), flush=True)
    proc, url = start(args.model, 32, [])  # the default limits
    try:
        for count, side in (
            (64, 6300),
            (3, 6300),
        ):  # over the request's pixels; the most one may hold
            rows[f"hostile: {count} x {side} px"] = hostile(url, proc.pid, images, count, side)
            print(json.dumps(rows[f"hostile: {count} x {side} px"]), flush=True)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    rows["crnn-predict FOLDER (the command, start-up included)"] = {
        "images_per_s": predict_cli_throughput(args.model, images, args.requests)
    }
    rows["Recognizer.predict in memory, batches of 64"] = {
        "images_per_s": predict_throughput(args.model, images, args.requests)
    }
    print(json.dumps(rows, indent=1))
    if args.json:
        meta = {
            "command": " ".join(sys.argv),
            "machine": platform.processor() or platform.machine(),
            "clients": args.clients,
            "requests": args.requests,
            "images": str(args.images),
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
