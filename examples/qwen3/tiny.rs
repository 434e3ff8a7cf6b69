//! Tiny random checkpoints in Hugging Face's layout, for the tests and for
//! `--tiny DIR`: small enough to run anywhere, shaped to catch the usual
//! mistakes (grouped-query attention, a head dimension other than
//! `hidden / heads`, a vocabulary that is no power of two).

use std::collections::HashMap;
use std::path::Path;

use serde_json::{json, Value};
use vkcompute::ops::nn::RopeScaling;
use vkcompute::ops::{Bf16, F16};

use crate::checkpoint::{layout, INDEX_FILE, SINGLE_FILE};
use crate::config::{Arch, Config, WeightDtype};

/// The tiny model: hidden 64, intermediate 96, 2 layers, 4 heads over 2
/// key/value heads, head_dim 24, vocabulary 97, rope_theta 50000,
/// rms_norm_eps 1e-5, untied LM head, 256 positions, end of sequence 96.
pub fn tiny_config(arch: Arch, dtype: WeightDtype) -> Config {
    Config {
        arch,
        hidden: 64,
        intermediate: 96,
        layers: 2,
        heads: 4,
        kv_heads: 2,
        head_dim: 24,
        vocab: 97,
        rope_theta: 50000.0,
        rope_scaling: None,
        rms_norm_eps: 1e-5,
        tie_word_embeddings: false,
        max_position: 256,
        eos_token_ids: vec![96],
        dtype,
    }
}

/// The `config.json` Hugging Face would write for `c`.
pub fn config_json(c: &Config) -> String {
    let rope_scaling = match c.rope_scaling {
        None => Value::Null,
        Some(RopeScaling::Llama3 {
            factor,
            low_freq_factor,
            high_freq_factor,
            original_max_position_embeddings,
        }) => json!({
            "rope_type": "llama3",
            "factor": factor,
            "low_freq_factor": low_freq_factor,
            "high_freq_factor": high_freq_factor,
            "original_max_position_embeddings": original_max_position_embeddings,
        }),
        // A scaling this writer does not know: written under a name the
        // reader refuses, never silently dropped.
        Some(other) => json!({ "rope_type": format!("{other:?}") }),
    };
    let eos = match c.eos_token_ids.as_slice() {
        [] => Value::Null,
        [one] => json!(one),
        many => json!(many),
    };
    let v = json!({
        "architectures": [c.arch.hf_class()],
        "model_type": c.arch.model_type(),
        "hidden_size": c.hidden,
        "intermediate_size": c.intermediate,
        "num_hidden_layers": c.layers,
        "num_attention_heads": c.heads,
        "num_key_value_heads": c.kv_heads,
        "head_dim": c.head_dim,
        "vocab_size": c.vocab,
        "rope_theta": c.rope_theta,
        "rope_scaling": rope_scaling,
        "rms_norm_eps": c.rms_norm_eps,
        "tie_word_embeddings": c.tie_word_embeddings,
        "max_position_embeddings": c.max_position,
        "eos_token_id": eos,
        "torch_dtype": c.dtype.torch_name(),
        "hidden_act": "silu",
        "attention_bias": false,
    });
    serde_json::to_string_pretty(&v).unwrap_or_else(|e| format!("serialising config: {e}"))
}

/// splitmix64: a small seeded generator, the same on every platform.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [-1, 1), a multiple of 2^-23.
    fn uniform(&mut self) -> f32 {
        (self.next() >> 40) as f32 * 2f32.powi(-23) - 1.0
    }
}

/// `values` in `dtype`'s little-endian bytes (rounded to nearest even).
pub fn encode(values: &[f32], dtype: WeightDtype) -> Vec<u8> {
    match dtype {
        WeightDtype::F32 => values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        WeightDtype::F16 => values
            .iter()
            .flat_map(|&v| F16::from_f32(v).0.to_le_bytes())
            .collect(),
        WeightDtype::Bf16 => values
            .iter()
            .flat_map(|&v| Bf16::from_f32(v).0.to_le_bytes())
            .collect(),
    }
}

/// The tensors [`write_checkpoint`] writes for `c` and `seed` (the same
/// whatever the shard count): name, shape and bytes in `c.dtype`, in
/// [`layout`] order. Norm weights are 1 ± 0.2, the embedding ± 1, every
/// projection (the LM head too) uniform in ±√(3 / fan_in), so activations
/// keep about unit size through the layers.
pub fn tiny_tensors(c: &Config, seed: u64) -> Vec<(String, Vec<usize>, Vec<u8>)> {
    let mut rng = Rng(seed);
    layout(c)
        .into_iter()
        .map(|(name, shape)| {
            let n: usize = shape.iter().product();
            let (scale, offset) = if name.ends_with("norm.weight") {
                (0.2, 1.0)
            } else if name == "model.embed_tokens.weight" {
                (1.0, 0.0)
            } else {
                ((3.0 / shape[1] as f32).sqrt(), 0.0)
            };
            let values: Vec<f32> = (0..n).map(|_| offset + scale * rng.uniform()).collect();
            let bytes = encode(&values, c.dtype);
            (name, shape, bytes)
        })
        .collect()
}

fn st_dtype(d: WeightDtype) -> safetensors::Dtype {
    match d {
        WeightDtype::F32 => safetensors::Dtype::F32,
        WeightDtype::F16 => safetensors::Dtype::F16,
        WeightDtype::Bf16 => safetensors::Dtype::BF16,
    }
}

fn other(e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(e.to_string())
}

/// The name Hugging Face gives shard `i` (from 0) of `n`.
pub fn shard_name(i: usize, n: usize) -> String {
    format!("model-{:05}-of-{:05}.safetensors", i + 1, n)
}

/// Writes a tiny checkpoint for `c` into `dir` (created if need be):
/// `config.json` ([`config_json`]) and [`tiny_tensors`] through the
/// reference safetensors writer, in one `model.safetensors` or, for
/// `shards > 1`, in `model-0000i-of-0000n.safetensors` files with a
/// `model.safetensors.index.json` weight map.
pub fn write_checkpoint(dir: &Path, c: &Config, seed: u64, shards: usize) -> std::io::Result<()> {
    if shards == 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "a checkpoint has at least one shard",
        ));
    }
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join("config.json"), config_json(c))?;
    let tensors = tiny_tensors(c, seed);
    let meta = Some(HashMap::from([("format".to_string(), "pt".to_string())]));
    let per = tensors.len().div_ceil(shards);
    let mut weight_map = serde_json::Map::new();
    let mut total = 0usize;
    for i in 0..shards {
        let part = tensors.iter().skip(i * per).take(per);
        let views = part
            .clone()
            .map(|(name, shape, bytes)| {
                let view =
                    safetensors::tensor::TensorView::new(st_dtype(c.dtype), shape.clone(), bytes)
                        .map_err(other)?;
                Ok((name.as_str(), view))
            })
            .collect::<std::io::Result<Vec<_>>>()?;
        let file = if shards == 1 {
            SINGLE_FILE.to_string()
        } else {
            shard_name(i, shards)
        };
        safetensors::serialize_to_file(views, meta.clone(), &dir.join(&file)).map_err(other)?;
        for (name, _, bytes) in part {
            weight_map.insert(name.clone(), json!(file));
            total += bytes.len();
        }
    }
    if shards > 1 {
        let index = json!({ "metadata": { "total_size": total }, "weight_map": weight_map });
        std::fs::write(
            dir.join(INDEX_FILE),
            serde_json::to_string_pretty(&index).map_err(other)?,
        )?;
    }
    Ok(())
}

/// Writes `config_json` and a `model.safetensors` holding `tensors` as
/// given (name, dtype, shape, bytes) into `dir`, without checking that the
/// bytes match the shape: the writer for the bad-checkpoint tests. Tensors
/// lie in the given order; the header is padded to 8 bytes as the
/// reference writer does.
pub fn write_tensors(
    dir: &Path,
    config_json: &str,
    tensors: &[(String, WeightDtype, Vec<usize>, Vec<u8>)],
) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join("config.json"), config_json)?;
    let mut header = serde_json::Map::new();
    header.insert("__metadata__".into(), json!({ "format": "pt" }));
    let mut offset = 0usize;
    for (name, dtype, shape, bytes) in tensors {
        let end = offset + bytes.len();
        header.insert(
            name.clone(),
            json!({ "dtype": dtype.name(), "shape": shape, "data_offsets": [offset, end] }),
        );
        offset = end;
    }
    let mut text = serde_json::to_string(&Value::Object(header)).map_err(other)?;
    while text.len() % 8 != 0 {
        text.push(' ');
    }
    let mut out = Vec::with_capacity(8 + text.len() + offset);
    out.extend_from_slice(&(text.len() as u64).to_le_bytes());
    out.extend_from_slice(text.as_bytes());
    for (_, _, _, bytes) in tensors {
        out.extend_from_slice(bytes);
    }
    std::fs::write(dir.join(SINGLE_FILE), out)
}
