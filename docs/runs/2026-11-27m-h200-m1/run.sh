#!/usr/bin/env bash
# Call m1: the round-trip rows alone (gpu_report --only roundtrip: three
# children per side in each process), three builds of one harness (this
# checkout's measure/): gpu_report_base against the library at fac9bce,
# gpu_report_mid at 761b61f (the end of the layer moves, before the
# correctness work merged), gpu_report_new at HEAD; alternating, pinned to
# cores 2,3, up to six processes per build while the call has time.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV)"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/m1.tar.xz" r && rm -rf "$R"' EXIT
lscpu | grep -E "^(Model name|CPU\(s\)|NUMA node)" || true
T0=$(date +%s)
for i in 1 2 3 4 5 6; do
  for b in base mid new; do
    [ $(( $(date +%s) - T0 )) -lt 480 ] || { echo "out of time before $b $i"; continue; }
    s=$(date +%s)
    taskset -c 2,3 timeout 80 "$g/bin/gpu_report_$b" --only roundtrip --json "$R/rt_${b}_$i.json" > "$R/rt_${b}_$i.txt" 2>&1
    echo "$b process $i rc=$? $(( $(date +%s) - s )) s"
  done
done
for b in mid new; do
  echo "== $b against base"
  python3 "$g/compare_dispatch.py" --base "$R"/rt_base_*.json --new "$R"/rt_${b}_*.json --limit 0.03 | tee "$R/compare_$b.md"
done
echo "== new against mid"
python3 "$g/compare_dispatch.py" --base "$R"/rt_mid_*.json --new "$R"/rt_new_*.json --limit 0.03 | tee "$R/compare_new_mid.md"
