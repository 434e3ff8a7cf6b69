#!/usr/bin/env bash
# Session 2026-11-25, perf call: CUDA references first (they also warm the
# GPU), then matmul (coopmat ceiling + 16-byte shared-store variant + fp32
# sweep), the megakernel examples, graph, streams, and gpu_report's
# dispatch rows (push descriptors, then pooled sets). Run from the project
# root on the GPU machine after `source .gpu_perf/setup.sh`; copied into
# .gpu_perf/ by hand after `bash scripts/gpu_bundle.sh perf`.
set -u
g=$(cd "$(dirname "$0")" && pwd)
tar -C "$g" -xJf "$g/bundle.tar.xz"
export VKCOMPUTE_DEVICE=NVIDIA
W=$(mktemp -d)
trap 'tar -C "$W" -cJf "$OUT/results.tar.xz" .' EXIT
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv
T0=$(date +%s)
t() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
t "cuda_anchor.py"; timeout 100 python3 "$g/cuda_anchor.py" > "$W/cuda_anchor.json" 2> "$W/cuda_anchor.err"; echo "rc=$?"
t "cuda_persist.cu"; (nvcc -O3 -arch=native -o "$W/cuda_persist" "$g/cuda_persist.cu" && timeout 60 "$W/cuda_persist" > "$W/cuda_persist.jsonl"); echo "rc=$?"; rm -f "$W/cuda_persist"
t "cuda_ops_anchor.py"; timeout 150 python3 "$g/cuda_ops_anchor.py" > "$W/cuda_ops_anchor.json" 2> "$W/cuda_ops_anchor.err"; echo "rc=$?"
grep -E "gemm|h2d|d2h" "$W/cuda_ops_anchor.json" | tr -d '\n'; echo
t "matmul"; timeout 170 "$g/bin/matmul" --json "$W/matmul.json" > "$W/matmul.txt" 2>&1; echo "rc=$?"; grep -vE "^(caps|KHR|NV) " "$W/matmul.txt" | cut -c1-150
t "megakernel"; timeout 80 "$g/bin/megakernel" --json "$W/megakernel.json" --cuda-persist "$W/cuda_persist.jsonl" > "$W/megakernel.txt" 2>&1; echo "rc=$?"; tail -25 "$W/megakernel.txt" | cut -c1-160
t "megakernel_resident"; timeout 60 "$g/bin/megakernel_resident" --json "$W/megakernel_resident.json" --cuda-persist "$W/cuda_persist.jsonl" > "$W/megakernel_resident.txt" 2>&1; echo "rc=$?"; tail -20 "$W/megakernel_resident.txt" | cut -c1-160
t "graph"; timeout 90 "$g/bin/graph" --json "$W/graph.json" --cuda-persist "$W/cuda_persist.jsonl" --cuda-anchor "$W/cuda_anchor.json" > "$W/graph.txt" 2>&1; echo "rc=$?"; tail -30 "$W/graph.txt" | cut -c1-170
t "streams"; timeout 40 "$g/bin/streams" --json "$W/streams.json" > "$W/streams.txt" 2>&1; echo "rc=$?"; tail -8 "$W/streams.txt"
t "gpu_report dispatch (push descriptors)"; timeout 60 "$g/bin/gpu_report" --only dispatch --cuda "$W/cuda_anchor.json" --json "$W/report.json" > "$W/report.txt" 2>&1; echo "rc=$?"; grep -iE "record|dispatch|chain|round" "$W/report.txt" | cut -c1-170 | head -30
t "gpu_report dispatch (pooled sets)"; VKCOMPUTE_PUSH_DESCRIPTORS=0 timeout 60 "$g/bin/gpu_report" --only dispatch --json "$W/report_pooled.json" > "$W/report_pooled.txt" 2>&1; echo "rc=$?"; grep -iE "record|bind" "$W/report_pooled.txt" | cut -c1-170 | head -12
t done
