#!/usr/bin/env bash
# Call u10: decode attention's chunk 0 issues its prologue's loads and
# its first key and value items before its loads of the lengths and
# positions return (u9: those inputs cost 1.6 µs a layer after a 4.6 µs
# start). The op tests under validation; the 4B check; Qwen3-4B decode at
# B = 1 against the tree before (qwen3_base), three alternating rounds,
# after 600 and 4000 tokens, at B = 4; profiles.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV)"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/u10.tar.xz" r && rm -rf "$R"' EXIT
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
for t in ops_nn_decode_qk ops_nn_attention qwen3; do
  VK_LAYER_PATH=$g/layer VKCOMPUTE_VALIDATION=1 VKCOMPUTE_VALIDATION_ERRORS=1 timeout 200 "$g/bin/test_$t" --test-threads=1 > "$R/test_$t.txt" 2>&1; echo "$t rc=$?"
  grep -E "test result|panicked|FAILED" "$R/test_$t.txt" | head -4 | cut -c1-200
done
q=/tmp/q3; rm -rf $q
python3 "$g/qwen3_reference.py" --out "$q" --size 4b --no-static --no-timing > "$R/q3_ref.txt" 2>&1; echo "reference rc=$? at $(el) s"
timeout 240 "$g/bin/qwen3" "$q" --reference "$q/reference.safetensors" > "$R/q3_check.txt" 2>&1; echo "check rc=$?"; grep -E "worst" "$R/q3_check.txt" | cut -c1-200
for round in 1 2 3; do
  for b in qwen3_base qwen3; do
    f="$R/${b}_$round.txt"
    timeout 100 "$g/bin/$b" "$q" --decode 32 > "$f" 2>&1; echo "$b round $round rc=$?"
    grep -hE "^decode \(B|^decode pipelined" "$f" | sed 's/, [0-9.]* tokens\/s.*//' | cut -c1-120
  done
done
for n in 600 4000; do
  for b in qwen3_base qwen3; do
    f="$R/${b}_p$n.txt"
    timeout 150 "$g/bin/$b" "$q" --prompt-len $n --decode 16 > "$f" 2>&1; echo "$b after $n rc=$?"
    grep -hE "^decode \(B|^decode pipelined" "$f" | sed 's/, [0-9.]* tokens\/s.*//' | cut -c1-120
  done
done
for b in qwen3_base qwen3; do
  timeout 100 "$g/bin/$b" "$q" --decode 16 --batch 4 > "$R/${b}_b4.txt" 2>&1; echo "$b B=4 rc=$?"
  grep -hE "^decode \(B|^decode pipelined" "$R/${b}_b4.txt" | sed 's/, [0-9.]* tokens\/s.*//' | cut -c1-120
  timeout 100 "$g/bin/$b" "$q" --decode 16 --profile --statistics > "$R/${b}_prof.txt" 2>&1; echo "$b profile rc=$?"
  grep -E "^  nn_attn_decode1_qk \(" "$R/${b}_prof.txt" | sed 's/  */ /g' | cut -c1-160
  grep -E "^statistics nn_attn_decode1_qk \[\(0, 1\)\]" "$R/${b}_prof.txt" | cut -c1-120
done
echo "done at $(el) s"
