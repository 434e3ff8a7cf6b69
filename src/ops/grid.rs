//! Launch sizes of the built-in kernels, from the adapter's limits (plain
//! logic, tested here; never from measurement).
//!
//! - Element-wise kernels: one item (a vec4, or a scalar of the tail) per
//!   invocation, `ceil(items / 256)` workgroups, while that fits in
//!   `maxComputeWorkGroupCount[0]`; past it, that many workgroups and each
//!   invocation strides over the rest (the kernels always loop, so both are
//!   correct).
//! - Reductions: as many workgroups as the GPU keeps resident at once
//!   (compute units × resident invocations per unit / 256, where the driver
//!   reports them; [`FALLBACK_RESIDENT_GROUPS`] otherwise), fewer when the
//!   input is smaller, each striding over its share. The grid depends only
//!   on the length and the adapter, so results repeat bit for bit.
//! - Row kernels (softmax, GEMV): one workgroup per row, rows spread over x
//!   then y within `maxComputeWorkGroupCount`.

/// Invocations per workgroup of the 1-D built-ins (`LOCAL` in the shaders).
pub(crate) const LOCAL: u64 = 256;

/// Resident workgroups assumed when the driver reports no compute units.
pub(crate) const FALLBACK_RESIDENT_GROUPS: u32 = 128;

/// Workgroups for an element-wise kernel over `items` work items.
pub(crate) fn elementwise_groups(items: u64, max_groups_x: u32) -> u32 {
    items
        .div_ceil(LOCAL)
        .clamp(1, u64::from(max_groups_x.max(1))) as u32
}

/// Workgroups for a one-pass reduction over `items` work items.
pub(crate) fn reduce_groups(
    items: u64,
    compute_units: u32,
    threads_per_unit: u32,
    max_groups_x: u32,
) -> u32 {
    let resident = if compute_units > 0 && threads_per_unit > 0 {
        u64::from(compute_units) * (u64::from(threads_per_unit) / LOCAL).max(1)
    } else {
        u64::from(FALLBACK_RESIDENT_GROUPS)
    };
    items
        .div_ceil(LOCAL)
        .min(resident)
        .clamp(1, u64::from(max_groups_x.max(1))) as u32
}

/// A grid of one workgroup per row: `[x, y, 1]` with `x * y >= rows`, or
/// `None` when even that exceeds the limits.
pub(crate) fn row_grid(rows: u32, max: [u32; 3]) -> Option<[u32; 3]> {
    let x = rows.min(max[0]).max(1);
    let y = rows.div_ceil(x).max(1);
    (y <= max[1]).then_some([x, y, 1])
}

/// Workgroups along x the element-wise ops ([`unary`](super::unary),
/// [`binary`](super::binary), [`fill`](super::fill), [`saxpy`](super::saxpy))
/// launch over `elems` elements on `info`'s adapter, operands 16-byte
/// aligned: for reports and diagnostics (the launch itself uses the same rule).
pub fn elementwise_grid(info: &crate::AdapterInfo, elems: u64) -> u32 {
    let n4 = elems / 4;
    elementwise_groups(n4.max(elems - 4 * n4), info.max_workgroup_count[0])
}

/// Workgroups along x [`sum`](super::sum), [`max`](super::max) and
/// [`dot`](super::dot) launch over `elems` aligned elements on `info`'s
/// adapter, with the compute-unit figures the rule used.
pub fn reduce_grid(info: &crate::AdapterInfo, elems: u64) -> u32 {
    let n4 = elems / 4;
    reduce_groups(
        n4.max(elems - 4 * n4),
        info.compute_units,
        info.max_threads_per_compute_unit,
        info.max_workgroup_count[0],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elementwise_is_one_item_per_invocation_until_the_grid_limit() {
        assert_eq!(elementwise_groups(1, 65535), 1);
        assert_eq!(elementwise_groups(256, 65535), 1);
        assert_eq!(elementwise_groups(257, 65535), 2);
        // 64 Mi floats as vec4 on NVIDIA (2^31 - 1 groups): one per invocation.
        assert_eq!(elementwise_groups(16 << 20, i32::MAX as u32), 65536);
        // On lavapipe (65535 groups) the same length strides.
        assert_eq!(elementwise_groups(16 << 20, 65535), 65535);
    }

    #[test]
    fn reductions_fill_the_gpu_once() {
        // H200: 132 SMs x 2048 resident invocations -> 8 groups of 256 each.
        assert_eq!(reduce_groups(16 << 20, 132, 2048, i32::MAX as u32), 1056);
        assert_eq!(reduce_groups(1000, 132, 2048, i32::MAX as u32), 4);
        assert_eq!(reduce_groups(0, 132, 2048, 65535), 1);
        assert_eq!(
            reduce_groups(1 << 30, 0, 0, 65535),
            FALLBACK_RESIDENT_GROUPS
        );
        assert_eq!(reduce_groups(1 << 30, 132, 2048, 100), 100);
        // A unit holding fewer than 256 invocations still gets one group.
        assert_eq!(reduce_groups(1 << 30, 10, 64, 65535), 10);
    }

    #[test]
    fn rows_spread_into_y() {
        assert_eq!(row_grid(8192, [65535; 3]), Some([8192, 1, 1]));
        assert_eq!(row_grid(70000, [65535; 3]), Some([65535, 2, 1]));
        assert_eq!(row_grid(u32::MAX, [65535, 1, 1]), None);
        assert_eq!(row_grid(1, [65535; 3]), Some([1, 1, 1]));
    }
}
