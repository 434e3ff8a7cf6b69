#!/usr/bin/env bash
# Call k7: decode attention's split aiming at two workgroups per compute
# unit (264 on 132 units; 512 before) against 4e2d361: Qwen3-4B decode
# after 3, 600 and 4000 prompt tokens (f32 and 16-bit caches) and at
# B = 4 / 16, profiled; the check against transformers; the attention,
# op batch and qwen3 tests under validation.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV) + working tree"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/k7.tar.xz" r && rm -rf "$R"' EXIT
q=/tmp/q3; rm -rf $q
python3 "$g/qwen3_reference.py" --out "$q" --size 4b --no-timing > "$R/q3_ref.txt" 2>&1; echo "ref rc=$?"
for t in ops_nn_attention ops_nn_decode_qk op_batch_nn qwen3 qwen3_f16_paths; do
  echo "== test_$t (validation + sync validation)"
  VK_LAYER_PATH=$g/layer VKCOMPUTE_VALIDATION=1 VKCOMPUTE_VALIDATION_ERRORS=1 timeout 200 "$g/bin/test_$t" --test-threads=1 --nocapture > "$R/test_$t.txt" 2>&1; echo "rc=$?"; grep -E "test result|panicked|FAILED" "$R/test_$t.txt" | head -5
done
echo "== qwen3 4b --reference (new)"
timeout 240 "$g/bin/qwen3" "$q" --reference "$q/reference.safetensors" > "$R/q3_check.txt" 2>&1; echo "rc=$?"; grep -E "worst" "$R/q3_check.txt" | cut -c1-220
for run in "4000" "600" "3" "4000 --kv-16" "3 --batch 4" "3 --batch 16"; do
  set -- $run; p=$1; shift
  for round in 1 2; do
    for b in qwen3 qwen3_base; do
      f="$R/p${p}$(echo "$*" | tr -d ' -')_${b}_$round.txt"
      echo "== $b prompt $p $* round $round"
      timeout 120 "$g/bin/$b" "$q" --prompt-len $p --decode 32 --profile "$@" > "$f" 2>&1; echo "rc=$?"
      grep -hE "^decode \(B|nn_attn_decode1.* \(" "$f" | sed 's/, [0-9.]* tokens\/s.*//; s/.*per launch/  attention per launch/' | cut -c1-120
    done
  done
done
