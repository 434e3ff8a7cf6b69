//! The cache side of a layer: appending keys and values to the KV cache
//! and decode attention over it, for an f32 cache (the activations as they
//! are) or a 16-bit one (q, k and v narrowed with `ops::convert` first, the
//! output widened after: an nn op's tensors share one type).

use std::ops::Range;

use vkcompute::ops;
use vkcompute::ops::nn::{self, DecodeShape, KvShape, NnElement};
use vkcompute::{Batch, Buffer, BufferSlice};

use crate::buffers::{Kv16, KvCache, Rows, Rows16};
use crate::model::{ModelError, Result};

/// The model's state both paths read: positions (kv_append), lengths
/// (attention) and the guard word.
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

/// Records the append of `r`'s keys and values (one token per sequence)
/// and decode attention of its queries into `r.ao`.
pub(crate) fn decode(
    b: &mut Batch,
    r: &Rows,
    cache: &KvCache,
    c: &Cursor,
    kv: KvShape,
    ds: DecodeShape,
    scale: f32,
) -> Result<()> {
    match (cache, &r.kv16) {
        (KvCache::F32(kc, vc), _) => {
            nn::kv_append(b, &r.k()?, &r.v()?, kc, vc, c.pos, c.flag, kv)?;
            nn::attention_decode(b, &r.q()?, kc, vc, c.lens, &r.ao, ds, scale)?;
        }
        (KvCache::F16(kc, vc), Some(Rows16::F16(s))) => {
            decode16(b, r, s, kc, vc, c, kv, ds, scale)?
        }
        (KvCache::Bf16(kc, vc), Some(Rows16::Bf16(s))) => {
            decode16(b, r, s, kc, vc, c, kv, ds, scale)?
        }
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
    kv: KvShape,
    ds: DecodeShape,
    scale: f32,
) -> Result<()> {
    ops::convert(b, &r.q()?, &s.q)?;
    ops::convert(b, &r.k()?, &s.k)?;
    ops::convert(b, &r.v()?, &s.v)?;
    nn::kv_append(b, &s.k, &s.v, kc, vc, c.pos, c.flag, kv)?;
    nn::attention_decode(b, &s.q, kc, vc, c.lens, &s.ao, ds, scale)?;
    ops::convert(b, &s.ao, &r.ao)?;
    Ok(())
}

/// Records the append of `r`'s keys and values (all of one sequence's
/// prompt) to elements `range` of the caches (that sequence's), at the
/// position in `c.pos`.
pub(crate) fn append(
    b: &mut Batch,
    r: &Rows,
    cache: &KvCache,
    range: Range<usize>,
    c: &Cursor,
    kv: KvShape,
) -> Result<()> {
    match (cache, &r.kv16) {
        (KvCache::F32(kc, vc), _) => {
            let (kc, vc) = (kc.slice(range.clone())?, vc.slice(range)?);
            nn::kv_append(b, &r.k()?, &r.v()?, &kc, &vc, c.pos, c.flag, kv)?;
        }
        (KvCache::F16(kc, vc), Some(Rows16::F16(s))) => append16(b, r, s, kc, vc, range, c, kv)?,
        (KvCache::Bf16(kc, vc), Some(Rows16::Bf16(s))) => append16(b, r, s, kc, vc, range, c, kv)?,
        _ => return Err(mismatch()),
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn append16<T: NnElement>(
    b: &mut Batch,
    r: &Rows,
    s: &Kv16<T>,
    kc: &Buffer<T>,
    vc: &Buffer<T>,
    range: Range<usize>,
    c: &Cursor,
    kv: KvShape,
) -> Result<()> {
    ops::convert(b, &r.k()?, &s.k)?;
    ops::convert(b, &r.v()?, &s.v)?;
    let (kc, vc) = (kc.slice(range.clone())?, vc.slice(range)?);
    nn::kv_append(b, &s.k, &s.v, &kc, &vc, c.pos, c.flag, kv)?;
    Ok(())
}
