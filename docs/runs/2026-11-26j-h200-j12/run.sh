#!/usr/bin/env bash
# Call j12: the review mends (309b3fe) on the GPU: the qwen3 and decode-attention tests under validation, qwen3 decode plans, stream_floor's checks of every pipeline.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV)"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/j12.tar.xz" r && rm -rf "$R"' EXIT
for t in qwen3 qwen3_f16_paths ops_nn_decode_qk; do
  echo "== test_$t (validation + sync validation)"
  VK_LAYER_PATH=$g/layer VKCOMPUTE_VALIDATION=1 VKCOMPUTE_VALIDATION_ERRORS=1 timeout 200 "$g/bin/test_$t" --test-threads=1 --nocapture > "$R/test_$t.txt" 2>&1; echo "rc=$?"; grep -E "test result|panicked|FAILED|decode plans" "$R/test_$t.txt" | head
done
echo "== stream_floor --pattern 99.6,49.8 --kernels 2"
timeout 100 "$g/bin/stream_floor" --pattern 99.6,49.8 --kernels 2 > "$R/floor.txt" 2>&1; echo "rc=$?"; grep -E "^pattern|place" "$R/floor.txt" | cut -c1-200
q=/tmp/q3; rm -rf "$q"
python3 "$g/qwen3_reference.py" --out "$q" --size 4b --no-timing > "$R/q3_ref.txt" 2>&1; echo "ref rc=$?"
for b in 1 16; do
  echo "== qwen3 4b --batch $b"
  timeout 150 "$g/bin/qwen3" "$q" --batch $b --decode 32 > "$R/q3_b$b.txt" 2>&1; echo "rc=$?"; grep -E "decode products|^decode \(" "$R/q3_b$b.txt" | cut -c1-220
done
timeout 240 "$g/bin/qwen3" "$q" --reference "$q/reference.safetensors" > "$R/q3_check.txt" 2>&1; echo "check rc=$?"; grep worst "$R/q3_check.txt"
