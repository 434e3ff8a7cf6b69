#!/usr/bin/env bash
# Runs on the GPU machine, from the project root, after `source .gpu/setup.sh`
# (packed by scripts/gpu_bundle.sh). Parts: report peers bench examples
# (the default), and on request multi startup pooled diag tests soak.
# Writes logs and JSON under $OUT.
set -uo pipefail
parts=${*:-report peers bench examples}
OUT=${OUT:-/tmp/vkcompute-out}
mkdir -p "$OUT"
g=$(cd "$(dirname "$0")" && pwd)
tar -C "$g" -xJf "$g/bundle.tar.xz"
export VK_LAYER_PATH="$g/layer"
export VKCOMPUTE_DEVICE="${VKCOMPUTE_DEVICE:-NVIDIA}"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv
has() { [[ " $parts " == *" $1 "* ]]; }
if has report; then
  # gpu_report's startup rows time fresh processes of itself with an empty
  # and then a filled cache directory of their own.
  echo "== cuda_anchor.py"
  PYTHONUNBUFFERED=1 python3 "$g/cuda_anchor.py" > "$OUT/cuda.json"; cat "$OUT/cuda.json"
  echo "== gpu_report"
  "$g/bin/gpu_report" --cuda "$OUT/cuda.json" --json "$OUT/report.json" | tee "$OUT/report.txt"
fi
if has multi; then
  echo "== multi_gpu (every adapter, one thread each)"
  nvidia-smi -L
  "$g/bin/multi_gpu" 2>&1 | tee "$OUT/multi_gpu.txt"
fi
if has startup; then
  echo "== gpu_report --only startup"
  "$g/bin/gpu_report" --only startup --json "$OUT/startup.json" | tee "$OUT/startup.txt"
fi
if has pooled; then
  echo "== gpu_report --only dispatch with pooled descriptor sets (VKCOMPUTE_PUSH_DESCRIPTORS=0)"
  VKCOMPUTE_PUSH_DESCRIPTORS=0 "$g/bin/gpu_report" --only dispatch --cuda "$OUT/cuda.json" --json "$OUT/report_pooled.json" | tee "$OUT/report_pooled.txt"
fi
if has diag; then
  echo "== gpu_report --only diag (where record cost and round trip part from the floor)"
  "$g/bin/gpu_report" --only diag --json "$OUT/diag.json" | tee "$OUT/diag.txt"
fi
if has peers; then
  echo "== peers_report (wgpu, scry-gpu)"
  "$g/bin/peers_report" --json "$OUT/peers.json" | tee "$OUT/peers.txt"
  [ -f "$OUT/report.json" ] && python3 "$g/perf_table.py" "$OUT/report.json" "$OUT/peers.json" | tee "$OUT/table.md"
fi
if has soak; then
  echo "== soak (${VKCOMPUTE_SOAK_BATCHES:-1000000} batches, validation on)"
  VKCOMPUTE_SOAK_BATCHES="${VKCOMPUTE_SOAK_BATCHES:-1000000}" \
    timeout "${VKCOMPUTE_SOAK_SECONDS:-300}" "$g/bin/test_soak" --nocapture 2>&1 | tail -15 | tee "$OUT/soak.txt"
fi
if has bench; then
  echo "== criterion: dispatch, floor, bandwidth, startup"
  : > "$OUT/bench.txt"
  for b in dispatch floor bandwidth startup; do
    (cd "$g" && "bin/$b" --bench 2>&1 | grep -E "^(adapter|dispatch|floor|bandwidth|startup)|time:|thrpt:" ) | tee -a "$OUT/bench.txt"
  done
fi
if has examples; then
  for ex in saxpy batch async multi_gpu; do echo "== example $ex"; "$g/bin/$ex"; done 2>&1 | tee "$OUT/examples.txt"
fi
if has tests; then
  for t in "$g"/bin/test_*; do
    name=$(basename "$t")
    echo "== $name (validation on)"
    "$t" --test-threads=1 > "$OUT/$name.log" 2>&1
    grep -E "test result|skipped" "$OUT/$name.log"
    grep -q "test result: ok" "$OUT/$name.log" || sed -n '/^failures:/,$p' "$OUT/$name.log" | head -60
  done 2>&1 | tee "$OUT/tests.txt"
fi
