#!/usr/bin/env bash
# Runs on the GPU machine, from the project root, after `source .gpu/setup.sh`
# (packed by scripts/gpu_bundle.sh). Parts: report peers bench examples
# (the default), and on request multi startup pooled diag tests soak.
#
# At most 8 files come back from $OUT, so everything a part writes goes to
# a work folder, packed at the end into $OUT/results.tar.xz; beside it come
# $OUT/run.log (all that was printed), and, when made, $OUT/report.json and
# $OUT/cuda_reference.json.
set -uo pipefail
parts=${*:-report peers bench examples}
OUT=${OUT:-/tmp/vkcompute-out}
mkdir -p "$OUT"
W=$(mktemp -d)
g=$(cd "$(dirname "$0")" && pwd)
tar -C "$g" -xJf "$g/bundle.tar.xz"
export VK_LAYER_PATH="$g/layer"
export VKCOMPUTE_DEVICE="${VKCOMPUTE_DEVICE:-NVIDIA}"
has() { [[ " $parts " == *" $1 "* ]]; }
finish() {
  tar -C "$W" -cJf "$OUT/results.tar.xz" .
  [ -f "$W/report.json" ] && cp "$W/report.json" "$OUT/"
  [ -f "$W/cuda_reference.json" ] && cp "$W/cuda_reference.json" "$OUT/"
  rm -rf "$W"
}
trap finish EXIT

{
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv
if has report; then
  # The project's own CUDA reference (scripts/cuda_reference.py, with its
  # CUDA C++ part built by nvcc here), then the shared references in the
  # same run, and a comparison of the keys both measure.
  echo "== cuda_reference.py (the project's CUDA reference)"
  PYTHONUNBUFFERED=1 python3 "$g/cuda_reference.py" --out "$W/cuda_reference.json" \
    --persist "$g/cuda_reference_persist.cu" > "$W/cuda_reference.txt" 2>&1
  tail -5 "$W/cuda_reference.txt"
  echo "== shared references (cuda_anchor.py, cuda_ops_anchor.py, cuda_persist.cu)"
  [ -f "$g/cuda_anchor.py" ] && python3 "$g/cuda_anchor.py" > "$W/cuda_anchor.json" 2> "$W/cuda_anchor.err"
  [ -f "$g/cuda_ops_anchor.py" ] && python3 "$g/cuda_ops_anchor.py" > "$W/cuda_ops_anchor.json" 2> "$W/cuda_ops_anchor.err"
  if [ -f "$g/cuda_persist.cu" ] && command -v nvcc >/dev/null 2>&1; then
    nvcc -O3 -arch=native -o "$W/cuda_persist" "$g/cuda_persist.cu" && "$W/cuda_persist" > "$W/cuda_persist.jsonl"
    rm -f "$W/cuda_persist"
  fi
  python3 - "$W" <<'PY'
import json, os, sys
w = sys.argv[1]
def load(name):
    try:
        return json.load(open(os.path.join(w, name)))
    except Exception:
        return {}
ours = load("cuda_reference.json")
for ref in ("cuda_anchor.json", "cuda_ops_anchor.json"):
    theirs = load(ref)
    common = [k for k in theirs if k in ours and isinstance(theirs[k], (int, float)) and isinstance(ours[k], (int, float))]
    for k in common:
        print(f"cuda reference vs {ref}: {k}: {ours[k]:.4g} vs {theirs[k]:.4g} ({ours[k] / theirs[k]:.2f}x)" if theirs[k] else f"{k}: {ours[k]} vs 0")
PY
  cuda_json="$W/cuda_reference.json"
  [ -s "$cuda_json" ] || cuda_json="$W/cuda_anchor.json"
  echo "== gpu_report"
  "$g/bin/gpu_report" --cuda "$cuda_json" --json "$W/report.json" | tee "$W/report.txt"
fi
if has multi; then
  echo "== multi_gpu (every adapter, one thread each)"
  nvidia-smi -L
  "$g/bin/multi_gpu" 2>&1 | tee "$W/multi_gpu.txt"
fi
if has startup; then
  echo "== gpu_report --only startup"
  "$g/bin/gpu_report" --only startup --json "$W/startup.json" | tee "$W/startup.txt"
fi
if has pooled; then
  echo "== gpu_report --only dispatch with pooled descriptor sets (VKCOMPUTE_PUSH_DESCRIPTORS=0)"
  VKCOMPUTE_PUSH_DESCRIPTORS=0 "$g/bin/gpu_report" --only dispatch --json "$W/report_pooled.json" | tee "$W/report_pooled.txt"
fi
if has diag; then
  echo "== gpu_report --only diag (where record cost and round trip part from the floor)"
  "$g/bin/gpu_report" --only diag --json "$W/diag.json" | tee "$W/diag.txt"
fi
if has peers; then
  echo "== peers_report (wgpu, scry-gpu, each beside the floor in the same process)"
  "$g/bin/peers_report" --json "$W/peers.json" | tee "$W/peers.txt"
  [ -f "$W/report.json" ] && python3 "$g/perf_table.py" "$W/report.json" "$W/peers.json" | tee "$W/table.md"
fi
if has soak; then
  echo "== soak (${VKCOMPUTE_SOAK_BATCHES:-1000000} batches, validation on)"
  VKCOMPUTE_SOAK_BATCHES="${VKCOMPUTE_SOAK_BATCHES:-1000000}" \
    timeout "${VKCOMPUTE_SOAK_SECONDS:-300}" "$g/bin/test_soak" --nocapture 2>&1 | tail -15 | tee "$W/soak.txt"
fi
if has bench; then
  echo "== criterion: dispatch, floor, bandwidth, startup"
  : > "$W/bench.txt"
  for b in dispatch floor bandwidth startup; do
    (cd "$g" && "bin/$b" --bench 2>&1 | grep -E "^(adapter|dispatch|floor|bandwidth|startup)|time:|thrpt:" ) | tee -a "$W/bench.txt"
  done
fi
if has examples; then
  for ex in 01_saxpy 02_batch 03_async multi_gpu; do echo "== example $ex"; "$g/bin/$ex"; done 2>&1 | tee "$W/examples.txt"
  # Examples other work adds, when the bundle has them: each writes JSON.
  # Those that print ratios to PyTorch read cuda_ops_anchor.py's JSON of
  # this run (made by the report part; made here when it was not run).
  ops_anchor="$W/cuda_ops_anchor.json"
  if [ ! -s "$ops_anchor" ] && [ -f "$g/cuda_ops_anchor.py" ]; then
    python3 "$g/cuda_ops_anchor.py" > "$ops_anchor" 2> "$W/cuda_ops_anchor.err"
  fi
  # cuda_anchor.py of this run, for the graph example's CUDA lines.
  if [ ! -s "$W/cuda_anchor.json" ] && [ -f "$g/cuda_anchor.py" ]; then
    python3 "$g/cuda_anchor.py" > "$W/cuda_anchor.json" 2> "$W/cuda_anchor.err"
  fi
  # cuda_persist.cu of this run, for the megakernel examples' CUDA columns.
  if [ ! -s "$W/cuda_persist.jsonl" ] && [ -f "$g/cuda_persist.cu" ] && command -v nvcc >/dev/null 2>&1; then
    nvcc -O3 -arch=native -o "$W/cuda_persist" "$g/cuda_persist.cu" && "$W/cuda_persist" > "$W/cuda_persist.jsonl"
    rm -f "$W/cuda_persist"
  fi
  anchor_key() { python3 -c "import json,sys; print(json.load(open(sys.argv[1])).get(sys.argv[2], ''))" "$ops_anchor" "$1" 2>/dev/null; }
  for ex in streams graph 04_pipeline_overlap async_tokio transfer_bandwidth host_access ops matmul op_batch megakernel megakernel_resident; do
    [ -x "$g/bin/$ex" ] || continue
    args=()
    case "$ex" in
      ops) [ -s "$ops_anchor" ] && args=(--anchor "$ops_anchor") ;;
      megakernel|megakernel_resident) [ -s "$W/cuda_persist.jsonl" ] && args=(--cuda-persist "$W/cuda_persist.jsonl") ;;
      graph)
        [ -s "$W/cuda_persist.jsonl" ] && args+=(--cuda-persist "$W/cuda_persist.jsonl")
        [ -s "$W/cuda_anchor.json" ] && args+=(--cuda-anchor "$W/cuda_anchor.json") ;;
      transfer_bandwidth)
        h2d=$(anchor_key h2d_pageable_GBps); d2h=$(anchor_key d2h_pageable_GBps)
        [ -n "$h2d" ] && args+=(--torch-h2d "$h2d")
        [ -n "$d2h" ] && args+=(--torch-d2h "$d2h") ;;
    esac
    echo "== example $ex --json ${args[*]}"
    timeout 300 "$g/bin/$ex" --json "$W/$ex.json" "${args[@]}" 2>&1 | tee "$W/$ex.txt"
  done
fi
if has tests; then
  # Every skip of a path the adapter supports fails here
  # (tests/common/mod.rs: not_exercised), and every skip is listed.
  export VKCOMPUTE_REQUIRE_PATHS=1
  export VKCOMPUTE_SKIP_LOG="$W/skips.log"
  : > "$VKCOMPUTE_SKIP_LOG"
  for t in "$g"/bin/test_*; do
    name=$(basename "$t")
    echo "== $name (validation on)"
    "$t" --test-threads=1 > "$W/$name.log" 2>&1
    grep -E "test result|skipped:" "$W/$name.log"
    grep -q "test result: ok" "$W/$name.log" || sed -n '/^failures:/,$p' "$W/$name.log" | head -60
  done 2>&1 | tee "$W/tests.txt"
  echo "== $(wc -l < "$VKCOMPUTE_SKIP_LOG") checks skipped"
  sort "$VKCOMPUTE_SKIP_LOG" | uniq -c | sort -rn
fi
} 2>&1 | tee "$OUT/run.log"
