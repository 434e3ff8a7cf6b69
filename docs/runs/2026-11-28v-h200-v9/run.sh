#!/usr/bin/env bash
# Call v9: gate|up at one row with units of 8 rows and two chunks a step
# (v8: 27.0 against 28.1-28.2 us), again, beside 6-row units and three
# chunks; and the same forms with the RMSNorm inside (NORM, as Qwen3-4B's
# decode records gate|up and q|k|v). linear_probe --copies 4.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV)"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/v9.tar.xz" r && rm -rf "$R"' EXIT
L=$g/lprobe
timeout 100 "$g/bin/kernel_statistics" --spv $L/c3_r8.spv $L/c2_r6.spv $L/n_c2.spv $L/n_c2_r8.spv $L/n_gu.spv > "$R/kstats.txt" 2>&1; sed 's#/[^ ]*/lprobe/##' "$R/kstats.txt" | grep "^| .*spv"
run() { local name=$1 shapes=$2; shift 2
  echo "== linear_probe $name --copies 4 --shapes $shapes $*" | sed 's#/[^ ]*/lprobe/##g'
  timeout 200 "$g/bin/linear_probe" --copies 4 --shapes "$shapes" "$@" > "$R/$name.txt" 2>&1; echo "rc=$?"; grep -E "µs|FAIL" "$R/$name.txt" | sed 's#/[^ ]*/lprobe/##' | cut -c1-170; }
run gu1 "1,2560,19456,1" $L/gu.spv:4:1 $L/c2_r8.spv:8:1 $L/c3_r8.spv:8:1 $L/c2_r6.spv:6:1
run gu1n "1,2560,19456,1" --norm $L/n_c2.spv:4:1 $L/n_c2_r8.spv:8:1 $L/n_gu.spv:4:1
run qkvn "1,2560,6144,0" --norm $L/n_c2_r8.spv:8:1 $L/n_c2.spv:4:1
run gu1b "1,2560,19456,1" $L/gu.spv:4:1 $L/c2_r8.spv:8:1
