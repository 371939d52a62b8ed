"""English printed lines in faces no line model trained on, read by several line models
on the same images: CER per face, lines read exactly, and each model's most frequent
edits (label character -> read character; '' is nothing), to see what one model trades
against another.

    python benchmarks/line_confusions.py --model line --model /path/crnn_line_en-50d4f2b4.onnx

Lines: 2-9 word pieces of ``benchmarks/en_sentences.txt`` (written for the benchmarks,
never trained on), printed as a scan or a phone photo of a page gives them
(``benchmarks/zh_vs_peers.render_print``) in the page benchmark's held-out faces, EB
Garamond and Carlito (``fonts-ebgaramond``, ``fonts-crosextra-carlito``), alternately.
"""

from __future__ import annotations

import argparse
import collections
import random
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rapidfuzz.distance import Levenshtein  # noqa: E402

from benchmarks import pages_vs_peers as pb  # noqa: E402
from benchmarks import zh_vs_peers as zb  # noqa: E402
from crnn.data.synth.fontsets import locate  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--model", action="append", help="'line' (bundled) or a checkpoint/.onnx; repeatable"
    )
    ap.add_argument("--count", type=int, default=400)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    from crnn.reading.recognizer import Recognizer

    faces = [locate(f) for f in pb.EN_FACES]
    if None in faces:
        sys.exit("fonts missing: apt-get install fonts-ebgaramond fonts-crosextra-carlito")
    r = random.Random(args.seed)
    sents, labels = pb.sentences("en"), []
    while len(labels) < args.count:
        words = r.choice(sents).split()
        i = r.randrange(len(words))
        labels.append(" ".join(words[i : i + r.randint(2, 9)]))
    imgs = [
        zb.render_print(t, faces[i % len(faces)], r).convert("RGB") for i, t in enumerate(labels)
    ]  # type: ignore[arg-type]
    for spec in args.model or ["line"]:
        rec = Recognizer.bundled("line") if spec == "line" else Recognizer.from_checkpoint(spec)
        reads = [" ".join(p.text.split()) for p in rec.predict(imgs)]
        for k, face in enumerate(pb.EN_FACES):
            idx = range(k, len(labels), len(faces))
            edits = sum(Levenshtein.distance(reads[i], labels[i]) for i in idx)
            chars = sum(len(labels[i]) for i in idx)
            exact = sum(reads[i] == labels[i] for i in idx)
            print(
                f"{spec:<40} {face.file:<26} CER {100 * edits / chars:5.2f} %  exact "
                f"{exact}/{len(idx)}"
            )
        edits_by_kind: collections.Counter[str] = collections.Counter()
        for read, label in zip(reads, labels):
            for op in Levenshtein.editops(label, read):
                a = label[op.src_pos] if op.tag != "insert" else ""
                b = read[op.dest_pos] if op.tag != "delete" else ""
                edits_by_kind[f"{a!r}->{b!r}"] += 1
        print(
            "   most frequent edits:",
            ", ".join(f"{k} {n}" for k, n in edits_by_kind.most_common(10)),
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
