//! Where a buffer's memory lives, and how the host reaches it.
//!
//! Plain logic, tested without a GPU: a [`Memory`] placement maps to a
//! gpu-allocator location, and the memory type the allocator picked decides
//! whether host reads and writes go straight through a mapping or through a
//! staging copy on the GPU.

use ash::vk;
use gpu_allocator::MemoryLocation;

/// Where a [`Buffer`](crate::Buffer) lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Memory {
    /// Device-local memory, the fastest for kernels. Host transfers go
    /// through a reused staging buffer (on the transfer queue when there is
    /// one), or straight through a mapping when the device-local memory is
    /// also host-visible and cached (integrated GPUs, lavapipe).
    #[default]
    DeviceLocal,
    /// Host memory the GPU reads over the bus: mapped, cached, coherent.
    /// Host reads and writes are plain memory copies; kernels pay bus bandwidth.
    HostVisible,
    /// Device-local memory the host can map (resizable BAR). Host writes are
    /// fast (write-combined); host reads are slow (uncached). Errors with
    /// [`Error::Unsupported`](crate::Error::Unsupported) where the adapter has none.
    DeviceHostVisible,
}

impl Memory {
    /// The gpu-allocator location to ask for.
    pub(crate) fn location(self) -> MemoryLocation {
        match self {
            Memory::DeviceLocal => MemoryLocation::GpuOnly,
            Memory::HostVisible => MemoryLocation::GpuToCpu,
            Memory::DeviceHostVisible => MemoryLocation::CpuToGpu,
        }
    }

    /// Whether memory of type `props` satisfies this placement.
    pub(crate) fn satisfied_by(self, props: vk::MemoryPropertyFlags) -> bool {
        use vk::MemoryPropertyFlags as F;
        match self {
            Memory::DeviceLocal => props.contains(F::DEVICE_LOCAL),
            Memory::HostVisible => props.contains(F::HOST_VISIBLE | F::HOST_COHERENT),
            Memory::DeviceHostVisible => {
                props.contains(F::DEVICE_LOCAL | F::HOST_VISIBLE | F::HOST_COHERENT)
            }
        }
    }
}

/// How the host reaches a buffer's bytes in one direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HostPath {
    /// memcpy through the persistent mapping.
    Mapped,
    /// A GPU copy through a staging buffer.
    Staged,
}

/// The paths for host writes and host reads.
pub(crate) fn host_paths(
    placement: Memory,
    props: vk::MemoryPropertyFlags,
    mapped: bool,
    direct_allowed: bool,
) -> (HostPath, HostPath) {
    use vk::MemoryPropertyFlags as F;
    let coherent = mapped && props.contains(F::HOST_VISIBLE | F::HOST_COHERENT);
    match placement {
        Memory::HostVisible | Memory::DeviceHostVisible if coherent => {
            (HostPath::Mapped, HostPath::Mapped)
        }
        Memory::DeviceLocal if coherent && direct_allowed => {
            let read = if props.contains(F::HOST_CACHED) {
                HostPath::Mapped
            } else {
                HostPath::Staged
            };
            (HostPath::Mapped, read)
        }
        _ => (HostPath::Staged, HostPath::Staged),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vk::MemoryPropertyFlags as F;

    #[test]
    fn discrete_device_local_is_staged() {
        assert_eq!(
            host_paths(Memory::DeviceLocal, F::DEVICE_LOCAL, false, true),
            (HostPath::Staged, HostPath::Staged)
        );
    }

    #[test]
    fn unified_cached_memory_is_mapped_unless_forced_off() {
        let all = F::DEVICE_LOCAL | F::HOST_VISIBLE | F::HOST_COHERENT | F::HOST_CACHED;
        assert_eq!(
            host_paths(Memory::DeviceLocal, all, true, true),
            (HostPath::Mapped, HostPath::Mapped)
        );
        assert_eq!(
            host_paths(Memory::DeviceLocal, all, true, false),
            (HostPath::Staged, HostPath::Staged)
        );
    }

    #[test]
    fn rebar_without_cache_reads_through_staging_unless_asked() {
        let rebar = F::DEVICE_LOCAL | F::HOST_VISIBLE | F::HOST_COHERENT;
        assert_eq!(
            host_paths(Memory::DeviceLocal, rebar, true, true),
            (HostPath::Mapped, HostPath::Staged)
        );
        assert_eq!(
            host_paths(Memory::DeviceHostVisible, rebar, true, true),
            (HostPath::Mapped, HostPath::Mapped)
        );
    }

    #[test]
    fn placements_and_locations() {
        assert_eq!(Memory::default(), Memory::DeviceLocal);
        assert_eq!(Memory::HostVisible.location(), MemoryLocation::GpuToCpu);
        assert!(!Memory::DeviceHostVisible.satisfied_by(F::HOST_VISIBLE | F::HOST_COHERENT));
        assert!(Memory::DeviceHostVisible
            .satisfied_by(F::DEVICE_LOCAL | F::HOST_VISIBLE | F::HOST_COHERENT));
        assert!(
            Memory::HostVisible.satisfied_by(F::HOST_VISIBLE | F::HOST_COHERENT | F::HOST_CACHED)
        );
    }
}
