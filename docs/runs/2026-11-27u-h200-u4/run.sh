#!/usr/bin/env bash
# Call u4: where the one-dispatch attention + o projection's time goes:
# the whole dispatch (PGROUP 14), the projection's wait removed
# (VKCOMPUTE_QKO_PGROUP=99), the projection part alone (98: the
# attention's workgroups return at once) and the attention part alone
# (97: the projection's return at once) — wrong results where a part is
# skipped, measurements only — beside the two dispatches. Profiles only
# (the kernel's per-launch GPU time), Qwen3-4B decode at B = 1.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV)"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/u4.tar.xz" r && rm -rf "$R"' EXIT
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
q=/tmp/q3; rm -rf $q
python3 "$g/qwen3_reference.py" --out "$q" --size 4b --no-static --no-timing > "$R/q3_ref.txt" 2>&1; echo "reference rc=$? at $(el) s"
run() { # name, "ENV=V ...", "extra args"
  local n=$1
  env $2 timeout 100 "$g/bin/qwen3" "$q" --decode 16 --profile ${3:-} > "$R/$n.txt" 2>&1; echo "$n rc=$?"
  grep -hE "^decode \(B" "$R/$n.txt" | sed 's/, [0-9.]* tokens\/s.*//' | cut -c1-110
  grep -E "^  (nn_attn|linear_bf16_m1_sg32_c2 \(nn_attn)" "$R/$n.txt" | sed 's/  */ /g' | cut -c1-160
}
run unfused "VKC_X=1" "--unfused-o"
run g14 "VKCOMPUTE_QKO_PGROUP=14"
run nowait "VKCOMPUTE_QKO_PGROUP=99"
run projonly "VKCOMPUTE_QKO_PGROUP=98"
run attnonly "VKCOMPUTE_QKO_PGROUP=97"
echo "done at $(el) s"
