#!/usr/bin/env bash
# Run 17: the resident round trip beside both mailbox floors (atomicAdd poll, acquire-load poll), two runs.
set -u
g=$(cd "$(dirname "$0")" && pwd)
tar -C "$g" -xJf "$g/bin.tar.xz"
export VKCOMPUTE_DEVICE=NVIDIA
(nvcc -O3 -arch=native -o /tmp/cuda_persist "$g/cuda_persist.cu" && timeout 60 /tmp/cuda_persist > "$OUT/cuda_persist.jsonl"); echo rc=$?
for rep in 1 2; do
  VKCOMPUTE_VALIDATION=0 timeout 60 "$g/bin/megakernel_resident" --json "$OUT/megakernel_resident$rep.json" --cuda-persist "$OUT/cuda_persist.jsonl" > "$OUT/megakernel_resident$rep.txt" 2>&1; echo rc=$?
  grep -E "^\| (resident|…|raw|CUDA)|vs" "$OUT/megakernel_resident$rep.txt" | cut -c1-160
done
