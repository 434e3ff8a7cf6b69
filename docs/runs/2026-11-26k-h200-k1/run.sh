#!/usr/bin/env bash
# Call k1: decode attention at long contexts. Qwen3-4B decode after 600 and
# 4000 prompt tokens with a per-kernel profile, the attention split's
# workgroup target (VKC_ATTN_TARGET, probe build) and its largest head group
# (VKC_ATTN_GROUP) varied; attn_probe's free kernels.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; echo "commit: $(cat $g/REV)"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/k1.tar.xz" r && rm -rf "$R"' EXIT
q=/tmp/q3; rm -rf "$q"
echo "== qwen3_reference.py --size 4b --no-timing"
python3 "$g/qwen3_reference.py" --out "$q" --size 4b --no-timing > "$R/q3_ref.txt" 2>&1; echo "rc=$?"
for p in 600 4000; do
  for tg in 512 128 256 1024 2048; do
    f="$R/p${p}_t${tg}.txt"
    echo "== prompt $p, VKC_ATTN_TARGET=$tg"
    VKC_ATTN_TARGET=$tg timeout 120 "$g/bin/qwen3" "$q" --prompt-len $p --decode 16 --profile > "$f" 2>&1; echo "rc=$?"
    grep -hE "^decode \(B|nn_attn_decode1_qk \(|^  total" "$f" | cut -c1-200
  done
done
for gm in 1 2; do
  f="$R/p4000_g${gm}.txt"
  echo "== prompt 4000, VKC_ATTN_GROUP=$gm"
  VKC_ATTN_GROUP=$gm timeout 120 "$g/bin/qwen3" "$q" --prompt-len 4000 --decode 16 --profile > "$f" 2>&1; echo "rc=$?"
  grep -hE "^decode \(B|nn_attn_decode1_qk \(|^  total" "$f" | cut -c1-200
done
echo "== prompt 4000 --kv-16"
timeout 120 "$g/bin/qwen3" "$q" --prompt-len 4000 --decode 16 --kv-16 --profile > "$R/p4000_kv16.txt" 2>&1; echo "rc=$?"
grep -hE "^decode \(B|nn_attn|^  total" "$R/p4000_kv16.txt" | cut -c1-200
echo "== attn_probe"
timeout 120 "$g/bin/attn_probe" > "$R/attn_probe.txt" 2>&1; echo "rc=$?"; tail -8 "$R/attn_probe.txt"
