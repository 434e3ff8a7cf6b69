#!/usr/bin/env bash
# Call p1: the fused MLP as one dispatch of ticketed tasks (gate|up tasks,
# then down tasks waiting on counters) under validation, its registers,
# the FFN stack with the default block and the fused kernel beside
# PyTorch, and Qwen3-4B decode at B = 1 and 4 with and without
# --fused-mlp (the fused one also profiled), checked against transformers.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV)"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/p1.tar.xz" r && rm -rf "$R"' EXIT
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
echo "== test_ops_mlp (validation + sync validation) at $(el) s"
VK_LAYER_PATH=$g/layer VKCOMPUTE_VALIDATION=1 VKCOMPUTE_VALIDATION_ERRORS=1 timeout 120 "$g/bin/test_ops_mlp" --test-threads=1 > "$R/test_ops_mlp.txt" 2>&1; echo "rc=$?"; grep -E "test result|panicked|FAILED|skipped" "$R/test_ops_mlp.txt" | head -5
echo "== kernel statistics at $(el) s"
for p in mlp_bf16_m1 mlp_bf16_norm mlp_f32_m1 linear_bf16_m1; do
  VKCOMPUTE_PIPELINE_STATISTICS=1 timeout 60 "$g/bin/kernel_statistics" --only $p >> "$R/kstats.txt" 2>&1
done; grep -E "^\| (mlp|linear_bf16_m1)" "$R/kstats.txt" | cut -c1-120
echo "== ffn_reference.py at $(el) s"
python3 "$g/ffn_reference.py" --tokens 1,4 --out "$R/torch.json" > "$R/torch.txt" 2>&1; echo "rc=$?"
echo "== ffn_stack T=1,4 f32,bf16, blocks mlp,fused at $(el) s"
timeout 200 "$g/bin/ffn_stack" --tokens 1,4 --blocks mlp,fused --torch "$R/torch.json" --json "$R/ffn.json" > "$R/ffn.txt" 2>&1; echo "rc=$?"; grep -E "median|Error|panic|copy band|\]: (fused|two)" "$R/ffn.txt" | cut -c1-220
q=/tmp/q3; rm -rf $q
echo "== qwen3_reference.py at $(el) s"
python3 "$g/qwen3_reference.py" --out "$q" --size 4b --no-timing > "$R/q3_ref.txt" 2>&1; echo "ref rc=$?"
timeout 60 "$g/bin/qwen3" "$q" --reference "$q/reference.safetensors" > "$R/q3_check.txt" 2>&1; echo "check rc=$?"; grep -E "worst" "$R/q3_check.txt" | cut -c1-220
timeout 60 "$g/bin/qwen3" "$q" --reference "$q/reference.safetensors" --fused-mlp > "$R/q3_check_fused.txt" 2>&1; echo "check fused rc=$?"; grep -E "worst" "$R/q3_check_fused.txt" | cut -c1-220
for i in 1 2; do
  timeout 60 "$g/bin/qwen3" "$q" --decode 32 > "$R/q3_default_$i.txt" 2>&1; echo "default $i rc=$?"; grep -hE "^decode \(" "$R/q3_default_$i.txt" | cut -c1-200
  timeout 60 "$g/bin/qwen3" "$q" --decode 32 --fused-mlp > "$R/q3_fused_$i.txt" 2>&1; echo "fused $i rc=$?"; grep -hE "^decode \(" "$R/q3_fused_$i.txt" | cut -c1-200
done
timeout 60 "$g/bin/qwen3" "$q" --decode 32 --fused-mlp --profile > "$R/q3_fused_prof.txt" 2>&1; echo "fused prof rc=$?"; grep -hE "^  (vkcompute|total)" "$R/q3_fused_prof.txt" | tail -12 | cut -c1-200
timeout 60 "$g/bin/qwen3" "$q" --decode 32 --batch 4 > "$R/q3_b4.txt" 2>&1; echo "b4 default rc=$?"; grep -hE "^decode \(" "$R/q3_b4.txt" | cut -c1-200
timeout 60 "$g/bin/qwen3" "$q" --decode 32 --batch 4 --fused-mlp > "$R/q3_b4_fused.txt" 2>&1; echo "b4 fused rc=$?"; grep -hE "^decode \(" "$R/q3_b4_fused.txt" | cut -c1-200
echo "done at $(el) s"
