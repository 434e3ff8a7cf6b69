#!/usr/bin/env bash
# Call j5: does the working set (GB of weights a chain streams) move the floor and the FFN stack per layer?
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV)"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/j5.tar.xz" r && rm -rf "$R"' EXIT
for i in 1 2; do
for t in "2" "5.4" "10.8 --launches 144" "1 --launches 14"; do
  echo "== stream_floor --pattern 99.6,49.8 --total-gb $t (round $i)"
  timeout 100 "$g/bin/stream_floor" --pattern 99.6,49.8 --total-gb $t > "$R/floor_${i}_${t%% *}.txt" 2>&1; echo "rc=$?"; grep -E "pattern|place" "$R/floor_${i}_${t%% *}.txt" | cut -c1-230
done
for l in 7 14 36 72; do
  echo "== ffn_stack --layers $l T=1 bf16 (round $i)"
  timeout 100 "$g/bin/ffn_stack" --tokens 1 --dtypes bf16 --layers $l --profile > "$R/ffn_l${l}_$i.txt" 2>&1; echo "rc=$?"; grep -E "median|command" "$R/ffn_l${l}_$i.txt" | cut -c1-170
done
done
