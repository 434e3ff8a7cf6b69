#!/usr/bin/env bash
# Call u7: the final tree's Qwen3-4B decode at B = 1 on an H200 beside
# transformers' static cache in the same call: the reference with its
# timings, the 4B check, three unprofiled processes and a profiled one
# (the copy's bandwidth).
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV)"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/u7.tar.xz" r && rm -rf "$R"' EXIT
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
q=/tmp/q3; rm -rf $q
echo "== qwen3_reference.py --size 4b (timings, static cache)"
python3 "$g/qwen3_reference.py" --out "$q" --size 4b > "$R/q3_ref.txt" 2>&1; echo "rc=$? at $(el) s"; cp "$q/reference_timing.json" "$R/" 2>/dev/null
grep -oE '"(static_ms_per_token|static_ms_per_token_min|static_ms_per_token_max|eager_ms_per_token|static_warm_s)": [0-9.]*' "$R/q3_ref.txt"
echo "== qwen3 4b --reference"
timeout 200 "$g/bin/qwen3" "$q" --reference "$q/reference.safetensors" > "$R/q3_check.txt" 2>&1; echo "rc=$?"; grep -E "worst" "$R/q3_check.txt" | cut -c1-220
for run in "1" "2" "3" "prof --profile"; do
  set -- $run; n=$1; shift 1
  [ "$(el)" -lt 540 ] || { echo "out of time before $n"; continue; }
  echo "== qwen3 --decode 32 $* ($n)"
  timeout 100 "$g/bin/qwen3" "$q" --decode 32 "$@" > "$R/qwen3_$n.txt" 2>&1; echo "rc=$?"
  grep -hE "^decode \(|^decode pipelined|^  total|^host time" "$R/qwen3_$n.txt" | sed 's/, [0-9.]* tokens\/s, / ; /' | cut -c1-220
done
echo "done at $(el) s"
