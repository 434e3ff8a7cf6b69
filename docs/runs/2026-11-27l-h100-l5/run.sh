#!/usr/bin/env bash
# Call l5: decode attention loading each tile's first V step before the
# tile's scores (groups of 3 and 4 heads), working tree against cfae2ce:
# the attention tests under validation, attn_probe alternating with the
# base build, the new kernels' pipeline statistics, then Qwen3-4B decode
# after 4000 and 600 tokens, base and new alternating.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV) + working tree"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/l5.tar.xz" r && rm -rf "$R"' EXIT
T0=$(date +%s)
for t in ops_nn_attention ops_nn_decode_qk; do
  VK_LAYER_PATH=$g/layer VKCOMPUTE_VALIDATION=1 VKCOMPUTE_VALIDATION_ERRORS=1 timeout 120 "$g/bin/test_$t" --test-threads=1 > "$R/test_$t.txt" 2>&1; echo "test_$t rc=$?"; grep -E "test result|FAILED|skipped" "$R/test_$t.txt" | head -3
done
for round in 1 2; do
  for b in attn_probe_base attn_probe; do
    timeout 60 "$g/bin/$b" > "$R/${b}_$round.txt" 2>&1; echo "$b round $round rc=$?"; grep -E "µs" "$R/${b}_$round.txt" | cut -c1-160 | head -4
  done
done
timeout 60 "$g/bin/attn_probe" --rounds 1 --calls 1 --statistics > "$R/attn_stats.txt" 2>&1; echo "stats rc=$?"; grep -E "decode.*(group|GROUP) ?[34]|nn_attn_decode" "$R/attn_stats.txt" | head -12
q=/tmp/q3; rm -rf $q
python3 "$g/qwen3_reference.py" --out "$q" --size 4b --no-timing > "$R/q3_ref.txt" 2>&1; echo "ref rc=$? $(( $(date +%s) - T0 )) s"
for p in 4000 600; do
  for round in 1 2; do
    for b in qwen3_base qwen3; do
      [ $(( $(date +%s) - T0 )) -lt 290 ] || { echo "out of time before $b $p $round"; continue; }
      f="$R/p${p}_${b}_$round.txt"
      timeout 60 "$g/bin/$b" "$q" --prompt-len $p --decode 32 --profile > "$f" 2>&1; echo "$b prompt $p round $round rc=$?"
      grep -hE "^decode \(B|^sequence 0" "$f" | sed 's/, [0-9.]* tokens\/s.*//' | cut -c1-110
      grep -hE "^  nn_attn[a-z0-9_]* \(" "$f" | sed 's/ (.*)//; s/; per launch.*median/ median/' | cut -c1-120
    done
  done
done
