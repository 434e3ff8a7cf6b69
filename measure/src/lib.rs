//! vkcompute's measurement code, shared by the root package's benches
//! (`benches/`), this crate's programs (`measure/examples/`), the report's
//! rule tests (`tests/measure_rules.rs`) and the peers (`peers/`, wgpu and
//! scry-gpu on the same workloads).
//!
//! - [`floor`]: the driver floor, the benches' dispatch workloads in
//!   minimal hand-written ash, so vkcompute's figures read as ratios to
//!   what the driver itself costs;
//! - [`bandwidth`]: saxpy, copy and host-transfer workloads;
//! - [`startup`]: `Device::new` plus 12 kernels in a fresh process, cold and
//!   warm, beside [`startup_floor`] (instance and device alone);
//! - [`rules`]: pure rules the report follows (chunking, saxpy launch
//!   shape), unit-tested by `tests/measure_rules.rs`;
//! - [`cuda_ref`]: reading the CUDA references' JSON output;
//! - [`probe`]: the kernel probes' inputs and interleaved timing rounds;
//! - [`spin`]: a long xorshift kernel and its CPU answer (tests, streams).
//!
//! The programs, each timing vkcompute beside a floor, a reference (CUDA,
//! PyTorch) or a goal, every timed result checked:
//!
//! | program | what it times |
//! | --- | --- |
//! | `gpu_report/` | dispatch, round trip, bandwidth and startup beside the floor and CUDA: the report's table |
//! | `matmul/` | TFLOP/s of every matmul path and the default's rule, beside cuBLAS |
//! | `ffn_stack` | a stack of transformer FFN blocks (`ops::linear`) at Qwen3-4B's shape, beside PyTorch |
//! | `ops` | bandwidth of the built-in ops, beside PyTorch's |
//! | `op_batch` | the op batch fused and unfused, and its cold and warm start-up |
//! | `transfer_bandwidth` | host ↔ device transfers, blocking and async, beside PyTorch's |
//! | `record_profile` | recording many dispatches, a target for CPU profilers |
//! | `host_access` | what soundness costs: recording through the poison check, host copies under the host lock, host writes in a batch |
//! | `graph` | graph launches beside the floor's pre-recorded submits |
//! | `streams` | a short batch's time while another stream runs a long kernel |
//! | `async_tokio` | ticket futures under tokio: wake-up latency, the waiter's idle CPU |
//! | `multi_gpu` | saxpy and a dependent chain sharded over every adapter |
//! | `megakernel` | persistent-kernel steps and tasks beside a chain of dispatches |
//! | `megakernel_resident` | a task pushed into a running kernel beside the floor's mailbox |
//! | `cm2_probe` | SPIR-V builds of the coopmat2 f16 matmul kernel (other blocks, invocations, launch orders) beside the built-in default |
//! | `linear_probe` | SPIR-V builds of the skinny linear kernel (rows per unit and pass, chunks per step, prefetch, butterfly, narrowed launches) beside the built-in kernels |
//! | `stream_floor` | the simplest read kernel streaming buffers through a chain of dependent launches: the floor of a model's layers, per size or in a layer's pattern |
//! | `barrier_floor` | the floor's chain of tiny dependent dispatches under each form of dependency (pipeline barriers, synchronization2, buffer barrier, by-region, events), beside no dependency |
//! | `kernel_statistics` | the driver's pipeline statistics (registers, spills, occupancy) of the built-in matmul and linear kernels, or of SPIR-V files |
//! | `attn_probe` | decode attention at Qwen3-4B's shapes and the lengths a decode meets |
//! | `prefill_attn` | causal prefill attention at Qwen3-4B's shape, f32 and f16 (the tensor-core kernel), beside PyTorch's SDPA |
//! | `roundtrip_profile` | one-dispatch round trips through named functions, a target for callgrind |
//!
//! `cargo run --release -p vkcompute-measure --example NAME -- ARGS` (each
//! program's top comment lists its arguments); `VKCOMPUTE_QUICK=1` shrinks
//! the workloads (lavapipe, CI). The examples that teach the crate are the
//! root package's `examples/`.
//!
//! Not published: a workspace member that the root package's benches and
//! tests build as a dev-dependency.

#![warn(missing_docs)]

#[cfg(feature = "glsl")]
pub mod bandwidth;
pub mod cuda_ref;
#[cfg(feature = "glsl")]
pub mod floor;
pub mod probe;
pub mod rules;
pub mod spin;
#[cfg(feature = "glsl")]
pub mod startup;
pub mod startup_floor;
