#!/usr/bin/env bash
# A bounded fuzz session of fuzz/fuzz_targets/reflect.rs: SPIR-V loading and
# reflection (`vkcompute::reflect_spirv`) on libFuzzer's inputs, under
# AddressSanitizer, through cargo-fuzz.
#
#   scripts/fuzz.sh [SECONDS]      # default 300 (VKCOMPUTE_FUZZ_SECONDS)
#
# cargo-fuzz passes rustc flags that only nightly accepts; RUSTC_BOOTSTRAP=1
# lets the stable toolchain take them. The corpus grows in fuzz/corpus/reflect
# (seeded from fuzz/seeds, compiled kernels); a crash lands in
# fuzz/artifacts/reflect and fails the script.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

seconds="${1:-${VKCOMPUTE_FUZZ_SECONDS:-300}}"
cargo_fuzz_version=0.13.1
if ! cargo fuzz --version 2>/dev/null | grep -q "$cargo_fuzz_version"; then
  echo "installing cargo-fuzz $cargo_fuzz_version"
  cargo install cargo-fuzz --version "$cargo_fuzz_version" --locked
fi

mkdir -p fuzz/corpus/reflect
export RUSTC_BOOTSTRAP=1
echo "fuzzing reflect for ${seconds}s"
cargo fuzz run reflect fuzz/corpus/reflect fuzz/seeds -- \
  -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 -print_final_stats=1
