#!/usr/bin/env bash
# Call n2: scripts/gpu_session/session.sh's roundtrip part, packed as
# .gpu/ by scripts/gpu_session/pack.sh (see README.md here).
cd .gpu && GPU_REPORT_BUILDS="base new again" ROUNDTRIP_PROCS=8 OUT=$OUT bash ./session.sh roundtrip > $OUT/session.txt 2>&1
