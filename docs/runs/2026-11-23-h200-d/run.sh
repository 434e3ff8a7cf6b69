#!/usr/bin/env bash
# Session run 2: graph (spinning waits), resident, ops --diag, startup by queue count, matmul.
set -u
g=$(cd "$(dirname "$0")" && pwd)
tar -C "$g" -xJf "$g/bundle.tar.xz"
export VKCOMPUTE_DEVICE=NVIDIA
W=$OUT
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv
T0=$(date +%s)
t() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
for ex in graph megakernel_resident; do
  t "$ex"; timeout 120 "$g/bin/$ex" --json "$W/$ex.json" > "$W/$ex.txt" 2>&1; echo "rc=$?"; tail -32 "$W/$ex.txt"
done
t "ops --diag"; timeout 200 "$g/bin/ops" --diag --anchor "$g/anchor_ops.json" --json "$W/ops.json" > "$W/ops.txt" 2>&1; echo "rc=$?"; cat "$W/ops.txt" | tail -75
for q in 1 2 4 9; do
  t "startup with $q compute queues"; VKCOMPUTE_COMPUTE_QUEUES=$q timeout 60 "$g/bin/gpu_report" --only startup --json "$W/startup_q$q.json" > "$W/startup_q$q.txt" 2>&1; grep -E "startup|phase" "$W/startup_q$q.txt" | head -8
done
t matmul; timeout 150 "$g/bin/matmul" --json "$W/matmul.json" > "$W/matmul.txt" 2>&1; echo "rc=$?"; tail -25 "$W/matmul.txt"
t done
