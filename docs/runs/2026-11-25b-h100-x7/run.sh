#!/usr/bin/env bash
# Diagnostic run 7: what the driver's submit cost of a recorded chain follows.
set -u
g=$(cd "$(dirname "$0")" && pwd)
tar -C "$g" -xJf "$g/bin.tar.xz"
export VKCOMPUTE_DEVICE=NVIDIA
timeout 200 "$g/bin/graph" > "$OUT/graph.txt" 2>&1; echo rc=$?; grep -E "floor submit|launch CPU|chain of|ONE_TIME" "$OUT/graph.txt" | cut -c1-260
