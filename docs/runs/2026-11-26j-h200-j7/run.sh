#!/usr/bin/env bash
# Call j7: attention_decode_qkv (q, k, v read in place from the merged projection) in the qwen3 decode, against the base (4513a18) beside transformers' static cache; the tests under validation.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV) + working tree (attention_decode_qkv)"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/j7.tar.xz" r && rm -rf "$R"' EXIT
for t in ops_nn_decode_qk qwen3; do
  echo "== test_$t (validation + sync validation)"
  VK_LAYER_PATH=$g/layer VKCOMPUTE_VALIDATION=1 VKCOMPUTE_VALIDATION_ERRORS=1 timeout 200 "$g/bin/test_$t" --test-threads=1 > "$R/test_$t.txt" 2>&1; echo "rc=$?"; grep -E "test result|skipped|panicked|FAILED" "$R/test_$t.txt" | head
done
q=/tmp/q3; rm -rf "$q"
echo "== qwen3_reference.py --size 4b (transformers: f32 logits, bf16 eager and static-cache timing)"
python3 "$g/qwen3_reference.py" --out "$q" --size 4b > "$R/q3_ref.txt" 2>&1; echo "rc=$?"; tail -30 "$R/q3_ref.txt" | grep -E "ms_per_token|static|eager|prefill" | head -20
cp "$q/reference_timing.json" "$R/" 2>/dev/null
echo "== qwen3 4b --reference (new)"
timeout 240 "$g/bin/qwen3" "$q" --reference "$q/reference.safetensors" > "$R/q3_check.txt" 2>&1; echo "rc=$?"; grep -E "worst" "$R/q3_check.txt" | tail -2
for i in 1 2 3; do for b in base new; do
  bin="$g/bin/qwen3"; [ $b = base ] && bin="$g/bin/qwen3_base"
  echo "== qwen3 4b --decode 64, $b (round $i)"
  timeout 150 "$bin" "$q" --decode 64 > "$R/q3_b1_${b}_$i.txt" 2>&1; echo "rc=$?"; grep -E "^decode \(|pipelined|host" "$R/q3_b1_${b}_$i.txt" | cut -c1-200
done; done
for bs in 4 16; do for b in base new; do
  bin="$g/bin/qwen3"; [ $b = base ] && bin="$g/bin/qwen3_base"
  echo "== qwen3 4b --batch $bs, $b"
  timeout 150 "$bin" "$q" --batch $bs --decode 32 > "$R/q3_b${bs}_$b.txt" 2>&1; echo "rc=$?"; grep -E "^decode \(|generate, sequence 0:" "$R/q3_b${bs}_$b.txt" | cut -c1-200
done; done
echo "== qwen3 4b --batch 16 --profile (new)"
timeout 150 "$g/bin/qwen3" "$q" --batch 16 --decode 16 --profile > "$R/q3_b16_prof.txt" 2>&1; echo "rc=$?"; grep -A14 "profile of one decode step" "$R/q3_b16_prof.txt" | head -16
