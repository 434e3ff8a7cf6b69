#!/usr/bin/env bash
# Call t8: workgroup sizes of the 1-row layers of a Qwen3-4B decode step
# beside the default plan (c7c1649): SPIR-V builds of
# shaders/linear_bf16.comp with WG_SIZE 128 and 512 (linear_probe
# --copies 4; FILE:4:1:UPW = UPW units per workgroup, the workgroup's
# other subgroups sharing them).
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV)"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/t8.tar.xz" r && rm -rf "$R"' EXIT
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
L=$g/lprobe
p() { # name, args...
  local n=$1; shift
  timeout 150 "$g/bin/linear_probe" --copies 4 "$@" > "$R/$n.txt" 2>&1; echo "$n rc=$? at $(el) s"
  grep -E "µs min|FAIL" "$R/$n.txt" | sed 's/  */ /g; s#/[^ ]*/lprobe/##' | cut -c1-150
}
p qkv --norm --shapes "1,2560,6144,0" $L/nsg4_w128.spv:4:1:4 $L/nsg4_w128.spv:4:1:2 $L/nsg4_w512.spv:4:1:16 $L/nsg4_w512.spv:4:1:8 $L/nsg2.spv:4:1:8
p gu --norm --shapes "1,2560,19456,1" $L/old_w128.spv:4:1:4 $L/old_w512.spv:4:1:16 $L/nsg2.spv:4:1:8 $L/old.spv:4:1:16
p o --shapes "1,4096,2560,0" $L/m1sg2_w128.spv:4:1:1 $L/m1sg2_w128.spv:4:1:2 $L/m1sg2_w512.spv:4:1:4 $L/m1sg2_w512.spv:4:1:2
p down --shapes "1,9728,2560,0" $L/m1sg2_w128.spv:4:1:1 $L/m1sg2_w128.spv:4:1:2 $L/m1sg2_w512.spv:4:1:4 $L/m1sg2_w512.spv:4:1:2
echo "done at $(el) s"
