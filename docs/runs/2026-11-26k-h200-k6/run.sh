#!/usr/bin/env bash
# Call k6: the decode attention merge with the head sums once per head and
# two elements per invocation (new) against 4e2d361 (envbase), each over
# the split's workgroup target (VKC_ATTN_TARGET, probe builds) after 4000
# and 600 prompt tokens; tests under validation; the transformers check.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV) + working tree"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/k6.tar.xz" r && rm -rf "$R"' EXIT
q=/tmp/q3; rm -rf $q
python3 "$g/qwen3_reference.py" --out "$q" --size 4b --no-timing > "$R/q3_ref.txt" 2>&1; echo "ref rc=$?"
for t in ops_nn_attention ops_nn_decode_qk qwen3; do
  echo "== test_$t (validation + sync validation)"
  VK_LAYER_PATH=$g/layer VKCOMPUTE_VALIDATION=1 VKCOMPUTE_VALIDATION_ERRORS=1 timeout 200 "$g/bin/test_$t" --test-threads=1 --nocapture > "$R/test_$t.txt" 2>&1; echo "rc=$?"; grep -E "test result|panicked|FAILED" "$R/test_$t.txt" | head -5
done
echo "== attn_probe (new)"
timeout 120 "$g/bin/attn_probe" > "$R/attn_probe.txt" 2>&1; echo "rc=$?"; tail -3 "$R/attn_probe.txt"
echo "== qwen3 4b --reference (new)"
timeout 240 "$g/bin/qwen3" "$q" --reference "$q/reference.safetensors" > "$R/q3_check.txt" 2>&1; echo "rc=$?"; grep -E "worst" "$R/q3_check.txt" | cut -c1-220
for p in 4000 600; do
  for tg in 512 256 384 768 1024; do
    for b in qwen3 qwen3_envbase; do
      f="$R/p${p}_t${tg}_$b.txt"
      echo "== $b prompt $p target $tg"
      VKC_ATTN_TARGET=$tg timeout 120 "$g/bin/$b" "$q" --prompt-len $p --decode 16 --profile > "$f" 2>&1; echo "rc=$?"
      grep -hE "^decode \(B|nn_attn_decode1_qk.* \(" "$f" | sed 's/ per step.*//; s/.*per launch/  per launch/' | cut -c1-120
    done
  done
done
