//! The cache side of a layer: the q/k side of its rows (q/k norms, rotary
//! and the append of keys and values to the KV cache, one fused op that
//! writes an f32 or a 16-bit cache from the f32 rows) and decode attention
//! over the cache, or both in one dispatch (for a 16-bit cache the
//! attention output is in the cache's type and widened with
//! `ops::convert` after; the two-op form narrows q first too: attention's
//! tensors share one type).

use std::ops::Range;

use vkcompute::ops;
use vkcompute::ops::nn::{self, DecodeShape, NnElement, QkNorm, QkShape};
use vkcompute::{Batch, Buffer, BufferSlice};

use crate::buffers::{Kv16, KvCache, Rows, Rows16};
use crate::model::{Layer, ModelError, Result};

/// The model's state both paths read: positions (where a sequence's new
/// rows go), lengths (attention) and the guard word.
pub(crate) struct Cursor<'a> {
    pub(crate) pos: &'a Buffer<u32>,
    pub(crate) lens: &'a Buffer<u32>,
    pub(crate) flag: &'a BufferSlice<'a, u32>,
}

fn mismatch() -> ModelError {
    ModelError::Input {
        what: "kv cache",
        detail: "the activation rows do not match the cache's dtype".into(),
    }
}

/// The layer's q/k norms (Qwen3) with `eps`; `None` for Llama.
fn qk_norm(l: &Layer, eps: f32) -> Option<QkNorm<'_>> {
    match (&l.q_norm, &l.k_norm) {
        (Some(qn), Some(kn)) => Some(QkNorm::new(qn, kn, eps)),
        _ => None,
    }
}

/// Records the q/k side of `r`'s rows in one dispatch: the layer's q/k
/// norms (Qwen3), rotary at each row's position (row `s` of sequence `b`
/// at `c.pos[b] + s`) and the append of the rotated keys and the values to
/// elements `range` of the layer's caches (all of them in decode, one
/// sequence's in prefill). q and k are written back in place.
#[allow(clippy::too_many_arguments)]
pub(crate) fn qk(
    b: &mut Batch,
    r: &Rows,
    l: &Layer,
    range: Range<usize>,
    c: &Cursor,
    inv_freq: &Buffer<f32>,
    eps: f32,
    shape: QkShape,
) -> Result<()> {
    let norm = qk_norm(l, eps);
    let (q, k, v) = (r.q()?, r.k()?, r.v()?);
    match &l.cache {
        KvCache::F32(kc, vc) => {
            let (kc, vc) = (kc.slice(range.clone())?, vc.slice(range)?);
            nn::qk_norm_rope_append(
                b, &q, &k, &v, norm, inv_freq, c.pos, &kc, &vc, c.flag, shape,
            )?
        }
        KvCache::F16(kc, vc) => {
            let (kc, vc) = (kc.slice(range.clone())?, vc.slice(range)?);
            nn::qk_norm_rope_append(
                b, &q, &k, &v, norm, inv_freq, c.pos, &kc, &vc, c.flag, shape,
            )?
        }
        KvCache::Bf16(kc, vc) => {
            let (kc, vc) = (kc.slice(range.clone())?, vc.slice(range)?);
            nn::qk_norm_rope_append(
                b, &q, &k, &v, norm, inv_freq, c.pos, &kc, &vc, c.flag, shape,
            )?
        }
    }
    Ok(())
}

/// Records decode attention with the q/k side in the same dispatch
/// (`nn::attention_decode_qkv`): the raw q, k and v of one new token per
/// sequence, read in place from `r`'s merged q|k|v projection output (no
/// split into three tensors), the layer's q/k norms (Qwen3), rotary at
/// `c.pos` and the append to the layer's caches, then attention into
/// `r.ao` (for a 16-bit cache, into the cache's type, widened after).
pub(crate) fn decode_qkv(
    b: &mut Batch,
    r: &Rows,
    l: &Layer,
    c: &Cursor,
    (inv_freq, eps): (&Buffer<f32>, f32),
    ds: DecodeShape,
    scale: f32,
) -> Result<()> {
    let norm = qk_norm(l, eps);
    match (&l.cache, &r.kv16) {
        (KvCache::F32(kc, vc), _) => nn::attention_decode_qkv(
            b, &r.qkv, norm, inv_freq, c.pos, kc, vc, c.lens, c.flag, &r.ao, ds, scale,
        )?,
        (KvCache::F16(kc, vc), Some(Rows16::F16(s))) => {
            decode_qkv16(b, r, s, (kc, vc), norm, c, inv_freq, ds, scale)?
        }
        (KvCache::Bf16(kc, vc), Some(Rows16::Bf16(s))) => {
            decode_qkv16(b, r, s, (kc, vc), norm, c, inv_freq, ds, scale)?
        }
        _ => return Err(mismatch()),
    }
    Ok(())
}

/// [`decode_qkv`] over a 16-bit cache: attention's output in the cache's
/// type (`s.ao`), then widened into `r.ao`.
#[allow(clippy::too_many_arguments)]
fn decode_qkv16<T: NnElement>(
    b: &mut Batch,
    r: &Rows,
    s: &Kv16<T>,
    (kc, vc): (&Buffer<T>, &Buffer<T>),
    norm: Option<QkNorm<'_>>,
    c: &Cursor,
    inv_freq: &Buffer<f32>,
    ds: DecodeShape,
    scale: f32,
) -> Result<()> {
    nn::attention_decode_qkv(
        b, &r.qkv, norm, inv_freq, c.pos, kc, vc, c.lens, c.flag, &s.ao, ds, scale,
    )?;
    ops::convert(b, &s.ao, &r.ao)?;
    Ok(())
}

/// Records decode attention of `r`'s queries over the cache into `r.ao`
/// (the keys and values already appended by [`qk`]).
pub(crate) fn decode(
    b: &mut Batch,
    r: &Rows,
    cache: &KvCache,
    c: &Cursor,
    ds: DecodeShape,
    scale: f32,
) -> Result<()> {
    match (cache, &r.kv16) {
        (KvCache::F32(kc, vc), _) => {
            nn::attention_decode(b, &r.q()?, kc, vc, c.lens, &r.ao, ds, scale)?;
        }
        (KvCache::F16(kc, vc), Some(Rows16::F16(s))) => decode16(b, r, s, kc, vc, c, ds, scale)?,
        (KvCache::Bf16(kc, vc), Some(Rows16::Bf16(s))) => decode16(b, r, s, kc, vc, c, ds, scale)?,
        _ => return Err(mismatch()),
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn decode16<T: NnElement>(
    b: &mut Batch,
    r: &Rows,
    s: &Kv16<T>,
    kc: &Buffer<T>,
    vc: &Buffer<T>,
    c: &Cursor,
    ds: DecodeShape,
    scale: f32,
) -> Result<()> {
    ops::convert(b, &r.q()?, &s.q)?;
    nn::attention_decode(b, &s.q, kc, vc, c.lens, &s.ao, ds, scale)?;
    ops::convert(b, &s.ao, &r.ao)?;
    Ok(())
}
