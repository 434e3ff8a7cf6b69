#!/usr/bin/env bash
# Call w1: the form of the dependency between dispatches. The floor's
# chain of tiny dispatches under each barrier kind (barrier_floor, raw
# ash); then the library's barrier recorded as vkCmdPipelineBarrier (the
# default), vkCmdPipelineBarrier2 (sync2, sync2-storage) or with
# BY_REGION (VKCOMPUTE_EXP_BARRIER, an experiment's knob) for the floor's
# chain of a decode layer's projections and Qwen3-4B decode at B = 1.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; echo "commit: $(cat $g/REV)"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/w1.tar.xz" r && rm -rf "$R"' EXIT
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
for p in 1 2; do
  echo "== barrier_floor, process $p"
  timeout 120 "$g/bin/barrier_floor" --lengths 100,1000 --reps 30 > "$R/barrier_floor_$p.txt" 2>&1; echo "rc=$?"
  cat "$R/barrier_floor_$p.txt" | cut -c1-160
done
kinds="default sync2 sync2-storage by-region"
for round in 1 2; do
  for k in $kinds; do
    echo "== stream_floor pattern, $k, round $round"
    env VKCOMPUTE_EXP_BARRIER=$k timeout 60 "$g/bin/stream_floor" --pattern 31.5,21,99.6,49.8 --total-gb 5.4 > "$R/floor_${k}_$round.txt" 2>&1; echo "rc=$?"
    grep -E "pattern|per round|µs" "$R/floor_${k}_$round.txt" | head -6 | cut -c1-200
  done
done
q=/tmp/q3; rm -rf $q
echo "== qwen3_reference.py --size 4b (no timings) at $(el) s"
python3 "$g/qwen3_reference.py" --out "$q" --size 4b --no-static --no-timing > "$R/q3_ref.txt" 2>&1; echo "rc=$? at $(el) s"
for k in sync2 by-region; do
  echo "== qwen3 4b --reference ($k)"
  env VKCOMPUTE_EXP_BARRIER=$k timeout 200 "$g/bin/qwen3" "$q" --reference "$q/reference.safetensors" > "$R/q3_check_$k.txt" 2>&1; echo "rc=$?"; grep -E "worst" "$R/q3_check_$k.txt" | cut -c1-200
done
for n in 1 2 3; do
  for k in $kinds; do
    [ "$(el)" -lt 500 ] || { echo "out of time before $k $n"; continue; }
    echo "== qwen3 --decode 32 ($k, $n)"
    env VKCOMPUTE_EXP_BARRIER=$k timeout 100 "$g/bin/qwen3" "$q" --decode 32 > "$R/qwen3_${k}_$n.txt" 2>&1; echo "rc=$?"
    grep -hE "^decode \(|^decode pipelined" "$R/qwen3_${k}_$n.txt" | sed 's/, [0-9.]* tokens\/s, / ; /' | cut -c1-200
  done
done
echo "done at $(el) s"
