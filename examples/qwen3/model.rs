//! The decoder on the device: the weights in their stored dtype, a KV cache
//! in f32 or in the weights' dtype (`kv_f32`), and the decode step of all
//! sequences recorded once as a [`Graph`] and launched once per step
//! (prefill: `prefill.rs`; the cache side of a layer: `attend.rs`).
//!
//! Activations are f32 throughout; `ops::linear` widens 16-bit weights in
//! its kernel (exactly), so a bf16 checkpoint runs at f32 arithmetic on the
//! weights as stored. Two options round the projections' inputs to f16 for
//! tensor-core products instead: the prefill's f16 path ([`PrefillMatmul`],
//! `prefill16.rs`) over the whole prompt, and [`DecodeMatmul::Auto`] for
//! the decode step of 5 or more sequences (`project.rs`).
//!
//! The decode graph reads three device `u32` buffers at every launch: the
//! token of each sequence, its position (where the token's key and value
//! go) and its length (positions attention reads, position + 1). It ends by
//! choosing the next token (argmax, or `ops::nn::sample` with the position
//! as the draw's counter) into the token buffer and advancing positions and
//! lengths by one, so consecutive launches need no host write.

use std::fmt;
use std::time::{Duration, Instant};

use vkcompute::ops::nn::{self, DecodeShape, NnOperand, QkShape, SampleParams};
use vkcompute::ops::F16;
use vkcompute::ops::{self, Epilogue};
use vkcompute::{Batch, Buffer, Device, Graph, Profiling, Ticket};

use crate::attend::{self, Cursor};
use crate::buffers::{Dims, Emb16, KvCache, Rows, WBuf};
use crate::checkpoint::{device_limits, layer_name, Checkpoint, HostTensor, LoadError};
use crate::prefill16;
pub use crate::prefill16::PrefillMatmul;
pub use crate::project::DecodeMatmul;
use crate::project::Products;
use crate::state::State;

/// The most sequences one decode step takes (`ops::linear`'s rows).
pub const MAX_BATCH: u32 = ops::LINEAR_MAX_M;

/// What a [`Model`] holds beside the weights.
#[derive(Debug, Clone, Copy)]
pub struct ModelOptions {
    /// Sequences decoded together (1 to [`MAX_BATCH`]).
    pub batch: u32,
    /// Positions each sequence's cache holds; rounded up to a multiple of
    /// 64 (so each sequence's cache starts on an aligned offset).
    pub max_seq: u32,
    /// Prompt rows per prefill chunk of the projections and MLP (1 to
    /// 64; 64 is the fastest, smaller chunks exercise the chunking in
    /// tests). Only the exact prefill path chunks; the f16 one takes all
    /// prompt rows at once.
    pub prefill_chunk: u32,
    /// How the prefill computes its projections and MLP: exact f32
    /// activations through `ops::linear`, or f16 products over the whole
    /// prompt (tensor cores where the adapter has them; f16 range and
    /// rounding limits in [`PrefillMatmul`]).
    pub prefill_matmul: PrefillMatmul,
    /// How the decode step picks its token; `None` is greedy (argmax).
    pub sample: Option<SampleParams>,
    /// Record the decode graph and the prefills with per-command GPU
    /// timestamps (they then run slower: on an H200 a decode step of
    /// Qwen3-4B takes 3.26 ms profiled against 3.01). The example times
    /// unprofiled graphs and turns this on for its profile only
    /// ([`Model::start_profiling`]).
    pub profile: bool,
    /// Keep the KV cache in f32 (the default: exact against an f32
    /// reference, and no conversions); else it is in the weights' dtype
    /// (half the memory and attention reads, at a conversion of the
    /// attention output per layer and step, and q's too in the two-op form;
    /// q, k, v and the attention output rounded to 16 bits).
    pub kv_f32: bool,
    /// Record each decode layer's q/k norms, rotary and KV append inside
    /// its attention dispatch (`nn::attention_decode_qkv`: one launch
    /// fewer per layer, and q, k and v read in place from the q|k|v
    /// projection's output) where the adapter has subgroup arithmetic;
    /// else the two ops (`qk_norm_rope_append`, then `attention_decode`).
    pub fused_qk: bool,
    /// Record each decode layer's MLP (RMSNorm, gate|up, SiLU·mul, down
    /// and the residual) as one fused `ops::swiglu_mlp` dispatch
    /// (`ops::MlpPlan::fused`; up to 4 sequences, on adapters with f32
    /// atomic adds); else (the default: on an H200 the fused kernel made
    /// the step 3.48 ms against 3.00), and always in prefill, the norm
    /// fused into gate|up, then down with the residual.
    pub fused_mlp: bool,
    /// How the decode step computes its projections: exact f32 activations
    /// (the default), or `ops::choose_linear`'s own plan, which rounds the
    /// inputs of the tensor-core products it picks (from 5 sequences with
    /// 16-bit weights) to f16.
    pub decode_matmul: DecodeMatmul,
}

impl Default for ModelOptions {
    fn default() -> Self {
        ModelOptions {
            batch: 1,
            max_seq: 512,
            prefill_chunk: 64,
            prefill_matmul: PrefillMatmul::Auto,
            sample: None,
            profile: false,
            kv_f32: true,
            fused_qk: true,
            fused_mlp: false,
            decode_matmul: DecodeMatmul::Exact,
        }
    }
}

/// What went wrong in the model.
#[derive(Debug)]
pub enum ModelError {
    /// The checkpoint could not be loaded.
    Load(LoadError),
    /// A device call failed.
    Device(vkcompute::Error),
    /// An argument out of range: what, and why.
    Input {
        /// The argument.
        what: &'static str,
        /// What was wrong and the limit.
        detail: String,
    },
    /// A kernel's guard counted out-of-range input (a token id past the
    /// vocabulary, a cache position past its end).
    Guard {
        /// Which guard.
        what: &'static str,
        /// How many times it tripped.
        count: u32,
    },
}

impl fmt::Display for ModelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ModelError::Load(e) => write!(f, "loading: {e}"),
            ModelError::Device(e) => write!(f, "device: {e}"),
            ModelError::Input { what, detail } => write!(f, "{what}: {detail}"),
            ModelError::Guard { what, count } => {
                write!(f, "{what}: the GPU guard tripped {count} times")
            }
        }
    }
}

impl std::error::Error for ModelError {}

impl From<LoadError> for ModelError {
    fn from(e: LoadError) -> Self {
        ModelError::Load(e)
    }
}

impl From<vkcompute::Error> for ModelError {
    fn from(e: vkcompute::Error) -> Self {
        ModelError::Device(e)
    }
}

/// The model's results.
pub type Result<T> = std::result::Result<T, ModelError>;

fn input(what: &'static str, detail: String) -> ModelError {
    ModelError::Input { what, detail }
}

/// One decoder layer's weights and cache.
pub(crate) struct Layer {
    pub(crate) in_norm: Buffer<f32>,
    /// q rows, then k rows, then v rows, `[qw + 2 kvw, hidden]`.
    pub(crate) qkv: WBuf,
    pub(crate) o: WBuf,
    pub(crate) q_norm: Option<Buffer<f32>>,
    pub(crate) k_norm: Option<Buffer<f32>>,
    pub(crate) post_norm: Buffer<f32>,
    /// gate rows then up rows, `[2 I, hidden]`.
    pub(crate) gate_up: WBuf,
    pub(crate) down: WBuf,
    /// `[batch, kv_heads, max_seq, head_dim]`.
    pub(crate) cache: KvCache,
}

/// Where the load's time went.
#[derive(Debug, Clone, Copy)]
pub struct LoadStats {
    /// Wall time of the whole load (checks, uploads, graph recording).
    pub total: Duration,
    /// Wall time of the weight uploads.
    pub upload: Duration,
    /// Bytes of weights uploaded.
    pub weight_bytes: u64,
}

/// The decoder on a device.
pub struct Model {
    pub(crate) gpu: Device,
    pub(crate) dims: Dims,
    pub(crate) opts: ModelOptions,
    pub(crate) max_seq: u32,
    pub(crate) embed: WBuf,
    pub(crate) layers: Vec<Layer>,
    pub(crate) norm: Buffer<f32>,
    /// `None`: tied to the embedding table.
    pub(crate) lm_head: Option<WBuf>,
    pub(crate) inv_freq: Buffer<f32>,
    /// The next tokens and the guard words ([`State`]).
    pub(crate) state: State,
    pub(crate) pos: Buffer<u32>,
    pub(crate) lens: Buffer<u32>,
    pub(crate) logits: Buffer<f32>,
    pub(crate) step_rows: Rows,
    pub(crate) graph: Option<Graph>,
    /// The last prefill's GPU timestamps per command (with `profile`).
    pub(crate) prefill_profile: Option<vkcompute::Profile>,
    /// The host's copy of each sequence's next position.
    pub(crate) pos_host: Vec<u32>,
    /// Tokens that end a sequence (the config's `eos_token_id`).
    pub(crate) eos: Vec<u32>,
    pub(crate) load_stats: LoadStats,
    /// The f16 prefill's two weight slots (each of its largest layer
    /// weight), allocated at their first use.
    pub(crate) w16: Option<[Buffer<F16>; 2]>,
}

fn host_f32(t: &HostTensor<'_>) -> Vec<f32> {
    t.to_f32()
}

impl Model {
    /// Checks the checkpoint against the device, uploads its weights,
    /// allocates the cache and records the decode step.
    pub fn load(gpu: &Device, ck: &Checkpoint, opts: ModelOptions) -> Result<Model> {
        let t0 = Instant::now();
        let c = &ck.config;
        let d = Dims::of(c, opts.kv_f32);
        if opts.batch == 0 || opts.batch > MAX_BATCH {
            return Err(input(
                "batch",
                format!("{} is outside 1..={MAX_BATCH}", opts.batch),
            ));
        }
        if opts.prefill_chunk == 0 || opts.prefill_chunk > ops::LINEAR_MAX_M {
            return Err(input(
                "prefill_chunk",
                format!(
                    "{} is outside 1..={}",
                    opts.prefill_chunk,
                    ops::LINEAR_MAX_M
                ),
            ));
        }
        if opts.max_seq == 0 {
            return Err(input("max_seq", "is 0; it must be at least 1".into()));
        }
        if let Some(s) = &opts.sample {
            s.check()?;
        }
        let max_seq = opts
            .max_seq
            .checked_next_multiple_of(nn::DECODE_CHUNK)
            .ok_or_else(|| input("max_seq", format!("{} is too large", opts.max_seq)))?;
        ck.check_layout()?;
        let (max_buffer, device_bytes) = device_limits(gpu);
        ck.check_fits(max_buffer, device_bytes)?;
        let cache_elems = u64::from(opts.batch)
            * u64::from(d.kv_heads)
            * u64::from(max_seq)
            * u64::from(d.head_dim);
        let cache_bytes = cache_elems * d.kv.bytes() as u64;
        let gate_up = 2 * u64::from(d.inter) * u64::from(d.hidden) * d.dtype.bytes() as u64;
        let caches = 2 * cache_bytes * u64::from(c.layers);
        for (what, bytes, limit) in [
            ("one layer's key cache", cache_bytes, max_buffer),
            ("one layer's merged gate|up weight", gate_up, max_buffer),
            (
                "the weights and the KV cache (device memory)",
                ck.total_bytes() + caches,
                device_bytes,
            ),
        ] {
            if bytes > limit {
                return Err(ModelError::Load(LoadError::TooLarge {
                    what: what.into(),
                    bytes,
                    limit,
                }));
            }
        }

        let tu = Instant::now();
        let mut weight_bytes = 0u64;
        let mut up = |parts: &[&HostTensor<'_>]| -> Result<WBuf> {
            let w = WBuf::upload(gpu, parts)?;
            weight_bytes += w.bytes();
            Ok(w)
        };
        let (h, i, qw, kvw, hd) = (
            d.hidden as usize,
            d.inter as usize,
            d.qw() as usize,
            d.kvw() as usize,
            d.head_dim as usize,
        );
        let vocab = d.vocab as usize;
        let embed = up(&[&ck.tensor("model.embed_tokens.weight", &[vocab, h])?])?;
        let norm_w = |name: &str, n: usize| -> Result<Buffer<f32>> {
            Ok(gpu.upload(&host_f32(&ck.tensor(name, &[n])?))?)
        };
        let mut layers = Vec::with_capacity(c.layers as usize);
        for l in 0..c.layers {
            let t = |suffix: &str, shape: &[usize]| ck.tensor(&layer_name(l, suffix), shape);
            let (qk_q, qk_k) = if d.qk_norm {
                (
                    Some(norm_w(&layer_name(l, "self_attn.q_norm.weight"), hd)?),
                    Some(norm_w(&layer_name(l, "self_attn.k_norm.weight"), hd)?),
                )
            } else {
                (None, None)
            };
            layers.push(Layer {
                in_norm: norm_w(&layer_name(l, "input_layernorm.weight"), h)?,
                qkv: up(&[
                    &t("self_attn.q_proj.weight", &[qw, h])?,
                    &t("self_attn.k_proj.weight", &[kvw, h])?,
                    &t("self_attn.v_proj.weight", &[kvw, h])?,
                ])?,
                o: up(&[&t("self_attn.o_proj.weight", &[h, qw])?])?,
                q_norm: qk_q,
                k_norm: qk_k,
                post_norm: norm_w(&layer_name(l, "post_attention_layernorm.weight"), h)?,
                gate_up: up(&[
                    &t("mlp.gate_proj.weight", &[i, h])?,
                    &t("mlp.up_proj.weight", &[i, h])?,
                ])?,
                down: up(&[&t("mlp.down_proj.weight", &[h, i])?])?,
                cache: KvCache::new(gpu, d.kv, cache_elems as usize)?,
            });
        }
        let norm = norm_w("model.norm.weight", h)?;
        let lm_head = if c.tie_word_embeddings {
            None
        } else {
            Some(up(&[&ck.tensor("lm_head.weight", &[vocab, h])?])?)
        };
        gpu.wait_idle()?;
        let upload = tu.elapsed();

        let inv_freq = gpu.upload(&nn::rope_inv_freq(
            d.head_dim,
            c.rope_theta,
            c.rope_scaling.as_ref(),
        )?)?;
        let b = opts.batch as usize;
        let mut model = Model {
            gpu: gpu.clone(),
            dims: d,
            opts,
            max_seq,
            embed,
            layers,
            norm,
            lm_head,
            inv_freq,
            state: State::new(gpu, b)?,
            pos: gpu.upload(&vec![0u32; b])?,
            lens: gpu.upload(&vec![1u32; b])?,
            logits: gpu.alloc::<f32>(b * vocab)?,
            step_rows: Rows::new(gpu, &d, opts.batch)?,
            graph: None,
            prefill_profile: None,
            pos_host: vec![0; b],
            eos: c.eos_token_ids.clone(),
            load_stats: LoadStats {
                total: Duration::ZERO,
                upload,
                weight_bytes,
            },
            w16: None,
        };
        model.graph = Some(model.record_step()?);
        model.load_stats.total = t0.elapsed();
        Ok(model)
    }

    /// The model's dimensions.
    pub fn dims(&self) -> Dims {
        self.dims
    }

    /// Positions each sequence's cache holds (the option rounded up).
    pub fn max_seq(&self) -> u32 {
        self.max_seq
    }

    /// Sequences per decode step.
    pub fn batch(&self) -> u32 {
        self.opts.batch
    }

    /// Load timings and bytes.
    pub fn load_stats(&self) -> LoadStats {
        self.load_stats
    }

    /// Weight bytes one decode step streams: every layer's matrices and
    /// the LM head (the embedding table when tied), not the gathered rows.
    pub fn step_weight_bytes(&self) -> u64 {
        let layers: u64 = self
            .layers
            .iter()
            .map(|l| l.qkv.bytes() + l.o.bytes())
            .chain(
                self.layers
                    .iter()
                    .map(|l| l.gate_up.bytes() + l.down.bytes()),
            )
            .sum();
        layers + self.lm_head.as_ref().unwrap_or(&self.embed).bytes()
    }

    /// Bytes of every layer's KV cache (all sequences, the whole length).
    pub fn cache_bytes(&self) -> u64 {
        self.layers.iter().map(|l| l.cache.bytes()).sum()
    }

    /// Chooses the prefill's path for the next prefills.
    pub fn set_prefill_matmul(&mut self, p: PrefillMatmul) {
        self.opts.prefill_matmul = p;
    }

    /// Whether the prefill of a prompt of `rows` tokens takes the f16
    /// path (the option, resolved on this adapter and these weights).
    pub fn prefill_uses_f16(&self, rows: u32) -> bool {
        self.opts
            .prefill_matmul
            .uses_f16(self.gpu.info(), self.dims.dtype, rows)
    }

    /// The path of the prefill of a prompt of `rows` tokens, in words.
    pub fn prefill_path(&self, rows: u32) -> &'static str {
        match (
            self.prefill_uses_f16(rows),
            prefill16::tensor_cores(self.gpu.info()),
        ) {
            (false, _) => "exact (f32 activations, ops::linear in 64-row chunks)",
            (true, true) => "f16 (tensor cores, all prompt rows per product)",
            (true, false) => "f16 (portable kernel, all prompt rows per product)",
        }
    }

    /// The device.
    pub fn device(&self) -> &Device {
        &self.gpu
    }

    pub(crate) fn lm_head(&self) -> &WBuf {
        self.lm_head.as_ref().unwrap_or(&self.embed)
    }

    /// Records the gather of `ids` (m tokens) into `r.h`.
    pub(crate) fn record_embed(
        &self,
        b: &mut Batch,
        ids: &impl NnOperand<u32>,
        r: &Rows,
    ) -> Result<()> {
        let (v, h) = (self.dims.vocab, self.dims.hidden);
        let f = &self.state.embed_flag()?;
        match (&self.embed, &r.emb16) {
            (WBuf::F32(t), _) => nn::embedding(b, t, ids, &r.h, f, v, h)?,
            (WBuf::F16(t), Some(Emb16::F16(e))) => {
                nn::embedding(b, t, ids, e, f, v, h)?;
                ops::convert(b, e, &r.h)?;
            }
            (WBuf::Bf16(t), Some(Emb16::Bf16(e))) => {
                nn::embedding(b, t, ids, e, f, v, h)?;
                ops::convert(b, e, &r.h)?;
            }
            _ => {
                return Err(input(
                    "embedding",
                    "the activation rows do not match the table's dtype".into(),
                ))
            }
        }
        Ok(())
    }

    /// Records a layer up to its attention: norm fused into the q|k|v
    /// projection (q, k and v then views of its output, or split out of
    /// it), then one fused op for the q/k norms (Qwen3), rotary and the
    /// append of k and v to elements `range` of the cache
    /// ([`attend::qk`]): `r`'s rows are `seqs` sequences of `r.m / seqs`
    /// tokens each, sequence `b`'s first at position `c.pos[b]`. The
    /// projection takes the products `p` ([`Model::project_normed`]).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn record_pre_attn(
        &self,
        b: &mut Batch,
        l: &Layer,
        r: &Rows,
        c: &Cursor,
        range: std::ops::Range<usize>,
        seqs: u32,
        p: Products<'_>,
    ) -> Result<()> {
        let d = &self.dims;
        let m = r.m;
        self.record_qkv(b, l, r, p)?;
        let qs = QkShape {
            batch: seqs,
            steps: m / seqs,
            q_heads: d.heads,
            kv_heads: d.kv_heads,
            head_dim: d.head_dim,
            max_seq: self.max_seq,
        };
        attend::qk(b, r, l, range, c, &self.inv_freq, d.eps, qs)
    }

    /// Records a layer's norm fused into the q|k|v projection, q, k and v
    /// then views of its output or split out of it (the products `p`);
    /// on the f16 path with q, k and v apart, three products into them
    /// ([`Half::project_split`]), nothing to split.
    fn record_qkv(&self, b: &mut Batch, l: &Layer, r: &Rows, p: Products<'_>) -> Result<()> {
        if let (Products::Half(h), Some(parts), false) = (p, r.parts(), l.qkv.is_f32()) {
            let d = &self.dims;
            nn::rms_norm(b, &r.h, &l.in_norm, &r.xn, r.m, d.hidden, d.eps)?;
            let [q, k, v] = parts;
            return h.project_split(b, &r.xn, &l.qkv, [q, k, v], r.m, d.hidden);
        }
        self.project_qkv(b, l, r, p)?;
        r.split_qkv(b)
    }

    /// Records a layer's norm fused into the q|k|v projection into `r.qkv`
    /// (`[m, qw + 2 · kvw]`), not split.
    fn project_qkv(&self, b: &mut Batch, l: &Layer, r: &Rows, p: Products<'_>) -> Result<()> {
        let d = &self.dims;
        let shape = (r.m, d.hidden, d.qw() + 2 * d.kvw());
        let norm = (&l.in_norm, &r.xn);
        self.project_normed(b, p, &r.h, norm, &l.qkv, &r.qkv, shape, Epilogue::None)
    }

    /// Records a layer from its attention output `r.ao`: o_proj with the
    /// residual, then the MLP: with `fused_mlp` where the fused kernel
    /// applies, one `ops::swiglu_mlp` dispatch; else the norm fused into
    /// gate|up with SiLU·mul, down with the residual (the products `p`,
    /// [`Model::project`]).
    pub(crate) fn record_post_attn(
        &self,
        b: &mut Batch,
        l: &Layer,
        r: &Rows,
        p: Products<'_>,
        fused_mlp: bool,
    ) -> Result<()> {
        let d = &self.dims;
        let m = r.m;
        let res = Epilogue::Residual(&r.h);
        self.project(b, p, &r.ao, &l.o, &r.h, (m, d.qw(), d.hidden), res)?;
        let fuses = self.gpu.info().float32_atomic_add && m <= ops::MLP_FUSED_MAX_M;
        if fused_mlp && fuses && !matches!(p, Products::Half(_)) {
            let plan = ops::MlpPlan::fused(m);
            let norm = Some((&l.post_norm, d.eps));
            let (gu, dn) = (l.gate_up.weights(), l.down.weights());
            let shape = (m, d.hidden, d.inter);
            return Ok(ops::swiglu_mlp_with_plan(
                b, &r.h, norm, gu, dn, &r.h, shape, plan,
            )?);
        }
        let gu = (m, d.hidden, 2 * d.inter);
        let norm = (&l.post_norm, &r.xn);
        self.project_normed(b, p, &r.h, norm, &l.gate_up, &r.mlp, gu, Epilogue::SiluMul)?;
        let res = Epilogue::Residual(&r.h);
        self.project(b, p, &r.mlp, &l.down, &r.h, (m, d.inter, d.hidden), res)?;
        Ok(())
    }

    pub(crate) fn scale(&self) -> f32 {
        1.0 / (self.dims.head_dim as f32).sqrt()
    }

    /// Profiles from now on: the decode graph is recorded again with
    /// per-command GPU timestamps, and later prefills record theirs.
    pub(crate) fn start_profiling(&mut self) -> Result<()> {
        self.opts.profile = true;
        // The unprofiled graph goes first, so that the two never hold
        // their resources at once.
        self.graph = None;
        self.graph = Some(self.record_step()?);
        Ok(())
    }

    /// Records the decode step of all sequences (see the module).
    fn record_step(&self) -> Result<Graph> {
        let d = &self.dims;
        let r = &self.step_rows;
        let bsz = self.opts.batch;
        let prof = if self.opts.profile {
            Profiling::Commands
        } else {
            Profiling::Off
        };
        let mut rec = self.gpu.graph_recorder_with(prof)?;
        let b: &mut Batch = &mut rec;
        let tokens = self.state.tokens()?;
        let kv_flag = self.state.kv_flag()?;
        self.record_embed(b, &tokens, r)?;
        let ds = DecodeShape {
            batch: bsz,
            q_heads: d.heads,
            kv_heads: d.kv_heads,
            head_dim: d.head_dim,
            max_seq: self.max_seq,
        };
        let cursor = Cursor {
            pos: &self.pos,
            lens: &self.lens,
            flag: &kv_flag,
        };
        let all = 0..(bsz * d.kv_heads * self.max_seq * d.head_dim) as usize;
        let fused = self.opts.fused_qk && self.gpu.info().subgroup_arithmetic;
        let p = self.decode_products();
        for l in &self.layers {
            if fused {
                self.project_qkv(b, l, r, p)?;
                let qk = (&self.inv_freq, d.eps);
                attend::decode_qkv(b, r, l, &cursor, qk, ds, self.scale())?;
            } else {
                self.record_pre_attn(b, l, r, &cursor, all.clone(), bsz, p)?;
                attend::decode(b, r, &l.cache, &cursor, ds, self.scale())?;
            }
            self.record_post_attn(b, l, r, p, self.opts.fused_mlp)?;
        }
        // The LM head takes the step's products too (an exact step keeps
        // f32 activations in every product).
        let head = (bsz, d.hidden, d.vocab);
        let norm = (&self.norm, &r.xn);
        self.project_normed(
            b,
            p,
            &r.h,
            norm,
            self.lm_head(),
            &self.logits,
            head,
            Epilogue::None,
        )?;
        match self.opts.sample {
            Some(p) => nn::sample(b, &self.logits, &self.pos, &tokens, bsz, d.vocab, p)?,
            None => nn::argmax(b, &self.logits, &tokens, bsz, d.vocab)?,
        }
        ops::increment(b, &self.pos, 1)?;
        ops::increment(b, &self.lens, 1)?;
        Ok(rec.finish()?)
    }

    /// Generates up to `max_new` tokens for each prompt (one sequence
    /// each, at most the batch), reading the tokens back after every step
    /// as an interactive loop does; a sequence ends at its first
    /// end-of-sequence token (kept), and the loop when all have ended or
    /// the longest prompt's cache is full. Returns each sequence's new
    /// tokens.
    pub fn generate(&mut self, prompts: &[Vec<u32>], max_new: u32) -> Result<Vec<Vec<u32>>> {
        if prompts.len() > self.opts.batch as usize {
            return Err(input(
                "prompts",
                format!(
                    "{} prompts; the batch is {}",
                    prompts.len(),
                    self.opts.batch
                ),
            ));
        }
        let mut out = vec![Vec::new(); prompts.len()];
        let mut done = vec![false; prompts.len()];
        for (s, p) in prompts.iter().enumerate() {
            self.prefill(s as u32, p)?;
        }
        let mut next = self.tokens()?;
        for step in 0..max_new {
            for (s, o) in out.iter_mut().enumerate() {
                if !done[s] {
                    o.push(next[s]);
                    done[s] = self.eos.contains(&next[s]);
                }
            }
            let full = prompts
                .iter()
                .enumerate()
                .any(|(s, _)| self.pos_host[s] >= self.max_seq);
            if step + 1 == max_new || done.iter().all(|&d| d) || full {
                break;
            }
            self.step()?.wait()?;
            next = self.tokens()?;
        }
        Ok(out)
    }

    /// Launches one decode step of every sequence (one graph launch).
    /// A sequence whose cache is full is an error before the launch.
    pub fn step(&mut self) -> Result<Ticket> {
        if let Some((b, &p)) = self
            .pos_host
            .iter()
            .enumerate()
            .find(|(_, &p)| p >= self.max_seq)
        {
            return Err(input(
                "step",
                format!(
                    "sequence {b} is at position {p}; its cache holds max_seq = {}",
                    self.max_seq
                ),
            ));
        }
        let graph = self.graph.as_ref().expect("recorded at load");
        let t = graph.launch()?;
        for p in &mut self.pos_host {
            *p += 1;
        }
        Ok(t)
    }

    /// The decode graph (for its profile and counters).
    pub fn graph(&self) -> &Graph {
        self.graph.as_ref().expect("recorded at load")
    }

    /// The next token of each sequence (read back; waits for the last
    /// step), after checking the kernels' guards.
    pub fn tokens(&self) -> Result<Vec<u32>> {
        self.state.read()
    }

    /// The last step's logits, `[batch, vocab]`.
    pub fn logits(&self) -> Result<Vec<f32>> {
        self.check_guards()?;
        Ok(self.logits.download()?)
    }

    /// Each sequence's next position, as the host counts it.
    pub fn positions(&self) -> &[u32] {
        &self.pos_host
    }

    /// Sets every sequence's next token (teacher forcing); written after
    /// the last launch's use of the buffer.
    pub fn set_tokens(&self, ids: &[u32]) -> Result<()> {
        if ids.len() != self.opts.batch as usize {
            return Err(input(
                "tokens",
                format!("has {} ids; the batch is {}", ids.len(), self.opts.batch),
            ));
        }
        if let Some(&t) = ids.iter().find(|&&t| t >= self.dims.vocab) {
            return Err(input(
                "tokens",
                format!("{t} is past the vocabulary of {}", self.dims.vocab),
            ));
        }
        self.state.buf.write(0, ids)?;
        Ok(())
    }

    /// Errors when a kernel guard counted out-of-range input since load.
    pub fn check_guards(&self) -> Result<()> {
        self.state.read().map(|_| ())
    }
}

/// The index of the largest value (the lowest on ties; NaN wins, as the
/// GPU's argmax).
pub fn argmax(x: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &v) in x.iter().enumerate() {
        let b = x[best];
        if b.is_nan() {
            break;
        }
        if v.is_nan() || v > b {
            best = i;
        }
    }
    best as u32
}
