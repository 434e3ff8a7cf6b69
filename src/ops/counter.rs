//! `u32` counters on the GPU (`shaders/u32_add.comp`): a recorded graph
//! advances its own positions and lengths, so consecutive launches need no
//! host write.

use crate::batch::Batch;
use crate::error::{Error, Result};

use super::grid::elementwise_groups;
use super::nn::NnOperand;
use super::{device_of, words};

/// Records `x[i] = x[i].wrapping_add(value)` for every element of `x` (at
/// least 1), in place.
pub fn increment(batch: &mut Batch, x: &impl NnOperand<u32>, value: u32) -> Result<()> {
    const OP: &str = "ops::increment";
    let n = x.elems();
    if n == 0 {
        return Err(Error::OpShape {
            op: OP,
            detail: "x has 0 elements; it needs at least 1".into(),
        });
    }
    let n = super::as_u32(OP, "x", n)?;
    let gpu = device_of(&x.view());
    let k = crate::builtins::get(&gpu.inner, "u32_add", &[])?;
    let groups = elementwise_groups(u64::from(n), gpu.info().max_workgroup_count[0]);
    batch.run_configured(&k, &[x], [groups, 1, 1], Some(&words(&[n, value])))?;
    Ok(())
}
