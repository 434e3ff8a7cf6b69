#!/usr/bin/env bash
# Call o7: the final tree's ops_mlp (with the fused kernel in several
# passes of one row) and qwen3 tests under validation on the GPU.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV)"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/o7.tar.xz" r && rm -rf "$R"' EXIT
for t in ops_mlp qwen3 ops_linear_normed; do
  echo "== test_$t (validation + sync validation)"
  VK_LAYER_PATH=$g/layer VKCOMPUTE_VALIDATION=1 VKCOMPUTE_VALIDATION_ERRORS=1 timeout 120 "$g/bin/test_$t" --test-threads=1 > "$R/test_$t.txt" 2>&1; echo "rc=$?"; grep -E "test result|panicked|FAILED|skipped" "$R/test_$t.txt" | head -5
done
