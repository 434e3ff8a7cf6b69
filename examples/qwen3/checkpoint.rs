//! A Hugging Face checkpoint directory: `config.json` plus the weights in
//! safetensors, one file (`model.safetensors`) or shards listed by
//! `model.safetensors.index.json`.
//!
//! Every header is read and checked before a byte of tensor data is
//! touched: the header length against the file, each tensor's
//! `data_offsets` within the file and equal to its element count times its
//! dtype's size, its dtype a safetensors dtype. Only then is the file
//! memory-mapped; [`Checkpoint::tensor`] hands out borrowed slices of the
//! map, so opening a checkpoint allocates nothing the size of the weights.
//!
//! The files must not be modified (truncated, rewritten) while a
//! [`Checkpoint`] maps them: the map would then show the new bytes, or
//! fault on pages past a new end of file. Hugging Face caches and
//! downloaded model directories are written once and only read after.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use memmap2::Mmap;
use serde_json::Value;
use vkcompute::ops::{Bf16, F16};

use crate::config::{Arch, Config, WeightDtype};

/// Largest safetensors header read (the format's reference reader's limit).
pub const MAX_HEADER_BYTES: u64 = 100_000_000;

/// Largest `config.json` or shard index read (real ones are kilobytes).
pub const MAX_JSON_BYTES: u64 = 64 << 20;

/// The single-file weights of a checkpoint.
pub const SINGLE_FILE: &str = "model.safetensors";
/// The index of a sharded checkpoint (its `weight_map` names each tensor's
/// shard).
pub const INDEX_FILE: &str = "model.safetensors.index.json";

/// Why a checkpoint could not be loaded; each names the file, field or
/// tensor at fault and, where there is one, the limit.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// A file could not be opened or read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
    /// A `config.json` field is missing, mistyped or out of range.
    #[error("config.json: {field}: {problem}")]
    Config {
        /// The field, e.g. `hidden_size` or `rope_scaling.rope_type`.
        field: String,
        /// What was wrong, with the limit.
        problem: String,
    },
    /// The config names a model family other than Qwen3 and Llama.
    #[error(
        "config.json: architecture {0:?} is not supported (Qwen3ForCausalLM or LlamaForCausalLM)"
    )]
    UnknownArchitecture(String),
    /// A tensor the model needs is in no file of the checkpoint.
    #[error("tensor {0} is missing from the checkpoint")]
    MissingTensor(String),
    /// A tensor has another shape than the config implies.
    #[error("tensor {tensor}: shape {got:?}, the config implies {want:?}")]
    Shape {
        /// The tensor.
        tensor: String,
        /// The shape the config implies.
        want: Vec<usize>,
        /// The shape in the file.
        got: Vec<usize>,
    },
    /// A tensor is stored in another dtype than the config's.
    #[error("tensor {tensor}: dtype {got}, the config's dtype is {want}")]
    Dtype {
        /// The tensor.
        tensor: String,
        /// The config's dtype.
        want: WeightDtype,
        /// The dtype in the file's header.
        got: String,
    },
    /// A file is shorter than its header says.
    #[error("{}: truncated: needs {need} bytes, the file has {have}", file.display())]
    Truncated {
        /// The file.
        file: PathBuf,
        /// The bytes its header implies.
        need: u64,
        /// The file's length.
        have: u64,
    },
    /// A safetensors header (or the shard index) is malformed.
    #[error("{}: bad header: {problem}", file.display())]
    Header {
        /// The file.
        file: PathBuf,
        /// What was wrong.
        problem: String,
    },
    /// The shard index names a file that does not exist.
    #[error("shard {shard} (which holds tensor {tensor}) does not exist")]
    MissingShard {
        /// The first tensor the index places in it.
        tensor: String,
        /// The shard's file name.
        shard: String,
    },
    /// Something is larger than a limit: a tensor than the largest buffer,
    /// the weights than the device's memory.
    #[error("{what}: {bytes} bytes exceed the limit of {limit}")]
    TooLarge {
        /// What is too large.
        what: String,
        /// Its size in bytes.
        bytes: u64,
        /// The limit in bytes.
        limit: u64,
    },
    /// The device refused something.
    #[error("device: {0}")]
    Device(#[from] vkcompute::Error),
}

/// A tensor's bytes as stored in the checkpoint (little-endian), borrowed
/// from the memory map.
pub struct HostTensor<'a> {
    /// The storage type (the config's).
    pub dtype: WeightDtype,
    /// The shape, outermost first.
    pub shape: Vec<usize>,
    /// `numel * dtype.bytes()` bytes.
    pub bytes: &'a [u8],
}

impl HostTensor<'_> {
    /// The number of elements.
    pub fn numel(&self) -> usize {
        self.bytes.len() / self.dtype.bytes()
    }

    /// The values, widened exactly to f32.
    pub fn to_f32(&self) -> Vec<f32> {
        match self.dtype {
            WeightDtype::F32 => self
                .bytes
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect(),
            WeightDtype::F16 => self
                .bytes
                .chunks_exact(2)
                .map(|b| F16(u16::from_le_bytes([b[0], b[1]])).to_f32())
                .collect(),
            WeightDtype::Bf16 => self
                .bytes
                .chunks_exact(2)
                .map(|b| Bf16(u16::from_le_bytes([b[0], b[1]])).to_f32())
                .collect(),
        }
    }

    /// The values, widened exactly to f64 (for reference computations).
    pub fn to_f64(&self) -> Vec<f64> {
        self.to_f32().into_iter().map(f64::from).collect()
    }
}

/// `model.layers.{i}.{suffix}`, e.g. `layer_name(3, "mlp.up_proj.weight")`.
pub fn layer_name(i: u32, suffix: &str) -> String {
    format!("model.layers.{i}.{suffix}")
}

/// Every tensor the config's architecture reads, with its shape, in the
/// order of the forward pass: the embedding, each layer's, the final norm,
/// and the LM head unless it is tied to the embedding.
pub fn layout(c: &Config) -> Vec<(String, Vec<usize>)> {
    let [hidden, inter, vocab, q, kv, hd] = [
        c.hidden,
        c.intermediate,
        c.vocab,
        c.q_dim(),
        c.kv_dim(),
        c.head_dim,
    ]
    .map(|v| v as usize);
    let mut out = vec![("model.embed_tokens.weight".to_string(), vec![vocab, hidden])];
    for i in 0..c.layers {
        let mut add = |suffix: &str, shape: Vec<usize>| out.push((layer_name(i, suffix), shape));
        add("input_layernorm.weight", vec![hidden]);
        add("self_attn.q_proj.weight", vec![q, hidden]);
        add("self_attn.k_proj.weight", vec![kv, hidden]);
        add("self_attn.v_proj.weight", vec![kv, hidden]);
        if c.arch == Arch::Qwen3 {
            add("self_attn.q_norm.weight", vec![hd]);
            add("self_attn.k_norm.weight", vec![hd]);
        }
        add("self_attn.o_proj.weight", vec![hidden, q]);
        add("post_attention_layernorm.weight", vec![hidden]);
        add("mlp.gate_proj.weight", vec![inter, hidden]);
        add("mlp.up_proj.weight", vec![inter, hidden]);
        add("mlp.down_proj.weight", vec![hidden, inter]);
    }
    out.push(("model.norm.weight".to_string(), vec![hidden]));
    if !c.tie_word_embeddings {
        out.push(("lm_head.weight".to_string(), vec![vocab, hidden]));
    }
    out
}

/// The limits [`Checkpoint::check_fits`] takes, for `gpu`: each weight is
/// one storage binding, so the largest is bounded by
/// `maxStorageBufferRange`, `maxBufferSize` and `maxMemoryAllocationSize`;
/// all of them together by the largest device-local heap.
pub fn device_limits(gpu: &vkcompute::Device) -> (u64, u64) {
    let i = gpu.info();
    let buffer = i
        .max_storage_buffer_range
        .min(i.max_buffer_size)
        .min(i.max_memory_allocation_size);
    (buffer, i.device_local_memory)
}

/// Bits per element of a safetensors dtype name.
fn dtype_bits(name: &str) -> Option<u64> {
    Some(match name {
        "F4" => 4,
        "F6_E2M3" | "F6_E3M2" => 6,
        "BOOL" | "U8" | "I8" | "F8_E5M2" | "F8_E4M3" | "F8_E8M0" | "F8_E4M3FNUZ"
        | "F8_E5M2FNUZ" => 8,
        "I16" | "U16" | "F16" | "BF16" => 16,
        "I32" | "U32" | "F32" => 32,
        "I64" | "U64" | "F64" | "C64" => 64,
        _ => return None,
    })
}

/// One tensor of the table.
struct Entry {
    /// Index into the shards.
    shard: usize,
    /// The header's dtype name.
    dtype: String,
    shape: Vec<usize>,
    /// Byte range within the shard's file.
    start: usize,
    end: usize,
}

/// A mapped safetensors file.
struct Shard {
    path: PathBuf,
    map: Mmap,
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> LoadError + '_ {
    move |source| LoadError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// A JSON file's text, refused unread ([`LoadError::TooLarge`]) past
/// [`MAX_JSON_BYTES`].
pub(crate) fn read_json_text(path: &Path) -> Result<String, LoadError> {
    let mut file = File::open(path).map_err(io_err(path))?;
    let len = file.metadata().map_err(io_err(path))?.len();
    if len > MAX_JSON_BYTES {
        return Err(LoadError::TooLarge {
            what: path.display().to_string(),
            bytes: len,
            limit: MAX_JSON_BYTES,
        });
    }
    let mut text = String::with_capacity(len as usize);
    file.read_to_string(&mut text).map_err(io_err(path))?;
    Ok(text)
}

fn header_err(file: &Path, problem: impl Into<String>) -> LoadError {
    LoadError::Header {
        file: file.to_path_buf(),
        problem: problem.into(),
    }
}

/// One header entry, checked against the file's length `len` (which fits
/// in `usize`) and its data section's start `base`; its `shard` is 0.
fn parse_entry(
    path: &Path,
    name: &str,
    v: &Value,
    base: u64,
    len: u64,
) -> Result<Entry, LoadError> {
    let bad = |what: String| header_err(path, format!("tensor {name}: {what}"));
    let dtype = v
        .get("dtype")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("no \"dtype\" string".into()))?;
    let bits = dtype_bits(dtype).ok_or_else(|| bad(format!("dtype {dtype:?} is unknown")))?;
    let shape = v
        .get("shape")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("no \"shape\" list".into()))?
        .iter()
        .map(|d| d.as_u64().and_then(|d| usize::try_from(d).ok()))
        .collect::<Option<Vec<usize>>>()
        .ok_or_else(|| bad("a shape entry is not a whole number".into()))?;
    let offsets = v
        .get("data_offsets")
        .and_then(Value::as_array)
        .and_then(|o| match o.as_slice() {
            [a, b] => Some((a.as_u64()?, b.as_u64()?)),
            _ => None,
        })
        .ok_or_else(|| bad("no \"data_offsets\" pair of whole numbers".into()))?;
    let (begin, end) = offsets;
    if begin > end {
        return Err(bad(format!("data_offsets [{begin}, {end}] run backwards")));
    }
    let need = base.saturating_add(end);
    if need > len {
        return Err(LoadError::Truncated {
            file: path.to_path_buf(),
            need,
            have: len,
        });
    }
    let numel_bits = shape
        .iter()
        .try_fold(bits, |acc, &d| acc.checked_mul(d as u64))
        .ok_or_else(|| bad(format!("shape {shape:?} overflows")))?;
    if numel_bits % 8 != 0 || numel_bits / 8 != end - begin {
        return Err(bad(format!(
            "shape {shape:?} of {dtype} holds {numel_bits} bits, data_offsets [{begin}, {end}] \
             span {} bytes",
            end - begin
        )));
    }
    // base + end <= len, which fits in usize.
    Ok(Entry {
        shard: 0,
        dtype: dtype.to_string(),
        shape,
        start: (base + begin) as usize,
        end: (base + end) as usize,
    })
}

/// Reads and checks one safetensors file's header, then maps the file:
/// the map and the file's tensors (their `shard` 0).
fn open_shard(path: &Path) -> Result<(Shard, Vec<(String, Entry)>), LoadError> {
    let mut file = File::open(path).map_err(io_err(path))?;
    let len = file.metadata().map_err(io_err(path))?.len();
    usize::try_from(len).map_err(|_| LoadError::TooLarge {
        what: format!("{} (mapped whole)", path.display()),
        bytes: len,
        limit: usize::MAX as u64,
    })?;
    let truncated = |need: u64| LoadError::Truncated {
        file: path.to_path_buf(),
        need,
        have: len,
    };
    if len < 8 {
        return Err(truncated(8));
    }
    let mut n = [0u8; 8];
    file.read_exact(&mut n).map_err(io_err(path))?;
    let n = u64::from_le_bytes(n);
    let base = n.saturating_add(8);
    if base > len {
        return Err(truncated(base));
    }
    if n > MAX_HEADER_BYTES {
        return Err(header_err(
            path,
            format!("the header's {n} bytes exceed the limit of {MAX_HEADER_BYTES}"),
        ));
    }
    // n <= the file's length and MAX_HEADER_BYTES: this allocation is bounded.
    let mut text = vec![0u8; n as usize];
    file.read_exact(&mut text).map_err(io_err(path))?;
    let root: Value =
        serde_json::from_slice(&text).map_err(|e| header_err(path, format!("not JSON: {e}")))?;
    let obj = root
        .as_object()
        .ok_or_else(|| header_err(path, "not a JSON object"))?;
    let mut tensors = Vec::with_capacity(obj.len());
    for (name, v) in obj {
        if name == "__metadata__" {
            continue;
        }
        tensors.push((name.clone(), parse_entry(path, name, v, base, len)?));
    }
    // SAFETY: the map is only ever read, through slices whose bounds were
    // checked against the file's length above and against the map's length
    // below. A file modified while mapped would change what those slices
    // read (or fault, if truncated): the module's documentation states that
    // checkpoint files must not be modified while a Checkpoint is alive.
    let map = unsafe { Mmap::map(&file) }.map_err(io_err(path))?;
    if (map.len() as u64) < len {
        // Shortened between the checks and the map.
        return Err(LoadError::Truncated {
            file: path.to_path_buf(),
            need: len,
            have: map.len() as u64,
        });
    }
    Ok((
        Shard {
            path: path.to_path_buf(),
            map,
        },
        tensors,
    ))
}

/// A shard index: the shard files sorted by name, each with the first
/// tensor (by name) placed in it; and the whole weight map (tensor, file).
struct Index {
    shards: Vec<(String, String)>,
    weights: Vec<(String, String)>,
}

fn read_index(path: &Path) -> Result<Index, LoadError> {
    let text = read_json_text(path)?;
    let root: Value =
        serde_json::from_str(&text).map_err(|e| header_err(path, format!("not JSON: {e}")))?;
    let map = root
        .get("weight_map")
        .and_then(Value::as_object)
        .ok_or_else(|| header_err(path, "no \"weight_map\" object"))?;
    let mut shards: Vec<(String, String)> = Vec::new();
    let mut weights = Vec::with_capacity(map.len());
    for (tensor, file) in map {
        let file = file.as_str().ok_or_else(|| {
            header_err(path, format!("weight_map[{tensor:?}] is not a file name"))
        })?;
        // A shard lives beside the index: no directories, no way out.
        if file.is_empty() || file == "." || file == ".." || file.contains(['/', '\\']) {
            return Err(header_err(
                path,
                format!("weight_map[{tensor:?}] = {file:?} is not a file name in this directory"),
            ));
        }
        if !shards.iter().any(|(f, _)| f == file) {
            shards.push((file.to_string(), tensor.clone()));
        }
        weights.push((tensor.clone(), file.to_string()));
    }
    // Shard names sort in their order (model-00001-of-00003, ...).
    shards.sort();
    Ok(Index { shards, weights })
}

/// A checkpoint directory, opened: its config and a table of its tensors
/// over memory-mapped files. See the module documentation for what is
/// checked when, and why the files must not change while it is open.
pub struct Checkpoint {
    /// The model's config (its `dtype` taken from the embedding's when
    /// `config.json` names none).
    pub config: Config,
    shards: Vec<Shard>,
    table: BTreeMap<String, Entry>,
}

impl std::fmt::Debug for Checkpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Checkpoint")
            .field("config", &self.config)
            .field("files", &self.files())
            .field("tensors", &self.table.len())
            .field("bytes", &self.total_bytes())
            .finish()
    }
}

impl Checkpoint {
    /// Opens `dir`: `config.json` ([`Config::load`]), then
    /// `model.safetensors`, or `model.safetensors.index.json` and the
    /// shards it names. Reads and checks every header and maps every file;
    /// reads no tensor data. A shard the index names that does not exist is
    /// [`LoadError::MissingShard`]; a header claiming more bytes than its
    /// file holds [`LoadError::Truncated`]; any other malformed header
    /// [`LoadError::Header`].
    pub fn open(dir: &Path) -> Result<Checkpoint, LoadError> {
        let (mut config, named_dtype) = Config::load_parsed(dir)?;
        let single = dir.join(SINGLE_FILE);
        let index = dir.join(INDEX_FILE);
        let mut shards = Vec::new();
        let mut table = BTreeMap::new();
        let mut add = |shards: &mut Vec<Shard>, path: &Path| -> Result<(), LoadError> {
            let (shard, tensors) = open_shard(path)?;
            let at = shards.len();
            for (name, mut e) in tensors {
                e.shard = at;
                if let Some(old) = table.insert(name.clone(), e) {
                    return Err(header_err(
                        path,
                        format!(
                            "tensor {name} is also in {}",
                            shards[old.shard].path.display()
                        ),
                    ));
                }
            }
            shards.push(shard);
            Ok(())
        };
        if single.is_file() {
            add(&mut shards, &single)?;
        } else if index.is_file() {
            let Index {
                shards: files,
                weights,
            } = read_index(&index)?;
            for (file, tensor) in &files {
                let path = dir.join(file);
                if !path.is_file() {
                    return Err(LoadError::MissingShard {
                        tensor: tensor.clone(),
                        shard: file.clone(),
                    });
                }
                add(&mut shards, &path)?;
            }
            for (tensor, file) in &weights {
                let placed = table
                    .get(tensor)
                    .map(|e| shards[e.shard].path.file_name() == Some(file.as_ref()));
                if placed != Some(true) {
                    return Err(header_err(
                        &dir.join(file),
                        format!("the index places tensor {tensor} here but this header does not list it"),
                    ));
                }
            }
        } else {
            return Err(LoadError::Io {
                path: single,
                source: std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    format!("neither {SINGLE_FILE} nor {INDEX_FILE} exists"),
                ),
            });
        }
        if !named_dtype {
            let embed = table.get("model.embed_tokens.weight");
            if let Some(d) = embed.and_then(|e| WeightDtype::from_name(&e.dtype)) {
                config.dtype = d;
            }
        }
        Ok(Checkpoint {
            config,
            shards,
            table,
        })
    }

    /// The tensor `name`, which must have `shape` and the config's dtype:
    /// [`LoadError::MissingTensor`], [`LoadError::Shape`] or
    /// [`LoadError::Dtype`] otherwise.
    pub fn tensor(&self, name: &str, shape: &[usize]) -> Result<HostTensor<'_>, LoadError> {
        let e = self
            .table
            .get(name)
            .ok_or_else(|| LoadError::MissingTensor(name.to_string()))?;
        if e.shape != shape {
            return Err(LoadError::Shape {
                tensor: name.to_string(),
                want: shape.to_vec(),
                got: e.shape.clone(),
            });
        }
        let want = self.config.dtype;
        if e.dtype != want.name() {
            return Err(LoadError::Dtype {
                tensor: name.to_string(),
                want,
                got: e.dtype.clone(),
            });
        }
        Ok(HostTensor {
            dtype: want,
            shape: e.shape.clone(),
            bytes: &self.shards[e.shard].map[e.start..e.end],
        })
    }

    /// Whether the checkpoint holds a tensor `name` (of any shape and dtype).
    pub fn has(&self, name: &str) -> bool {
        self.table.contains_key(name)
    }

    /// The dtype name (as the header writes it, e.g. `BF16`) and shape of
    /// the tensor `name`, if the checkpoint holds it.
    pub fn info(&self, name: &str) -> Option<(&str, &[usize])> {
        self.table
            .get(name)
            .map(|e| (e.dtype.as_str(), e.shape.as_slice()))
    }

    /// Every tensor's name, sorted.
    pub fn names(&self) -> Vec<&str> {
        self.table.keys().map(String::as_str).collect()
    }

    /// The bytes of all tensors in the checkpoint, the ones the model does
    /// not read included.
    pub fn total_bytes(&self) -> u64 {
        self.table.values().map(|e| (e.end - e.start) as u64).sum()
    }

    /// The files mapped, in order.
    pub fn files(&self) -> Vec<&Path> {
        self.shards.iter().map(|s| s.path.as_path()).collect()
    }

    /// Whether the weights the model reads ([`layout`], as stored) fit a
    /// device: the largest within `max_buffer_bytes` (one buffer each), all
    /// together within `device_bytes`. [`LoadError::TooLarge`] naming the
    /// tensor or the sum otherwise.
    pub fn check_fits(&self, max_buffer_bytes: u64, device_bytes: u64) -> Result<(), LoadError> {
        let mut sum = 0u64;
        let mut largest: Option<(&str, u64)> = None;
        for (name, _) in layout(&self.config) {
            if let Some((key, e)) = self.table.get_key_value(&name) {
                let bytes = (e.end - e.start) as u64;
                sum += bytes;
                if largest.map_or(true, |(_, b)| bytes > b) {
                    largest = Some((key.as_str(), bytes));
                }
            }
        }
        if let Some((name, bytes)) = largest.filter(|&(_, b)| b > max_buffer_bytes) {
            return Err(LoadError::TooLarge {
                what: format!("tensor {name} (the largest buffer)"),
                bytes,
                limit: max_buffer_bytes,
            });
        }
        if sum > device_bytes {
            return Err(LoadError::TooLarge {
                what: "the model's weights (device memory)".into(),
                bytes: sum,
                limit: device_bytes,
            });
        }
        Ok(())
    }

    /// Whether every tensor the architecture reads ([`layout`]) is present
    /// with its shape and the config's dtype: the first that is not, as
    /// [`Checkpoint::tensor`] would say. Reads no tensor data.
    pub fn check_layout(&self) -> Result<(), LoadError> {
        for (name, shape) in layout(&self.config) {
            self.tensor(&name, &shape)?;
        }
        Ok(())
    }
}
