#!/usr/bin/env bash
# Call s7: s6 placed the decode step's 0.2 ms at 9b54f4b (ops::convert in
# groups of 8). This tree's qwen3 example (A), the same tree with
# 45f0004's scalar convert kernel and op (B), and with the new kernel
# forced onto its element-by-element path (C, no 16-byte groups; the same
# four bindings), beside 45f0004's build; Qwen3-4B decode at B = 1,
# three rounds, the first with --profile.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV)"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/s7.tar.xz" r && rm -rf "$R"' EXIT
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
q=/tmp/q3; rm -rf $q
python3 "$g/qwen3_reference.py" --out "$q" --size 4b --no-static --no-timing > "$R/q3_ref.txt" 2>&1; echo "checkpoint rc=$? at $(el) s"
for round in 1 2 3; do
  prof=""; [ $round = 1 ] && prof="--profile"
  for b in qwen3_45f0004 qwen3 qwen3_vB qwen3_vC; do
    f="$R/${b}_$round.txt"
    timeout 100 "$g/bin/$b" "$q" --decode 32 $prof > "$f" 2>&1; echo "$b round $round rc=$?"
    grep -hE "^decode \(B|^decode pipelined" "$f" | sed 's/, [0-9.]* tokens\/s.*//' | cut -c1-120
    grep -hE "^  (cast|nn_embed)[a-z0-9_]* \(" "$f" | sed 's/; per launch.*median/ median/' | cut -c1-140
  done
done
echo "done at $(el) s"
