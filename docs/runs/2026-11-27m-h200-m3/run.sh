#!/usr/bin/env bash
# Call m3: the round-trip rows alone with the paired harness (each child
# process measures ours and the floor in turn, one device at a time),
# gpu_report_base (library at fac9bce) and gpu_report_new (HEAD), both
# this checkout's measure/; the base binary runs twice per round under two
# names (base, again: an A/A comparison of one binary). Pinned to cores
# 2,3, alternating base, new, again, up to seven rounds while the call has
# time.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV)"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/m3.tar.xz" r && rm -rf "$R"' EXIT
T0=$(date +%s)
for i in 1 2 3 4 5 6 7; do
  for b in base new again; do
    [ $(( $(date +%s) - T0 )) -lt 470 ] || { echo "out of time before $b $i"; continue; }
    bin="$g/bin/gpu_report_$b"; [ "$b" = again ] && bin="$g/bin/gpu_report_base"
    s=$(date +%s)
    taskset -c 2,3 timeout 80 "$bin" --only roundtrip --json "$R/rt_${b}_$i.json" > "$R/rt_${b}_$i.txt" 2>&1
    echo "$b process $i rc=$? $(( $(date +%s) - s )) s"
  done
done
echo "== new against base"
python3 "$g/compare_dispatch.py" --base "$R"/rt_base_*.json --new "$R"/rt_new_*.json --limit 0.03 | tee "$R/compare_new.md"
echo "== again (the base binary) against base: A/A"
python3 "$g/compare_dispatch.py" --base "$R"/rt_base_*.json --new "$R"/rt_again_*.json --limit 0.03 | tee "$R/compare_again.md"
