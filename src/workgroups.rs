//! Workgroup arithmetic: from a count of invocations to a dispatch grid.
//!
//! [`Batch::run`](crate::Batch::run) launches `ceil(invocations / local_x)`
//! workgroups along x only ([`x_groups`]), so a kernel indexing with
//! `gl_GlobalInvocationID.x` alone sees every index below `invocations`
//! exactly once. Vulkan bounds that grid: at most
//! `maxComputeWorkGroupCount[0]` workgroups (65,535 on lavapipe), and
//! `vkCmdDispatchBase` cannot reach past it either (its base plus count must
//! stay within the same limit). Past that, `run` splits the launch along x
//! into pieces of at most that many workgroups ([`split_x`],
//! [`piece_groups`]), each running a variant of the kernel that sees its
//! indices offset by the piece's base ([`crate::x_split`]); a grid whose
//! spare invocations would index past 2^32 is refused. Nothing is spread
//! into y or z behind the kernel's back.
//!
//! [`Batch::run_spread`](crate::Batch::run_spread) is the explicit opt-in:
//! the grid spreads into y and then z ([`grid_for_invocations`]), keeping
//! the number of spare workgroups small, and the kernel recovers its linear
//! index as
//!
//! ```glsl
//! uint idx = gl_GlobalInvocationID.x
//!          + gl_GlobalInvocationID.y * (gl_NumWorkGroups.x * gl_WorkGroupSize.x)
//!          + gl_GlobalInvocationID.z * (gl_NumWorkGroups.x * gl_WorkGroupSize.x * gl_NumWorkGroups.y);
//! if (idx >= n) return;
//! ```
//!
//! (for a kernel whose local size is 1 in y and z). The grid may hold a few
//! more invocations than asked for, so kernels bound-check `idx`, as they
//! must anyway when `invocations` is not a multiple of the local size.
//! Nothing is ever clamped: a grid that cannot fit is an error.

/// Why a grid could not be formed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GridError {
    /// Zero invocations or a zero dimension.
    Empty,
    /// The grid needs more workgroups than the limits allow; holds the
    /// smallest grid that would have been needed.
    TooLarge([u64; 3]),
}

fn div_ceil(a: u64, b: u64) -> u64 {
    a.div_ceil(b)
}

/// Workgroups along x for a plain launch of `invocations` of `local_x`
/// each: every `gl_GlobalInvocationID.x` below `invocations` once. Refused
/// (`TooLarge`, holding the x grid needed) past `max_x` workgroups, or when
/// the grid's last invocation index would not fit in 32 bits (spare
/// invocations would wrap onto low indices).
pub(crate) fn x_groups(invocations: u64, local_x: u32, max_x: u32) -> Result<u32, GridError> {
    if invocations == 0 || local_x == 0 {
        return Err(GridError::Empty);
    }
    let groups = div_ceil(invocations, u64::from(local_x));
    if groups > u64::from(max_x) || groups * u64::from(local_x) > 1 << 32 {
        return Err(GridError::TooLarge([groups, 1, 1]));
    }
    Ok(groups as u32)
}

/// A launch of `invocations` along x in workgroups of `local_x`, split
/// into pieces of at most `max_x` workgroups (what [`x_groups`] refuses
/// past one row): the total workgroups and the number of pieces. Piece `p`
/// holds workgroups `p * max_x ..` up to the total. Refused (`TooLarge`)
/// when the grid's last invocation index would not fit in 32 bits.
pub(crate) fn split_x(invocations: u64, local_x: u32, max_x: u32) -> Result<(u64, u32), GridError> {
    if invocations == 0 || local_x == 0 || max_x == 0 {
        return Err(GridError::Empty);
    }
    let groups = div_ceil(invocations, u64::from(local_x));
    let pieces = div_ceil(groups, u64::from(max_x));
    match u32::try_from(pieces) {
        Ok(pieces) if groups * u64::from(local_x) <= 1 << 32 => Ok((groups, pieces)),
        _ => Err(GridError::TooLarge([groups, 1, 1])),
    }
}

/// The workgroups of piece `piece` of a split launch of `groups` (see
/// [`split_x`]).
pub(crate) fn piece_groups(groups: u64, piece: u32, max_x: u32) -> u32 {
    let start = u64::from(piece) * u64::from(max_x);
    groups.saturating_sub(start).min(u64::from(max_x)) as u32
}

/// The grid for `invocations` along x with `local_x` invocations per
/// workgroup, within `max_count` workgroups per dimension, spread into y
/// and z past `max_count[0]` (the opt-in form).
pub(crate) fn grid_for_invocations(
    invocations: u64,
    local_x: u32,
    max_count: [u32; 3],
) -> Result<[u32; 3], GridError> {
    if invocations == 0 || local_x == 0 {
        return Err(GridError::Empty);
    }
    let groups = div_ceil(invocations, u64::from(local_x));
    grid_for_groups(groups, max_count)
}

/// Spreads `groups` workgroups over x, y and z within `max_count`.
pub(crate) fn grid_for_groups(groups: u64, max_count: [u32; 3]) -> Result<[u32; 3], GridError> {
    let [mx, my, mz] = max_count.map(u64::from);
    if groups == 0 {
        return Err(GridError::Empty);
    }
    if mx == 0 || my == 0 || mz == 0 {
        return Err(GridError::TooLarge([groups, 1, 1]));
    }
    if groups <= mx {
        return Ok([groups as u32, 1, 1]);
    }
    // Planes of x*y groups, as few as possible, then rows within a plane.
    let z = div_ceil(groups, mx * my);
    if z > mz {
        return Err(GridError::TooLarge([mx, my, z]));
    }
    let per_plane = div_ceil(groups, z);
    let y = div_ceil(per_plane, mx);
    let x = div_ceil(per_plane, y);
    debug_assert!(x <= mx && y <= my && x * y * z >= groups);
    Ok([x as u32, y as u32, z as u32])
}

/// Checks an explicit grid against the limits.
pub(crate) fn check_grid(grid: [u32; 3], max_count: [u32; 3]) -> Result<(), GridError> {
    if grid.contains(&0) {
        return Err(GridError::Empty);
    }
    if grid.iter().zip(max_count.iter()).any(|(g, m)| g > m) {
        return Err(GridError::TooLarge(grid.map(u64::from)));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const LAVAPIPE: [u32; 3] = [65535, 65535, 65535];

    fn total(g: [u32; 3]) -> u64 {
        g.iter().map(|&v| u64::from(v)).product()
    }

    #[test]
    fn small_counts_stay_in_x() {
        assert_eq!(grid_for_invocations(1, 64, LAVAPIPE), Ok([1, 1, 1]));
        assert_eq!(grid_for_invocations(64, 64, LAVAPIPE), Ok([1, 1, 1]));
        assert_eq!(grid_for_invocations(65, 64, LAVAPIPE), Ok([2, 1, 1]));
        assert_eq!(grid_for_invocations(1000, 256, LAVAPIPE), Ok([4, 1, 1]));
    }

    #[test]
    fn x_launches_stay_linear_or_are_refused() {
        assert_eq!(x_groups(1, 64, 65535), Ok(1));
        assert_eq!(x_groups(65535 * 64, 64, 65535), Ok(65535));
        assert_eq!(
            x_groups(65535 * 64 + 1, 64, 65535),
            Err(GridError::TooLarge([65536, 1, 1]))
        );
        // 16 Mi + 5 invocations: too many groups of 64 or 256 for lavapipe,
        // within limits at 1024 per group.
        let n = (16 << 20) + 5;
        assert!(x_groups(n, 256, 65535).is_err());
        assert_eq!(x_groups(n, 1024, 65535), Ok(16385));
        assert_eq!(x_groups(0, 64, 65535), Err(GridError::Empty));
        assert_eq!(x_groups(5, 0, 65535), Err(GridError::Empty));
        // u32::MAX invocations in groups of 100 would index past 2^32.
        let nv = i32::MAX as u32;
        assert!(x_groups(u64::from(u32::MAX), 100, nv).is_err());
        assert_eq!(x_groups(u64::from(u32::MAX), 256, nv), Ok(1 << 24));
    }

    #[test]
    fn split_launches_cover_every_group_once() {
        let n = (16 << 20) + 5;
        let (groups, pieces) = split_x(n, 64, 65535).unwrap();
        assert_eq!((groups, pieces), (262_145, 5));
        let sizes: Vec<u32> = (0..pieces)
            .map(|p| piece_groups(groups, p, 65535))
            .collect();
        assert_eq!(sizes, [65535, 65535, 65535, 65535, 5]);
        for (n, local, max) in [
            (1u64, 1, 1),
            (100, 3, 7),
            (1 << 32, 256, 65535),
            (999, 10, 50),
        ] {
            let (g, p) = split_x(n, local, max).unwrap();
            let total: u64 = (0..p).map(|i| u64::from(piece_groups(g, i, max))).sum();
            assert_eq!(total, g);
            assert!((0..p).all(|i| (1..=max).contains(&piece_groups(g, i, max))));
        }
        // Spare invocations past 2^32 would wrap onto low indices.
        assert!(split_x(u64::from(u32::MAX), 100, 65535).is_err());
        assert_eq!(split_x(0, 64, 65535), Err(GridError::Empty));
        assert_eq!(split_x(5, 64, 0), Err(GridError::Empty));
    }

    #[test]
    fn zero_is_an_error() {
        assert_eq!(grid_for_invocations(0, 64, LAVAPIPE), Err(GridError::Empty));
        assert_eq!(grid_for_invocations(5, 0, LAVAPIPE), Err(GridError::Empty));
        assert_eq!(check_grid([1, 0, 1], LAVAPIPE), Err(GridError::Empty));
    }

    #[test]
    fn spreads_into_y_then_z_without_clamping() {
        // u32::MAX invocations at local size 1 need 4 Gi groups.
        let g = grid_for_invocations(u64::from(u32::MAX), 1, LAVAPIPE).unwrap();
        assert!(g.iter().all(|&v| v <= 65535));
        assert!(total(g) >= u64::from(u32::MAX));
        assert!(g[2] > 1);
        let g = grid_for_invocations(65536 * 64, 64, LAVAPIPE).unwrap();
        assert_eq!(g[2], 1);
        assert!(g[1] > 1 && total(g) >= 65536);
    }

    #[test]
    fn spare_groups_stay_below_one_row_per_plane() {
        for groups in [65536u64, 70000, 131071, 1 << 24, 4_000_000_000] {
            let g = grid_for_groups(groups, LAVAPIPE).unwrap();
            let spare = total(g) - groups;
            assert!(spare < u64::from(g[1]) * u64::from(g[2]), "{groups}: {g:?}");
        }
    }

    #[test]
    fn too_large_names_the_needed_grid() {
        let small = [4, 4, 4];
        assert_eq!(grid_for_groups(64, small), Ok([4, 4, 4]));
        assert_eq!(
            grid_for_groups(65, small),
            Err(GridError::TooLarge([4, 4, 5]))
        );
        assert_eq!(
            check_grid([5, 1, 1], small),
            Err(GridError::TooLarge([5, 1, 1]))
        );
        assert_eq!(check_grid([4, 4, 4], small), Ok(()));
    }

    #[test]
    fn exhaustive_small_limits_cover_every_group() {
        let lim = [7, 5, 3];
        for groups in 1..=105u64 {
            let g = grid_for_groups(groups, lim).unwrap();
            assert!(
                total(g) >= groups && check_grid(g, lim).is_ok(),
                "{groups}: {g:?}"
            );
        }
        assert!(grid_for_groups(106, lim).is_err());
    }
}
