#!/usr/bin/env bash
# Call k5: prefill attention with its registers in registers (loops of
# constant counts, written-out slots) against a4be370: pipeline statistics,
# Qwen3-4B prefill of 512 and 4000 tokens beside transformers eager's 512,
# the check against transformers, the prefill tests under validation.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV) + working tree"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/k5.tar.xz" r && rm -rf "$R"' EXIT
q=/tmp/q3; rm -rf $q
echo "== qwen3_reference.py --size 4b --no-static (eager timing)"
python3 "$g/qwen3_reference.py" --out "$q" --size 4b --no-static > "$R/q3_ref.txt" 2>&1; echo "rc=$?"; grep -o '"eager_prefill[a-z_]*": [0-9.]*' "$R/q3_ref.txt" | head -3
for t in ops_nn_prefill op_batch_nn qwen3; do
  echo "== test_$t (validation + sync validation)"
  VK_LAYER_PATH=$g/layer VKCOMPUTE_VALIDATION=1 VKCOMPUTE_VALIDATION_ERRORS=1 timeout 200 "$g/bin/test_$t" --test-threads=1 --nocapture > "$R/test_$t.txt" 2>&1; echo "rc=$?"; grep -E "test result|panicked|FAILED" "$R/test_$t.txt" | head -5
done
echo "== attn_probe --statistics"
timeout 120 "$g/bin/attn_probe" --statistics > "$R/attn_probe.txt" 2>&1; echo "rc=$?"; grep -v "^statistics" "$R/attn_probe.txt" | tail -3; grep "^statistics nn_attn_prefill\|^statistics nn_attn_decode1_qk " "$R/attn_probe.txt" | cut -c1-300
echo "== qwen3 4b --reference (new)"
timeout 240 "$g/bin/qwen3" "$q" --reference "$q/reference.safetensors" > "$R/q3_check.txt" 2>&1; echo "rc=$?"; grep -E "worst" "$R/q3_check.txt" | cut -c1-220
for p in 512 4000; do
  for round in 1 2; do
    for b in qwen3 qwen3_base; do
      f="$R/p${p}_${b}_$round.txt"
      echo "== $b prompt $p round $round"
      timeout 120 "$g/bin/$b" "$q" --prompt-len $p --decode 8 --profile > "$f" 2>&1; echo "rc=$?"
      grep -hE "^prefill:|vkcompute nn_attn_prefill " "$f" | cut -c1-200
    done
  done
done
