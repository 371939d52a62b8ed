"""Is one model's development figure really better than another's? A paired bootstrap
over the lines of each row that both runs of ``benchmarks/zh_sets.py --set dev --json``
read.

Two candidates read the same lines; their CERs differ by the lines each gets wrong. This
resamples the row's lines with replacement (the same draw for both models) many times and
reports the 95 % interval of ``CER(A) - CER(B)``: where it holds 0, the row cannot tell
the two apart, however the two figures look. It measures how much the row's choice of
lines moves the comparison, not how far one run's checkpoints wander (train and compare
several checkpoints for that: ``docs/training/crnn_zh.md``, stages 26 and 27).

    python benchmarks/compare_reads.py runs/a/dev.json runs/b/dev.json
    python benchmarks/compare_reads.py a.json b.json --rows dev-kai,dev-photo --resamples 20000

Both files must come from the same rows (the same ``--seed`` and ``--count``: their
labels digests agree). The real photographs' labels stay beside the data
(``../shared/data/zh_real_dev/gt.txt``) and the web lines' with their crops
(``data/zh_web/dev/gt.txt``), so ``dev-real`` and ``dev-web`` are compared only where
those files are present. Exit status 0, or 2 for files that cannot be compared, with the
reason.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.zh_sets import WEB_LINES, folder_pairs, real_dev_pairs  # noqa: E402
from benchmarks.zh_vs_peers import line_edits as peer_line_edits  # noqa: E402


def line_edits(labels: list[str], reads: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """:func:`benchmarks.zh_vs_peers.line_edits` as arrays: each line's edits and length."""
    edits, chars = peer_line_edits(labels, reads)
    return np.array(edits), np.array(chars)


def paired_bootstrap(
    edits_a: np.ndarray, edits_b: np.ndarray, chars: np.ndarray, resamples: int, seed: int
) -> tuple[float, float, float]:
    """``CER(A) - CER(B)`` on the row, and the 2.5th and 97.5th percentiles of it over
    ``resamples`` draws of the row's lines with replacement (one draw for both models)."""
    rng = np.random.default_rng(seed)
    n = len(chars)
    diff = float((edits_a.sum() - edits_b.sum()) / chars.sum())
    d, c = edits_a - edits_b, chars
    draws = np.empty(resamples)
    for lo in range(0, resamples, 1000):  # bounded memory: 1,000 draws of n indices at a time
        idx = rng.integers(0, n, size=(min(1000, resamples - lo), n))
        draws[lo : lo + len(idx)] = d[idx].sum(1) / c[idx].sum(1)
    low, high = np.percentile(draws, [2.5, 97.5])
    return diff, float(low), float(high)


def _rows(path: Path) -> tuple[dict, dict[str, list[str]], dict[str, list[str]]]:
    """(meta, row -> reads of the file's first reader, row -> labels); ValueError, with
    the reason, for a file that is not a development run of ``zh_sets.py --json``."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        meta, results = data["meta"], data["rows"]
    except (OSError, ValueError, KeyError) as e:
        raise ValueError(f"{path}: not a zh_sets.py --json file ({e})") from None
    if meta.get("set") != "dev":
        raise ValueError(f"{path}: a {meta.get('set')!r} set; only development runs keep reads")
    reads: dict[str, list[str]] = {}
    for r in results:
        reads.setdefault(r["row"], r["reads"])
    labels = dict(meta.get("labels", {}))
    if "dev-real" in reads and (pairs := real_dev_pairs()):
        labels["dev-real"] = [t for _, t in pairs]
    if "dev-web" in reads and (pairs := folder_pairs(WEB_LINES / "dev")):
        labels["dev-web"] = [t for _, t in pairs]
    return meta, reads, labels


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("a", type=Path, help="model A's zh_sets.py --set dev --json file")
    ap.add_argument("b", type=Path, help="model B's, from the same rows")
    ap.add_argument(
        "--rows", default="", help="comma-separated row names (default: every row both read)"
    )
    ap.add_argument("--resamples", type=int, default=10000, help="bootstrap draws (default 10000)")
    ap.add_argument("--seed", type=int, default=0, help="the bootstrap's seed (default 0)")
    args = ap.parse_args(argv)
    try:
        (meta_a, reads_a, labels), (meta_b, reads_b, _) = _rows(args.a), _rows(args.b)
    except ValueError as e:
        print(f"compare_reads: {e}", file=sys.stderr)
        return 2
    digests = meta_a.get("labels_digest"), meta_b.get("labels_digest")
    if digests[0] != digests[1]:
        print(
            f"compare_reads: the two files read different lines (labels digests "
            f"{digests[0]} and {digests[1]}): run both with the same --seed and --count",
            file=sys.stderr,
        )
        return 2
    wanted = [r for r in args.rows.split(",") if r] or [r for r in reads_a if r in reads_b]
    missing = [r for r in wanted if r not in reads_a or r not in reads_b or r not in labels]
    if missing:
        print(
            f"compare_reads: no reads or labels in both files for {', '.join(missing)}",
            file=sys.stderr,
        )
        return 2
    print(f"A: {args.a}\nB: {args.b}\n{args.resamples} paired resamples of each row's lines\n")
    head = f"{'row':<17} {'lines':>5} {'A':>7} {'B':>7} {'A - B':>7}"
    print(f"{head}   95 % interval      verdict")
    for row in wanted:
        ea, chars = line_edits(labels[row], reads_a[row])
        eb, _ = line_edits(labels[row], reads_b[row])
        diff, low, high = paired_bootstrap(ea, eb, chars, args.resamples, args.seed)
        verdict = "A better" if high < 0 else "B better" if low > 0 else "cannot tell"
        cer_a, cer_b = ea.sum() / chars.sum(), eb.sum() / chars.sum()
        print(
            f"{row:<17} {len(chars):>5} {cer_a:7.2%} {cer_b:7.2%} {100 * diff:+6.2f}   "
            f"[{100 * low:+5.2f}, {100 * high:+5.2f}] pts   {verdict}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
