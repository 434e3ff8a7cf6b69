#!/usr/bin/env bash
# Call u1: decode attention and the o projection in one dispatch, the
# projection's weights read onto the chip (registers and shared memory)
# while the attention runs. The op's tests under validation (the one
# dispatch runs on a GPU only); the 4B check against transformers;
# Qwen3-4B decode at B = 1, the one dispatch (default) against
# --unfused-o in the same binary (three rounds), after 600 and 4000
# tokens, at B = 4 (the two ops either way); the driver's statistics; a
# profile.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV)"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/u1.tar.xz" r && rm -rf "$R"' EXIT
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
for t in ops_nn_decode_project; do
  VK_LAYER_PATH=$g/layer VKCOMPUTE_VALIDATION=1 VKCOMPUTE_VALIDATION_ERRORS=1 timeout 150 "$g/bin/test_$t" --test-threads=1 > "$R/test_$t.txt" 2>&1; echo "$t rc=$?"
  grep -E "test result|panicked|FAILED|skipped|error" "$R/test_$t.txt" | head -6 | cut -c1-250
done
q=/tmp/q3; rm -rf $q
python3 "$g/qwen3_reference.py" --out "$q" --size 4b --no-static --no-timing > "$R/q3_ref.txt" 2>&1; echo "reference rc=$? at $(el) s"
timeout 240 "$g/bin/qwen3" "$q" --reference "$q/reference.safetensors" > "$R/q3_check.txt" 2>&1; echo "check rc=$?"; grep -E "worst|greedy" "$R/q3_check.txt" | cut -c1-200
for round in 1 2 3; do
  for v in fused unfused; do
    f="$R/qwen3_${v}_$round.txt"
    a=""; [ $v = unfused ] && a="--unfused-o"
    timeout 100 "$g/bin/qwen3" "$q" --decode 32 $a > "$f" 2>&1; echo "$v round $round rc=$?"
    grep -hE "^decode \(B|^decode pipelined" "$f" | sed 's/, [0-9.]* tokens\/s.*//' | cut -c1-120
  done
done
for n in 600 4000; do
  for v in fused unfused; do
    f="$R/qwen3_${v}_p$n.txt"
    a=""; [ $v = unfused ] && a="--unfused-o"
    timeout 150 "$g/bin/qwen3" "$q" --prompt-len $n --decode 16 $a > "$f" 2>&1; echo "$v after $n rc=$?"
    grep -hE "^decode \(B|^decode pipelined" "$f" | sed 's/, [0-9.]* tokens\/s.*//' | cut -c1-120
  done
done
timeout 100 "$g/bin/qwen3" "$q" --decode 16 --batch 4 > "$R/qwen3_b4.txt" 2>&1; echo "B=4 rc=$?"
grep -hE "^decode \(B|^decode pipelined" "$R/qwen3_b4.txt" | sed 's/, [0-9.]* tokens\/s.*//' | cut -c1-120
timeout 100 "$g/bin/qwen3" "$q" --decode 32 --profile --statistics > "$R/qwen3_prof.txt" 2>&1; echo "profile rc=$?"
sed -n '/profile of one decode step/,/total/p' "$R/qwen3_prof.txt" | cut -c1-150
grep -iE "qko|registers|attn" "$R/qwen3_prof.txt" | grep -v "^  " | head -12 | cut -c1-200
echo "done at $(el) s"
