#!/usr/bin/env bash
# Call i5: the final default plans against d06ea07 beside PyTorch; the linear tests through the default plans.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
( OUT=$OUT bash "$g/session.sh" tests ) 2>&1 | grep -E "==|rc=|test result|FAILED|panicked"
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/i5.tar.xz" r && rm -rf "$R"' EXIT
echo "== ffn_reference.py"
python3 "$g/ffn_reference.py" --tokens 17,32,48,64 --out "$R/torch.json" > "$R/torch.txt" 2>&1; echo "rc=$?"; python3 -c "
import json;d=json.load(open('$R/torch.json'));print(d['device'],'copy',d['copy_GBps']);print({k:v for k,v in d.items() if k.startswith('bf16') and k.endswith('_ms') and 'min' not in k and 'max' not in k})"
for i in 1 2; do for b in base new; do
  bin="$g/bin/ffn_stack"; [ $b = base ] && bin="$g/bin/ffn_stack_base"
  echo "== $b process $i"
  timeout 150 "$bin" --tokens 17,32,48,64 --dtypes bf16 --torch "$R/torch.json" > "$R/${b}_$i.txt" 2>&1; echo "rc=$?"
  grep -E "median|Error|panic" "$R/${b}_$i.txt" | cut -c1-170
done; done
