//! A property of the op batch (proptest): a random program of element-wise
//! ops (unary, binary, in place on inputs and intermediates), row biases,
//! matmuls and matvecs, transposes, reductions, softmaxes and the
//! transformer norms, over imported buffers (some of them views of one
//! shared buffer at 16-byte-aligned offsets), some inputs f16 or bf16 with
//! element-wise ops on them and casts among the three types, views that
//! copy nothing (reshapes to ranks 1 to 4, row slices, permutes, selects;
//! element-wise ops on them, in place too, writing the memory they view)
//! and `contiguous` copies, gives what an
//! f64 CPU interpreter gives (within allowances derived op by op, rounding
//! to the 16-bit types where the GPU rounds, see
//! `op_batch_props/reference.rs`):
//!
//! - executed with fusion on, and with fusion off;
//! - finished into a graph and launched three times, fresh random inputs
//!   written into the imported buffers before each launch (the in-place
//!   ops apply again to whatever they hold), each launch's results
//!   checked against the interpreter on that launch's inputs;
//! - executed once more after the launches (the graph's plan and buffers).
//!
//! Every tensor the test holds is checked (a random subset of the slots is
//! dropped after recording, so fusion can keep those in registers), and
//! the final contents of every imported buffer (in-place ops write the
//! user's memory). A failure shrinks and prints the smallest program as a
//! listing (`sN` = slot N, with its shape and whether it was held).
//!
//! `VKCOMPUTE_PROPTEST_CASES` sets the number of programs (default 1024,
//! 256 with `VKCOMPUTE_QUICK`); the programs come from a fixed seed, so runs
//! repeat (`VKCOMPUTE_PROPTEST_SEED`, a u64, draws others).
//!
//! This property found fused kernels whose optimizer stripped bindings the
//! op batch still passed, so the dispatch failed: groups that computed
//! values nothing needed (`fused_groups_with_dead_values_run`), and a chain
//! the optimizer folded (`a_fused_kernel_whose_optimizer_folds_a_binding_away_runs`).

mod common;

#[path = "op_batch_props/program.rs"]
mod program;
#[path = "op_batch_props/reference.rs"]
mod reference;
#[path = "op_batch_props/shrink.rs"]
mod shrink;
#[path = "op_batch_props/views.rs"]
mod views;

use proptest::test_runner::{Config, RngAlgorithm, TestError, TestRng, TestRunner};
use vkcompute::ops::{Bf16, Binary, DType, OpBatch, OpBatchOptions, Shape, Tensor, Unary, F16};
use vkcompute::{Buffer, Device, Error};

use program::{Input, Program, Step};
use reference::{interpret, UnaryFn, Val};

fn cases() -> u32 {
    if let Some(n) = std::env::var("VKCOMPUTE_PROPTEST_CASES")
        .ok()
        .and_then(|v| v.trim().parse().ok())
    {
        return n;
    }
    let quick = std::env::var("VKCOMPUTE_QUICK").is_ok_and(|v| !v.is_empty() && v != "0");
    if quick {
        256
    } else {
        1024
    }
}

/// The runner's random source: fixed, or from `VKCOMPUTE_PROPTEST_SEED`
/// (a u64) to explore other programs.
fn rng() -> TestRng {
    match std::env::var("VKCOMPUTE_PROPTEST_SEED")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
    {
        Some(seed) => {
            let bytes: Vec<u8> = (0..4u64)
                .flat_map(|i| seed.wrapping_mul(2 * i + 1).to_le_bytes())
                .collect();
            TestRng::from_seed(RngAlgorithm::ChaCha, &bytes)
        }
        None => TestRng::deterministic_rng(RngAlgorithm::ChaCha),
    }
}

/// An input's own buffer, of its element type.
enum Own {
    F32(Buffer<f32>),
    F16(Buffer<F16>),
    Bf16(Buffer<Bf16>),
}

/// The imported buffers of a program: a buffer per input that has its
/// own, and one buffer holding every view at an aligned offset.
struct Memory {
    own: Vec<Option<Own>>,
    shared: Option<Buffer<f32>>,
    offsets: Vec<usize>,
}

impl Memory {
    fn new(gpu: &Device, p: &Program) -> vkcompute::Result<Memory> {
        let align = (gpu.info().min_storage_buffer_offset_alignment.max(16) / 4) as usize;
        let mut end = 0;
        let mut offsets = Vec::new();
        let mut own = Vec::new();
        for inp in &p.inputs {
            let n = inp.shape.numel() as usize;
            if inp.view {
                offsets.push(end);
                end = (end + n).div_ceil(align) * align;
                own.push(None);
            } else {
                offsets.push(0);
                own.push(Some(match inp.dtype {
                    DType::F16 => Own::F16(gpu.alloc(n)?),
                    DType::Bf16 => Own::Bf16(gpu.alloc(n)?),
                    _ => Own::F32(gpu.alloc(n)?),
                }));
            }
        }
        let shared = if end > 0 {
            Some(gpu.alloc::<f32>(end)?)
        } else {
            None
        };
        Ok(Memory {
            own,
            shared,
            offsets,
        })
    }

    /// Input `i`'s f32 buffer and first element (views, and f32 inputs of
    /// their own).
    fn place(&self, i: usize) -> (&Buffer<f32>, usize) {
        match &self.own[i] {
            Some(Own::F32(b)) => (b, 0),
            Some(_) => panic!("input {i} is a 16-bit buffer"),
            None => (
                self.shared.as_ref().expect("views have a shared buffer"),
                self.offsets[i],
            ),
        }
    }

    /// Writes each input's values (after every launch that uses them).
    fn write(&self, data: &[Vec<f32>]) -> vkcompute::Result<()> {
        for (i, d) in data.iter().enumerate() {
            match &self.own[i] {
                Some(Own::F16(b)) => {
                    b.write(0, &d.iter().map(|&v| F16::from_f32(v)).collect::<Vec<_>>())?
                }
                Some(Own::Bf16(b)) => {
                    b.write(0, &d.iter().map(|&v| Bf16::from_f32(v)).collect::<Vec<_>>())?
                }
                _ => {
                    let (buf, at) = self.place(i);
                    buf.write(at, d)?;
                }
            }
        }
        Ok(())
    }

    /// Input `i`'s buffer, widened to f32.
    fn read(&self, i: usize, len: usize) -> vkcompute::Result<Vec<f32>> {
        match &self.own[i] {
            Some(Own::F16(b)) => Ok(b.download()?.into_iter().map(F16::to_f32).collect()),
            Some(Own::Bf16(b)) => Ok(b.download()?.into_iter().map(Bf16::to_f32).collect()),
            _ => {
                let (buf, at) = self.place(i);
                buf.read_range(at..at + len)
            }
        }
    }
}

/// Random inputs in [-1, 1], each a value of its input's type.
fn random_inputs(p: &Program, rng: &mut common::Rng) -> Vec<Vec<f32>> {
    p.inputs
        .iter()
        .map(|inp| {
            let v = rng.vec_f32(inp.shape.numel() as usize);
            v.into_iter()
                .map(|x| reference::round(inp.dtype, f64::from(x)) as f32)
                .collect()
        })
        .collect()
}

/// Records `p` into `ops`: one tensor per slot.
fn record(ops: &mut OpBatch, p: &Program, mem: &Memory) -> vkcompute::Result<Vec<Tensor>> {
    let mut t: Vec<Tensor> = Vec::new();
    for step in &p.steps {
        let made = match *step {
            Step::Import(i) => {
                let Input { shape, view, .. } = p.inputs[i];
                let (r, c) = (shape.rows(), shape.cols());
                let matrix = matches!(shape, Shape::Matrix(..));
                match &mem.own[i] {
                    Some(Own::F16(b)) => {
                        t.push(if matrix {
                            ops.import_matrix_as(b, r, c)?
                        } else {
                            ops.import_as(b)?
                        });
                        continue;
                    }
                    Some(Own::Bf16(b)) => {
                        t.push(if matrix {
                            ops.import_matrix_as(b, r, c)?
                        } else {
                            ops.import_as(b)?
                        });
                        continue;
                    }
                    _ => {}
                }
                let (buf, at) = mem.place(i);
                let n = shape.numel() as usize;
                Some(match (view, shape) {
                    (false, Shape::Vector(_)) => ops.import(buf)?,
                    (false, Shape::Matrix(r, c)) => ops.import_matrix(buf, r, c)?,
                    (true, Shape::Vector(_)) => ops.import_slice(&buf.slice(at..at + n)?)?,
                    (true, Shape::Matrix(r, c)) => {
                        ops.import_slice_matrix(&buf.slice(at..at + n)?, r, c)?
                    }
                    (false, other) => ops.import_shaped(buf, other)?,
                    (true, other) => {
                        let flat = ops.import_slice(&buf.slice(at..at + n)?)?;
                        ops.reshape(&flat, other)?
                    }
                })
            }
            Step::Unary { f, x, in_place } => {
                if in_place {
                    ops.unary_(f, &t[x])?;
                    None
                } else {
                    Some(ops.unary(f, &t[x])?)
                }
            }
            Step::Binary { g, a, b, in_place } => {
                if in_place {
                    ops.binary_(g, &t[a], &t[b])?;
                    None
                } else {
                    Some(ops.binary(g, &t[a], &t[b])?)
                }
            }
            Step::AddRow { a, bias, in_place } => {
                if in_place {
                    ops.add_row_(&t[a], &t[bias])?;
                    None
                } else {
                    Some(ops.add_row(&t[a], &t[bias])?)
                }
            }
            Step::Matmul { a, b } => Some(ops.matmul(&t[a], &t[b])?),
            Step::Matvec { a, x } => Some(ops.matvec(&t[a], &t[x])?),
            Step::Transpose(x) => Some(ops.transpose(&t[x])?),
            Step::Sum(x) => Some(ops.sum(&t[x])?),
            Step::Max(x) => Some(ops.max(&t[x])?),
            Step::Dot(a, b) => Some(ops.dot(&t[a], &t[b])?),
            Step::Softmax(x) => Some(ops.softmax(&t[x])?),
            Step::CausalSoftmax { x, q_len } => Some(ops.causal_softmax(&t[x], q_len)?),
            Step::RmsNorm { x, w, eps } => Some(ops.rms_norm(&t[x], &t[w], eps)?),
            Step::LayerNorm { x, w, b, eps } => Some(ops.layer_norm(&t[x], &t[w], &t[b], eps)?),
            Step::SiluMul { gate, up } => Some(ops.silu_mul(&t[gate], &t[up])?),
            Step::Cast { x, to } => Some(ops.cast(&t[x], to)?),
            Step::Reshape { x, to } => Some(ops.reshape(&t[x], to)?),
            Step::SliceRows { x, start, len } => Some(ops.slice_rows(&t[x], start, len)?),
            Step::Permute { x, axes } => {
                let r = t[x].shape().rank();
                let axes: Vec<usize> = axes[..r].iter().map(|&a| usize::from(a)).collect();
                Some(ops.permute(&t[x], &axes)?)
            }
            Step::Select { x, dim, index } => Some(ops.select(&t[x], usize::from(dim), index)?),
            Step::Contiguous(x) => Some(ops.contiguous(&t[x])?),
        };
        t.extend(made);
    }
    Ok(t)
}

/// Compares `got` (slot `slot`) with the reference; names the first
/// elements outside their allowance.
fn compare(what: &str, slot: usize, shape: Shape, got: &[f32], want: &Val) -> Result<(), String> {
    if got.len() != want.v.len() {
        return Err(format!(
            "{what}: s{slot} {shape}: {} elements read, {} expected",
            got.len(),
            want.v.len()
        ));
    }
    let bad: Vec<String> = (0..got.len())
        .filter(|&i| {
            let g = f64::from(got[i]);
            !g.is_finite() || (g - want.v[i]).abs() > want.e[i]
        })
        .map(|i| {
            format!(
                "element {i}: got {}, want {} ± {:.3e}",
                got[i], want.v[i], want.e[i]
            )
        })
        .collect();
    if bad.is_empty() {
        return Ok(());
    }
    Err(format!(
        "{what}: s{slot} {shape}: {} of {} elements wrong; {}",
        bad.len(),
        got.len(),
        bad.iter().take(4).cloned().collect::<Vec<_>>().join("; ")
    ))
}

/// Checks every held slot (read from the op batch) and every input's
/// buffer (its final value) against `want`.
fn check(
    what: &str,
    ops: &OpBatch,
    held: &[Option<Tensor>],
    mem: &Memory,
    p: &Program,
    want: &[Val],
) -> Result<(), String> {
    let err = |e: vkcompute::Error| format!("{what}: {e}");
    for (s, w) in want.iter().enumerate() {
        if let Some(i) = p.input_of[s] {
            let got = mem.read(i, w.v.len()).map_err(err)?;
            compare(&format!("{what} (in{i}'s buffer)"), s, p.shapes[s], &got, w)?;
        }
        if let Some(t) = &held[s] {
            let got = ops.read(t).map_err(err)?;
            compare(what, s, p.shapes[s], &got, w)?;
        }
    }
    Ok(())
}

/// The property on one program: fused and unfused executes, then three
/// graph launches with new inputs, all equal to the reference (with
/// `unary` as its unary ops), and no validation message.
fn property(gpu: &Device, p: &Program, unary: UnaryFn) -> Result<(), String> {
    let messages = gpu.validation_message_count();
    let mem = Memory::new(gpu, p).map_err(|e| format!("allocating the inputs: {e}"))?;
    let mut rng = common::Rng::new(p.seed);
    let data = random_inputs(p, &mut rng);
    let want = interpret(p, &data, unary);
    let mut fused_batch = None;
    for fused in [true, false] {
        let what = if fused {
            "execute, fusion on"
        } else {
            "execute, fusion off"
        };
        let err = |e: vkcompute::Error| format!("{what}: {e}");
        mem.write(&data).map_err(err)?;
        let mut ops = gpu.ops_with(OpBatchOptions::default().with_fusion(fused));
        let tensors = record(&mut ops, p, &mem).map_err(err)?;
        let held: Vec<Option<Tensor>> = tensors
            .into_iter()
            .zip(&p.keep)
            .map(|(t, &k)| k.then_some(t))
            .collect();
        ops.execute_blocking().map_err(err)?;
        check(what, &ops, &held, &mem, p, &want)?;
        if fused {
            fused_batch = Some((ops, held));
        }
    }
    let (mut ops, held) = fused_batch.expect("the fused op batch ran first");
    let graph = match ops.graph() {
        Ok(graph) => graph,
        // Fusion dropped every step (all values dead): nothing to launch.
        Err(Error::EmptyGraph) if ops.num_dispatches() == Some(0) => {
            return no_messages(gpu, messages)
        }
        Err(e) => return Err(format!("graph(): {e}")),
    };
    for launch in 1..=3 {
        let what = format!("graph launch {launch}");
        let err = |e: vkcompute::Error| format!("{what}: {e}");
        let data = random_inputs(p, &mut rng);
        mem.write(&data).map_err(err)?;
        graph.launch().and_then(|t| t.wait()).map_err(err)?;
        check(&what, &ops, &held, &mem, p, &interpret(p, &data, unary))?;
    }
    // An execute after the launches: the graph's plan and buffers again.
    let what = "execute after the launches";
    let err = |e: vkcompute::Error| format!("{what}: {e}");
    let data = random_inputs(p, &mut rng);
    mem.write(&data).map_err(err)?;
    ops.execute_blocking().map_err(err)?;
    check(what, &ops, &held, &mem, p, &interpret(p, &data, unary))?;
    drop((graph, held, ops, mem));
    no_messages(gpu, messages)
}

/// Fails if the validation layer reported anything past the first
/// `before` messages.
fn no_messages(gpu: &Device, before: usize) -> Result<(), String> {
    if gpu.validation_message_count() > before {
        let all = gpu.validation_messages();
        return Err(format!(
            "validation messages:\n{}",
            all[before..].join("\n---\n")
        ));
    }
    Ok(())
}

#[test]
fn random_programs_fused_unfused_and_graph_launches_equal_the_f64_reference() {
    let gpu = common::gpu();
    let mut runner = TestRunner::new_with_rng(
        Config {
            cases: cases(),
            failure_persistence: None,
            max_shrink_iters: 2048,
            ..Config::default()
        },
        rng(),
    );
    let result = runner.run(&program::programs(), |p| {
        property(&gpu, &p, reference::unary).map_err(proptest::test_runner::TestCaseError::fail)
    });
    match result {
        Ok(()) => {}
        Err(TestError::Fail(why, p)) => {
            // Proptest shrinks the raw choices; removing whole steps
            // shrinks further (a removal shifts the choices' meaning).
            let (p, why) = p.minimise(why.to_string(), &mut |q| {
                property(&gpu, q, reference::unary).err()
            });
            panic!("the op batch disagrees with the f64 reference: {why}\nminimal {p:?}")
        }
        Err(e) => panic!("{e}"),
    }
    common::assert_clean(&gpu);
}

/// A reference whose sigmoid is tanh: the property must reject it.
fn wrong_unary(f: Unary, x: f64) -> f64 {
    match f {
        Unary::Sigmoid => x.tanh(),
        other => reference::unary(other, x),
    }
}

#[test]
fn the_property_fails_against_a_wrong_reference() {
    let gpu = common::gpu();
    let x = Input {
        shape: Shape::Vector(7),
        view: true,
        dtype: DType::F32,
    };
    let p = program::fixed(
        &[x],
        &[Step::Unary {
            f: Unary::Sigmoid,
            x: 0,
            in_place: false,
        }],
        5,
    );
    property(&gpu, &p, reference::unary).expect("the right reference agrees");
    let err = property(&gpu, &p, wrong_unary).expect_err("tanh for sigmoid must be caught");
    assert!(
        err.contains("execute, fusion on: s1 [7]"),
        "the first check names the fused execute's result: {err}"
    );
}

#[test]
fn a_fixed_program_with_every_kind_of_step_agrees() {
    let gpu = common::gpu();
    let input = |shape, view| Input {
        shape,
        view,
        dtype: DType::F32,
    };
    let inputs = [
        input(Shape::Matrix(5, 7), false), // s0
        input(Shape::Matrix(7, 3), true),  // s1
        input(Shape::Vector(3), true),     // s2
        input(Shape::Vector(7), true),     // s3
    ];
    let un = |f, x, in_place| Step::Unary { f, x, in_place };
    let steps = [
        Step::Matmul { a: 0, b: 1 }, // s4 [5×3]
        Step::AddRow {
            a: 4,
            bias: 2,
            in_place: true,
        },
        un(Unary::Gelu, 4, false), // s5
        Step::Binary {
            g: Binary::Axpy(-0.5),
            a: 0,
            b: 0,
            in_place: true,
        },
        Step::RmsNorm {
            x: 5,
            w: 2,
            eps: 1e-5,
        }, // s6 [5×3]
        Step::LayerNorm {
            x: 0,
            w: 3,
            b: 3,
            eps: 1e-3,
        }, // s7 [5×7]
        Step::Softmax(7),                       // s8
        Step::CausalSoftmax { x: 6, q_len: 1 }, // s9
        Step::Transpose(0),                     // s10 [7×5]
        Step::Matvec { a: 0, x: 3 },            // s11 [5]
        Step::SiluMul { gate: 5, up: 6 },       // s12
        Step::Sum(12),                          // s13
        Step::Max(8),                           // s14
        Step::Dot(11, 11),                      // s15
        un(Unary::Sigmoid, 2, true),
        un(Unary::Scale(1.5), 11, true),
    ];
    let p = program::fixed(&inputs, &steps, 9);
    property(&gpu, &p, reference::unary).unwrap_or_else(|e| panic!("{e}\n{p:?}"));
}

/// f16 and bf16 inputs through element-wise ops (in place too), casts
/// among the three types fused with them, and f32-only ops after a cast:
/// every value checked against the reference, which rounds where the GPU
/// rounds (casts of exact values bit for bit).
#[test]
fn a_fixed_program_with_sixteen_bit_steps_agrees() {
    let gpu = common::gpu();
    let i = gpu.info();
    if !(i.float16 && i.storage_buffer16) {
        common::skipped("the adapter lacks shaderFloat16 + storageBuffer16BitAccess");
        return;
    }
    let input = |shape, dtype| Input {
        shape,
        view: false,
        dtype,
    };
    let inputs = [
        input(Shape::Matrix(4, 6), DType::F16),  // s0
        input(Shape::Matrix(4, 6), DType::F16),  // s1
        input(Shape::Vector(6), DType::F16),     // s2
        input(Shape::Matrix(4, 6), DType::Bf16), // s3
        input(Shape::Matrix(4, 6), DType::F32),  // s4
    ];
    let bin = |g, a, b, in_place| Step::Binary { g, a, b, in_place };
    let un = |f, x, in_place| Step::Unary { f, x, in_place };
    let cast = |x, to| Step::Cast { x, to };
    let steps = [
        bin(Binary::Add, 0, 1, false), // s5 f16
        un(Unary::Gelu, 5, false),     // s6 f16
        Step::AddRow {
            a: 6,
            bias: 2,
            in_place: true,
        },
        cast(6, DType::F32),                 // s7
        cast(4, DType::Bf16),                // s8 (exact input: bit for bit)
        bin(Binary::Mul, 8, 3, false),       // s9 bf16
        bin(Binary::Axpy(-1.5), 3, 9, true), // s3 in place
        cast(9, DType::F16),                 // s10
        cast(0, DType::Bf16),                // s11
        un(Unary::Scale(0.25), 1, true),     // s1 in place
        Step::Sum(7),                        // s12
        Step::Softmax(7),                    // s13
        un(Unary::Sigmoid, 10, false),       // s14 f16
        cast(14, DType::F32),                // s15
    ];
    let p = program::fixed(&inputs, &steps, 17);
    property(&gpu, &p, reference::unary).unwrap_or_else(|e| panic!("{e}\n{p:?}"));
    let mut dropped = p.clone();
    for s in [5, 6, 8, 9, 14] {
        dropped.keep[s] = false;
    }
    property(&gpu, &dropped, reference::unary).unwrap_or_else(|e| panic!("{e}\n{dropped:?}"));
}

/// `p` with slots `dropped` no longer held when it executes.
fn dropping(mut p: Program, dropped: &[usize]) -> Program {
    for &s in dropped {
        p.keep[s] = false;
    }
    p
}

/// Found by the property: a fused run whose values nobody holds or reads
/// was still generated, and the compiler stripped the bindings only dead
/// values used, so the dispatch failed ("kernel \"vkcompute fused
/// relu+relu\" expects 0 buffer bindings, got 1"). Likewise a run with one
/// dead branch, a matmul epilogue that is all dead, a matmul epilogue that
/// does not need the matmul ("vkcompute fused matmul+relu\" expects 2
/// buffer bindings, got 4"), and a reduction prologue with a dead branch.
#[test]
fn fused_groups_with_dead_values_run() {
    let gpu = common::gpu();
    let own = |shape| Input {
        shape,
        view: false,
        dtype: DType::F32,
    };
    let un = |f, x| Step::Unary {
        f,
        x,
        in_place: false,
    };
    let mul = |a, b| Step::Binary {
        g: Binary::Mul,
        a,
        b,
        in_place: false,
    };
    let v = Shape::Vector(8);
    let (a, b) = (Shape::Matrix(17, 19), Shape::Matrix(19, 17));
    let programs = [
        // s1 = relu(s0), s2 = relu(s1), both dropped.
        (
            "a dead run",
            program::fixed(&[own(v)], &[un(Unary::Relu, 0), un(Unary::Relu, 1)], 1),
            vec![1, 2],
        ),
        // s3 = mul(s2, s1) dropped: s1 is read only by a dead value.
        (
            "a run with a dead branch",
            program::fixed(&[own(v), own(v)], &[un(Unary::Relu, 0), mul(2, 1)], 2),
            vec![3],
        ),
        // s2 = matmul(s0, s1), s3 = relu(s2), s4 = tanh(s3), all dropped.
        (
            "a dead matmul epilogue",
            program::fixed(
                &[own(a), own(b)],
                &[
                    Step::Matmul { a: 0, b: 1 },
                    un(Unary::Relu, 2),
                    un(Unary::Tanh, 3),
                ],
                3,
            ),
            vec![2, 3, 4],
        ),
        // s1 = matmul(s0, s0) dropped, relu_(s1), s2 = relu(s0): the
        // epilogue computes s2 only.
        (
            "a matmul epilogue that needs no matmul",
            program::fixed(
                &[own(Shape::Matrix(14, 14))],
                &[
                    Step::Matmul { a: 0, b: 0 },
                    Step::Unary {
                        f: Unary::Relu,
                        x: 1,
                        in_place: true,
                    },
                    un(Unary::Relu, 0),
                ],
                5,
            ),
            vec![1],
        ),
        // s2 = relu(s0), s3 = mul(s0, s1) dropped, s4 = sum(s2).
        (
            "a reduction prologue with a dead branch",
            program::fixed(
                &[own(v), own(v)],
                &[un(Unary::Relu, 0), mul(0, 1), Step::Sum(2)],
                4,
            ),
            vec![2, 3],
        ),
    ];
    let mut failed = Vec::new();
    for (what, p, dropped) in programs {
        let p = dropping(p, &dropped);
        if let Err(e) = property(&gpu, &p, reference::unary) {
            failed.push(format!("{what}: {e}\n{p:?}"));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

/// Found by the property: the epilogue `s4 = s2 + (s3 - s2)` (with `s3`
/// the matmul's result) is folded by the GLSL optimizer to `s3`, which
/// strips `s2`'s binding, and the dispatch passed a buffer the kernel no
/// longer declared ("kernel \"vkcompute fused matmul+sub+add\" expects 3
/// buffer bindings, got 4").
#[test]
fn a_fused_kernel_whose_optimizer_folds_a_binding_away_runs() {
    let gpu = common::gpu();
    let own = |shape| Input {
        shape,
        view: false,
        dtype: DType::F32,
    };
    let p = program::fixed(
        &[
            own(Shape::Matrix(3, 2)),
            own(Shape::Matrix(2, 3)),
            own(Shape::Matrix(3, 3)),
        ],
        &[
            Step::Matmul { a: 0, b: 1 }, // s3
            Step::Binary {
                g: Binary::Sub,
                a: 3,
                b: 2,
                in_place: true,
            },
            Step::Binary {
                g: Binary::Add,
                a: 2,
                b: 3,
                in_place: false,
            }, // s4
        ],
        6,
    );
    let p = dropping(p, &[0, 2, 3]);
    property(&gpu, &p, reference::unary).unwrap_or_else(|e| panic!("{e}\n{p:?}"));
}
