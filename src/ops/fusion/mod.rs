//! Planning and code generation behind [`OpBatch`](super::OpBatch): the
//! recorded graph, grouping of element-wise runs (and matmul epilogues),
//! which values are stored, barriers, and the GLSL of fused kernels (only
//! with the `glsl` feature; without it every op runs unfused).

#[cfg(feature = "glsl")]
pub(crate) mod codegen;
pub(crate) mod plan;
pub(crate) mod program;
pub(crate) mod strides;
