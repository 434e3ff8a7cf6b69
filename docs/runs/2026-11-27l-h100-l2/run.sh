#!/usr/bin/env bash
# Call l2: the normed skinny kernels' W prefetch before the RMSNorm
# prologue (working tree) against f800dde: Qwen3-4B decode at B = 1,
# three alternating rounds, and one profile each.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV) + working tree"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/l2.tar.xz" r && rm -rf "$R"' EXIT
q=/tmp/q3; rm -rf $q
python3 "$g/qwen3_reference.py" --out "$q" --size 4b --no-timing > "$R/q3_ref.txt" 2>&1; echo "ref rc=$?"
for round in 1 2 3; do
  for b in qwen3_base qwen3; do
    f="$R/${b}_$round.txt"
    timeout 120 "$g/bin/$b" "$q" --decode 32 --profile > "$f" 2>&1; echo "$b round $round rc=$?"
    grep -hE "^decode \(B|^sequence 0" "$f" | sed 's/, [0-9.]* tokens\/s.*//' | cut -c1-120
    grep -hE "^  (linear)[a-z0-9_]* \(" "$f" | sed 's/; per launch.*median/ median/' | cut -c1-140
  done
done
