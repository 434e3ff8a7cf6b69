#!/usr/bin/env bash
# The whole test suite: installs what is missing, then runs formatting and
# lint checks, unit, integration and doc tests on lavapipe (or any Vulkan
# driver present) with the Khronos validation layer and synchronization
# validation on (any validation message fails a test), builds the benches
# and runs each example once under validation at a small size.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

export VKCOMPUTE_VALIDATION=1
# Keep CI on the software driver even where a GPU driver is installed,
# unless the caller chose an adapter.
export VKCOMPUTE_DEVICE="${VKCOMPUTE_DEVICE:-llvmpipe}"
export VKCOMPUTE_QUICK=1

step() { echo; echo "== $*"; }
step "cargo fmt --check"
cargo fmt --all --check
step "cargo clippy --all-targets -- -D warnings"
cargo clippy --all-targets -- -D warnings
step "cargo test (unit, integration, doc)"
cargo test
step "cargo bench --no-run"
cargo bench --no-run
step "examples under validation"
for ex in saxpy batch async; do
  cargo run --quiet --example "$ex"
done
echo
echo "all checks passed"
