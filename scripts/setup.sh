#!/usr/bin/env bash
# Installs what vkcompute needs on Debian/Ubuntu, when it is missing:
#   the Vulkan loader, Mesa's lavapipe (a CPU Vulkan driver, so no GPU is
#   needed), the Khronos validation layer, and the static shaderc, glslang
#   and SPIRV-Tools archives the `glsl` feature links, and glslc and python3,
#   which scripts/shaders.py uses to regenerate and check the built-in
#   kernels' checked-in SPIR-V (building the crate runs no shader compiler).
# Uses apt-get as root, or through sudo; otherwise prints what to install.
# Sourced or run by scripts/demo.sh and scripts/test.sh.
set -euo pipefail

arch_dir="/usr/lib/$(uname -m)-linux-gnu"
need=()
have_lib() { ldconfig -p 2>/dev/null | grep -q "$1" || ls "$arch_dir/$1"* >/dev/null 2>&1; }
have_lib libvulkan.so.1 || need+=(libvulkan1)
ls /usr/share/vulkan/icd.d/lvp_icd*.json >/dev/null 2>&1 || need+=(mesa-vulkan-drivers)
ls /usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json >/dev/null 2>&1 || need+=(vulkan-validationlayers)
[ -f "$arch_dir/libshaderc_combined.a" ] || need+=(libshaderc-dev)
[ -f "$arch_dir/libglslang.a" ] || need+=(glslang-dev)
[ -f "$arch_dir/libSPIRV-Tools.a" ] || need+=(spirv-tools)
command -v c++ >/dev/null 2>&1 || need+=(g++)
# Development only: scripts/shaders.py (run by scripts/test.sh) recompiles
# shaders/*.comp with glslc, the compiler the checked-in SPIR-V records, to
# check shaders/spv/ against them (glslangValidator would recompile none).
command -v python3 >/dev/null 2>&1 || need+=(python3)
command -v glslc >/dev/null 2>&1 || need+=(glslc)

if [ ${#need[@]} -eq 0 ]; then
  exit 0
fi
echo "vkcompute setup: installing ${need[*]}"
if [ "$(id -u)" -eq 0 ]; then
  apt_run=(env DEBIAN_FRONTEND=noninteractive apt-get)
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  apt_run=(sudo env DEBIAN_FRONTEND=noninteractive apt-get)
else
  echo "vkcompute setup: cannot install without root. Please run:" >&2
  echo "  sudo apt-get install -y ${need[*]}" >&2
  exit 1
fi
"${apt_run[@]}" update -qq
"${apt_run[@]}" install -y -qq --no-install-recommends "${need[@]}" >/dev/null
echo "vkcompute setup: done"
