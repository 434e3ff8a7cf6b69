//! Transformer ops: the building blocks of a decoder-only language model,
//! each one or two dispatches recorded into any [`Batch`], like the other
//! [`ops`](crate::ops).
//!
//! | family | ops |
//! | --- | --- |
//! | normalisation | [`rms_norm`] (per row, or per head for q/k norms), [`layer_norm`] |
//! | activation | [`silu_mul`], [`silu_mul_halves`] |
//! | positions | [`rotary`] with [`rope_inv_freq`] (Llama 3 [`RopeScaling`]) |
//! | tokens | [`embedding`], [`argmax`], [`sample`] |
//! | attention | [`kv_append`], [`attention_decode`], [`attention_prefill`] (f16 on tensor cores: [`attention_prefill_on_tensor_cores`]), [`causal_softmax`] |
//! | fused | [`qk_norm_rope_append`]: q/k norms, rotary and the KV append in one dispatch |
//!
//! ```
//! # fn main() -> vkcompute::Result<()> {
//! use vkcompute::{ops::nn, Device};
//! let gpu = Device::new()?;
//! // Two tokens of width 4: RMSNorm, then greedy choice of the largest.
//! let x = gpu.upload(&[1.0f32, -2.0, 3.0, 0.5, 4.0, 4.0, -1.0, 0.0])?;
//! let w = gpu.upload(&[1.0f32; 4])?;
//! let y = gpu.alloc::<f32>(8)?;
//! let best = gpu.alloc::<u32>(2)?;
//! let mut batch = gpu.batch()?;
//! nn::rms_norm(&mut batch, &x, &w, &y, 2, 4, 1e-6)?;
//! batch.barrier(); // argmax reads y
//! nn::argmax(&mut batch, &y, &best, 2, 4)?;
//! batch.submit()?;
//! assert_eq!(best.download()?, [2, 0]); // ties: the lowest index
//! # Ok(())
//! # }
//! ```
//!
//! **Element types.** Activations, weights and caches are `f32`, [`F16`]
//! or [`Bf16`] ([`NnElement`]); one op's tensors share one type, so a
//! mismatch does not compile. 16-bit types need the adapter's 16-bit storage
//! (`storageBuffer16BitAccess`). Arithmetic is f32 throughout; a 16-bit
//! result is rounded once, to nearest even. The one exception is
//! [`attention_prefill`] on f16 tensors where it runs on tensor cores
//! ([`attention_prefill_on_tensor_cores`]): its probabilities are rounded
//! to f16 before they weight the values.
//!
//! **Bad input** (a shape that does not fit, a zero dimension, head counts
//! that do not divide, a parameter out of range) is an
//! [`Error::Ops`] naming the op, the tensor and the limit;
//! nothing is recorded then. What only the GPU sees (a token id past the
//! vocabulary, a cache position past its end) is guarded in the kernel and
//! counted in a caller-owned flag word; see each op.
//!
//! As with every op, put a [`Batch::barrier`] between an op and a later
//! command that reads what it writes.
//!
//! An [`OpBatch`](crate::ops::OpBatch) records the f32 forms of all but
//! argmax, sampling and [`qk_norm_rope_append`] on its tensors, with the
//! same checks.

use bytemuck::Pod;

use crate::batch::Batch;
use crate::buffer::{Buffer, BufferSlice, GpuBuf};
use crate::device::Device;
use crate::error::{Error, OpsError, Result};

use super::{Bf16, F16};

mod act;
mod argmax;
pub(in crate::ops) mod attention;
mod decode_qk;
pub(in crate::ops) mod gather;
pub(in crate::ops) mod kv;
mod norm;
pub(in crate::ops) mod prefill;
mod qk;
pub(in crate::ops) mod rope;
mod sample;
mod softmax;

pub use act::{silu_mul, silu_mul_halves};
pub use argmax::argmax;
pub use attention::{attention_decode, DecodeShape, DECODE_CHUNK};
pub use decode_qk::{attention_decode_qk, attention_decode_qkv};
pub use gather::embedding;
pub use kv::{kv_append, KvShape};
pub use norm::{layer_norm, rms_norm};
pub use prefill::{attention_prefill, attention_prefill_on_tensor_cores, PrefillShape};
pub use qk::{qk_norm_rope_append, QkNorm, QkShape};
pub use rope::{rope_inv_freq, rotary, RopeScaling, MAX_ROTARY_HEAD_DIM};
pub use sample::{sample, sample_uniform, SampleParams, MAX_VOCAB};
pub use softmax::causal_softmax;

/// The storage type of a transformer op's tensors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum NnDtype {
    /// 32-bit IEEE float.
    F32,
    /// 16-bit IEEE float ([`F16`]).
    F16,
    /// bfloat16 ([`Bf16`]: the top half of an f32).
    Bf16,
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for super::F16 {}
    impl Sealed for super::Bf16 {}
}

/// An element type the transformer ops take: `f32`, [`F16`] or [`Bf16`].
/// Sealed.
pub trait NnElement: Pod + sealed::Sealed {
    /// The storage type.
    const NN: NnDtype;
}

impl NnElement for f32 {
    const NN: NnDtype = NnDtype::F32;
}

impl NnElement for F16 {
    const NN: NnDtype = NnDtype::F16;
}

impl NnElement for Bf16 {
    const NN: NnDtype = NnDtype::Bf16;
}

/// A buffer or slice of `T` a transformer op can bind (tensors, and `u32`
/// ids, positions, lengths and flag words).
pub trait NnOperand<T: Pod>: GpuBuf {
    /// Elements in the operand.
    fn elems(&self) -> u64;
}

impl<T: Pod> NnOperand<T> for Buffer<T> {
    fn elems(&self) -> u64 {
        self.len() as u64
    }
}

impl<T: Pod> NnOperand<T> for BufferSlice<'_, T> {
    fn elems(&self) -> u64 {
        self.len() as u64
    }
}

/// The kernel of `family` (`[f32, f16, bf16]` names) for `T`.
fn kernel_name<T: NnElement>(names: [&'static str; 3]) -> &'static str {
    match T::NN {
        NnDtype::F32 => names[0],
        NnDtype::F16 => names[1],
        NnDtype::Bf16 => names[2],
    }
}

/// The device of an operand, after checking that it can run kernels on
/// `T` (16-bit types need 16-bit storage).
fn device_for<T: NnElement>(op: &'static str, x: &dyn GpuBuf) -> Result<Device> {
    let gpu = super::device_of(&x.view());
    let info = gpu.info();
    if T::NN != NnDtype::F32 && !info.storage_buffer16 {
        return Err(Error::Unsupported {
            what: match T::NN {
                NnDtype::F16 => "f16 tensors (storageBuffer16BitAccess)",
                _ => "bf16 tensors (storageBuffer16BitAccess)",
            },
            adapter: format!("{} (in {op})", info.name),
        });
    }
    Ok(gpu)
}

/// A [`OpsError::Shape`].
fn shape_err(op: &'static str, tensor: &'static str, detail: String) -> Error {
    Error::Ops(OpsError::Shape { op, tensor, detail })
}

/// `tensor` must hold exactly `want` elements.
fn check_elems(op: &'static str, tensor: &'static str, got: u64, want: u64) -> Result<()> {
    if got == want {
        Ok(())
    } else {
        Err(shape_err(
            op,
            tensor,
            format!("has {got} elements, expected {want}"),
        ))
    }
}

/// `tensor` must hold at least `want` elements.
fn check_at_least(op: &'static str, tensor: &'static str, got: u64, want: u64) -> Result<()> {
    if got >= want {
        Ok(())
    } else {
        Err(shape_err(
            op,
            tensor,
            format!("has {got} elements, needs at least {want}"),
        ))
    }
}

/// A dimension that must not be zero.
fn check_nonzero(op: &'static str, dim: &'static str, v: u32) -> Result<()> {
    if v == 0 {
        Err(shape_err(op, dim, "is 0; it must be at least 1".into()))
    } else {
        Ok(())
    }
}

/// The product of `dims`, within the kernels' `uint` index (`what` names
/// the tensor in the error).
fn product(op: &'static str, tensor: &'static str, dims: &[u32]) -> Result<u64> {
    let n = dims.iter().map(|&d| u64::from(d)).product::<u64>();
    if n > u64::from(u32::MAX) {
        return Err(shape_err(
            op,
            tensor,
            format!(
                "{dims:?} is {n} elements; the kernels index at most {}",
                u32::MAX
            ),
        ));
    }
    Ok(n)
}

/// `a` and `b` (named in the error) must not share bytes of one buffer.
fn check_disjoint(
    op: &'static str,
    tensor: &'static str,
    a: &dyn GpuBuf,
    other: &str,
    b: &dyn GpuBuf,
) -> Result<()> {
    let (x, y) = (a.view(), b.view());
    let overlap = std::sync::Arc::ptr_eq(x.inner, y.inner)
        && x.offset < y.offset + y.size
        && y.offset < x.offset + x.size;
    if overlap {
        return Err(shape_err(
            op,
            tensor,
            format!("overlaps {other}; this op cannot work in place"),
        ));
    }
    Ok(())
}

/// A finite, non-negative epsilon.
pub(in crate::ops) fn check_eps(op: &'static str, eps: f32) -> Result<()> {
    if eps.is_finite() && eps >= 0.0 {
        Ok(())
    } else {
        Err(Error::Ops(OpsError::Param {
            op,
            param: "eps",
            detail: format!("{eps} is not a finite number >= 0"),
        }))
    }
}

/// Largest head dimension the attention kernels take.
const MAX_HEAD_DIM: u32 = 256;

/// The head counts and head dimension of an attention op: none zero, query
/// heads a multiple of the key/value heads (grouped-query attention), the
/// head dimension within [`MAX_HEAD_DIM`].
fn check_heads(op: &'static str, q_heads: u32, kv_heads: u32, head_dim: u32) -> Result<()> {
    check_nonzero(op, "q_heads", q_heads)?;
    check_nonzero(op, "kv_heads", kv_heads)?;
    check_nonzero(op, "head_dim", head_dim)?;
    if q_heads % kv_heads != 0 {
        return Err(shape_err(
            op,
            "q_heads",
            format!("{q_heads} is not a multiple of kv_heads ({kv_heads})"),
        ));
    }
    if head_dim > MAX_HEAD_DIM {
        return Err(shape_err(
            op,
            "head_dim",
            format!("{head_dim} exceeds the limit {MAX_HEAD_DIM}"),
        ));
    }
    Ok(())
}

/// A finite attention scale.
fn check_scale(op: &'static str, scale: f32) -> Result<()> {
    if scale.is_finite() {
        Ok(())
    } else {
        Err(Error::Ops(OpsError::Param {
            op,
            param: "scale",
            detail: format!("{scale} is not finite"),
        }))
    }
}

/// A grid of one workgroup per row, or an error naming the limit.
fn rows_grid(op: &'static str, gpu: &Device, rows: u32) -> Result<[u32; 3]> {
    let max = gpu.info().max_workgroup_count;
    super::grid::row_grid(rows, max).ok_or_else(|| {
        shape_err(
            op,
            "rows",
            format!("{rows} rows exceed the adapter's workgroup grid {max:?}"),
        )
    })
}

/// Workgroups of an element-wise kernel over `items` items (the kernels
/// stride past the grid).
fn items_grid(gpu: &Device, items: u64) -> [u32; 3] {
    let g = super::grid::elementwise_groups(items, gpu.info().max_workgroup_count[0]);
    [g, 1, 1]
}

/// Records built-in `name` over `bufs` with `pc` push-constant words.
fn launch(
    batch: &mut Batch,
    gpu: &Device,
    name: &'static str,
    bufs: &[&dyn GpuBuf],
    grid: [u32; 3],
    pc: &[u32],
) -> Result<()> {
    let k = crate::builtins::get(&gpu.inner, name, &[])?;
    batch.run_configured(&k, bufs, grid, Some(&super::words(pc)))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shape_checks_name_the_tensor_and_limit() {
        let e = check_elems("ops::nn::x", "weight", 3, 4).unwrap_err();
        assert_eq!(
            e.to_string(),
            "ops::nn::x: weight: has 3 elements, expected 4"
        );
        let e = check_nonzero("ops::nn::x", "cols", 0).unwrap_err();
        assert!(e.to_string().contains("cols: is 0"), "{e}");
        let e = product("ops::nn::x", "x", &[1 << 16, 1 << 16]).unwrap_err();
        assert!(e.to_string().contains(&u32::MAX.to_string()), "{e}");
        assert_eq!(product("ops::nn::x", "x", &[3, 5, 7]).unwrap(), 105);
        assert!(check_eps("ops::nn::x", -1.0).is_err());
        assert!(check_eps("ops::nn::x", f32::NAN).is_err());
        assert!(check_eps("ops::nn::x", 1e-6).is_ok());
        assert!(check_at_least("ops::nn::x", "flag", 0, 1).is_err());
    }

    #[test]
    fn kernel_names_follow_the_element_type() {
        let n = ["a", "a_f16", "a_bf16"];
        assert_eq!(kernel_name::<f32>(n), "a");
        assert_eq!(kernel_name::<F16>(n), "a_f16");
        assert_eq!(kernel_name::<Bf16>(n), "a_bf16");
    }
}
