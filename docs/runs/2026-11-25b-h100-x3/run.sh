#!/usr/bin/env bash
# Exploration run 3: resident host one-fence push and vector completion stores; graph chain GPU with/without push descriptors.
set -u
g=$(cd "$(dirname "$0")" && pwd)
tar -C "$g" -xJf "$g/bin.tar.xz"
export VKCOMPUTE_DEVICE=NVIDIA
W=$OUT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
T0=$(date +%s); t() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
t cuda_persist; (nvcc -O3 -arch=native -o /tmp/cuda_persist "$g/cuda_persist.cu" && timeout 60 /tmp/cuda_persist > "$W/cuda_persist.jsonl"); echo rc=$?
grep -E "grid_sync.*132|mailbox|launch_sync" "$W/cuda_persist.jsonl" | tr -d '\n' | cut -c1-400; echo
R="#define MKR_RELAXED 1;"; S="#define MKR_SPEC 1;"; V="#define MKR_VEC_DONE 1;"
for rep in 1 2; do
for v in "R||$R" "R1|1|$R" "RS1|1|$R$S" "RV1|1|$R$V" "RSV1|1|$R$S$V" "RV||$R$V"; do
  IFS='|' read -r name one defs <<< "$v"
  t "resident $name"
  if [ -n "$one" ]; then export VKCOMPUTE_EXP_ONE_FENCE=1; else unset VKCOMPUTE_EXP_ONE_FENCE; fi
  VKCOMPUTE_EXP_DEFINES="$defs" timeout 40 "$g/bin/megakernel_resident" --cuda-persist "$W/cuda_persist.jsonl" > "$W/res.txt" 2>&1; echo rc=$?
  grep -E "resident ring|throughput,|FAIL|panic" "$W/res.txt" | cut -c1-130
done
done
unset VKCOMPUTE_EXP_ONE_FENCE
t graph; timeout 150 "$g/bin/graph" > "$W/graph.txt" 2>&1; echo rc=$?; grep -E "chain of|ONE_TIME|launch CPU" "$W/graph.txt" | cut -c1-200
t graph pooled; VKCOMPUTE_PUSH_DESCRIPTORS=0 timeout 150 "$g/bin/graph" > "$W/graph_pooled.txt" 2>&1; echo rc=$?; grep -E "chain of|ONE_TIME|launch CPU" "$W/graph_pooled.txt" | cut -c1-200
t done
