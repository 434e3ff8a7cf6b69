#!/usr/bin/env bash
# Call s10: the conversion's rule at B = 4 and 16 (the decode step's
# embedding rows, 10,240 and 40,960 elements, now element by element):
# Qwen3-4B decode against e811fba's build, alternating, two rounds each.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV)"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/s10.tar.xz" r && rm -rf "$R"' EXIT
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
q=/tmp/q3; rm -rf $q
python3 "$g/qwen3_reference.py" --out "$q" --size 4b --no-static --no-timing > "$R/q3_ref.txt" 2>&1; echo "checkpoint rc=$? at $(el) s"
for bsz in 4 16; do
  for round in 1 2; do
    for b in qwen3_e81 qwen3; do
      f="$R/${b}_b${bsz}_$round.txt"
      timeout 100 "$g/bin/$b" "$q" --decode 32 --batch $bsz > "$f" 2>&1; echo "$b B=$bsz round $round rc=$?"
      grep -hE "^decode \(B|^decode pipelined" "$f" | sed 's/, [0-9.]* tokens\/s.*//' | cut -c1-120
    done
  done
done
echo "done at $(el) s"
