#!/usr/bin/env bash
# Call j11: is stream_floor's slow mode (wall ~2.3x the GPU time over the 5.4 GB chain) the paced wait? Default waits against polling, alternating.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV) + stream_floor --spin-wait"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/j11.tar.xz" r && rm -rf "$R"' EXIT
for i in 1 2 3 4 5; do for m in wait spin; do
  f=""; [ $m = spin ] && f="--spin-wait"
  echo "== stream_floor --pattern 99.6,49.8 --total-gb 5.4 $f (round $i)"
  timeout 100 "$g/bin/stream_floor" --pattern 99.6,49.8 --total-gb 5.4 $f > "$R/floor_${m}_$i.txt" 2>&1; echo "rc=$?"; grep -E "^pattern" "$R/floor_${m}_$i.txt" | cut -c60-190
done; done
