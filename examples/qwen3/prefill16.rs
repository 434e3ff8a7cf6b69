//! The prefill's projections as f16 matrix products over the whole prompt
//! ([`PrefillMatmul`]): per projection, the layer's 16-bit weight is
//! converted to f16 into one of two scratch slots (reused by every
//! projection of every layer), the f32 activations to f16, and one
//! `ops::linear_f16` computes all prompt rows at once with f32
//! accumulation: on the tensor cores through `VK_NV_cooperative_matrix2`
//! where the adapter has them, with the residual add fused into the
//! product; a portable kernel and the add elsewhere. The gate|up product
//! goes to a scratch buffer and SiLU·mul of its halves follows.
//!
//! The weights' conversions overlap the products: right after a
//! projection's product is recorded, the next projection's weight (in the
//! model's order: q|k|v, o, gate|up, down, then the next layer's) is
//! converted into the other slot. The two share the batch's barrier
//! interval (the conversion touches nothing the product does), so the GPU
//! runs the memory-bound conversion beside the compute-bound product.
//!
//! Where `nn::attention_prefill` runs f16 heads on the tensor cores
//! ([`nn::attention_prefill_on_tensor_cores`]), the f16 path's attention
//! does too, on f16 copies of q, k and v; its f16 output is the o
//! projection's input as it is ([`Half::attend`]).

use std::cell::Cell;

use vkcompute::ops::nn::{self, PrefillShape};
use vkcompute::ops::{self, BatchedShape, Epilogue, MatmulCaps, F16};
use vkcompute::{AdapterInfo, Batch, Buffer, BufferSlice, Device};

use crate::buffers::Rows;
use crate::buffers::{Dims, WBuf};
use crate::config::WeightDtype;
use crate::model::{Model, ModelError, Result};

/// How the prefill computes its projections and MLP.
///
/// The f16 path rounds each activation entering a projection (the normed
/// hidden states, the attention output, the SiLU·mul output) to f16: a
/// relative error of at most 2^-11 per element; values past ±65504
/// overflow to infinity, and ones below 2^-14 in magnitude lose bits (f16
/// subnormals). Weights stored in bf16 convert to f16 exactly while they lie
/// in f16's normal range (bf16 has 8 significant bits, f16 11); bf16
/// weights past ±65504 would overflow and ones below 2^-14 in magnitude
/// lose bits (f16 subnormals), so this path is for checkpoints whose
/// weights and activations stay within f16's range. Accumulation and
/// everything outside the projections (norms, rotary, the KV cache,
/// residuals) stay in f32; so does attention, except where it runs on the
/// tensor cores: there q, k and v are rounded to f16 as well, and the
/// probabilities weighting the values (`nn::attention_prefill`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PrefillMatmul {
    /// [`PrefillMatmul::F16`] for prompts of more than
    /// [`AUTO_F16_MIN_ROWS`] tokens where the adapter has workgroup-scope
    /// cooperative matrices (`VK_NV_cooperative_matrix2`: tensor cores)
    /// and the weights are 16-bit; else [`PrefillMatmul::Exact`] (a prompt
    /// that fits one exact chunk runs each projection as one
    /// `ops::linear` call, on the tensor cores past 16 rows, with no
    /// conversion of every weight to f16 first).
    #[default]
    Auto,
    /// `ops::linear` on f32 activations, at most 64 prompt rows per call
    /// (the weights as stored, widened exactly): the path to compare with
    /// an f32 reference.
    Exact,
    /// f16 products over all prompt rows at once on any adapter with
    /// 16-bit storage (the portable kernel where there are no cooperative
    /// matrices); f32 weights still take the exact path.
    F16,
}

impl PrefillMatmul {
    /// Parses `exact`, `f16` or `auto`.
    pub fn parse(s: &str) -> Option<PrefillMatmul> {
        match s {
            "auto" => Some(PrefillMatmul::Auto),
            "exact" => Some(PrefillMatmul::Exact),
            "f16" => Some(PrefillMatmul::F16),
            _ => None,
        }
    }

    /// Whether the prefill of a prompt of `rows` tokens takes the f16 path
    /// on an adapter of `info` with weights of `dtype`.
    pub fn uses_f16(self, info: &AdapterInfo, dtype: WeightDtype, rows: u32) -> bool {
        let sixteen = dtype != WeightDtype::F32 && info.storage_buffer16;
        match self {
            PrefillMatmul::Exact => false,
            PrefillMatmul::F16 => sixteen,
            PrefillMatmul::Auto => sixteen && tensor_cores(info) && rows > AUTO_F16_MIN_ROWS,
        }
    }
}

/// Prompts of at most this many tokens take the exact path under
/// [`PrefillMatmul::Auto`]: one exact chunk. The f16 path converts every
/// weight of the model to f16 in each prefill (12.3 ms of the Qwen3-4B
/// prefill on an H200 in docs/runs/2026-11-26e-h200-e5, where its 3-token
/// prefill took 37.5 ms; 4.8 ms since the conversion moves 16 bytes per
/// access, docs/runs/2026-11-27q-h200-q1), which a short prompt's
/// products do not win back: the exact path's 3-token prefill takes about
/// 6.3 ms (docs/runs/2026-11-27p-h200-p5).
pub const AUTO_F16_MIN_ROWS: u32 = 64;

/// Whether the adapter has the workgroup-scope cooperative matrices the
/// f16 products run on.
pub fn tensor_cores(info: &AdapterInfo) -> bool {
    MatmulCaps::of(info).coopmat2_granularity.is_some()
}

/// Elements of the largest layer weight (q|k|v, o, gate|up, down).
pub(crate) fn largest_weight(d: &Dims) -> usize {
    let (h, i) = (d.hidden as usize, d.inter as usize);
    let qkv = (d.qw() + 2 * d.kvw()) as usize;
    [qkv * h, h * d.qw() as usize, 2 * i * h, h * i]
        .into_iter()
        .max()
        .unwrap_or(0)
}

impl Model {
    /// The f16 prefill's scratch for `n` rows (the weight scratch made at
    /// its first use), or `None` on the exact path.
    pub(crate) fn half(&mut self, n: u32) -> Result<Option<Half>> {
        if !self.prefill_uses_f16(n) {
            return Ok(None);
        }
        let w = match &self.w16 {
            Some(w) => w.clone(),
            None => {
                let most = largest_weight(&self.dims);
                let w = [self.gpu.alloc::<F16>(most)?, self.gpu.alloc::<F16>(most)?];
                self.w16 = Some(w.clone());
                w
            }
        };
        // q|k|v in parts where a prompt's q, k and v are apart.
        let d = &self.dims;
        let split = Rows::apart_for(&self.gpu, d, n).then_some([d.qw(), d.kvw(), d.kvw()]);
        let order = self
            .layers
            .iter()
            .flat_map(|l| {
                [
                    (&l.qkv, split),
                    (&l.o, None),
                    (&l.gate_up, None),
                    (&l.down, None),
                ]
            })
            .filter(|(w, _)| !w.is_f32())
            .map(|(w, parts)| Staged::new(w, parts))
            .collect();
        Ok(Some(Half::new(&self.gpu, &self.dims, w, order, n)?))
    }
}

/// The scratch of the f16 projections of `n` prompt rows.
pub(crate) struct Half {
    /// Two slots of one layer weight in f16 (sized for the largest), and
    /// their bits.
    w: [Buffer<F16>; 2],
    w_bits: [Buffer<u16>; 2],
    /// The model's 16-bit weights in the order the prefill projects with
    /// them ([`Staged`]).
    order: Vec<Staged>,
    /// The k and v parts of a q|k|v weight in f16 (its q part goes to a
    /// slot), and their bits: [`Half::project_split`]'s products.
    kv: [Buffer<F16>; 2],
    kv_bits: [Buffer<u16>; 2],
    /// The weight already converted into a slot: its index in `order`
    /// and the slot.
    staged: Cell<Option<(usize, usize)>>,
    /// `[n, k]` activations in f16 (k up to the widest input), and bits.
    a: Buffer<F16>,
    a_bits: Buffer<u16>,
    /// `[n, 2 · inter]` f32 gate|up products ahead of SiLU·mul.
    c: Buffer<f32>,
    /// f16 q, k, v and attention output, where attention runs on the
    /// tensor cores.
    attn: Option<[Buffer<F16>; 4]>,
    /// The f32 buffer whose values the f16 attention output stands for
    /// ([`Half::attend`]; its address, never dereferenced): a projection
    /// of it reads the f16 output directly.
    attn_out: Cell<Option<*const Buffer<f32>>>,
}

fn bits(b: &Buffer<F16>) -> Result<Buffer<u16>> {
    b.reinterpret::<u16>().ok_or_else(|| ModelError::Input {
        what: "f16 scratch",
        detail: "its bytes are not whole u16 words".into(),
    })
}

/// A weight of the prefill's order: the address of the model's own
/// [`WBuf`] (to know it again when a projection names it; never
/// dereferenced), a handle on it, and for a q|k|v weight whose products go
/// to three outputs the rows of its q, k and v parts.
pub(crate) struct Staged {
    at: *const WBuf,
    w: WBuf,
    parts: Option<[u32; 3]>,
}

impl Staged {
    /// `w`, split into parts of `parts` rows where given.
    pub(crate) fn new(w: &WBuf, parts: Option<[u32; 3]>) -> Staged {
        Staged {
            at: w as *const WBuf,
            w: w.clone(),
            parts,
        }
    }
}

impl Half {
    /// Scratch for `n` rows; `w` is the model's two f16 weight slots (each
    /// of [`largest_weight`] elements) and `order` its 16-bit weights in
    /// the order the prefill's projections take them.
    pub(crate) fn new(
        gpu: &Device,
        d: &Dims,
        w: [Buffer<F16>; 2],
        order: Vec<Staged>,
        n: u32,
    ) -> Result<Half> {
        let n = n as usize;
        let widest_in = d.hidden.max(d.qw()).max(d.inter) as usize;
        let a = gpu.alloc::<F16>(n * widest_in)?;
        let attn = if nn::attention_prefill_on_tensor_cores::<F16>(gpu.info(), d.head_dim) {
            let (q, kv) = (n * d.qw() as usize, n * d.kvw() as usize);
            Some([
                gpu.alloc::<F16>(q)?,
                gpu.alloc::<F16>(kv)?,
                gpu.alloc::<F16>(kv)?,
                gpu.alloc::<F16>(q)?,
            ])
        } else {
            None
        };
        let c = gpu.alloc::<f32>(n * 2 * d.inter as usize)?;
        let kv_len = (d.kvw() * d.hidden) as usize;
        let kv = [gpu.alloc::<F16>(kv_len)?, gpu.alloc::<F16>(kv_len)?];
        Ok(Half {
            c,
            w_bits: [bits(&w[0])?, bits(&w[1])?],
            w,
            order,
            kv_bits: [bits(&kv[0])?, bits(&kv[1])?],
            kv,
            staged: Cell::new(None),
            a_bits: bits(&a)?,
            a,
            attn,
            attn_out: Cell::new(None),
        })
    }

    /// Records causal attention of the prompt's f32 `q`, `k`, `v` for
    /// `out`: in f32 into `out`, or where `nn::attention_prefill` runs f16
    /// heads on the tensor cores, there through f16 copies of q, k and v.
    /// On that route the output stays in f16 and `out` is not written:
    /// [`Half::project`] of `out` (the o projection) reads the f16 output
    /// in its place, with no conversion to f32 and back.
    pub(crate) fn attend(
        &self,
        b: &mut Batch,
        [q, k, v]: [&BufferSlice<'_, f32>; 3],
        out: &Buffer<f32>,
        shape: PrefillShape,
        scale: f32,
    ) -> Result<()> {
        let Some([q16, k16, v16, o16]) = &self.attn else {
            return Ok(nn::attention_prefill(b, q, k, v, out, shape, scale)?);
        };
        ops::convert(b, q, q16)?;
        ops::convert(b, k, k16)?;
        ops::convert(b, v, v16)?;
        nn::attention_prefill(b, q16, k16, v16, o16, shape, scale)?;
        self.attn_out.set(Some(out as *const Buffer<f32>));
        Ok(())
    }

    /// Records `out = epilogue(x·Wᵀ)` for `x` `[m, k]` (f32) and the
    /// 16-bit weight `w` `[n, k]` as `ops::linear` computes it, through
    /// f16 operands (see [`PrefillMatmul`]). An f32 weight is an error
    /// (the caller keeps those on `ops::linear`).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn project(
        &self,
        b: &mut Batch,
        x: &Buffer<f32>,
        w: &WBuf,
        out: &Buffer<f32>,
        m: u32,
        k: u32,
        n: u32,
        epilogue: Epilogue<'_>,
    ) -> Result<()> {
        if self
            .order
            .iter()
            .any(|e| std::ptr::eq(e.at, w) && e.parts.is_some())
        {
            return Err(ModelError::Input {
                what: "f16 projection",
                detail: "a q|k|v weight of split parts takes project_split".into(),
            });
        }
        let (at, slot) = self.weight_slot(b, w, k, n)?;
        // x in f16: the attention output as it is, else converted.
        let a = match (&self.attn, self.attn_out.get()) {
            (Some([.., o16]), Some(p))
                if std::ptr::eq(p, x) && o16.len() == m as usize * k as usize =>
            {
                bits(o16)?
            }
            _ => {
                ops::convert(b, x, &self.a.slice(0..m as usize * k as usize)?)?;
                self.a_bits.clone()
            }
        };
        let wb = &self.w_bits[slot];
        let mn = m as usize * n as usize;
        match epilogue {
            // The gate|up product into the scratch, SiLU·mul after it.
            Epilogue::SiluMul => {
                let shape = BatchedShape::packed(1, m, k, n).with_b_transposed();
                ops::matmul_f16_batched(b, &a, wb, &self.c, shape)?;
            }
            _ => ops::linear_f16(b, &a, wb, out, m, k, n, epilogue)?,
        }
        self.stage_next(b, at, slot)?;
        if let Epilogue::SiluMul = epilogue {
            nn::silu_mul_halves(b, &self.c.slice(0..mn)?, out, m, n / 2)?;
        }
        Ok(())
    }

    /// Records `outs[i] = x·W_iᵀ` for `x` `[m, k]` (f32) and the parts
    /// W_0, W_1, W_2 of the 16-bit q|k|v weight `w` (its rows in the
    /// prefill's order): three f16 products from one conversion of x, with
    /// nothing between them, so they share a barrier interval, and no
    /// split of a merged output afterwards.
    pub(crate) fn project_split(
        &self,
        b: &mut Batch,
        x: &Buffer<f32>,
        w: &WBuf,
        outs: [&Buffer<f32>; 3],
        m: u32,
        k: u32,
    ) -> Result<()> {
        let entry = self.order.iter().find(|e| std::ptr::eq(e.at, w));
        let Some(parts) = entry.and_then(|e| e.parts) else {
            return Err(ModelError::Input {
                what: "f16 projection",
                detail: "the weight is not a q|k|v weight of the prefill's order".into(),
            });
        };
        let (at, slot) = self.weight_slot(b, w, k, parts.iter().sum())?;
        ops::convert(b, x, &self.a.slice(0..m as usize * k as usize)?)?;
        let bits = [&self.w_bits[slot], &self.kv_bits[0], &self.kv_bits[1]];
        for ((out, wb), n) in outs.into_iter().zip(bits).zip(parts) {
            let shape = BatchedShape::packed(1, m, k, n).with_b_transposed();
            ops::matmul_f16_batched(b, &self.a_bits, wb, out, shape)?;
        }
        self.stage_next(b, at, slot)
    }

    /// The slot holding `w` (`[n, k]`) in f16, converted now unless it
    /// was converted ahead, and `w`'s index in the prefill's order.
    fn weight_slot(
        &self,
        b: &mut Batch,
        w: &WBuf,
        k: u32,
        n: u32,
    ) -> Result<(Option<usize>, usize)> {
        if w.is_f32() {
            return Err(ModelError::Input {
                what: "f16 projection",
                detail: "the weight is f32; f32 weights take ops::linear".into(),
            });
        }
        let want = k as usize * n as usize;
        if w.len() != want {
            return Err(ModelError::Input {
                what: "f16 projection",
                detail: format!(
                    "the weight has {} elements; [n, k] = [{n}, {k}] needs {want}",
                    w.len()
                ),
            });
        }
        let at = self.order.iter().position(|e| std::ptr::eq(e.at, w));
        let slot = match (self.staged.take(), at) {
            (Some((i, slot)), Some(j)) if i == j => slot,
            (staged, _) => {
                // Not converted ahead: into the slot no staged weight holds.
                let slot = staged.map_or(0, |(_, s)| 1 - s);
                let parts = at.and_then(|i| self.order[i].parts);
                self.convert_weight(b, w, parts, slot)?;
                slot
            }
        };
        Ok((at, slot))
    }

    /// Records the conversion of the weight after order index `at` into
    /// the slot other than `slot`, beside the product just recorded.
    fn stage_next(&self, b: &mut Batch, at: Option<usize>, slot: usize) -> Result<()> {
        if let Some(next) = at.and_then(|i| self.order.get(i + 1)) {
            self.convert_weight(b, &next.w, next.parts, 1 - slot)?;
            self.staged.set(at.map(|i| (i + 1, 1 - slot)));
        }
        Ok(())
    }

    /// Records the conversion of the 16-bit weight `w` to f16 into `slot`
    /// (with `parts`, its first part there and the other two into the k
    /// and v buffers).
    fn convert_weight(
        &self,
        b: &mut Batch,
        w: &WBuf,
        parts: Option<[u32; 3]>,
        slot: usize,
    ) -> Result<()> {
        let Some(p) = parts else {
            let dst = self.w[slot].slice(0..w.len())?;
            return convert_range(b, w, 0..w.len(), &dst);
        };
        let rows = p.iter().sum::<u32>() as usize;
        if rows == 0 || w.len() % rows != 0 {
            return Err(ModelError::Input {
                what: "f16 projection",
                detail: format!(
                    "a weight of {} elements does not split into q, k and v parts of {p:?} rows",
                    w.len()
                ),
            });
        }
        let k = w.len() / rows;
        let (q, kv) = (p[0] as usize * k, p[1] as usize * k);
        convert_range(b, w, 0..q, &self.w[slot].slice(0..q)?)?;
        convert_range(b, w, q..q + kv, &self.kv[0].slice(0..kv)?)?;
        convert_range(
            b,
            w,
            q + kv..w.len(),
            &self.kv[1].slice(0..w.len() - q - kv)?,
        )
    }
}

/// Records the conversion of elements `range` of the 16-bit weight `w`
/// to f16 into `dst`.
fn convert_range(
    b: &mut Batch,
    w: &WBuf,
    range: std::ops::Range<usize>,
    dst: &BufferSlice<'_, F16>,
) -> Result<()> {
    match w {
        WBuf::F16(src) => ops::convert(b, &src.slice(range)?, dst)?,
        WBuf::Bf16(src) => ops::convert(b, &src.slice(range)?, dst)?,
        WBuf::F32(_) => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_three_paths() {
        assert_eq!(PrefillMatmul::parse("auto"), Some(PrefillMatmul::Auto));
        assert_eq!(PrefillMatmul::parse("exact"), Some(PrefillMatmul::Exact));
        assert_eq!(PrefillMatmul::parse("f16"), Some(PrefillMatmul::F16));
        assert_eq!(PrefillMatmul::parse("bf16"), None);
    }
}
