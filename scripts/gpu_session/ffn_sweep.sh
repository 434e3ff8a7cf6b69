#!/usr/bin/env bash
# $1 kit, $2 work dir: ffn_stack plan sweep (explicit plans, to check the default rule)
g=$1; W=$2
for s in 1 2 4 8; do
  echo "== bf16 T=4 splits $s"; "$g/bin/ffn_stack" --dtypes bf16 --tokens 4 --splits $s --check-layers 1 2>&1 | grep -E "T=4: median|match"
done
for s in 1 2 4; do
  echo "== f32 T=4 splits $s"; "$g/bin/ffn_stack" --dtypes f32 --tokens 4 --splits $s --check-layers 1 2>&1 | grep -E "T=4: median|match"
done
for r in 32 64; do for s in 1 2 4; do
  echo "== f32 T=64 rows-per-pass $r splits $s"; "$g/bin/ffn_stack" --dtypes f32 --tokens 64 --rows-per-pass $r --splits $s --check-layers 1 2>&1 | grep -E "T=64: median|match|panick|rror"
done; done
