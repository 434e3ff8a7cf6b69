#!/usr/bin/env bash
# Call v4: whether the 4-row skinny kernel's time over its loads is a
# partial last wave of workgroups: linear_probe at gate|up shapes whose
# units fill 0.5, 1, 1.15 (Qwen3-4B's) and 2 waves of resident workgroups
# (4 per compute unit at 64 registers), and at 1 row (3 per unit); the
# registers and spills of every SPIR-V build measured in v2-v4.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV)"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/v4.tar.xz" r && rm -rf "$R"' EXIT
L=$g/lprobe
echo "== kernel_statistics --spv"
timeout 100 "$g/bin/kernel_statistics" --spv $L/*.spv > "$R/kstats.txt" 2>&1; echo "rc=$?"; sed 's#/[^ ]*/lprobe/##' "$R/kstats.txt" | cut -c1-200 | head -40
run() { local name=$1 shapes=$2; shift 2
  echo "== linear_probe $name --copies 4 --shapes $shapes"
  timeout 200 "$g/bin/linear_probe" --copies 4 --shapes "$shapes" "$@" > "$R/$name.txt" 2>&1; echo "rc=$?"; grep -E "^==|µs" "$R/$name.txt" | sed 's#/[^ ]*/lprobe/##' | cut -c1-170; }
# 4 rows: 132 units x 4 workgroups x 8 subgroups = 4224 units a wave; a
# unit is 2 outputs (gate and up rows), N = 4 x units.
run w4 "4,2560,8448,1;4,2560,16896,1;4,2560,19456,1;4,2560,33792,1" $L/m4.spv:4:4 $L/m4_nomath.spv:4:4
# 1 row: 3 workgroups a unit (80 registers): 3168 units a wave.
run w1 "1,2560,6336,1;1,2560,12672,1;1,2560,19456,1;1,2560,25344,1" $L/gu.spv:4:1 $L/gu_nomath.spv:4:1
