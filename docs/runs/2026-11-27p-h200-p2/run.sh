#!/usr/bin/env bash
# Call p2: the ticketed fused MLP with gate|up tasks of 1 to 6 units per
# subgroup (the rule's pick and fixed counts) beside the two layers, in
# the FFN stack; Qwen3-4B decode at B = 1 with the rule's fused block,
# profiled; ops_mlp under validation.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV)"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/p2.tar.xz" r && rm -rf "$R"' EXIT
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
echo "== test_ops_mlp (validation + sync validation) at $(el) s"
VK_LAYER_PATH=$g/layer VKCOMPUTE_VALIDATION=1 VKCOMPUTE_VALIDATION_ERRORS=1 timeout 120 "$g/bin/test_ops_mlp" --test-threads=1 > "$R/test_ops_mlp.txt" 2>&1; echo "rc=$?"; grep -E "test result|panicked|FAILED|skipped" "$R/test_ops_mlp.txt" | head -5
echo "== ffn_stack T=1,4 bf16,f32 at $(el) s"
timeout 300 "$g/bin/ffn_stack" --tokens 1,4 --blocks mlp,fused,fused_u1,fused_u2,fused_u4,fused_u6 --json "$R/ffn.json" > "$R/ffn.txt" 2>&1; echo "rc=$?"; grep -E "median|Error|panic|copy band" "$R/ffn.txt" | cut -c1-150
q=/tmp/q3; rm -rf $q
echo "== qwen3_reference.py at $(el) s"
python3 "$g/qwen3_reference.py" --out "$q" --size 4b --no-timing > "$R/q3_ref.txt" 2>&1; echo "ref rc=$?"
timeout 60 "$g/bin/qwen3" "$q" --reference "$q/reference.safetensors" --fused-mlp > "$R/q3_check_fused.txt" 2>&1; echo "check fused rc=$?"; grep -E "worst" "$R/q3_check_fused.txt" | cut -c1-220
for i in 1 2; do
  timeout 60 "$g/bin/qwen3" "$q" --decode 32 > "$R/q3_default_$i.txt" 2>&1; echo "default $i rc=$?"; grep -hE "^decode \(" "$R/q3_default_$i.txt" | cut -c1-200
  timeout 60 "$g/bin/qwen3" "$q" --decode 32 --fused-mlp > "$R/q3_fused_$i.txt" 2>&1; echo "fused $i rc=$?"; grep -hE "^decode \(" "$R/q3_fused_$i.txt" | cut -c1-200
done
timeout 60 "$g/bin/qwen3" "$q" --decode 32 --fused-mlp --profile > "$R/q3_fused_prof.txt" 2>&1; echo "fused prof rc=$?"; grep -hE "^  (vkcompute|total)" "$R/q3_fused_prof.txt" | tail -9 | cut -c1-200
echo "done at $(el) s"
