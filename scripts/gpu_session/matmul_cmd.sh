#!/usr/bin/env bash
# matmul part of session.sh: $1 = kit dir, $2 = work dir
g=$1; W=$2
echo "== cuda_reference.py --matmul"
python3 "$g/cuda_reference_mm.py" --matmul --out "$W/cuda_matmul.json" > "$W/cuda_matmul.txt" 2>&1; echo "rc=$?"
grep -E "TFLOPs_med|seconds" "$W/cuda_matmul.txt" | head -40
echo "== matmul --f32-only"
timeout 240 "$g/bin/matmul" --f32-only --json "$W/matmul_f32.json" > "$W/matmul_f32.txt" 2>&1; echo "rc=$?"
tail -60 "$W/matmul_f32.txt"
echo "== matmul --f16-only"
timeout 300 "$g/bin/matmul" --f16-only --json "$W/matmul.json" > "$W/matmul.txt" 2>&1; echo "rc=$?"
tail -70 "$W/matmul.txt"
