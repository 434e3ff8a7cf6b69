//! Large device copies by a compute kernel instead of `vkCmdCopyBuffer`.
//!
//! On NVIDIA, `vkCmdCopyBuffer` between device-local buffers moves about
//! 850 GB/s on an H200, a fifth of what the memory does (CUDA's copy kernel:
//! 4.2 TB/s). A grid of invocations each moving 16 bytes reaches the memory's
//! rate. [`Batch::copy`](crate::Batch::copy) takes this path for copies of at
//! least [`KERNEL_COPY_MIN_BYTES`] whose offsets and size are multiples of
//! 16 bytes, in pieces no binding of which exceeds `maxStorageBufferRange`;
//! anything else goes through `vkCmdCopyBuffer`. The kernel is a built-in
//! (`shaders/copy.comp`, its shipped SPIR-V embedded, with or without the
//! `glsl` feature), made once per device at first use by the built-in
//! registry ([`crate::builtins`]). The piece planning is plain
//! logic, tested here.

use std::sync::Arc;

use crate::device::DeviceInner;
use crate::pipeline_cache::KernelCore;

/// Copies smaller than this use `vkCmdCopyBuffer` (its fixed cost is lower).
pub(crate) const KERNEL_COPY_MIN_BYTES: u64 = 1 << 20;

/// Invocations per workgroup of the copy kernel.
const LOCAL: u64 = 256;

/// One dispatch of the copy kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Piece {
    /// Byte offset of the piece from the start of the copy.
    pub offset: u64,
    /// Bytes in the piece (a multiple of 16).
    pub bytes: u64,
    /// Workgroups along x.
    pub groups: u32,
}

/// Whether a copy of `bytes` between these byte offsets may take the kernel
/// path: big enough, 16-byte granular, and both offsets meet the binding
/// alignment.
pub(crate) fn eligible(src_offset: u64, dst_offset: u64, bytes: u64, binding_align: u64) -> bool {
    let align = binding_align.max(16);
    bytes >= KERNEL_COPY_MIN_BYTES
        && bytes % 16 == 0
        && src_offset % align == 0
        && dst_offset % align == 0
}

/// Splits `bytes` into pieces whose bindings stay within `max_range` bytes
/// and whose offsets stay multiples of `binding_align`, each with a grid of
/// at most `max_groups` workgroups. `None` if the limits leave no room.
pub(crate) fn plan(
    bytes: u64,
    max_range: u64,
    binding_align: u64,
    max_groups: u32,
) -> Option<Vec<Piece>> {
    let align = binding_align.max(16);
    // Largest piece: within the range limit, a multiple of the alignment and
    // of 16, with a word count that fits the kernel's u32.
    let cap = (max_range.min(u64::from(u32::MAX) * 16) / align) * align;
    if cap == 0 || max_groups == 0 {
        return None;
    }
    let mut out = Vec::new();
    let mut offset = 0;
    while offset < bytes {
        let len = (bytes - offset).min(cap);
        let words = len / 16;
        let groups = words.div_ceil(LOCAL).min(u64::from(max_groups)) as u32;
        out.push(Piece {
            offset,
            bytes: len,
            groups,
        });
        offset += len;
    }
    Some(out)
}

/// The device's copy kernel (`shaders/copy.comp`, from the built-in
/// registry), built at first use; `None` when it cannot be (copies then use
/// the transfer command).
pub(crate) fn kernel(d: &Arc<DeviceInner>) -> Option<Arc<KernelCore>> {
    match crate::builtins::get(d, "copy", &[]) {
        Ok(k) => Some(k.core),
        Err(e) => {
            log::warn!("vkcompute: copy kernel unavailable ({e}); copies use vkCmdCopyBuffer");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_or_unaligned_copies_use_the_transfer_command() {
        assert!(!eligible(0, 0, KERNEL_COPY_MIN_BYTES - 16, 16));
        assert!(eligible(0, 0, KERNEL_COPY_MIN_BYTES, 16));
        assert!(!eligible(0, 0, KERNEL_COPY_MIN_BYTES + 4, 16));
        assert!(!eligible(4, 0, KERNEL_COPY_MIN_BYTES, 16));
        assert!(!eligible(0, 32, KERNEL_COPY_MIN_BYTES, 64));
        assert!(eligible(64, 128, KERNEL_COPY_MIN_BYTES, 64));
    }

    #[test]
    fn one_piece_within_the_limits() {
        let p = plan(1 << 30, u64::from(u32::MAX), 16, i32::MAX as u32).unwrap();
        assert_eq!(
            p,
            vec![Piece {
                offset: 0,
                bytes: 1 << 30,
                groups: (1 << 26) / 256
            }]
        );
    }

    #[test]
    fn pieces_respect_the_binding_range_and_cover_everything() {
        // Lavapipe: 128 MiB bindings, 65535 groups.
        let bytes = (300 << 20) + 48;
        let p = plan(bytes, 128 << 20, 16, 65535).unwrap();
        assert_eq!(p.len(), 3);
        assert_eq!(p.iter().map(|x| x.bytes).sum::<u64>(), bytes);
        for w in p.windows(2) {
            assert_eq!(w[0].offset + w[0].bytes, w[1].offset);
        }
        assert!(p
            .iter()
            .all(|x| x.bytes <= 128 << 20 && x.offset % 16 == 0 && x.groups <= 65535));
        assert_eq!(p[2].bytes, (44 << 20) + 48);
        assert_eq!(p[0].groups, 32768);
        assert_eq!(p[2].groups, 11265);
        // A grid cap below the words' need: the kernel strides.
        let p = plan(1 << 30, u64::from(u32::MAX), 16, 1000).unwrap();
        assert_eq!(p[0].groups, 1000);
    }

    #[test]
    fn odd_range_limits_round_down_to_the_alignment() {
        let p = plan(1008, 100, 64, 10).unwrap();
        assert!(p
            .iter()
            .all(|x| x.bytes <= 64 && x.offset % 64 == 0 && x.bytes % 16 == 0));
        assert_eq!(p.iter().map(|x| x.bytes).sum::<u64>(), 1008);
        assert_eq!(plan(1000, 10, 64, 10), None);
        assert_eq!(plan(1000, 1 << 20, 16, 0), None);
    }
}
