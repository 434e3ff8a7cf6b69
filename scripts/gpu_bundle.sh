#!/usr/bin/env bash
# Builds what the GPU machine runs and packs it into .gpu/ (git-ignored):
# release examples and measurement programs (measure/examples), the
# criterion bench binaries, the integration-test
# binaries, and the Khronos validation layer (so tests keep validation on
# there too), plus the project's CUDA reference (scripts/cuda_reference.py
# and scripts/cuda_reference_persist.cu, built with nvcc there). Run
# `bash ../shared/gpu/prepare.sh` once before. Then, on the GPU machine
# (device tool, carry [".gpu"]):
#   source .gpu/setup.sh && bash .gpu/run.sh [parts]
# The carried tree is limited to 64 MiB, so the binaries come in two sets:
#   bash scripts/gpu_bundle.sh perf    # examples, peers, criterion benches (parts: report peers bench examples)
#   bash scripts/gpu_bundle.sh tests1  # first half of the integration tests + validation layer (parts: tests soak)
#   bash scripts/gpu_bundle.sh tests2  # the other half (the whole set no longer fits: each binary links shaderc)
#
# Needs, on this machine: a Rust toolchain, the Vulkan loader (libvulkan1;
# the peers link `-lvulkan`, which peers/build.rs resolves to
# libvulkan.so.1 when the libvulkan-dev symlink is missing), and what
# scripts/setup.sh installs for the `glsl` feature (it runs first).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f .gpu/setup.sh ] || { echo "run: bash ../shared/gpu/prepare.sh" >&2; exit 1; }
set_name=${1:-perf}
bash scripts/setup.sh
arch_dir="/usr/lib/$(uname -m)-linux-gnu"
if ! compgen -G "$arch_dir/libvulkan.so*" >/dev/null && ! compgen -G "/usr/lib/libvulkan.so*" >/dev/null; then
  echo "gpu_bundle: no Vulkan loader (libvulkan.so.1): install libvulkan1 (apt-get install libvulkan1)" >&2
  exit 1
fi
# Examples other work adds; each packed and run when it exists.
optional_examples="streams graph 04_pipeline_overlap async_tokio transfer_bandwidth host_access ops matmul megakernel megakernel_resident op_batch"
# The root package's examples, benches and tests, and measure/'s programs
# (its examples: built into target/release/examples/ beside the root's).
cargo build --release --workspace --exclude vkcompute-peers --examples --benches --tests >/dev/null
if [ "$set_name" = perf ]; then
  cargo build --release -p vkcompute-peers >/dev/null || {
    echo "gpu_bundle: building the peers failed; if the link says 'cannot find -lvulkan', install libvulkan1 (or libvulkan-dev)" >&2
    exit 1
  }
fi
# Downloads Debian 13's vulkan-validationlayers and libvulkan1 (amd64)
# through apt with a source list of its own (nothing of this machine's apt
# set-up changes), unpacks the layer into <dir>/root, keeps both debs in
# <dir>/debs, and prints <dir>.
fetch_gpu_layer() {
  local d=/tmp/vkcompute-gpu-layer
  if [ ! -f "$d/root/usr/lib/x86_64-linux-gnu/libVkLayer_khronos_validation.so" ]; then
    rm -rf "$d"; mkdir -p "$d/lists/partial" "$d/debs" "$d/root"
    # The Debian mirror this machine's apt already uses (first one listed).
    local mirror
    mirror=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '/^URIs:/ {print $2; exit}')
    [ -n "$mirror" ] || mirror=$(awk '/^deb / && $2 !~ /security/ {print $2; exit}' /etc/apt/sources.list 2>/dev/null)
    [ -n "$mirror" ] || return 1
    echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror trixie main" > "$d/sources.list"
    local o=(-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists="$d/lists"
      -oDir::Etc::SourceList="$d/sources.list" -oDir::Etc::SourceParts=/dev/null)
    apt-get "${o[@]}" update >/dev/null 2>&1 || return 1
    (cd "$d/debs" && apt-get "${o[@]}" download vulkan-validationlayers libvulkan1 >/dev/null 2>&1) || return 1
    dpkg -x "$d"/debs/vulkan-validationlayers_*.deb "$d/root" || return 1
  fi
  echo "$d"
}
stage=$(mktemp -d)
mkdir -p "$stage/bin" "$stage/layer"
newest() { ls -t target/release/deps/"$1"-* 2>/dev/null | grep -v '\.d$' | head -1; }
case "$set_name" in
  perf)
    for ex in 01_saxpy 02_batch 03_async gpu_report multi_gpu; do cp "target/release/examples/$ex" "$stage/bin/"; done
    for ex in $optional_examples; do
      [ -f "target/release/examples/$ex" ] && cp "target/release/examples/$ex" "$stage/bin/"
    done
    cp target/release/peers_report "$stage/bin/"
    for b in dispatch floor bandwidth startup; do cp "$(newest "$b")" "$stage/bin/$b"; done
    ;;
  tests|tests1|tests2)
    # The newest binary of each test target that says something about a
    # real driver, as test_<name> (properties, smoke and measure_rules are
    # CPU-side or covered by the others; they stay on lavapipe). Each test
    # binary links shaderc statically, so all of them no longer fit the
    # carried tree: tests1 packs the first half of the names (sorted),
    # tests2 the rest; `tests` packs all (when they fit).
    cp target/release/examples/gpu_report "$stage/bin/"
    names=$(for f in tests/*.rs; do basename "$f" .rs; done | grep -vxE 'properties|smoke|measure_rules' | sort)
    half=$(( ($(echo "$names" | wc -l) + 1) / 2 ))
    case "$set_name" in
      tests1) names=$(echo "$names" | head -n "$half") ;;
      tests2) names=$(echo "$names" | tail -n +"$((half + 1))") ;;
    esac
    for t in $names; do
      bin=$(newest "$t")
      [ -n "$bin" ] && cp "$bin" "$stage/bin/test_$t"
    done
    # The validation layer for the GPU machine (Ubuntu 24.04, glibc 2.39):
    # Debian 13's (1.4.309), which knows the extensions NVIDIA's driver
    # offers and the device enables (VK_KHR_cooperative_matrix among them;
    # Debian 12's 1.3.239 reports its feature struct as an unknown pNext and
    # every test fails on that). Falls back to this machine's layer, with a
    # warning, when Debian 13's package cannot be fetched.
    fetched=$(fetch_gpu_layer) || fetched=""
    if [ -n "$fetched" ]; then
      cp "$fetched/root/usr/lib/x86_64-linux-gnu/libVkLayer_khronos_validation.so" "$stage/layer/"
      layer_json="$fetched/root/usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json"
      # The loader of the same release: Debian 12's loader (1.3.239) asks
      # the device for vkGetPhysicalDeviceVideoEncodeQualityLevelPropertiesKHR,
      # an instance function to the newer layer, which reports it in every
      # test. .gpu/setup.sh unpacks every deb in .gpu/debs.
      rm -f .gpu/debs/libvulkan1_*.deb
      cp "$fetched"/debs/libvulkan1_*.deb .gpu/debs/
    else
      echo "gpu_bundle: WARNING: Debian 13's validation layer could not be fetched; packing this machine's (too old for VK_KHR_cooperative_matrix: tests will fail on its unknown feature struct)" >&2
      cp "$arch_dir/libVkLayer_khronos_validation.so" "$stage/layer/"
      layer_json=/usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json
    fi
    sed 's#"library_path": *"[^"]*"#"library_path": "./libVkLayer_khronos_validation.so"#' \
      "$layer_json" > "$stage/layer/VkLayer_khronos_validation.json"
    ;;
  *) echo "usage: $0 [perf|tests1|tests2|tests]" >&2; exit 2 ;;
esac
strip "$stage"/bin/*
tar -C "$stage" -cf - bin layer | xz -T0 -6 > .gpu/bundle.tar.xz
rm -rf "$stage"
cp scripts/gpu_run.sh .gpu/run.sh
cp scripts/perf_table.py scripts/cuda_reference.py scripts/cuda_reference_persist.cu .gpu/
total=$(du -sb .gpu | cut -f1)
ls -la .gpu/bundle.tar.xz
echo "carried tree .gpu: $((total >> 20)) MiB (limit 64 MiB)"
if [ "$total" -gt $((56 << 20)) ]; then
  echo "gpu_bundle: .gpu is over 56 MiB; drop binaries from the set or split it" >&2
  exit 1
fi
