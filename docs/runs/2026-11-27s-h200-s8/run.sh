#!/usr/bin/env bash
# Call s8: ops::convert takes 16-byte groups only past one wave of the
# adapter's invocations (the decode step's 2,560-element embedding row
# goes element by element). Qwen3-4B decode at B = 1 against 45f0004's
# build (three rounds); the prefill of 512 tokens against e811fba's build
# (its weight and activation conversions still in groups; three rounds);
# the 4B check against transformers; ops_convert under validation and
# synchronization validation.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV)"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/s8.tar.xz" r && rm -rf "$R"' EXIT
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
echo "== test_ops_convert (validation + sync validation)"
VK_LAYER_PATH=$g/layer VKCOMPUTE_VALIDATION=1 VKCOMPUTE_VALIDATION_ERRORS=1 timeout 120 "$g/bin/test_ops_convert" --test-threads=1 > "$R/test_ops_convert.txt" 2>&1; echo "rc=$?"
grep -E "test result|panicked|FAILED" "$R/test_ops_convert.txt" | head -4
q=/tmp/q3; rm -rf $q
python3 "$g/qwen3_reference.py" --out "$q" --size 4b --no-static > "$R/q3_ref.txt" 2>&1; echo "reference rc=$? at $(el) s"
grep -oE '"(eager_prefill_ms|eager_prefill_min_ms|eager_prefill_max_ms)": [0-9.]*' "$R/q3_ref.txt"
timeout 240 "$g/bin/qwen3" "$q" --reference "$q/reference.safetensors" > "$R/q3_check.txt" 2>&1; echo "check rc=$?"; grep -E "worst" "$R/q3_check.txt" | cut -c1-200
for round in 1 2 3; do
  for b in qwen3_45f0004 qwen3; do
    f="$R/${b}_$round.txt"
    timeout 100 "$g/bin/$b" "$q" --decode 32 > "$f" 2>&1; echo "$b round $round rc=$?"
    grep -hE "^decode \(B|^decode pipelined" "$f" | sed 's/, [0-9.]* tokens\/s.*//' | cut -c1-120
  done
done
for round in 1 2 3; do
  for b in qwen3_e81 qwen3; do
    f="$R/p512_${b}_$round.txt"
    timeout 150 "$g/bin/$b" "$q" --prompt-len 512 --decode 8 > "$f" 2>&1; echo "$b p512 round $round rc=$?"
    grep -hE "^prefill:" "$f" | cut -c1-120
  done
done
echo "done at $(el) s"
