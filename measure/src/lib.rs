//! vkcompute's measurement code, shared by the root package's benches
//! (`benches/`), the programs that time vkcompute against a floor or a
//! reference (`examples/gpu_report/` and others), the report's rule tests
//! (`tests/report_rules.rs`) and the peers (`peers/`, wgpu and scry-gpu on
//! the same workloads).
//!
//! - [`floor`]: the driver floor, the benches' dispatch workloads in
//!   minimal hand-written ash, so vkcompute's figures read as ratios to
//!   what the driver itself costs;
//! - [`bandwidth`]: saxpy, copy and host-transfer workloads;
//! - [`startup`]: `Device::new` plus 12 kernels in a fresh process, cold and
//!   warm, beside [`startup_floor`] (instance and device alone);
//! - [`rules`]: pure rules the report follows (chunking, saxpy launch
//!   shape), unit-tested by `tests/report_rules.rs`;
//! - [`cuda_ref`]: reading the CUDA references' JSON output.
//!
//! Not published: a workspace member that the root package's benches,
//! examples and tests build as a dev-dependency.

#![warn(missing_docs)]

#[cfg(feature = "glsl")]
pub mod bandwidth;
pub mod cuda_ref;
#[cfg(feature = "glsl")]
pub mod floor;
pub mod rules;
#[cfg(feature = "glsl")]
pub mod startup;
pub mod startup_floor;
