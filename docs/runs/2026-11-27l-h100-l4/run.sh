#!/usr/bin/env bash
# Call l4 (H100): the dispatch rows with one harness. gpu_report_new is
# measure/'s gpu_report at f800dde; gpu_report_base is the same measure/
# sources built against the library at fac9bce (the auto-barrier rows,
# which fac9bce lacks, patched to manual barriers: not comparable). Three
# pinned processes per build, alternating; the round trips now run three
# children per side (alternating, medians).
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV) + working tree"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/l4.tar.xz" r && rm -rf "$R"' EXIT
echo "cuda_anchor: not run in this call (l3 ran it with the same harness)"
lscpu | grep -E "^(Model name|CPU\(s\)|NUMA node)" || true
T0=$(date +%s); for i in 1 2 3; do
  for b in base new; do
    [ $(( $(date +%s) - T0 )) -lt 470 ] || { echo "out of time before $b $i"; continue; }
    s=$(date +%s)
    taskset -c 2,3 timeout 95 "$g/bin/gpu_report_$b" --only dispatch --json "$R/dispatch_${b}_$i.json" > "$R/dispatch_${b}_$i.txt" 2>&1
    echo "$b process $i rc=$? $(( $(date +%s) - s )) s"
  done
done
python3 "$g/compare_dispatch.py" --base "$R"/dispatch_base_*.json --new "$R"/dispatch_new_*.json --limit 0.03 | tee "$R/compare.md"
