#!/usr/bin/env bash
# Call t10: normed layers of at most 64 MiB of weights fuse the norm at 4
# rows per pass on the subgroup-32 kernels (t9: Qwen3-4B's q|k|v 19.5 µs
# fused against 22.1 with the norm apart). ops_linear_normed under
# validation; linear_probe's default row at 4 rows; Qwen3-4B decode of 4
# sequences against the tree before (bin/qwen3_base, ed929ca), three
# rounds, and one round at B = 1 (unchanged: one row per pass).
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV)"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/t10.tar.xz" r && rm -rf "$R"' EXIT
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
VK_LAYER_PATH=$g/layer VKCOMPUTE_VALIDATION=1 VKCOMPUTE_VALIDATION_ERRORS=1 timeout 150 "$g/bin/test_ops_linear_normed" --test-threads=1 > "$R/test_ops_linear_normed.txt" 2>&1; echo "ops_linear_normed rc=$?"
grep -E "test result|panicked|FAILED|skipped" "$R/test_ops_linear_normed.txt" | head -4
timeout 150 "$g/bin/linear_probe" --copies 4 --norm --shapes "4,2560,6144,0;4,2560,19456,1" > "$R/probe.txt" 2>&1; echo "probe rc=$? at $(el) s"
grep -E "µs min|FAIL" "$R/probe.txt" | sed 's/  */ /g' | cut -c1-150
q=/tmp/q3; rm -rf $q
python3 "$g/qwen3_reference.py" --out "$q" --size 4b --no-static --no-timing > "$R/q3_ref.txt" 2>&1; echo "reference rc=$? at $(el) s"
timeout 240 "$g/bin/qwen3" "$q" --reference "$q/reference.safetensors" > "$R/q3_check.txt" 2>&1; echo "check rc=$?"; grep -E "worst" "$R/q3_check.txt" | cut -c1-200
for round in 1 2 3; do
  for b in qwen3_base qwen3; do
    f="$R/${b}_b4_$round.txt"
    timeout 100 "$g/bin/$b" "$q" --decode 32 --batch 4 > "$f" 2>&1; echo "$b B=4 round $round rc=$?"
    grep -hE "^decode \(B|^decode pipelined" "$f" | sed 's/, [0-9.]* tokens\/s.*//' | cut -c1-120
  done
done
for b in qwen3_base qwen3; do
  f="$R/${b}_b1.txt"
  timeout 100 "$g/bin/$b" "$q" --decode 32 > "$f" 2>&1; echo "$b B=1 rc=$?"
  grep -hE "^decode \(B|^decode pipelined" "$f" | sed 's/, [0-9.]* tokens\/s.*//' | cut -c1-120
done
timeout 100 "$g/bin/qwen3" "$q" --decode 32 --batch 4 --profile > "$R/qwen3_b4_prof.txt" 2>&1; echo "profile rc=$?"
sed -n '/by place/,/total/p' "$R/qwen3_b4_prof.txt" | cut -c1-140
echo "done at $(el) s"
