#!/usr/bin/env bash
# Call k11: four key rows per scores step for every head group (probe
# build qwen3_s4) against 08fcfb7 (qwen3_head, four rows only from four
# heads): Qwen3-4B decode at B = 1 after 3, 600, 1500 and 4000 prompt
# tokens, profiled, two rounds alternating.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV) + probe"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/k11.tar.xz" r && rm -rf "$R"' EXIT
q=/tmp/q3; rm -rf $q
python3 "$g/qwen3_reference.py" --out "$q" --size 4b --no-timing > "$R/q3_ref.txt" 2>&1; echo "ref rc=$?"
for p in 3 600 1500 4000; do
  for round in 1 2; do
    for b in qwen3_s4 qwen3_head; do
      f="$R/p${p}_${b}_$round.txt"
      echo "== $b prompt $p round $round"
      timeout 120 "$g/bin/$b" "$q" --prompt-len $p --decode 32 --profile > "$f" 2>&1; echo "rc=$?"
      grep -hE "^decode \(B|nn_attn_decode1.* \(" "$f" | sed 's/, [0-9.]* tokens\/s.*//; s/.*per launch/  attention per launch/' | cut -c1-120
    done
  done
done
