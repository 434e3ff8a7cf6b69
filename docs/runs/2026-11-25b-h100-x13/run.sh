#!/usr/bin/env bash
# Run 13: streams overlap with spinning waits and a spinning pause (like for like on the host).
set -u
g=$(cd "$(dirname "$0")" && pwd)
tar -C "$g" -xJf "$g/bin.tar.xz"
export VKCOMPUTE_DEVICE=NVIDIA
for rep in 1 2 3; do
  timeout 60 "$g/bin/streams" --json "$OUT/streams$rep.json" > "$OUT/streams$rep.txt" 2>&1; echo rc=$?
  tail -5 "$OUT/streams$rep.txt"
done
