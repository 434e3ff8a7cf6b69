#!/usr/bin/env bash
# Call t9: launch shapes of the 4-row layers (a decode step of 4
# sequences, the FFN stack at 4 tokens): the built-in subgroup-32 builds
# (m4sg = linear_bf16_sg32, m4nsg = linear_bf16_norm_sg32) and their
# two-chunk builds at 16, 8, 4 and 2 units per workgroup, beside the
# default plan, linear_probe --copies 4.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV)"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/t9.tar.xz" r && rm -rf "$R"' EXIT
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
L=$g/lprobe
p() { # name, args...
  local n=$1; shift
  timeout 150 "$g/bin/linear_probe" --copies 4 "$@" > "$R/$n.txt" 2>&1; echo "$n rc=$? at $(el) s"
  grep -E "µs min|FAIL" "$R/$n.txt" | sed 's/  */ /g; s#/[^ ]*/lprobe/##' | cut -c1-150
}
p gu4 --norm --shapes "4,2560,19456,1" $L/m4nsg.spv:4:4:16 $L/m4nsg.spv:4:4:8 $L/m4nsg.spv:4:4:4 $L/m4nsg2.spv:4:4:16 $L/m4nsg2.spv:4:4:8
p qkv4 --norm --shapes "4,2560,6144,0" $L/m4nsg.spv:4:4:8 $L/m4nsg.spv:4:4:4 $L/m4nsg.spv:4:4:2 $L/m4nsg2.spv:4:4:4
p gu4_plain --shapes "4,2560,19456,1" $L/m4sg.spv:4:4:16 $L/m4sg.spv:4:4:8 $L/m4sg2.spv:4:4:16
p o4 --shapes "4,4096,2560,0" $L/m4sg.spv:4:4:4 $L/m4sg.spv:4:4:2 $L/m4sg.spv:4:4:1 $L/m4sg2.spv:4:4:2
p down4 --shapes "4,9728,2560,0" $L/m4sg.spv:4:4:4 $L/m4sg.spv:4:4:2 $L/m4sg.spv:4:4:1 $L/m4sg2.spv:4:4:2
echo "done at $(el) s"
