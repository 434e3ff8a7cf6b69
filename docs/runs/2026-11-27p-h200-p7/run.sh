#!/usr/bin/env bash
# Call p7: other plans for the f32 FFN stack at 16 and 4 tokens, forced
# through ffn_stack's explicit linear layers: at 16 tokens the 32-row
# register-tiled kernel (the splits choose_linear gives 17 rows: 2 and
# 16) and passes of 8 rows (W read twice, the second time from L2); at 4
# tokens passes of 2 and 1 rows (narrowed, no split-K). The default plan
# (mlp block) in the same process.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV)"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/p7.tar.xz" r && rm -rf "$R"' EXIT
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
run() { # name, tokens, extra args
  local name=$1 t=$2; shift 2
  echo "== $name (T=$t) at $(el) s"
  timeout 120 "$g/bin/ffn_stack" --dtypes f32 --tokens $t "$@" > "$R/$name.txt" 2>&1; echo "rc=$?"
  grep -E "median|Error|panic|differ|two linear" "$R/$name.txt" | cut -c1-190
}
run t16_default 16 --blocks mlp
run t16_tiled32 16 --blocks linear --rows-per-pass 32 --splits 2,16
run t16_rows8 16 --blocks linear --rows-per-pass 8 --splits 1,2
run t4_default 4 --blocks mlp
run t4_rows2 4 --blocks linear --rows-per-pass 2 --splits 1,1
run t4_rows1 4 --blocks linear --rows-per-pass 1 --splits 1,1
run t16_default_again 16 --blocks mlp
echo "done at $(el) s"
