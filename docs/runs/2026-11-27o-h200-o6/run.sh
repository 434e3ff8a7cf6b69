#!/usr/bin/env bash
# Call o6: the fused MLP kernel at one row of bf16 weights with
# linear_loops.glsl's loop (4 chunks per lane and step) and butterfly on
# 32-lane subgroups: the bf16 FFN stack at one token beside the two
# linear layers, and Qwen3-4B decode at B = 1 with and without it.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV)"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/o6.tar.xz" r && rm -rf "$R"' EXIT
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
echo "== test_ops_mlp at $(el) s"
VK_LAYER_PATH=$g/layer VKCOMPUTE_VALIDATION=1 VKCOMPUTE_VALIDATION_ERRORS=1 timeout 120 "$g/bin/test_ops_mlp" --test-threads=1 > "$R/test_ops_mlp.txt" 2>&1; echo "rc=$?"; grep -E "test result|panicked|FAILED|skipped" "$R/test_ops_mlp.txt" | head -5
B=linear,fused,linear,fused
echo "== ffn_stack bf16 T=1 blocks $B at $(el) s"
timeout 150 "$g/bin/ffn_stack" --dtypes bf16 --tokens 1 --blocks $B --check-layers 1 > "$R/ffn_bf16.txt" 2>&1; echo "rc=$?"; grep -E "median|Error|panic|copy band" "$R/ffn_bf16.txt" | cut -c1-200
q=/tmp/q3; rm -rf $q
echo "== qwen3_reference.py at $(el) s"
python3 "$g/qwen3_reference.py" --out "$q" --size 4b --no-timing > "$R/q3_ref.txt" 2>&1; echo "ref rc=$?"
i=0
for s in default fused default fused; do
  i=$((i + 1)); if [ $s = default ]; then a=""; else a="--fused-mlp"; fi
  timeout 60 "$g/bin/qwen3" "$q" --decode 32 $a > "$R/q3_${s}_$i.txt" 2>&1; echo "qwen3 $a rc=$?"
  grep -hE "^decode \(" "$R/q3_${s}_$i.txt" | cut -c1-200
done
timeout 60 "$g/bin/qwen3" "$q" --decode 32 --fused-mlp --profile > "$R/q3_fused_prof.txt" 2>&1; echo "profile rc=$?"; grep -E "^  mlp|^  linear|^  total" "$R/q3_fused_prof.txt" | cut -c1-200
echo "done at $(el) s"
