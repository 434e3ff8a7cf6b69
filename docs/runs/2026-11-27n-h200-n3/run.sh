#!/usr/bin/env bash
# Same-binary A/B of device features on the back-to-back round trips.
set -u
g=$(cd "$(dirname "$0")" && pwd)
source "$g/setup.sh" >/dev/null
W=$(mktemp -d); tar -xJf "$g/bundle.tar.xz" -C "$W"
export VKCOMPUTE_DEVICE=NVIDIA VKCOMPUTE_RT_ROWS=b2b
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for i in $(seq 1 ${PROCS:-8}); do
  for v in default nonv2 noe13 nocoop,noe13 base; do
    bin=$W/bin/gpu_report_exp; [ "$v" = base ] && bin=$W/bin/gpu_report_base
    VKC_EXP=$v taskset -c 2,3 "$bin" --only roundtrip --json "$W/x_${v/,/+}_$i.json" > /dev/null 2>&1 || echo "fail $v $i"
  done
done
tar -C "$W" -cJf "$OUT/x.tar.xz" $(cd "$W" && ls x_*.json)
