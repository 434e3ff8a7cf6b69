#!/usr/bin/env bash
# Call k10: the series' decode attention on an H100: 3f14cb4 against
# bba3223 (before both changes), Qwen3-4B decode after 4000, 1500, 600 and
# 3 prompt tokens, profiled, two rounds; pipeline statistics; the check
# against transformers; the attention and qwen3 tests under validation.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV)"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/k10.tar.xz" r && rm -rf "$R"' EXIT
q=/tmp/q3; rm -rf $q
python3 "$g/qwen3_reference.py" --out "$q" --size 4b --no-timing > "$R/q3_ref.txt" 2>&1; echo "ref rc=$?"
for t in ops_nn_attention ops_nn_decode_qk qwen3; do
  echo "== test_$t (validation + sync validation)"
  VK_LAYER_PATH=$g/layer VKCOMPUTE_VALIDATION=1 VKCOMPUTE_VALIDATION_ERRORS=1 timeout 200 "$g/bin/test_$t" --test-threads=1 --nocapture > "$R/test_$t.txt" 2>&1; echo "rc=$?"; grep -E "test result|panicked|FAILED" "$R/test_$t.txt" | head -5
done
echo "== attn_probe --statistics"
timeout 120 "$g/bin/attn_probe" --statistics > "$R/attn_probe.txt" 2>&1; echo "rc=$?"; grep -v "^statistics" "$R/attn_probe.txt" | tail -3; grep "^statistics nn_attn_decode1_qk " "$R/attn_probe.txt" | sed 's/Binary Size=[0-9]*, Stack Size=0, //' | cut -c1-200
echo "== qwen3 4b --reference"
timeout 240 "$g/bin/qwen3" "$q" --reference "$q/reference.safetensors" > "$R/q3_check.txt" 2>&1; echo "rc=$?"; grep -E "worst" "$R/q3_check.txt" | cut -c1-220
for p in 4000 1500 600 3; do
  for round in 1 2; do
    for b in qwen3 qwen3_base; do
      f="$R/p${p}_${b}_$round.txt"
      echo "== $b prompt $p round $round"
      timeout 120 "$g/bin/$b" "$q" --prompt-len $p --decode 32 --profile > "$f" 2>&1; echo "rc=$?"
      grep -hE "^decode \(B|nn_attn_decode1.* \(" "$f" | sed 's/, [0-9.]* tokens\/s.*//; s/.*per launch/  attention per launch/' | cut -c1-120
    done
  done
done
