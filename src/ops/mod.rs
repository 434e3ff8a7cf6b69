//! Built-in kernels: element-wise ops, reductions, softmax, transpose,
//! GEMV, matmul, skinny linear layers ([`linear`]), the transformer ops
//! of [`nn`], element-type conversion ([`convert`]) and `u32` counters
//! ([`increment`]), recorded into an ordinary [`Batch`](crate::Batch) next
//! to your own kernels.
//!
//! ```
//! # fn main() -> vkcompute::Result<()> {
//! use vkcompute::{ops, Device};
//! let gpu = Device::new()?;
//! let a = gpu.upload(&[1.0f32, 2.0, 3.0])?;
//! let b = gpu.upload(&[10.0f32, 20.0, 30.0])?;
//! let c = gpu.alloc::<f32>(3)?;
//! let total = gpu.alloc::<f32>(1)?;
//! let mut batch = gpu.batch()?;
//! ops::add(&mut batch, &a, &b, &c)?;
//! batch.barrier();                 // the sum reads c
//! ops::sum(&mut batch, &c, &total)?;
//! batch.submit()?;
//! assert_eq!(c.download()?, [11.0, 22.0, 33.0]);
//! assert_eq!(total.download()?, [66.0]);
//! # Ok(())
//! # }
//! ```
//!
//! Each op is one dispatch. Like any dispatch in a batch it is unordered
//! against the other commands unless separated by
//! [`Batch::barrier`](crate::Batch::barrier): put a barrier between an op and a later command that
//! reads what it writes (or writes what it reads).
//!
//! The kernels are GLSL in `shaders/`, compiled ahead of time to the SPIR-V
//! that ships in `shaders/spv/` and is embedded (no compiler at build time
//! or run time; they work with `default-features = false`). Each device builds a built-in's pipeline at
//! its first use and reuses it ([`registry_stats`]).
//!
//! Operands are [`Buffer`]s or [`BufferSlice`]s of
//! `f32`, or of [`F16`] for the element-wise ops where the adapter has
//! `shaderFloat16` and 16-bit storage (arithmetic is f32 either way).
//! The [`OpBatch`] records these ops on [`Tensor`]s of f32, f16, bf16 or
//! `u32` ([`DType`], [`TensorElement`]): element-wise ops and casts on any
//! of the float types (computed in f32, rounded to the tensor's type),
//! every other op on f32.
//!
//! Lengths and shapes that do not fit together are an
//! [`Error::OpShape`] (for the transformer ops of [`nn`], an
//! [`Error::Ops`]); nothing is recorded then.

use crate::buffer::{BufView, Buffer, BufferSlice, GpuBuf};
use crate::device::Device;
pub use crate::error::OpsError;
use crate::error::{Error, Result};

mod convert;
mod counter;
mod dtype;
mod elementwise;
pub(crate) mod fusion;
mod gemv;
pub(crate) mod grid;
pub mod nn;
pub(crate) mod reduce;
mod softmax;
mod transpose;

pub use crate::builtins::{
    builtin_kernel, builtin_names, builtin_statistics, registry_stats, BuiltinStatistics,
    RegistryStats,
};
pub use convert::convert;
pub use counter::increment;
pub use dtype::{Bf16, DType, Element, TensorElement, F16};
pub use elementwise::{
    add, binary, copy, fill, gelu, gelu_tanh, mul, relu, saxpy, scale, sigmoid, sub, swish, tanh,
    unary, Binary, Unary,
};
pub use gemv::gemv;
pub use grid::{elementwise_grid, reduce_grid};
pub use reduce::{dot, max, sum};
mod op_batch;
pub use op_batch::{OpBatch, OpBatchOptions};
pub use tensor::{Shape, Tensor, MAX_RANK};
mod tensor;
pub use softmax::{softmax, SOFTMAX_ONE_READ_MAX_COLS};
pub use transpose::transpose;

/// A buffer or slice of `T` that an op can bind.
pub trait Operand<T: Element>: GpuBuf {
    /// Elements in the operand.
    fn elems(&self) -> u64;
}

impl<T: Element> Operand<T> for Buffer<T> {
    fn elems(&self) -> u64 {
        self.len() as u64
    }
}

impl<T: Element> Operand<T> for BufferSlice<'_, T> {
    fn elems(&self) -> u64 {
        self.len() as u64
    }
}

/// The device an operand lives on.
pub(crate) fn device_of(v: &BufView<'_>) -> Device {
    Device {
        inner: v.inner.dev.clone(),
    }
}

/// `got` elements where `want` were expected: an [`Error::OpShape`].
pub(crate) fn check_len(op: &'static str, what: &str, got: u64, want: u64) -> Result<()> {
    if got == want {
        Ok(())
    } else {
        Err(Error::OpShape {
            op,
            detail: format!("{what} has {got} elements, expected {want}"),
        })
    }
}

/// A `rows` × `cols` matrix shape: not empty, and its element count (named
/// `what` in the error) within the kernels' `uint` index.
pub(crate) fn check_matrix(op: &'static str, what: &str, rows: u32, cols: u32) -> Result<u64> {
    if rows == 0 || cols == 0 {
        return Err(Error::OpShape {
            op,
            detail: format!("shape {rows} x {cols} is empty"),
        });
    }
    let total = u64::from(rows) * u64::from(cols);
    as_u32(op, what, total)?;
    Ok(total)
}

/// Element count as the kernels' `uint`, or an error naming the limit.
pub(crate) fn as_u32(op: &'static str, what: &str, n: u64) -> Result<u32> {
    u32::try_from(n).map_err(|_| Error::OpShape {
        op,
        detail: format!(
            "{what} is {n} elements; the kernels index at most {}",
            u32::MAX
        ),
    })
}

/// Whether every view starts on a 16-byte boundary (vec4 loads allowed).
pub(crate) fn aligned16(views: &[BufView<'_>]) -> bool {
    views.iter().all(|v| v.offset % 16 == 0)
}

/// Push-constant bytes from 32-bit words.
pub(crate) fn words(w: &[u32]) -> Vec<u8> {
    w.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// The name of a kernel family's variant for this adapter: `_sg` (subgroup
/// arithmetic) or `_wg` (shared memory only).
pub(crate) fn reduction_variant(gpu: &Device, sg: &'static str, wg: &'static str) -> &'static str {
    if gpu.info().subgroup_arithmetic {
        sg
    } else {
        wg
    }
}

pub mod matmul;
pub use matmul::converts_first;
pub use matmul::{
    batched_tile, choose_linear, choose_matmul, linear, linear_normed, linear_normed_with_plan,
    linear_with_plan, matmul, matmul_bf16w, matmul_bf16w_with_tile, matmul_f16, matmul_f16_batched,
    BatchedShape, Cm2Tile, CoopTile, Epilogue, LinearPlan, MatmulCaps, MatmulDtype, MatmulInput,
    MatmulKernel, MatmulPlan, SgemmTile, TileConfig, Weights, BF16W_CONVERT_MIN_ROWS, LINEAR_MAX_M,
    LINEAR_MAX_SPLITS, LINEAR_TENSOR_STREAM, LINEAR_TENSOR_TILES, LINEAR_TENSOR_WINDOW,
};
pub use matmul::{choose_mlp, swiglu_mlp, swiglu_mlp_with_plan, MlpPlan, MLP_FUSED_MAX_M};
pub use matmul::{linear_f16, residual_kernel};
