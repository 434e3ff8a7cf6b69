//! Pure rules the report and benches follow, unit-tested by
//! `tests/measure_rules.rs`: how a chained batch is cut into submissions,
//! and the saxpy launch shape chosen from the adapter's limits.
#![allow(dead_code)]

/// Chunk lengths in dispatches: `first`, then doubling up to `max`, until
/// `n` are covered (`first == 0`: one chunk of `n`). Mirrors vkcompute's
/// `BatchOptions::first_chunk` / `max_chunk` (counted there in commands).
pub fn chunk_lengths(n: usize, first: usize, max: usize) -> Vec<usize> {
    if first == 0 || n == 0 {
        return vec![n];
    }
    let (mut out, mut left, mut len) = (Vec::new(), n, first);
    while left > 0 {
        let take = len.min(left);
        out.push(take);
        left -= take;
        len = (len * 2).min(max.max(first));
    }
    out
}

/// How many times the machine's resident capacity the saxpy grid covers.
pub const SAXPY_WAVES: u64 = 4;

/// The saxpy launch shape `(workgroups, vec4s per invocation per trip)`
/// for `n4` vec4s with workgroups of `workgroup` invocations, chosen from
/// the adapter's limits alone (never by measuring):
///
/// - When the driver reports its compute units and the invocations each
///   keeps resident (`units`, `resident_per_unit`), the grid covers the
///   machine [`SAXPY_WAVES`] times (so every unit has work queued behind
///   what is resident and no tail leaves units idle for long), but never
///   more than one vec4 per invocation needs. If the grid is smaller than
///   the work, each invocation loads 2 vec4s per trip (two independent
///   loads in flight per invocation across its grid-stride loop);
///   otherwise 1.
/// - Else one vec4 per invocation (the grid the work needs), 1 per trip.
///
/// Always at least 1 workgroup and at most `max_groups_x`.
pub fn saxpy_shape(
    units: u32,
    resident_per_unit: u32,
    max_groups_x: u32,
    workgroup: u32,
    n4: u64,
) -> (u32, u32) {
    let need = n4.div_ceil(u64::from(workgroup.max(1))).max(1);
    let machine = u64::from(units) * u64::from(resident_per_unit / workgroup.max(1));
    let (groups, ilp) = if machine > 0 {
        let g = (machine * SAXPY_WAVES).min(need);
        (g, if g < need { 2 } else { 1 })
    } else {
        (need, 1)
    };
    (groups.clamp(1, u64::from(max_groups_x.max(1))) as u32, ilp)
}
