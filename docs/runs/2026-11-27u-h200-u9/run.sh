#!/usr/bin/env bash
# Call u9: where decode attention's time goes at one sequence and short
# lengths: a build whose fused decode attention (nn_attn_decode1_qk*)
# stops after phase VKCOMPUTE_ATTN_STOP (specialization constant 1; wrong
# results, a measurement only): 1 after reading the lengths and
# positions, 2 after the prologue's loads, 3 after the q/k norms, rotary
# and the cache append, 4 after the scores, 5 after the softmax, 6 after
# the values, 0 all of it. Profiles of Qwen3-4B decode at B = 1, the
# attention's median place, beside the tree's own build.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV)"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/u9.tar.xz" r && rm -rf "$R"' EXIT
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
q=/tmp/q3; rm -rf $q
python3 "$g/qwen3_reference.py" --out "$q" --size 4b --no-static --no-timing > "$R/q3_ref.txt" 2>&1; echo "reference rc=$? at $(el) s"
run() { # name, binary, stop
  env VKCOMPUTE_ATTN_STOP=$3 timeout 100 "$g/bin/$2" "$q" --decode 16 --profile > "$R/$1.txt" 2>&1; echo "$1 rc=$?"
  grep -E "^  nn_attn_decode1_qk \(" "$R/$1.txt" | sed 's/  */ /g' | cut -c1-160
}
run tree qwen3 0
for s in 0 1 2 3 4 5 6; do run stop$s qwen3_stop $s; done
run tree2 qwen3 0
echo "done at $(el) s"
