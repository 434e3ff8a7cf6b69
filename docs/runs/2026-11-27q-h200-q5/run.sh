#!/usr/bin/env bash
# Call q5: the final tree's Qwen3-4B prefill of 512 tokens (batched
# products in one slice, as before, on kernels that take a slice depth)
# against q1's tree (qwen3_base, c983050), alternating, two rounds each,
# beside transformers' eager prefill (--no-static) in the same call.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV)"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/q5.tar.xz" r && rm -rf "$R"' EXIT
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
q=/tmp/q3; rm -rf $q
echo "== qwen3_reference.py --size 4b --no-static"
python3 "$g/qwen3_reference.py" --out "$q" --size 4b --no-static > "$R/q3_ref.txt" 2>&1; echo "rc=$? at $(el) s"; cp "$q/reference_timing.json" "$R/" 2>/dev/null
grep -oE '"(eager_ms_per_token|eager_prefill_ms|eager_prefill_min_ms|eager_prefill_max_ms)": [0-9.]*' "$R/q3_ref.txt"
for round in 1 2; do
  for b in qwen3_base qwen3; do
    f="$R/p512_${b}_$round.txt"
    timeout 150 "$g/bin/$b" "$q" --prompt-len 512 --decode 32 --profile > "$f" 2>&1; echo "$b round $round rc=$?"
    grep -hE "^prefill:|^decode \(B" "$f" | cut -c1-150
    grep -hE "^  vkcompute (matmul|linear_reduce)" "$f" | head -3
  done
done
echo "done at $(el) s"
