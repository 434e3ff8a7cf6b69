#!/usr/bin/env bash
# Call p4: the tensor-core streaming kernel's K layers of an in-place residual
# add adding into y with f32 atomic adds (no partials, no reduction pass)
# against the tree before it (bin/*_base), in the same call: ops_linear_stream and qwen3 under
# validation; the bf16 FFN stack at 16 and 64 tokens beside PyTorch;
# Qwen3-4B decode at B = 16 (tensor-core products), alternating builds,
# and its profile.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV)"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/p4.tar.xz" r && rm -rf "$R"' EXIT
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
for t in ops_linear_stream qwen3; do
  echo "== test_$t (validation + sync validation) at $(el) s"
  VK_LAYER_PATH=$g/layer VKCOMPUTE_VALIDATION=1 VKCOMPUTE_VALIDATION_ERRORS=1 timeout 150 "$g/bin/test_$t" --test-threads=1 > "$R/test_$t.txt" 2>&1; echo "rc=$?"; grep -E "test result|panicked|FAILED|skipped" "$R/test_$t.txt" | head -5
done
echo "== ffn_reference.py at $(el) s"
python3 "$g/ffn_reference.py" --tokens 16,64 --out "$R/torch.json" > "$R/torch.txt" 2>&1; echo "rc=$?"
for i in 1 2; do
  for b in "" _base; do
    echo "== ffn_stack$b bf16 T=16,64 round $i at $(el) s"
    timeout 120 "$g/bin/ffn_stack$b" --dtypes bf16 --tokens 16,64 --torch "$R/torch.json" > "$R/ffn${b}_$i.txt" 2>&1; echo "rc=$?"; grep -E "median|Error|panic|differ" "$R/ffn${b}_$i.txt" | cut -c1-200
  done
done
q=/tmp/q3; rm -rf $q
echo "== qwen3_reference.py at $(el) s"
python3 "$g/qwen3_reference.py" --out "$q" --size 4b --no-timing > "$R/q3_ref.txt" 2>&1; echo "ref rc=$?"
timeout 60 "$g/bin/qwen3" "$q" --reference "$q/reference.safetensors" > "$R/q3_check.txt" 2>&1; echo "check rc=$?"; grep -E "worst" "$R/q3_check.txt" | cut -c1-220
for i in 1 2; do
  for b in "" _base; do
    timeout 60 "$g/bin/qwen3$b" "$q" --decode 32 --batch 16 > "$R/q3${b}_b16_$i.txt" 2>&1; echo "b16$b $i rc=$?"; grep -hE "^decode \(|^decode pipelined" "$R/q3${b}_b16_$i.txt" | cut -c1-200
  done
done
timeout 60 "$g/bin/qwen3" "$q" --decode 32 --batch 16 --profile > "$R/q3_b16_prof.txt" 2>&1; echo "prof rc=$?"; grep -hE "^  (vkcompute|total)" "$R/q3_b16_prof.txt" | tail -10 | cut -c1-200
timeout 60 "$g/bin/qwen3" "$q" --decode 32 > "$R/q3_b1.txt" 2>&1; echo "b1 rc=$?"; grep -hE "^decode \(" "$R/q3_b1.txt" | cut -c1-200
echo "done at $(el) s"
