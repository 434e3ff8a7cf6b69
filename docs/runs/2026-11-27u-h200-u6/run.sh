#!/usr/bin/env bash
# Call u6: the projection part of the one-dispatch attention + o alone
# (VKCOMPUTE_QKO_PGROUP=98: the attention's workgroups return at once;
# a measurement only) in three builds: 4 register and 7 shared slots
# (u5), the same with every load into registers before the shared
# stores (tf), 11 register slots (r11); and each with the attention and
# the wait (PGROUP 14). Profiles, Qwen3-4B decode at B = 1.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV)"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/u6.tar.xz" r && rm -rf "$R"' EXIT
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
q=/tmp/q3; rm -rf $q
python3 "$g/qwen3_reference.py" --out "$q" --size 4b --no-static --no-timing > "$R/q3_ref.txt" 2>&1; echo "reference rc=$? at $(el) s"
run() { # name, "ENV=V ...", "extra args"
  local n=$1
  env $2 timeout 100 "$g/bin/qwen3" "$q" --decode 16 --profile ${3:-} > "$R/$n.txt" 2>&1; echo "$n rc=$?"
  grep -hE "^decode \(B" "$R/$n.txt" | sed 's/, [0-9.]* tokens\/s.*//' | cut -c1-110
  grep -E "^  (nn_attn|linear_bf16_m1_sg32_c2 \(nn_attn)" "$R/$n.txt" | sed 's/  */ /g' | cut -c1-160
  grep -E "^statistics nn_attn_decode1_qko_bf16w" "$R/$n.txt" | cut -c1-200
}
run unfused "VKC_X=1" "--unfused-o"
for k in base tf r11; do
  run proj_$k "VKCOMPUTE_QKO_PGROUP=98 VKCOMPUTE_QKO_KERNEL=$k" "--statistics"
  run full_$k "VKCOMPUTE_QKO_PGROUP=14 VKCOMPUTE_QKO_KERNEL=$k"
done
echo "done at $(el) s"
