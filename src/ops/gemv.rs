//! Matrix-vector product `y = A x`, `A` row-major `m` × `n`
//! (`shaders/gemv.glsl`). With subgroup arithmetic: one subgroup per row,
//! no barriers, each workgroup taking 256 / subgroup-size consecutive rows;
//! without: one workgroup per row and a shared-memory sum. Each lane keeps
//! four vec4 loads in flight when `n` is a multiple of 4 and the operands
//! are 16-byte aligned; every output is summed in a fixed order.

use crate::batch::Batch;
use crate::error::{Error, Result};

use super::grid::row_grid;
use super::{aligned16, check_len, check_matrix, device_of, reduction_variant, words, Operand};

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
    let total = check_matrix(OP, "m x n", m, n)?;
    check_len(OP, "A", a.elems(), total)?;
    check_len(OP, "x", x.elems(), u64::from(n))?;
    check_len(OP, "y", y.elems(), u64::from(m))?;
    let (av, xv) = (a.view(), x.view());
    let gpu = device_of(&av);
    let vec = n % 4 == 0 && aligned16(&[av, xv]);
    let info = gpu.info();
    let rpg = rows_per_group(info.subgroup_arithmetic, info.subgroup_size);
    let grid =
        row_grid(m.div_ceil(rpg), info.max_workgroup_count).ok_or_else(|| Error::OpShape {
            op: OP,
            detail: format!("{m} rows exceed the adapter's workgroup grid"),
        })?;
    let name = reduction_variant(&gpu, "gemv_sg", "gemv_wg");
    let k = crate::builtins::get(&gpu.inner, name, &[])?;
    let pc = words(&[m, n, u32::from(vec), rpg]);
    batch.run_configured(&k, &[a, a, x, x, y], grid, Some(&pc))?;
    Ok(())
}

/// Rows each workgroup of 256 takes: one per subgroup with subgroup
/// arithmetic (the kernel strides its subgroups over them, so a subgroup
/// size other than the reported one stays correct), else one.
fn rows_per_group(subgroups: bool, subgroup_size: u32) -> u32 {
    if subgroups {
        (256 / subgroup_size.max(1)).max(1)
    } else {
        1
    }
}

#[cfg(test)]
mod tests {
    use super::rows_per_group;

    #[test]
    fn a_row_per_subgroup() {
        assert_eq!(rows_per_group(true, 32), 8);
        assert_eq!(rows_per_group(true, 8), 32);
        assert_eq!(rows_per_group(true, 64), 4);
        assert_eq!(rows_per_group(true, 512), 1);
        assert_eq!(rows_per_group(false, 32), 1);
    }
}
