#!/usr/bin/env bash
# Regenerates the test SPIR-V of tests/spirv/ (read by tests/foreign_spirv.rs)
# from its assembly sources, or checks it.
#
# Each tests/spirv/NAME.spvasm is assembled with spirv-as (spirv-tools) into
# NAME.spv. spirv-as stamps its own generator word (tool 7, the SPIR-V Tools
# assembler) into header word 2, so each source names the word its producer
# writes on a line `; vkcompute generator word: 0x........`, and this script
# puts that word back: the test reads it to check each module against the
# SPIR-V registry's tool id of the compiler whose output it stands for.
#
# Two sources are real compiler output, disassembled with spirv-dis: the
# glslang one (glslangValidator, Vulkan 1.0) and the naga one (naga's CLI).
# `--recompile` remakes those two .spvasm files from glslang_affine.comp and
# naga_affine.wgsl when glslangValidator and naga are on PATH. The others
# (DXC, Slang, rust-gpu) are written by hand in those compilers' idioms, as
# none of them is packaged here.
#
# Usage:
#   scripts/test_spirv.sh              assemble every .spvasm into its .spv
#   scripts/test_spirv.sh --check      fail when a .spv differs from what its
#                                      .spvasm assembles to
#   scripts/test_spirv.sh --recompile  remake the glslang and naga .spvasm
#                                      from their sources, then assemble
set -euo pipefail
cd "$(dirname "$0")/../tests/spirv"

mode="${1:-}"
case "$mode" in
  "" | --check | --recompile) ;;
  *) echo "usage: $0 [--check | --recompile]" >&2; exit 2 ;;
esac

need() {
  command -v "$1" > /dev/null || { echo "$0: $1 is not on PATH ($2)" >&2; exit 1; }
}
need spirv-as "install spirv-tools"
need python3 "needed to set the header's generator word"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Writes the disassembly of $1 (a .spv) to $2 (a .spvasm) after a header
# naming where it came from and its generator word.
disassemble() {
  local spv=$1 out=$2 origin=$3
  need spirv-dis "install spirv-tools"
  local word
  word=$(python3 -c 'import struct,sys; print("0x%08x" % struct.unpack_from("<5I", open(sys.argv[1], "rb").read())[2])' "$spv")
  {
    echo "; $origin"
    echo "; Regenerate with scripts/test_spirv.sh --recompile; do not edit by hand."
    echo "; vkcompute generator word: $word"
    spirv-dis --raw-id "$spv"
  } > "$out"
}

if [ "$mode" = --recompile ]; then
  need glslangValidator "install glslang-tools"
  need naga "cargo install naga-cli"
  glslangValidator -V --target-env vulkan1.0 -o "$tmp/glslang.spv" glslang_affine.comp > /dev/null
  disassemble "$tmp/glslang.spv" glslang_affine.spvasm \
    "glslangValidator $(glslangValidator --version | head -1 | sed 's/.*: //') -V --target-env vulkan1.0 glslang_affine.comp"
  naga --spirv-version 1.3 --index-bounds-check-policy Restrict naga_affine.wgsl "$tmp/naga.spv"
  disassemble "$tmp/naga.spv" naga_affine.spvasm \
    "naga $(naga --version) --spirv-version 1.3 --index-bounds-check-policy Restrict naga_affine.wgsl"
fi

status=0
for src in *.spvasm; do
  name=${src%.spvasm}
  word=$(sed -n 's/^; vkcompute generator word: \(0x[0-9a-fA-F]\{8\}\)$/\1/p' "$src")
  if [ -z "$word" ]; then
    echo "$src: no '; vkcompute generator word: 0x........' line" >&2
    exit 1
  fi
  # The target environment follows the module's version line.
  version=$(sed -n 's/^; Version: \([0-9.]*\)$/\1/p' "$src")
  case "$version" in
    1.0) env=vulkan1.0 ;;
    1.3) env=vulkan1.1 ;;
    1.5) env=vulkan1.2 ;;
    1.6) env=vulkan1.3 ;;
    *) echo "$src: unsupported '; Version: $version' line" >&2; exit 1 ;;
  esac
  spirv-as --preserve-numeric-ids --target-env "$env" -o "$tmp/$name.spv" "$src"
  python3 - "$tmp/$name.spv" "$word" << 'EOF'
import struct, sys
path, word = sys.argv[1], int(sys.argv[2], 16)
data = bytearray(open(path, "rb").read())
struct.pack_into("<I", data, 8, word)
open(path, "wb").write(data)
EOF
  if [ "$mode" = --check ]; then
    if ! cmp -s "$tmp/$name.spv" "$name.spv"; then
      echo "$name.spv differs from what $src assembles to (run scripts/test_spirv.sh)" >&2
      status=1
    fi
  else
    cp "$tmp/$name.spv" "$name.spv"
    echo "$name.spv ($word)"
  fi
done
exit $status
