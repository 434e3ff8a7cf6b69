#!/usr/bin/env bash
# Call w3: `restrict` on the read-only buffers. The floor's read kernel
# with its weight buffer declared `restrict readonly` or `readonly`
# (stream_floor --restrict), its CUDA twin with __ldg or plain loads
# (stream_twin --plain), the skinny kernels built both ways (linear_probe
# variants b_* = built-in, r_* = X, W and the norm weight `restrict`), and
# the whole library built both ways (qwen3 / ffn_stack against
# qwen3_r / ffn_stack_r, restrict_linear.diff).
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; echo "commit: $(cat $g/REV)"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/w3.tar.xz" r && rm -rf "$R"' EXIT
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
nvcc -O3 -arch=sm_90 -o /tmp/stream_twin "$g/cuda/stream_twin.cu" > "$R/nvcc.txt" 2>&1; echo "nvcc rc=$?"
for round in 1 2; do
  for f in "" --restrict; do
    echo "== stream_floor sizes $f, round $round"
    timeout 90 "$g/bin/stream_floor" --sizes-mb 25,50,100,200 $f > "$R/floor_sizes${f}_$round.txt" 2>&1; echo "rc=$?"
    grep -vE "^ *$" "$R/floor_sizes${f}_$round.txt" | cut -c1-200 | tail -n 14
    echo "== stream_floor pattern $f, round $round"
    timeout 60 "$g/bin/stream_floor" --pattern 31.5,21,99.6,49.8 --total-gb 5.4 $f > "$R/floor_pattern${f}_$round.txt" 2>&1; echo "rc=$?"
    grep -E "pattern|place" "$R/floor_pattern${f}_$round.txt" | head -6 | cut -c1-200
  done
  for f in "" --plain; do
    echo "== stream_twin pattern $f, round $round"
    timeout 90 /tmp/stream_twin --pattern 31.5,21,99.6,49.8 $f > "$R/twin_pattern${f}_$round.txt" 2>&1; echo "rc=$?"; grep -E "pattern|wall|check" "$R/twin_pattern${f}_$round.txt" | cut -c1-220
  done
  for s in 25 50 100 200; do
    timeout 90 /tmp/stream_twin --pattern $s > "$R/twin_size${s}_$round.txt" 2>&1; echo "twin $s rc=$?"; grep -E "^pattern|wall" "$R/twin_size${s}_$round.txt" | cut -c1-220
  done
done
echo "== at $(el) s"
L=$g/lprobe
lp() { local name=$1 shapes=$2; shift 2
  echo "== linear_probe $name --copies 4 --shapes $shapes $*"
  timeout 120 "$g/bin/linear_probe" --copies 4 --shapes "$shapes" "$@" > "$R/lp_$name.txt" 2>&1; echo "rc=$?"; grep -vE "^ *$" "$R/lp_$name.txt" | cut -c1-190 | tail -n 8; }
lp gu1 "1,2560,19456,1" $L/b_linear_bf16_m1_sg32.spv:4:1 $L/r_linear_bf16_m1_sg32.spv:4:1
lp dn1 "1,9728,2560,0,4" $L/b_linear_bf16_m1_sg32_c2.spv:4:1 $L/r_linear_bf16_m1_sg32_c2.spv:4:1
lp gu4 "4,2560,19456,1" $L/b_linear_bf16_sg32.spv:4:4 $L/r_linear_bf16_sg32.spv:4:4
lp dn4 "4,9728,2560,0,4" $L/b_linear_bf16_sg32.spv:4:4 $L/r_linear_bf16_sg32.spv:4:4
lp qkv1n "1,2560,6144,0" --norm $L/b_linear_bf16_m1_norm_sg32.spv:4:1 $L/r_linear_bf16_m1_norm_sg32.spv:4:1
lp gu1n "1,2560,19456,1" --norm $L/b_linear_bf16_m1_norm_sg32.spv:4:1 $L/r_linear_bf16_m1_norm_sg32.spv:4:1
echo "== at $(el) s"
q=/tmp/q3; rm -rf $q
python3 "$g/qwen3_reference.py" --out "$q" --size 4b --no-static --no-timing > "$R/q3_ref.txt" 2>&1; echo "reference rc=$? at $(el) s"
timeout 200 "$g/bin/qwen3_r" "$q" --reference "$q/reference.safetensors" > "$R/q3_check_r.txt" 2>&1; echo "check (restrict) rc=$?"; grep -E "worst" "$R/q3_check_r.txt" | cut -c1-200
for n in 1 2 3; do
  for b in qwen3 qwen3_r; do
    [ "$(el)" -lt 480 ] || { echo "out of time before $b $n"; continue; }
    echo "== $b --decode 32 ($n)"
    timeout 100 "$g/bin/$b" "$q" --decode 32 > "$R/${b}_$n.txt" 2>&1; echo "rc=$?"
    grep -hE "^decode \(|^decode pipelined" "$R/${b}_$n.txt" | sed 's/, [0-9.]* tokens\/s, / ; /' | cut -c1-200
  done
done
for b in ffn_stack ffn_stack_r; do
  [ "$(el)" -lt 520 ] || { echo "out of time before $b"; continue; }
  echo "== $b bf16,f32 at 1,4,16 at $(el) s"
  timeout 60 "$g/bin/$b" --dtypes f32,bf16 --tokens 1,4,16 > "$R/$b.txt" 2>&1; echo "rc=$?"; grep -vE "^ *$" "$R/$b.txt" | cut -c1-200 | tail -n 12
done
echo "done at $(el) s"
