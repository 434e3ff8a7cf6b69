#!/usr/bin/env bash
# Call p9: the final tree's other suites that can reach the split-K paths
# (op-batch programs, the normed linear layers, the MLP block) under
# validation and synchronization validation on the GPU.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV)"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/p9.tar.xz" r && rm -rf "$R"' EXIT
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
for t in op_batch op_batch_dtypes op_batch_graph op_batch_nn op_batch_props ops_linear_normed ops_mlp; do
  echo "== test_$t (validation + sync validation) at $(el) s"
  VK_LAYER_PATH=$g/layer VKCOMPUTE_VALIDATION=1 VKCOMPUTE_VALIDATION_ERRORS=1 timeout 100 "$g/bin/test_$t" --test-threads=1 > "$R/test_$t.txt" 2>&1; echo "rc=$?"; grep -E "test result|panicked|FAILED" "$R/test_$t.txt" | head -4
done
echo "done at $(el) s"
