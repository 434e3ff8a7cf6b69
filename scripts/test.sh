#!/usr/bin/env bash
# The whole test suite: installs what is missing, then runs formatting and
# lint checks, unit, integration and doc tests on lavapipe (or any Vulkan
# driver present) with the Khronos validation layer and synchronization
# validation on (any validation message fails a test), builds the fuzz
# target and runs it over its seeds, builds the measurement programs
# and runs each example once under validation at a small size.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

export VKCOMPUTE_VALIDATION=1
# Keep CI on the software driver even where a GPU driver is installed,
# unless the caller chose an adapter.
export VKCOMPUTE_DEVICE="${VKCOMPUTE_DEVICE:-llvmpipe}"
export VKCOMPUTE_QUICK=1
# A batch's wait (Ticket::wait, Batch::submit) returns Error::Validation for
# the validation messages that arrived during the batch, so a test fails at
# the call that met them (DeviceOptions::validation_errors).
export VKCOMPUTE_VALIDATION_ERRORS=1
# Every `common::skipped`/`not_exercised` appends `<test>: <reason>` here;
# the run ends with the count and the reasons (tests/common/mod.rs).
export VKCOMPUTE_SKIP_LOG="$PWD/target/skips.log"
mkdir -p target
: > "$VKCOMPUTE_SKIP_LOG"

# Each step's heading ends the step before it with its time (bash's
# SECONDS), so a CI log shows where the run's minutes go.
last_step=
step_at=$SECONDS
step_done() { [ -z "$last_step" ] || echo "-- $(( SECONDS - step_at )) s: $last_step"; }
step() {
  step_done
  last_step=$*
  step_at=$SECONDS
  echo
  echo "== $*"
}
step "cargo fmt --check"
cargo fmt --all --check
step "built-in kernels' checked-in SPIR-V matches its sources (scripts/shaders.py --check)"
# The coopmat2 and KHR kernels come from Debian 13's glslang
# (scripts/glslang_trixie.sh): where it was fetched, they are recompiled
# and compared too, and checked by its spirv-val.
trixie=${GLSLANG_TRIXIE_DIR:-/tmp/vkcompute-glslang-trixie}
if [ -x "$trixie/glslangValidator" ] && [ -x "$trixie/spirv-val" ]; then
  python3 scripts/shaders.py --check --glslang "$trixie/glslangValidator"
  bash scripts/glslang_trixie.sh --val shaders/spv/matmul_f16_cm2*.spv shaders/spv/matmul_f16_khr*.spv
else
  python3 scripts/shaders.py --check
fi
step "test SPIR-V of other toolchains matches its assembly (scripts/test_spirv.sh --check)"
bash scripts/test_spirv.sh --check
step "the crate builds with no shader compiler (glslc and glslangValidator shadowed)"
# Default features on; the build with default features off is its own step.
bash scripts/build_no_shader_compiler.sh
step "cargo clippy --all-targets -- -D warnings (the crate and measure/)"
# The peers (wgpu, scry-gpu) are built only on request (gpu_bundle.sh).
cargo clippy --all-targets --workspace --exclude vkcompute-peers -- -D warnings
step "cargo test (unit, integration, doc)"
# One test at a time within each test binary: the Khronos layer shipped by
# Debian (1.3.239) races when one thread creates a device while another
# records commands through it (a core dump showed vkCmdDispatch calling a
# null entry inside the layer while another test ran vkCreateDevice; about
# once in eight parallel runs). Tests that use threads still do so within
# themselves; the serial run takes no longer here (about 30 s either way).
cargo test -- --test-threads=1
step "the published crate builds on its own (cargo package, verify build)"
# tests/package.rs (in the run above) checks the file list and its size;
# this builds the packaged copy in target/package, reusing the
# dependencies built above, so only vkcompute itself compiles (about 25 s
# on two cores). Offline: every dependency is in the local cache by now.
# The lines filtered out are one per test, bench and example left out of
# the package on purpose.
cargo package --allow-dirty --offline 2>&1 |
  { grep -v "is not included in the published package" || true; }
step "docs as docs.rs builds them (DOCS_RS=1, every feature, no shader compiler needed; a warning fails)"
PATH="$PWD/target/no-shader-compiler/stubs:$PATH" DOCS_RS=1 RUSTDOCFLAGS="-D warnings" \
  cargo doc --all-features --no-deps
step "WGSL kernels (feature wgsl, off by default: naga's front end)"
cargo test --features wgsl --lib wgsl -- --test-threads=1
cargo test --features wgsl --test wgsl -- --test-threads=1
step "recording suites again with pooled descriptor sets (NVIDIA's default path)"
# lavapipe defaults to push descriptors; NVIDIA records through pooled
# sets and the set cache, so the suites that exercise binding run on both.
VKCOMPUTE_PUSH_DESCRIPTORS=0 cargo test --test batch --test batch_errors --test set_cache \
  --test concurrency --test graph --test stream_order --test batch_auto_barriers -- --test-threads=1
step "without the glsl feature: the library builds, and the tests that need no runtime GLSL pass"
# The crate builds with only Rust and a Vulkan loader (runtime GLSL through
# shaderc is the default `glsl` feature). Cargo skips the integration tests
# that compile GLSL (required-features in Cargo.toml); the lib's unit tests
# and the built-in ops' tests run (the step took 144 s on two cores on
# 2026-11-27, 224 s before the following trim). The skinny linear
# layers' long numeric cases are ignored here, with the reason printed:
# their kernels and Rust are the same without glsl, and the default
# build's run above covers them.
# With glslc and glslangValidator shadowed by the stubs the step above made
# (they log any call and fail): what a machine with only Rust and a Vulkan
# loader builds and runs.
stubs="$PWD/target/no-shader-compiler/stubs"
PATH="$stubs:$PATH" cargo build --no-default-features --lib
PATH="$stubs:$PATH" cargo test --no-default-features --lib --tests -- --test-threads=1
# The measurement programs that need no runtime GLSL (the others name
# `glsl` in required-features): built-in ops and the op batch, checked.
PATH="$stubs:$PATH" cargo run --quiet --no-default-features -p vkcompute-measure --example ops
PATH="$stubs:$PATH" cargo run --quiet --no-default-features -p vkcompute-measure --example op_batch
if [ -e "$stubs/called" ]; then
  echo "the build without glsl ran a shader compiler:" >&2
  cat "$stubs/called" >&2
  exit 1
fi
step "fuzz target builds and runs its seeds (scripts/fuzz.sh fuzzes)"
# Plain stable cargo: libfuzzer-sys builds without cargo-fuzz or nightly
# (only `cargo fuzz run` needs those); the shared target dir reuses the
# dependencies built above (about 10 to 60 s on two cores).
cargo build --quiet --manifest-path fuzz/Cargo.toml --target-dir target
target/debug/reflect fuzz/seeds/*.spv
step "the measurement programs build (measure/examples)"
# The criterion benches are type-checked by the clippy step above
# (--all-targets); building them as well compiled the crate and its
# dependencies once more in the release profile (about two minutes on two
# cores) for nothing that step does not check.
cargo build --quiet -p vkcompute-measure --examples
step "examples under validation"
for ex in 01_saxpy 02_batch 03_async 04_pipeline_overlap; do
  cargo run --quiet --example "$ex"
done
# Two devices on the one adapter: exercises the sharding, threads and checks.
cargo run --quiet -p vkcompute-measure --example multi_gpu -- --per-adapter 2
# The floor's chain under each form of dependency (hand-written ash, the
# validation layer on): every form's values checked.
cargo run --quiet -p vkcompute-measure --example barrier_floor -- --lengths 20 --reps 2
# The FFN stack at a small width (the GPU machine runs Qwen3-4B's shape):
# each forward checked against the f64 reference, then timed in a graph.
cargo run --quiet -p vkcompute-measure --example ffn_stack -- --hidden 64 --inter 96 --layers 3 \
  --tokens 1,3,17 --warm 1 --reps 3
step "gpu_report at small sizes (the GPU machine runs it at full size)"
cargo run --quiet -p vkcompute-measure --example gpu_report -- --json target/gpu_report_quick.json
step_done
echo "-- $SECONDS s in all"
echo
skips=$(wc -l < "$VKCOMPUTE_SKIP_LOG")
echo "== $skips checks skipped (tests/common/mod.rs: skipped / not_exercised)"
sort "$VKCOMPUTE_SKIP_LOG" | uniq -c | sort -rn
echo
echo "all checks passed"
