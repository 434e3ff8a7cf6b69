#!/usr/bin/env bash
# Call j3: does alternating pipelines cost the floor (stream_floor --pattern), and the FFN stack with one 1-row bf16 kernel for both layers (b) against the default (a).
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV) (+ b: sg32 for narrowed 1-row layers)"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/j3.tar.xz" r && rm -rf "$R"' EXIT
for k in 1 2 1 2; do
  echo "== stream_floor --pattern 99.6,49.8 --kernels $k"
  timeout 100 "$g/bin/stream_floor" --pattern 99.6,49.8 --kernels $k >> "$R/floor_pattern.txt" 2>&1; echo "rc=$?"
done
grep -E "pattern|place" "$R/floor_pattern.txt" | cut -c1-230
for i in 1 2; do for b in a b; do
  echo "== ffn_stack_$b (process $i) T=1,4 bf16"
  timeout 100 "$g/bin/ffn_stack_$b" --tokens 1,4 --dtypes bf16 > "$R/ffn_${b}_$i.txt" 2>&1; echo "rc=$?"; grep -E "median|Error|panic" "$R/ffn_${b}_$i.txt" | cut -c1-170
done; done
echo "== ffn_stack_b --profile T=1 bf16"
timeout 100 "$g/bin/ffn_stack_b" --tokens 1 --dtypes bf16 --profile > "$R/ffn_b_prof.txt" 2>&1; echo "rc=$?"; grep -E "median|µs" "$R/ffn_b_prof.txt" | cut -c1-170
