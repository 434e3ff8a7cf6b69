#!/usr/bin/env bash
# Call s3: why the one-dispatch attention + o projection takes 45 µs a
# layer (s1, s2): the driver's statistics of the decode attention kernels
# (--statistics), and the one-dispatch kernel with no projection
# workgroups (VKCOMPUTE_QKO_NOPROJ: its attention part alone; y is then
# not updated, timing only), beside --unfused-o; Qwen3-4B decode at B = 1.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV) + working tree"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/s3.tar.xz" r && rm -rf "$R"' EXIT
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
q=/tmp/q3; rm -rf $q
python3 "$g/qwen3_reference.py" --out "$q" --size 4b --no-static --no-timing > "$R/q3_ref.txt" 2>&1; echo "checkpoint rc=$? at $(el) s"
for v in fused noproj unfused; do
  f="$R/$v.txt"; extra=""; [ $v = unfused ] && extra="--unfused-o"
  np=""; [ $v = noproj ] && np=1
  timeout 100 env ${np:+VKCOMPUTE_QKO_NOPROJ=1} "$g/bin/qwen3" "$q" --decode 32 --profile --statistics $extra > "$f" 2>&1; echo "$v rc=$?"
  grep -hE "^decode \(B" "$f" | sed 's/, [0-9.]* tokens\/s.*//' | cut -c1-120
  grep -hE "^  (nn_attn|linear)[a-z0-9_]* \(" "$f" | sed 's/; per launch.*median/ median/' | cut -c1-140
  grep -hE "^statistics" "$f" | grep -E "nn_attn_decode1_qk |nn_attn_decode1_qko_bf16w " | grep -v "\[\]" | cut -c1-400
done
echo "done at $(el) s"
