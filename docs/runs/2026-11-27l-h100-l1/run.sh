#!/usr/bin/env bash
# Call l1: stream_floor's --overlap: the floor's chains with in-kernel
# waits and no barriers beside the barrier chain, FFN pattern and the
# whole decode layer's four projections (q|k|v, o, gate|up, down MB).
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV) + working tree"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/l1.tar.xz" r && rm -rf "$R"' EXIT
for round in 1 2; do
  echo "== FFN pattern round $round"
  timeout 120 "$g/bin/stream_floor" --pattern 99.6,49.8 --kernels 2 --total-gb 5.4 --reps 30 --overlap > "$R/ffn_$round.txt" 2>&1; echo "rc=$?"
  grep -E "pattern|overlap|place" "$R/ffn_$round.txt" | cut -c1-200
  echo "== decode layer pattern round $round"
  timeout 120 "$g/bin/stream_floor" --pattern 31.5,21,99.6,49.8 --launches 144 --kernels 2 --total-gb 7.3 --reps 30 --overlap > "$R/layer_$round.txt" 2>&1; echo "rc=$?"
  grep -E "pattern|overlap|place" "$R/layer_$round.txt" | cut -c1-200
done
