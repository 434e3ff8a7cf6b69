#!/usr/bin/env bash
# Call i3: the kept window form (89f5aac) against d06ea07 by default plan, split pairs, a span-form probe.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
( KSTATS_ONLY="linear_tc_bf16" OUT=$OUT bash "$g/session.sh" tests stats ) 2>&1 | grep -vE "^\s*$" | grep -E "==|rc=|test result|FAILED|panicked|^\| linear" | cut -d'|' -f1-2,6,10
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/i3.tar.xz" r && rm -rf "$R"' EXIT
echo "== registers spanone"; timeout 60 "$g/bin/ks_spanone" --only linear_tc_bf16_m > "$R/ks_spanone.txt" 2>&1; grep -E "^\| linear" "$R/ks_spanone.txt" | cut -d'|' -f2,6,10
echo "== ffn_reference.py"
python3 "$g/ffn_reference.py" --tokens 1,4,5,16,17,32,33,48,64 --out "$R/torch.json" > "$R/torch.txt" 2>&1; echo "rc=$?"; python3 -c "
import json;d=json.load(open('$R/torch.json'));print(d['device'],'copy',d['copy_GBps']);print({k:v for k,v in d.items() if k.endswith('_ms') and 'min' not in k and 'max' not in k})"
for i in 1 2; do for b in base new; do
  bin="$g/bin/ffn_stack"; [ $b = base ] && bin="$g/bin/ffn_stack_base"
  echo "== $b process $i"
  timeout 150 "$bin" --tokens 5,16,17,32,33,48,64 --dtypes bf16 --torch "$R/torch.json" > "$R/${b}_$i.txt" 2>&1; echo "rc=$?"
  grep -E "median|Error|panic" "$R/${b}_$i.txt" | cut -c1-150
done; done
for i in 1 2; do for b in new spanone; do
  bin="$g/bin/ffn_stack"; [ $b = spanone ] && bin="$g/bin/fp_spanone"
  echo "== $b (span forms) process $i"
  timeout 100 "$bin" --tokens 5,8,16 --dtypes bf16 --reps 20 > "$R/span_${b}_$i.txt" 2>&1; echo "rc=$?"
  grep -E "median|Error|panic" "$R/span_${b}_$i.txt" | cut -c1-110
done; done
for sp in 2,14 3,14 4,14 3,10 2,20 1,14; do
  echo "== T=64 splits $sp"
  timeout 60 "$g/bin/ffn_stack" --tokens 64 --dtypes bf16 --splits $sp --reps 20 --check-layers 0 > "$R/splits_$sp.txt" 2>&1; echo "rc=$?"
  grep -E "median|Error" "$R/splits_$sp.txt" | cut -c1-110
done
echo "== profile new T=17,32,64"
timeout 100 "$g/bin/ffn_stack" --tokens 17,32,64 --dtypes bf16 --reps 10 --check-layers 0 --profile > "$R/profile.txt" 2>&1; echo "rc=$?"; grep -E "median|vkcompute" "$R/profile.txt" | cut -c1-110
