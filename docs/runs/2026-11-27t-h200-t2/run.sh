#!/usr/bin/env bash
# Call t2: what a skinny layer costs after the command before it.
# linear_probe --before (none, copy, o, o-other) at Qwen3-4B's normed
# gate|up (the decode stack's 32.1 µs against linear_probe's 27.3 in t1),
# its q|k|v, and the unnormed gate|up of the FFN stack, 4 copies of W.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV)"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/t2.tar.xz" r && rm -rf "$R"' EXIT
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
p() { # name, args...
  local n=$1; shift
  timeout 120 "$g/bin/linear_probe" --copies 4 "$@" > "$R/$n.txt" 2>&1; echo "$n rc=$? at $(el) s"
  grep -E "default \(ops|the command before" "$R/$n.txt" | sed 's/  */ /g' | cut -c1-150
}
for round in 1 2; do
  for b in none copy o o-other; do p "gu_norm_${b}_$round" --norm --shapes "1,2560,19456,1" --before $b; done
done
for b in none copy o; do p "qkv_norm_$b" --norm --shapes "1,2560,6144,0" --before $b; done
for b in none copy o; do p "gu_$b" --shapes "1,2560,19456,1" --before $b; done
echo "done at $(el) s"
