#!/usr/bin/env bash
# Call s2: forms of the one-dispatch attention + o projection (bf16 W),
# chosen by VKCOMPUTE_QKO_VARIANT: p4 (s1's: each subgroup's first step of
# W, 4 chunks of 16 bytes per lane and row, loaded before the wait; the
# counter polled back to back), p0 (no load before the wait), p0b (no load,
# 200 ALU steps between polls), p1b (1 chunk per lane and row before the
# wait, the same back-off), p4b (s1's loads, the back-off); against
# --unfused-o, Qwen3-4B decode at B = 1, two rounds, --profile.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV) + working tree"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/s2.tar.xz" r && rm -rf "$R"' EXIT
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
q=/tmp/q3; rm -rf $q
python3 "$g/qwen3_reference.py" --out "$q" --size 4b --no-static --no-timing > "$R/q3_ref.txt" 2>&1; echo "checkpoint rc=$? at $(el) s"
for round in 1 2; do
  for v in p4 p0 p0b p1b p4b unfused; do
    f="$R/${v}_$round.txt"; extra=""; [ $v = unfused ] && extra="--unfused-o"
    VKCOMPUTE_QKO_VARIANT=$v timeout 100 "$g/bin/qwen3" "$q" --decode 32 --profile $extra > "$f" 2>&1; echo "$v round $round rc=$?"
    grep -hE "^decode \(B" "$f" | sed 's/, [0-9.]* tokens\/s.*//' | cut -c1-120
    grep -hE "^  (nn_attn)[a-z0-9_]* \(" "$f" | sed 's/; per launch.*median/ median/' | cut -c1-140
  done
done
echo "done at $(el) s"
