#!/usr/bin/env bash
# Call m7: the final tree's tests under validation and synchronization
# validation (the linear, op batch and qwen3 tests), the 4B check against
# transformers, and one `qwen3 --profile` run (its timing lines now from
# unprofiled graphs).
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV)"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/m7.tar.xz" r && rm -rf "$R"' EXIT
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
for t in ops_linear ops_linear_normed op_batch_nn qwen3 qwen3_f16_paths; do
  echo "== test_$t (validation + sync validation) at $(el) s"
  VK_LAYER_PATH=$g/layer VKCOMPUTE_VALIDATION=1 VKCOMPUTE_VALIDATION_ERRORS=1 timeout 100 "$g/bin/test_$t" --test-threads=1 > "$R/test_$t.txt" 2>&1; echo "rc=$?"; grep -E "test result|panicked|FAILED" "$R/test_$t.txt" | head -5
done
q=/tmp/q3; rm -rf $q
[ "$(el)" -lt 130 ] || { echo "out of time before the checkpoint"; exit 0; }
python3 "$g/qwen3_reference.py" --out "$q" --size 4b --no-timing > "$R/q3_ref.txt" 2>&1; echo "ref rc=$? at $(el) s"
timeout 60 "$g/bin/qwen3" "$q" --reference "$q/reference.safetensors" > "$R/q3_check.txt" 2>&1; echo "check rc=$?"; grep -E "worst" "$R/q3_check.txt" | cut -c1-220
timeout 60 "$g/bin/qwen3" "$q" --decode 32 --profile > "$R/q3_prof.txt" 2>&1; echo "profile rc=$?"
grep -hE "^decode \(|^decode pipelined|^  total" "$R/q3_prof.txt" | cut -c1-200
echo "done at $(el) s"
