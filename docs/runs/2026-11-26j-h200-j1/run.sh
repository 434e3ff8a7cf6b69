#!/usr/bin/env bash
# Call j1: the launch floor of streaming (stream_floor) beside the FFN stack's per-kernel profile at two widths.
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
source "$g/setup.sh" >/dev/null; export VKCOMPUTE_DEVICE=NVIDIA
tar -C "$g" -xJf "$g/bundle.tar.xz"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv; echo "commit: $(cat $g/REV)"
R=$OUT/r; mkdir -p "$R"
trap 'tar -C "$OUT" -cJf "$OUT/j1.tar.xz" r && rm -rf "$R"' EXIT
echo "== stream_floor (ILP 4)"
timeout 150 "$g/bin/stream_floor" > "$R/floor_ilp4.txt" 2>&1; echo "rc=$?"; cat "$R/floor_ilp4.txt" | cut -c1-230
echo "== stream_floor (ILP 8)"
timeout 100 "$g/bin/stream_floor" --ilp 8 --sizes-mb 25,50,100,400 > "$R/floor_ilp8.txt" 2>&1; echo "rc=$?"; cat "$R/floor_ilp8.txt" | cut -c1-230
echo "== ffn_stack T=1,4 f32,bf16 --profile"
timeout 150 "$g/bin/ffn_stack" --tokens 1,4 --profile > "$R/ffn.txt" 2>&1; echo "rc=$?"; grep -vE "^ *$" "$R/ffn.txt" | cut -c1-200 | tail -60
echo "== ffn_stack T=1,4 bf16 --inter 38912 --profile"
timeout 150 "$g/bin/ffn_stack" --tokens 1,4 --dtypes bf16 --inter 38912 --profile > "$R/ffn_wide.txt" 2>&1; echo "rc=$?"; grep -vE "^ *$" "$R/ffn_wide.txt" | cut -c1-200 | tail -30
