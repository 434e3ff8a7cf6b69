#!/usr/bin/env bash
# Call q4: the batched workgroup-scope kernels with a K slice as its own
# product, the clamped layouts at K's stride (q3 failed a split test) and the
# rule splitting only deep products (the down projection: 4 slices). The split
# sweep (matmul --prefill-split) first: if the default gate|up row reads
# under 100 TFLOP/s the kernels are still slow and the call stops there.
# Otherwise the Qwen3-4B prefill of 512 against q1's tree (qwen3_base,
# c983050), alternating, two rounds each, beside transformers' eager
# prefill (--no-static) and the 4B check; then the batched tests under
# validation and synchronization validation.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV)"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/q4.tar.xz" r && rm -rf "$R"' EXIT
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
echo "== matmul --prefill-split"
timeout 200 "$g/bin/matmul" --prefill-split --json "$R/split.json" > "$R/split.txt" 2>&1; echo "rc=$? at $(el) s"
grep -E "^split" "$R/split.txt" | sed -E 's/; ran .*//; s/B stored N×K; tile Some\(Cm2Tile \{ bm: ([0-9]+), bn: ([0-9]+).*\}\)/\1x\2/' | cut -c1-190
gu=$(grep -E "^split512_gate_up_default" "$R/split.txt" | awk '{print $2}')
awk -v v="${gu:-0}" 'BEGIN {exit !(v < 100)}' && { echo "gate|up default at $gu TFLOP/s: still slow, stopping"; exit 0; }
q=/tmp/q3; rm -rf $q
echo "== qwen3_reference.py --size 4b --no-static"
python3 "$g/qwen3_reference.py" --out "$q" --size 4b --no-static > "$R/q3_ref.txt" 2>&1; echo "rc=$? at $(el) s"; cp "$q/reference_timing.json" "$R/" 2>/dev/null
grep -oE '"(eager_prefill_ms|eager_prefill_min_ms|eager_prefill_max_ms)": [0-9.]*' "$R/q3_ref.txt"
echo "== qwen3 4b --reference"
timeout 240 "$g/bin/qwen3" "$q" --reference "$q/reference.safetensors" > "$R/q3_check.txt" 2>&1; echo "rc=$?"; grep -E "worst" "$R/q3_check.txt" | cut -c1-220
for round in 1 2; do
  for b in qwen3_base qwen3; do
    f="$R/p512_${b}_$round.txt"
    timeout 150 "$g/bin/$b" "$q" --prompt-len 512 --decode 8 --profile > "$f" 2>&1; echo "$b round $round rc=$?"
    grep -hE "^prefill:" "$f" | cut -c1-150
    grep -hE "^  vkcompute (matmul|linear_reduce)" "$f" | head -4
  done
done
echo "at $(el) s"
for t in ops_matmul_batched qwen3_f16_paths qwen3 ops_matmul_bf16w; do
  [ "$(el)" -lt 400 ] || { echo "out of time before test_$t"; continue; }
  echo "== test_$t (validation + sync validation) at $(el) s"
  VK_LAYER_PATH=$g/layer VKCOMPUTE_VALIDATION=1 VKCOMPUTE_VALIDATION_ERRORS=1 timeout $(( 585 - $(el) )) "$g/bin/test_$t" --test-threads=1 > "$R/test_$t.txt" 2>&1; echo "rc=$?"; grep -E "test result|panicked|FAILED" "$R/test_$t.txt" | head -5
done
echo "done at $(el) s"
