#!/usr/bin/env bash
# Builds what the GPU machine runs and packs it into .gpu/ (git-ignored):
# release examples, the criterion bench binaries, the integration-test
# binaries, and the Khronos validation layer (so tests keep validation on
# there too). Run `bash ../shared/gpu/prepare.sh` once before. Then, on the
# GPU machine (device tool, carry [".gpu"]):
#   source .gpu/setup.sh && bash .gpu/run.sh
# The carried tree is limited to 64 MiB, so the binaries come in two sets:
#   bash scripts/gpu_bundle.sh perf    # examples, peers, criterion benches (parts: report peers bench examples)
#   bash scripts/gpu_bundle.sh tests   # integration tests + validation layer (parts: tests soak)
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f .gpu/setup.sh ] || { echo "run: bash ../shared/gpu/prepare.sh" >&2; exit 1; }
set_name=${1:-perf}
cargo build --release --examples --benches --tests >/dev/null
cargo build --release -p vkcompute-peers >/dev/null
stage=$(mktemp -d)
mkdir -p "$stage/bin" "$stage/layer"
newest() { ls -t target/release/deps/"$1"-* 2>/dev/null | grep -v '\.d$' | head -1; }
case "$set_name" in
  perf)
    for ex in saxpy batch async gpu_report multi_gpu ops op_batch; do cp "target/release/examples/$ex" "$stage/bin/"; done
    cp target/release/peers_report "$stage/bin/"
    for b in dispatch floor bandwidth startup; do cp "$(newest "$b")" "$stage/bin/$b"; done
    ;;
  tests)
    # The newest binary of each test target that says something about a
    # real driver, as test_<name> (properties and smoke are CPU-side or
    # covered by the others; they stay on lavapipe to keep the set small).
    cp target/release/examples/gpu_report "$stage/bin/"
    for t in buffer buffer_errors batch batch_errors copy ticket concurrency kernel device leaks bad_input oom device_loss cache set_cache soak ops_elementwise ops_reduce ops_rows ops_registry op_batch fusion; do
      cp "$(newest "$t")" "$stage/bin/test_$t"
    done
    cp /usr/lib/x86_64-linux-gnu/libVkLayer_khronos_validation.so "$stage/layer/"
    sed 's#"library_path": *"[^"]*"#"library_path": "./libVkLayer_khronos_validation.so"#' \
      /usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json > "$stage/layer/VkLayer_khronos_validation.json"
    ;;
  *) echo "usage: $0 [perf|tests]" >&2; exit 2 ;;
esac
strip "$stage"/bin/*
tar -C "$stage" -cf - bin layer | xz -T0 -3 > .gpu/bundle.tar.xz
rm -rf "$stage"
cp scripts/gpu_run.sh .gpu/run.sh
cp scripts/perf_table.py .gpu/perf_table.py
ls -la .gpu/bundle.tar.xz
