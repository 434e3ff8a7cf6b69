//! Element-wise ops: `out = f(x)`, `out = g(a, b)`, saxpy and fill.
//!
//! One dispatch each. The kernels (`shaders/ew_*.glsl`) read and write
//! vec4s over the first `4 * floor(n / 4)` elements when every operand
//! starts on a 16-byte boundary, and scalars for the rest (or for all of it
//! otherwise), in the same dispatch. The grid follows [`super::grid`].
//! `out` may be the same buffer as an input (in place).

use crate::batch::Batch;
use crate::buffer::{BufView, GpuBuf};
use crate::error::Result;

use super::grid::{elementwise_groups, LOCAL};
use super::{as_u32, check_len, device_of, Element, Operand};

/// A one-input element-wise function.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum Unary {
    /// `x`.
    Copy,
    /// `alpha * x`.
    Scale(f32),
    /// `max(x, 0)`.
    Relu,
    /// `1 / (1 + exp(-x))`.
    Sigmoid,
    /// `tanh(x)`.
    Tanh,
    /// `x * sigmoid(x)` (SiLU).
    Swish,
    /// `x * Phi(x)`, the exact (erf) form of GELU.
    Gelu,
    /// `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`, GELU's tanh approximation.
    GeluTanh,
}

impl Unary {
    /// The kernel's OP constant and its `alpha`.
    fn code(self) -> (u32, f32) {
        match self {
            Unary::Copy => (0, 0.0),
            Unary::Scale(a) => (1, a),
            Unary::Relu => (2, 0.0),
            Unary::Sigmoid => (3, 0.0),
            Unary::Tanh => (4, 0.0),
            Unary::Swish => (5, 0.0),
            Unary::Gelu => (6, 0.0),
            Unary::GeluTanh => (7, 0.0),
        }
    }

    /// Name used in errors.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Unary::Copy => "ops::copy",
            Unary::Scale(_) => "ops::scale",
            Unary::Relu => "ops::relu",
            Unary::Sigmoid => "ops::sigmoid",
            Unary::Tanh => "ops::tanh",
            Unary::Swish => "ops::swish",
            Unary::Gelu => "ops::gelu",
            Unary::GeluTanh => "ops::gelu_tanh",
        }
    }
}

/// A two-input element-wise function.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum Binary {
    /// `a + b`.
    Add,
    /// `a - b`.
    Sub,
    /// `a * b`.
    Mul,
    /// `alpha * a + b`.
    Axpy(f32),
}

impl Binary {
    fn code(self) -> (u32, f32) {
        match self {
            Binary::Add => (0, 0.0),
            Binary::Sub => (1, 0.0),
            Binary::Mul => (2, 0.0),
            Binary::Axpy(a) => (3, a),
        }
    }

    /// Name used in errors.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Binary::Add => "ops::add",
            Binary::Sub => "ops::sub",
            Binary::Mul => "ops::mul",
            Binary::Axpy(_) => "ops::saxpy",
        }
    }
}

/// `n`, the vec4 count, and the number of work items (the larger of the
/// vec4 count and the scalar remainder).
fn split(n: u32, vec: bool) -> (u32, u64) {
    let n4 = if vec { n / 4 } else { 0 };
    let items = u64::from(n4).max(u64::from(n - 4 * n4));
    (n4, items)
}

fn kernel_name<T: Element>(family: &str) -> &'static str {
    use super::DType;
    match (family, T::DTYPE) {
        ("unary", DType::F16) => "ew_unary_f16",
        ("binary", DType::F16) => "ew_binary_f16",
        ("fill", DType::F16) => "ew_fill_f16",
        ("unary", _) => "ew_unary_f32",
        ("binary", _) => "ew_binary_f32",
        _ => "ew_fill_f32",
    }
}

/// Records one element-wise dispatch: each view bound twice (vec4, scalar).
fn record<T: Element>(
    batch: &mut Batch,
    op: &'static str,
    family: &str,
    code: u32,
    alpha: f32,
    operands: &[&dyn GpuBuf],
) -> Result<()> {
    let views: Vec<BufView<'_>> = operands.iter().map(|b| b.view()).collect();
    let gpu = device_of(&views[0]);
    T::DTYPE.check(&gpu)?;
    let n = as_u32(op, "the operand", views[0].size / T::DTYPE.size())?;
    let vec = views.iter().all(|v| v.offset % (4 * T::DTYPE.size()) == 0);
    let (n4, items) = split(n, vec);
    let spec: &[(u32, u32)] = if family == "fill" { &[] } else { &[(0, code)] };
    let k = crate::builtins::get(&gpu.inner, kernel_name::<T>(family), spec)?;
    let groups = elementwise_groups(items, gpu.info().max_workgroup_count[0]);
    debug_assert_eq!(k.workgroup_size()[0] as u64, LOCAL);
    let mut pc = [0u8; 16];
    pc[0..4].copy_from_slice(&n.to_le_bytes());
    pc[4..8].copy_from_slice(&n4.to_le_bytes());
    pc[8..12].copy_from_slice(&alpha.to_le_bytes());
    let bufs: Vec<&dyn GpuBuf> = operands.iter().flat_map(|&b| [b, b]).collect();
    batch.run_configured(&k, &bufs, [groups, 1, 1], Some(&pc))?;
    Ok(())
}

/// Records `out = f(x)` element-wise.
pub fn unary<T: Element>(
    batch: &mut Batch,
    f: Unary,
    x: &impl Operand<T>,
    out: &impl Operand<T>,
) -> Result<()> {
    let op = f.name();
    check_len(op, "out", out.elems(), x.elems())?;
    let (code, alpha) = f.code();
    record::<T>(batch, op, "unary", code, alpha, &[x, out])
}

/// Records `out = g(a, b)` element-wise.
pub fn binary<T: Element>(
    batch: &mut Batch,
    g: Binary,
    a: &impl Operand<T>,
    b: &impl Operand<T>,
    out: &impl Operand<T>,
) -> Result<()> {
    let op = g.name();
    check_len(op, "b", b.elems(), a.elems())?;
    check_len(op, "out", out.elems(), a.elems())?;
    let (code, alpha) = g.code();
    record::<T>(batch, op, "binary", code, alpha, &[a, b, out])
}

/// Records `out = a + b`.
pub fn add<T: Element>(
    batch: &mut Batch,
    a: &impl Operand<T>,
    b: &impl Operand<T>,
    out: &impl Operand<T>,
) -> Result<()> {
    binary(batch, Binary::Add, a, b, out)
}

/// Records `out = a - b`.
pub fn sub<T: Element>(
    batch: &mut Batch,
    a: &impl Operand<T>,
    b: &impl Operand<T>,
    out: &impl Operand<T>,
) -> Result<()> {
    binary(batch, Binary::Sub, a, b, out)
}

/// Records `out = a * b` (element-wise).
pub fn mul<T: Element>(
    batch: &mut Batch,
    a: &impl Operand<T>,
    b: &impl Operand<T>,
    out: &impl Operand<T>,
) -> Result<()> {
    binary(batch, Binary::Mul, a, b, out)
}

/// Records `y = alpha * x + y` (in place on `y`).
pub fn saxpy<T: Element>(
    batch: &mut Batch,
    alpha: f32,
    x: &impl Operand<T>,
    y: &impl Operand<T>,
) -> Result<()> {
    binary(batch, Binary::Axpy(alpha), x, y, y)
}

/// Records `out = alpha * x`.
pub fn scale<T: Element>(
    batch: &mut Batch,
    alpha: f32,
    x: &impl Operand<T>,
    out: &impl Operand<T>,
) -> Result<()> {
    unary(batch, Unary::Scale(alpha), x, out)
}

/// Records `out = x` by the element-wise kernel (any length and alignment;
/// [`Batch::copy`] is the general byte copy).
pub fn copy<T: Element>(
    batch: &mut Batch,
    x: &impl Operand<T>,
    out: &impl Operand<T>,
) -> Result<()> {
    unary(batch, Unary::Copy, x, out)
}

/// Records `out = max(x, 0)`.
pub fn relu<T: Element>(
    batch: &mut Batch,
    x: &impl Operand<T>,
    out: &impl Operand<T>,
) -> Result<()> {
    unary(batch, Unary::Relu, x, out)
}

/// Records `out = 1 / (1 + exp(-x))`.
pub fn sigmoid<T: Element>(
    batch: &mut Batch,
    x: &impl Operand<T>,
    out: &impl Operand<T>,
) -> Result<()> {
    unary(batch, Unary::Sigmoid, x, out)
}

/// Records `out = tanh(x)`.
pub fn tanh<T: Element>(
    batch: &mut Batch,
    x: &impl Operand<T>,
    out: &impl Operand<T>,
) -> Result<()> {
    unary(batch, Unary::Tanh, x, out)
}

/// Records `out = x * sigmoid(x)` (swish, SiLU).
pub fn swish<T: Element>(
    batch: &mut Batch,
    x: &impl Operand<T>,
    out: &impl Operand<T>,
) -> Result<()> {
    unary(batch, Unary::Swish, x, out)
}

/// Records `out = x * Phi(x)`: GELU, exact erf form.
pub fn gelu<T: Element>(
    batch: &mut Batch,
    x: &impl Operand<T>,
    out: &impl Operand<T>,
) -> Result<()> {
    unary(batch, Unary::Gelu, x, out)
}

/// Records GELU's tanh approximation.
pub fn gelu_tanh<T: Element>(
    batch: &mut Batch,
    x: &impl Operand<T>,
    out: &impl Operand<T>,
) -> Result<()> {
    unary(batch, Unary::GeluTanh, x, out)
}

/// Records `out = value` for every element.
pub fn fill<T: Element>(batch: &mut Batch, value: f32, out: &impl Operand<T>) -> Result<()> {
    record::<T>(batch, "ops::fill", "fill", 0, value, &[out])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vec4_part_and_remainder() {
        assert_eq!(split(1, true), (0, 1));
        assert_eq!(split(7, true), (1, 3));
        assert_eq!(split(1000, true), (250, 250));
        assert_eq!(split((1 << 20) + 3, true), (1 << 18, 1 << 18));
        assert_eq!(split(1000, false), (0, 1000));
    }
}
