#!/usr/bin/env bash
# Call k2: decode attention with the head group fixed at compile time
# (probe variants _g1/_g2/_g4, VKC_ATTN_FIXED) against the specialization
# constant; pipeline statistics of every nn_attn_decode1 kernel.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV) + probe"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/k2.tar.xz" r && rm -rf "$R"' EXIT
q=/tmp/q3
[ -f $q/config.json ] || { python3 "$g/qwen3_reference.py" --out "$q" --size 4b --no-timing > "$R/q3_ref.txt" 2>&1; echo "ref rc=$?"; }
echo "== attn_probe --statistics (spec constant)"
timeout 120 "$g/bin/attn_probe" --statistics > "$R/attn_probe_spec.txt" 2>&1; echo "rc=$?"; grep -v "^statistics" "$R/attn_probe_spec.txt" | tail -4; grep "^statistics" "$R/attn_probe_spec.txt" | cut -c1-400
echo "== attn_probe --statistics, VKC_ATTN_FIXED"
VKC_ATTN_FIXED=1 timeout 120 "$g/bin/attn_probe" --statistics > "$R/attn_probe_fixed.txt" 2>&1; echo "rc=$?"; grep -v "^statistics" "$R/attn_probe_fixed.txt" | tail -4
for p in 4000 600; do
  for v in "base" "fixed" "fixed_t1024" "base_t1024"; do
    f="$R/p${p}_$v.txt"; e=()
    [[ $v == fixed* ]] && e+=(VKC_ATTN_FIXED=1)
    [[ $v == *t1024 ]] && e+=(VKC_ATTN_TARGET=1024)
    echo "== prompt $p, $v"
    env "${e[@]}" timeout 120 "$g/bin/qwen3" "$q" --prompt-len $p --decode 16 --profile > "$f" 2>&1; echo "rc=$?"
    grep -hE "^decode \(B|nn_attn_decode1_qk.* \(|^sequence 0" "$f" | cut -c1-200
  done
done
