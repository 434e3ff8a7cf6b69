#!/usr/bin/env bash
# Call k9: the final tree (3f14cb4) beside transformers in one call: the
# reference with its timings (eager, static cache, prefill of 512), the 4B
# check, decode at B = 1 (three rounds, one profiled), 4 and 16, after 600
# and 4000 tokens, prefill of 512; the attention, op batch and qwen3 tests
# under validation.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV)"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/k9.tar.xz" r && rm -rf "$R"' EXIT
q=/tmp/q3; rm -rf $q
echo "== qwen3_reference.py --size 4b (timings, static cache)"
python3 "$g/qwen3_reference.py" --out "$q" --size 4b > "$R/q3_ref.txt" 2>&1; echo "rc=$?"; cp "$q/reference_timing.json" "$R/" 2>/dev/null
grep -oE '"(static_ms_per_token|static_ms_per_token_min|static_ms_per_token_max|eager_ms_per_token|eager_prefill_ms|static_warm_s)": [0-9.]*' "$R/q3_ref.txt"
for t in ops_nn_attention ops_nn_decode_qk op_batch_nn qwen3 qwen3_f16_paths; do
  echo "== test_$t (validation + sync validation)"
  VK_LAYER_PATH=$g/layer VKCOMPUTE_VALIDATION=1 VKCOMPUTE_VALIDATION_ERRORS=1 timeout 200 "$g/bin/test_$t" --test-threads=1 --nocapture > "$R/test_$t.txt" 2>&1; echo "rc=$?"; grep -E "test result|panicked|FAILED" "$R/test_$t.txt" | head -5
done
echo "== qwen3 4b --reference"
timeout 240 "$g/bin/qwen3" "$q" --reference "$q/reference.safetensors" > "$R/q3_check.txt" 2>&1; echo "rc=$?"; grep -E "worst" "$R/q3_check.txt" | cut -c1-220
for run in "b1_1 --batch 1" "b1_2 --batch 1" "b1_prof --batch 1 --profile" "b4 --batch 4" "b16 --batch 16" "p600 --prompt-len 600" "p4000 --prompt-len 4000" "p512 --prompt-len 512"; do
  set -- $run; n=$1; shift
  echo "== qwen3 $*"
  timeout 150 "$g/bin/qwen3" "$q" --decode 32 "$@" > "$R/q3_$n.txt" 2>&1; echo "rc=$?"
  grep -hE "^decode \(|^decode pipelined|^prefill:|^  total|nn_attn_decode1.* \(" "$R/q3_$n.txt" | sed 's/, [0-9.]* tokens\/s, / ; /' | cut -c1-200
done
