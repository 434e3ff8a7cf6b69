#!/usr/bin/env bash
# Call n1: scripts/gpu_session/session.sh's roundtrip part, packed as
# .gpu/ by scripts/gpu_session/pack.sh (see README.md here).
cd .gpu && GPU_REPORT_BUILDS="base mid c1 c2 c3 c4 c5 new again" ROUNDTRIP_PROCS=8 VKCOMPUTE_RT_ROWS=b2b OUT=$OUT bash ./session.sh roundtrip > $OUT/session.txt 2>&1
