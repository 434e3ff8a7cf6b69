#!/usr/bin/env bash
# Call i1: the window form of the streaming tensor-core linear kernel.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
( KSTATS_ONLY="linear_tc_bf16" OUT=$OUT bash "$g/session.sh" tests stats ) 2>&1 | tail -60
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
mkdir -p "$OUT/ffn"
echo "== ffn_reference.py 16,32,48,64"
python3 "$g/ffn_reference.py" --tokens 16,32,48,64 --out "$OUT/ffn/torch.json" > "$OUT/ffn/torch.txt" 2>&1; echo "rc=$?"; tail -6 "$OUT/ffn/torch.txt"
for i in 1 2; do for b in base new; do
  bin="$g/bin/ffn_stack"; [ $b = base ] && bin="$g/bin/ffn_stack_base"
  echo "== $b process $i: T 16,32,33,48,64 bf16"
  timeout 120 "$bin" --tokens 16,32,33,48,64 --dtypes bf16 --torch "$OUT/ffn/torch.json" > "$OUT/ffn/${b}_$i.txt" 2>&1; echo "rc=$?"
  grep -E "median|match|Error|panic" "$OUT/ffn/${b}_$i.txt" | cut -c1-160
done; done
for i in 1 2; do
  echo "== new, window plan forced at T 5,16,32 (process $i)"
  timeout 120 "$g/bin/ffn_stack" --tokens 5,16,32 --dtypes bf16 --rows-per-pass 4294967293 > "$OUT/ffn/window_$i.txt" 2>&1; echo "rc=$?"
  grep -E "median|match|Error|panic" "$OUT/ffn/window_$i.txt" | cut -c1-160
done
echo "== new T=64 gate|up in one layer (--splits 1,14)"
timeout 120 "$g/bin/ffn_stack" --tokens 64 --dtypes bf16 --splits 1,14 > "$OUT/ffn/s1_14.txt" 2>&1; echo "rc=$?"; grep -E "median|match|Error" "$OUT/ffn/s1_14.txt" | cut -c1-160
echo "== profiles: new T=32,64; window T=32"
timeout 120 "$g/bin/ffn_stack" --tokens 32,64 --dtypes bf16 --profile --reps 10 > "$OUT/ffn/profile_new.txt" 2>&1; echo "rc=$?"; grep -vE "^\s*$" "$OUT/ffn/profile_new.txt" | tail -30 | cut -c1-160
timeout 120 "$g/bin/ffn_stack" --tokens 32 --dtypes bf16 --rows-per-pass 4294967293 --profile --reps 10 > "$OUT/ffn/profile_window32.txt" 2>&1; echo "rc=$?"; tail -14 "$OUT/ffn/profile_window32.txt" | cut -c1-160
