#!/usr/bin/env bash
# matmul_spread part of session.sh: $1 = kit dir, $2 = work dir.
# The run-to-run spread of the default matmul kernels (max ÷ min of the
# medians over three processes), beside cuBLAS in the same call:
# cuda_reference.py --matmul; three processes of `matmul --f32-only`; three
# processes of cm2_probe at 1024³–8192³ (the f16 default and the variants
# packed in probe/, whose launch order each argument names).
g=$1; W=$2
echo "== cuda_reference.py --matmul"
python3 "$g/cuda_reference_mm.py" --matmul --out "$W/cuda_matmul.json" > "$W/cuda_matmul.txt" 2>&1; echo "rc=$?"
grep -E "TFLOPs_med" "$W/cuda_matmul.txt" | head -40
for i in 1 2 3; do
  echo "== matmul --f32-only (process $i)"
  start=$(date +%s)
  timeout 240 "$g/bin/matmul" --f32-only --json "$W/matmul_f32_$i.json" > "$W/matmul_f32_$i.txt" 2>&1; echo "rc=$? ($(( $(date +%s) - start )) s)"
  grep -E "^sgemm[0-9x]+_default " "$W/matmul_f32_$i.txt" | cut -c1-160
done
probe_args=()
for v in ${PROBE_VARIANTS:-}; do probe_args+=("$g/probe/$v"); done
for i in 1 2 3; do
  echo "== cm2_probe --sizes ${PROBE_SIZES:-1024,2048,4096,8192} (process $i)"
  start=$(date +%s)
  timeout 200 "$g/bin/cm2_probe" --sizes "${PROBE_SIZES:-1024,2048,4096,8192}" "${probe_args[@]}" > "$W/cm2_probe_$i.txt" 2>&1; echo "rc=$? ($(( $(date +%s) - start )) s)"
  grep -E "TFLOP/s|default|FAIL|rror" "$W/cm2_probe_$i.txt" | cut -c1-170
done
