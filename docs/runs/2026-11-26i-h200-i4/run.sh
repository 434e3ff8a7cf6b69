#!/usr/bin/env bash
# Call i4: the default plans after the split rule (cc364bf) against d06ea07; the FFN table beside PyTorch; tests.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
( OUT=$OUT bash "$g/session.sh" tests ) 2>&1 | grep -E "==|rc=|test result|FAILED|panicked"
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/i4.tar.xz" r && rm -rf "$R"' EXIT
echo "== ffn_reference.py"
python3 "$g/ffn_reference.py" --tokens 1,4,16,17,32,48,64 --out "$R/torch.json" > "$R/torch.txt" 2>&1; echo "rc=$?"; python3 -c "
import json;d=json.load(open('$R/torch.json'));print(d['device'],'copy',d['copy_GBps']);print({k:v for k,v in d.items() if k.endswith('_ms') and 'min' not in k and 'max' not in k})"
echo "== ffn_stack (new) T=1,4,64 f32,bf16: the table"
timeout 150 "$g/bin/ffn_stack" --tokens 1,4,64 --torch "$R/torch.json" > "$R/table.txt" 2>&1; echo "rc=$?"; grep -E "median|Error|panic|copy band" "$R/table.txt" | cut -c1-170
for i in 1 2; do for b in base new; do
  bin="$g/bin/ffn_stack"; [ $b = base ] && bin="$g/bin/ffn_stack_base"
  echo "== $b process $i"
  timeout 150 "$bin" --tokens 16,17,32,48,64 --dtypes bf16 --torch "$R/torch.json" > "$R/${b}_$i.txt" 2>&1; echo "rc=$?"
  grep -E "median|Error|panic" "$R/${b}_$i.txt" | cut -c1-170
done; done
for sp in 3,14 5,14 6,14; do
  echo "== T=64 splits $sp"
  timeout 60 "$g/bin/ffn_stack" --tokens 64 --dtypes bf16 --splits $sp --reps 20 --check-layers 0 > "$R/splits_$sp.txt" 2>&1; echo "rc=$?"
  grep -E "median|Error" "$R/splits_$sp.txt" | cut -c1-110
done
echo "== profile new T=17,64"
timeout 100 "$g/bin/ffn_stack" --tokens 17,64 --dtypes bf16 --reps 10 --check-layers 0 --profile > "$R/profile.txt" 2>&1; echo "rc=$?"; grep -E "median|vkcompute" "$R/profile.txt" | cut -c1-110
