#!/usr/bin/env bash
# Call t1: the 1-row RMSNorm-prologue skinny layer on the subgroup-32
# kernel (linear_bf16_m1_norm_sg32: four 16-byte chunks per lane and
# step, the butterfly finish, the scale last) where the layer is not
# narrowed. Registers of both 1-row normed kernels; linear_probe --norm
# at Qwen3-4B's gate|up, q|k|v and LM head shapes (the old kernel and
# other launch shapes as variants); the op tests under validation;
# Qwen3-4B decode at B = 1 against 57df6cf's build (three rounds); the
# 4B check against transformers.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV)"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/t1.tar.xz" r && rm -rf "$R"' EXIT
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
"$g/bin/kernel_statistics" --only linear_bf16_m1 > "$R/kstats.txt" 2>&1; echo "kstats rc=$?"; grep -E "linear_bf16_m1" "$R/kstats.txt" | cut -c1-150
for t in ops_linear_normed ops_linear; do
  VK_LAYER_PATH=$g/layer VKCOMPUTE_VALIDATION=1 VKCOMPUTE_VALIDATION_ERRORS=1 timeout 150 "$g/bin/test_$t" --test-threads=1 > "$R/test_$t.txt" 2>&1; echo "$t rc=$?"
  grep -E "test result|panicked|FAILED" "$R/test_$t.txt" | head -4
done
L=$g/lprobe
timeout 150 "$g/bin/linear_probe" --norm --copies 4 --shapes "1,2560,19456,1;1,2560,151936,0" \
  $L/old.spv:4:1 $L/nsg2.spv:4:1 > "$R/probe_gu.txt" 2>&1; echo "probe gu rc=$? at $(el) s"
timeout 150 "$g/bin/linear_probe" --norm --copies 4 --shapes "1,2560,6144,0,2" \
  $L/old.spv:4:1 $L/nsg4.spv:4:1 $L/nsg4.spv:4:1:8 $L/nsg4.spv:4:1:2 > "$R/probe_qkv.txt" 2>&1; echo "probe qkv rc=$? at $(el) s"
grep -vE "^\s*$" "$R/probe_gu.txt" "$R/probe_qkv.txt" | grep -iE "µs|us |diff|row|shape" | cut -c1-170 | head -40
q=/tmp/q3; rm -rf $q
python3 "$g/qwen3_reference.py" --out "$q" --size 4b --no-static --no-timing > "$R/q3_ref.txt" 2>&1; echo "reference rc=$? at $(el) s"
timeout 240 "$g/bin/qwen3" "$q" --reference "$q/reference.safetensors" > "$R/q3_check.txt" 2>&1; echo "check rc=$?"; grep -E "worst" "$R/q3_check.txt" | cut -c1-200
for round in 1 2 3; do
  for b in qwen3_base qwen3; do
    f="$R/${b}_$round.txt"
    timeout 100 "$g/bin/$b" "$q" --decode 32 > "$f" 2>&1; echo "$b round $round rc=$?"
    grep -hE "^decode \(B|^decode pipelined" "$f" | sed 's/, [0-9.]* tokens\/s.*//' | cut -c1-120
  done
done
timeout 100 "$g/bin/qwen3" "$q" --decode 32 --profile > "$R/qwen3_prof.txt" 2>&1; echo "profile rc=$?"
sed -n '/profile of one decode step/,/total/p' "$R/qwen3_prof.txt" | cut -c1-150
echo "done at $(el) s"
