"""Choose a detector's post-processing on its validation images (a development set):
the binarisation threshold, the box score floor and the unclip ratio, by ICDAR 2015
hmean. The probability maps are computed once; every setting is scored on them.

    python benchmarks/det_tune.py runs/det_zh_cpu/best.pt --json docs/bench/det_tune.json

The images: the validation split ``configs/det_zh_cpu.yaml`` trains with (10 % of
``../shared/data/zh_web_train`` by image name, seed 42).
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.det_vs_peers import validation_images  # noqa: E402
from crnn.data.detection import read_rgb  # noqa: E402
from crnn.detect.detector import prepare, read_scale  # noqa: E402
from crnn.detect.metrics import DetCounts, match_image  # noqa: E402
from crnn.detect.postprocess import DetOptions, boxes_from_map  # noqa: E402
from crnn.detect.runtime import load_detector  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("detector")
    ap.add_argument(
        "--enlarge",
        type=float,
        default=1.0,
        help="enlarge a smaller image towards the detector's limit_side by at most this "
        "(1, the default: never, as training's validation did before det.enlarge; the "
        "reader's first look enlarges by up to 4)",
    )
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    det = load_detector(args.detector)
    maps = []
    for item in validation_images(0):
        image = read_rgb(str(item.image))
        scale = read_scale(*image.shape[:2], det.limit_side, args.enlarge)
        p = prepare(image, det.limit_side, scale)
        prob = det.prob_map(p.batch)[0, 0][: p.size[1], : p.size[0]]
        maps.append((item, prob, p))
    rows = []
    for th, bt, ur in itertools.product((0.2, 0.3, 0.4), (0.3, 0.4, 0.5, 0.6), (1.5, 1.8, 2.1)):
        c = DetCounts()
        opts = DetOptions(thresh=th, box_thresh=bt, unclip_ratio=ur)
        for item, prob, p in maps:
            (w, h), (nw, nh) = p.original, p.size
            found = boxes_from_map(prob, (w / nw, h / nh), (w, h), opts)
            c.add(match_image([d.quad for d in found], item.quads, item.ignore))
        rows.append({"thresh": th, "box_thresh": bt, "unclip_ratio": ur, **c.compute()})
    rows.sort(key=lambda r: -r["hmean"])
    for r in rows[:8]:
        print(
            f"thresh {r['thresh']} box {r['box_thresh']} unclip {r['unclip_ratio']}: "
            f"P {r['precision']:.3f} R {r['recall']:.3f} hmean {r['hmean']:.3f}"
        )
    if args.json:
        out = {"images": len(maps), "enlarge": args.enlarge, "rows": rows}
        args.json.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
