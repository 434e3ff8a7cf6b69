//! The same decoder in f64 on the CPU, written from the architecture's
//! definition (not from the GPU path), to check the device model's logits.
//! Weights are the checkpoint's, widened exactly (a bf16 checkpoint's
//! reference uses the same bf16 values). Small models only: every weight is
//! held as f64.
//!
//! [`Fault`] switches in one deliberate bug each, so a test can show that
//! its comparison catches that class of mistake.

use vkcompute::ops::nn::RopeScaling;

use crate::checkpoint::{layer_name, Checkpoint, LoadError};
use crate::config::Arch;

/// A deliberate bug in the reference (for tests that prove a comparison
/// can fail).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The correct model.
    None,
    /// Keys rotated at position + 1, queries at their position (a uniform
    /// shift of both would cancel: attention sees only differences).
    RotaryOffByOne,
    /// Rotate-half with the halves' roles swapped (rotation by -angle).
    RotaryHalvesSwapped,
    /// Qwen3's per-head q/k norms skipped.
    SkipQkNorm,
    /// Query head `h` reads kv head `h % kv_heads` instead of
    /// `h / (heads / kv_heads)`.
    KvHeadModulo,
}

struct RefLayer {
    in_norm: Vec<f64>,
    q: Vec<f64>,
    k: Vec<f64>,
    v: Vec<f64>,
    o: Vec<f64>,
    q_norm: Option<Vec<f64>>,
    k_norm: Option<Vec<f64>>,
    post_norm: Vec<f64>,
    gate: Vec<f64>,
    up: Vec<f64>,
    down: Vec<f64>,
}

/// The f64 model.
pub struct Reference {
    hidden: usize,
    inter: usize,
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
    vocab: usize,
    eps: f64,
    inv_freq: Vec<f64>,
    embed: Vec<f64>,
    layers: Vec<RefLayer>,
    norm: Vec<f64>,
    lm_head: Option<Vec<f64>>,
}

/// `y = W x` for `W` `[rows, x.len()]` row-major.
fn matvec(w: &[f64], x: &[f64]) -> Vec<f64> {
    w.chunks_exact(x.len())
        .map(|row| row.iter().zip(x).map(|(a, b)| a * b).sum())
        .collect()
}

fn rms_norm(x: &[f64], w: &[f64], eps: f64) -> Vec<f64> {
    let ms = x.iter().map(|v| v * v).sum::<f64>() / x.len() as f64;
    let r = 1.0 / (ms + eps).sqrt();
    x.iter().zip(w).map(|(v, g)| v * r * g).collect()
}

/// Llama 3's stretch of one inverse frequency.
fn llama3(inv_freq: f64, s: &RopeScaling) -> f64 {
    match *s {
        RopeScaling::Llama3 {
            factor,
            low_freq_factor: low,
            high_freq_factor: high,
            original_max_position_embeddings: orig,
        } => {
            let orig = f64::from(orig);
            let wavelen = 2.0 * std::f64::consts::PI / inv_freq;
            if wavelen < orig / high {
                inv_freq
            } else if wavelen > orig / low {
                inv_freq / factor
            } else {
                let smooth = (orig / wavelen - low) / (high - low);
                (1.0 - smooth) * inv_freq / factor + smooth * inv_freq
            }
        }
        _ => panic!("the reference knows only Llama 3 rope scaling"),
    }
}

impl Reference {
    /// Reads every weight of `ck` as f64.
    pub fn load(ck: &Checkpoint) -> Result<Reference, LoadError> {
        let c = &ck.config;
        let (h, i) = (c.hidden as usize, c.intermediate as usize);
        let (heads, kvh, hd) = (c.heads as usize, c.kv_heads as usize, c.head_dim as usize);
        let vocab = c.vocab as usize;
        let get = |name: &str, shape: &[usize]| -> Result<Vec<f64>, LoadError> {
            Ok(ck.tensor(name, shape)?.to_f64())
        };
        let mut layers = Vec::new();
        for l in 0..c.layers {
            let t = |s: &str, shape: &[usize]| get(&layer_name(l, s), shape);
            let qk = c.arch == Arch::Qwen3;
            layers.push(RefLayer {
                in_norm: t("input_layernorm.weight", &[h])?,
                q: t("self_attn.q_proj.weight", &[heads * hd, h])?,
                k: t("self_attn.k_proj.weight", &[kvh * hd, h])?,
                v: t("self_attn.v_proj.weight", &[kvh * hd, h])?,
                o: t("self_attn.o_proj.weight", &[h, heads * hd])?,
                q_norm: if qk {
                    Some(t("self_attn.q_norm.weight", &[hd])?)
                } else {
                    None
                },
                k_norm: if qk {
                    Some(t("self_attn.k_norm.weight", &[hd])?)
                } else {
                    None
                },
                post_norm: t("post_attention_layernorm.weight", &[h])?,
                gate: t("mlp.gate_proj.weight", &[i, h])?,
                up: t("mlp.up_proj.weight", &[i, h])?,
                down: t("mlp.down_proj.weight", &[h, i])?,
            });
        }
        let inv_freq = (0..hd / 2)
            .map(|j| {
                let f = c.rope_theta.powf(-2.0 * j as f64 / hd as f64);
                c.rope_scaling.as_ref().map_or(f, |s| llama3(f, s))
            })
            .collect();
        Ok(Reference {
            hidden: h,
            inter: i,
            heads,
            kv_heads: kvh,
            head_dim: hd,
            vocab,
            eps: c.rms_norm_eps,
            inv_freq,
            embed: get("model.embed_tokens.weight", &[vocab, h])?,
            layers,
            norm: get("model.norm.weight", &[h])?,
            lm_head: if c.tie_word_embeddings {
                None
            } else {
                Some(get("lm_head.weight", &[vocab, h])?)
            },
        })
    }

    /// Rotate-half rotary embedding of one head at `pos`.
    fn rope(&self, x: &mut [f64], pos: usize, fault: Fault) {
        let half = self.head_dim / 2;
        for j in 0..half {
            let a = pos as f64 * self.inv_freq[j];
            let (s, c) = a.sin_cos();
            let (x0, x1) = (x[j], x[j + half]);
            if fault == Fault::RotaryHalvesSwapped {
                x[j] = x0 * c + x1 * s;
                x[j + half] = x1 * c - x0 * s;
            } else {
                x[j] = x0 * c - x1 * s;
                x[j + half] = x1 * c + x0 * s;
            }
        }
    }

    /// The logits at every position of `tokens` (causal), `[len, vocab]`.
    pub fn forward(&self, tokens: &[u32], fault: Fault) -> Vec<Vec<f64>> {
        let (hd, nh, nkv) = (self.head_dim, self.heads, self.kv_heads);
        let group = nh / nkv;
        let mut hs: Vec<Vec<f64>> = tokens
            .iter()
            .map(|&t| self.embed[t as usize * self.hidden..][..self.hidden].to_vec())
            .collect();
        let scale = 1.0 / (hd as f64).sqrt();
        for l in &self.layers {
            let mut qs = Vec::new();
            let mut ks = Vec::new();
            let mut vs = Vec::new();
            for (pos, h) in hs.iter().enumerate() {
                let x = rms_norm(h, &l.in_norm, self.eps);
                let mut q = matvec(&l.q, &x);
                let mut k = matvec(&l.k, &x);
                let v = matvec(&l.v, &x);
                let k_pos = pos + usize::from(fault == Fault::RotaryOffByOne);
                for (heads, w, n, p) in [
                    (&mut q, &l.q_norm, nh, pos),
                    (&mut k, &l.k_norm, nkv, k_pos),
                ] {
                    for head in heads.chunks_exact_mut(hd).take(n) {
                        if let (Some(w), false) = (w, fault == Fault::SkipQkNorm) {
                            let y = rms_norm(head, w, self.eps);
                            head.copy_from_slice(&y);
                        }
                        self.rope(head, p, fault);
                    }
                }
                qs.push(q);
                ks.push(k);
                vs.push(v);
            }
            for (i, h) in hs.iter_mut().enumerate() {
                let mut att = vec![0.0; nh * hd];
                for head in 0..nh {
                    let kvh = if fault == Fault::KvHeadModulo {
                        head % nkv
                    } else {
                        head / group
                    };
                    let q = &qs[i][head * hd..][..hd];
                    let sc: Vec<f64> = (0..=i)
                        .map(|j| {
                            let k = &ks[j][kvh * hd..][..hd];
                            q.iter().zip(k).map(|(a, b)| a * b).sum::<f64>() * scale
                        })
                        .collect();
                    let m = sc.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                    let w: Vec<f64> = sc.iter().map(|s| (s - m).exp()).collect();
                    let total: f64 = w.iter().sum();
                    for (j, wj) in w.iter().enumerate() {
                        let v = &vs[j][kvh * hd..][..hd];
                        for e in 0..hd {
                            att[head * hd + e] += wj / total * v[e];
                        }
                    }
                }
                let o = matvec(&l.o, &att);
                for (a, b) in h.iter_mut().zip(&o) {
                    *a += b;
                }
                let x = rms_norm(h, &l.post_norm, self.eps);
                let g = matvec(&l.gate, &x);
                let u = matvec(&l.up, &x);
                let act: Vec<f64> = g
                    .iter()
                    .zip(&u)
                    .map(|(g, u)| g / (1.0 + (-g).exp()) * u)
                    .collect();
                debug_assert_eq!(act.len(), self.inter);
                let dn = matvec(&l.down, &act);
                for (a, b) in h.iter_mut().zip(&dn) {
                    *a += b;
                }
            }
        }
        let head = self.lm_head.as_ref().unwrap_or(&self.embed);
        hs.iter()
            .map(|h| {
                let x = rms_norm(h, &self.norm, self.eps);
                let y = matvec(head, &x);
                debug_assert_eq!(y.len(), self.vocab);
                y
            })
            .collect()
    }
}
