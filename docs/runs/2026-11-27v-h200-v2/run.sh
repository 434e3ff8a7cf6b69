#!/usr/bin/env bash
# Call v2: where the skinny kernels' time above the pure-read floor goes.
# linear_probe (weights from memory, 4 copies) with SPIR-V builds of the
# built-in subgroup-32 kernels and two measurement-only forms of their loop
# (probe_macros.diff): PROBE_NOX (x from registers, no x loads) and
# PROBE_NOMATH (the loaded W words folded into one add: the kernel's own
# load pattern, no arithmetic); beside stream_floor's read kernel at the
# same bytes.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV)"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/v2.tar.xz" r && rm -rf "$R"' EXIT
L=$g/lprobe
run() { local name=$1 shapes=$2; shift 2
  echo "== linear_probe $name --copies 4 --shapes $shapes"
  timeout 200 "$g/bin/linear_probe" --copies 4 --shapes "$shapes" "$@" > "$R/$name.txt" 2>&1; echo "rc=$?"; grep -vE "^ *$" "$R/$name.txt" | cut -c1-190; }
run gu1 "1,2560,19456,1" $L/gu.spv:4:1 $L/gu_nox.spv:4:1 $L/gu_nomath.spv:4:1
run dn1 "1,9728,2560,0,4" $L/c2.spv:4:1 $L/c2_nox.spv:4:1 $L/c2_nomath.spv:4:1
run gu4 "4,2560,19456,1" $L/m4.spv:4:4 $L/m4_nox.spv:4:4 $L/m4_nomath.spv:4:4
run dn4 "4,9728,2560,0,4" $L/m4.spv:4:4 $L/m4_nox.spv:4:4 $L/m4_nomath.spv:4:4
echo "== stream_floor --sizes-mb 50,100"
timeout 100 "$g/bin/stream_floor" --sizes-mb 50,100 > "$R/floor.txt" 2>&1; echo "rc=$?"; cut -c1-220 "$R/floor.txt"
