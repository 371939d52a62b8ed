#!/usr/bin/env bash
# Train the English model end to end, in chunks that each fit a short allocation.
#
#   tools/recipe_en.sh [CONFIG] [-- extra train.py flags, e.g. --gpus 0,1]
#
# 1. writes the real word crops as LMDBs, holding out 10% of each training set
#    (a stable split) for validation, plus the IC13-857 and SVT-647 test sets;
# 2. trains with CONFIG (default configs/crnn_en.yaml) in chunks of CHUNK_MIN
#    minutes (default 9): each chunk saves and stops, the next resumes exactly
#    (same step, learning rate and data order), so the run may be spread over
#    several allocations; run the script again to continue after an interruption;
# 3. evaluates the best checkpoint on IC13-857 and SVT-647 (written to eval.json);
# 4. makes the fp16 release file in the run directory.
#
# Environment: REAL (folder with iiit5k_train, ic15_train, ic13_857, svt_647 as
# images/ + gt.txt; default ../shared/data/real), PY (python; default python3),
# CHUNK_MIN (default 9), DATA (default data/lmdb).
set -euo pipefail
cd "$(dirname "$0")/.."

CONFIG=${1:-configs/crnn_en.yaml}
shift || true
[ "${1:-}" = "--" ] && shift
REAL=${REAL:-../shared/data/real}
PY=${PY:-python3}
CHUNK_MIN=${CHUNK_MIN:-9}
DATA=${DATA:-data/lmdb}

run_dir=$($PY -c "from crnn.config import load_config; print(load_config('$CONFIG').train.output_dir)")

echo "== data: $REAL -> $DATA"
for d in iiit5k_train ic15_train; do
  if [ ! -f "$DATA/en/$d/data.mdb" ]; then
    $PY tools/create_lmdb.py --root "$REAL/$d" --out "$DATA/en/$d" \
      --val-fraction 0.1 --val-out "$DATA/en/val_$d"
  fi
done
for d in ic13_857 svt_647; do
  [ -f "$DATA/$d/data.mdb" ] || $PY tools/create_lmdb.py --root "$REAL/$d" --out "$DATA/$d"
done

finished() {
  [ -f "$run_dir/last.pt" ] || return 1
  $PY - "$run_dir/last.pt" <<'EOF'
import sys
from crnn.checkpoint import load_checkpoint
ckpt = load_checkpoint(sys.argv[1])
sys.exit(0 if ckpt["step"] >= ckpt["config"]["train"]["max_steps"] else 1)
EOF
}

echo "== train: $CONFIG -> $run_dir, chunks of $CHUNK_MIN min"
until finished; do
  if [ -f "$run_dir/last.pt" ]; then
    $PY tools/train.py --resume "$run_dir" --time-limit "$CHUNK_MIN" "$@"
  else
    $PY tools/train.py --config "$CONFIG" --time-limit "$CHUNK_MIN" "$@"
  fi
done

echo "== evaluate: $run_dir/best.pt"
$PY tools/eval.py "$run_dir/best.pt" "$DATA/ic13_857" "$DATA/svt_647" --json "$run_dir/eval.json"

echo "== release"
$PY tools/convert_checkpoint.py release "$run_dir/best.pt" -o "$run_dir/release/crnn_en.pt" --fp16 --overwrite
