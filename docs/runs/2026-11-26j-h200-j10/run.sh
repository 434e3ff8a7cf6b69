#!/usr/bin/env bash
# Call j10: the split qwen3 test files (fbd6deb) under validation on the GPU.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV)"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/j10.tar.xz" r && rm -rf "$R"' EXIT
for t in qwen3 qwen3_f16_paths ops_nn_decode_qk; do
  echo "== test_$t (validation + sync validation)"
  VK_LAYER_PATH=$g/layer VKCOMPUTE_VALIDATION=1 VKCOMPUTE_VALIDATION_ERRORS=1 timeout 200 "$g/bin/test_$t" --test-threads=1 --nocapture > "$R/test_$t.txt" 2>&1; echo "rc=$?"; grep -E "test result|skipped|panicked|FAILED|decode plans" "$R/test_$t.txt" | head
done
