//! The report's pure rules (`measure/src/rules.rs`): chunking of a
//! chained batch, and the saxpy launch shape from adapter limits; and the
//! names of the floor's barrier kinds (`measure/src/floor/barriers.rs`).

use vkcompute_measure::rules;

use rules::{chunk_lengths, saxpy_shape, SAXPY_WAVES};

#[test]
fn chunks_double_up_to_the_cap_and_cover_n() {
    let c = chunk_lengths(1000, 16, 128);
    assert_eq!(c.iter().sum::<usize>(), 1000);
    assert_eq!(c[..5], [16, 32, 64, 128, 128]);
    assert!(c.iter().all(|&l| l <= 128 && l > 0));
    assert_eq!(chunk_lengths(20, 16, 128), vec![16, 4]);
    assert_eq!(chunk_lengths(1000, 0, 0), vec![1000]);
    assert_eq!(chunk_lengths(5, 8, 4), vec![5]);
}

#[test]
fn saxpy_shape_covers_the_machine_then_loops() {
    // An H200: 132 SMs × 2048 resident invocations, 16 Mi vec4s.
    let n4 = 16u64 << 20;
    let (g, ilp) = saxpy_shape(132, 2048, u32::MAX >> 1, 256, n4);
    assert_eq!(u64::from(g), 132 * 8 * SAXPY_WAVES);
    assert_eq!(ilp, 2, "each invocation loops: two loads per trip");
    // Small work: one vec4 per invocation, no loop.
    assert_eq!(saxpy_shape(132, 2048, u32::MAX >> 1, 256, 1000), (4, 1));
    // No machine figures (lavapipe): the grid the work needs.
    assert_eq!(saxpy_shape(0, 0, 65535, 256, 1 << 20), (4096, 1));
    // The adapter's grid limit caps it.
    assert_eq!(saxpy_shape(0, 0, 65535, 256, 1 << 30), (65535, 1));
    // Never zero.
    assert_eq!(saxpy_shape(0, 0, 65535, 256, 0), (1, 1));
}

use vkcompute_measure::startup_floor;

#[test]
fn the_startup_floor_chooses_the_adapter_as_named() {
    use startup_floor::choose;
    let names = ["llvmpipe (LLVM 15)".to_string(), "NVIDIA H200".to_string()];
    let discrete = [false, true];
    assert_eq!(choose(None, &names, &discrete), Some(1));
    assert_eq!(choose(Some("llvm"), &names, &discrete), Some(0));
    assert_eq!(choose(Some("nvidia"), &names, &discrete), Some(1));
    assert_eq!(choose(Some("0"), &names, &discrete), Some(0));
    assert_eq!(choose(Some("7"), &names, &discrete), None);
    assert_eq!(choose(Some("amd"), &names, &discrete), None);
    assert_eq!(choose(None, &names[..1], &[false]), Some(0));
    assert_eq!(choose(None, &[], &[]), None);
}

// The floor (and its barrier kinds) builds with the `glsl` feature only.
#[cfg(feature = "glsl")]
#[test]
fn barrier_kinds_parse_back_and_name_their_needs() {
    use vkcompute_measure::floor::barriers::BarrierKind;
    for k in BarrierKind::ALL {
        assert_eq!(BarrierKind::parse(k.name()), Some(k), "{k:?}");
        let sync2 = matches!(k, BarrierKind::Sync2 | BarrierKind::Event2);
        assert_eq!(k.needs_sync2(), sync2, "{k:?}");
        assert_eq!(k.orders_memory(), k != BarrierKind::ExecOnly, "{k:?}");
    }
    assert_eq!(BarrierKind::parse("none"), None);
    assert_eq!(BarrierKind::parse("Global"), None);
}
