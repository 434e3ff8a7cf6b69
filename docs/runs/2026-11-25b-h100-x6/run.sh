#!/usr/bin/env bash
# Exploration run 6: resident host push without a clock read, wait without PAUSE, device polls pipelined two deep.
set -u
g=$(cd "$(dirname "$0")" && pwd)
tar -C "$g" -xJf "$g/bin.tar.xz"
export VKCOMPUTE_DEVICE=NVIDIA
W=$OUT
T0=$(date +%s); t() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
P="#define MKR_PIPE 1;"
for rep in 1 2; do
for v in "base|||" "notime|1||" "notime_nopause|1|1|" "pipe|||$P" "pipe_all|1|1|$P"; do
  IFS='|' read -r name nt np defs <<< "$v"
  t "resident $name"
  unset VKCOMPUTE_EXP_NOTIME VKCOMPUTE_EXP_NOPAUSE
  [ -n "$nt" ] && export VKCOMPUTE_EXP_NOTIME=1
  [ -n "$np" ] && export VKCOMPUTE_EXP_NOPAUSE=1
  MKR_EXP_CLK=1 VKCOMPUTE_EXP_DEFINES="$defs" timeout 40 "$g/bin/megakernel_resident" > "$W/res_$name.txt" 2>&1; echo rc=$?
  grep -E "EXP|resident ring|throughput,|FAIL|panic" "$W/res_$name.txt" | cut -c1-130
done
done
t done
