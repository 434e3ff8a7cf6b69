#!/usr/bin/env bash
# A glslangValidator that compiles GL_NV_cooperative_matrix2 and
# GL_KHR_cooperative_matrix on a Debian 12 machine: Debian 13's
# glslang-tools (package 15.1.0, whose binary reports "Glslang Version:
# 11:15.2.0") with the C and C++ runtime of Debian 13,
# fetched through apt with a source list and lists folder of its own (this
# machine's apt set-up does not change), unpacked with `dpkg -x` under
# $GLSLANG_TRIXIE_DIR (default /tmp/vkcompute-glslang-trixie), and run
# through Debian 13's own dynamic loader, which loads the newer glibc for
# that one process:
#   <root>/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 --library-path <root libs> <root>/usr/bin/glslangValidator ARGS
#
# Usage:
#   scripts/glslang_trixie.sh            fetch (once) and print the path of
#                                        an executable shim that runs it
#   scripts/glslang_trixie.sh -- ARGS    run glslangValidator ARGS through it
#   scripts/glslang_trixie.sh --val FILE.spv ...
#                                        check SPIR-V with Debian 13's
#                                        spirv-val (SPIRV-Tools 2025.1, which
#                                        knows the NV2 and KHR coopmat
#                                        instructions) for vulkan1.3
# The shim is what scripts/shaders.py takes:
#   scripts/shaders.py --glslang "$(scripts/glslang_trixie.sh)" NAME ...
# and its --version prints glslang's own version lines ("Glslang Version:
# 11:15.1.0"), which the manifest records.
set -euo pipefail
d=${GLSLANG_TRIXIE_DIR:-/tmp/vkcompute-glslang-trixie}
root=$d/root
shim=$d/glslangValidator
if [ ! -x "$shim" ] || [ ! -x "$root/usr/bin/glslangValidator" ]; then
  rm -rf "$d"; mkdir -p "$d/lists/partial" "$d/debs" "$root"
  # The Debian mirror this machine's apt already uses (first one listed).
  mirror=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '/^URIs:/ {print $2; exit}')
  [ -n "$mirror" ] || mirror=$(awk '/^deb / && $2 !~ /security/ {print $2; exit}' /etc/apt/sources.list 2>/dev/null)
  [ -n "$mirror" ] || { echo "glslang_trixie: no Debian mirror found in this machine's apt sources" >&2; exit 1; }
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror trixie main" > "$d/sources.list"
  o=(-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists="$d/lists"
    -oDir::Etc::SourceList="$d/sources.list" -oDir::Etc::SourceParts=/dev/null)
  apt-get "${o[@]}" update >"$d/apt.log" 2>&1 || { echo "glslang_trixie: apt-get update failed (see $d/apt.log)" >&2; exit 1; }
  # glslang-tools and what its binary links: the glslang and SPIRV-Tools
  # libraries (statically linked in Debian 13's build, fetched when listed),
  # libstdc++, libgcc, libm and libc.
  pkgs="glslang-tools spirv-tools libc6 libstdc++6 libgcc-s1"
  for extra in libglslang15 libspirv-tools; do
    if apt-cache "${o[@]}" show "$extra" >/dev/null 2>&1; then pkgs="$pkgs $extra"; fi
  done
  # spirv-tools: spirv-val (SPIRV-Tools linked in), for --val.
  # shellcheck disable=SC2086
  (cd "$d/debs" && apt-get "${o[@]}" download $pkgs >>"$d/apt.log" 2>&1) \
    || { echo "glslang_trixie: downloading $pkgs failed (see $d/apt.log)" >&2; exit 1; }
  for deb in "$d"/debs/*.deb; do dpkg -x "$deb" "$root"; done
  # Debian 13 is merged-/usr: the loader lives under usr/.
  loader=$root/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2
  [ -x "$loader" ] || loader=$root/lib64/ld-linux-x86-64.so.2
  # Written beside its final name and moved there once it runs, so a
  # failed set-up is fetched again next time.
  cat > "$shim.new" <<SHIM
#!/bin/sh
# glslangValidator from Debian 13, run through Debian 13's dynamic loader.
exec "$loader" --library-path "$root/lib/x86_64-linux-gnu:$root/usr/lib/x86_64-linux-gnu" "$root/usr/bin/glslangValidator" "\$@"
SHIM
  cat > "$d/spirv-val" <<VAL
#!/bin/sh
# spirv-val from Debian 13, run through Debian 13's dynamic loader.
exec "$loader" --library-path "$root/lib/x86_64-linux-gnu:$root/usr/lib/x86_64-linux-gnu" "$root/usr/bin/spirv-val" "\$@"
VAL
  chmod +x "$d/spirv-val"
  chmod +x "$shim.new"
  if ! "$shim.new" --version >/dev/null 2>&1; then
    echo "glslang_trixie: the unpacked glslangValidator does not run; libraries it needs:" >&2
    "$loader" --library-path "$root/lib/x86_64-linux-gnu:$root/usr/lib/x86_64-linux-gnu" --list "$root/usr/bin/glslangValidator" >&2 || true
    exit 1
  fi
  mv "$shim.new" "$shim"
fi
if [ "${1:-}" = "--val" ]; then
  shift
  for f in "$@"; do
    "$d/spirv-val" --target-env vulkan1.3 "$f" || { echo "glslang_trixie: $f is not valid SPIR-V for vulkan1.3" >&2; exit 1; }
  done
  echo "glslang_trixie: $# module(s) valid for vulkan1.3"
  exit 0
fi
if [ "${1:-}" = "--" ]; then
  shift
  exec "$shim" "$@"
fi
echo "$shim"
