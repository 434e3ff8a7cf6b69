//! Matrix-vector product `y = A x`, `A` row-major `m` × `n`: one workgroup
//! per row, vec4 loads with four in flight per invocation when `n` is a
//! multiple of 4 and the operands are 16-byte aligned, and a fixed-order
//! workgroup sum (subgroup operations where the adapter has them)
//! (`shaders/gemv.glsl`).

use crate::batch::Batch;
use crate::error::{Error, Result};

use super::grid::row_grid;
use super::{aligned16, as_u32, check_len, device_of, reduction_variant, words, Operand};

/// Records `y = A x` for `A` (`m` × `n`, row-major), `x` (`n`), `y` (`m`).
pub fn gemv(
    batch: &mut Batch,
    a: &impl Operand<f32>,
    x: &impl Operand<f32>,
    y: &impl Operand<f32>,
    m: u32,
    n: u32,
) -> Result<()> {
    const OP: &str = "ops::gemv";
    if m == 0 || n == 0 {
        return Err(Error::OpShape {
            op: OP,
            detail: format!("shape {m} x {n} is empty"),
        });
    }
    let total = u64::from(m) * u64::from(n);
    as_u32(OP, "m x n", total)?;
    check_len(OP, "A", a.elems(), total)?;
    check_len(OP, "x", x.elems(), u64::from(n))?;
    check_len(OP, "y", y.elems(), u64::from(m))?;
    let (av, xv) = (a.view(), x.view());
    let gpu = device_of(&av);
    let vec = n % 4 == 0 && aligned16(&[av, xv]);
    let grid = row_grid(m, gpu.info().max_workgroup_count).ok_or_else(|| Error::OpShape {
        op: OP,
        detail: format!("{m} rows exceed the adapter's workgroup grid"),
    })?;
    let name = reduction_variant(&gpu, "gemv_sg", "gemv_wg");
    let k = gpu.inner.builtins.get(&gpu.inner, name, &[])?;
    let pc = words(&[m, n, u32::from(vec)]);
    batch.run_configured(&k, &[a, a, x, x, y], grid, Some(&pc))?;
    Ok(())
}
