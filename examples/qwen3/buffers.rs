//! The decoder's device buffers: weight matrices in their stored dtype,
//! the KV cache (f32 or the weights' 16-bit dtype), and the activations of
//! a step or a prompt.

use vkcompute::ops::{self, Bf16, Weights, F16};
use vkcompute::{Batch, Buffer, BufferSlice, Device};

use crate::checkpoint::HostTensor;
use crate::config::{Arch, Config, WeightDtype};
use crate::model::Result;

/// A weight matrix on the device in its stored dtype (a clone shares the
/// device buffer).
#[derive(Clone)]
pub enum WBuf {
    /// f32.
    F32(Buffer<f32>),
    /// IEEE half.
    F16(Buffer<F16>),
    /// bfloat16.
    Bf16(Buffer<Bf16>),
}

impl WBuf {
    pub(crate) fn weights(&self) -> Weights<'_> {
        match self {
            WBuf::F32(b) => b.into(),
            WBuf::F16(b) => b.into(),
            WBuf::Bf16(b) => b.into(),
        }
    }

    /// Whether the matrix is f32.
    pub(crate) fn is_f32(&self) -> bool {
        matches!(self, WBuf::F32(_))
    }

    /// Elements of the matrix.
    pub(crate) fn len(&self) -> usize {
        match self {
            WBuf::F32(b) => b.len(),
            WBuf::F16(b) => b.len(),
            WBuf::Bf16(b) => b.len(),
        }
    }

    pub(crate) fn bytes(&self) -> u64 {
        match self {
            WBuf::F32(b) => b.byte_size(),
            WBuf::F16(b) => b.byte_size(),
            WBuf::Bf16(b) => b.byte_size(),
        }
    }

    /// Uploads the tensors' bytes one after the other into one buffer (a
    /// merged gate|up or q|k|v weight), straight from the checkpoint's
    /// bytes.
    pub(crate) fn upload(gpu: &Device, parts: &[&HostTensor<'_>]) -> Result<WBuf> {
        fn go<T: vkcompute::bytemuck::Pod>(
            gpu: &Device,
            parts: &[&HostTensor<'_>],
        ) -> Result<Buffer<T>> {
            let size = std::mem::size_of::<T>();
            if parts.len() == 1 {
                return Ok(
                    match vkcompute::bytemuck::try_cast_slice::<u8, T>(parts[0].bytes) {
                        Ok(s) => gpu.upload(s)?,
                        Err(_) => gpu.upload(&aligned::<T>(parts[0].bytes))?,
                    },
                );
            }
            let total: usize = parts.iter().map(|p| p.bytes.len() / size).sum();
            let buf = gpu.alloc::<T>(total)?;
            let mut at = 0;
            for p in parts {
                let n = p.bytes.len() / size;
                match vkcompute::bytemuck::try_cast_slice::<u8, T>(p.bytes) {
                    Ok(s) => buf.write(at, s)?,
                    Err(_) => buf.write(at, &aligned::<T>(p.bytes))?,
                }
                at += n;
            }
            Ok(buf)
        }
        Ok(match parts[0].dtype {
            WeightDtype::F32 => WBuf::F32(go(gpu, parts)?),
            WeightDtype::F16 => WBuf::F16(go(gpu, parts)?),
            WeightDtype::Bf16 => WBuf::Bf16(go(gpu, parts)?),
        })
    }
}

/// `bytes` copied into a `Vec<T>` (for bytes the map does not align to
/// `T`).
fn aligned<T: vkcompute::bytemuck::Pod>(bytes: &[u8]) -> Vec<T> {
    let mut v = vec![T::zeroed(); bytes.len() / std::mem::size_of::<T>()];
    vkcompute::bytemuck::cast_slice_mut::<T, u8>(&mut v).copy_from_slice(bytes);
    v
}

/// The model's dimensions (from its config).
#[derive(Debug, Clone, Copy)]
pub struct Dims {
    /// Hidden size.
    pub hidden: u32,
    /// MLP width.
    pub inter: u32,
    /// Query heads.
    pub heads: u32,
    /// Key/value heads.
    pub kv_heads: u32,
    /// Elements per head.
    pub head_dim: u32,
    /// Vocabulary.
    pub vocab: u32,
    /// RMSNorm epsilon (as the kernels take it).
    pub eps: f32,
    /// Weight dtype.
    pub dtype: WeightDtype,
    /// Qwen3's per-head q/k norms.
    pub qk_norm: bool,
    /// The KV cache's dtype: f32, or the weights' 16-bit dtype.
    pub kv: WeightDtype,
}

impl Dims {
    /// The dimensions of `c`, with an f32 cache when `kv_f32` (or f32
    /// weights), else one in the weights' dtype.
    pub(crate) fn of(c: &Config, kv_f32: bool) -> Dims {
        Dims {
            hidden: c.hidden,
            inter: c.intermediate,
            heads: c.heads,
            kv_heads: c.kv_heads,
            head_dim: c.head_dim,
            vocab: c.vocab,
            eps: c.rms_norm_eps as f32,
            dtype: c.dtype,
            qk_norm: c.arch == Arch::Qwen3,
            kv: if kv_f32 { WeightDtype::F32 } else { c.dtype },
        }
    }
    pub(crate) fn qw(&self) -> u32 {
        self.heads * self.head_dim
    }
    pub(crate) fn kvw(&self) -> u32 {
        self.kv_heads * self.head_dim
    }
}

/// Activations of `m` rows (a decode step's sequences or a prefill chunk).
pub(crate) struct Rows {
    pub(crate) m: u32,
    pub(crate) h: Buffer<f32>,
    pub(crate) xn: Buffer<f32>,
    /// Each row's q | k | v, `[m, qw + 2 kvw]`: the output of the fused
    /// projection.
    pub(crate) qkv: Buffer<f32>,
    /// q, k and v apart (`[m, qw]`, `[m, kvw]`, `[m, kvw]`), written by
    /// [`Rows::split_qkv`]; `None` where they are views of `qkv` (one row,
    /// at offsets the adapter can bind).
    apart: Option<Apart>,
    qw: usize,
    kvw: usize,
    pub(crate) ao: Buffer<f32>,
    pub(crate) mlp: Buffer<f32>,
    /// The gathered embedding rows in the table's 16-bit dtype.
    pub(crate) emb16: Option<Emb16>,
    /// q and the attention output in a 16-bit cache's dtype.
    pub(crate) kv16: Option<Rows16>,
}

/// q, k and v of several rows in buffers of their own, and how they get
/// there from the fused projection's rows.
struct Apart {
    parts: [Buffer<f32>; 3],
    /// `qkv` transposed (`[qw + 2 kvw, m]`), whose q, k and v blocks
    /// transpose back into `parts`; `None`: one copy per row and part
    /// (offsets the adapter cannot bind).
    t: Option<Buffer<f32>>,
}

/// Rows of a 16-bit dtype.
pub(crate) enum Emb16 {
    F16(Buffer<F16>),
    Bf16(Buffer<Bf16>),
}

/// The decode attention operands of `m` rows in a 16-bit cache's dtype
/// `T`: attention's tensors share one type, so q is narrowed before it and
/// the output widened after (the fused q/k op writes the cache from the
/// f32 rows itself).
pub(crate) struct Kv16<T: vkcompute::bytemuck::Pod> {
    pub(crate) q: Buffer<T>,
    pub(crate) ao: Buffer<T>,
}

/// [`Kv16`] of the cache's dtype.
pub(crate) enum Rows16 {
    F16(Kv16<F16>),
    Bf16(Kv16<Bf16>),
}

impl<T: vkcompute::bytemuck::Pod> Kv16<T> {
    fn new(gpu: &Device, d: &Dims, m: u32) -> Result<Kv16<T>> {
        let a = |n: u32| gpu.alloc::<T>((m * n) as usize);
        Ok(Kv16 {
            q: a(d.qw())?,
            ao: a(d.qw())?,
        })
    }
}

/// One layer's key and value caches, each `[batch, kv_heads, max_seq,
/// head_dim]`.
pub(crate) enum KvCache {
    F32(Buffer<f32>, Buffer<f32>),
    F16(Buffer<F16>, Buffer<F16>),
    Bf16(Buffer<Bf16>, Buffer<Bf16>),
}

impl KvCache {
    /// Bytes of the key and value caches together.
    pub(crate) fn bytes(&self) -> u64 {
        match self {
            KvCache::F32(k, v) => k.byte_size() + v.byte_size(),
            KvCache::F16(k, v) => k.byte_size() + v.byte_size(),
            KvCache::Bf16(k, v) => k.byte_size() + v.byte_size(),
        }
    }

    /// Caches of `elems` elements each in `dtype`.
    pub(crate) fn new(gpu: &Device, dtype: WeightDtype, elems: usize) -> Result<KvCache> {
        Ok(match dtype {
            WeightDtype::F32 => KvCache::F32(gpu.alloc(elems)?, gpu.alloc(elems)?),
            WeightDtype::F16 => KvCache::F16(gpu.alloc(elems)?, gpu.alloc(elems)?),
            WeightDtype::Bf16 => KvCache::Bf16(gpu.alloc(elems)?, gpu.alloc(elems)?),
        })
    }
}

impl Rows {
    /// Whether q's and k's offsets in the fused output (and those of
    /// their transposed blocks) bind as views.
    fn offsets_bind(gpu: &Device, d: &Dims) -> bool {
        let (qw, kvw) = (d.qw() as usize, d.kvw() as usize);
        let align = gpu.info().min_storage_buffer_offset_alignment.max(1) as usize;
        qw * 4 % align == 0 && (qw + kvw) * 4 % align == 0
    }

    /// Whether rows of `m` tokens hold q, k and v apart (else views of
    /// the fused output: one row, at offsets that bind).
    pub(crate) fn apart_for(gpu: &Device, d: &Dims, m: u32) -> bool {
        m != 1 || !Rows::offsets_bind(gpu, d)
    }

    pub(crate) fn new(gpu: &Device, d: &Dims, m: u32) -> Result<Rows> {
        let a = |n: u32| gpu.alloc::<f32>((m * n) as usize);
        let n_emb = (m * d.hidden) as usize;
        let (qw, kvw) = (d.qw() as usize, d.kvw() as usize);
        let binds = Rows::offsets_bind(gpu, d);
        let apart = if !Rows::apart_for(gpu, d, m) {
            None
        } else {
            Some(Apart {
                parts: [a(d.qw())?, a(d.kvw())?, a(d.kvw())?],
                t: if binds {
                    Some(a(d.qw() + 2 * d.kvw())?)
                } else {
                    None
                },
            })
        };
        Ok(Rows {
            m,
            h: a(d.hidden)?,
            xn: a(d.hidden)?,
            qkv: a(d.qw() + 2 * d.kvw())?,
            apart,
            qw,
            kvw,
            ao: a(d.qw())?,
            mlp: a(d.inter)?,
            emb16: match d.dtype {
                WeightDtype::F32 => None,
                WeightDtype::F16 => Some(Emb16::F16(gpu.alloc(n_emb)?)),
                WeightDtype::Bf16 => Some(Emb16::Bf16(gpu.alloc(n_emb)?)),
            },
            kv16: match d.kv {
                WeightDtype::F32 => None,
                WeightDtype::F16 => Some(Rows16::F16(Kv16::new(gpu, d, m)?)),
                WeightDtype::Bf16 => Some(Rows16::Bf16(Kv16::new(gpu, d, m)?)),
            },
        })
    }

    /// Part `i` (q, k, v) of one row's q | k | v: its element range.
    fn range(&self, i: usize) -> std::ops::Range<usize> {
        let at = [0, self.qw, self.qw + self.kvw][i];
        at..at + [self.qw, self.kvw, self.kvw][i]
    }

    fn part(&self, i: usize) -> Result<BufferSlice<'_, f32>> {
        let r = self.range(i);
        self.part_span(i, 0..self.m as usize * r.len())
    }

    /// Elements `span` of part `i` (0: q, 1: k, 2: v; `[m, width]`).
    pub(crate) fn part_span(
        &self,
        i: usize,
        span: std::ops::Range<usize>,
    ) -> Result<BufferSlice<'_, f32>> {
        Ok(match &self.apart {
            Some(a) => a.parts[i].slice(span)?,
            None => {
                let at = self.range(i).start;
                self.qkv.slice(at + span.start..at + span.end)?
            }
        })
    }

    /// The queries, `[m, qw]`.
    pub(crate) fn q(&self) -> Result<BufferSlice<'_, f32>> {
        self.part(0)
    }

    /// q, k and v where they are held apart (`[m, qw]`, `[m, kvw]`,
    /// `[m, kvw]`).
    pub(crate) fn parts(&self) -> Option<[&Buffer<f32>; 3]> {
        self.apart
            .as_ref()
            .map(|a| [&a.parts[0], &a.parts[1], &a.parts[2]])
    }

    /// The keys, `[m, kvw]`.
    pub(crate) fn k(&self) -> Result<BufferSlice<'_, f32>> {
        self.part(1)
    }

    /// The values, `[m, kvw]`.
    pub(crate) fn v(&self) -> Result<BufferSlice<'_, f32>> {
        self.part(2)
    }

    /// Records the split of `qkv` into q, k and v where they are not views
    /// of it: a transpose of the rows and one back per part, or (offsets
    /// the adapter cannot bind) one copy per row and part.
    pub(crate) fn split_qkv(&self, b: &mut Batch) -> Result<()> {
        let Some(a) = &self.apart else {
            return Ok(());
        };
        let (m, w) = (self.m as usize, self.qw + 2 * self.kvw);
        match &a.t {
            Some(t) => {
                ops::transpose(b, &self.qkv, t, m as u32, w as u32)?;
                for (i, part) in a.parts.iter().enumerate() {
                    let r = self.range(i);
                    let block = t.slice(r.start * m..r.end * m)?;
                    ops::transpose(b, &block, part, r.len() as u32, m as u32)?;
                }
            }
            None => {
                for row in 0..m {
                    for (i, part) in a.parts.iter().enumerate() {
                        let r = self.range(i);
                        let from = self.qkv.slice(row * w + r.start..row * w + r.end)?;
                        b.copy(&from, &part.slice(row * r.len()..(row + 1) * r.len())?)?;
                    }
                }
            }
        }
        Ok(())
    }
}
