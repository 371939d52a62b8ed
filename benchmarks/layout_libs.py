"""Which image library should the page reader's line finding use? SciPy (``ndimage``,
what ``crnn/layout/lines.py`` used before), OpenCV (what it uses now) and scikit-image,
each doing the operations line finding spends its time in, on the same pages, side by
side in one run.

    python benchmarks/layout_libs.py --json docs/bench/layout_libs.json

The pages are ``benchmarks/pages_vs_peers.py``'s (English and Chinese, clean and
scanned; its faces must be installed), turned to grey as the page reader does. For each
operation, with the sizes line finding uses on that page (from its own character-height
estimate): the median milliseconds per page over ``--repeats`` rounds, and whether the
three libraries agree (the same pixels for the morphology, the same boxes for connected
components, rotations within one grey level on 99 % of pixels). Also: the whole of
``find_lines`` and the whole page read (line finding plus the recognizer), so the
operations' share of a page is on the table.

Line finding itself now uses OpenCV, the library this benchmark chose. SciPy (what it used
before) and scikit-image are needed only here; a missing one is left out of the table.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import cv2  # noqa: E402
import numpy as np  # noqa: E402

from benchmarks import pages_vs_peers as pv  # noqa: E402
from crnn.layout import lines as L  # noqa: E402

try:
    from scipy import ndimage as ndi
except ImportError:  # pragma: no cover - optional
    ndi = None
try:
    from skimage import measure, morphology, transform
except ImportError:  # pragma: no cover - optional
    measure = morphology = transform = None


def ms(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1000 * statistics.median(times)


def pages(seed: int, count: int) -> list[np.ndarray]:
    faces = {
        lang: [pv.locate(f) for f in fs] for lang, fs in (("en", pv.EN_FACES), ("zh", pv.ZH_FACES))
    }
    if any(p is None for fs in faces.values() for p in fs):
        sys.exit("the pages' faces are missing: see benchmarks/pages_vs_peers.py")
    out = []
    for lang in ("en", "zh"):
        for kind in ("clean", "scan"):
            r = random.Random(f"{seed}:{lang}:{kind}")
            for i in range(count):
                img, _ = pv.make_page(lang, kind, faces[lang][i % len(faces[lang])], r)  # type: ignore[arg-type]
                out.append(np.asarray(img.convert("L")))
    return out


def boxes_scipy(ink: np.ndarray) -> set[tuple[int, int, int, int]]:
    labels, _ = ndi.label(ink, structure=np.ones((3, 3), bool))
    return {(s[1].start, s[0].start, s[1].stop, s[0].stop) for s in ndi.find_objects(labels) if s}


def boxes_cv2(ink: np.ndarray) -> set[tuple[int, int, int, int]]:
    _, _, stats, _ = cv2.connectedComponentsWithStats(ink.astype(np.uint8), connectivity=8)
    return {(x, y, x + w, y + h) for x, y, w, h, _ in stats[1:].tolist()}


def boxes_skimage(ink: np.ndarray) -> set[tuple[int, int, int, int]]:
    labels = measure.label(ink, connectivity=2)
    return {(p.bbox[1], p.bbox[0], p.bbox[3], p.bbox[2]) for p in measure.regionprops(labels)}


def operations(
    grey: np.ndarray, ink: np.ndarray, ch: float
) -> dict[str, dict[str, Callable[[], object]]]:
    """Each operation in each library, with the sizes line finding uses on this page."""
    small_k = max(3, int(round(ch)) | 1)  # odd sizes: the three libraries centre alike
    reach = max(3, int(round(1.2 * ch)) | 1)
    ink8 = ink.astype(np.uint8)
    f32 = grey.astype(np.float32)
    rect = np.ones((small_k, small_k), np.uint8)
    row = np.ones((1, reach), np.uint8)
    return {
        "grey closing (background)": {
            "scipy": lambda: ndi.grey_closing(grey, size=(small_k, small_k)),
            "opencv": lambda: cv2.morphologyEx(grey, cv2.MORPH_CLOSE, rect),
            "scikit-image": lambda: morphology.closing(grey, rect),
        },
        "dilation along the line (smear)": {
            "scipy": lambda: ndi.maximum_filter(ink8, size=(1, reach)),
            "opencv": lambda: cv2.dilate(ink8, row),
            "scikit-image": lambda: morphology.dilation(ink8, row),
        },
        "connected components and boxes": {
            "scipy": lambda: boxes_scipy(ink),
            "opencv": lambda: boxes_cv2(ink),
            "scikit-image": lambda: boxes_skimage(ink),
        },
        "rotation by 1.7 degrees (deskew)": {
            "scipy": lambda: ndi.rotate(f32, 1.7, reshape=False, order=1, mode="nearest"),
            "opencv": lambda: cv2.warpAffine(
                f32,
                cv2.getRotationMatrix2D(((f32.shape[1] - 1) / 2, (f32.shape[0] - 1) / 2), 1.7, 1.0),
                (f32.shape[1], f32.shape[0]),
                flags=cv2.INTER_LINEAR,
                borderMode=cv2.BORDER_REPLICATE,
            ),
            "scikit-image": lambda: transform.rotate(
                f32, 1.7, order=1, mode="edge", preserve_range=True
            ),
        },
    }


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--pages", type=int, default=3, help="pages per language and kind (default 3)")
    ap.add_argument("--seed", type=int, default=20261125)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()

    libs = (
        (["scipy"] if ndi is not None else []) + ["opencv"] + (["scikit-image"] if measure else [])
    )
    totals: dict[str, dict[str, float]] = {}
    agree: dict[str, bool] = {}
    grey_pages = pages(args.seed, args.pages)
    find_ms, read_ms = [], []
    from crnn.reading.recognizer import Recognizer

    readers = {"en": Recognizer.bundled("line"), "zh": Recognizer.bundled("zh")}
    for n, grey in enumerate(grey_pages):
        page, _ = L.normalise(grey)
        ink = L.binarise(page)
        ch = L.estimate_char_height(ink)
        ops = operations(grey, ink, ch)
        for op, impl in ops.items():
            outs = {}
            for lib in libs:
                totals.setdefault(op, {}).setdefault(lib, 0.0)
                totals[op][lib] += ms(impl[lib], args.repeats)
                outs[lib] = impl[lib]()
            ref = outs["opencv"]
            for lib in (x for x in libs if x != "opencv"):
                got = outs[lib]
                if isinstance(ref, set):
                    same = got == ref
                elif op.startswith("rotation"):
                    same = float(np.mean(np.abs(np.asarray(got, np.float32) - ref) <= 1.0)) >= 0.99
                else:
                    same = bool(np.array_equal(np.asarray(got), np.asarray(ref)))
                agree[f"{op} / {lib}"] = agree.get(f"{op} / {lib}", True) and same
        find_ms.append(ms(lambda g=grey: L.find_lines(g), args.repeats))
        lang = "en" if n < 2 * args.pages else "zh"
        read_ms.append(ms(lambda g=grey, rd=readers[lang]: rd.read_page(g, layout="page"), 2))

    count = len(grey_pages)
    table = {op: {lib: round(v / count, 2) for lib, v in row.items()} for op, row in totals.items()}
    print(f"{count} pages, ms per page (median of {args.repeats} rounds, averaged over pages)\n")
    print("| operation | " + " | ".join(libs) + " |")
    print("|---|" + "---:|" * len(libs))
    for op, row in table.items():
        cells = []
        for lib in libs:
            mark = "" if lib == "opencv" else ("" if agree[f"{op} / {lib}"] else " (differs)")
            cells.append(f"{row[lib]:.2f}{mark}")
        print(f"| {op} | " + " | ".join(cells) + " |")
    whole = {
        "find_lines (OpenCV, all steps)": statistics.mean(find_ms),
        "page read (find_lines + recognizer)": statistics.mean(read_ms),
    }
    for k, v in whole.items():
        print(f"{k}: {v:.1f} ms per page")
    if args.json:
        import torch

        from benchmarks.timing import machine_info

        args.json.write_text(
            json.dumps(
                {
                    "meta": {
                        "pages": count,
                        "seed": args.seed,
                        "repeats": args.repeats,
                        "versions": {
                            "scipy": __import__("scipy").__version__ if ndi else None,
                            "opencv": cv2.__version__,
                            "scikit-image": __import__("skimage").__version__ if measure else None,
                        },
                        "machine": machine_info(torch.device("cpu")),
                    },
                    "ms_per_page": table,
                    "agree_with_opencv": agree,
                    "whole_ms_per_page": {k: round(v, 1) for k, v in whole.items()},
                },
                indent=1,
                default=str,
            )
            + "\n",
            encoding="utf-8",
        )


if __name__ == "__main__":
    main()
