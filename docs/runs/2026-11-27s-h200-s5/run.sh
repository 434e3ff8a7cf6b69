#!/usr/bin/env bash
# Call s5: is the decode step slower than in the thirteenth to sixteenth
# series (3.00 ms at B = 1 then, 3.20-3.22 in s1-s4)? The qwen3 example
# built at 7fd41aa (the thirteenth series' final tree, m7: 2.994 ms),
# at e811fba (the eighteenth series' final tree) and at this commit,
# alternating, Qwen3-4B decode at B = 1: three rounds, the first with
# --profile (per-kernel GPU time and the copy's bandwidth).
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version,clocks.max.memory,clocks.max.sm --format=csv; echo "commit: $(cat $g/REV)"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/s5.tar.xz" r && rm -rf "$R"' EXIT
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
q=/tmp/q3; rm -rf $q
python3 "$g/qwen3_reference.py" --out "$q" --size 4b --no-static --no-timing > "$R/q3_ref.txt" 2>&1; echo "checkpoint rc=$? at $(el) s"
for round in 1 2 3; do
  prof=""; [ $round = 1 ] && prof="--profile"
  for b in qwen3_m7 qwen3_e81 qwen3; do
    f="$R/${b}_$round.txt"
    timeout 100 "$g/bin/$b" "$q" --decode 32 $prof > "$f" 2>&1; echo "$b round $round rc=$?"
    grep -hE "^decode \(B|^decode pipelined" "$f" | sed 's/, [0-9.]* tokens\/s.*//' | cut -c1-120
    grep -hE "^  (nn_attn|linear)[a-z0-9_]* \(|weight-streaming floor" "$f" | sed 's/; per launch.*median/ median/' | cut -c1-160
  done
done
nvidia-smi --query-gpu=clocks.mem,clocks.sm,temperature.gpu,power.draw --format=csv
echo "done at $(el) s"
