#!/usr/bin/env bash
# Call j9: the fused decode attention loading a short chunk's whole tile before its prologue, against e979a2c, beside transformers' static cache; tests under validation.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV) + working tree (whole-tile preload)"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/j9.tar.xz" r && rm -rf "$R"' EXIT
for t in ops_nn_decode_qk qwen3; do
  echo "== test_$t (validation + sync validation)"
  VK_LAYER_PATH=$g/layer VKCOMPUTE_VALIDATION=1 VKCOMPUTE_VALIDATION_ERRORS=1 timeout 200 "$g/bin/test_$t" --test-threads=1 > "$R/test_$t.txt" 2>&1; echo "rc=$?"; grep -E "test result|panicked|FAILED" "$R/test_$t.txt" | head
done
q=/tmp/q3; rm -rf "$q"
echo "== qwen3_reference.py --size 4b (static-cache and eager timing)"
python3 "$g/qwen3_reference.py" --out "$q" --size 4b > "$R/q3_ref.txt" 2>&1; echo "rc=$?"; grep -E "\"(static|eager)_ms_per_token\"" "$R/q3_ref.txt"
cp "$q/reference_timing.json" "$R/" 2>/dev/null
echo "== qwen3 4b --reference (new)"
timeout 240 "$g/bin/qwen3" "$q" --reference "$q/reference.safetensors" > "$R/q3_check.txt" 2>&1; echo "rc=$?"; grep -E "worst" "$R/q3_check.txt"
for i in 1 2 3; do for b in base new; do
  bin="$g/bin/qwen3"; [ $b = base ] && bin="$g/bin/qwen3_base"
  echo "== qwen3 4b --decode 64, $b (round $i)"
  timeout 150 "$bin" "$q" --decode 64 > "$R/q3_b1_${b}_$i.txt" 2>&1; echo "rc=$?"; grep -E "^decode \(|pipelined" "$R/q3_b1_${b}_$i.txt" | cut -c1-120
done; done
for b in base new; do
  bin="$g/bin/qwen3"; [ $b = base ] && bin="$g/bin/qwen3_base"
  echo "== $b: --profile (attention per layer), after 600 tokens, B = 16"
  timeout 150 "$bin" "$q" --decode 16 --profile > "$R/q3_prof_$b.txt" 2>&1; echo "rc=$?"; grep -E "nn_attn_decode1_qk" "$R/q3_prof_$b.txt" | head -3
  timeout 150 "$bin" "$q" --prompt-len 600 --decode 32 > "$R/q3_p600_$b.txt" 2>&1; echo "rc=$?"; grep -E "^decode \(" "$R/q3_p600_$b.txt" | cut -c1-120
  timeout 150 "$bin" "$q" --batch 16 --decode 32 > "$R/q3_b16_$b.txt" 2>&1; echo "rc=$?"; grep -E "^decode \(" "$R/q3_b16_$b.txt" | cut -c1-120
done
