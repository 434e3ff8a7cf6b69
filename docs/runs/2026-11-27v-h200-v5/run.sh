#!/usr/bin/env bash
# Call v5: what an even split of the skinny kernels' work over the grid
# would save (v4: Qwen3-4B's gate|up at 4 rows is 1.15 waves of
# workgroups, the last 0.15 costing about 4 us). PROBE_BALANCED builds
# (probe_macros.diff): every subgroup takes an equal range of the units'
# chunks; units split between two subgroups are stored part by part
# (timing only, no fix-up).
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV)"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/v5.tar.xz" r && rm -rf "$R"' EXIT
L=$g/lprobe
timeout 100 "$g/bin/kernel_statistics" --spv $L/*bal*.spv > "$R/kstats.txt" 2>&1; sed 's#/[^ ]*/lprobe/##' "$R/kstats.txt" | grep "^| .*spv"
run() { local name=$1 shapes=$2; shift 2
  echo "== linear_probe $name --copies 4 --shapes $shapes"
  timeout 200 "$g/bin/linear_probe" --copies 4 --shapes "$shapes" "$@" > "$R/$name.txt" 2>&1; echo "rc=$?"; grep -E "^==|µs|FAIL" "$R/$name.txt" | sed 's#/[^ ]*/lprobe/##' | cut -c1-170; }
run gu4 "4,2560,19456,1" $L/m4.spv:4:4 $L/m4_bal.spv:4:4:10 $L/m4_bal.spv:4:4:12 $L/m4_bal.spv:4:4:16
run dn4 "4,9728,2560,0,4" $L/m4.spv:4:4 $L/m4_bal.spv:4:4:2 $L/m4_bal.spv:4:4:1
run gu1 "1,2560,19456,1" $L/gu.spv:4:1 $L/gu_bal.spv:4:1:13 $L/gu_bal.spv:4:1:16
run dn1 "1,9728,2560,0,4" $L/c2.spv:4:1 $L/c2_bal.spv:4:1:2 $L/c2_bal.spv:4:1:1
run qkv1 "1,2560,6144,0" $L/gu.spv:4:1 $L/gu_bal.spv:4:1:4 $L/gu_bal.spv:4:1:5
