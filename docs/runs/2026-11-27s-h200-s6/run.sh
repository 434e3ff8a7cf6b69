#!/usr/bin/env bash
# Call s6: which change slowed the decode step from 3.00 to 3.20 ms (s5:
# 7fd41aa against e811fba and this tree)? The qwen3 example built at
# 7fd41aa (thirteenth series), 45f0004 (the seventeenth series' base),
# 9b54f4b (ops::convert in groups of 8), c983050 (the prefill line's 5
# warm prefills) and this commit, alternating, Qwen3-4B decode at B = 1,
# three rounds.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV)"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/s6.tar.xz" r && rm -rf "$R"' EXIT
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
q=/tmp/q3; rm -rf $q
python3 "$g/qwen3_reference.py" --out "$q" --size 4b --no-static --no-timing > "$R/q3_ref.txt" 2>&1; echo "checkpoint rc=$? at $(el) s"
for round in 1 2 3; do
  for b in qwen3_m7 qwen3_45f0004 qwen3_9b54f4b qwen3_c983050 qwen3; do
    f="$R/${b}_$round.txt"
    timeout 100 "$g/bin/$b" "$q" --decode 32 > "$f" 2>&1; echo "$b round $round rc=$?"
    grep -hE "^decode \(B|^decode pipelined" "$f" | sed 's/, [0-9.]* tokens\/s.*//' | cut -c1-120
  done
done
echo "done at $(el) s"
