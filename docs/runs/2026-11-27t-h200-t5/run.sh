#!/usr/bin/env bash
# Call t5: the 1-row launch rules of t4 in the library: normed layers of
# one to two workgroups per compute unit unnarrowed on the normed
# subgroup-32 kernel (Qwen3-4B's q|k|v), narrowed 1-row layers on the
# subgroup-32 build of two chunks per step (o, down). The op tests under
# validation; linear_probe's default rows beside the old kernels' builds;
# the 4B check; Qwen3-4B decode at B = 1 against 57df6cf's build (three
# rounds); a profile.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV)"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/t5.tar.xz" r && rm -rf "$R"' EXIT
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
for t in ops_linear_normed ops_linear; do
  VK_LAYER_PATH=$g/layer VKCOMPUTE_VALIDATION=1 VKCOMPUTE_VALIDATION_ERRORS=1 timeout 150 "$g/bin/test_$t" --test-threads=1 > "$R/test_$t.txt" 2>&1; echo "$t rc=$?"
  grep -E "test result|panicked|FAILED|skipped" "$R/test_$t.txt" | head -4
done
L=$g/lprobe
p() { # name, args...
  local n=$1; shift
  timeout 150 "$g/bin/linear_probe" --copies 4 "$@" > "$R/$n.txt" 2>&1; echo "$n rc=$? at $(el) s"
  grep -E "µs min|FAIL" "$R/$n.txt" | sed 's/  */ /g; s#/[^ ]*/lprobe/##' | cut -c1-150
}
p qkv --norm --shapes "1,2560,6144,0,2" $L/old.spv:4:1:4
p o --shapes "1,4096,2560,0,4" $L/m1.spv:4:1:2
p down --shapes "1,9728,2560,0,4" $L/m1.spv:4:1:2
q=/tmp/q3; rm -rf $q
python3 "$g/qwen3_reference.py" --out "$q" --size 4b --no-static --no-timing > "$R/q3_ref.txt" 2>&1; echo "reference rc=$? at $(el) s"
timeout 240 "$g/bin/qwen3" "$q" --reference "$q/reference.safetensors" > "$R/q3_check.txt" 2>&1; echo "check rc=$?"; grep -E "worst" "$R/q3_check.txt" | cut -c1-200
for round in 1 2 3; do
  for b in qwen3_base qwen3; do
    f="$R/${b}_$round.txt"
    timeout 100 "$g/bin/$b" "$q" --decode 32 > "$f" 2>&1; echo "$b round $round rc=$?"
    grep -hE "^decode \(B|^decode pipelined" "$f" | sed 's/, [0-9.]* tokens\/s.*//' | cut -c1-120
  done
done
timeout 100 "$g/bin/qwen3" "$q" --decode 32 --profile > "$R/qwen3_prof.txt" 2>&1; echo "profile rc=$?"
sed -n '/profile of one decode step/,/total/p' "$R/qwen3_prof.txt" | cut -c1-150
echo "done at $(el) s"
