use super::*;

fn shape(batch: u32, q_heads: u32, kv_heads: u32, head_dim: u32, max_seq: u32) -> DecodeShape {
    DecodeShape {
        batch,
        q_heads,
        kv_heads,
        head_dim,
        max_seq,
    }
}

#[test]
fn long_caches_keep_the_query_heads_of_a_kv_head_together() {
    // Qwen3-4B and Llama 3 8B: 32 q heads over 8 kv heads, head_dim 128,
    // on an adapter that does not report its compute units (the target of
    // 512, as in every test of this file but the last): 8 head groups, 64
    // chunks: 512 workgroups.
    for max_seq in [4096, 8192] {
        assert_eq!(
            plan(shape(1, 32, 8, 128, max_seq), 0),
            Plan {
                group: 4,
                slices: 1,
                chunks: 64
            }
        );
    }
    // Four sequences: 16 chunks are enough.
    assert_eq!(plan(shape(4, 32, 8, 128, 4096), 0).chunks, 16);
    // 16 queries of 256 floats exceed 2048: slices of at most 8; two
    // slices of 8 over 128 chunks give 256 workgroups, four of 4 give 512.
    let p = plan(shape(1, 16, 1, 256, 8192), 0);
    assert_eq!((p.group, p.slices, p.chunks), (4, 4, 128));
    // A ratio past 16 is sliced; the last slice is partial.
    let p = plan(shape(1, 20, 1, 64, 1 << 16), 0);
    assert_eq!((p.group, p.slices, p.chunks), (16, 2, 256));
    // No grouped query: one head per workgroup.
    let p = plan(shape(1, 8, 8, 128, 4096), 0);
    assert_eq!((p.group, p.slices, p.chunks), (1, 1, 64));
}

#[test]
fn short_caches_split_the_query_heads_and_the_sequence_finely() {
    // 64 positions: one chunk, so the 4 heads of a group split.
    assert_eq!(
        plan(shape(1, 32, 8, 128, 64), 0),
        Plan {
            group: 1,
            slices: 4,
            chunks: 1
        }
    );
    // 300 positions, 8 heads per kv head: 5 chunks x 4 head groups, even
    // at 8 slices (160 workgroups), stay under 512: one head each.
    let p = plan(shape(1, 32, 4, 80, 300), 0);
    assert_eq!((p.group, p.slices, p.chunks), (1, 8, 5));
    // The halving rounds up: 3 heads -> 2 -> 1.
    let p = plan(shape(1, 3, 1, 64, 16), 0);
    assert_eq!((p.group, p.slices, p.chunks), (1, 3, 1));
    // Enough sequences keep the group whole.
    let p = plan(shape(64, 32, 8, 128, 16), 0);
    assert_eq!((p.group, p.slices, p.chunks), (4, 1, 1));
    assert_eq!(plan(shape(1, 1, 1, 72, 65), 0).chunks, 2);
}

#[test]
fn the_span_grows_with_the_length_and_covers_it() {
    for chunks in [1, 4, 64, 256] {
        for len in (0..5000).step_by(7) {
            let s = span(len, chunks);
            let n = active_chunks(len, chunks);
            assert!(s >= MIN_SPAN, "{len} {chunks}");
            assert!(n <= chunks, "{len} {chunks}: {n} active");
            // The active chunks cover [0, len) and each starts below len.
            assert!(n * s >= len && (n == 0 || (n - 1) * s < len));
        }
    }
    // Qwen3-4B at 4096 positions of capacity (64 chunks, 8 head groups):
    // 8, 64 and 504 active workgroups at lengths 3, 512 and 4000 (a chunk
    // spans at least one 64-position tile).
    let p = plan(shape(1, 32, 8, 128, 4096), 0);
    let wgs = |len| active_chunks(len, p.chunks) * 8 * p.slices;
    assert_eq!((wgs(3), wgs(512), wgs(4000)), (8, 64, 504));
    assert_eq!(span(4000, 64), 64);
    assert_eq!(span(8000, 64), 125);
    assert_eq!(active_chunks(0, 64), 0);
}

#[test]
fn the_target_is_one_wave_of_the_compute_units() {
    assert_eq!(target_workgroups(0, 4), FALLBACK_WORKGROUPS);
    assert_eq!(target_workgroups(132, 4), 264);
    assert_eq!(target_workgroups(132, 8), 264);
    assert_eq!(target_workgroups(132, 16), 132);
    assert_eq!(target_workgroups(132, 2), 396);
    assert_eq!(target_workgroups(132, 1), 396);
    assert_eq!(target_workgroups(u32::MAX, 1), u32::MAX);
    // Qwen3-4B on 132 units: the 4 heads of a kv head stay together and 33
    // chunks fill the 264 slots; after 4000 tokens each chunk walks two
    // tiles (122 positions) and all 264 workgroups run in one wave.
    for max_seq in [4096, 8192] {
        let p = plan(shape(1, 32, 8, 128, max_seq), 132);
        assert_eq!((p.group, p.slices, p.chunks), (4, 1, 33));
    }
    assert_eq!(span(4000, 33), 122);
    assert_eq!(active_chunks(4000, 33) * 8, 264);
    // A cache of 640 positions: one head a workgroup (4 x 8 x 10 = 320
    // workgroups fit the 396 slots of the one-head kernel), one tile each.
    let p = plan(shape(1, 32, 8, 128, 640), 132);
    assert_eq!((p.group, p.slices, p.chunks), (1, 4, 10));
    // 1600 positions: two heads (2 x 8 x 25 = 400 >= 396).
    let p = plan(shape(1, 32, 8, 128, 1600), 132);
    assert_eq!((p.group, p.slices, p.chunks), (2, 2, 25));
    // Sixteen query heads on one kv head: a wave of 132 workgroups of 16.
    let p = plan(shape(1, 16, 1, 128, 1 << 16), 132);
    assert_eq!((p.group, p.slices, p.chunks), (16, 1, 132));
    // Sixteen sequences: 128 kv heads, three chunks.
    let p = plan(shape(16, 32, 8, 128, 4096), 132);
    assert_eq!((p.group, p.slices, p.chunks), (4, 1, 3));
}

#[test]
fn the_attention_tests_group_cases_take_several_tiles() {
    // tests/ops_nn_attention.rs's cases for groups of 4 and 3 heads on an
    // adapter that does not report its units (lavapipe): 8 chunks over
    // 600 positions, so a sequence of 600 gives each chunk 75 positions,
    // past one tile of 64 (the tile loop's second pass).
    for (q_heads, group) in [(32, 4), (24, 3)] {
        let p = plan(shape(8, q_heads, 8, 32, 600), 0);
        assert_eq!((p.group, p.slices, p.chunks), (group, 1, 8));
        assert_eq!(span(600, p.chunks), 75);
    }
}
