#!/usr/bin/env bash
# Call t3: the normed gate|up layer of Qwen3-4B (linear_probe --norm, the
# o projection before it) over more copies of its weights: 4, 8, 16, 32
# and 48 copies (0.4 to 4.8 GB read in turn), twice.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV)"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/t3.tar.xz" r && rm -rf "$R"' EXIT
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
for round in 1 2; do
  for c in 4 8 16 32 48; do
    n=gu_norm_o_c${c}_$round
    timeout 120 "$g/bin/linear_probe" --copies $c --norm --shapes "1,2560,19456,1" --before o > "$R/$n.txt" 2>&1; echo "$n rc=$? at $(el) s"
    grep -E "default \(ops|the command before" "$R/$n.txt" | sed 's/  */ /g' | cut -c1-150
  done
done
echo "done at $(el) s"
