#!/usr/bin/env bash
# Call t6 (H100): the 1-row launch rules (c7c1649) in Qwen3-4B's decode
# at B = 1 beside transformers' static cache: three unprofiled processes
# of this tree and three of 57df6cf's build, alternating, and a profiled
# one (the copy's bandwidth); the 4B check.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV)"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/t6.tar.xz" r && rm -rf "$R"' EXIT
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
q=/tmp/q3; rm -rf $q
echo "== qwen3_reference.py --size 4b (timings, static cache)"
python3 "$g/qwen3_reference.py" --out "$q" --size 4b > "$R/q3_ref.txt" 2>&1; echo "rc=$? at $(el) s"; cp "$q/reference_timing.json" "$R/" 2>/dev/null
grep -oE '"(static_ms_per_token|static_ms_per_token_min|static_ms_per_token_max|eager_ms_per_token|static_warm_s)": [0-9.]*' "$R/q3_ref.txt"
echo "== qwen3 4b --reference"
timeout 200 "$g/bin/qwen3" "$q" --reference "$q/reference.safetensors" > "$R/q3_check.txt" 2>&1; echo "rc=$?"; grep -E "worst" "$R/q3_check.txt" | cut -c1-220
for run in "qwen3_base 1" "qwen3 1" "qwen3_base 2" "qwen3 2" "qwen3_base 3" "qwen3 3" "qwen3 prof --profile"; do
  set -- $run; b=$1; n=$2; shift 2
  [ "$(el)" -lt 540 ] || { echo "out of time before $b $n"; continue; }
  echo "== $b --decode 32 $* ($n)"
  timeout 100 "$g/bin/$b" "$q" --decode 32 "$@" > "$R/${b}_$n.txt" 2>&1; echo "rc=$?"
  grep -hE "^decode \(|^decode pipelined|^  total" "$R/${b}_$n.txt" | sed 's/, [0-9.]* tokens\/s, / ; /' | cut -c1-220
done
echo "done at $(el) s"
