#!/usr/bin/env bash
# Call v7: a CUDA twin of the skinny kernel's subgroup-32 loop
# (scripts/cuda/skinny_twin.cu) beside the Vulkan builds on the same card:
# whether NVIDIA's CUDA compiler hides the 4-row loop's arithmetic under
# its loads.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV)"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/v7.tar.xz" r && rm -rf "$R"' EXIT
L=$g/lprobe
nvcc --version | tail -2
nvcc -O3 -arch=sm_90 -Xptxas -v -o /tmp/skinny_twin "$g/cuda/skinny_twin.cu" > "$R/ptxas.txt" 2>&1; echo "nvcc rc=$?"
grep -E "Compiling|registers|spill" "$R/ptxas.txt" | sed 's/ptxas info *: //' | cut -c1-160 | head -40
cuobjdump -sass /tmp/skinny_twin > "$R/sass.txt" 2>&1; echo "cuobjdump rc=$? $(wc -l < "$R/sass.txt") lines"
echo "== twin, gate|up shape"; /tmp/skinny_twin 19456 2560 | tee "$R/twin_gu.txt"
echo "== twin, down shape"; /tmp/skinny_twin 2560 9728 | tee "$R/twin_dn.txt"
run() { local name=$1 shapes=$2; shift 2
  echo "== linear_probe $name --copies 4 --shapes $shapes"
  timeout 200 "$g/bin/linear_probe" --copies 4 --shapes "$shapes" "$@" > "$R/$name.txt" 2>&1; echo "rc=$?"; grep -E "µs" "$R/$name.txt" | sed 's#/[^ ]*/lprobe/##' | cut -c1-170; }
run gu "1,2560,19456,0;4,2560,19456,0" $L/gu.spv:4:1 $L/m4.spv:4:4 $L/m4_nomath.spv:4:4
