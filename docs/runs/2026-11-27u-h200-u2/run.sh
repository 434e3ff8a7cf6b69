#!/usr/bin/env bash
# Call u2: the one-dispatch attention + o projection with its weight loads
# throttled: each group of PGROUP slots' loads waits for the group before
# (VKCOMPUTE_QKO_PGROUP, an experiment's knob: 14 all at once as in u1, 0
# the loads after the wait), against the two dispatches (--unfused-o).
# Qwen3-4B decode at B = 1, two rounds; the 4B check with the one
# dispatch at PGROUP 2; a profile of each.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV)"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/u2.tar.xz" r && rm -rf "$R"' EXIT
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
q=/tmp/q3; rm -rf $q
python3 "$g/qwen3_reference.py" --out "$q" --size 4b --no-static --no-timing > "$R/q3_ref.txt" 2>&1; echo "reference rc=$? at $(el) s"
VKCOMPUTE_QKO_PGROUP=2 timeout 240 "$g/bin/qwen3" "$q" --reference "$q/reference.safetensors" > "$R/q3_check.txt" 2>&1; echo "check rc=$?"; grep -E "worst" "$R/q3_check.txt" | cut -c1-200
for round in 1 2; do
  for v in unfused 14 7 4 2 1 0; do
    f="$R/qwen3_${v}_$round.txt"
    if [ $v = unfused ]; then a="--unfused-o"; else a=""; export VKCOMPUTE_QKO_PGROUP=$v; fi
    timeout 100 "$g/bin/qwen3" "$q" --decode 32 $a > "$f" 2>&1; echo "$v round $round rc=$?"
    grep -hE "^decode \(B|^decode pipelined" "$f" | sed 's/, [0-9.]* tokens\/s.*//' | cut -c1-120
    unset VKCOMPUTE_QKO_PGROUP
  done
done
for v in 2 0; do
  VKCOMPUTE_QKO_PGROUP=$v timeout 100 "$g/bin/qwen3" "$q" --decode 16 --profile --statistics > "$R/qwen3_prof_$v.txt" 2>&1; echo "profile $v rc=$?"
  grep -E "nn_attn_decode1_qko" "$R/qwen3_prof_$v.txt" | cut -c1-200
done
echo "done at $(el) s"
