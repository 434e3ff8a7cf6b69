#!/usr/bin/env bash
# Call j4: Qwen3-4B batched decode with the decode step's projections exact (f32 activations) against auto (ops::choose_linear's tensor-core streaming from 5 rows), and the qwen3 tests under validation.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV) + working tree (decode-matmul)"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/j4.tar.xz" r && rm -rf "$R"' EXIT
export VK_LAYER_PATH=$g/layer
echo "== test_qwen3 (validation + sync validation)"
VKCOMPUTE_VALIDATION=1 VKCOMPUTE_VALIDATION_ERRORS=1 timeout 300 "$g/bin/test_qwen3" --test-threads=1 --nocapture > "$R/test_qwen3.txt" 2>&1; echo "rc=$?"; grep -E "^test |test result|skipped|decode plans|sequence 0|panicked" "$R/test_qwen3.txt" | head -40
unset VK_LAYER_PATH
q=/tmp/q3; rm -rf "$q"
echo "== qwen3_reference.py --size 4b --no-timing"
python3 "$g/qwen3_reference.py" --out "$q" --size 4b --no-timing > "$R/q3_ref.txt" 2>&1; echo "rc=$?"; tail -3 "$R/q3_ref.txt"
echo "== qwen3 4b --reference"
timeout 240 "$g/bin/qwen3" "$q" --reference "$q/reference.safetensors" > "$R/q3_check.txt" 2>&1; echo "rc=$?"; grep -E "decode products|reference|worst|FAIL|PASS" "$R/q3_check.txt" | tail -6
for i in 1 2; do for b in 8 16; do for mm in exact auto; do
  echo "== qwen3 4b --batch $b --decode-matmul $mm (process $i)"
  timeout 150 "$g/bin/qwen3" "$q" --batch $b --decode 32 --decode-matmul $mm > "$R/q3_b${b}_${mm}_$i.txt" 2>&1; echo "rc=$?"; grep -E "decode products|decode \(|generate, sequence (0|15|7):" "$R/q3_b${b}_${mm}_$i.txt" | cut -c1-250
done; done; done
echo "== qwen3 4b --batch 16 --decode-matmul auto --profile"
timeout 150 "$g/bin/qwen3" "$q" --batch 16 --decode 16 --profile > "$R/q3_b16_auto_prof.txt" 2>&1; echo "rc=$?"; grep -A30 -i "profile" "$R/q3_b16_auto_prof.txt" | head -45
