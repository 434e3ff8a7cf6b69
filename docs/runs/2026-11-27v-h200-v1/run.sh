#!/usr/bin/env bash
# Call v1: the compute queue family (the compute-only family, the
# library's choice, against the graphics one, VKCOMPUTE_EXP_QUEUE=graphics,
# an experiment's knob) for the floor's chain of a decode layer's
# projections and for Qwen3-4B's decode at B = 1, alternating in one call.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; echo "commit: $(cat $g/REV)"
vulkaninfo --summary 2>/dev/null | sed -n '/Queue/,+3p' | head -5
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/v1.tar.xz" r && rm -rf "$R"' EXIT
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
for round in 1 2; do
  for q in compute graphics; do
    echo "== stream_floor pattern, $q, round $round"
    env VKCOMPUTE_EXP_QUEUE=$q timeout 60 "$g/bin/stream_floor" --pattern 31.5,21,99.6,49.8 --total-gb 5.4 > "$R/floor_${q}_$round.txt" 2>&1; echo "rc=$?"
    grep -E "experiment|pattern|per round|µs" "$R/floor_${q}_$round.txt" | head -8 | cut -c1-220
  done
done
q=/tmp/q3; rm -rf $q
echo "== qwen3_reference.py --size 4b (no timings) at $(el) s"
python3 "$g/qwen3_reference.py" --out "$q" --size 4b --no-static --no-timing > "$R/q3_ref.txt" 2>&1; echo "rc=$? at $(el) s"
for q2 in graphics compute; do
  echo "== qwen3 4b --reference ($q2)"
  env VKCOMPUTE_EXP_QUEUE=$q2 timeout 200 "$g/bin/qwen3" "$q" --reference "$q/reference.safetensors" > "$R/q3_check_$q2.txt" 2>&1; echo "rc=$?"; grep -E "worst|experiment" "$R/q3_check_$q2.txt" | cut -c1-220
done
for n in 1 2 3; do
  for q2 in compute graphics; do
    [ "$(el)" -lt 520 ] || { echo "out of time before $q2 $n"; continue; }
    echo "== qwen3 --decode 32 ($q2, $n)"
    env VKCOMPUTE_EXP_QUEUE=$q2 timeout 100 "$g/bin/qwen3" "$q" --decode 32 > "$R/qwen3_${q2}_$n.txt" 2>&1; echo "rc=$?"
    grep -hE "^decode \(|^decode pipelined|^host time" "$R/qwen3_${q2}_$n.txt" | sed 's/, [0-9.]* tokens\/s, / ; /' | cut -c1-220
  done
done
echo "done at $(el) s"
