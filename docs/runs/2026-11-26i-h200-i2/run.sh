#!/usr/bin/env bash
# Call i2: probe builds of the window form (x staged early, one W register set, both) at 32 and 64 rows.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV) + probe defines"
mkdir -p "$OUT/p"
for v in cur xearly wone both; do
  echo "== registers $v"; timeout 60 "$g/bin/ks_$v" --only linear_tc_bf16_w > "$OUT/p/ks_$v.txt" 2>&1; grep -E "^\| linear" "$OUT/p/ks_$v.txt" | cut -d'|' -f2,6,10
done
for r in 1 2; do for v in cur xearly wone both; do
  echo "== $v round $r: window forced T 32,64"
  timeout 90 "$g/bin/fp_$v" --tokens 32,64 --dtypes bf16 --rows-per-pass 4294967293 --reps 20 > "$OUT/p/${v}_$r.txt" 2>&1; echo "rc=$?"
  grep -E "median|Error|panic" "$OUT/p/${v}_$r.txt" | cut -c1-110
done; done
for v in cur xearly wone both; do
  echo "== $v profile T=64"
  timeout 90 "$g/bin/fp_$v" --tokens 64 --dtypes bf16 --rows-per-pass 4294967293 --reps 5 --check-layers 0 --profile > "$OUT/p/${v}_prof.txt" 2>&1; echo "rc=$?"
  grep -E "vkcompute" "$OUT/p/${v}_prof.txt" | cut -c1-110
done
