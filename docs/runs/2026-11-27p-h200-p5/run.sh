#!/usr/bin/env bash
# Call p5: the final tree (split-K layers of an in-place residual add
# adding into y with f32 atomic adds, in the tensor-core streaming kernel
# and the skinny kernels at 4, 8 and 16 rows) against the tree before
# them (bin/*_base) in the same call: ops_linear, ops_linear_stream and
# qwen3 under validation; the FFN stack, f32 and bf16, at 1, 4, 16 and 64
# tokens beside PyTorch, builds alternating; Qwen3-4B decode at B = 1 and
# 16.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV)"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/p5.tar.xz" r && rm -rf "$R"' EXIT
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
for t in ops_linear ops_linear_stream qwen3; do
  echo "== test_$t (validation + sync validation) at $(el) s"
  VK_LAYER_PATH=$g/layer VKCOMPUTE_VALIDATION=1 VKCOMPUTE_VALIDATION_ERRORS=1 timeout 150 "$g/bin/test_$t" --test-threads=1 > "$R/test_$t.txt" 2>&1; echo "rc=$?"; grep -E "test result|panicked|FAILED" "$R/test_$t.txt" | head -5
done
echo "== ffn_reference.py at $(el) s"
python3 "$g/ffn_reference.py" --tokens 1,4,16,64 --out "$R/torch.json" > "$R/torch.txt" 2>&1; echo "rc=$?"
for i in 1 2; do
  for b in "" _base; do
    echo "== ffn_stack$b T=1,4,16,64 round $i at $(el) s"
    timeout 200 "$g/bin/ffn_stack$b" --tokens 1,4,16,64 --torch "$R/torch.json" --json "$R/ffn${b}_$i.json" > "$R/ffn${b}_$i.txt" 2>&1; echo "rc=$?"; grep -E "median|Error|panic|differ|copy band" "$R/ffn${b}_$i.txt" | cut -c1-175
  done
done
q=/tmp/q3; rm -rf $q
echo "== qwen3_reference.py at $(el) s"
python3 "$g/qwen3_reference.py" --out "$q" --size 4b --no-timing > "$R/q3_ref.txt" 2>&1; echo "ref rc=$?"
timeout 60 "$g/bin/qwen3" "$q" --reference "$q/reference.safetensors" > "$R/q3_check.txt" 2>&1; echo "check rc=$?"; grep -E "worst" "$R/q3_check.txt" | cut -c1-220
for run in "b16_1 --batch 16" "b16_base_1 --batch 16 base" "b16_2 --batch 16" "b1 --batch 1"; do
  set -- $run; name=$1; shift; bin=qwen3; args=""
  for a in "$@"; do if [ "$a" = base ]; then bin=qwen3_base; else args="$args $a"; fi; done
  timeout 60 "$g/bin/$bin" "$q" --decode 32 $args > "$R/q3_$name.txt" 2>&1; echo "$name rc=$?"; grep -hE "^decode \(|^decode pipelined" "$R/q3_$name.txt" | cut -c1-200
done
echo "done at $(el) s"
