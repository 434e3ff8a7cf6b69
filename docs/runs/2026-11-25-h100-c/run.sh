#!/usr/bin/env bash
# Session 2026-11-25, last call: the second half of the integration tests
# under validation with VKCOMPUTE_REQUIRE_PATHS=1 (after the streams
# overlap test stopped asserting a timing ratio under the layer), then
# gpu_report's dispatch rows again (round-trip CPU time now from
# CLOCK_THREAD_CPUTIME_ID). Run from the project root with the tests2
# bundle: source .gpu_tests2/setup.sh && bash .gpu_tests2/run_c.sh
set -u
g=$(cd "$(dirname "$0")" && pwd)
bash "$g/run.sh" tests
tar -C "$g" -xJf "$g/bundle.tar.xz"   # run.sh's work folder is gone: unpack again for gpu_report
echo "== gpu_report --only dispatch (no validation)"
VKCOMPUTE_DEVICE=NVIDIA timeout 200 "$g/bin/gpu_report" --only dispatch --json "$OUT/report.json" > "$OUT/report.txt" 2>&1; echo "rc=$?"
cut -c1-170 "$OUT/report.txt" | tail -32
