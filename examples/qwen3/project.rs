//! The decoder's projections: `ops::linear` (with the RMSNorm before it
//! fused in as its prologue, `ops::linear_normed`), or on the prefill's
//! f16 path the f16 product of `prefill16.rs` ([`Products`] says which).
//! The exact products keep f32 activations: the plan is
//! `ops::choose_linear`'s with the tensor-core routes left out
//! ([`exact_caps`]), which would round x to f16. The decode step may take
//! `ops::choose_linear`'s own plan instead ([`DecodeMatmul::Auto`]).

use vkcompute::ops::nn;
use vkcompute::ops::{self, DType, Epilogue, LinearPlan, MatmulCaps};
use vkcompute::{Batch, Buffer};

use crate::buffers::WBuf;
use crate::model::{Model, Result};
use crate::prefill16::Half;

/// How the decode step computes its projections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DecodeMatmul {
    /// f32 activations in every product (`ops::choose_linear` without its
    /// tensor-core routes): the path to compare with an f32 reference.
    #[default]
    Exact,
    /// `ops::choose_linear`'s own plan for the batch's rows: with 16-bit
    /// weights from 5 sequences, on adapters with the Khronos cooperative
    /// matrices, the tensor-core streaming kernel, which rounds each
    /// projection's input rows to f16 (the RMSNorm before q|k|v and
    /// gate|up is then a dispatch of its own); the skinny kernels, exact,
    /// below that.
    Auto,
}

impl DecodeMatmul {
    /// Parses `exact` or `auto`.
    pub fn parse(s: &str) -> Option<DecodeMatmul> {
        match s {
            "exact" => Some(DecodeMatmul::Exact),
            "auto" => Some(DecodeMatmul::Auto),
            _ => None,
        }
    }
}

/// Which products a recording takes.
#[derive(Clone, Copy)]
pub(crate) enum Products<'a> {
    /// f32 activations ([`exact_caps`]).
    Exact,
    /// `ops::choose_linear`'s own plan (the adapter's capabilities).
    Chosen,
    /// The prefill's f16 products (16-bit weights; f32 weights stay exact).
    Half(&'a Half),
}

impl<'a> Products<'a> {
    /// The prefill's: f16 with `half`, else exact.
    pub(crate) fn prefill(half: Option<&'a Half>) -> Products<'a> {
        half.map_or(Products::Exact, Products::Half)
    }
}

impl Model {
    /// Records `out = epilogue(x·Wᵀ)` (`x` `[m, k]`, `w` `[n, k]`):
    /// `ops::linear` with the plan `p` gives, or with [`Products::Half`]
    /// and a 16-bit weight the f16 product.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn project(
        &self,
        b: &mut Batch,
        p: Products<'_>,
        x: &Buffer<f32>,
        w: &WBuf,
        out: &Buffer<f32>,
        (m, k, n): (u32, u32, u32),
        epilogue: Epilogue<'_>,
    ) -> Result<()> {
        match p {
            Products::Half(h) if !w.is_f32() => h.project(b, x, w, out, m, k, n, epilogue),
            _ => {
                let silu = matches!(epilogue, Epilogue::SiluMul);
                let plan = self.plan(p, w.weights().dtype(), (m, k, n), silu);
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
    /// rows, a tensor-core plan of [`Products::Chosen`], or the f16 product
    /// of [`Products::Half`] with a 16-bit weight), which
    /// is what `linear_normed` would record there, without its scratch
    /// allocation.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn project_normed(
        &self,
        b: &mut Batch,
        p: Products<'_>,
        x: &Buffer<f32>,
        (g, xn): (&Buffer<f32>, &Buffer<f32>),
        w: &WBuf,
        out: &Buffer<f32>,
        (m, k, n): (u32, u32, u32),
        epilogue: Epilogue<'_>,
    ) -> Result<()> {
        let eps = self.dims.eps;
        let silu = matches!(epilogue, Epilogue::SiluMul);
        let plan = self.plan(p, w.weights().dtype(), (m, k, n), silu);
        let fused = plan.rows_per_pass <= 16;
        match p {
            Products::Half(h) if !w.is_f32() => {
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

impl Model {
    /// The plan `ops::linear` takes for `[m, k]` rows against `[n, k]`
    /// weights of `wd` (`silu`: a merged gate|up) under the products `p`:
    /// `ops::choose_linear`'s, with the tensor-core routes left out unless
    /// `p` is [`Products::Chosen`].
    fn plan(
        &self,
        p: Products<'_>,
        wd: DType,
        (m, k, n): (u32, u32, u32),
        silu: bool,
    ) -> LinearPlan {
        let caps = match p {
            Products::Chosen => MatmulCaps::of(self.gpu.info()),
            _ => exact_caps(self),
        };
        ops::choose_linear(m, k, n, wd, silu, &caps)
    }

    /// The decode step's products, as [`DecodeMatmul`] says.
    pub(crate) fn decode_products(&self) -> Products<'static> {
        match self.opts.decode_matmul {
            DecodeMatmul::Exact => Products::Exact,
            DecodeMatmul::Auto => Products::Chosen,
        }
    }

    /// The plans of the decode step's projections at the batch's rows, as
    /// the step records them: a layer's q|k|v, o, gate|up and down, then
    /// the LM head.
    pub fn decode_plans(&self) -> [LinearPlan; 5] {
        let d = &self.dims;
        let m = self.opts.batch;
        // Every weight of a checkpoint has its one dtype.
        let wd = self.lm_head().weights().dtype();
        let p = self.decode_products();
        let plan = |k, n, silu| self.plan(p, wd, (m, k, n), silu);
        [
            plan(d.hidden, d.qw() + 2 * d.kvw(), false),
            plan(d.qw(), d.hidden, false),
            plan(d.hidden, 2 * d.inter, true),
            plan(d.inter, d.hidden, false),
            plan(d.hidden, d.vocab, false),
        ]
    }

    /// Whether the decode step rounds a projection's input rows to f16
    /// (a tensor-core plan among [`Model::decode_plans`]).
    pub fn decode_rounds_x_to_f16(&self) -> bool {
        self.decode_plans().iter().any(LinearPlan::rounds_x_to_f16)
    }
}

/// A plan in words: the kernel `ops::linear` records for it.
pub fn plan_name(p: LinearPlan) -> String {
    match p.rows_per_pass {
        ops::LINEAR_TENSOR_STREAM => "tensor-core streaming".into(),
        ops::LINEAR_TENSOR_WINDOW => "tensor-core streaming (window)".into(),
        ops::LINEAR_TENSOR_TILES => "tensor-core tiles".into(),
        r if r > 16 => format!("tiled, {r}-row tiles"),
        r => format!("skinny, {r} rows per pass"),
    }
}

/// The adapter's matmul capabilities without the tensor-core routes of
/// `ops::linear` (f32 activations throughout).
fn exact_caps(m: &Model) -> MatmulCaps {
    MatmulCaps::of(m.gpu.info())
        .with_coopmat2_decode(false)
        .with_coopmat_khr_f16(false)
}
