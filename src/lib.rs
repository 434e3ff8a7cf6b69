//! # vkcompute
//!
//! GPU compute on Vulkan: upload buffers, build kernels from SPIR-V (any
//! toolchain's), GLSL or WGSL (feature `wgsl`), record many dispatches into
//! a [`Batch`], submit once, and wait on a [`Ticket`], with nothing
//! allocated per dispatch and every dispatch checked against the kernel's
//! reflection and the adapter's limits.
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
//! ## Without the `glsl` feature
//!
//! The default `glsl` feature compiles GLSL at run time through shaderc
//! (linked statically with glslang and SPIRV-Tools). Built with
//! `default-features = false` the crate needs no shaderc; the built-in
//! kernels ([`ops`], the copy kernel) keep working (their SPIR-V is
//! compiled when the crate is built). What is unavailable:
//!
//! - `Device::kernel_glsl`, `KernelBuilder::glsl` / `glsl_with`,
//!   `compile_glsl` / `compile_glsl_with` and `GlslOptions`,
//!   `GlslOptimization`, `GlslTarget` do not exist: build kernels from
//!   SPIR-V ([`Kernel::from_spirv`], [`Device::kernel_spirv`],
//!   [`KernelBuilder::spirv`]).
//! - The op batch does not fuse (`ops::OpBatchOptions::fusion` has no
//!   effect): every op runs as its built-in kernel, with the same results.
//! - SPIR-V is not run through the SPIRV-Tools validator: the header and
//!   structure checks remain, so a module with, say, an id past its bound
//!   reaches the driver.
//! - The megakernel, task, step and resident modes alike, compiles its GLSL
//!   template with the user's GLSL: `Megakernel::tasks` / `steps` and
//!   `ResidentMegakernel::start` return
//!   [`Error::Megakernel`]`(`[`megakernel::MegakernelError::NeedsGlsl`]`)`.
//!   Its plain parts (configuration, validation, launch policy, task slots)
//!   remain.
//! - The on-disk cache keeps the driver's pipeline cache only (its compiled
//!   GLSL half has nothing to hold).
//!
//! `scripts/test.sh` builds the library this way and runs the tests that
//! need no runtime GLSL (the others name `glsl` in `required-features`).
//!
//! ## Ordering
//!
//! - **Within a batch**, barriers are found, not guessed: with
//!   [`BatchOptions::auto_barriers`] (on by default) the batch tracks the
//!   byte ranges each command reads and writes (a kernel's bindings by its
//!   reflection, a copy's source and destination, a fill's and a host
//!   write's destination) and records the narrowest barrier before a
//!   command that reads what an earlier command wrote, or writes what one
//!   read or wrote, with no barrier between them; independent commands
//!   overlap. [`Batch::barrier`] still orders everything before it against
//!   everything after it, and is never doubled; with automatic barriers
//!   off it is the only ordering. [`Batch::barrier_log`] (with
//!   [`BatchOptions::record_plan`]) lists the barriers recorded and why.
//!   Memory the commands reach other than through their bindings (a
//!   buffer device address) is not tracked: order it with
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
//! - **A batch is one unit of its stream, whatever its chunking.** A
//!   batch takes its place in the stream when it first submits: its first
//!   chunk (a long batch submits chunks as it grows, [`BatchOptions`]) or
//!   its whole self. While a batch that took its place earlier is still
//!   open (it submitted chunks and was neither submitted nor dropped), a
//!   later batch of the same stream is *held back*: what it submits is
//!   queued, in order, and reaches the queue when the open batch ends (its
//!   submit, or its drop: a dropped batch's submitted chunks stay
//!   submitted), submitted by the thread that ends it. No semaphore wait
//!   is involved, so this holds on one queue (lavapipe) as on many, and no
//!   other stream waits. A held-back batch's [`Ticket`] gets its value
//!   when the batch reaches the queue: [`Ticket::wait`] (and
//!   [`Stream::synchronize`], futures, [`Batch::wait_for`] from another
//!   stream) waits on the host until then, and returns
//!   [`Error::BatchHeldOpen`] at once when the open batch holding it back
//!   belongs to the calling thread (the wait could never end);
//!   [`Ticket::is_ready`] is false meanwhile. Host access to a buffer a
//!   held-back batch uses ([`Buffer::download`], [`Buffer::write`]) waits
//!   or fails the same way, then waits for the GPU as usual. Internal work
//!   on a stream counts as batches: [`Batch::write`], [`Batch::upload`] and
//!   op-batch executes record into a batch; a graph launch (with its
//!   [`Params`] copies) is a whole batch that waits on the host for the
//!   stream's open batch to end ([`Error::BatchHeldOpen`] on that batch's
//!   thread). ("Belongs to" means: the thread that last submitted a chunk
//!   of it.) Uploads of new buffers ([`Device::upload`]) use no stream.
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
//! when they are called, on the work submitted so far (held-back batches
//! included, see above); they are not
//! commands of a batch being recorded.** A long batch submits in chunks as
//! it grows ([`BatchOptions`]), so a `Buffer::write` between two `run`
//! calls of one unsubmitted batch may land before or after commands
//! recorded earlier, depending on where a chunk was cut. Host data that
//! belongs between two commands goes through the batch: [`Batch::write`]
//! and [`Batch::read`] are recorded commands, ordered exactly as recorded
//! (against the commands that touch the same bytes; with automatic
//! barriers off, as if a barrier stood on each side) whatever the
//! chunking.
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
//! ## Cargo features
//!
//! - `glsl` (default): GLSL compiled at run time through shaderc
//!   ([`Device::kernel_glsl`], [`KernelBuilder::glsl`], `compile_glsl`), the
//!   SPIRV-Tools validator run on every module, and the op batch's fusion
//!   (generated kernels). shaderc is linked statically from the system's
//!   archives (`libshaderc-dev`, `glslang-dev`, `spirv-tools` on Debian and
//!   Ubuntu; `VKCOMPUTE_SHADERC_LIB_DIR` names another folder). Without it
//!   kernels come from SPIR-V ([`Kernel::from_spirv`]) and every built-in
//!   op still runs: their SPIR-V ships with the crate.
//!
//! ## Portability and set-up errors
//!
//! The instance lists portability drivers (MoltenVK on macOS) where the
//! loader offers `VK_KHR_portability_enumeration`, and a device that lists
//! `VK_KHR_portability_subset` is created with it enabled
//! ([`AdapterInfo::portability_subset`]). What vkcompute's optional
//! capabilities need is a table ([`Capability`]), checked where each is
//! first used and by [`Device::require`]: a device without it gives
//! [`Error::MissingFeature`] naming the feature and what to use instead.
//! A missing loader, no driver (or one that fails to load) and a missing
//! validation layer are [`Error::Loader`], [`Error::NoAdapter`] and
//! [`Error::ValidationLayerMissing`], whose text says what to install on
//! the platform the program runs on.
//!
//! ## Safety
//!
//! `unsafe` appears only where Vulkan is called, each block with a
//! `// SAFETY:` note. Bad input gets a typed [`Error`], never a panic.

#![warn(missing_docs)]
// docs.rs builds with `--cfg docsrs` (Cargo.toml's metadata) and marks
// feature-gated items.
#![cfg_attr(docsrs, feature(doc_cfg))]

/// The README's first program, run as a doc test so that it keeps working.
#[cfg(all(doctest, feature = "glsl"))]
#[doc = include_str!("../README.md")]
pub struct ReadmeProgram;

// Modules by layer (src/ARCHITECTURE.md has the table, the rules and a
// dispatch walked through them; tests/layers.rs enforces it). Each layer
// imports only the layers listed before it.

// Layer 0, pure leaves: GPU-free logic, unit-tested without a device.
mod adapter;
mod barrier;
mod chunking;
mod coopmat;
mod disk_cache;
mod element;
mod error;
#[cfg(feature = "glsl")]
mod glsl;
mod hazard;
mod host_lock;
mod install_hint;
mod layout_class;
mod memory;
mod options;
mod pace;
mod portability;
mod profile;
mod reclaim;
mod reflect;
mod requirements;
mod spirv_caps;
mod spirv_compat;
mod spirv_offset;
mod stats;
mod validation_log;
#[cfg(feature = "wgsl")]
mod wgsl;
mod workgroups;

// Layer 1, Vulkan objects made from an `ash::Device`, with no reference
// back to the device.
mod instance;
mod pipeline_cache;
mod pipeline_stats;
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
mod buffer;
mod event;
mod interop;
mod kernel;
mod ticket;
mod ticket_future;

// Layer 4, recording and submission.
mod batch;
mod builtins;
mod graph;
mod stream;

// Layer 5, capabilities: never imported below, not by each other.
pub mod megakernel;
pub mod ops;

pub use adapter::{AdapterInfo, AdapterType};
pub use batch::{Batch, BatchOptions};
pub use buffer::async_transfer::Download;
pub use buffer::{BufView, Buffer, BufferSlice, GpuBuf};
pub use coopmat::{
    CoopComponent, CoopMat2Info, CoopMatFeatures, CoopMatFlexibleShape, CoopMatShape,
};
pub use device::{
    Device, DeviceOptions, DEFAULT_COMPUTE_QUEUES, ENV_COMPUTE_QUEUES, ENV_DEVICE,
    ENV_PIPELINE_STATISTICS, ENV_PUSH_DESCRIPTORS, ENV_VALIDATION, ENV_VALIDATION_ERRORS,
};
pub use disk_cache::{CacheStats, ENV_CACHE_DIR};
pub use error::{Error, Result};
pub use event::{Event, EventWait, MAX_EVENT_STEP};
#[cfg(feature = "glsl")]
#[cfg_attr(docsrs, doc(cfg(feature = "glsl")))]
pub use glsl::{compile_glsl, compile_glsl_with, GlslOptimization, GlslOptions, GlslTarget};
pub use graph::{CapturePool, Graph, GraphRecorder, Params, DEFAULT_PARAM_SLOTS, MAX_PARAM_SLOTS};
pub use hazard::{BarrierCause, HazardKind, PlannedBarrier};
pub use kernel::{reflect_spirv, Kernel, KernelBuilder, SpirvInput, MAX_BINDINGS};
pub use memory::Memory;
pub use pipeline_stats::{ExecutableStatistics, Statistic, StatisticValue};
pub use profile::{CommandTiming, Profile, Profiling};
pub use reflect::{BindingInfo, BindingKind, Reflection, SpecConstantInfo};
pub use requirements::Capability;
pub use stats::{StartupTimes, Stats};
pub use stream::Stream;
pub use ticket::Ticket;
pub use ticket_future::TicketWait;
pub use validation_log::ValidationLog;
#[cfg(feature = "wgsl")]
pub use wgsl::compile_wgsl;

pub use batch::host_io::Readback;
pub use buffer::host_words::HostWords;
pub use interop::{RawBuffer, RawDevice, RawKernel};

/// Re-exported so users can name the `ash` version in use.
pub use ash;
/// Re-exported so users can derive `Pod` for push constants and elements.
pub use bytemuck;
