#!/usr/bin/env bash
# Call s1: decode attention with the o projection in one dispatch
# (nn::attention_decode_project, the qwen3 example's default) against the
# same binary with --unfused-o, alternating, Qwen3-4B decode at B = 1
# (three rounds, --profile) and B = 4; the one dispatch after 600 and 4000
# prompt tokens; the 4B check against transformers; the new op's tests and
# the qwen3 tests under validation and synchronization validation.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV)"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/s1.tar.xz" r && rm -rf "$R"' EXIT
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
val() { VK_LAYER_PATH=$g/layer VKCOMPUTE_VALIDATION=1 VKCOMPUTE_VALIDATION_ERRORS=1 "$@"; }
echo "== test_ops_nn_decode_project (validation + sync validation)"
val timeout 120 "$g/bin/test_ops_nn_decode_project" --test-threads=1 --nocapture > "$R/test_ops_nn_decode_project.txt" 2>&1; echo "rc=$?"
grep -E "test result|panicked|FAILED|skipped" "$R/test_ops_nn_decode_project.txt" | head -6
q=/tmp/q3; rm -rf $q
echo "== qwen3_reference.py --size 4b --no-static at $(el) s"
python3 "$g/qwen3_reference.py" --out "$q" --size 4b --no-static > "$R/q3_ref.txt" 2>&1; echo "rc=$? at $(el) s"; cp "$q/reference_timing.json" "$R/" 2>/dev/null
echo "== qwen3 4b --reference"
timeout 240 "$g/bin/qwen3" "$q" --reference "$q/reference.safetensors" > "$R/q3_check.txt" 2>&1; echo "rc=$?"; grep -E "worst" "$R/q3_check.txt" | cut -c1-220
for round in 1 2 3; do
  for v in fused unfused; do
    f="$R/ab_${v}_$round.txt"; extra=""; [ $v = unfused ] && extra="--unfused-o"
    timeout 120 "$g/bin/qwen3" "$q" --decode 32 --profile $extra > "$f" 2>&1; echo "$v round $round rc=$?"
    grep -hE "^decode \(B|^decode pipelined|^decode step:" "$f" | sed 's/, [0-9.]* tokens\/s.*//' | cut -c1-120
    grep -hE "^  (nn_attn|linear)[a-z0-9_]* \(" "$f" | sed 's/; per launch.*median/ median/' | cut -c1-140
  done
done
for v in fused unfused; do grep -h "^sequence 0 generated" "$R"/ab_${v}_1.txt | md5sum | sed "s/-/$v tokens/"; done
echo "at $(el) s"
for run in "b4_fused --batch 4" "b4_unfused --batch 4 --unfused-o" "p600 --prompt-len 600" "p600_unfused --prompt-len 600 --unfused-o" "p4000 --prompt-len 4000" "p4000_unfused --prompt-len 4000 --unfused-o"; do
  set -- $run; n=$1; shift
  [ "$(el)" -lt 430 ] || { echo "out of time before qwen3 $*"; continue; }
  echo "== qwen3 $*"
  timeout 100 "$g/bin/qwen3" "$q" --decode 32 "$@" > "$R/q3_$n.txt" 2>&1; echo "rc=$?"
  grep -hE "^decode \(|^decode pipelined|^host time|^device memory" "$R/q3_$n.txt" | sed 's/, [0-9.]* tokens\/s, / ; /' | cut -c1-200
done
for t in qwen3; do
  [ "$(el)" -lt 500 ] || { echo "out of time before test_$t"; continue; }
  echo "== test_$t (validation + sync validation) at $(el) s"
  val timeout $(( 585 - $(el) )) "$g/bin/test_$t" --test-threads=1 > "$R/test_$t.txt" 2>&1; echo "rc=$?"; grep -E "test result|panicked|FAILED" "$R/test_$t.txt" | head -5
done
echo "done at $(el) s"
