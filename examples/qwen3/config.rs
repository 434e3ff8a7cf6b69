//! A Hugging Face `config.json` for Qwen3 and Llama, read into [`Config`]
//! and checked against what the crate's ops take, before any weight is
//! touched: every bad field is a [`LoadError::Config`] naming the field and
//! the limit, an unsupported model a [`LoadError::UnknownArchitecture`].

use std::path::Path;

use serde_json::{Map, Value};
use vkcompute::ops::nn::{RopeScaling, MAX_ROTARY_HEAD_DIM};
use vkcompute::ops::OpsError;

use crate::checkpoint::LoadError;

/// The model families this example runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arch {
    /// `Qwen3ForCausalLM`: Llama's layout plus RMS norms on the queries and
    /// keys of every head (`q_norm`, `k_norm`).
    Qwen3,
    /// `LlamaForCausalLM`.
    Llama,
}

impl Arch {
    /// The `architectures` entry Hugging Face writes for this family.
    pub fn hf_class(self) -> &'static str {
        match self {
            Arch::Qwen3 => "Qwen3ForCausalLM",
            Arch::Llama => "LlamaForCausalLM",
        }
    }

    /// The `model_type` Hugging Face writes for this family.
    pub fn model_type(self) -> &'static str {
        match self {
            Arch::Qwen3 => "qwen3",
            Arch::Llama => "llama",
        }
    }
}

/// The storage type of a checkpoint's weights.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WeightDtype {
    /// 32-bit IEEE float (`F32`, `float32`).
    F32,
    /// 16-bit IEEE float (`F16`, `float16`).
    F16,
    /// bfloat16 (`BF16`, `bfloat16`).
    Bf16,
}

impl WeightDtype {
    /// Bytes per element.
    pub fn bytes(self) -> usize {
        match self {
            WeightDtype::F32 => 4,
            WeightDtype::F16 | WeightDtype::Bf16 => 2,
        }
    }

    /// The name a safetensors header gives it: `F32`, `F16`, `BF16`.
    pub fn name(self) -> &'static str {
        match self {
            WeightDtype::F32 => "F32",
            WeightDtype::F16 => "F16",
            WeightDtype::Bf16 => "BF16",
        }
    }

    /// The name `config.json`'s `torch_dtype` gives it: `float32`,
    /// `float16`, `bfloat16`.
    pub fn torch_name(self) -> &'static str {
        match self {
            WeightDtype::F32 => "float32",
            WeightDtype::F16 => "float16",
            WeightDtype::Bf16 => "bfloat16",
        }
    }

    /// The dtype a safetensors header names, if it is one of these three.
    pub fn from_name(name: &str) -> Option<WeightDtype> {
        [WeightDtype::F32, WeightDtype::F16, WeightDtype::Bf16]
            .into_iter()
            .find(|d| d.name() == name)
    }

    /// The dtype a `torch_dtype` string names, if it is one of these three.
    pub fn from_torch_name(name: &str) -> Option<WeightDtype> {
        [WeightDtype::F32, WeightDtype::F16, WeightDtype::Bf16]
            .into_iter()
            .find(|d| d.torch_name() == name)
    }
}

impl std::fmt::Display for WeightDtype {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A model's hyperparameters, from its `config.json`.
#[derive(Debug, Clone)]
pub struct Config {
    /// The model family (`architectures[0]`, else `model_type`).
    pub arch: Arch,
    /// `hidden_size`: the width of the residual stream.
    pub hidden: u32,
    /// `intermediate_size`: the width of the MLP.
    pub intermediate: u32,
    /// `num_hidden_layers`.
    pub layers: u32,
    /// `num_attention_heads`: query heads.
    pub heads: u32,
    /// `num_key_value_heads` (default: `heads`); divides `heads`.
    pub kv_heads: u32,
    /// `head_dim` (default: `hidden / heads`); even, at most
    /// [`MAX_ROTARY_HEAD_DIM`].
    pub head_dim: u32,
    /// `vocab_size`.
    pub vocab: u32,
    /// `rope_theta` (default 10000).
    pub rope_theta: f64,
    /// `rope_scaling`: `None` for `null`, absent or `"rope_type":
    /// "default"`; Llama 3's scaling otherwise.
    pub rope_scaling: Option<RopeScaling>,
    /// `rms_norm_eps` (default 1e-6).
    pub rms_norm_eps: f64,
    /// `tie_word_embeddings` (default false): the LM head is the embedding.
    pub tie_word_embeddings: bool,
    /// `max_position_embeddings`.
    pub max_position: u32,
    /// `eos_token_id`: a number, a list or absent (empty).
    pub eos_token_ids: Vec<u32>,
    /// The weights' storage type: `dtype` or `torch_dtype`; when the config
    /// names neither, [`Config::from_json`] says `F32` (what Hugging Face
    /// loads such a model as) and [`Checkpoint::open`](crate::checkpoint::Checkpoint::open)
    /// takes the embedding's dtype instead.
    pub dtype: WeightDtype,
}

fn config_err(field: &str, problem: impl Into<String>) -> LoadError {
    LoadError::Config {
        field: field.to_string(),
        problem: problem.into(),
    }
}

/// A JSON value's kind, for messages.
fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// A field read from the config's top-level object; `null` counts as
/// absent (Hugging Face writes `null` for unset optional fields).
struct Fields<'a>(&'a Map<String, Value>);

impl<'a> Fields<'a> {
    fn get(&self, name: &str) -> Option<&'a Value> {
        self.0.get(name).filter(|v| !v.is_null())
    }

    fn u32_or(&self, name: &str, default: Option<u32>) -> Result<u32, LoadError> {
        match self.get(name) {
            None => default.ok_or_else(|| config_err(name, "is missing")),
            Some(v) => as_u32(name, v),
        }
    }

    fn f64_or(&self, name: &str, default: f64) -> Result<f64, LoadError> {
        match self.get(name) {
            None => Ok(default),
            Some(v) => v
                .as_f64()
                .ok_or_else(|| config_err(name, format!("is {}, not a number", kind(v)))),
        }
    }

    fn bool_or(&self, name: &str, default: bool) -> Result<bool, LoadError> {
        match self.get(name) {
            None => Ok(default),
            Some(v) => v
                .as_bool()
                .ok_or_else(|| config_err(name, format!("is {}, not a boolean", kind(v)))),
        }
    }

    fn str_opt(&self, name: &str) -> Result<Option<&str>, LoadError> {
        match self.get(name) {
            None => Ok(None),
            Some(v) => v
                .as_str()
                .map(Some)
                .ok_or_else(|| config_err(name, format!("is {}, not a string", kind(v)))),
        }
    }
}

fn as_u32(name: &str, v: &Value) -> Result<u32, LoadError> {
    let n = v.as_u64().or_else(|| {
        // 4096.0 is a whole number too.
        v.as_f64()
            .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f <= f64::from(u32::MAX))
            .map(|f| f as u64)
    });
    match n {
        Some(n) => u32::try_from(n)
            .map_err(|_| config_err(name, format!("{n} exceeds the limit {}", u32::MAX))),
        None => Err(config_err(
            name,
            format!("is {v}, not a whole number in 0..={}", u32::MAX),
        )),
    }
}

fn arch_of(f: &Fields<'_>) -> Result<Arch, LoadError> {
    let known = |name: &str| {
        [Arch::Qwen3, Arch::Llama]
            .into_iter()
            .find(|a| a.hf_class() == name || a.model_type() == name)
    };
    if let Some(v) = f.get("architectures") {
        let first = match v.as_array().map(|a| a.first()) {
            Some(Some(Value::String(s))) => s,
            _ => {
                return Err(config_err(
                    "architectures",
                    format!("is {v}, not a list starting with a class name"),
                ))
            }
        };
        return known(first).ok_or_else(|| LoadError::UnknownArchitecture(first.clone()));
    }
    match f.str_opt("model_type")? {
        Some(t) => known(t).ok_or_else(|| LoadError::UnknownArchitecture(t.to_string())),
        None => Err(config_err(
            "architectures",
            "is missing, and so is model_type",
        )),
    }
}

fn eos_of(f: &Fields<'_>) -> Result<Vec<u32>, LoadError> {
    const NAME: &str = "eos_token_id";
    match f.get(NAME) {
        None => Ok(Vec::new()),
        Some(Value::Array(ids)) => ids.iter().map(|v| as_u32(NAME, v)).collect(),
        Some(v) => Ok(vec![as_u32(NAME, v)?]),
    }
}

fn dtype_of(f: &Fields<'_>) -> Result<Option<WeightDtype>, LoadError> {
    for name in ["dtype", "torch_dtype"] {
        if let Some(s) = f.str_opt(name)? {
            return WeightDtype::from_torch_name(s).map(Some).ok_or_else(|| {
                config_err(
                    name,
                    format!("{s:?} is not supported (float32, float16 or bfloat16)"),
                )
            });
        }
    }
    Ok(None)
}

/// Newer configs group the rotary settings in `rope_parameters` (its
/// `rope_theta`, `rope_type` and scaling fields) instead of `rope_theta`
/// and `rope_scaling` at the top level.
const ROPE_PARAMETERS: &str = "rope_parameters";

fn rope_parameters<'a>(f: &Fields<'a>) -> Result<Option<&'a Map<String, Value>>, LoadError> {
    match f.get(ROPE_PARAMETERS) {
        None => Ok(None),
        Some(Value::Object(o)) => Ok(Some(o)),
        Some(v) => Err(config_err(
            ROPE_PARAMETERS,
            format!("is {}, not null or an object", kind(v)),
        )),
    }
}

fn rope_theta_of(f: &Fields<'_>) -> Result<f64, LoadError> {
    const DEFAULT: f64 = 10000.0;
    if f.get("rope_theta").is_some() {
        return f.f64_or("rope_theta", DEFAULT);
    }
    match rope_parameters(f)? {
        Some(p) => Fields(p)
            .f64_or("rope_theta", DEFAULT)
            .map_err(|e| match e {
                LoadError::Config { problem, .. } => {
                    config_err("rope_parameters.rope_theta", problem)
                }
                other => other,
            }),
        None => Ok(DEFAULT),
    }
}

fn rope_scaling_of(f: &Fields<'_>) -> Result<Option<RopeScaling>, LoadError> {
    let (obj, group) = match f.get("rope_scaling") {
        Some(Value::Object(o)) => (o, "rope_scaling"),
        Some(v) => {
            return Err(config_err(
                "rope_scaling",
                format!("is {}, not null or an object", kind(v)),
            ))
        }
        None => match rope_parameters(f)? {
            Some(p) => (p, ROPE_PARAMETERS),
            None => return Ok(None),
        },
    };
    // Error fields name the object the config used.
    let field = |name: &str| format!("{group}.{name}");
    let ty = match ["rope_type", "type"].into_iter().find_map(|k| obj.get(k)) {
        Some(Value::String(t)) => t.as_str(),
        Some(v) => {
            return Err(config_err(
                &field("rope_type"),
                format!("is {}, not a string", kind(v)),
            ))
        }
        // rope_parameters may hold only rope_theta.
        None if group == ROPE_PARAMETERS => return Ok(None),
        None => return Err(config_err(&field("rope_type"), "is missing")),
    };
    if ty == "default" {
        // Hugging Face's name for unscaled rotary embedding.
        return Ok(None);
    }
    RopeScaling::from_config(ty, |name| obj.get(name).and_then(Value::as_f64))
        .map(Some)
        .map_err(|e| match e {
            vkcompute::Error::Ops(OpsError::Config {
                field: f, detail, ..
            }) => {
                let name = f.strip_prefix("rope_scaling.").unwrap_or(f);
                config_err(&field(name), detail)
            }
            other => config_err(group, other.to_string()),
        })
}

/// Refuses a setting the decoder of this example does not implement.
fn refuse_if(f: &Fields<'_>, name: &str, bad: bool, why: &str) -> Result<(), LoadError> {
    if f.bool_or(name, false)? == bad {
        return Err(config_err(name, format!("is {bad}: {why}")));
    }
    Ok(())
}

impl Config {
    /// Reads a `config.json`'s text. A missing or mistyped required field,
    /// a zero size, `heads` not a multiple of `kv_heads`, an odd `head_dim`
    /// or one above [`MAX_ROTARY_HEAD_DIM`], a `rope_scaling` the ops do
    /// not implement, biases or a sliding window, or an activation other
    /// than SiLU is a [`LoadError::Config`] naming the field; a family
    /// other than Qwen3 and Llama is [`LoadError::UnknownArchitecture`].
    pub fn from_json(text: &str) -> Result<Config, LoadError> {
        Ok(Self::parse(text)?.0)
    }

    /// Reads `dir/config.json` ([`Config::from_json`]); an unreadable file
    /// is [`LoadError::Io`] naming it, one past
    /// [`MAX_JSON_BYTES`](crate::checkpoint::MAX_JSON_BYTES)
    /// [`LoadError::TooLarge`].
    pub fn load(dir: &Path) -> Result<Config, LoadError> {
        Ok(Self::load_parsed(dir)?.0)
    }

    /// [`Config::load`], and whether the config named the weights' dtype.
    pub(crate) fn load_parsed(dir: &Path) -> Result<(Config, bool), LoadError> {
        let path = dir.join("config.json");
        Self::parse(&crate::checkpoint::read_json_text(&path)?)
    }

    /// The config, and whether it named the weights' dtype.
    fn parse(text: &str) -> Result<(Config, bool), LoadError> {
        let root: Value = serde_json::from_str(text)
            .map_err(|e| config_err("config.json", format!("is not JSON: {e}")))?;
        let map = root.as_object().ok_or_else(|| {
            config_err("config.json", format!("is {}, not an object", kind(&root)))
        })?;
        let f = Fields(map);
        let arch = arch_of(&f)?;
        let hidden = f.u32_or("hidden_size", None)?;
        let heads = f.u32_or("num_attention_heads", None)?;
        let dtype = dtype_of(&f)?;
        let c = Config {
            arch,
            hidden,
            intermediate: f.u32_or("intermediate_size", None)?,
            layers: f.u32_or("num_hidden_layers", None)?,
            heads,
            kv_heads: f.u32_or("num_key_value_heads", Some(heads))?,
            // With 0 heads, `check` names num_attention_heads.
            head_dim: f.u32_or("head_dim", Some(hidden.checked_div(heads).unwrap_or(0)))?,
            vocab: f.u32_or("vocab_size", None)?,
            rope_theta: rope_theta_of(&f)?,
            rope_scaling: rope_scaling_of(&f)?,
            rms_norm_eps: f.f64_or("rms_norm_eps", 1e-6)?,
            tie_word_embeddings: f.bool_or("tie_word_embeddings", false)?,
            max_position: f.u32_or("max_position_embeddings", None)?,
            eos_token_ids: eos_of(&f)?,
            dtype: dtype.unwrap_or(WeightDtype::F32),
        };
        if let Some(act) = f.str_opt("hidden_act")? {
            if act != "silu" {
                return Err(config_err(
                    "hidden_act",
                    format!("{act:?} is not supported (only \"silu\")"),
                ));
            }
        }
        let no_bias = "this decoder has no bias terms";
        refuse_if(&f, "attention_bias", true, no_bias)?;
        refuse_if(&f, "mlp_bias", true, no_bias)?;
        refuse_if(
            &f,
            "use_sliding_window",
            true,
            "this decoder attends to the whole context",
        )?;
        c.check()?;
        Ok((c, dtype.is_some()))
    }

    /// The limits every field must meet (see [`Config::from_json`]).
    pub fn check(&self) -> Result<(), LoadError> {
        for (field, v) in [
            ("hidden_size", self.hidden),
            ("intermediate_size", self.intermediate),
            ("num_hidden_layers", self.layers),
            ("num_attention_heads", self.heads),
            ("num_key_value_heads", self.kv_heads),
            ("head_dim", self.head_dim),
            ("vocab_size", self.vocab),
            ("max_position_embeddings", self.max_position),
        ] {
            if v == 0 {
                return Err(config_err(field, "is 0; it must be at least 1"));
            }
        }
        if self.heads.checked_mul(self.head_dim).is_none() {
            return Err(config_err(
                "num_attention_heads",
                format!(
                    "{} heads of head_dim {} exceed {} elements per token",
                    self.heads,
                    self.head_dim,
                    u32::MAX
                ),
            ));
        }
        if self.heads % self.kv_heads != 0 {
            return Err(config_err(
                "num_key_value_heads",
                format!(
                    "{} does not divide num_attention_heads ({})",
                    self.kv_heads, self.heads
                ),
            ));
        }
        if self.head_dim > MAX_ROTARY_HEAD_DIM || self.head_dim % 2 != 0 {
            return Err(config_err(
                "head_dim",
                format!(
                    "{} is not an even number in 2..={MAX_ROTARY_HEAD_DIM} (the ops' limit)",
                    self.head_dim
                ),
            ));
        }
        if !(self.rope_theta.is_finite() && self.rope_theta > 1.0) {
            return Err(config_err(
                "rope_theta",
                format!("{} is not a finite number > 1", self.rope_theta),
            ));
        }
        if !(self.rms_norm_eps.is_finite() && self.rms_norm_eps > 0.0) {
            return Err(config_err(
                "rms_norm_eps",
                format!("{} is not a finite number > 0", self.rms_norm_eps),
            ));
        }
        if let Some(&id) = self.eos_token_ids.iter().find(|&&id| id >= self.vocab) {
            return Err(config_err(
                "eos_token_id",
                format!("{id} is not below vocab_size ({})", self.vocab),
            ));
        }
        Ok(())
    }

    /// Width of the queries of one token: `heads * head_dim`.
    pub fn q_dim(&self) -> u32 {
        self.heads * self.head_dim
    }

    /// Width of the keys (and values) of one token: `kv_heads * head_dim`.
    pub fn kv_dim(&self) -> u32 {
        self.kv_heads * self.head_dim
    }
}
