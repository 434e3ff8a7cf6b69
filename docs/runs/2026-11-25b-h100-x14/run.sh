#!/usr/bin/env bash
# Tests after the session's template changes: megakernel, resident, steps, streams, graph_streams under validation.
set -u
g=$(cd "$(dirname "$0")" && pwd)
tar -C "$g" -xJf "$g/bin.tar.xz"
export VKCOMPUTE_DEVICE=NVIDIA VK_LAYER_PATH="$g/layer" VKCOMPUTE_REQUIRE_PATHS=1 VKCOMPUTE_SKIP_LOG="$OUT/skips.log"
: > "$VKCOMPUTE_SKIP_LOG"
for tb in "$g"/bin/test_*; do
  name=$(basename "$tb"); echo "== $name (validation on)"
  "$tb" --test-threads=1 > "$OUT/$name.log" 2>&1
  grep -E "test result|skipped:" "$OUT/$name.log"
  grep -q "test result: ok" "$OUT/$name.log" || sed -n '/^failures:/,$p' "$OUT/$name.log" | head -40
done
echo "skips: $(wc -l < "$VKCOMPUTE_SKIP_LOG")"; sort "$VKCOMPUTE_SKIP_LOG" | uniq -c
