//! The two small kernels the decoder needs beside the crate's ops: widening
//! a 16-bit row (a gathered bf16/f16 embedding) to f32 activations, and
//! advancing the decode step's positions and lengths by one on the GPU so
//! that consecutive graph launches need no host write.

use vkcompute::{Batch, Buffer, Device, GpuBuf, Kernel};

use crate::config::WeightDtype;

/// `d[i]` = the 16-bit value `i` of `s` (bf16 or IEEE half, packed two to
/// a word) widened to f32 exactly.
const WIDEN: &str = r#"
#version 450
layout(local_size_x = 256) in;
layout(set = 0, binding = 0) readonly buffer S { uint s[]; };
layout(set = 0, binding = 1) writeonly buffer D { float d[]; };
layout(push_constant) uniform P { uint n; uint bf16; } p;
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i >= p.n) return;
    uint w = s[i >> 1];
    uint h = (i & 1u) == 0u ? (w & 0xffffu) : (w >> 16);
    d[i] = p.bf16 != 0u ? uintBitsToFloat(h << 16) : unpackHalf2x16(h).x;
}
"#;

/// `pos[i] += 1; lens[i] += 1` for the `n` sequences.
const ADVANCE: &str = r#"
#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) buffer Pos { uint pos[]; };
layout(set = 0, binding = 1) buffer Lens { uint lens[]; };
layout(push_constant) uniform P { uint n; } p;
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i >= p.n) return;
    pos[i] += 1u;
    lens[i] += 1u;
}
"#;

/// The compiled kernels.
pub struct StepKernels {
    widen: Kernel,
    advance: Kernel,
}

impl StepKernels {
    /// Compiles both kernels for `gpu`.
    pub fn new(gpu: &Device) -> vkcompute::Result<Self> {
        Ok(StepKernels {
            // Reads any 16-bit type as raw words.
            widen: Kernel::builder(gpu)
                .glsl(WIDEN)
                .label("qwen3 widen_16bit")
                .raw_elements()
                .build()?,
            advance: Kernel::builder(gpu)
                .glsl(ADVANCE)
                .label("qwen3 advance_positions")
                .build()?,
        })
    }

    /// Records `dst[..n] = widen(src[..n])`, `src` holding `n` 16-bit
    /// values of `dtype` (F16 or Bf16).
    pub fn widen(
        &self,
        b: &mut Batch,
        src: &dyn GpuBuf,
        dst: &Buffer<f32>,
        n: u32,
        dtype: WeightDtype,
    ) -> vkcompute::Result<()> {
        let p: [u32; 2] = [n, u32::from(dtype == WeightDtype::Bf16)];
        b.run_with(&self.widen, &[src, dst], n, &p)?;
        Ok(())
    }

    /// Records `pos[i] += 1, lens[i] += 1` for every sequence.
    pub fn advance(
        &self,
        b: &mut Batch,
        pos: &Buffer<u32>,
        lens: &Buffer<u32>,
    ) -> vkcompute::Result<()> {
        let n = pos.len() as u32;
        b.run_with(&self.advance, &[pos, lens], n, &n)?;
        Ok(())
    }
}
