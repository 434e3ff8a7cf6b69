//! One-pass reductions: sum, max and dot product of `f32` vectors.
//!
//! One dispatch over the data, whatever the length: each workgroup reduces
//! its grid-stride share (vec4 loads where aligned, scalars for the rest),
//! leaves its partial in a scratch buffer and counts itself done; the last
//! workgroup to finish adds the partials in a fixed order and writes the
//! result (`shaders/reduce.glsl`). No float atomics and a grid fixed by the
//! length and the adapter ([`super::grid`]), so the same input gives the
//! same bits on every run on the same device.
//!
//! Each call allocates a zeroed scratch buffer of 4 bytes per workgroup + 4
//! (the batch keeps it alive until the GPU is done), so several reductions
//! may run concurrently in one batch.
//!
//! NaN and infinities: `sum` and `dot` follow IEEE addition (a NaN, or
//! `+inf` with `-inf`, gives NaN). `max` returns NaN if any element is NaN
//! (as PyTorch's `max` does), `-inf` for an input of only `-inf`, and
//! otherwise the largest element exactly.

use crate::batch::Batch;
use crate::buffer::GpuBuf;
use crate::error::{Error, Result};

use super::grid::{reduce_groups, LOCAL};
use super::{aligned16, as_u32, check_len, device_of, reduction_variant, words, Operand};

/// Which reduction.
/// Which reduction.
#[derive(Clone, Copy)]
pub(crate) enum Kind {
    Sum = 0,
    Max = 1,
    Dot = 2,
}

fn record(
    batch: &mut Batch,
    op: &'static str,
    kind: Kind,
    x: &dyn GpuBuf,
    y: &dyn GpuBuf,
    out: &dyn GpuBuf,
    out_elems: u64,
) -> Result<()> {
    record_with(batch, op, kind, x, y, out, out_elems, None)
}

/// Words of scratch (counter + one partial per workgroup) a reduction of
/// `n` elements needs on `info`'s adapter, with vec4 loads when `aligned`;
/// see [`record_with`].
pub(crate) fn scratch_words(info: &crate::AdapterInfo, n: u64, aligned: bool) -> u64 {
    let n4 = if aligned { n / 4 } else { 0 };
    let items = n4.max(n - 4 * n4);
    u64::from(reduce_groups(
        items,
        info.compute_units,
        info.max_threads_per_compute_unit,
        info.max_workgroup_count[0],
    )) + 1
}

/// [`record`] with caller-owned scratch: `scratch` zeroed once and at least
/// [`scratch_words`] long, reused by later records (the kernel leaves the
/// counter at zero again; partials are rewritten before they are read),
/// but not by two reductions of one batch that may overlap. `None`: a new
/// zeroed buffer for this record.
#[allow(clippy::too_many_arguments)]
pub(crate) fn record_with(
    batch: &mut Batch,
    op: &'static str,
    kind: Kind,
    x: &dyn GpuBuf,
    y: &dyn GpuBuf,
    out: &dyn GpuBuf,
    out_elems: u64,
    scratch: Option<&crate::Buffer<u32>>,
) -> Result<()> {
    check_len(op, "out", out_elems, 1)?;
    let (xv, yv) = (x.view(), y.view());
    let n = as_u32(op, "the input", xv.size / 4)?;
    if n == 0 {
        return Err(Error::ZeroLength { what: op });
    }
    let gpu = device_of(&xv);
    let info = gpu.info();
    let n4 = if aligned16(&[xv, yv]) { n / 4 } else { 0 };
    let items = u64::from(n4).max(u64::from(n - 4 * n4));
    let groups = reduce_groups(
        items,
        info.compute_units,
        info.max_threads_per_compute_unit,
        info.max_workgroup_count[0],
    );
    let name = reduction_variant(&gpu, "reduce_sg", "reduce_wg");
    let k = crate::builtins::get(&gpu.inner, name, &[(0, kind as u32)])?;
    debug_assert_eq!(u64::from(k.workgroup_size()[0]), LOCAL);
    // Counter + one partial per workgroup, zeroed; the last workgroup
    // leaves the counter at zero again.
    let owned;
    let scratch = match scratch {
        Some(s) if s.len() as u64 > u64::from(groups) => s,
        _ => {
            owned = gpu.upload(&vec![0u32; groups as usize + 1])?;
            &owned
        }
    };
    let pc = words(&[n, n4]);
    batch.run_configured(&k, &[x, x, y, y, scratch, out], [groups, 1, 1], Some(&pc))?;
    Ok(())
}

/// Records `out[0] = x[0] + x[1] + ...` (`out` holds one element).
pub fn sum(batch: &mut Batch, x: &impl Operand<f32>, out: &impl Operand<f32>) -> Result<()> {
    record(batch, "ops::sum", Kind::Sum, x, x, out, out.elems())
}

/// Records `out[0] = max(x)` (`out` holds one element); NaN if any element
/// is NaN.
pub fn max(batch: &mut Batch, x: &impl Operand<f32>, out: &impl Operand<f32>) -> Result<()> {
    record(batch, "ops::max", Kind::Max, x, x, out, out.elems())
}

/// Records `out[0] = a[0] * b[0] + a[1] * b[1] + ...` (`out` holds one
/// element).
pub fn dot(
    batch: &mut Batch,
    a: &impl Operand<f32>,
    b: &impl Operand<f32>,
    out: &impl Operand<f32>,
) -> Result<()> {
    check_len("ops::dot", "b", b.elems(), a.elems())?;
    record(batch, "ops::dot", Kind::Dot, a, b, out, out.elems())
}
