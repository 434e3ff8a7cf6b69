#!/usr/bin/env bash
# Call w4: the same comparison on an H100, with the FFN stack beside
# PyTorch in the same call: the floor's tiny chain (barrier_floor), the
# decode layer's and an FFN layer's pattern chains (stream_floor) and a
# line over sizes, beside their CUDA twins (stream_twin.cu); the FFN stack
# (f32 and bf16 at 1, 4 and 16 tokens) beside scripts/ffn_reference.py.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; echo "commit: $(cat $g/REV)"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/w4.tar.xz" r && rm -rf "$R"' EXIT
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
nvcc -O3 -arch=sm_90 -o /tmp/stream_twin "$g/cuda/stream_twin.cu" > "$R/nvcc.txt" 2>&1; echo "nvcc rc=$?"
echo "== barrier_floor"
timeout 120 "$g/bin/barrier_floor" --lengths 100,1000 --reps 30 --kinds global,exec-only,none > "$R/barrier_floor.txt" 2>&1; echo "rc=$?"
grep -vE "^floor:" "$R/barrier_floor.txt" | cut -c1-160
for round in 1 2; do
  for p in 31.5,21,99.6,49.8 99.6,49.8; do
    echo "== pattern $p, round $round"
    timeout 60 "$g/bin/stream_floor" --pattern $p --total-gb 5.4 > "$R/floor_${p}_$round.txt" 2>&1; echo "rc=$?"
    grep -E "^copy|pattern" "$R/floor_${p}_$round.txt" | cut -c1-220
    timeout 90 /tmp/stream_twin --pattern $p > "$R/twin_${p}_$round.txt" 2>&1; echo "twin rc=$?"
    grep -E "check|^pattern|wall|tiny" "$R/twin_${p}_$round.txt" | cut -c1-220
  done
done
echo "== stream_floor sizes"
timeout 90 "$g/bin/stream_floor" --sizes-mb 25,50,100,200 > "$R/floor_sizes.txt" 2>&1; echo "rc=$?"
grep -E "resident|one-shot" "$R/floor_sizes.txt" | cut -c1-200
for s in 25 50 100 200; do
  timeout 90 /tmp/stream_twin --pattern $s > "$R/twin_size$s.txt" 2>&1; echo "twin $s rc=$?"; grep -E "^pattern" "$R/twin_size$s.txt" | cut -c1-200
done
echo "== ffn_reference.py at $(el) s"
python3 "$g/ffn_reference.py" --tokens 1,4,16 --out "$R/torch.json" > "$R/torch.txt" 2>&1; echo "rc=$? at $(el) s"
timeout 300 "$g/bin/ffn_stack" --dtypes f32,bf16 --tokens 1,4,16 --torch "$R/torch.json" > "$R/ffn_table.txt" 2>&1; echo "table rc=$? at $(el) s"
grep -E "median|copy band|differ|Error|PyTorch" "$R/ffn_table.txt" | cut -c1-200
echo "done at $(el) s"
