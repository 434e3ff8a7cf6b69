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
//! assert_eq!(y[10], 40.0);                           // 2*10 + 2*10
//! # assert_eq!(gpu.validation_message_count(), 0, "{:?}", gpu.validation_messages());
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
//! - The on-disk cache ([`DeviceOptions::cache_dir`], `VKCOMPUTE_CACHE_DIR`):
//!   the driver's pipeline cache per adapter and driver build, and compiled
//!   GLSL, so a second start skips shaderc and pipeline compilation; a
//!   corrupt or foreign file is ignored. [`Device::cache_stats`] says what
//!   it did.
//!
//! ## Ordering
//!
//! Commands in a batch may overlap unless separated by [`Batch::barrier`].
//! Batches run in submission order: each waits for all work submitted
//! before it. Host reads and writes of a buffer ([`Buffer::download`],
//! [`Buffer::write`]) wait for the submitted work that uses it, so a
//! download right after [`Batch::submit_async`] returns the batch's result.
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

mod adapter;
mod barrier;
mod batch;
mod buffer;
mod copy;
mod device;
mod disk_cache;
mod error;
#[cfg(feature = "glsl")]
mod glsl;
mod instance;
mod kernel;
mod memory;
mod options;
mod pipeline_cache;
mod policy;
mod probe;
mod profile;
mod queue;
mod reclaim;
mod recorder;
mod reflect;
mod set_cache;
mod staging;
mod stats;
mod ticket;
mod transfer;
mod workgroups;

// Sound host access, interop handles and typed launches (issue 8).
mod host_lock;
mod host_words;
mod interop;

// Launches split along x past maxComputeWorkGroupCount[0].
mod spirv_offset;
mod x_split;

pub use adapter::{AdapterInfo, AdapterType};
pub use batch::{Batch, BatchOptions};
pub use buffer::{BufView, Buffer, BufferSlice, GpuBuf};
pub use device::{Device, DeviceOptions, ENV_DEVICE, ENV_PUSH_DESCRIPTORS, ENV_VALIDATION};
pub use disk_cache::{CacheStats, ENV_CACHE_DIR};
pub use error::{Error, Result};
#[cfg(feature = "glsl")]
pub use glsl::{compile_glsl, compile_glsl_with, GlslOptimization, GlslOptions};
pub use kernel::{reflect_spirv, Kernel, KernelBuilder, SpirvInput, MAX_BINDINGS};
pub use memory::Memory;
pub use profile::{CommandTiming, Profile, Profiling};
pub use reflect::{BindingInfo, BindingKind, Reflection, SpecConstantInfo};
pub use stats::{StartupTimes, Stats};
pub use ticket::Ticket;

pub use batch::host_io::Readback;
pub use host_words::HostWords;
pub use interop::{RawBuffer, RawDevice, RawKernel};

/// Re-exported so users can name the `ash` version in use.
pub use ash;
/// Re-exported so users can derive `Pod` for push constants and elements.
pub use bytemuck;
