"""The Chinese model's development sets and its frozen test set: which text, which faces,
which photographs, and what each may be used for.

**Development** (choose and tune on these as often as needed; their figures are
development figures, never test figures):

* ``dev-ming``, ``dev-kai``: the benchmark's own sentences (``benchmarks/zh_sentences.txt``,
  written for the benchmarks beside the generator's templates, so not independent of it)
  printed in AR PL UMing (a Ming face) and AR PL UKai (a Kai face), Debian's
  ``fonts-arphic-uming`` and ``fonts-arphic-ukai``: faces outside the packages the
  Chinese recipes may train on, so no stage ever saw them;
* ``dev-photo``: the same sentences drawn as photographs by code in
  ``benchmarks/zh_vs_peers.py`` (the generator was fitted to this row's errors in stages
  4-6: a development row, and a synthetic one);
* ``dev-real``: ``../shared/data/zh_real_dev``, 420 real photographed lines (RCTW-17:
  PP-OCR trained on its photographs, so PP-OCR's figure there is optimistic);
* ``dev-vertical``: the ``dev-ming`` lines set top to bottom in AR PL UMing, one
  character upright in each cell, spaces dropped (``zh_vs_peers.render_vertical``);
  ``dev-vertical-kai`` the same columns in AR PL UKai (added 2026-11-27: whether the
  column reading holds in a second face);
* ``dev-regional``: the ``dev-ming`` lines in the regional glyph forms, each in one of
  Noto Sans CJK and Noto Serif CJK Medium TC, HK, JP and KR in turn (``fonts-noto-cjk-extra``;
  added 2026-12-07): the designs of font set ``zh_regional`` at a weight it does not
  train on (the SC faces of that weight are in set ``zh``). Where the package is missing
  the row is left out.

**Frozen test** (``--set test``: run once per release candidate, after every choice is
made, and reported as the test figure; nothing is chosen on it):

* text nobody here wrote and the generator never draws from: lines of Debian's
  ``fortunes-zh`` (``tang300``: Tang poems; ``song100``: Song poems; ``chinese``: modern
  prose from Debian's documents, with Latin words), cut into pieces of 4-24 characters at
  a seed fixed here; only pieces whose every character the charset holds and every face
  draws;
* faces that no stage trained on or was chosen by: AR PL SungtiL GB (a Song face,
  ``fonts-arphic-gbsn00lp``) and AR PL KaitiM GB (a Kai face, ``fonts-arphic-gkai00mp``),
  printed and as photographs (``test-song``, ``test-kai``, ``test-photo``), and the
  ``test-song`` lines set vertically in the Song face (``test-vertical``, added
  2026-11-26; the labels digest leaves it out, so it stays comparable). They come from
  the same foundry as the development faces, so they are not independent of them in
  design; they are outside every training package.
* ``test-web``: real web-image lines, ``data/zh_web/test`` (593 lines of 47 images of
  ``../shared/data/zh_web_train`` kept aside by image before the recognizer trained on the
  others' lines; ``benchmarks/zh_web_lines.py`` cuts it), where present. Its development
  twin is ``dev-web`` (``data/zh_web/dev``, 569 lines of 35 other held-out images).
  Photographs (``zh_real_dev``) stay development only.

    python benchmarks/zh_sets.py --set dev --model zh --model runs/new/best.pt --peer-python
    /root/peers/bin/python
    python benchmarks/zh_sets.py --set test --json docs/bench/zh_test.json     # once per release
    candidate

Two candidates' development figures differ by more than the rows' sampling only where
``benchmarks/compare_reads.py A.json B.json`` says so (a paired bootstrap over the
lines); the 150-line rows cannot tell a Kai gain under about half a point, so compare
close candidates on larger rows as well (``--count 600 --seed 20261129``).

Readers, one run, the same PNG files: ours through ``crnn-predict --json`` with its
default options (what users type); Tesseract 5 (``chi_sim+eng``, ``--psm 7``, each line as
is and enlarged 3x with Lanczos, as the English benchmark gives it; columns with
``chi_sim_vert``, ``--psm 5``); with
``--peer-python``, PP-OCRv4's recognizer and PP-OCRv6 small and tiny
(``benchmarks/peer_read.py``). Scores: CER after NFKC with whitespace removed, lines read
exactly, ms per line on this machine.

The frozen lines are a pure function of the installed ``fortunes-zh`` and of the seed;
``frozen_digest`` is printed and kept in the JSON, so a changed package shows.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import random
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from PIL import Image  # noqa: E402

from crnn.data.synth.fontsets import SetFace, locate  # noqa: E402
from crnn.text.alphabet import Charset  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

# The real photographed lines to develop on, beside the project (not in a user's clone).
REAL_DEV = ROOT.parent / "shared" / "data" / "zh_real_dev"
# Real web-image lines cut by benchmarks/zh_web_lines.py (dev/ and test/, by image).
WEB_LINES = ROOT / "data" / "zh_web"
FORTUNES = Path("/usr/share/games/fortunes")
FORTUNE_FILES = ("tang300", "song100", "chinese")
# Fixed: changing it makes a new test set, and every figure before it incomparable.
FROZEN_SEED = 20261126

DEV_FACES = {
    "dev-ming": SetFace("uming.ttc", "fonts-arphic-uming", "Ming", "AR PL UMing CN"),
    "dev-kai": SetFace("ukai.ttc", "fonts-arphic-ukai", "Kai", "AR PL UKai CN"),
}
# dev-regional's faces: the regional forms at a weight font set zh_regional leaves out.
REGIONAL_FACES = tuple(
    SetFace(
        f"Noto{kind}CJK-Medium.ttc",
        "fonts-noto-cjk-extra",
        kind,
        f"Noto {kind} CJK {region} Medium",
    )
    for region in ("TC", "HK", "JP", "KR")
    for kind in ("Sans", "Serif")
)
TEST_FACES = {
    "test-song": SetFace("gbsn00lp.ttf", "fonts-arphic-gbsn00lp", "Song"),
    "test-kai": SetFace("gkai00mp.ttf", "fonts-arphic-gkai00mp", "Kai"),
}
_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")
# Lines that name a poem, its author or a quotation's source: not text of the piece.
_NOT_TEXT = re.compile(r"^(题目|作者|《.*》$|--|—)")


def fortune_text() -> dict[str, list[str]]:
    """The text lines of each of ``fortunes-zh``'s Chinese files, escapes, titles and
    attributions removed, whitespace (no-break spaces included) as single spaces.

    Raises:
        FileNotFoundError: the package is not installed.
    """
    missing = [f for f in FORTUNE_FILES if not (FORTUNES / f).is_file()]
    if missing:
        raise FileNotFoundError(
            f"the frozen test's text is Debian's fortunes-zh ({', '.join(missing)} not in "
            f"{FORTUNES}): apt-get install fortunes-zh"
        )
    out: dict[str, list[str]] = {}
    for name in FORTUNE_FILES:
        lines = []
        for line in (FORTUNES / name).read_text(encoding="utf-8").splitlines():
            line = " ".join(_ESCAPE.sub("", line).split())
            if line and line != "%" and not _NOT_TEXT.match(line):
                lines.append(line)
        out[name] = lines
    return out


def _cuttable(line: str, i: int) -> bool:
    """Whether a piece may start or end at ``i``: not inside a Latin word or a number."""
    return not (
        0 < i < len(line)
        and line[i - 1].isascii()
        and line[i - 1].isalnum()
        and line[i].isascii()
        and line[i].isalnum()
    )


def frozen_lines(count: int, drawable: set[str]) -> list[str]:
    """``count`` pieces of 4-24 characters of :func:`fortune_text`, the files in turn
    (poems and prose alike), each wholly in ``drawable`` (the charset's characters that
    every face of the set draws) and never cut inside a Latin word or a number, at
    :data:`FROZEN_SEED`: the same pieces for every model and run."""
    r = random.Random(FROZEN_SEED)
    pools = [lines[:] for lines in fortune_text().values()]
    for pool in pools:
        r.shuffle(pool)
    out: list[str] = []
    seen: set[str] = set()
    for k in range(count * 50):
        pool = pools[k % len(pools)]
        line = pool[(k // len(pools)) % len(pool)]
        n = r.randint(4, 24)
        i = r.randrange(max(1, len(line) - n + 1))
        if not (_cuttable(line, i) and _cuttable(line, min(len(line), i + n))):
            continue
        piece = line[i : i + n].strip()
        if len(piece) >= 4 and piece not in seen and all(c in drawable for c in piece if c != " "):
            out.append(piece)
            seen.add(piece)
        if len(out) >= count:
            break
    return out


def frozen_digest(lines: list[str]) -> str:
    return hashlib.sha256("\n".join(lines).encode("utf-8")).hexdigest()[:12]


# ---- the benchmark: every reader on one set's rows, in one run ---------------------------


def _rows(which: str, count: int, seed: int) -> list[tuple[str, list[Image.Image], list[str]]]:
    """(row, images, labels) of the development or the frozen test set."""
    from benchmarks import zh_vs_peers as zb

    faces = DEV_FACES if which == "dev" else TEST_FACES
    paths = {row: locate(face) for row, face in faces.items()}
    missing = sorted(face.package for row, face in faces.items() if paths[row] is None)
    if missing:
        sys.exit(f"fonts missing for the {which} set: apt-get install {' '.join(missing)}")
    covered = set.intersection(*(zb.cmap(p) for p in paths.values() if p))
    charset = Charset.from_spec("zh5529")
    drawable = {c for c in charset.chars if ord(c) in covered} | {" "}
    if which == "dev":
        labels = zb.make_lines(count, seed, covered)
        photo_labels = zb.make_lines(count, seed + 1, covered)
    else:
        both = frozen_lines(2 * count, drawable)
        labels, photo_labels = both[:count], both[count:]
    rows = []
    for row, path in paths.items():
        r = random.Random(f"{seed}:{row}")
        rows.append((row, [zb.render_print(t, path, r) for t in labels], labels))  # type: ignore[arg-type]
    r = random.Random(f"{seed}:{which}-photo")
    face_list = list(paths.values())
    rows.append(
        (
            f"{which}-photo",
            [
                zb.render_photo(t, face_list[i % len(face_list)], r)  # type: ignore[arg-type]
                for i, t in enumerate(photo_labels)
            ],
            photo_labels,
        )
    )
    r = random.Random(f"{seed}:{which}-vertical")
    column = ["".join(t.split()) for t in labels]
    rows.append(
        (f"{which}-vertical", [zb.render_vertical(t, face_list[0], r) for t in column], column)
    )  # type: ignore[arg-type]
    regional = [locate(face) for face in REGIONAL_FACES] if which == "dev" else []
    if regional and all(regional):
        # The same lines in the regional glyph forms, a face a line in turn.
        ok = set.intersection(*(zb.cmap(p) for p in regional))  # type: ignore[arg-type]
        kept = [t for t in labels if all(ord(c) in ok for c in t if c != " ")]
        r = random.Random(f"{seed}:dev-regional")
        rows.append(
            (
                "dev-regional",
                [zb.render_print(t, regional[i % len(regional)], r) for i, t in enumerate(kept)],  # type: ignore[arg-type]
                kept,
            )
        )
    if which == "dev":  # the same columns in the Kai face: is the cell cutting a face's?
        r = random.Random(f"{seed}:{which}-vertical-kai")
        rows.append(
            ("dev-vertical-kai", [zb.render_vertical(t, face_list[1], r) for t in column], column)
        )  # type: ignore[arg-type]
    if web := folder_pairs(WEB_LINES / which):
        rows.append(
            (
                f"{which}-web",
                [Image.open(WEB_LINES / which / p).convert("RGB") for p, _ in web],
                [t for _, t in web],
            )
        )
    if which == "dev" and (pairs := real_dev_pairs()):
        rows.append(
            (
                "dev-real",
                [Image.open(REAL_DEV / p).convert("RGB") for p, _ in pairs],
                [t for _, t in pairs],
            )
        )
    return rows


def model_spec(text: str) -> tuple[str, list[str]]:
    """A ``--model`` value: the model (``zh`` or a checkpoint path) and the crnn-predict
    options that follow it, split as a shell splits them (a path with spaces quoted)."""
    words = shlex.split(text)
    if not words:
        raise ValueError("an empty --model: give 'zh' or a checkpoint path")
    return words[0], words[1:]


def real_dev_pairs() -> list[tuple[str, str]]:
    """``(image path, label)`` of each line of ``REAL_DEV/gt.txt``; empty where it is absent."""
    return folder_pairs(REAL_DEV)


def folder_pairs(folder: Path) -> list[tuple[str, str]]:
    """``(image path, label)`` of each line of ``folder/gt.txt``; empty where it is absent."""
    gt = folder / "gt.txt"
    if not gt.is_file():
        return []
    lines = gt.read_text(encoding="utf-8").splitlines()
    return [tuple(ln.split("\t", 1)) for ln in lines if ln.strip()]  # type: ignore[misc]


def _ours(spec: str, paths: list[Path], extra: Sequence[str] = ()) -> list[str]:
    """``crnn-predict`` as a user types it, default options (and ``extra``), JSON out."""
    exe = shutil.which("crnn-predict")
    cmd = [exe] if exe else [sys.executable, str(ROOT / "tools" / "predict.py")]
    cmd += ["--model", "zh"] if spec == "zh" else ["-c", spec]
    done = subprocess.run(
        [*cmd, *extra, "--json", *map(str, paths)], capture_output=True, text=True, encoding="utf-8"
    )
    if done.returncode not in (0, 1):
        sys.exit(f"crnn-predict failed: {done.stderr[-1500:]}")
    by_path = {r["path"]: r["text"] for r in json.loads(done.stdout)}
    return [by_path[str(p)].replace("\n", "") for p in paths]


def _tesseract(path: Path, scale: int) -> str:
    """Tesseract at its best setting for the crop: a column (at least 1.5 times as high
    as wide) with its vertical model (``chi_sim_vert``, ``--psm 5``: a vertical block;
    Debian's ``tesseract-ocr-chi-sim-vert``), a line with ``chi_sim+eng --psm 7``."""
    img = Image.open(path)
    vertical = img.height >= 1.5 * img.width
    langs, psm = ("chi_sim_vert", "5") if vertical else ("chi_sim+eng", "7")
    with tempfile.NamedTemporaryFile(suffix=".png") as f:
        img.resize((img.width * scale, img.height * scale), Image.LANCZOS).save(f.name)
        out = subprocess.run(
            ["tesseract", f.name, "-", "-l", langs, "--psm", psm],
            capture_output=True,
            text=True,
            check=False,
        )
    return out.stdout


def _peer(python: str, reader: str, paths: list[Path]) -> tuple[list[str], str]:
    done = subprocess.run(
        [python, str(ROOT / "benchmarks" / "peer_read.py"), "--reader", reader, *map(str, paths)],
        capture_output=True,
        text=True,
        encoding="utf-8",
    )
    if done.returncode:
        raise RuntimeError(done.stderr[-1500:])
    out = json.loads(done.stdout)
    return out["reads"], out["version"]


def main() -> int:
    from benchmarks.zh_vs_peers import score

    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--set",
        choices=("dev", "test"),
        default="dev",
        help="dev (choose on it freely) or test (the frozen test: once per release candidate)",
    )
    ap.add_argument(
        "--model",
        action="append",
        help="'zh' (bundled, the default) or a checkpoint/.onnx, optionally followed by "
        "crnn-predict options of its own, e.g. 'zh --view-sure 1' (a path with spaces "
        "quoted); repeatable",
    )
    ap.add_argument(
        "--predict-args",
        default="",
        metavar="ARGS",
        help="options added to every crnn-predict call, e.g. '--stretch 1.0,1.1' (default: none)",
    )
    ap.add_argument("--count", type=int, default=150, help="lines per generated row (default 150)")
    ap.add_argument(
        "--seed", type=int, default=20261126, help="development rows only; the test's is fixed"
    )
    ap.add_argument(
        "--rows", default="", help="comma-separated row names (default: all of the set)"
    )
    ap.add_argument(
        "--peer-python",
        help="an interpreter with faster-paddle and rapidocr-onnxruntime "
        "(benchmarks/peer_read.py); without it the PP-OCR peers are left out",
    )
    ap.add_argument(
        "--peers",
        default="ppocr-v4-rec,ppocr-v6-small,ppocr-v6-tiny",
        help="with --peer-python, which PP-OCR readers (default: all three)",
    )
    ap.add_argument("--no-tesseract", action="store_true")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--keep", type=Path, help="keep each row's images and gt.txt under this folder")
    args = ap.parse_args()
    seed = args.seed if args.set == "dev" else FROZEN_SEED
    rows = _rows(args.set, args.count, seed)
    if args.rows:
        rows = [r for r in rows if r[0] in args.rows.split(",")]
    tmp = args.keep or Path(tempfile.mkdtemp(prefix=f"zh_{args.set}_"))
    files: dict[str, list[Path]] = {}
    for name, imgs, labels in rows:
        (tmp / name).mkdir(parents=True, exist_ok=True)
        files[name] = [tmp / name / f"{i:04d}.png" for i in range(len(imgs))]
        for p, im in zip(files[name], imgs):
            im.save(p)
        (tmp / name / "gt.txt").write_text(
            "".join(f"{p.name}\t{t}\n" for p, t in zip(files[name], labels)), encoding="utf-8"
        )
    # The vertical rows repeat the first face's lines, the web rows are real lines kept
    # beside the data: left out, the digest is as before.
    digest = frozen_digest(
        [
            t
            for name, _, labels in rows
            if "-vertical" not in name and "-web" not in name
            for t in labels
        ]
    )
    print(
        f"{args.set} set, rows {', '.join(r[0] for r in rows)}; labels digest {digest}; images "
        f"in {tmp}"
    )
    extra = shlex.split(args.predict_args)
    readers: list[tuple[str, object]] = [
        (f"crnn-ocr {m}", lambda ps, model=model, own=own: _ours(model, ps, [*own, *extra]))
        for m in (args.model or ["zh"])
        for model, own in [model_spec(m)]
    ]
    if not args.no_tesseract and shutil.which("tesseract"):
        for scale in (1, 3):
            readers.append(
                (
                    f"Tesseract chi_sim+eng x{scale}",
                    lambda ps, s=scale: list(
                        ThreadPoolExecutor(2).map(lambda p: _tesseract(p, s), ps)
                    ),
                )
            )
    if args.peer_python:
        for reader in args.peers.split(","):
            readers.append((reader, lambda ps, r=reader: _peer(args.peer_python, r, ps)[0]))
    results = []
    for reader, read in readers:
        for name, _, labels in rows:
            t0 = time.perf_counter()
            reads = read(files[name])  # type: ignore[operator]
            ms = 1000 * (time.perf_counter() - t0) / len(labels)
            s = score(labels, reads)
            results.append(
                {
                    "reader": reader,
                    "row": name,
                    **s,
                    "ms_per_line": ms,
                    **({"reads": reads} if args.set == "dev" else {}),
                }
            )
            print(
                f"{reader:<34} {name:<11} CER {s['cer']:7.2%}  exact "
                f"{s['exact']:4d}/{s['lines']:<4d} {ms:7.1f} ms/line",
                flush=True,
            )
    if args.json:
        meta = {
            "command": " ".join(sys.argv),
            "set": args.set,
            "seed": seed,
            "labels_digest": digest,
            "machine": platform.processor() or platform.machine(),
            # The frozen test's text stays in its package (its digest names it); the
            # real photographs' labels stay beside the data.
            "labels": {
                name: labels
                for name, _, labels in rows
                if args.set == "dev" and name not in ("dev-real", "dev-web")
            },
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(
            json.dumps({"meta": meta, "rows": results}, ensure_ascii=False, indent=1),
            encoding="utf-8",
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
