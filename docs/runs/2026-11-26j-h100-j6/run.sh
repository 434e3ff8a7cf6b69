#!/usr/bin/env bash
# Call j6 (H100): the FFN table beside PyTorch, the stack's launch floor, and Qwen3-4B batched decode exact against auto; the qwen3 tests under validation.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV)"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/j6.tar.xz" r && rm -rf "$R"' EXIT
echo "== test_qwen3 (validation + sync validation)"
VK_LAYER_PATH=$g/layer VKCOMPUTE_VALIDATION=1 VKCOMPUTE_VALIDATION_ERRORS=1 timeout 200 "$g/bin/test_qwen3" --test-threads=1 --nocapture > "$R/test_qwen3.txt" 2>&1; echo "rc=$?"; grep -E "test result|skipped|decode plans|panicked" "$R/test_qwen3.txt" | head
echo "== ffn_reference.py"
python3 "$g/ffn_reference.py" --tokens 1,4,64 --out "$R/torch.json" > "$R/torch.txt" 2>&1; echo "rc=$?"; tail -8 "$R/torch.txt"
echo "== ffn_stack T=1,4,64 f32,bf16"
timeout 150 "$g/bin/ffn_stack" --tokens 1,4,64 --torch "$R/torch.json" > "$R/table.txt" 2>&1; echo "rc=$?"; grep -E "median|Error|panic|copy band" "$R/table.txt" | cut -c1-200
for t in 2 5.4; do
  echo "== stream_floor --pattern 99.6,49.8 --total-gb $t"
  timeout 100 "$g/bin/stream_floor" --pattern 99.6,49.8 --total-gb $t > "$R/floor_$t.txt" 2>&1; echo "rc=$?"; grep -E "pattern|place|copy" "$R/floor_$t.txt" | cut -c1-230
done
q=/tmp/q3; rm -rf "$q"
echo "== qwen3_reference.py --size 4b --no-timing"
python3 "$g/qwen3_reference.py" --out "$q" --size 4b --no-timing > "$R/q3_ref.txt" 2>&1; echo "rc=$?"; tail -2 "$R/q3_ref.txt"
echo "== qwen3 4b --reference"
timeout 240 "$g/bin/qwen3" "$q" --reference "$q/reference.safetensors" > "$R/q3_check.txt" 2>&1; echo "rc=$?"; grep -E "worst" "$R/q3_check.txt" | tail -2
for b in 1 16; do for mm in exact auto; do
  echo "== qwen3 4b --batch $b --decode-matmul $mm"
  timeout 150 "$g/bin/qwen3" "$q" --batch $b --decode 32 --decode-matmul $mm > "$R/q3_b${b}_${mm}.txt" 2>&1; echo "rc=$?"; grep -E "decode products|decode \(|generate, sequence (0|15):" "$R/q3_b${b}_${mm}.txt" | cut -c1-200
done; done
