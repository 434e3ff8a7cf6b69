#!/usr/bin/env bash
# Call t4: launch shapes of the 1-row layers of a Qwen3-4B decode step
# that t1-t3 did not cover: the normed q|k|v (old kernel and the normed
# subgroup-32 build, 16, 8 and 4 units per workgroup), the narrowed o
# and down projections (the subgroupAdd and subgroup-32 builds at 2, 4
# and 8 units), linear_probe --copies 4, each after the command the
# model has before it where the probe has one (o before gate|up; none
# otherwise).
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV)"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/t4.tar.xz" r && rm -rf "$R"' EXIT
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
L=$g/lprobe
p() { # name, args...
  local n=$1; shift
  timeout 150 "$g/bin/linear_probe" --copies 4 "$@" > "$R/$n.txt" 2>&1; echo "$n rc=$? at $(el) s"
  grep -E "µs min|FAIL" "$R/$n.txt" | sed 's/  */ /g; s#/[^ ]*/lprobe/##' | cut -c1-150
}
p qkv --norm --shapes "1,2560,6144,0,2" $L/old.spv:4:1:16 $L/old.spv:4:1:8 $L/old.spv:4:1:4 $L/nsg4.spv:4:1:16 $L/nsg4.spv:4:1:8 $L/nsg2.spv:4:1:8
p o --shapes "1,4096,2560,0,4" $L/m1.spv:4:1:2 $L/m1.spv:4:1:4 $L/m1.spv:4:1:8 $L/m1sg.spv:4:1:2 $L/m1sg.spv:4:1:4 $L/m1sg2.spv:4:1:2 $L/m1sg2.spv:4:1:4
p down --shapes "1,9728,2560,0,4" $L/m1.spv:4:1:2 $L/m1.spv:4:1:4 $L/m1sg.spv:4:1:2 $L/m1sg.spv:4:1:4 $L/m1sg2.spv:4:1:2 $L/m1sg2.spv:4:1:4
echo "done at $(el) s"
