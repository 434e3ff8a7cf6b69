#!/usr/bin/env bash
# Call r7: every batched N×K tile of the f16 workgroup-scope product at the
# Qwen3-4B prefill's four projections (matmul --prefill-shapes
# --prefill-tiles: the default choice, 128×128 in groups of 8, 64×128, and
# the new 64×64 and 128×64 builds), beside cuBLAS F.linear at the same
# shapes (cuda_reference.py --prefill-linear) in the same call; the
# batched-product tests under validation.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV)"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/r7.tar.xz" r && rm -rf "$R"' EXIT
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
echo "== matmul --prefill-shapes --prefill-tiles"
timeout 300 "$g/bin/matmul" --prefill-shapes --prefill-tiles --json "$R/matmul_prefill.json" > "$R/matmul_prefill.txt" 2>&1; echo "rc=$?"
grep -E "^prefill512" "$R/matmul_prefill.txt" | cut -c1-150
echo "== cuda_reference.py --prefill-linear at $(el) s"
python3 "$g/cuda_reference_mm.py" --prefill-linear --out "$R/cuda_prefill.json" > "$R/cuda_prefill.txt" 2>&1; echo "rc=$?"
grep -E "cublas_f16_TFLOPs_med" "$R/cuda_prefill.txt"
echo "done at $(el) s"
