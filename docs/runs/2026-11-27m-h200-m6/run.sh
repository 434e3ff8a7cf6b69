#!/usr/bin/env bash
# Call m6: linear_probe at 4 rows, bf16 weights from memory (--copies 4):
# the built-in 4-row kernel (m4_bf, byte-identical to linear_bf16_sg32)
# against units of 8 rows of W (m4_r8_bf, m4_r8_c2_bf with two chunks per
# step, m4_r8 with subgroupAdd), so that each x value read feeds 8 rows.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV)"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/m6.tar.xz" r && rm -rf "$R"' EXIT
L=$g/lprobe
timeout 240 "$g/bin/linear_probe" --copies 4 --shapes "4,2560,19456,1;4,9728,2560,0,4;4,9728,2560,0,8" \
  $L/m4_bf.spv:4:4 $L/m4_r8_bf.spv:8:4 $L/m4_r8_c2_bf.spv:8:4 $L/m4_r8.spv:8:4 > "$R/linear_probe.txt" 2>&1; echo "rc=$?"
cat "$R/linear_probe.txt"
