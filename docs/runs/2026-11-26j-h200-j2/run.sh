#!/usr/bin/env bash
# Call j2: launch shapes of the skinny kernels at 1 and 4 rows (linear_probe, weights from memory) and their register counts.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV)"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/j2.tar.xz" r && rm -rf "$R"' EXIT
L=$g/lprobe
echo "== kernel_statistics --only linear_bf16"
timeout 60 "$g/bin/kernel_statistics" --only linear_bf16 > "$R/kstats.txt" 2>&1; echo "rc=$?"; cut -c1-160 "$R/kstats.txt" | head -40
run() { local name=$1 shapes=$2; shift 2
  echo "== linear_probe $name --copies 4 --shapes $shapes"
  timeout 200 "$g/bin/linear_probe" --copies 4 --shapes "$shapes" "$@" > "$R/$name.txt" 2>&1; echo "rc=$?"; grep -vE "^ *$" "$R/$name.txt" | cut -c1-190; }
run gu1 "1,2560,19456,1" $L/gu.spv:4:1 $L/gu.spv:4:1:16 $L/gu.spv:4:1:32 $L/gu.spv:4:1:4 $L/gu.spv:4:1:2 $L/gu_w128.spv:4:1 $L/gu_w512.spv:4:1 $L/gu_c2.spv:4:1 $L/gu_c2.spv:4:1:4
run dn1 "1,9728,2560,0,4" $L/dn.spv:4:1 $L/dn.spv:4:1:1 $L/dn.spv:4:1:4 $L/dn.spv:4:1:8 $L/gu.spv:4:1 $L/gu.spv:4:1:1 $L/gu.spv:4:1:4 $L/gu_c2.spv:4:1:1 $L/gu_w128.spv:4:1:1
run gu4 "4,2560,19456,1" $L/m4.spv:4:4 $L/m4.spv:4:4:4 $L/m4.spv:4:4:2 $L/m4.spv:4:4:16 $L/m4_c2.spv:4:4 $L/m4_c2.spv:4:4:4 $L/m4_w128.spv:4:4
run dn4 "4,9728,2560,0,4" $L/m4.spv:4:4 $L/m4.spv:4:4:1 $L/m4.spv:4:4:4 $L/m4_c2.spv:4:4 $L/m4_c2.spv:4:4:1 $L/m4_w128.spv:4:4:1
