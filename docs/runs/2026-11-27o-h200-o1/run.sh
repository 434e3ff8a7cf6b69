#!/usr/bin/env bash
# Call o1: the fused SwiGLU MLP block (ops::swiglu_mlp) on the GPU: its
# tests and the qwen3 tests under validation; the FFN stack beside
# PyTorch with the fused block and the two linear layers in one process;
# features per workgroup 32 / 64 / 128 at one token; Qwen3-4B decode
# with the block and with --two-op-mlp, checked against transformers.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV)"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/o1.tar.xz" r && rm -rf "$R"' EXIT
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
for t in ops_mlp qwen3; do
  echo "== test_$t (validation + sync validation) at $(el) s"
  VK_LAYER_PATH=$g/layer VKCOMPUTE_VALIDATION=1 VKCOMPUTE_VALIDATION_ERRORS=1 timeout 120 "$g/bin/test_$t" --test-threads=1 > "$R/test_$t.txt" 2>&1; echo "rc=$?"; grep -E "test result|panicked|FAILED|skipped" "$R/test_$t.txt" | head -5
done
echo "== ffn_reference.py at $(el) s"
python3 "$g/ffn_reference.py" --tokens 1,4,16 --out "$R/torch.json" > "$R/torch.txt" 2>&1; echo "rc=$?"; tail -4 "$R/torch.txt"
echo "== ffn_stack T=1,4,16 f32,bf16, blocks mlp,linear at $(el) s"
timeout 200 "$g/bin/ffn_stack" --tokens 1,4,16 --blocks mlp,linear --torch "$R/torch.json" --json "$R/ffn.json" > "$R/ffn.txt" 2>&1; echo "rc=$?"; grep -E "median|Error|panic|copy band|\]: (fused|two)" "$R/ffn.txt" | cut -c1-220
echo "== ffn_stack bf16 T=1 features 32, 128 at $(el) s"
timeout 100 "$g/bin/ffn_stack" --dtypes bf16 --tokens 1 --blocks mlp_j32,mlp_j128,mlp --check-layers 1 > "$R/ffn_j.txt" 2>&1; echo "rc=$?"; grep -E "median|Error|panic" "$R/ffn_j.txt" | cut -c1-200
q=/tmp/q3; rm -rf $q
echo "== qwen3_reference.py at $(el) s"
python3 "$g/qwen3_reference.py" --out "$q" --size 4b --no-timing > "$R/q3_ref.txt" 2>&1; echo "ref rc=$?"
timeout 60 "$g/bin/qwen3" "$q" --reference "$q/reference.safetensors" > "$R/q3_check.txt" 2>&1; echo "check rc=$?"; grep -E "worst|greedy" "$R/q3_check.txt" | cut -c1-220
for i in 1 2; do
  timeout 60 "$g/bin/qwen3" "$q" --decode 32 --profile > "$R/q3_prof_$i.txt" 2>&1; echo "fused mlp $i rc=$?"
  grep -hE "^decode \(|^decode pipelined|^  total" "$R/q3_prof_$i.txt" | cut -c1-200
  timeout 60 "$g/bin/qwen3" "$q" --decode 32 --two-op-mlp > "$R/q3_two_$i.txt" 2>&1; echo "two-op mlp $i rc=$?"
  grep -hE "^decode \(|^decode pipelined" "$R/q3_two_$i.txt" | cut -c1-200
done
timeout 60 "$g/bin/qwen3" "$q" --decode 32 --batch 4 > "$R/q3_b4.txt" 2>&1; echo "b4 fused rc=$?"; grep -hE "^decode \(" "$R/q3_b4.txt" | cut -c1-200
timeout 60 "$g/bin/qwen3" "$q" --decode 32 --batch 4 --two-op-mlp > "$R/q3_b4_two.txt" 2>&1; echo "b4 two rc=$?"; grep -hE "^decode \(" "$R/q3_b4_two.txt" | cut -c1-200
echo "done at $(el) s"
