#!/usr/bin/env bash
# Call n5: the blocking back-to-back round trip alone
# (VKCOMPUTE_RT_ROWS=block_b2b), gpu_report_base (library at fac9bce),
# gpu_report_new (this tree) and the base binary again (an A/A), ten
# processes each in rotated order (session.sh's roundtrip part); then,
# where strace exists, the system calls of one round-trip child of each
# build (ours alone, blocking rows only).
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
cd "$g"
which strace ltrace perf 2>&1 | head -5
GPU_REPORT_BUILDS="base new again" ROUNDTRIP_PROCS=10 VKCOMPUTE_RT_ROWS=block_b2b OUT=$OUT \
  bash ./session.sh roundtrip > "$OUT/session.txt" 2>&1
grep -A6 "pooled$\|again against base$" "$OUT/session.txt" | cut -c1-230
if command -v strace >/dev/null; then
  source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
  B=$(mktemp -d); tar -xJf "$g/bundle.tar.xz" -C "$B"
  for b in base new; do
    VKCOMPUTE_RT_ROWS=block_b2b VKCOMPUTE_QUICK=1 taskset -c 2,3 strace -f -c -o "$OUT/strace_$b.txt" \
      "$B/bin/gpu_report_$b" --roundtrip-child ours > "$OUT/child_$b.txt" 2>&1
    echo "== strace $b"; head -25 "$OUT/strace_$b.txt"
  done
fi
