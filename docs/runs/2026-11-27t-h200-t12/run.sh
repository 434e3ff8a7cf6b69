#!/usr/bin/env bash
# Call t12: the FFN stack's table on an H200 with the final tree (the
# 1-row launch rules and the norm rule of this series): f32 and bf16 at
# 1, 4 and 16 tokens beside PyTorch's CUDA graph (scripts/ffn_reference.py)
# in the same call.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV)"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/t12.tar.xz" r && rm -rf "$R"' EXIT
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
python3 "$g/ffn_reference.py" --tokens 1,4,16 --out "$R/torch.json" > "$R/torch.txt" 2>&1; echo "reference rc=$? at $(el) s"
for i in 1 2; do
  timeout 300 "$g/bin/ffn_stack" --dtypes f32,bf16 --tokens 1,4,16 --torch "$R/torch.json" > "$R/ffn_table_$i.txt" 2>&1; echo "table $i rc=$? at $(el) s"
  grep -E "median|copy band|differ|Error" "$R/ffn_table_$i.txt" | cut -c1-175
done
echo "done at $(el) s"
