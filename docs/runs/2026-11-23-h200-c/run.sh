#!/usr/bin/env bash
# Session run 1a: anchors + graph + resident + megakernel + transfers.
set -u
g=$(cd "$(dirname "$0")" && pwd)
tar -C "$g" -xJf "$g/bundle.tar.xz"
export VKCOMPUTE_DEVICE=NVIDIA
W=$OUT
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv
T0=$(date +%s)
t() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
t "cuda_anchor"; timeout 90 python3 "$g/cuda_anchor.py" > "$W/cuda_anchor.json" 2> "$W/cuda_anchor.err"; tail -c 600 "$W/cuda_anchor.json"
t "cuda_ops_anchor"; timeout 150 python3 "$g/cuda_ops_anchor.py" > "$W/cuda_ops_anchor.json" 2> "$W/cuda_ops_anchor.err"
t "cuda_persist"; (nvcc -O3 -arch=native -o /tmp/cuda_persist "$g/cuda_persist.cu" && timeout 60 /tmp/cuda_persist > "$W/cuda_persist.jsonl") 2>&1 | tail -3
for ex in graph megakernel_resident megakernel; do
  t "$ex"; timeout 120 "$g/bin/$ex" --json "$W/$ex.json" > "$W/$ex.txt" 2>&1; echo "rc=$?"; cat "$W/$ex.txt" | tail -40
done
a() { python3 -c "import json,sys; print(json.load(open(sys.argv[1])).get(sys.argv[2], ''))" "$W/cuda_ops_anchor.json" "$1" 2>/dev/null; }
t transfer_bandwidth; timeout 90 "$g/bin/transfer_bandwidth" --json "$W/transfer_bandwidth.json" --torch-h2d "$(a h2d_pageable_GBps)" --torch-d2h "$(a d2h_pageable_GBps)" 2>&1 | tee "$W/transfer_bandwidth.txt"
t done
