#!/usr/bin/env bash
# Call t11: the normed skinny kernels multiply the RMSNorm's scale into
# the finished products only (x enters as x · g in every plan; with
# split-K the prologue's scale multiplies each slice's sums), a multiply
# less per x element. The normed op tests and the fused MLP's under
# validation; linear_probe --norm at 4 rows (the old and new builds of the
# norm-inside kernel beside the default) and at 1 row (the old builds
# beside the default); Qwen3-4B decode at B = 1 and 4 against the tree
# before (bin/qwen3_base, 9d0be0c), two rounds each; the 4B check.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV)"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/t11.tar.xz" r && rm -rf "$R"' EXIT
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
for t in ops_linear_normed ops_mlp; do
  VK_LAYER_PATH=$g/layer VKCOMPUTE_VALIDATION=1 VKCOMPUTE_VALIDATION_ERRORS=1 timeout 150 "$g/bin/test_$t" --test-threads=1 > "$R/test_$t.txt" 2>&1; echo "$t rc=$?"
  grep -E "test result|panicked|FAILED" "$R/test_$t.txt" | head -4
done
L=$g/lprobe
p() { # name, args...
  local n=$1; shift
  timeout 150 "$g/bin/linear_probe" --copies 4 "$@" > "$R/$n.txt" 2>&1; echo "$n rc=$? at $(el) s"
  grep -E "µs min|FAIL" "$R/$n.txt" | sed 's/  */ /g; s#/[^ ]*/lprobe/##' | cut -c1-150
}
p gu4 --norm --shapes "4,2560,19456,1" $L/m4nsg_old.spv:4:4:8 $L/m4nsg_new.spv:4:4:8 $L/m4nsg_old.spv:4:4:16 $L/m4nsg_new.spv:4:4:16
p qkv4 --norm --shapes "4,2560,6144,0" $L/m4nsg_old.spv:4:4:4
p gu1 --norm --shapes "1,2560,19456,1" $L/old.spv:4:1
p qkv1 --norm --shapes "1,2560,6144,0" $L/nsg4_old.spv:4:1:8
q=/tmp/q3; rm -rf $q
python3 "$g/qwen3_reference.py" --out "$q" --size 4b --no-static --no-timing > "$R/q3_ref.txt" 2>&1; echo "reference rc=$? at $(el) s"
timeout 240 "$g/bin/qwen3" "$q" --reference "$q/reference.safetensors" > "$R/q3_check.txt" 2>&1; echo "check rc=$?"; grep -E "worst" "$R/q3_check.txt" | cut -c1-200
for round in 1 2; do
  for bsz in 1 4; do
    for b in qwen3_base qwen3; do
      f="$R/${b}_b${bsz}_$round.txt"
      timeout 100 "$g/bin/$b" "$q" --decode 32 --batch $bsz > "$f" 2>&1; echo "$b B=$bsz round $round rc=$?"
      grep -hE "^decode \(B|^decode pipelined" "$f" | sed 's/, [0-9.]* tokens\/s.*//' | cut -c1-120
    done
  done
done
echo "done at $(el) s"
