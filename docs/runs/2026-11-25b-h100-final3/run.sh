#!/usr/bin/env bash
# Session 2026-11-25 (second), final perf call for issues 8 and 10: CUDA
# references first (they also warm the GPU), then the megakernel examples,
# graph, streams, pipeline_overlap, async_tokio and transfer_bandwidth.
# Run from the project root on the GPU machine after
# `source .gpu_final/setup.sh`; the binaries are release builds of commit
# named in docs/runs/2026-11-25b-h100-final/README.md, stripped and packed
# into .gpu_final/bin.tar.xz by hand.
set -u
g=$(cd "$(dirname "$0")" && pwd)
tar -C "$g" -xJf "$g/bin.tar.xz"
export VKCOMPUTE_DEVICE=NVIDIA
W=$(mktemp -d)
trap 'tar -C "$W" -cJf "$OUT/results.tar.xz" .' EXIT
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv
T0=$(date +%s)
t() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
t "cuda_persist.cu"; (nvcc -O3 -arch=native -o "$W/cuda_persist" "$g/cuda_persist.cu" && timeout 60 "$W/cuda_persist" > "$W/cuda_persist.jsonl"); echo "rc=$?"; rm -f "$W/cuda_persist"
t "cuda_anchor.py"; timeout 100 python3 "$g/cuda_anchor.py" > "$W/cuda_anchor.json" 2> "$W/cuda_anchor.err"; echo "rc=$?"
t "cuda_ops_anchor.py"; timeout 170 python3 "$g/cuda_ops_anchor.py" > "$W/cuda_ops_anchor.json" 2> "$W/cuda_ops_anchor.err"; echo "rc=$?"
key() { python3 -c "import json,sys; print(json.load(open(sys.argv[1])).get(sys.argv[2], ''))" "$W/cuda_ops_anchor.json" "$1" 2>/dev/null; }
h2d=$(key h2d_pageable_GBps); d2h=$(key d2h_pageable_GBps); echo "torch pageable h2d=$h2d d2h=$d2h"
t "megakernel"; timeout 80 "$g/bin/megakernel" --json "$W/megakernel.json" --cuda-persist "$W/cuda_persist.jsonl" > "$W/megakernel.txt" 2>&1; echo "rc=$?"; tail -25 "$W/megakernel.txt" | cut -c1-170
t "megakernel_resident"; timeout 60 "$g/bin/megakernel_resident" --json "$W/megakernel_resident.json" --cuda-persist "$W/cuda_persist.jsonl" > "$W/megakernel_resident.txt" 2>&1; echo "rc=$?"; tail -16 "$W/megakernel_resident.txt" | cut -c1-170
t "graph"; timeout 120 "$g/bin/graph" --json "$W/graph.json" --cuda-persist "$W/cuda_persist.jsonl" --cuda-anchor "$W/cuda_anchor.json" > "$W/graph.txt" 2>&1; echo "rc=$?"; tail -32 "$W/graph.txt" | cut -c1-230
t "streams"; timeout 40 "$g/bin/streams" --json "$W/streams.json" > "$W/streams.txt" 2>&1; echo "rc=$?"; tail -8 "$W/streams.txt"
t "pipeline_overlap"; timeout 60 "$g/bin/pipeline_overlap" --json "$W/pipeline_overlap.json" > "$W/pipeline_overlap.txt" 2>&1; echo "rc=$?"; tail -8 "$W/pipeline_overlap.txt"
t "async_tokio"; timeout 60 "$g/bin/async_tokio" --json "$W/async_tokio.json" > "$W/async_tokio.txt" 2>&1; echo "rc=$?"; tail -10 "$W/async_tokio.txt"
args=(); [ -n "$h2d" ] && args+=(--torch-h2d "$h2d"); [ -n "$d2h" ] && args+=(--torch-d2h "$d2h")
t "transfer_bandwidth"; timeout 60 "$g/bin/transfer_bandwidth" --json "$W/transfer_bandwidth.json" "${args[@]}" > "$W/transfer_bandwidth.txt" 2>&1; echo "rc=$?"; tail -10 "$W/transfer_bandwidth.txt"
t done
