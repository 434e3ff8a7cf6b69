#!/usr/bin/env bash
# Call m4: the tree beside transformers in one call (as k9): the reference
# with its timings (eager, static cache, prefill of 512), the 4B check,
# decode at B = 1 (two rounds and a profiled one), 4 and 16, after 600 and
# 4000 tokens, prefill of 512. The working tree's residual load at the
# skinny kernels' start (qwen3) against HEAD (qwen3_base): three
# alternating rounds at B = 1 with a profile; the headline runs take the
# faster of the two. Then the linear, attention,
# op batch and qwen3 tests under validation while the call has time.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV) + working tree"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/m4.tar.xz" r && rm -rf "$R"' EXIT
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
q=/tmp/q3; rm -rf $q
echo "== qwen3_reference.py --size 4b (timings, static cache)"
python3 "$g/qwen3_reference.py" --out "$q" --size 4b > "$R/q3_ref.txt" 2>&1; echo "rc=$? at $(el) s"; cp "$q/reference_timing.json" "$R/" 2>/dev/null
grep -oE '"(static_ms_per_token|static_ms_per_token_min|static_ms_per_token_max|eager_ms_per_token|eager_prefill_ms|static_warm_s)": [0-9.]*' "$R/q3_ref.txt"
echo "== qwen3 4b --reference"
timeout 240 "$g/bin/qwen3" "$q" --reference "$q/reference.safetensors" > "$R/q3_check.txt" 2>&1; echo "rc=$?"; grep -E "worst" "$R/q3_check.txt" | cut -c1-220
for round in 1 2 3; do
  for b in qwen3_base qwen3; do
    f="$R/ab_${b}_$round.txt"
    timeout 120 "$g/bin/$b" "$q" --decode 32 --profile > "$f" 2>&1; echo "$b round $round rc=$?"
    grep -hE "^decode \(B|^decode pipelined" "$f" | sed 's/, [0-9.]* tokens\/s.*//' | cut -c1-120
    grep -hE "^  (linear)[a-z0-9_]* \(" "$f" | sed 's/; per launch.*median/ median/' | cut -c1-140
  done
done
echo "at $(el) s"
# The headline runs take the build with the lower mean of the three
# medians (read back every step).
mean() { grep -h "^decode (B = 1" "$R"/ab_$1_[0-9].txt | sed -E 's/.*median ([0-9.]+).*/\1/' | awk '{s+=$1; n++} END {if (n) printf "%.4f", s/n; else print 99}'; }
mb=$(mean qwen3_base); mn=$(mean qwen3)
hb=qwen3; awk -v a="$mb" -v b="$mn" 'BEGIN {exit !(a < b)}' && hb=qwen3_base
echo "mean of medians: qwen3_base $mb, qwen3 $mn; headline runs with $hb"
for run in "b1_1 --batch 1" "b1_2 --batch 1" "b4 --batch 4" "b16 --batch 16" "p600 --prompt-len 600" "p4000 --prompt-len 4000" "p512 --prompt-len 512"; do
  set -- $run; n=$1; shift
  [ "$(el)" -lt 500 ] || { echo "out of time before qwen3 $*"; continue; }
  echo "== qwen3 $*"
  timeout 100 "$g/bin/$hb" "$q" --decode 32 "$@" > "$R/q3_$n.txt" 2>&1; echo "rc=$?"
  grep -hE "^decode \(|^decode pipelined|^prefill:|^host time|^device memory" "$R/q3_$n.txt" | sed 's/, [0-9.]* tokens\/s, / ; /' | cut -c1-200
done
for t in ops_linear ops_linear_normed qwen3 qwen3_f16_paths ops_nn_attention op_batch_nn; do
  [ "$(el)" -lt 530 ] || { echo "out of time before test_$t"; continue; }
  echo "== test_$t (validation + sync validation) at $(el) s"
  VK_LAYER_PATH=$g/layer VKCOMPUTE_VALIDATION=1 VKCOMPUTE_VALIDATION_ERRORS=1 timeout $(( 585 - $(el) )) "$g/bin/test_$t" --test-threads=1 > "$R/test_$t.txt" 2>&1; echo "rc=$?"; grep -E "test result|panicked|FAILED" "$R/test_$t.txt" | head -5
done
echo "done at $(el) s"
