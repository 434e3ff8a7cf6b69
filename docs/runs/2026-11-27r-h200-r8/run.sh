#!/usr/bin/env bash
# Call r8: the batched rule's 64×64 tile for B stored N×K (1badde5: the
# prefill's o and down with the residual, and its k and v products) against
# r6's tree (qwen3_base, 0f95f1f), alternating, on the Qwen3-4B prefill of
# 512 (three rounds without per-command timestamps, then one profiled run
# each); transformers' eager prefill of 512 and the 4B check in the same
# call; matmul --prefill-shapes --prefill-tiles; the batched-product,
# linear_f16, f16-path and qwen3 tests under validation and
# synchronization validation.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV)"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/r8.tar.xz" r && rm -rf "$R"' EXIT
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
echo "== matmul --prefill-shapes --prefill-tiles"
timeout 300 "$g/bin/matmul" --prefill-shapes --prefill-tiles --json "$R/matmul_prefill.json" > "$R/matmul_prefill.txt" 2>&1; echo "rc=$?"
grep -E "^prefill512" "$R/matmul_prefill.txt" | cut -c1-64
q=/tmp/q3; rm -rf $q
echo "== qwen3_reference.py --size 4b --no-static at $(el) s"
python3 "$g/qwen3_reference.py" --out "$q" --size 4b --no-static > "$R/q3_ref.txt" 2>&1; echo "rc=$? at $(el) s"; cp "$q/reference_timing.json" "$R/" 2>/dev/null
grep -oE '"(eager_prefill_ms|eager_prefill_min_ms|eager_prefill_max_ms)": [0-9.]*' "$R/q3_ref.txt"
echo "== qwen3 4b --reference"
timeout 240 "$g/bin/qwen3" "$q" --reference "$q/reference.safetensors" > "$R/q3_check.txt" 2>&1; echo "rc=$?"; grep -E "worst" "$R/q3_check.txt" | cut -c1-220
for round in 1 2 3; do
  for b in qwen3_base qwen3; do
    f="$R/p512_${b}_$round.txt"
    timeout 150 "$g/bin/$b" "$q" --prompt-len 512 --decode 8 > "$f" 2>&1; echo "$b round $round rc=$?"
    grep -hE "^prefill:" "$f" | cut -c1-120
  done
done
for b in qwen3_base qwen3; do
  f="$R/p512_${b}_profile.txt"
  timeout 150 "$g/bin/$b" "$q" --prompt-len 512 --decode 8 --profile > "$f" 2>&1; echo "$b profiled rc=$?"
  grep -hE "^prefill:" "$f" | cut -c1-120
  grep -hE "^  vkcompute " "$f" | head -14; grep -h "device memory" "$f"
done
echo "at $(el) s"
for t in qwen3_f16_paths qwen3 ops_linear_f16 ops_matmul_batched; do
  [ "$(el)" -lt 500 ] || { echo "out of time before test_$t"; continue; }
  echo "== test_$t (validation + sync validation) at $(el) s"
  VK_LAYER_PATH=$g/layer VKCOMPUTE_VALIDATION=1 VKCOMPUTE_VALIDATION_ERRORS=1 timeout $(( 585 - $(el) )) "$g/bin/test_$t" --test-threads=1 --nocapture > "$R/test_$t.txt" 2>&1; echo "rc=$?"; grep -E "test result|panicked|FAILED|f16 prefill \+ decode" "$R/test_$t.txt" | head -6
done
echo "done at $(el) s"
