//! Property tests (proptest, deterministic seed, modest case counts so the
//! file runs in a few seconds on lavapipe):
//!
//! - random byte strings, and mutations of valid SPIR-V modules (flipped
//!   bits, replaced, inserted and deleted words, truncations), through
//!   `reflect_spirv` and `Kernel::from_spirv`: never a panic; reflection
//!   either succeeds or returns `InvalidSpirv`, `EntryPointNotFound` or
//!   `UnsupportedShader`, and `Kernel::from_spirv` rejects what reflection
//!   rejects, with the same variant, before any Vulkan object is made;
//! - random dispatch shapes (invocations over all of `u32` through `run`,
//!   3-D grids through `run_configured`, random push-constant lengths and
//!   binding counts): recorded exactly when the shape is valid, else the
//!   typed error with the right fields; small valid ones are submitted and
//!   their results checked.
//!
//! Reflection validates modules with SPIRV-Tools (the `glsl` feature links
//! it): this test found a module with a result id past the header's bound
//! that spirq accepted and that crashed the Khronos validation layer
//! (1.3.239) in `vkCreateShaderModule`. Mutants that reflection accepts are
//! built on a second validated device, so the main one shows that rejected
//! input creates nothing; both must stay free of validation messages.

mod common;
use common::*;

use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};

use std::cell::RefCell;

use vkcompute::{compile_glsl, reflect_spirv, BatchOptions, Error, GpuBuf, Kernel};

/// Modules to mutate: bindings of both kinds, push constants, a
/// specialized workgroup size, specialization constants.
const SOURCES: [&str; 3] = [
    r#"
#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) readonly buffer X { float x[]; };
layout(set = 0, binding = 1) buffer Y { float y[]; };
layout(push_constant) uniform P { float a; uint n; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
"#,
    r#"
#version 450
layout(local_size_x_id = 3, local_size_y = 2) in;
layout(constant_id = 0) const float SCALE = 1.0;
layout(constant_id = 1) const bool NEG = false;
layout(set = 0, binding = 1) uniform U { vec4 u; };
layout(set = 0, binding = 0) writeonly buffer O { float o[]; };
void main() {
    uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * 1024u;
    float v = u.x * SCALE * float(gl_WorkGroupSize.x);
    if (i < o.length()) o[i] = NEG ? -v : v;
}
"#,
    r#"
#version 450
layout(local_size_x = 1) in;
layout(set = 0, binding = 0) buffer C { uint c[]; };
void main() { atomicAdd(c[0], 1u); }
"#,
];

/// Writes idx + 1 at each linear index below n (the formula
/// `Batch::run_spread` documents for grids spread into y and z).
const INDEX: &str = r#"
#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) buffer O { uint o[]; };
layout(push_constant) uniform P { uint n; };
void main() {
    uint idx = gl_GlobalInvocationID.x
             + gl_GlobalInvocationID.y * (gl_NumWorkGroups.x * gl_WorkGroupSize.x)
             + gl_GlobalInvocationID.z * (gl_NumWorkGroups.x * gl_WorkGroupSize.x * gl_NumWorkGroups.y);
    if (idx < n) o[idx] = idx + 1u;
}
"#;

/// Counts invocations (c[0]) and workgroups (c[1]); workgroups of 4 x 2.
const COUNT: &str = r#"
#version 450
layout(local_size_x = 4, local_size_y = 2) in;
layout(set = 0, binding = 0) buffer C { uint c[]; };
void main() {
    atomicAdd(c[0], 1u);
    if (gl_LocalInvocationIndex == 0u) atomicAdd(c[1], 1u);
}
"#;

/// Elements the INDEX output holds: runs of up to this many are submitted.
const SMALL_N: u32 = 4096;
/// Grids of up to this many workgroups are submitted.
const SMALL_GRID: u64 = 512;

fn runner(cases: u32) -> TestRunner {
    TestRunner::new_with_rng(
        Config {
            cases,
            failure_persistence: None,
            ..Config::default()
        },
        TestRng::deterministic_rng(RngAlgorithm::ChaCha),
    )
}

fn to_bytes(words: &[u32]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

/// One change to a module.
#[derive(Debug, Clone)]
enum Mutation {
    FlipBit { at: usize, bit: u32 },
    Replace { at: usize, word: u32 },
    Insert { at: usize, word: u32 },
    Delete { at: usize },
    TruncateWords { len: usize },
    TruncateBytes { len: usize },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    // Indices are taken modulo the module's length when applied.
    prop_oneof![
        (any::<usize>(), 0u32..32).prop_map(|(at, bit)| Mutation::FlipBit { at, bit }),
        (any::<usize>(), any::<u32>()).prop_map(|(at, word)| Mutation::Replace { at, word }),
        (any::<usize>(), any::<u32>()).prop_map(|(at, word)| Mutation::Insert { at, word }),
        any::<usize>().prop_map(|at| Mutation::Delete { at }),
        any::<usize>().prop_map(|len| Mutation::TruncateWords { len }),
        any::<usize>().prop_map(|len| Mutation::TruncateBytes { len }),
    ]
}

fn apply(words: &[u32], ms: &[Mutation]) -> Vec<u8> {
    let mut w = words.to_vec();
    let mut cut_bytes = None;
    for m in ms {
        let n = w.len().max(1);
        match *m {
            Mutation::FlipBit { at, bit } => {
                if let Some(x) = w.get_mut(at % n) {
                    *x ^= 1 << bit;
                }
            }
            Mutation::Replace { at, word } => {
                if let Some(x) = w.get_mut(at % n) {
                    *x = word;
                }
            }
            Mutation::Insert { at, word } => w.insert(at % (w.len() + 1), word),
            Mutation::Delete { at } => {
                if !w.is_empty() {
                    w.remove(at % n);
                }
            }
            Mutation::TruncateWords { len } => w.truncate(len % n),
            Mutation::TruncateBytes { len } => cut_bytes = Some(len),
        }
    }
    let mut b = to_bytes(&w);
    if let Some(len) = cut_bytes {
        b.truncate(len % (b.len() + 1));
    }
    b
}

/// What went in: random bytes, random words after a valid header, or a
/// mutated valid module.
fn input(modules: Vec<Vec<u32>>) -> impl Strategy<Value = Vec<u8>> {
    let header = to_bytes(&modules[0][..5]);
    let n = modules.len();
    prop_oneof![
        1 => proptest::collection::vec(any::<u8>(), 0..256),
        1 => proptest::collection::vec(any::<u32>(), 0..64).prop_map(move |tail| {
            let mut b = header.clone();
            b.extend(to_bytes(&tail));
            b
        }),
        4 => (0..n, proptest::collection::vec(mutation(), 1..4))
            .prop_map(move |(i, ms)| apply(&modules[i], &ms)),
    ]
}

/// Reflection's allowed outcomes.
fn reflection_ok(r: &Result<vkcompute::Reflection, Error>) -> bool {
    matches!(
        r,
        Ok(_)
            | Err(Error::InvalidSpirv { .. }
                | Error::EntryPointNotFound { .. }
                | Error::UnsupportedShader { .. })
    )
}

fn same_variant(a: &Error, b: &Error) -> bool {
    std::mem::discriminant(a) == std::mem::discriminant(b)
}

#[derive(Default, Debug)]
struct SpirvTally {
    cases: u32,
    rejected: u32,
    accepted: u32,
    built: u32,
    refused_after_reflection: u32,
}

#[test]
fn spirv_bytes_and_mutations_never_panic() {
    let gpu = gpu();
    // Mutants that reflection accepts are built here.
    let sandbox = gpu_with(Default::default());
    let modules: Vec<Vec<u32>> = SOURCES.iter().map(|s| compile_glsl(s).unwrap()).collect();
    for m in &modules {
        reflect_spirv(m, None).unwrap();
    }
    let tally = RefCell::new(SpirvTally::default());
    let start = std::time::Instant::now();
    let result = runner(3000).run(&input(modules), |bytes| {
        let mut tally = tally.borrow_mut();
        tally.cases += 1;
        let r = reflect_spirv(bytes.as_slice(), None);
        prop_assert!(reflection_ok(&r), "reflect_spirv: {r:?}");
        let main = reflect_spirv(bytes.as_slice(), Some("main"));
        prop_assert!(reflection_ok(&main), "reflect_spirv main: {main:?}");
        match r {
            Err(e) => {
                tally.rejected += 1;
                // Rejected before any Vulkan object exists.
                let before = gpu.stats();
                let k = Kernel::from_spirv(&gpu, bytes.as_slice());
                match &k {
                    Err(k) if same_variant(k, &e) => {}
                    other => {
                        return Err(TestCaseError::fail(format!(
                            "reflection said {e:?}, from_spirv {other:?}"
                        )))
                    }
                }
                prop_assert_eq!(gpu.stats(), before);
            }
            Ok(refl) => {
                tally.accepted += 1;
                match Kernel::from_spirv(&sandbox, bytes.as_slice()) {
                    Ok(k) => {
                        tally.built += 1;
                        prop_assert_eq!(k.reflection(), &refl);
                    }
                    Err(
                        Error::WorkgroupSizeLimit { .. }
                        | Error::KernelLimit { .. }
                        | Error::SpecConstant { .. },
                    ) => {}
                    Err(Error::Vulkan { call, .. }) => {
                        tally.refused_after_reflection += 1;
                        prop_assert!(call.starts_with("vkCreate"), "{call}");
                    }
                    Err(e) => {
                        return Err(TestCaseError::fail(format!(
                            "reflection accepted, from_spirv returned {e:?}"
                        )))
                    }
                }
            }
        }
        Ok(())
    });
    let tally = tally.into_inner();
    println!("{tally:?} in {:.2?}", start.elapsed());
    if let Err(e) = result {
        panic!("{e}");
    }
    assert!(tally.rejected > 100 && tally.accepted > 0, "{tally:?}");
    assert_eq!(gpu.cached_kernels(), 0);
    assert_eq!(
        tally.refused_after_reflection, 0,
        "invalid SPIR-V reached Vulkan"
    );
    assert_clean(&sandbox);
    assert_clean(&gpu);
}

#[derive(Debug, Clone)]
struct RunShape {
    invocations: u32,
    pc_len: usize,
    bindings: usize,
}

fn run_shape() -> impl Strategy<Value = RunShape> {
    let invocations = prop_oneof![
        2 => 0..=SMALL_N,
        1 => Just(0u32),
        1 => any::<u32>(),
        1 => prop_oneof![Just(u32::MAX), Just(u32::MAX - 63), Just(1 << 31)],
    ];
    let pc_len = prop_oneof![6 => Just(4usize), 1 => 0usize..=16];
    let bindings = prop_oneof![6 => Just(1usize), 1 => 0usize..=3];
    (invocations, pc_len, bindings).prop_map(|(invocations, pc_len, bindings)| RunShape {
        invocations,
        pc_len,
        bindings,
    })
}

#[derive(Debug, Clone)]
struct GridShape {
    grid: [u32; 3],
    pc: Option<usize>,
}

fn grid_shape(limit: [u32; 3]) -> impl Strategy<Value = GridShape> {
    let dim = move |d: usize| {
        let l = limit[d];
        prop_oneof![
            6 => 1u32..=8,
            1 => Just(0u32),
            1 => prop_oneof![Just(l - 1), Just(l), Just(l.saturating_add(1))],
            1 => any::<u32>(),
        ]
    };
    let pc =
        prop_oneof![6 => Just(None), 1 => Just(Some(0usize)), 1 => (1usize..=8).prop_map(Some)];
    (dim(0), dim(1), dim(2), pc).prop_map(|(x, y, z, pc)| GridShape {
        grid: [x, y, z],
        pc,
    })
}

#[derive(Default, Debug)]
struct ShapeTally {
    recorded: u32,
    submitted: u32,
    rejected: u32,
}

/// What `run` must do with a shape: Ok(grid workgroups) or the error.
fn expected_run(s: &RunShape, limit: [u32; 3]) -> Result<u64, &'static str> {
    if s.invocations == 0 {
        return Err("EmptyDispatch");
    }
    let groups = u64::from(s.invocations).div_ceil(64);
    let cap: u64 = limit.iter().map(|&l| u64::from(l)).product();
    if groups > cap {
        return Err("WorkgroupLimit");
    }
    if s.bindings != 1 {
        return Err("BindingCount");
    }
    if s.pc_len != 4 {
        return Err("PushConstantSize");
    }
    Ok(groups)
}

fn expected_grid(s: &GridShape, limit: [u32; 3]) -> Result<u64, &'static str> {
    if s.grid.contains(&0) {
        return Err("EmptyDispatch");
    }
    if s.grid.iter().zip(limit).any(|(&g, l)| g > l) {
        return Err("WorkgroupLimit");
    }
    if s.pc.unwrap_or(0) != 0 {
        return Err("PushConstantSize");
    }
    Ok(s.grid.iter().map(|&g| u64::from(g)).product())
}

fn name(e: &Error) -> &'static str {
    match e {
        Error::EmptyDispatch { .. } => "EmptyDispatch",
        Error::WorkgroupLimit { .. } => "WorkgroupLimit",
        Error::BindingCount { .. } => "BindingCount",
        Error::PushConstantSize { .. } => "PushConstantSize",
        _ => "other",
    }
}

#[test]
fn random_dispatch_shapes_are_recorded_or_rejected() {
    let gpu = gpu();
    let limit = gpu.info().max_workgroup_count;
    let index = gpu.kernel_glsl(INDEX).unwrap();
    let count = gpu.kernel_glsl(COUNT).unwrap();
    let out = gpu.alloc::<u32>(SMALL_N as usize + 64).unwrap();
    let spare = gpu.alloc::<u32>(16).unwrap();
    let counters = gpu.alloc::<u32>(2).unwrap();
    let start = std::time::Instant::now();

    let t = RefCell::new(ShapeTally::default());
    let result = runner(300).run(&run_shape(), |s| {
        let mut t = t.borrow_mut();
        let n = s.invocations;
        let pc = {
            let mut v = n.to_le_bytes().to_vec();
            v.resize(s.pc_len, 0);
            v
        };
        let all: [&dyn GpuBuf; 3] = [&out, &spare, &counters];
        let bufs = &all[..s.bindings];
        let want = expected_run(&s, limit);
        // A single submission: what is not submitted is only recorded.
        let mut b = gpu.batch_with(BatchOptions::single_submit()).unwrap();
        b.fill(&out, 0).unwrap();
        b.barrier();
        let got = b.run_spread(&index, bufs, n, &pc).map(|_| ());
        match (&want, got) {
            (Err(w), Err(e)) => {
                prop_assert_eq!(*w, name(&e), "{:?}", e);
                match e {
                    Error::EmptyDispatch { workgroups, .. } => {
                        prop_assert_eq!(workgroups, [0, 0, 0])
                    }
                    Error::WorkgroupLimit { limit: l, .. } => prop_assert_eq!(l, limit),
                    Error::BindingCount { expected, got, .. } => {
                        prop_assert_eq!((expected, got), (1, s.bindings))
                    }
                    Error::PushConstantSize { expected, got, .. } => {
                        prop_assert_eq!((expected, got), (4, s.pc_len))
                    }
                    _ => {}
                }
                t.rejected += 1;
            }
            (Ok(_), Ok(())) => {
                t.recorded += 1;
                if n <= SMALL_N {
                    b.submit().unwrap();
                    t.submitted += 1;
                    let o = out.download().unwrap();
                    for (i, &v) in o.iter().enumerate() {
                        let w = if (i as u32) < n { i as u32 + 1 } else { 0 };
                        prop_assert_eq!(v, w, "element {} of a run of {}", i, n);
                    }
                }
            }
            (w, g) => {
                return Err(TestCaseError::fail(format!(
                    "{s:?}: expected {w:?}, got {g:?}"
                )))
            }
        }
        Ok(())
    });
    let t = t.into_inner();
    println!("run: {t:?}");
    if let Err(e) = result {
        panic!("{e}");
    }
    assert!(t.submitted > 50 && t.rejected > 50, "{t:?}");

    let t = RefCell::new(ShapeTally::default());
    let result = runner(300).run(&grid_shape(limit), |s| {
        let mut t = t.borrow_mut();
        let want = expected_grid(&s, limit);
        let pc = s.pc.map(|n| vec![0u8; n]);
        let mut b = gpu.batch_with(BatchOptions::single_submit()).unwrap();
        b.zero(&counters).unwrap();
        b.barrier();
        let got = b
            .run_configured(&count, &[&counters], s.grid, pc.as_deref())
            .map(|_| ());
        match (&want, got) {
            (Err(w), Err(e)) => {
                prop_assert_eq!(*w, name(&e), "{:?}", e);
                match e {
                    Error::EmptyDispatch { workgroups, .. } => prop_assert_eq!(workgroups, s.grid),
                    Error::WorkgroupLimit {
                        requested,
                        limit: l,
                        ..
                    } => {
                        prop_assert_eq!(requested, s.grid.map(u64::from));
                        prop_assert_eq!(l, limit);
                    }
                    Error::PushConstantSize { expected, got, .. } => {
                        prop_assert_eq!((expected, Some(got)), (0, s.pc))
                    }
                    _ => {}
                }
                t.rejected += 1;
            }
            (Ok(groups), Ok(())) => {
                t.recorded += 1;
                if *groups <= SMALL_GRID {
                    b.submit().unwrap();
                    t.submitted += 1;
                    let c = counters.download().unwrap();
                    prop_assert_eq!(c, vec![*groups as u32 * 8, *groups as u32]);
                }
            }
            (w, g) => {
                return Err(TestCaseError::fail(format!(
                    "{s:?}: expected {w:?}, got {g:?}"
                )))
            }
        }
        Ok(())
    });
    let t = t.into_inner();
    println!("run_configured: {t:?}; both in {:.2?}", start.elapsed());
    if let Err(e) = result {
        panic!("{e}");
    }
    assert!(t.submitted > 50 && t.rejected > 50, "{t:?}");
    drop((out, spare, counters));
    assert_clean(&gpu);
}
