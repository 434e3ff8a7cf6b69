#!/usr/bin/env bash
# Call k12: the qwen3 example's 16-bit cache through the one-dispatch q/k
# side and attention (nn::attention_decode_qkv, then the output widened)
# against 08fcfb7 (the two ops and two conversions): Qwen3-4B decode with
# --kv-16 after 3, 600 and 4000 prompt tokens, profiled, two rounds; the
# qwen3 tests under validation.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV) + working tree"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/k12.tar.xz" r && rm -rf "$R"' EXIT
q=/tmp/q3; rm -rf $q
python3 "$g/qwen3_reference.py" --out "$q" --size 4b --no-timing > "$R/q3_ref.txt" 2>&1; echo "ref rc=$?"
for t in qwen3 qwen3_f16_paths; do
  echo "== test_$t (validation + sync validation)"
  VK_LAYER_PATH=$g/layer VKCOMPUTE_VALIDATION=1 VKCOMPUTE_VALIDATION_ERRORS=1 timeout 200 "$g/bin/test_$t" --test-threads=1 --nocapture > "$R/test_$t.txt" 2>&1; echo "rc=$?"; grep -E "test result|panicked|FAILED|skipped" "$R/test_$t.txt" | head -5
done
for p in 3 600 4000; do
  for round in 1 2; do
    for b in qwen3 qwen3_head; do
      f="$R/p${p}_${b}_$round.txt"
      echo "== $b --kv-16 prompt $p round $round"
      timeout 120 "$g/bin/$b" "$q" --kv-16 --prompt-len $p --decode 32 --profile > "$f" 2>&1; echo "rc=$?"
      grep -hE "^decode \(B|^sequence 0" "$f" | sed 's/, [0-9.]* tokens\/s.*//' | cut -c1-150
      grep -hE "^  (nn_attn|cast|nn_qk)[a-z0-9_]* \(" "$f" | sed 's/ (.*)//; s/; per launch.*median/ median/' | cut -c1-120
    done
  done
done
