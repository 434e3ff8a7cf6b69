//! Prefill of one sequence: the whole prompt, layer by layer.
//!
//! `ops::linear` takes at most 64 rows, so each layer's projections and
//! MLP run over chunks of at most `prefill_chunk` rows, copied in and out
//! of prompt-wide buffers; each chunk's keys and values go into the cache
//! with its q/k norms and rotary (one fused op), and between the chunks'
//! projections and MLPs causal attention (`attention_prefill`) runs over
//! the whole prompt in one call, so every chunk's queries see exactly the
//! keys up to their own position. A prompt of one chunk uses the
//! prompt-wide buffers directly (no copies).
//!
//! On the f16 path ([`crate::model::PrefillMatmul`], `prefill16.rs`) the
//! projections and MLP are f16 products over all prompt rows at once: the
//! whole prompt is one chunk; attention runs on f16 copies of q, k and v
//! where the adapter runs f16 prefill attention on its tensor cores.

use vkcompute::ops::nn::{self, PrefillShape};
use vkcompute::ops::{self, Epilogue};
use vkcompute::{Batch, Buffer};

use crate::attend::Cursor;
use crate::buffers::Rows;
use crate::model::{Model, ModelError, Result};
use crate::project::Products;

/// One chunk of prompt rows: its first row (also on the device: the
/// position of its first token), and its activations (`None`: the
/// prompt-wide buffers themselves).
struct Chunk<'a> {
    start: u32,
    rows: Option<&'a Rows>,
    position: Buffer<u32>,
}

impl Model {
    /// Prefills sequence `seq` with `prompt` (its cache from position 0).
    /// Returns the logits at the last prompt position, and sets the
    /// sequence's next token to the one the decode step would choose from
    /// them (argmax, lowest index on ties; or a draw of `sample`;
    /// [`Model::set_tokens`] overrides it) and its position to
    /// `prompt.len()`.
    pub fn prefill(&mut self, seq: u32, prompt: &[u32]) -> Result<Vec<f32>> {
        let d = self.dims;
        if seq >= self.opts.batch {
            return Err(ModelError::Input {
                what: "seq",
                detail: format!("{seq} is past the batch of {}", self.opts.batch),
            });
        }
        if prompt.is_empty() || prompt.len() > self.max_seq as usize {
            return Err(ModelError::Input {
                what: "prompt",
                detail: format!(
                    "has {} tokens; it must have 1 to max_seq = {}",
                    prompt.len(),
                    self.max_seq
                ),
            });
        }
        if let Some(&t) = prompt.iter().find(|&&t| t >= d.vocab) {
            return Err(ModelError::Input {
                what: "prompt",
                detail: format!("token {t} is past the vocabulary of {}", d.vocab),
            });
        }
        let gpu = self.gpu.clone();
        let n = prompt.len() as u32;
        let half = self.half(n)?;
        let half = half.as_ref();
        let all = Rows::new(&gpu, &d, n)?;
        let chunk = if half.is_some() {
            n
        } else {
            self.opts.prefill_chunk
        };
        let full = (n > chunk)
            .then(|| Rows::new(&gpu, &d, chunk))
            .transpose()?;
        let rest = (n > chunk && n % chunk != 0)
            .then(|| Rows::new(&gpu, &d, n % chunk))
            .transpose()?;
        let mut chunks = Vec::new();
        for start in (0..n).step_by(chunk as usize) {
            let m = chunk.min(n - start);
            let rows = if n <= chunk {
                None
            } else if m == chunk {
                full.as_ref()
            } else {
                rest.as_ref()
            };
            chunks.push(Chunk {
                start,
                rows,
                position: gpu.upload(&[start])?,
            });
        }
        let ids = gpu.upload(prompt)?;
        let x1 = gpu.alloc::<f32>(d.hidden as usize)?;
        let logits1 = gpu.alloc::<f32>(d.vocab as usize)?;
        let per_seq = (d.kv_heads * self.max_seq * d.head_dim) as usize;
        let range = seq as usize * per_seq..(seq as usize + 1) * per_seq;

        let kv_flag = self.state.kv_flag()?;
        let mut b = if self.opts.profile {
            let o =
                vkcompute::BatchOptions::default().with_profiling(vkcompute::Profiling::Commands);
            gpu.batch_with(o)?
        } else {
            gpu.batch()?
        };
        self.record_embed(&mut b, &ids, &all)?;
        let ps = PrefillShape {
            batch: 1,
            tokens: n,
            q_heads: d.heads,
            kv_heads: d.kv_heads,
            head_dim: d.head_dim,
        };
        // Row ranges of a chunk in a prompt-wide buffer of `w` columns.
        let span =
            |c: &Chunk, r: &Rows, w: u32| (c.start * w) as usize..((c.start + r.m) * w) as usize;
        let copy = |b: &mut Batch,
                    from: &Buffer<f32>,
                    to: &Buffer<f32>,
                    rows: std::ops::Range<usize>,
                    into_all: bool| {
            if into_all {
                b.copy(from, &to.slice(rows)?).map(|_| ())
            } else {
                b.copy(&from.slice(rows)?, to).map(|_| ())
            }
        };
        for l in &self.layers {
            for c in &chunks {
                let r = c.rows.unwrap_or(&all);
                if c.rows.is_some() {
                    copy(&mut b, &all.h, &r.h, span(c, r, d.hidden), false)?;
                }
                let cursor = Cursor {
                    pos: &c.position,
                    lens: &c.position,
                    flag: &kv_flag,
                };
                self.record_pre_attn(
                    &mut b,
                    l,
                    r,
                    &cursor,
                    range.clone(),
                    1,
                    Products::prefill(half),
                )?;
                if c.rows.is_some() {
                    for (i, w) in [d.qw(), d.kvw(), d.kvw()].into_iter().enumerate() {
                        let from = r.part_span(i, 0..(r.m * w) as usize)?;
                        b.copy(&from, &all.part_span(i, span(c, r, w))?)?;
                    }
                }
            }
            let (q, k, v) = (all.q()?, all.k()?, all.v()?);
            match half {
                Some(h) => h.attend(&mut b, [&q, &k, &v], &all.ao, ps, self.scale())?,
                None => nn::attention_prefill(&mut b, &q, &k, &v, &all.ao, ps, self.scale())?,
            }
            for c in &chunks {
                let r = c.rows.unwrap_or(&all);
                if c.rows.is_some() {
                    copy(&mut b, &all.h, &r.h, span(c, r, d.hidden), false)?;
                    copy(&mut b, &all.ao, &r.ao, span(c, r, d.qw()), false)?;
                }
                self.record_post_attn(&mut b, l, r, Products::prefill(half), false)?;
                if c.rows.is_some() {
                    copy(&mut b, &r.h, &all.h, span(c, r, d.hidden), true)?;
                }
            }
        }
        let hw = d.hidden as usize;
        let last = (n as usize - 1) * hw;
        b.copy(&all.h.slice(last..last + hw)?, &x1)?;
        let head = self.lm_head().weights();
        ops::linear_normed(
            &mut b,
            &x1,
            &self.norm,
            d.eps,
            head,
            &logits1,
            1,
            d.hidden,
            d.vocab,
            Epilogue::None,
        )?;
        // The first generated token, chosen as the decode step chooses.
        // A sampled draw's counter lies past every decode position (those
        // are below max_seq) and differs per sequence.
        let next1 = gpu.alloc::<u32>(1)?;
        match self.opts.sample {
            Some(p) => {
                let ctr = self.max_seq.wrapping_mul(seq + 1).wrapping_add(n - 1);
                let ctr = gpu.upload(&[ctr])?;
                nn::sample(&mut b, &logits1, &ctr, &next1, 1, d.vocab, p)?;
            }
            None => nn::argmax(&mut b, &logits1, &next1, 1, d.vocab)?,
        }
        let done = b.submit_async()?;
        done.wait()?;
        if self.opts.profile {
            self.prefill_profile = Some(done.profile()?);
        }

        self.check_guards()?;
        let logits = logits1.download()?;
        let next = next1.download()?[0];
        let s = seq as usize;
        self.state.buf.write(s, &[next])?;
        self.pos.write(s, &[n])?;
        self.lens.write(s, &[n + 1])?;
        self.pos_host[s] = n;
        Ok(logits)
    }
}
