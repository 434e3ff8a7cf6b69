//! The buffer-length checks the skinny ops share: each buffer against its
//! shape, the kernels' 32-bit index and the adapter's storage range.

use crate::error::{Error, Result};

/// A buffer against its shape: its name, the shape's product in words,
/// the elements it holds, the elements the shape needs, bytes per element.
pub(super) type Want<'a> = (&'a str, &'a str, usize, u64, u64);

/// Checks that each buffer holds its shape's elements, within the
/// kernels' 32-bit index and `range` (maxStorageBufferRange); `err` makes
/// the op's error from a detail.
pub(super) fn check_lengths(
    want: &[Want<'_>],
    range: u64,
    err: impl Fn(String) -> Error,
) -> Result<()> {
    for &(name, product, len, elems, size) in want {
        if elems > u64::from(u32::MAX) {
            return Err(err(format!(
                "{name} would hold {product} = {elems} elements, over the kernels' 32-bit \
                 index limit of {}",
                u32::MAX
            )));
        }
        if len as u64 != elems {
            return Err(err(format!(
                "{name} holds {len} elements; {product} = {elems}"
            )));
        }
        if elems * size > range {
            return Err(err(format!(
                "{name} is {} bytes, over maxStorageBufferRange ({range} bytes)",
                elems * size
            )));
        }
    }
    Ok(())
}
