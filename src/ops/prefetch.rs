//! Cache warming (`shaders/l2_prefetch.comp`): a read of a buffer range
//! into the GPU's L2 cache, so that a later command reads it from there.
//!
//! A decode step of a language model leaves memory idle while its small
//! kernels run (attention over a short cache, norms, rotary), then streams
//! a weight matrix as fast as memory allows. Recorded beside such a kernel
//! with no barrier between them (in a batch with automatic barriers:
//! recorded after it, since it reads nothing that kernel writes), a
//! prefetch of the next matrix runs in that idle time, and the matrix's
//! own kernel then reads what the cache still holds. It pays only where
//! the range fits the cache beside everything else the commands in
//! between touch (Vulkan does not report the cache's size: an H100 or
//! H200 has 50 MB) and where memory would otherwise be idle: beside a
//! bandwidth-bound kernel it only takes bandwidth away.

use crate::batch::Batch;
use crate::buffer::GpuBuf;
use crate::error::{Error, Result};

use super::grid::elementwise_groups;
use super::{device_of, words};

/// Bytes one invocation of the prefetch kernel covers with one load (a
/// memory sector).
const SECTOR: u64 = 32;

/// Records a read of every 32-byte sector of `x` (a buffer or slice of
/// any element type, at least 4 bytes, bound as any other binding: its
/// offset a multiple of the adapter's storage-buffer alignment), which
/// leaves `x` in the GPU's L2 cache as far as it fits. Writes nothing.
///
/// ```
/// # fn main() -> vkcompute::Result<()> {
/// use vkcompute::{ops, Device};
/// let gpu = Device::new()?;
/// let w = gpu.upload(&vec![1.0f32; 4096])?;
/// let mut batch = gpu.batch()?;
/// ops::prefetch(&mut batch, &w)?;
/// batch.submit()?;
/// # Ok(())
/// # }
/// ```
pub fn prefetch(batch: &mut Batch, x: &impl GpuBuf) -> Result<()> {
    const OP: &str = "ops::prefetch";
    let bytes = x.byte_size();
    if bytes < 4 {
        return Err(Error::OpShape {
            op: OP,
            detail: format!("x covers {bytes} bytes; it needs at least 4 (one 32-bit word)"),
        });
    }
    let n = super::as_u32(OP, "x (in 32-bit words)", bytes / 4)?;
    let gpu = device_of(&x.view());
    let k = crate::builtins::get(&gpu.inner, "l2_prefetch", &[])?;
    // The kernel's never-taken store needs a binding of its own: a word
    // the batch keeps alive until its work completes.
    let sink = gpu.alloc::<u32>(1)?;
    let groups = elementwise_groups(bytes.div_ceil(SECTOR), gpu.info().max_workgroup_count[0]);
    let b: [&dyn GpuBuf; 2] = [x, &sink];
    batch.run_configured(&k, &b, [groups, 1, 1], Some(&words(&[n, 0])))?;
    Ok(())
}
