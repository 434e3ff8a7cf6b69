#!/usr/bin/env bash
# Call w2: what a dependent launch costs in NVIDIA's Vulkan driver beside
# CUDA on the same card: the floor's tiny chain (barrier_floor) and the
# decode layer's pattern chain (stream_floor) beside their CUDA twins
# (scripts/cuda/stream_twin.cu, CUDA graphs), alternating, two rounds.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; echo "commit: $(cat $g/REV)"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/w2.tar.xz" r && rm -rf "$R"' EXIT
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
nvcc --version | tail -2
nvcc -O3 -arch=sm_90 -o /tmp/stream_twin "$g/cuda/stream_twin.cu" > "$R/nvcc.txt" 2>&1; echo "nvcc rc=$?"; cat "$R/nvcc.txt" | head -20
for round in 1 2; do
  echo "== barrier_floor, round $round"
  timeout 120 "$g/bin/barrier_floor" --lengths 100,1000 --reps 30 --kinds global,exec-only,none > "$R/barrier_floor_$round.txt" 2>&1; echo "rc=$?"
  grep -vE "^floor:" "$R/barrier_floor_$round.txt" | cut -c1-160
  echo "== stream_floor pattern, round $round"
  timeout 60 "$g/bin/stream_floor" --pattern 31.5,21,99.6,49.8 --total-gb 5.4 > "$R/floor_$round.txt" 2>&1; echo "rc=$?"
  grep -E "pattern|µs|copy" "$R/floor_$round.txt" | head -8 | cut -c1-220
  echo "== stream_twin (CUDA), round $round"
  timeout 120 /tmp/stream_twin --pattern 31.5,21,99.6,49.8 --launches 72 --reps 20 > "$R/twin_$round.txt" 2>&1; echo "rc=$?"
  cut -c1-220 "$R/twin_$round.txt"
done
echo "done at $(el) s"
