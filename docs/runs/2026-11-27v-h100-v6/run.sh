#!/usr/bin/env bash
# Call v6: the driver's internal representations of kernels
# (Kernel::internal_representations, new): the kernel_statistics test
# under validation and synchronization validation, then what the driver
# keeps for the skinny kernel's SPIR-V builds of v2-v5 (kernel_statistics
# --ir).
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV)"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/v6.tar.xz" r && rm -rf "$R"' EXIT
L=$g/lprobe
for t in kernel_statistics; do
  VK_LAYER_PATH=$g/layer VKCOMPUTE_VALIDATION=1 VKCOMPUTE_VALIDATION_ERRORS=1 timeout 150 "$g/bin/test_$t" --test-threads=1 --nocapture > "$R/test_$t.txt" 2>&1; echo "$t rc=$?"
  grep -E "test result|panicked|FAILED|skipped|error|bytes, text" "$R/test_$t.txt" | head -12 | cut -c1-250
done
echo "== kernel_statistics --ir"
timeout 200 "$g/bin/kernel_statistics" --ir "$R/ir" --spv $L/m4.spv $L/m4_pf.spv $L/m4_nox.spv $L/m4_nomath.spv $L/gu.spv $L/c2.spv > "$R/kstats.txt" 2>&1; echo "rc=$?"
sed 's#/[^ ]*/lprobe/##' "$R/kstats.txt" | cut -c1-220 | head -30
ls -la "$R/ir" 2>/dev/null | head -20
f=$(ls "$R"/ir/m4.spv.* 2>/dev/null | head -1); [ -n "$f" ] && head -c 3000 "$f"
