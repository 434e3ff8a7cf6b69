#!/usr/bin/env bash
# Call t7: the FFN stack (36 layers at Qwen3-4B's shape) with the 1-row
# launch rules (c7c1649): bf16 at 1 token against 57df6cf's build
# (bin/ffn_stack_base), builds alternating, three rounds; then the whole
# table (f32 and bf16 at 1, 4 and 16 tokens) beside PyTorch's CUDA graph
# (scripts/ffn_reference.py) in the same call.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV)"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/t7.tar.xz" r && rm -rf "$R"' EXIT
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
echo "== ffn_reference.py at $(el) s"
python3 "$g/ffn_reference.py" --tokens 1,4,16 --out "$R/torch.json" > "$R/torch.txt" 2>&1; echo "rc=$?"
for i in 1 2 3; do
  for b in _base ""; do
    timeout 120 "$g/bin/ffn_stack$b" --dtypes bf16 --tokens 1 --torch "$R/torch.json" > "$R/ffn${b}_bf16_t1_$i.txt" 2>&1; echo "ffn_stack$b round $i rc=$? at $(el) s"
    grep -E "median" "$R/ffn${b}_bf16_t1_$i.txt" | cut -c1-175
  done
done
timeout 300 "$g/bin/ffn_stack" --dtypes f32,bf16 --tokens 1,4,16 --torch "$R/torch.json" --profile > "$R/ffn_table.txt" 2>&1; echo "table rc=$? at $(el) s"
grep -E "median|copy band|differ|Error" "$R/ffn_table.txt" | cut -c1-175
echo "done at $(el) s"
