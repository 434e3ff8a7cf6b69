#!/usr/bin/env bash
# Call p6: the final tree (skinny split-K slices adding into y at 4 rows
# only) against the tree before the atomic adds (bin/*_base): ops_linear
# under validation; the f32 FFN stack at 4 and 16 tokens and bf16 at 16,
# builds alternating, two rounds.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV)"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/p6.tar.xz" r && rm -rf "$R"' EXIT
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
echo "== test_ops_linear (validation + sync validation) at $(el) s"
VK_LAYER_PATH=$g/layer VKCOMPUTE_VALIDATION=1 VKCOMPUTE_VALIDATION_ERRORS=1 timeout 150 "$g/bin/test_ops_linear" --test-threads=1 > "$R/test_ops_linear.txt" 2>&1; echo "rc=$?"; grep -E "test result|panicked|FAILED" "$R/test_ops_linear.txt" | head -5
echo "== ffn_reference.py at $(el) s"
python3 "$g/ffn_reference.py" --tokens 4,16 --out "$R/torch.json" > "$R/torch.txt" 2>&1; echo "rc=$?"
for i in 1 2; do
  for b in "" _base; do
    echo "== ffn_stack$b round $i at $(el) s"
    timeout 120 "$g/bin/ffn_stack$b" --dtypes f32 --tokens 4,16 --torch "$R/torch.json" > "$R/ffn${b}_$i.txt" 2>&1; echo "rc=$?"; grep -E "median|Error|panic|differ|\(rows" "$R/ffn${b}_$i.txt" | cut -c1-175
    timeout 120 "$g/bin/ffn_stack$b" --dtypes bf16 --tokens 16 --torch "$R/torch.json" >> "$R/ffn${b}_$i.txt" 2>&1; echo "rc=$?"; grep -E "bf16.*median" "$R/ffn${b}_$i.txt" | cut -c1-175
  done
done
echo "done at $(el) s"
