#!/usr/bin/env bash
# Call p8: the qwen3 example's q|k|v at 5+ sequences zeroing its output
# beside the norm and adding its tensor-core K layers into it (no
# reduction pass), against the example before (bin/qwen3_base, the same
# library): qwen3 under validation, the transformers check, decode at
# B = 16 alternating, two rounds each, and B = 1.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV)"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/p8.tar.xz" r && rm -rf "$R"' EXIT
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
echo "== test_qwen3 (validation + sync validation) at $(el) s"
VK_LAYER_PATH=$g/layer VKCOMPUTE_VALIDATION=1 VKCOMPUTE_VALIDATION_ERRORS=1 timeout 150 "$g/bin/test_qwen3" --test-threads=1 > "$R/test_qwen3.txt" 2>&1; echo "rc=$?"; grep -E "test result|panicked|FAILED" "$R/test_qwen3.txt" | head -5
q=/tmp/q3; rm -rf $q
echo "== qwen3_reference.py at $(el) s"
python3 "$g/qwen3_reference.py" --out "$q" --size 4b --no-timing > "$R/q3_ref.txt" 2>&1; echo "ref rc=$?"
timeout 60 "$g/bin/qwen3" "$q" --reference "$q/reference.safetensors" > "$R/q3_check.txt" 2>&1; echo "check rc=$?"; grep -E "worst" "$R/q3_check.txt" | cut -c1-220
for i in 1 2; do
  for b in "" _base; do
    timeout 60 "$g/bin/qwen3$b" "$q" --decode 32 --batch 16 > "$R/q3${b}_b16_$i.txt" 2>&1; echo "b16$b $i rc=$?"; grep -hE "^decode \(|^decode pipelined" "$R/q3${b}_b16_$i.txt" | cut -c1-200
  done
done
timeout 60 "$g/bin/qwen3" "$q" --decode 32 --batch 16 --profile > "$R/q3_b16_prof.txt" 2>&1; echo "prof rc=$?"; grep -hE "^  (vkcompute|total)" "$R/q3_b16_prof.txt" | tail -10 | cut -c1-200
timeout 60 "$g/bin/qwen3" "$q" --decode 32 > "$R/q3_b1.txt" 2>&1; echo "b1 rc=$?"; grep -hE "^decode \(" "$R/q3_b1.txt" | cut -c1-200
echo "done at $(el) s"
