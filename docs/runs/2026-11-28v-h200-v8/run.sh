#!/usr/bin/env bash
# Call v8: units of 8 rows (UNIT_ROWS=8: twice the W loads in flight per
# lane and step) for the 1-row layers, whose loads stand above the floor
# (v2); and units of 2 rows for gate|up. linear_probe --copies 4.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV)"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/v8.tar.xz" r && rm -rf "$R"' EXIT
L=$g/lprobe
timeout 100 "$g/bin/kernel_statistics" --spv $L/c2.spv $L/c2_r8.spv $L/c1_r8.spv $L/gu.spv $L/gu_r8.spv $L/gu_r2.spv > "$R/kstats.txt" 2>&1; sed 's#/[^ ]*/lprobe/##' "$R/kstats.txt" | grep "^| .*spv"
run() { local name=$1 shapes=$2; shift 2
  echo "== linear_probe $name --copies 4 --shapes $shapes"
  timeout 200 "$g/bin/linear_probe" --copies 4 --shapes "$shapes" "$@" > "$R/$name.txt" 2>&1; echo "rc=$?"; grep -E "µs|FAIL" "$R/$name.txt" | sed 's#/[^ ]*/lprobe/##' | cut -c1-170; }
run dn1 "1,9728,2560,0,4" $L/c2.spv:4:1 $L/c2_r8.spv:8:1:1 $L/c2_r8.spv:8:1:2 $L/c1_r8.spv:8:1:1 $L/c1_r8.spv:8:1:2
run o1 "1,4096,2560,0,4" $L/c2.spv:4:1 $L/c2_r8.spv:8:1:1 $L/c2_r8.spv:8:1:2 $L/c1_r8.spv:8:1:1
run gu1 "1,2560,19456,1" $L/gu.spv:4:1 $L/gu_r8.spv:8:1 $L/gu_r2.spv:2:1 $L/c2_r8.spv:8:1
