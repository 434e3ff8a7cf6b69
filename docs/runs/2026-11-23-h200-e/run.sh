#!/usr/bin/env bash
# Session run 3: graph by wait spin, streams/overlap with 2 default queues, ops (500 ms warm-up), matmul (peak in children).
set -u
g=$(cd "$(dirname "$0")" && pwd)
tar -C "$g" -xJf "$g/bundle.tar.xz"
export VKCOMPUTE_DEVICE=NVIDIA
W=$OUT
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv
T0=$(date +%s)
t() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
t "cuda_anchor (also warms the GPU)"; timeout 90 python3 "$g/cuda_anchor.py" > "$W/cuda_anchor.json" 2> "$W/cuda_anchor.err"
for spin in 50000 50 50000; do
  t "graph spin=$spin us"; VKCOMPUTE_GRAPH_WAIT_SPIN_US=$spin timeout 100 "$g/bin/graph" --json "$W/graph_spin$spin.json" > "$W/graph_spin$spin.txt" 2>&1; echo "rc=$?"; head -18 "$W/graph_spin$spin.txt" | cut -c1-130
done
for ex in streams pipeline_overlap; do
  t "$ex"; timeout 100 "$g/bin/$ex" --json "$W/$ex.json" > "$W/$ex.txt" 2>&1; echo "rc=$?"; tail -12 "$W/$ex.txt"
done
t "ops"; timeout 200 "$g/bin/ops" --anchor "$g/anchor_ops.json" --json "$W/ops.json" > "$W/ops.txt" 2>&1; echo "rc=$?"; tail -30 "$W/ops.txt"
t matmul; timeout 150 "$g/bin/matmul" --json "$W/matmul.json" > "$W/matmul.txt" 2>&1; echo "rc=$?"; tail -12 "$W/matmul.txt"
t done
