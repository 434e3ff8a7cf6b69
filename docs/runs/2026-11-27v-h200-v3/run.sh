#!/usr/bin/env bash
# Call v3: the 4-row skinny kernel's arithmetic against its loads (v2: 8.3
# of 35.4 us at gate|up): software prefetch of the next step's W
# (PREFETCH), two chunks per step (CPS=2), units of 2 rows (UNIT_ROWS=2),
# 128 invocations; linear_probe, weights from memory (4 copies).
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV)"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/v3.tar.xz" r && rm -rf "$R"' EXIT
L=$g/lprobe
run() { local name=$1 shapes=$2; shift 2
  echo "== linear_probe $name --copies 4 --shapes $shapes"
  timeout 200 "$g/bin/linear_probe" --copies 4 --shapes "$shapes" "$@" > "$R/$name.txt" 2>&1; echo "rc=$?"; grep -vE "^ *$" "$R/$name.txt" | sed 's#/[^ ]*/lprobe/##' | cut -c1-170; }
V4="$L/m4.spv:4:4 $L/m4_pf.spv:4:4 $L/m4_c2.spv:4:4 $L/m4_c2_pf.spv:4:4 $L/m4_r2.spv:2:4 $L/m4_r2_pf.spv:2:4 $L/m4_r2_c2.spv:2:4 $L/m4_r2_c2_pf.spv:2:4 $L/m4_w128_pf.spv:4:4 $L/m4_nomath.spv:4:4"
run gu4 "4,2560,19456,1" $V4
run dn4 "4,9728,2560,0,4" $V4
run gu1 "1,2560,19456,1" $L/gu.spv:4:1 $L/gu_pf.spv:4:1
run dn1 "1,9728,2560,0,4" $L/c2.spv:4:1 $L/c2_pf.spv:4:1
