#!/usr/bin/env bash
# Call j8: the final tree (e979a2c): tests under validation, the 4B check against transformers, decode at B = 1, 4, 16 (auto and exact).
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV)"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/j8.tar.xz" r && rm -rf "$R"' EXIT
for t in ops_nn_decode_qk qwen3 ops_linear_stream; do
  echo "== test_$t (validation + sync validation)"
  VK_LAYER_PATH=$g/layer VKCOMPUTE_VALIDATION=1 VKCOMPUTE_VALIDATION_ERRORS=1 timeout 200 "$g/bin/test_$t" --test-threads=1 --nocapture > "$R/test_$t.txt" 2>&1; echo "rc=$?"; grep -E "test result|skipped|panicked|FAILED|decode plans" "$R/test_$t.txt" | head
done
q=/tmp/q3; rm -rf "$q"
echo "== qwen3_reference.py --size 4b --no-timing"
python3 "$g/qwen3_reference.py" --out "$q" --size 4b --no-timing > "$R/q3_ref.txt" 2>&1; echo "rc=$?"
echo "== qwen3 4b --reference"
timeout 240 "$g/bin/qwen3" "$q" --reference "$q/reference.safetensors" > "$R/q3_check.txt" 2>&1; echo "rc=$?"; grep -E "decode products|worst" "$R/q3_check.txt" | cut -c1-220
for run in "1 auto" "1 auto" "4 auto" "16 auto" "16 exact"; do
  set -- $run
  echo "== qwen3 4b --batch $1 --decode-matmul $2"
  timeout 150 "$g/bin/qwen3" "$q" --batch $1 --decode 32 --decode-matmul $2 > "$R/q3_b$1_$2_$RANDOM.txt" 2>&1; echo "rc=$?"
  grep -hE "decode products|^decode \(|generate, sequence 0:" $(ls -t "$R"/q3_b$1_$2_*.txt | head -1) | cut -c1-220
done
