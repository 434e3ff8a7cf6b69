//! Megakernel step mode: 1,000 dependent steps (each element of 1,024
//! updated from its neighbours' previous values) with exact results at
//! every worker count the forward-progress cap allows, and a grid over the
//! cap refused with a typed error.

mod common;
use common::*;

use vkcompute::megakernel::{
    Megakernel, MegakernelConfig, MegakernelWorkloadHints, ResidencySource,
};
use vkcompute::Error;

const N: usize = 1024;
const MODULUS: u32 = 65521;

/// Step k reads half (k & 1) and writes the other half:
/// `new[i] = (3 old[i-1] + old[i+1] + k) mod 65521` (all values exact in f32).
const STEP: &str = r#"
void run_step(uint step, uint worker, uint workers, uint lane) {
    uint src = (step & 1u) * 1024u;
    uint dst = 1024u - src;
    for (uint i = worker * MK_LOCAL_SIZE + lane; i < 1024u; i += workers * MK_LOCAL_SIZE) {
        uint l = uint(mk_data[src + ((i + 1023u) & 1023u)]);
        uint r = uint(mk_data[src + ((i + 1u) & 1023u)]);
        mk_data[dst + i] = float((3u * l + r + step) % 65521u);
    }
}
"#;

fn reference(init: &[u32], steps: u32) -> Vec<u32> {
    let mut a = init.to_vec();
    let mut b = vec![0u32; N];
    for k in 0..steps {
        for i in 0..N {
            let l = a[(i + N - 1) % N];
            let r = a[(i + 1) % N];
            b[i] = (3 * l + r + k) % MODULUS;
        }
        std::mem::swap(&mut a, &mut b);
    }
    a
}

#[test]
fn dependent_steps_exact_at_every_worker_count_within_the_cap() {
    let gpu = gpu();
    let mut rng = Rng::new(7);
    let init: Vec<u32> = (0..N)
        .map(|_| rng.below(u64::from(MODULUS)) as u32)
        .collect();
    let mut host: Vec<f32> = init.iter().map(|&v| v as f32).collect();
    host.resize(2 * N, 0.0);
    let data = gpu.upload(&host).unwrap();
    let hints = MegakernelWorkloadHints::default();
    let mut mk = Megakernel::steps(&gpu, STEP, &hints, &data).unwrap();
    let cap = mk.residency_cap(hints.workgroup_size).unwrap();
    println!(
        "residency cap: {} ({cap}), memory model: {}",
        cap.workers,
        mk.uses_memory_model()
    );
    if is_lavapipe(&gpu) {
        assert_eq!(cap.source, ResidencySource::Probed);
    }
    let steps = 1000u32;
    let want = reference(&init, steps);
    let max = if std::env::var_os("VKCOMPUTE_QUICK").is_some() {
        cap.workers.min(8)
    } else {
        cap.workers.min(32)
    };
    for workers in 1..=max {
        data.write(0, &host).unwrap();
        let c = MegakernelConfig {
            worker_count: workers,
            ..Default::default()
        };
        mk.launch_steps(&c, steps).unwrap().wait().unwrap();
        let r = mk.report().unwrap();
        assert!(!r.spin_exhausted, "{workers} workers: {r:?}");
        assert_eq!(r.workers_finished, workers);
        let got = data.read_range(0..N).unwrap();
        for i in 0..N {
            assert_eq!(got[i], want[i] as f32, "{workers} workers, element {i}");
        }
    }
    assert_clean(&gpu);
}

#[test]
fn a_grid_over_the_cap_is_a_typed_error() {
    let gpu = gpu();
    let data = gpu.upload(&vec![0f32; 2 * N]).unwrap();
    let hints = MegakernelWorkloadHints::default();
    let mut mk = Megakernel::steps(&gpu, STEP, &hints, &data).unwrap();
    let cap = mk.residency_cap(hints.workgroup_size).unwrap().workers;
    let c = MegakernelConfig {
        worker_count: cap + 1,
        ..Default::default()
    };
    match mk.launch_steps(&c, 10) {
        Err(Error::MegakernelResidency {
            requested,
            cap: got,
            source_of_cap,
        }) => {
            assert_eq!((requested, got), (cap + 1, cap));
            assert!(!source_of_cap.is_empty());
        }
        other => panic!("expected MegakernelResidency, got {other:?}"),
    }
    let c = MegakernelConfig {
        worker_count: cap,
        ..Default::default()
    };
    if cap >= 2 {
        let steps = u32::MAX / cap + 1;
        assert!(matches!(
            mk.launch_steps(&c, steps),
            Err(Error::MegakernelConfig {
                field: "steps × worker_count",
                ..
            })
        ));
    } else {
        skipped("cap of 1 worker: no steps count overflows the barrier counter");
    }
    assert_clean(&gpu);
}
