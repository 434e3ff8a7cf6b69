#!/usr/bin/env bash
# Call q6: the final tree (the batched kernels as at c983050) at the
# Qwen3-4B prefill's four projections (matmul --prefill-shapes) beside
# cuBLAS's F.linear at the same shapes (cuda_reference.py --prefill-linear).
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV)"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/q6.tar.xz" r && rm -rf "$R"' EXIT
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
echo "== matmul --prefill-shapes"
timeout 100 "$g/bin/matmul" --prefill-shapes --json "$R/prefill_shapes.json" > "$R/prefill_shapes.txt" 2>&1; echo "rc=$? at $(el) s"
grep -E "^prefill" "$R/prefill_shapes.txt" | sed -E 's/B stored N×K; tile Some\(Cm2Tile \{ bm: ([0-9]+), bn: ([0-9]+).*\}\)/\1x\2/' | cut -c1-230
echo "== cuda_reference.py --prefill-linear"
python3 "$g/cuda_reference_mm.py" --prefill-linear --out "$R/cublas.json" > "$R/cublas.txt" 2>&1; echo "rc=$? at $(el) s"
grep -E "TFLOPs_(med|min|max)" "$R/cublas.json"
echo "done at $(el) s"
