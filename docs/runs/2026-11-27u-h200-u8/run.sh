#!/usr/bin/env bash
# Call u8: whether the decode step pays for changing the compute units'
# shared-memory configuration between kernels: a build whose skinny linear
# kernels declare 17 KiB of shared memory (the decode attention's
# footprint; never touched but in a branch no launch takes), beside the
# tree's build, three alternating rounds and a profile each. Qwen3-4B
# decode at B = 1.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV)"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/u8.tar.xz" r && rm -rf "$R"' EXIT
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
q=/tmp/q3; rm -rf $q
python3 "$g/qwen3_reference.py" --out "$q" --size 4b --no-static --no-timing > "$R/q3_ref.txt" 2>&1; echo "reference rc=$? at $(el) s"
for round in 1 2 3; do
  for b in qwen3 qwen3_pad; do
    f="$R/${b}_$round.txt"
    timeout 100 "$g/bin/$b" "$q" --decode 32 > "$f" 2>&1; echo "$b round $round rc=$?"
    grep -hE "^decode \(B|^decode pipelined" "$f" | sed 's/, [0-9.]* tokens\/s.*//' | cut -c1-120
  done
done
for b in qwen3 qwen3_pad; do
  timeout 100 "$g/bin/$b" "$q" --decode 16 --profile > "$R/${b}_prof.txt" 2>&1; echo "$b profile rc=$?"
  grep -E "^  [a-z_0-9]+ \(" "$R/${b}_prof.txt" | sed 's/  */ /g' | awk '$0 ~ / 3[56] /' | cut -c1-150
done
grep -h "sequence 0 generated" "$R"/qwen3_1.txt "$R"/qwen3_pad_1.txt | uniq -c | cut -c1-80
echo "done at $(el) s"
