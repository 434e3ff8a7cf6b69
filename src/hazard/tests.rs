use super::*;

fn acc(owner: usize, r: Range<u64>, write: bool) -> Access {
    Access {
        owner,
        start: r.start,
        end: r.end,
        write,
    }
}

const C: Stage = Stage::Compute;
const T: Stage = Stage::Transfer;

#[test]
fn reads_after_reads_are_free_writes_are_not() {
    let mut h = Hazards::new();
    let a = acc(0x1000, 0..64, false);
    assert_eq!(h.check(C, &a), None);
    h.note(&a, 0);
    assert_eq!(h.check(C, &a), None);
    h.note(&a, 1);
    let w = acc(0x1000, 32..40, true);
    let c = h.check(C, &w).unwrap();
    assert_eq!(c.kind, HazardKind::WriteAfterRead);
    assert_eq!((c.start, c.end), (32, 40));
    assert_eq!(c.earlier_command, 1);
    h.note(&w, 2);
    let c = h.check(T, &acc(0x1000, 0..36, false)).unwrap();
    assert_eq!(c.kind, HazardKind::ReadAfterWrite);
    assert_eq!(c.earlier_command, 2);
    assert_eq!((c.start, c.end), (32, 36));
    let c = h.check(C, &acc(0x1000, 39..100, true)).unwrap();
    assert_eq!(c.kind, HazardKind::WriteAfterWrite);
}

#[test]
fn disjoint_ranges_and_other_buffers_are_independent() {
    let mut h = Hazards::new();
    h.note(&acc(0x1000, 0..64, true), 0);
    assert_eq!(h.check(C, &acc(0x1000, 64..128, true)), None);
    assert_eq!(h.check(C, &acc(0x2000, 0..64, true)), None);
    assert!(h.check(C, &acc(0x1000, 63..64, false)).is_some());
}

#[test]
fn a_barrier_towards_one_stage_orders_only_that_stage() {
    let mut h = Hazards::new();
    let w = acc(0x1000, 0..64, true);
    h.note(&w, 0);
    h.resolve(C);
    assert_eq!(h.check(C, &w), None);
    // A transfer after it still needs its own barrier.
    assert!(h.check(T, &acc(0x1000, 0..4, false)).is_some());
    h.note(&w, 1);
    assert!(h.check(C, &w).is_some());
    h.resolve(T);
    // Both writes are ordered before transfers now; command 1's is not
    // yet ordered before compute.
    assert_eq!(h.check(T, &w), None);
    assert_eq!(h.check(C, &w).unwrap().earlier_command, 1);
    h.resolve(C);
    assert_eq!(h.check(T, &w), None);
    assert_eq!(h.check(C, &w), None);
}

#[test]
fn barriers_towards_both_stages_clear_the_table() {
    let mut h = Hazards::new();
    h.note(&acc(0x1000, 0..64, true), 0);
    h.resolve(C);
    assert_eq!(h.live, 1);
    h.resolve(T);
    assert_eq!(h.live, 0);
    assert_eq!(h.check(C, &acc(0x1000, 0..64, true)), None);
}

#[test]
fn clear_forgets_everything() {
    let mut h = Hazards::new();
    for i in 0..100 {
        h.note(&acc(0x1000 + i * 64, 0..64, true), i as u64);
    }
    h.clear();
    for i in 0..100 {
        assert_eq!(h.check(C, &acc(0x1000 + i * 64, 0..64, true)), None);
    }
    h.note(&acc(0x1000, 0..64, true), 100);
    assert!(h.check(C, &acc(0x1000, 0..64, false)).is_some());
}

#[test]
fn consecutive_slices_merge_into_one_range() {
    let mut h = Hazards::new();
    for i in 0..1000u64 {
        let a = acc(0x1000, i * 256..(i + 1) * 256, true);
        assert_eq!(h.check(C, &a), None, "slice {i}");
        h.note(&a, i);
    }
    let i = h.find(0x1000).unwrap();
    assert_eq!(h.keys[i].n, 1);
    let r = h.ranges[h.keys[i].at as usize][0];
    assert_eq!((r.start, r.end), (0, 256_000));
    let c = h.check(C, &acc(0x1000, 1000..1004, false)).unwrap();
    assert_eq!(c.earlier_command, 999);
}

#[test]
fn many_buffers_grow_the_table_and_stay_found() {
    let mut h = Hazards::new();
    for i in 0..5000usize {
        let a = acc(0x10_0000 + i * 48, 0..16, true);
        assert_eq!(h.check(C, &a), None);
        h.note(&a, i as u64);
    }
    for i in 0..5000usize {
        let c = h.check(C, &acc(0x10_0000 + i * 48, 8..9, false)).unwrap();
        assert_eq!(c.earlier_command, i as u32);
    }
}

#[test]
fn a_full_buffer_widens_never_forgets() {
    let mut h = Hazards::new();
    // Strided writes that never touch: more than RANGES of them.
    for i in 0..(RANGES as u64 * 3) {
        h.note(&acc(0x1000, i * 100..i * 100 + 10, true), i);
    }
    for i in 0..(RANGES as u64 * 3) {
        assert!(h
            .check(C, &acc(0x1000, i * 100..i * 100 + 1, false))
            .is_some());
    }
    assert!(h.keys[h.find(0x1000).unwrap()].n as usize <= RANGES);
}

#[test]
fn a_chain_keeps_one_range() {
    let mut h = Hazards::new();
    let w = acc(0x1000, 0..64, true);
    h.note(&w, 0);
    for i in 1..100 {
        assert!(h.check(C, &w).is_some());
        h.resolve(C);
        h.note(&w, i);
        assert_eq!(h.keys[h.find(0x1000).unwrap()].n, 1);
    }
}

#[test]
fn listed_accesses_of_one_command_never_conflict() {
    let mut h = Hazards::new();
    h.start();
    h.list(acc(0x1000, 0..64, false));
    h.list(acc(0x1000, 0..64, true));
    assert_eq!(h.check_listed(C), None);
    h.note_listed(0);
    h.start();
    h.list(acc(0x2000, 0..4, false));
    h.list(acc(0x1000, 8..12, false));
    let (c, j) = h.check_listed(C).unwrap();
    assert_eq!(
        (c.kind, j, h.listed_owner(j)),
        (HazardKind::ReadAfterWrite, 1, 0x1000)
    );
    // The barrier towards both stages clears the table; the listed
    // accesses are noted all the same.
    h.resolve(C);
    h.resolve(T);
    h.note_listed(1);
    assert!(h.check(C, &acc(0x2000, 0..4, true)).is_some());
    assert_eq!(h.check(C, &acc(0x1000, 0..8, true)), None);
}

#[test]
fn a_single_access_is_checked_and_noted_with_one_probe() {
    let mut h = Hazards::new();
    let w = acc(0x1000, 0..64, true);
    assert_eq!(h.track_one(C, &w, 0), None);
    assert_eq!(h.track_one(C, &acc(0x1000, 64..128, true), 1), None);
    let (c, i) = h.track_one(C, &w, 2).unwrap();
    assert_eq!(
        (c.kind, c.earlier_command),
        (HazardKind::WriteAfterWrite, 1)
    );
    h.resolve(C);
    h.resolve(T);
    // Cleared between the check and the note: noted all the same.
    h.note_one(i, &w, 2);
    assert_eq!(h.check(T, &w).unwrap().earlier_command, 2);
    assert_eq!(h.check(T, &acc(0x1000, 64..65, false)), None);
}

#[test]
fn command_indices_come_back_from_31_bits() {
    assert_eq!(command_index(10, 7), 7);
    let big = (5u64 << 31) + 3;
    assert_eq!(command_index(big, 1), big - 2);
    assert_eq!(command_index(big, CMD), big - 4);
}

#[test]
fn a_reused_table_keeps_the_accesses_listed_before_it_grew() {
    // A finished batch leaves its table (and its last command's list)
    // to the thread's next batch.
    let mut h = Hazards::new();
    h.start();
    h.list(acc(0x9000, 0..64, false));
    h.list(acc(0xA000, 0..64, true));
    assert_eq!(h.check_listed(C), None);
    h.note_listed(0);
    drop(h);
    // The next batch lists its first command's accesses before the
    // table grows (taking the spare) in the check.
    let mut h = Hazards::new();
    h.start();
    h.list(acc(0x1000, 0..64, false));
    h.list(acc(0x2000, 0..64, true));
    assert_eq!(h.check_listed(C), None);
    h.note_listed(0);
    h.start();
    h.list(acc(0x2000, 0..64, false));
    h.list(acc(0x1000, 0..64, true));
    let (c, j) = h
        .check_listed(C)
        .expect("the second command depends on the first");
    assert_eq!((c.kind, j), (HazardKind::ReadAfterWrite, 0));
    // Nothing of the earlier batch's list was noted.
    assert_eq!(h.check(C, &acc(0xA000, 0..64, true)), None);
}

#[test]
fn table_is_reused_after_drop() {
    let mut h = Hazards::new();
    for i in 0..100usize {
        h.note(&acc(0x1000 + i * 64, 0..4, true), 0);
    }
    let len = h.keys.len();
    drop(h);
    let mut h = Hazards::new();
    h.note(&acc(0x1000, 0..4, false), 0);
    assert_eq!(h.keys.len(), len);
    // Nothing of the earlier batch survives.
    assert_eq!(h.check(C, &acc(0x1040, 0..4, true)), None);
    assert!(h.check(C, &acc(0x1000, 0..4, true)).is_some());
}

#[test]
fn a_lone_first_access_builds_no_table() {
    // Whatever an earlier test on this thread left goes first.
    drop(SPARE.with(|s| s.take()));
    let w = acc(0x1000, 0..64, true);
    let mut h = Hazards::new();
    assert_eq!(h.track_one(C, &w, 0), None);
    assert!(h.keys.is_empty() && h.live == 0);
    drop(h);
    // A batch of one command left nothing to the thread's spare.
    assert!(SPARE.with(|s| {
        let m = s.take();
        let empty = m.keys.is_empty();
        s.set(m);
        empty
    }));
    // A second command still finds the first one's write.
    let mut h = Hazards::new();
    assert_eq!(h.track_one(C, &w, 0), None);
    let (c, _) = h.track_one(C, &acc(0x1000, 32..33, false), 1).unwrap();
    assert_eq!(c.kind, HazardKind::ReadAfterWrite);
    assert_eq!((c.earlier_command, c.start, c.end), (0, 32, 33));
    assert!(!h.keys.is_empty());
}

#[test]
fn the_first_access_meets_a_listed_command_and_a_barrier() {
    let mut h = Hazards::new();
    assert_eq!(h.track_one(C, &acc(0x1000, 0..64, true), 0), None);
    h.start();
    h.list(acc(0x2000, 0..64, true));
    h.list(acc(0x1000, 0..4, false));
    let (c, j) = h.check_listed(T).expect("reads what command 0 wrote");
    assert_eq!(
        (c.kind, c.earlier_command, j),
        (HazardKind::ReadAfterWrite, 0, 1)
    );
    // A requested barrier orders the held first access too.
    let mut h = Hazards::new();
    assert_eq!(h.track_one(C, &acc(0x1000, 0..64, true), 0), None);
    h.clear();
    assert_eq!(h.track_one(C, &acc(0x1000, 0..64, true), 1), None);
    assert_eq!(
        h.check(C, &acc(0x1000, 0..64, false))
            .unwrap()
            .earlier_command,
        1
    );
}
