#!/usr/bin/env bash
# Runs on the GPU machine, from the project root, after `source .gpu/setup.sh`
# (packed by scripts/gpu_bundle.sh). Parts: report bench tests examples
# (default: all). Writes logs and JSON under $OUT.
set -uo pipefail
parts=${*:-report bench tests examples}
OUT=${OUT:-/tmp/vkcompute-out}
mkdir -p "$OUT"
g=$(cd "$(dirname "$0")" && pwd)
tar -C "$g" -xJf "$g/bundle.tar.xz"
export VK_LAYER_PATH="$g/layer"
export VKCOMPUTE_DEVICE="${VKCOMPUTE_DEVICE:-NVIDIA}"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv
has() { [[ " $parts " == *" $1 "* ]]; }
if has report; then
  echo "== cuda_anchor.py"
  PYTHONUNBUFFERED=1 python3 "$g/cuda_anchor.py" > "$OUT/cuda.json"; cat "$OUT/cuda.json"
  echo "== gpu_report"
  "$g/bin/gpu_report" --cuda "$OUT/cuda.json" --json "$OUT/report.json" | tee "$OUT/report.txt"
fi
if has bench; then
  echo "== criterion: dispatch, floor"
  (cd "$g" && bin/dispatch --bench 2>&1 | grep -E "^(dispatch|floor)|time:" ) | tee "$OUT/bench.txt"
  (cd "$g" && bin/floor --bench 2>&1 | grep -E "^(dispatch|floor)|time:" ) | tee -a "$OUT/bench.txt"
fi
if has examples; then
  for ex in saxpy batch async; do echo "== example $ex"; "$g/bin/$ex"; done 2>&1 | tee "$OUT/examples.txt"
fi
if has tests; then
  for t in "$g"/bin/test_*; do
    name=$(basename "$t")
    echo "== $name (validation on)"
    "$t" --test-threads=4 > "$OUT/$name.log" 2>&1
    grep -E "test result|skipped" "$OUT/$name.log"
    grep -q "test result: ok" "$OUT/$name.log" || sed -n '/^failures:/,$p' "$OUT/$name.log" | head -60
  done 2>&1 | tee "$OUT/tests.txt"
fi
