//! The decoder's projections: `ops::linear` (with the RMSNorm before it
//! fused in as its prologue, `ops::linear_normed`), or on the prefill's
//! f16 path the f16 product of `prefill16.rs`. Off that path every product
//! keeps f32 activations: the plan is `ops::choose_linear`'s with the
//! tensor-core routes left out ([`exact_caps`]), which would round x to
//! f16.

use vkcompute::ops::nn;
use vkcompute::ops::{self, Epilogue, MatmulCaps};
use vkcompute::{Batch, Buffer};

use crate::buffers::WBuf;
use crate::model::{Model, Result};
use crate::prefill16::Half;

impl Model {
    /// Records `out = epilogue(x·Wᵀ)` (`x` `[m, k]`, `w` `[n, k]`):
    /// `ops::linear`, or with `half` and a 16-bit weight the f16 product.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn project(
        &self,
        b: &mut Batch,
        half: Option<&Half>,
        x: &Buffer<f32>,
        w: &WBuf,
        out: &Buffer<f32>,
        (m, k, n): (u32, u32, u32),
        epilogue: Epilogue<'_>,
    ) -> Result<()> {
        match half {
            Some(h) if !matches!(w, WBuf::F32(_)) => h.project(b, x, w, out, m, k, n, epilogue),
            _ => {
                let silu = matches!(epilogue, Epilogue::SiluMul);
                let wd = w.weights().dtype();
                let plan = ops::choose_linear(m, k, n, wd, silu, &exact_caps(self));
                Ok(ops::linear_with_plan(
                    b,
                    x,
                    w.weights(),
                    out,
                    m,
                    k,
                    n,
                    epilogue,
                    plan,
                )?)
            }
        }
    }

    /// Records `out = epilogue(RMSNorm(x)·Wᵀ)` with the norm weight
    /// `norm.0` (`[k]`): one `ops::linear_normed` (the norm is the layer's
    /// prologue, no dispatch of its own) where `ops::linear` picks its
    /// streaming kernels (up to 16 rows); else `nn::rms_norm` into the
    /// scratch `norm.1` (`[m, k]`) and the layer (the tiled kernel past 16
    /// rows, or the f16 product with `half` and a 16-bit weight), which
    /// is what `linear_normed` would record there, without its scratch
    /// allocation.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn project_normed(
        &self,
        b: &mut Batch,
        half: Option<&Half>,
        x: &Buffer<f32>,
        (g, xn): (&Buffer<f32>, &Buffer<f32>),
        w: &WBuf,
        out: &Buffer<f32>,
        (m, k, n): (u32, u32, u32),
        epilogue: Epilogue<'_>,
    ) -> Result<()> {
        let eps = self.dims.eps;
        let silu = matches!(epilogue, Epilogue::SiluMul);
        let wd = w.weights().dtype();
        let plan = ops::choose_linear(m, k, n, wd, silu, &exact_caps(self));
        let fused = plan.rows_per_pass <= 16;
        match half {
            Some(h) if !matches!(w, WBuf::F32(_)) => {
                nn::rms_norm(b, x, g, xn, m, k, eps)?;
                h.project(b, xn, w, out, m, k, n, epilogue)
            }
            _ if !fused => {
                nn::rms_norm(b, x, g, xn, m, k, eps)?;
                Ok(ops::linear_with_plan(
                    b,
                    xn,
                    w.weights(),
                    out,
                    m,
                    k,
                    n,
                    epilogue,
                    plan,
                )?)
            }
            _ => Ok(ops::linear_normed_with_plan(
                b,
                x,
                g,
                eps,
                w.weights(),
                out,
                m,
                k,
                n,
                epilogue,
                plan,
            )?),
        }
    }
}

/// The adapter's matmul capabilities without the tensor-core routes of
/// `ops::linear` (f32 activations throughout).
fn exact_caps(m: &Model) -> MatmulCaps {
    MatmulCaps::of(m.gpu.info())
        .with_coopmat2_decode(false)
        .with_coopmat_khr_f16(false)
}
