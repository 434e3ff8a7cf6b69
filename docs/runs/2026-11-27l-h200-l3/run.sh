#!/usr/bin/env bash
# Call l3: the dispatch rows with one harness. gpu_report_new is
# measure/'s gpu_report at f800dde; gpu_report_base is the same measure/
# sources built against the library at fac9bce (the auto-barrier rows,
# which fac9bce lacks, patched to manual barriers: not comparable). Five
# pinned processes per build, alternating, after cuda_anchor.py.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit: $(cat $g/REV) + working tree"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/l3.tar.xz" r && rm -rf "$R"' EXIT
python3 "$g/cuda_anchor.py" > "$R/cuda_anchor.json" 2> "$R/cuda_anchor.err"; echo "cuda_anchor rc=$?"
lscpu | grep -E "^(Model name|CPU\(s\)|NUMA node)" || true
for i in 1 2 3 4 5; do
  for b in base new; do
    s=$(date +%s)
    taskset -c 2,3 timeout 150 "$g/bin/gpu_report_$b" --only dispatch --cuda "$R/cuda_anchor.json" --json "$R/dispatch_${b}_$i.json" > "$R/dispatch_${b}_$i.txt" 2>&1
    echo "$b process $i rc=$? $(( $(date +%s) - s )) s"
  done
done
python3 "$g/compare_dispatch.py" --base "$R"/dispatch_base_*.json --new "$R"/dispatch_new_*.json --limit 0.03 | tee "$R/compare.md"
