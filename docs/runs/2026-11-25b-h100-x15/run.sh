#!/usr/bin/env bash
# Run 15: ResidentConfig::ordered_data on the H100: the resident example (three runs, beside the
# mailbox floor and cuda_persist.cu of the same call) and the resident tests under validation.
set -u
g=$(cd "$(dirname "$0")" && pwd)
tar -C "$g" -xJf "$g/bin.tar.xz"
export VKCOMPUTE_DEVICE=NVIDIA
(nvcc -O3 -arch=native -o /tmp/cuda_persist "$g/cuda_persist.cu" && timeout 60 /tmp/cuda_persist > "$OUT/cuda_persist.jsonl"); echo rc=$?
for rep in 1 2 3; do
  timeout 60 "$g/bin/megakernel_resident" --json "$OUT/megakernel_resident$rep.json" --cuda-persist "$OUT/cuda_persist.jsonl" > "$OUT/megakernel_resident$rep.txt" 2>&1; echo rc=$?
  grep -E "^\| (resident|…|raw)|vs" "$OUT/megakernel_resident$rep.txt" | cut -c1-150
done
export VK_LAYER_PATH="$g/layer" VKCOMPUTE_REQUIRE_PATHS=1 VKCOMPUTE_SKIP_LOG="$OUT/skips.log"
: > "$VKCOMPUTE_SKIP_LOG"
"$g/bin/test_megakernel_resident" --test-threads=1 --nocapture > "$OUT/test_megakernel_resident.log" 2>&1
grep -E "test result|skipped:|dependent" "$OUT/test_megakernel_resident.log"
grep -q "test result: ok" "$OUT/test_megakernel_resident.log" || sed -n '/^failures:/,$p' "$OUT/test_megakernel_resident.log" | head -40
echo "skips: $(wc -l < "$VKCOMPUTE_SKIP_LOG")"
