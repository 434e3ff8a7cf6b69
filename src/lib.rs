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
pub mod ops;
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

// Cooperative-matrix support (matmul's tensor-core path).
mod coopmat;
pub use coopmat::{CoopComponent, CoopMatShape};

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

/// Re-exported so users can name the `ash` version in use.
pub use ash;
/// Re-exported so users can derive `Pod` for push constants and elements.
pub use bytemuck;
