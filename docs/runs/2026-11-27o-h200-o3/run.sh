#!/usr/bin/env bash
# Call o3: the final tree's fused MLP builds (32 features per workgroup)
# under validation on the GPU, with the qwen3 tests; the FFN stack with
# the default block, the fused kernel and the two linear layers in one
# process beside PyTorch; Qwen3-4B decode at B = 1 with and without
# --fused-mlp, checked against transformers.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV)"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/o3.tar.xz" r && rm -rf "$R"' EXIT
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
for t in ops_mlp qwen3; do
  echo "== test_$t (validation + sync validation) at $(el) s"
  VK_LAYER_PATH=$g/layer VKCOMPUTE_VALIDATION=1 VKCOMPUTE_VALIDATION_ERRORS=1 timeout 120 "$g/bin/test_$t" --test-threads=1 > "$R/test_$t.txt" 2>&1; echo "rc=$?"; grep -E "test result|panicked|FAILED|skipped" "$R/test_$t.txt" | head -5
done
echo "== ffn_reference.py at $(el) s"
python3 "$g/ffn_reference.py" --tokens 1,4 --out "$R/torch.json" > "$R/torch.txt" 2>&1; echo "rc=$?"
echo "== ffn_stack T=1,4 f32,bf16, blocks mlp,fused,linear at $(el) s"
timeout 200 "$g/bin/ffn_stack" --tokens 1,4 --blocks mlp,fused,linear --torch "$R/torch.json" --json "$R/ffn.json" > "$R/ffn.txt" 2>&1; echo "rc=$?"; grep -E "median|Error|panic|copy band|\]: (fused|two)" "$R/ffn.txt" | cut -c1-220
q=/tmp/q3; rm -rf $q
echo "== qwen3_reference.py at $(el) s"
python3 "$g/qwen3_reference.py" --out "$q" --size 4b --no-timing > "$R/q3_ref.txt" 2>&1; echo "ref rc=$?"
timeout 60 "$g/bin/qwen3" "$q" --reference "$q/reference.safetensors" > "$R/q3_check.txt" 2>&1; echo "check rc=$?"; grep -E "worst" "$R/q3_check.txt" | cut -c1-220
for i in 1 2; do
  timeout 60 "$g/bin/qwen3" "$q" --decode 32 > "$R/q3_default_$i.txt" 2>&1; echo "default $i rc=$?"; grep -hE "^decode \(" "$R/q3_default_$i.txt" | cut -c1-200
  timeout 60 "$g/bin/qwen3" "$q" --decode 32 --fused-mlp > "$R/q3_fused_$i.txt" 2>&1; echo "fused $i rc=$?"; grep -hE "^decode \(" "$R/q3_fused_$i.txt" | cut -c1-200
done
echo "done at $(el) s"
