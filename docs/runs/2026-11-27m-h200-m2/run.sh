#!/usr/bin/env bash
# Call m2: the normed skinny kernels take the RMSNorm scale last (one K
# slice: each work item sums the squares of the x it reads, the products
# are scaled after their reduction; split-K keeps the prologue), against
# HEAD's prologue-first kernels (qwen3_base, kernel_statistics_base).
# Pipeline statistics of the linear_bf16 kernels, the normed tests under
# validation, Qwen3-4B decode at B = 1 (three alternating rounds, profile),
# one run checked against transformers' logits.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV) + working tree"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/m2.tar.xz" r && rm -rf "$R"' EXIT
for b in kernel_statistics_base kernel_statistics; do
  timeout 60 "$g/bin/$b" --only linear_bf16 > "$R/$b.txt" 2>&1; echo "$b rc=$?"
  grep -E "m1_norm|_m1 |norm_sg32" "$R/$b.txt" | cut -c1-160
done
export VK_LAYER_PATH="$g/layer" VKCOMPUTE_VALIDATION=1 VKCOMPUTE_VALIDATION_ERRORS=1
timeout 120 "$g/bin/test_ops_linear_normed" --test-threads=1 > "$R/test_ops_linear_normed.txt" 2>&1; echo "test rc=$?"
grep -E "^test |test result" "$R/test_ops_linear_normed.txt"
unset VK_LAYER_PATH VKCOMPUTE_VALIDATION VKCOMPUTE_VALIDATION_ERRORS
q=/tmp/q3; rm -rf $q
s=$(date +%s); python3 "$g/qwen3_reference.py" --out "$q" --size 4b --no-timing > "$R/q3_ref.txt" 2>&1; echo "ref rc=$? $(( $(date +%s) - s )) s"
for round in 1 2 3; do
  for b in qwen3_base qwen3; do
    f="$R/${b}_$round.txt"
    timeout 120 "$g/bin/$b" "$q" --decode 32 --profile > "$f" 2>&1; echo "$b round $round rc=$?"
    grep -hE "^decode \(B|^decode pipelined|^sequence 0" "$f" | sed 's/, [0-9.]* tokens\/s.*//' | cut -c1-120
    grep -hE "^  (linear)[a-z0-9_]* \(" "$f" | sed 's/; per launch.*median/ median/' | cut -c1-140
  done
done
timeout 200 "$g/bin/qwen3" "$q" --reference "$q/reference.safetensors" > "$R/qwen3_check.txt" 2>&1; echo "check rc=$?"
grep -E "worst|greedy" "$R/qwen3_check.txt" | cut -c1-220
