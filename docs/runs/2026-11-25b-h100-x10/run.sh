#!/usr/bin/env bash
# Run 10: resident round trip beside the raw-Vulkan mailbox floor (own process) and cuda_persist.cu, same call.
set -u
g=$(cd "$(dirname "$0")" && pwd)
tar -C "$g" -xJf "$g/bin.tar.xz"
export VKCOMPUTE_DEVICE=NVIDIA
(nvcc -O3 -arch=native -o /tmp/cuda_persist "$g/cuda_persist.cu" && timeout 60 /tmp/cuda_persist > "$OUT/cuda_persist.jsonl"); echo rc=$?
for rep in 1 2 3; do
  timeout 60 "$g/bin/megakernel_resident" --json "$OUT/megakernel_resident$rep.json" --cuda-persist "$OUT/cuda_persist.jsonl" > "$OUT/megakernel_resident$rep.txt" 2>&1; echo rc=$?
  grep -E "^\||vs|throughput,|FAIL|panic" "$OUT/megakernel_resident$rep.txt" | cut -c1-150
done
