#!/usr/bin/env bash
# Packs .gpu/ for one device call of session.sh: release builds of the
# named integration tests (as bin/test_<name>) and examples (bin/<name>:
# the root package's, as 01_saxpy or qwen3, or measure/'s programs, as
# gpu_report or matmul),
# stripped, with Debian 13's validation layer (layer/, fetched by
# scripts/gpu_bundle.sh's fetch into /tmp/vkcompute-gpu-layer) and its
# loader deb, plus this folder's scripts and the references they call.
# Usage: bash scripts/gpu_session/pack.sh "test1 test2" "example1 example2"
set -euo pipefail
cd "$(dirname "$0")/../.."
[ -f .gpu/setup.sh ] || { echo "run: bash ../shared/gpu/prepare.sh" >&2; exit 1; }
tests=${1:-}; examples=${2:-}; tdir=${CARGO_TARGET_DIR:-target}
layer=/tmp/vkcompute-gpu-layer
[ -f "$layer/root/usr/lib/x86_64-linux-gnu/libVkLayer_khronos_validation.so" ] || {
  echo "pack: no Debian 13 validation layer under $layer: run scripts/gpu_bundle.sh tests once" >&2; exit 1; }
args=(); for t in $tests; do args+=(--test "$t"); done
for e in $examples; do args+=(--example "$e"); done
# Over the workspace (less the peers): each --example is found in the
# package that has it; every example lands in $tdir/release/examples/.
[ ${#args[@]} -eq 0 ] || cargo build --release --workspace --exclude vkcompute-peers "${args[@]}" >/dev/null
stage=$(mktemp -d); mkdir -p "$stage/bin" "$stage/layer"
newest() { ls -t "$tdir"/release/deps/"$1"-* 2>/dev/null | grep -v '\.d$' | head -1; }
for t in $tests; do cp "$(newest "$t")" "$stage/bin/test_$t"; done
for e in $examples; do cp "$tdir/release/examples/$e" "$stage/bin/"; done
# EXTRA="path=name ...": more binaries, e.g. a gpu_report built at the
# commit the dispatch rows compare with (gpu_report_base).
for x in ${EXTRA:-}; do cp "${x%%=*}" "$stage/bin/${x##*=}"; done
cp "$layer/root/usr/lib/x86_64-linux-gnu/libVkLayer_khronos_validation.so" "$stage/layer/"
sed 's#"library_path": *"[^"]*"#"library_path": "./libVkLayer_khronos_validation.so"#' \
  "$layer/root/usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json" \
  > "$stage/layer/VkLayer_khronos_validation.json"
rm -f .gpu/debs/libvulkan1_*.deb; cp "$layer"/debs/libvulkan1_*.deb .gpu/debs/
[ -z "$(ls "$stage/bin")" ] || strip "$stage"/bin/*
tar -C "$stage" -cf - bin layer | xz -T0 -6 > .gpu/bundle.tar.xz
rm -rf "$stage"
cp scripts/gpu_session/*.sh .gpu/
mkdir -p .gpu/cuda && cp scripts/cuda/*.cu .gpu/cuda/
cp scripts/compare_dispatch.py scripts/ffn_reference.py scripts/qwen3_reference.py .gpu/
cp scripts/cuda_reference.py .gpu/cuda_reference_mm.py
git rev-parse --short HEAD > .gpu/REV
echo "carried tree .gpu: $(( $(du -sb .gpu | cut -f1) >> 20 )) MiB (limit 64 MiB)"
