#!/usr/bin/env bash
# The main demo: installs what is missing, then runs the saxpy example
# (examples/01_saxpy.rs)
# (prints the adapter, checks the result, and times it).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec cargo run --release --example 01_saxpy -- "$@"
