//! What to install when Vulkan set-up fails, for the platform the program
//! runs on: the text that [`Error::Loader`](crate::Error::Loader),
//! [`Error::NoAdapter`](crate::Error::NoAdapter) and
//! [`Error::ValidationLayerMissing`](crate::Error::ValidationLayerMissing)
//! end with.
//!
//! The platform is the target OS, and on Linux the distribution family
//! from `/etc/os-release` (`ID` and `ID_LIKE`). The builders are pure: the
//! platform and the loader's environment variables are arguments, so every
//! message is unit-tested on every platform from any machine.

use std::sync::OnceLock;

/// Where the program runs, as far as package names go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Platform {
    /// Debian, Ubuntu and their derivatives (apt).
    Debian,
    /// Fedora, RHEL and their derivatives (dnf).
    Fedora,
    /// Arch Linux and its derivatives (pacman).
    Arch,
    /// Another Linux distribution.
    Linux,
    /// macOS: Vulkan through MoltenVK.
    MacOs,
    /// Windows.
    Windows,
    /// Anything else.
    Other,
}

/// What set-up could not find.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Missing {
    /// The Vulkan loader library (libvulkan.so.1, libvulkan.1.dylib,
    /// vulkan-1.dll).
    Loader,
    /// A driver (ICD) that loads and offers a compute queue.
    Driver,
    /// The Khronos validation layer.
    ValidationLayer,
}

impl Platform {
    /// The platform for a target OS (`std::env::consts::OS`) and, on Linux,
    /// the text of `/etc/os-release` (pure).
    pub(crate) fn detect(os: &str, os_release: Option<&str>) -> Platform {
        match os {
            "macos" => Platform::MacOs,
            "windows" => Platform::Windows,
            "linux" => {
                let ids: Vec<String> = os_release
                    .into_iter()
                    .flat_map(str::lines)
                    .filter_map(|l| l.strip_prefix("ID=").or_else(|| l.strip_prefix("ID_LIKE=")))
                    .flat_map(|v| {
                        v.trim_matches('"')
                            .split_whitespace()
                            .map(str::to_ascii_lowercase)
                            .collect::<Vec<_>>()
                    })
                    .collect();
                let has = |names: &[&str]| ids.iter().any(|i| names.contains(&i.as_str()));
                if has(&["debian", "ubuntu"]) {
                    Platform::Debian
                } else if has(&["fedora", "rhel", "centos"]) {
                    Platform::Fedora
                } else if has(&["arch"]) {
                    Platform::Arch
                } else {
                    Platform::Linux
                }
            }
            _ => Platform::Other,
        }
    }

    /// The platform this program runs on (read once).
    pub(crate) fn current() -> Platform {
        static CURRENT: OnceLock<Platform> = OnceLock::new();
        *CURRENT.get_or_init(|| {
            let release = if cfg!(target_os = "linux") {
                std::fs::read_to_string("/etc/os-release")
                    .or_else(|_| std::fs::read_to_string("/usr/lib/os-release"))
                    .ok()
            } else {
                None
            };
            Platform::detect(std::env::consts::OS, release.as_deref())
        })
    }
}

/// What to install for `missing` on `platform` (pure).
pub(crate) fn install(missing: Missing, platform: Platform) -> &'static str {
    use Missing as M;
    use Platform as P;
    match (missing, platform) {
        (M::Loader, P::Debian) => {
            "install the loader and a driver: `apt install libvulkan1 mesa-vulkan-drivers` \
             (Mesa's drivers include lavapipe, which runs on the CPU)"
        }
        (M::Loader, P::Fedora) => {
            "install the loader and a driver: `dnf install vulkan-loader mesa-vulkan-drivers`"
        }
        (M::Loader, P::Arch) => {
            "install the loader and a driver: `pacman -S vulkan-icd-loader vulkan-swrast` \
             (or vulkan-radeon, vulkan-intel, nvidia-utils for a GPU)"
        }
        (M::Loader, P::Linux) => {
            "install the distribution's Vulkan loader (libvulkan.so.1: libvulkan1 on \
             Debian/Ubuntu, vulkan-loader on Fedora, vulkan-icd-loader on Arch) and a driver \
             (Mesa's Vulkan drivers, or the GPU vendor's)"
        }
        (M::Loader, P::MacOs) => {
            "install the Vulkan SDK (it holds the loader libvulkan.1.dylib and MoltenVK), or \
             `brew install vulkan-loader molten-vk`; a loader outside the default search path \
             needs DYLD_LIBRARY_PATH"
        }
        (M::Loader, P::Windows) => {
            "install or update the GPU driver (it ships vulkan-1.dll), or install the Vulkan \
             Runtime from the Vulkan SDK"
        }
        (M::Loader, P::Other) => "install a Vulkan loader (libvulkan) and a Vulkan driver",
        (M::Driver, P::Debian) => {
            "install a driver: `apt install mesa-vulkan-drivers` (lavapipe on the CPU, Mesa's \
             drivers for AMD and Intel GPUs) or the GPU vendor's (NVIDIA: nvidia-driver)"
        }
        (M::Driver, P::Fedora) => {
            "install a driver: `dnf install mesa-vulkan-drivers` (lavapipe on the CPU, AMD and \
             Intel GPUs) or the GPU vendor's"
        }
        (M::Driver, P::Arch) => {
            "install a driver: `pacman -S vulkan-swrast` (lavapipe on the CPU), vulkan-radeon, \
             vulkan-intel or nvidia-utils"
        }
        (M::Driver, P::Linux) => {
            "install a Vulkan driver: Mesa's Vulkan drivers (lavapipe runs on the CPU) or the \
             GPU vendor's"
        }
        (M::Driver, P::MacOs) => {
            "install MoltenVK (the Vulkan SDK, or `brew install molten-vk`); vkcompute \
             enumerates portability drivers such as MoltenVK itself (a loader of 1.3.216 or \
             later is needed)"
        }
        (M::Driver, P::Windows) => {
            "install or update the GPU vendor's driver (Vulkan comes with it)"
        }
        (M::Driver, P::Other) => "install a Vulkan driver for this platform",
        (M::ValidationLayer, P::Debian) => "install it: `apt install vulkan-validationlayers`",
        (M::ValidationLayer, P::Fedora) => "install it: `dnf install vulkan-validation-layers`",
        (M::ValidationLayer, P::Arch) => "install it: `pacman -S vulkan-validation-layers`",
        (M::ValidationLayer, P::Linux) => {
            "install the distribution's Khronos validation layer (vulkan-validationlayers on \
             Debian/Ubuntu, vulkan-validation-layers on Fedora and Arch) or the Vulkan SDK"
        }
        (M::ValidationLayer, P::MacOs) => {
            "install the Vulkan SDK (it holds the layer), or `brew install vulkan-validationlayers`"
        }
        (M::ValidationLayer, P::Windows) => "install the Vulkan SDK (it holds the layer)",
        (M::ValidationLayer, P::Other) => "install the Khronos validation layer",
    }
}

/// What the loader's environment variables change for `missing`, from
/// `var` (the environment, or a test's map; pure given `var`).
pub(crate) fn environment(missing: Missing, var: &dyn Fn(&str) -> Option<String>) -> String {
    match missing {
        Missing::Loader => String::new(),
        Missing::Driver => {
            for name in ["VK_DRIVER_FILES", "VK_ICD_FILENAMES"] {
                if let Some(v) = var(name).filter(|v| !v.is_empty()) {
                    return format!(
                        "; {name} is set ({v:?}): the loader reads only the driver manifests it \
                         names, so check that each names a driver library that exists, or unset \
                         it (VK_LOADER_DEBUG=error,driver says why a driver failed to load)"
                    );
                }
            }
            "; VK_LOADER_DEBUG=error,driver says why a driver failed to load".to_string()
        }
        Missing::ValidationLayer => {
            let path = var("VK_LAYER_PATH")
                .filter(|v| !v.is_empty())
                .map(|v| {
                    format!(
                        "; VK_LAYER_PATH is set ({v:?}): the loader looks for layers only \
                         there (VK_ADD_LAYER_PATH adds folders instead)"
                    )
                })
                .unwrap_or_default();
            format!(
                "{path}; or run without validation (unset VKCOMPUTE_VALIDATION, or \
                 DeviceOptions::validation = Some(false))"
            )
        }
    }
}

/// The advice an error ends with: what to install here, and what the
/// environment changes.
pub(crate) fn advice(missing: Missing) -> String {
    let env = |name: &str| std::env::var(name).ok();
    format!(
        "{}{}",
        install(missing, Platform::current()),
        environment(missing, &env)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEBIAN: &str = "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nID=debian\n";
    const UBUNTU: &str = "NAME=\"Ubuntu\"\nID=ubuntu\nID_LIKE=debian\n";
    const ROCKY: &str = "ID=\"rocky\"\nID_LIKE=\"rhel centos fedora\"\n";
    const MANJARO: &str = "ID=manjaro\nID_LIKE=arch\n";
    const ALPINE: &str = "ID=alpine\n";

    #[test]
    fn the_platform_comes_from_the_os_and_os_release() {
        use Platform as P;
        assert_eq!(P::detect("linux", Some(DEBIAN)), P::Debian);
        assert_eq!(P::detect("linux", Some(UBUNTU)), P::Debian);
        assert_eq!(P::detect("linux", Some(ROCKY)), P::Fedora);
        assert_eq!(P::detect("linux", Some("ID=fedora\n")), P::Fedora);
        assert_eq!(P::detect("linux", Some(MANJARO)), P::Arch);
        assert_eq!(P::detect("linux", Some(ALPINE)), P::Linux);
        assert_eq!(P::detect("linux", None), P::Linux);
        assert_eq!(P::detect("macos", None), P::MacOs);
        assert_eq!(P::detect("windows", None), P::Windows);
        assert_eq!(P::detect("freebsd", None), P::Other);
    }

    #[test]
    fn each_platform_names_its_packages() {
        use Missing as M;
        use Platform as P;
        let cases: [(M, P, &[&str]); 10] = [
            (
                M::Loader,
                P::Debian,
                &["apt install libvulkan1 mesa-vulkan-drivers"],
            ),
            (
                M::Loader,
                P::Fedora,
                &["dnf install vulkan-loader mesa-vulkan-drivers"],
            ),
            (M::Loader, P::MacOs, &["Vulkan SDK", "MoltenVK"]),
            (M::Loader, P::Windows, &["GPU driver", "Vulkan SDK"]),
            (
                M::Driver,
                P::Debian,
                &["apt install mesa-vulkan-drivers", "lavapipe"],
            ),
            (M::Driver, P::Fedora, &["dnf install mesa-vulkan-drivers"]),
            (M::Driver, P::MacOs, &["MoltenVK", "portability"]),
            (
                M::ValidationLayer,
                P::Debian,
                &["apt install vulkan-validationlayers"],
            ),
            (
                M::ValidationLayer,
                P::Fedora,
                &["dnf install vulkan-validation-layers"],
            ),
            (M::ValidationLayer, P::MacOs, &["Vulkan SDK"]),
        ];
        for (missing, platform, words) in cases {
            let text = install(missing, platform);
            for w in words {
                assert!(text.contains(w), "{missing:?} on {platform:?}: {text}");
            }
        }
        // Every combination says something to install.
        for m in [M::Loader, M::Driver, M::ValidationLayer] {
            for p in [
                P::Debian,
                P::Fedora,
                P::Arch,
                P::Linux,
                P::MacOs,
                P::Windows,
                P::Other,
            ] {
                assert!(install(m, p).contains("install"), "{m:?} {p:?}");
            }
        }
    }

    #[test]
    fn the_loader_environment_is_named_when_it_is_set() {
        let none = |_: &str| None;
        let drivers = |n: &str| (n == "VK_ICD_FILENAMES").then(|| "/x/icd.json".to_string());
        let layers = |n: &str| (n == "VK_LAYER_PATH").then(|| "/empty".to_string());
        let text = environment(Missing::Driver, &drivers);
        assert!(
            text.contains("VK_ICD_FILENAMES is set (\"/x/icd.json\")"),
            "{text}"
        );
        assert!(text.contains("library that exists"), "{text}");
        let text = environment(Missing::Driver, &none);
        assert!(
            !text.contains("is set") && text.contains("VK_LOADER_DEBUG"),
            "{text}"
        );
        let text = environment(Missing::ValidationLayer, &layers);
        assert!(text.contains("VK_LAYER_PATH is set (\"/empty\")"), "{text}");
        assert!(text.contains("without validation"), "{text}");
        let text = environment(Missing::ValidationLayer, &none);
        assert!(!text.contains("VK_LAYER_PATH"), "{text}");
        assert_eq!(environment(Missing::Loader, &drivers), "");
    }
}
