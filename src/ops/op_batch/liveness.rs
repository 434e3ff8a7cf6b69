//! Intermediates reused by liveness: which storages of an op batch's plan
//! share one pooled GPU buffer, and the resources the plan's barriers are
//! computed over once they do. Pure functions.
//!
//! A storage the op batch owns (not an upload or an import) is *pinned*
//! when a value of it must be readable after execution (a held tensor
//! names it): it keeps a buffer of its own from its first step to the end.
//! Any other storage is *transient*: it needs memory only from the first
//! step that touches it to the last, and its buffer goes back to the pool
//! after that last step, for a later step's storage of a similar size
//! (at least as many bytes, at most twice as many: sizes are in bytes,
//! so storages of different element types share buffers). A step never gets
//! a buffer that one of its own operands gives back, so no single kernel
//! reads and writes one buffer through two storages. Reuse adds
//! write-after-read and write-after-write hazards between steps; the
//! barriers are recomputed over the buffers ([`resources`]), so they see
//! them.

use std::collections::BTreeSet;

use crate::ops::fusion::program::S;

/// Which storages use which pooled buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Assignment {
    /// Per storage: the pooled buffer it is bound to (`None`: a storage
    /// with a buffer of its own, or one no step touches).
    pub of: Vec<Option<usize>>,
    /// Per pooled buffer, its size in bytes. The first ones are the
    /// `existing` buffers given to [`assign`] that are still used (see
    /// `kept`); the rest are new.
    pub bytes: Vec<u64>,
    /// Per pooled buffer, the index among `existing` it reuses (`None`:
    /// make a new one).
    pub kept: Vec<Option<usize>>,
}

/// What [`assign`] needs to know of one storage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StorageInfo {
    /// It has a buffer of its own (an upload or an import): never pooled.
    pub fixed: bool,
    /// A value of it must be readable after execution.
    pub pinned: bool,
    /// Bytes.
    pub bytes: u64,
    /// The existing buffer it had last time (preferred when free and
    /// large enough).
    pub prev: Option<usize>,
}

/// A pooled buffer made before this plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Existing {
    /// Bytes.
    pub bytes: u64,
    /// Only this storage may take it (a buffer handed out while it held
    /// that storage's value: it keeps that value's role or goes).
    pub only: Option<S>,
}

/// Whether a free buffer of `len` bytes may hold a storage of `want`.
fn fits(len: u64, want: u64) -> bool {
    len >= want && len <= want.saturating_mul(2)
}

/// Assigns the op batch's own storages to pooled buffers. `access[i]`:
/// the storages step `i` reads and writes; `existing`: the pooled
/// buffers already made (free at the start).
pub(crate) fn assign(
    storages: &[StorageInfo],
    access: &[(BTreeSet<S>, BTreeSet<S>)],
    existing: &[Existing],
) -> Assignment {
    let n = storages.len();
    let mut first = vec![usize::MAX; n];
    let mut last = vec![0usize; n];
    for (i, (r, w)) in access.iter().enumerate() {
        for &s in r.iter().chain(w) {
            if s < n && !storages[s].fixed {
                first[s] = first[s].min(i);
                last[s] = last[s].max(i);
            }
        }
    }
    let steps = access.len();
    let mut starts: Vec<Vec<S>> = vec![Vec::new(); steps];
    let mut ends: Vec<Vec<S>> = vec![Vec::new(); steps];
    for s in 0..n {
        if first[s] == usize::MAX {
            continue;
        }
        starts[first[s]].push(s);
        if !storages[s].pinned {
            ends[last[s]].push(s);
        }
    }
    // Pooled buffers: (length, index among `existing`, reserved for).
    let mut bufs: Vec<(u64, Option<usize>, Option<S>)> = existing
        .iter()
        .enumerate()
        .map(|(i, e)| (e.bytes, Some(i), e.only))
        .collect();
    let mut free: BTreeSet<usize> = (0..bufs.len()).collect();
    // Per buffer, the step after which it was last given back: among
    // buffers of one length the one given back longest ago is taken, so
    // its write-after-read is likelier to fall behind a barrier the plan
    // has anyway.
    let mut freed_at = vec![0usize; bufs.len()];
    let mut of = vec![None; n];
    for i in 0..steps {
        if i > 0 {
            for &s in &ends[i - 1] {
                if let Some(b) = of[s] {
                    free.insert(b);
                    freed_at[b] = i;
                }
            }
        }
        for &s in &starts[i] {
            let want = storages[s].bytes;
            let prev = storages[s].prev.filter(|&p| {
                free.contains(&p) && bufs[p].0 >= want && bufs[p].2.map_or(true, |o| o == s)
            });
            let best = prev.or_else(|| {
                free.iter()
                    .copied()
                    .filter(|&b| bufs[b].2.is_none() && fits(bufs[b].0, want))
                    .min_by_key(|&b| (bufs[b].0, freed_at[b], b))
            });
            let b = match best {
                Some(b) => {
                    free.remove(&b);
                    b
                }
                None => {
                    bufs.push((want, None, None));
                    freed_at.push(0);
                    bufs.len() - 1
                }
            };
            of[s] = Some(b);
        }
    }
    // Existing buffers no storage took are dropped: renumber the rest.
    let used: BTreeSet<usize> = of.iter().flatten().copied().collect();
    let mut renumber = vec![usize::MAX; bufs.len()];
    let mut bytes = Vec::new();
    let mut kept = Vec::new();
    for b in used {
        renumber[b] = bytes.len();
        bytes.push(bufs[b].0);
        kept.push(bufs[b].1);
    }
    for o in of.iter_mut().flatten() {
        *o = renumber[*o];
    }
    Assignment { of, bytes, kept }
}

/// The resource each storage's memory is, for barriers: storages in one
/// pooled buffer share one; a fixed storage shares one with every fixed
/// storage whose memory overlaps it (`fixed[s]`: its buffer's identity and
/// byte range), transitively. Returns one id per storage (`None`: no
/// memory).
pub(crate) fn resources(
    pooled: &[Option<usize>],
    fixed: &[Option<(usize, u64, u64)>],
) -> Vec<Option<usize>> {
    let n = pooled.len().max(fixed.len());
    let pool_count = pooled.iter().flatten().map(|p| p + 1).max().unwrap_or(0);
    // Union-find over fixed storages whose byte ranges overlap.
    let mut parent: Vec<usize> = (0..n).collect();
    fn root(parent: &mut [usize], mut x: usize) -> usize {
        while parent[x] != x {
            parent[x] = parent[parent[x]];
            x = parent[x];
        }
        x
    }
    let fixed_ids: Vec<usize> = (0..fixed.len()).filter(|&s| fixed[s].is_some()).collect();
    for (i, &a) in fixed_ids.iter().enumerate() {
        for &b in &fixed_ids[i + 1..] {
            if let (Some((ka, sa, ea)), Some((kb, sb, eb))) = (fixed[a], fixed[b]) {
                if ka == kb && sa < eb && sb < ea {
                    let (ra, rb) = (root(&mut parent, a), root(&mut parent, b));
                    parent[ra] = rb;
                }
            }
        }
    }
    (0..n)
        .map(|s| {
            if let Some(p) = pooled.get(s).copied().flatten() {
                Some(p)
            } else if fixed.get(s).copied().flatten().is_some() {
                Some(pool_count + root(&mut parent, s))
            } else {
                None
            }
        })
        .collect()
}

/// `access` with each storage replaced by its resource.
pub(crate) fn map_access(
    access: &[(BTreeSet<S>, BTreeSet<S>)],
    res: &[Option<usize>],
) -> Vec<(BTreeSet<usize>, BTreeSet<usize>)> {
    let map = |set: &BTreeSet<S>| -> BTreeSet<usize> {
        set.iter()
            .map(|&s| res.get(s).copied().flatten().unwrap_or(usize::MAX - s))
            .collect()
    };
    access.iter().map(|(r, w)| (map(r), map(w))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::fusion::plan::barriers;

    fn set(v: &[S]) -> BTreeSet<S> {
        v.iter().copied().collect()
    }

    fn own(bytes: u64, pinned: bool) -> StorageInfo {
        StorageInfo {
            fixed: false,
            pinned,
            bytes,
            prev: None,
        }
    }

    fn free(lens: &[u64]) -> Vec<Existing> {
        lens.iter()
            .map(|&bytes| Existing { bytes, only: None })
            .collect()
    }

    const INPUT: StorageInfo = StorageInfo {
        fixed: true,
        pinned: false,
        bytes: 8,
        prev: None,
    };

    /// x (storage 0) through a chain of `steps` unary ops, each a new
    /// storage 1..=steps; the last one held.
    type Access = Vec<(BTreeSet<S>, BTreeSet<S>)>;

    fn chain(steps: usize) -> (Vec<StorageInfo>, Access) {
        let mut st = vec![INPUT];
        let mut acc = Vec::new();
        for i in 1..=steps {
            st.push(own(8, i == steps));
            acc.push((set(&[i - 1]), set(&[i])));
        }
        (st, acc)
    }

    #[test]
    fn storages_of_different_element_types_share_buffers_by_bytes() {
        use crate::ops::DType;
        // f32 × 64 (256 bytes) -> f16 × 128 (256 bytes) -> f16 × 64 (128
        // bytes) -> f32 × 64: each step reads the one before.
        let sizes = [
            64 * DType::F32.size(),
            128 * DType::F16.size(),
            64 * DType::F16.size(),
            64 * DType::F32.size(),
        ];
        let mut st = vec![INPUT];
        st.extend(sizes.iter().enumerate().map(|(i, &b)| own(b, i == 3)));
        let acc: Access = (1..=4).map(|i| (set(&[i - 1]), set(&[i]))).collect();
        let a = assign(&st, &acc, &[]);
        // Ping-pong by bytes: the 64 f16 values (128 bytes) take the
        // buffer of the first 64 f32 values (256 bytes, within twice), and
        // the last f32 value the buffer of the 128 f16 values (the same
        // 256 bytes).
        assert_eq!(a.of[1], a.of[3], "{:?}", a.of);
        assert_eq!(a.of[2], a.of[4], "{:?}", a.of);
        assert_ne!(a.of[1], a.of[2]);
        assert_eq!(a.bytes, [256, 256]);
    }

    #[test]
    fn a_chain_ping_pongs_between_two_buffers_and_keeps_the_held_one() {
        let (st, acc) = chain(50);
        let a = assign(&st, &acc, &[]);
        assert_eq!(a.of[0], None, "an input is never pooled");
        assert!(a.bytes.len() <= 3, "{:?}", a.bytes);
        // Neighbours never share: a step reads one and writes the other.
        for i in 1..50 {
            assert_ne!(a.of[i], a.of[i + 1]);
        }
        // The held result may take a buffer given back earlier, but none
        // after it: no storage touched from its step on shares it.
        let held = a.of[50];
        assert_ne!(a.of[49], held);
        let mut more = st.clone();
        more.push(own(8, false));
        let mut acc2 = acc.clone();
        acc2.push((set(&[0]), set(&[51])));
        let b = assign(&more, &acc2, &[]);
        assert_ne!(
            b.of[51], b.of[50],
            "a dead value after the held one took its buffer"
        );
        assert_ne!(b.of[49], b.of[50]);
        // Barriers over buffers: every step after the first (RAW on its
        // input, and the reuse's WAR); one per step as before.
        let res = resources(&a.of, &[Some((7, 0, 32))]);
        let b = barriers(&map_access(&acc, &res));
        assert_eq!(b.iter().filter(|x| **x).count(), 49);
    }

    #[test]
    fn reuse_adds_the_write_after_read_barrier_it_needs() {
        // 0: x -> t1; 1: x -> t2 (independent of 0); 2: t1 + t2 -> t3
        // (held); 3: x -> t4 (dead) takes t1's buffer after step 2 read it.
        let st = vec![
            INPUT,
            own(8, false),
            own(8, false),
            own(8, true),
            own(8, false),
        ];
        let acc = vec![
            (set(&[0]), set(&[1])),
            (set(&[0]), set(&[2])),
            (set(&[1, 2]), set(&[3])),
            (set(&[0]), set(&[4])),
        ];
        let logical = barriers(&acc);
        assert_eq!(logical, vec![false, false, true, false]);
        let a = assign(&st, &acc, &[]);
        assert!(a.of[4] == a.of[1] || a.of[4] == a.of[2], "{:?}", a.of);
        let res = resources(&a.of, &[Some((1, 0, 32))]);
        assert_eq!(
            barriers(&map_access(&acc, &res)),
            vec![false, false, true, true]
        );
    }

    #[test]
    fn sizes_must_fit_within_twice_and_existing_buffers_are_reused_or_dropped() {
        // A 100-element value then a 1-element one: the big buffer is not
        // given to the small value.
        let st = vec![INPUT, own(100, false), own(1, false), own(40, true)];
        let acc = vec![
            (set(&[0]), set(&[1])),
            (set(&[1]), set(&[2])),
            (set(&[2]), set(&[3])),
        ];
        let a = assign(&st, &acc, &[]);
        assert_eq!(a.bytes.len(), 3);
        // 40 elements in the freed 100-element buffer? 100 > 2·40: no.
        assert_ne!(a.of[3], a.of[1]);
        // Existing buffers: the one of 64 elements serves the 40; the
        // 1000-element one serves nobody and is dropped.
        let a = assign(&st, &acc, &free(&[1000, 64, 100]));
        assert_eq!(a.bytes.iter().filter(|l| **l == 1000).count(), 0);
        let i40 = a.of[3].unwrap();
        assert_eq!((a.bytes[i40], a.kept[i40]), (64, Some(1)));
        assert_eq!(a.kept[a.of[1].unwrap()], Some(2));
        assert_eq!(a.kept[a.of[2].unwrap()], None);
    }

    #[test]
    fn of_equal_buffers_the_one_given_back_longest_ago_is_taken() {
        // Steps 0, 1: b, then a, from x (both dead); step 2: c from a;
        // step 3: d (larger) from b; step 4: e from x takes a's buffer
        // (given back after step 2), not b's (after step 3, and made
        // first).
        let st = vec![
            INPUT,
            own(8, false),
            own(8, false),
            own(8, true),
            own(100, true),
        ];
        let st = [st, vec![own(8, false)]].concat();
        let acc = vec![
            (set(&[0]), set(&[1])),
            (set(&[0]), set(&[2])),
            (set(&[2]), set(&[3])),
            (set(&[1]), set(&[4])),
            (set(&[0]), set(&[5])),
        ];
        let a = assign(&st, &acc, &[]);
        assert_eq!(a.of[5], a.of[2], "{:?}", a.of);
        assert_ne!(a.of[1], a.of[2]);
    }

    #[test]
    fn a_storage_prefers_its_previous_buffer() {
        let mut st = vec![INPUT, own(8, true), own(8, true)];
        st[1].prev = Some(1);
        st[2].prev = Some(0);
        let acc = vec![(set(&[0]), set(&[1])), (set(&[0]), set(&[2]))];
        let a = assign(&st, &acc, &free(&[8, 8]));
        assert_eq!(a.kept[a.of[1].unwrap()], Some(1));
        assert_eq!(a.kept[a.of[2].unwrap()], Some(0));
    }

    #[test]
    fn a_buffer_handed_out_serves_only_its_own_storage() {
        // Buffer 0 was handed out while it held storage 3's value; storage
        // 1 (a dead value of the same size) may not take it, storage 3
        // (still held) keeps it.
        let mut st = vec![INPUT, own(8, false), own(8, false), own(8, true)];
        st[3].prev = Some(0);
        let acc = vec![
            (set(&[0]), set(&[1])),
            (set(&[1]), set(&[2])),
            (set(&[2]), set(&[3])),
        ];
        let reserved = [Existing {
            bytes: 8,
            only: Some(3),
        }];
        let a = assign(&st, &acc, &reserved);
        assert_eq!(a.kept[a.of[3].unwrap()], Some(0));
        assert!(a.of[1] != a.of[3] && a.of[2] != a.of[3]);
        // Once that storage is no longer held, nothing takes it: dropped.
        st[3].prev = None;
        let a = assign(&st, &acc, &reserved);
        assert!(a.kept.iter().all(|k| k.is_none()), "{:?}", a.kept);
    }

    #[test]
    fn overlapping_slices_of_one_buffer_are_one_resource() {
        // Storages 0..3 are slices of buffer 9: [0, 64), [64, 128),
        // [32, 96) (overlapping both) and storage 3 of buffer 5.
        let fixed = [
            Some((9, 0, 64)),
            Some((9, 64, 128)),
            Some((9, 32, 96)),
            Some((5, 0, 64)),
        ];
        let r = resources(&[None, None, None, None], &fixed);
        assert_eq!(r[0], r[1]);
        assert_eq!(r[1], r[2]);
        assert_ne!(r[0], r[3]);
        // Disjoint slices stay apart.
        let r = resources(&[None, None], &fixed[..2]);
        assert_ne!(r[0], r[1]);
    }
}
