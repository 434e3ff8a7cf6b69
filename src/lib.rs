//! # vkcompute
//!
//! GPU compute on Vulkan: upload buffers, build kernels from SPIR-V or GLSL,
//! record many dispatches into a [`Batch`], submit once, and wait on a
//! [`Ticket`], with nothing allocated per dispatch and every dispatch checked
//! against the kernel's reflection and the adapter's limits.
//!
//! ```
//! use vkcompute::{Device, DeviceOptions};
//!
//! # fn main() -> vkcompute::Result<()> {
//! let gpu = Device::new()?;
//! let n = 1000u32;
//! let x: Vec<f32> = (0..n).map(|i| i as f32).collect();
//! let xs = gpu.upload(&x)?;
//! let ys = gpu.alloc::<f32>(n as usize)?;
//! let saxpy = gpu.kernel_glsl(r#"
//!     #version 450
//!     layout(local_size_x = 64) in;
//!     layout(set = 0, binding = 0) readonly buffer X { float x[]; };
//!     layout(set = 0, binding = 1) buffer Y { float y[]; };
//!     layout(push_constant) uniform P { float a; uint n; };
//!     void main() {
//!         uint i = gl_GlobalInvocationID.x;
//!         if (i < n) y[i] = a * x[i] + y[i];
//!     }
//! "#)?;
//! let mut pc = Vec::new();
//! pc.extend_from_slice(&2.0f32.to_le_bytes());
//! pc.extend_from_slice(&n.to_le_bytes());
//!
//! let mut batch = gpu.batch()?;
//! batch.run_with_push_constants(&saxpy, &[&xs, &ys], n, &pc)?;
//! batch.barrier();                                   // the second run reads y
//! batch.run_with_push_constants(&saxpy, &[&xs, &ys], n, &pc)?;
//! let ticket = batch.submit_async()?;                // one submission
//! ticket.wait()?;
//!
//! let y = ys.download()?;
//! let want: Vec<f32> = x.iter().map(|v| 4.0 * v).collect(); // 2x + 2x
//! assert_eq!(y, want);
//! # let log = gpu.validation_log();
//! # drop((xs, ys, saxpy, gpu));                       // teardown checked too
//! # assert_eq!(log.count(), 0, "{:?}", log.messages());
//! # Ok(())
//! # }
//! ```
//!
//! ## Pieces
//!
//! - [`Device`]: adapter choice ([`Device::adapters`], `VKCOMPUTE_DEVICE`),
//!   queues, memory, validation (`VKCOMPUTE_VALIDATION=1`).
//! - [`Buffer`]: typed GPU memory; [`Buffer::slice`] views; [`GpuBuf`] binds
//!   either in a dispatch.
//! - [`Kernel`]: a compute pipeline with its [`Reflection`];
//!   [`KernelBuilder`] for entry points, specialization constants and
//!   workgroup sizes.
//! - [`Batch`]: dispatches, barriers, copies and fills; [`Ticket`]: completion.
//!   [`Batch::run_with`] takes push constants as a `Pod` value, and
//!   [`bindings!`] builds a mixed binding list without casts.
//!   [`Batch::run`] covers any `u32` count of invocations along x: past
//!   `maxComputeWorkGroupCount[0]` workgroups it splits the launch into
//!   several dispatches whose kernel variants see `gl_GlobalInvocationID.x`
//!   offset (kernels reading `gl_NumWorkGroups` get
//!   [`Error::LaunchTooLarge`]); [`Batch::run_spread`] is the opt-in that
//!   spreads the grid into y and z instead.
//! - [`Graph`]: a batch recorded once ([`Device::graph_recorder`]) and
//!   launched many times, on any stream ([`Graph::launch_on`]; launches
//!   of one graph stay ordered across streams); [`CapturePool`] keeps what
//!   graphs use alive; [`Params`] are per-launch values.
//! - [`ops`]: built-in kernels (element-wise, reductions, softmax,
//!   transpose, GEMV) recorded into any batch; their SPIR-V, compiled from
//!   `shaders/` ahead of time, ships with the crate, so they need no
//!   compiler, at build time or at run time.
//! - The on-disk cache ([`DeviceOptions::cache_dir`], `VKCOMPUTE_CACHE_DIR`):
//!   the driver's pipeline cache per adapter and driver build, and compiled
//!   GLSL, so a second start skips shaderc and pipeline compilation; a
//!   corrupt or foreign file is ignored. [`Device::cache_stats`] says what
//!   it did.
//!
//! ## Ordering
//!
//! - **Within a batch**, commands may overlap unless separated by
//!   [`Batch::barrier`].
//! - **Streams.** A [`Stream`] ([`Device::stream`]) is an ordered queue of
//!   batches: each batch starts after the stream's previous batch (a
//!   GPU-side wait, no host wait). [`Device::batch`] records on the
//!   device's default stream, so plain batches keep running in submission
//!   order. Batches on different streams are not ordered against each
//!   other and may run at the same time; streams spread over the compute
//!   queues the device created (2 by default, or
//!   [`DeviceOptions::compute_queues`]: each costs device-creation time),
//!   the least used first (streams sharing a queue stay correct but may
//!   not overlap; lavapipe has one queue, so all its streams share it).
//! - **Tickets and events.** [`Batch::wait_for`] orders a batch after a
//!   [`Ticket`] from any stream or queue, on the GPU, without blocking the
//!   host or any other stream; [`Ticket::join`] and [`Ticket::join_all`]
//!   combine tickets. [`Batch::wait_event`] makes a batch wait on the GPU
//!   for a value the host sets later on an [`Event`]; an empty batch that
//!   only waits gives a ticket that completes once the host set the value.
//!   On the host, [`Event::wait_async`] / [`Event::with_deadline`] are
//!   futures of a value and [`Event::wait_timeout`] blocks.
//! - **Buffers shared by streams (the automatic wait).** When a batch uses
//!   a buffer that work on another stream or queue (the transfer queue
//!   included) also uses, and nothing above orders the two, the batch's
//!   submission waits on the GPU for that work: a command that writes the
//!   buffer waits for every earlier use of it, one that only reads waits
//!   for earlier writes. "Earlier" means submitted before; streams reading
//!   the same buffer still overlap. No host wait and no error: conflicting
//!   use is ordered by submission order, exactly as if the later batch had
//!   named the earlier one's ticket. Two threads that submit conflicting
//!   work on two streams at the same instant get one of the two orders;
//!   name a ticket to choose it.
//! - **Host access.** Host reads and writes of a buffer
//!   ([`Buffer::download`], [`Buffer::write`]) wait for the submitted work
//!   (on every queue) that uses it, so a download right after
//!   [`Batch::submit_async`] returns the batch's result. A batch waiting
//!   for an event that no one sets holds up such a host access to its
//!   buffers, and on a shared queue the later work of other streams.
//! - **Lifetimes.** A buffer, event or query pool dropped while work on any
//!   queue still uses it is released only once that work completes.
//!
//! The rule for host access: **`Buffer::write` and `Buffer::download` act
//! when they are called, on the work submitted so far; they are not
//! commands of a batch being recorded.** A long batch submits in chunks as
//! it grows ([`BatchOptions`]), so a `Buffer::write` between two `run`
//! calls of one unsubmitted batch may land before or after commands
//! recorded earlier, depending on where a chunk was cut. Host data that
//! belongs between two commands goes through the batch: [`Batch::write`]
//! and [`Batch::read`] are recorded commands, ordered exactly as recorded
//! (as if a barrier stood on each side) whatever the chunking.
//!
//! Host copies of one buffer from several threads (through clones) are
//! sound: each takes the buffer's host lock, reads shared and writes
//! exclusive, so a read sees whole writes only. Kernels that poll memory
//! the host writes while they run use [`Buffer::host_words`] instead, an
//! atomic view that neither waits for the GPU nor locks ([`HostWords`]).
//!
//! A dispatch or copy that fails half-way through recording poisons its
//! batch ([`Batch::poisoned`]): every later call returns that error and
//! nothing more is submitted. Raw Vulkan handles for interop, with the
//! rules for using them: [`Device::raw`], [`Buffer::raw`], [`Kernel::raw`].
//!
//! ## Safety
//!
//! `unsafe` appears only where Vulkan is called, each block with a
//! `// SAFETY:` note. Bad input gets a typed [`Error`], never a panic.

#![warn(missing_docs)]

// Modules by layer (src/ARCHITECTURE.md has the table, the rules and a
// dispatch walked through them; tests/layers.rs enforces it). Each layer
// imports only the layers listed before it.

// Layer 0, pure leaves: GPU-free logic, unit-tested without a device.
mod adapter;
mod barrier;
mod coopmat;
mod disk_cache;
mod element;
mod error;
#[cfg(feature = "glsl")]
mod glsl;
mod host_lock;
mod layout_class;
mod memory;
mod options;
mod policy;
mod profile;
mod reclaim;
mod reflect;
mod spirv_caps;
mod spirv_offset;
mod stats;
mod validation_log;
mod workgroups;

// Layer 1, Vulkan objects made from an `ash::Device`, with no reference
// back to the device.
mod instance;
mod pipeline_cache;
mod probe;
mod queue;
mod recorder;
mod set_cache;
mod staging;
mod waiter;
mod x_split;

// Layer 2, the device.
mod device;

// Layer 3, handles that hold the device alive.
mod async_transfer;
mod buffer;
mod event;
mod host_words;
mod interop;
mod kernel;
mod ticket;
mod ticket_future;

// Layer 4, recording and submission.
mod batch;
mod builtins;
mod copy;
mod graph;
mod stream;

// Layer 5, capabilities: never imported below, not by each other.
pub mod megakernel;
pub mod ops;

pub use adapter::{AdapterInfo, AdapterType};
pub use async_transfer::Download;
pub use batch::{Batch, BatchOptions};
pub use buffer::{BufView, Buffer, BufferSlice, GpuBuf};
pub use coopmat::{
    CoopComponent, CoopMat2Info, CoopMatFeatures, CoopMatFlexibleShape, CoopMatShape,
};
pub use device::{
    Device, DeviceOptions, DEFAULT_COMPUTE_QUEUES, ENV_COMPUTE_QUEUES, ENV_DEVICE,
    ENV_PUSH_DESCRIPTORS, ENV_VALIDATION, ENV_VALIDATION_ERRORS,
};
pub use disk_cache::{CacheStats, ENV_CACHE_DIR};
pub use error::{Error, Result};
pub use event::{Event, EventWait, MAX_EVENT_STEP};
#[cfg(feature = "glsl")]
pub use glsl::{compile_glsl, compile_glsl_with, GlslOptimization, GlslOptions, GlslTarget};
pub use graph::{CapturePool, Graph, GraphRecorder, Params, DEFAULT_PARAM_SLOTS, MAX_PARAM_SLOTS};
pub use kernel::{reflect_spirv, Kernel, KernelBuilder, SpirvInput, MAX_BINDINGS};
pub use memory::Memory;
pub use profile::{CommandTiming, Profile, Profiling};
pub use reflect::{BindingInfo, BindingKind, Reflection, SpecConstantInfo};
pub use stats::{StartupTimes, Stats};
pub use stream::Stream;
pub use ticket::Ticket;
pub use ticket_future::TicketWait;
pub use validation_log::ValidationLog;

pub use batch::host_io::Readback;
pub use host_words::HostWords;
pub use interop::{RawBuffer, RawDevice, RawKernel};

/// Re-exported so users can name the `ash` version in use.
pub use ash;
/// Re-exported so users can derive `Pod` for push constants and elements.
pub use bytemuck;
