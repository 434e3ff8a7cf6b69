#!/usr/bin/env bash
# Proves that the built-in kernels need no compiler at build time: builds the
# library with glslc and glslangValidator shadowed on PATH and fails if the
# build calls either. Run by scripts/test.sh.
#
# Stubs named glslc and glslangValidator come first on PATH, log any call
# and fail, so every lookup by name (how build scripts find tools; the
# crate's build script once ran glslc so) reaches them, and the log names
# the call. The other way, a PATH of links to only what cargo needs, proves
# no more (a call by absolute path escapes both) and breaks wherever the
# toolchain, the linker or the C++ driver shaderc needs live elsewhere.
# Against absolute paths: vkcompute's build script starts no process at all
# (the grep below).
#
# Default features stay on: the `glsl` feature links shaderc as a library,
# never a compiler on PATH, so this build proves the point as well; the
# build with default features off (no shaderc at all) is a step of its own
# beside this one in scripts/test.sh.
#
# In target/, with vkcompute cleaned there so that build.rs surely runs
# again: the dependencies it builds are the ones the test steps after it
# use (a target dir of its own compiled them twice on a clean clone, about
# 30 s on two cores). The stubs live in target/no-shader-compiler/stubs,
# where scripts/test.sh finds them for its later steps.
set -euo pipefail
cd "$(dirname "$0")/.."
dir="$PWD/target/no-shader-compiler"
stubs="$dir/stubs"
rm -rf "$stubs"
mkdir -p "$stubs"
for tool in glslc glslangValidator; do
  printf '#!/bin/sh\necho "%s $*" >> "%s/called"\nexit 127\n' "$tool" "$stubs" > "$stubs/$tool"
  chmod +x "$stubs/$tool"
done
stub_path="$stubs:$PATH"
for tool in glslc glslangValidator; do
  found=$(PATH="$stub_path" && command -v "$tool")
  if [ "$found" != "$stubs/$tool" ]; then
    echo "PATH finds $tool at ${found:-nowhere}, not the stub" >&2
    exit 1
  fi
done
if grep -n 'std::process\|Command::new' build.rs build/*.rs; then
  echo "build.rs starts a process; building the crate must run no compiler" >&2
  exit 1
fi
cargo clean --quiet -p vkcompute --profile dev
status=0
PATH="$stub_path" cargo build --quiet --lib || status=$?
if [ -e "$stubs/called" ]; then
  echo "building the crate ran a shader compiler:" >&2
  cat "$stubs/called" >&2
  exit 1
fi
if [ "$status" -ne 0 ]; then
  echo "cargo build --lib failed (status $status) with no shader compiler on PATH" >&2
  exit 1
fi
echo "built with no shader compiler on PATH"
