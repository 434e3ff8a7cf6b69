//! The checkpoint loader of `examples/qwen3`: tiny checkpoints written and
//! read back, each bad checkpoint refused with its typed error, and
//! `config.json` files of real models read. GPU-free but for one test,
//! which checks a checkpoint against a real device's limits.

mod common;

#[allow(dead_code)]
#[path = "../examples/qwen3/checkpoint.rs"]
mod checkpoint;
#[allow(dead_code)]
#[path = "../examples/qwen3/config.rs"]
mod config;
#[allow(dead_code)]
#[path = "../examples/qwen3/tiny.rs"]
mod tiny;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use checkpoint::{layer_name, layout, Checkpoint, LoadError};
use config::{Arch, Config, WeightDtype};

/// A fresh directory under the system's temporary directory, removed when
/// dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("vkcompute-qwen3-{}-{tag}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Writes a tiny checkpoint, opens it, checks its layout and that every
/// tensor holds exactly the bytes written.
fn round_trip(arch: Arch, dtype: WeightDtype, shards: usize) {
    let dir = TempDir::new("rt");
    let c = tiny::tiny_config(arch, dtype);
    tiny::write_checkpoint(dir.path(), &c, 7, shards).unwrap();
    let ck = Checkpoint::open(dir.path()).unwrap();
    ck.check_layout().unwrap();
    assert_eq!(ck.config.arch, arch);
    assert_eq!(ck.config.dtype, dtype);
    assert_eq!(ck.files().len(), shards);
    let written = tiny::tiny_tensors(&c, 7);
    assert_eq!(ck.names().len(), written.len());
    let mut total = 0;
    for (name, shape, bytes) in &written {
        let t = ck.tensor(name, shape).unwrap();
        assert_eq!(t.dtype, dtype);
        assert_eq!(&t.shape, shape);
        assert!(t.bytes == bytes.as_slice(), "{name}: bytes differ");
        assert_eq!(t.numel(), shape.iter().product::<usize>());
        total += bytes.len() as u64;
    }
    assert_eq!(ck.total_bytes(), total);
}

#[test]
fn tiny_checkpoints_round_trip_in_one_file() {
    round_trip(Arch::Qwen3, WeightDtype::Bf16, 1);
    round_trip(Arch::Llama, WeightDtype::F32, 1);
    round_trip(Arch::Qwen3, WeightDtype::F16, 1);
}

#[test]
fn tiny_checkpoints_round_trip_in_three_shards() {
    round_trip(Arch::Qwen3, WeightDtype::Bf16, 3);
    round_trip(Arch::Llama, WeightDtype::F16, 3);
}

/// The tiny model's tensors as `write_tensors` takes them.
fn raw_tensors(c: &Config, seed: u64) -> Vec<(String, WeightDtype, Vec<usize>, Vec<u8>)> {
    tiny::tiny_tensors(c, seed)
        .into_iter()
        .map(|(name, shape, bytes)| (name, c.dtype, shape, bytes))
        .collect()
}

/// Writes `tensors` under the tiny config's JSON, opens the checkpoint and
/// checks its layout: the first error.
fn load_err(
    c: &Config,
    tensors: &[(String, WeightDtype, Vec<usize>, Vec<u8>)],
) -> (LoadError, TempDir) {
    let dir = TempDir::new("bad");
    tiny::write_tensors(dir.path(), &tiny::config_json(c), tensors).unwrap();
    let e = Checkpoint::open(dir.path())
        .and_then(|ck| ck.check_layout())
        .unwrap_err();
    (e, dir)
}

#[test]
fn the_raw_writer_writes_what_the_reference_reader_reads() {
    let c = tiny::tiny_config(Arch::Qwen3, WeightDtype::F16);
    let dir = TempDir::new("raw");
    let tensors = raw_tensors(&c, 3);
    tiny::write_tensors(dir.path(), &tiny::config_json(&c), &tensors).unwrap();
    let file = std::fs::read(dir.path().join(checkpoint::SINGLE_FILE)).unwrap();
    let st = safetensors::SafeTensors::deserialize(&file).unwrap();
    assert_eq!(st.len(), tensors.len());
    for (name, _, shape, bytes) in &tensors {
        let t = st.tensor(name).unwrap();
        assert_eq!(t.dtype(), safetensors::Dtype::F16);
        assert_eq!(t.shape(), shape.as_slice());
        assert!(t.data() == bytes.as_slice(), "{name}");
    }
    let ck = Checkpoint::open(dir.path()).unwrap();
    ck.check_layout().unwrap();
}

#[test]
fn halves_and_bfloats_widen_exactly() {
    let values = [1.0f32, -2.0, 0.333_251_95, 2f32.powi(-24), 65504.0, -0.0];
    for dtype in [WeightDtype::F32, WeightDtype::F16, WeightDtype::Bf16] {
        let dir = TempDir::new("widen");
        let mut c = tiny::tiny_config(Arch::Llama, dtype);
        c.dtype = dtype;
        let bytes = tiny::encode(&values, dtype);
        let t = vec![("x".to_string(), dtype, vec![2, 3], bytes)];
        tiny::write_tensors(dir.path(), &tiny::config_json(&c), &t).unwrap();
        let ck = Checkpoint::open(dir.path()).unwrap();
        let x = ck.tensor("x", &[2, 3]).unwrap();
        let got = x.to_f32();
        let want: Vec<f32> = match dtype {
            WeightDtype::F32 => values.to_vec(),
            // 0.33325195 and 2^-24 are halves; bf16 keeps 8 bits.
            WeightDtype::F16 => values.to_vec(),
            WeightDtype::Bf16 => vec![1.0, -2.0, 0.333_984_38, 2f32.powi(-24), 65536.0, -0.0],
        };
        assert_eq!(got, want, "{dtype}");
        assert_eq!(
            got[5].to_bits(),
            (-0.0f32).to_bits(),
            "{dtype}: sign of zero"
        );
        let wide: Vec<f64> = want.iter().map(|&v| f64::from(v)).collect();
        assert_eq!(x.to_f64(), wide, "{dtype}");
    }
}

#[test]
fn a_missing_tensor_is_named() {
    let c = tiny::tiny_config(Arch::Qwen3, WeightDtype::Bf16);
    let gone = layer_name(1, "self_attn.k_norm.weight");
    let mut t = raw_tensors(&c, 1);
    t.retain(|x| x.0 != gone);
    let (e, _dir) = load_err(&c, &t);
    assert!(
        matches!(&e, LoadError::MissingTensor(n) if *n == gone),
        "{e:?}"
    );
    assert!(e.to_string().contains(&gone), "{e}");

    // Llama has no q/k norms; Qwen3 needs them.
    let llama = tiny::tiny_config(Arch::Llama, WeightDtype::Bf16);
    let (e, _dir) = load_err(&c, &raw_tensors(&llama, 1));
    let want = layer_name(0, "self_attn.q_norm.weight");
    assert!(
        matches!(&e, LoadError::MissingTensor(n) if *n == want),
        "{e:?}"
    );

    // An untied model needs its LM head; a tied one does without.
    let mut t = raw_tensors(&llama, 1);
    t.retain(|x| x.0 != "lm_head.weight");
    let (e, _dir) = load_err(&llama, &t);
    assert!(
        matches!(&e, LoadError::MissingTensor(n) if n == "lm_head.weight"),
        "{e:?}"
    );
    let mut tied = llama.clone();
    tied.tie_word_embeddings = true;
    let dir = TempDir::new("tied");
    tiny::write_tensors(dir.path(), &tiny::config_json(&tied), &t).unwrap();
    Checkpoint::open(dir.path())
        .unwrap()
        .check_layout()
        .unwrap();
}

#[test]
fn extra_tensors_are_ignored() {
    let c = tiny::tiny_config(Arch::Llama, WeightDtype::F32);
    let mut t = raw_tensors(&c, 2);
    t.push((
        layer_name(0, "self_attn.rotary_emb.inv_freq"),
        WeightDtype::F32,
        vec![12],
        vec![0; 48],
    ));
    t.push(("odd.bias".into(), WeightDtype::F16, vec![3], vec![0; 6]));
    let dir = TempDir::new("extra");
    tiny::write_tensors(dir.path(), &tiny::config_json(&c), &t).unwrap();
    let ck = Checkpoint::open(dir.path()).unwrap();
    ck.check_layout().unwrap();
    assert!(ck.has("odd.bias"));
    assert_eq!(ck.info("odd.bias"), Some(("F16", &[3usize][..])));
    assert_eq!(ck.names().len(), layout(&c).len() + 2);
}

#[test]
fn a_wrong_shape_is_named_with_both_shapes() {
    let c = tiny::tiny_config(Arch::Llama, WeightDtype::F32);
    let name = layer_name(1, "mlp.down_proj.weight");
    let mut t = raw_tensors(&c, 1);
    let x = t.iter_mut().find(|x| x.0 == name).unwrap();
    x.2 = vec![96, 64]; // transposed: [intermediate, hidden]
    let (e, _dir) = load_err(&c, &t);
    match &e {
        LoadError::Shape { tensor, want, got } => {
            assert_eq!((tensor, want, got), (&name, &vec![64, 96], &vec![96, 64]));
        }
        other => panic!("{other:?}"),
    }
    assert!(e.to_string().contains(&name) && e.to_string().contains("[64, 96]"));
}

#[test]
fn a_wrong_dtype_is_named() {
    let c = tiny::tiny_config(Arch::Qwen3, WeightDtype::Bf16);
    let mut t = raw_tensors(&c, 1);
    let name = "model.norm.weight";
    let x = t.iter_mut().find(|x| x.0 == name).unwrap();
    x.1 = WeightDtype::F32;
    x.3 = tiny::encode(&[1.0; 64], WeightDtype::F32);
    let (e, _dir) = load_err(&c, &t);
    match &e {
        LoadError::Dtype { tensor, want, got } => {
            assert_eq!(
                (tensor.as_str(), *want, got.as_str()),
                (name, WeightDtype::Bf16, "F32")
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(
        e.to_string().contains(name) && e.to_string().contains("BF16"),
        "{e}"
    );
}

#[test]
fn without_a_config_dtype_the_embeddings_dtype_is_taken() {
    let c = tiny::tiny_config(Arch::Llama, WeightDtype::F16);
    let mut json: serde_json::Value = serde_json::from_str(&tiny::config_json(&c)).unwrap();
    json.as_object_mut().unwrap().remove("torch_dtype");
    let text = json.to_string();
    assert_eq!(Config::from_json(&text).unwrap().dtype, WeightDtype::F32);
    let dir = TempDir::new("nodtype");
    tiny::write_tensors(dir.path(), &text, &raw_tensors(&c, 5)).unwrap();
    let ck = Checkpoint::open(dir.path()).unwrap();
    assert_eq!(ck.config.dtype, WeightDtype::F16);
    ck.check_layout().unwrap();
}

#[test]
fn an_unknown_architecture_is_named() {
    let c = tiny::tiny_config(Arch::Llama, WeightDtype::F32);
    let json = tiny::config_json(&c).replace("LlamaForCausalLM", "MistralForCausalLM");
    let e = Config::from_json(&json).unwrap_err();
    assert!(
        matches!(&e, LoadError::UnknownArchitecture(a) if a == "MistralForCausalLM"),
        "{e:?}"
    );
    assert!(e.to_string().contains("MistralForCausalLM"), "{e}");
    let dir = TempDir::new("arch");
    tiny::write_tensors(dir.path(), &json, &raw_tensors(&c, 1)).unwrap();
    let e = Checkpoint::open(dir.path()).unwrap_err();
    assert!(matches!(e, LoadError::UnknownArchitecture(_)), "{e:?}");
    // Without `architectures`, `model_type` decides.
    let mut v: serde_json::Value = serde_json::from_str(&tiny::config_json(&c)).unwrap();
    v.as_object_mut().unwrap().remove("architectures");
    assert_eq!(Config::from_json(&v.to_string()).unwrap().arch, Arch::Llama);
    v["model_type"] = "gemma".into();
    let e = Config::from_json(&v.to_string()).unwrap_err();
    assert!(
        matches!(&e, LoadError::UnknownArchitecture(a) if a == "gemma"),
        "{e:?}"
    );
}

#[test]
fn a_truncated_file_names_both_sizes() {
    let c = tiny::tiny_config(Arch::Qwen3, WeightDtype::Bf16);
    let dir = TempDir::new("trunc");
    tiny::write_checkpoint(dir.path(), &c, 1, 1).unwrap();
    let file = dir.path().join(checkpoint::SINGLE_FILE);
    let len = std::fs::metadata(&file).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&file)
        .unwrap()
        .set_len(len - 10)
        .unwrap();
    let e = Checkpoint::open(dir.path()).unwrap_err();
    match &e {
        LoadError::Truncated {
            file: f,
            need,
            have,
        } => {
            assert_eq!((f, *need, *have), (&file, len, len - 10));
        }
        other => panic!("{other:?}"),
    }
    let s = e.to_string();
    assert!(
        s.contains("model.safetensors") && s.contains(&len.to_string()),
        "{s}"
    );
    // Shorter than the length field itself.
    std::fs::write(&file, [1, 2, 3]).unwrap();
    let e = Checkpoint::open(dir.path()).unwrap_err();
    assert!(
        matches!(
            e,
            LoadError::Truncated {
                need: 8,
                have: 3,
                ..
            }
        ),
        "{e:?}"
    );
}

#[test]
fn a_header_longer_than_its_file_is_refused_before_it_is_read() {
    let c = tiny::tiny_config(Arch::Llama, WeightDtype::F32);
    let dir = TempDir::new("hdr");
    tiny::write_checkpoint(dir.path(), &c, 1, 1).unwrap();
    let file = dir.path().join(checkpoint::SINGLE_FILE);
    let mut bytes = std::fs::read(&file).unwrap();
    let len = bytes.len() as u64;
    for claim in [len, u64::MAX - 3, 1 << 40] {
        bytes[..8].copy_from_slice(&claim.to_le_bytes());
        std::fs::write(&file, &bytes).unwrap();
        let e = Checkpoint::open(dir.path()).unwrap_err();
        match e {
            LoadError::Truncated { need, have, .. } => {
                assert_eq!((need, have), (claim.saturating_add(8), len));
            }
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn data_offsets_must_match_the_shape() {
    let c = tiny::tiny_config(Arch::Llama, WeightDtype::F32);
    let mut t = raw_tensors(&c, 1);
    let short = t[3].3.len() - 4; // one element short
    t[3].3.truncate(short);
    let name = t[3].0.clone();
    let (e, _dir) = load_err(&c, &t);
    match &e {
        LoadError::Header { problem, .. } => assert!(problem.contains(&name), "{problem}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn malformed_headers_are_refused() {
    let dir = TempDir::new("junk");
    let c = tiny::tiny_config(Arch::Llama, WeightDtype::F32);
    std::fs::write(dir.path().join("config.json"), tiny::config_json(&c)).unwrap();
    let file = dir.path().join(checkpoint::SINGLE_FILE);
    let bad: [&[u8]; 5] = [
        b"not json",
        b"[1, 2]  ",
        br#"{"a": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}}"#,
        br#"{"a": {"dtype": "Q9", "shape": [2], "data_offsets": [0, 8]}}"#,
        br#"{"a": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}}"#,
    ];
    for header in bad {
        let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
        bytes.extend_from_slice(header);
        bytes.extend_from_slice(&[0; 8]);
        std::fs::write(&file, &bytes).unwrap();
        let e = Checkpoint::open(dir.path()).unwrap_err();
        assert!(matches!(e, LoadError::Header { .. }), "{e:?}");
    }
}

#[test]
fn an_index_naming_a_missing_shard_is_refused() {
    let c = tiny::tiny_config(Arch::Qwen3, WeightDtype::Bf16);
    let dir = TempDir::new("shard");
    tiny::write_checkpoint(dir.path(), &c, 1, 3).unwrap();
    let gone = tiny::shard_name(1, 3);
    std::fs::remove_file(dir.path().join(&gone)).unwrap();
    let e = Checkpoint::open(dir.path()).unwrap_err();
    match &e {
        LoadError::MissingShard { tensor, shard } => {
            assert_eq!(shard, &gone);
            assert!(tensor.starts_with("model.layers."), "{tensor}");
        }
        other => panic!("{other:?}"),
    }
    assert!(e.to_string().contains(&gone), "{e}");
}

#[test]
fn an_index_may_not_point_outside_its_directory() {
    let c = tiny::tiny_config(Arch::Llama, WeightDtype::Bf16);
    let dir = TempDir::new("escape");
    tiny::write_checkpoint(dir.path(), &c, 1, 2).unwrap();
    let index = dir.path().join(checkpoint::INDEX_FILE);
    let text = std::fs::read_to_string(&index).unwrap();
    let first = tiny::shard_name(0, 2);
    std::fs::write(&index, text.replacen(&first, &format!("../{first}"), 1)).unwrap();
    let e = Checkpoint::open(dir.path()).unwrap_err();
    assert!(
        matches!(&e, LoadError::Header { file, .. } if *file == index),
        "{e:?}"
    );
    // An index that places a tensor in the wrong shard.
    let other = tiny::shard_name(1, 2);
    std::fs::write(
        &index,
        text.replacen(&format!("\"{first}\""), &format!("\"{other}\""), 1),
    )
    .unwrap();
    let e = Checkpoint::open(dir.path()).unwrap_err();
    assert!(matches!(e, LoadError::Header { .. }), "{e:?}");
}

#[test]
fn weights_too_large_for_the_device_are_refused() {
    let c = tiny::tiny_config(Arch::Qwen3, WeightDtype::Bf16);
    let dir = TempDir::new("fits");
    tiny::write_checkpoint(dir.path(), &c, 1, 1).unwrap();
    let ck = Checkpoint::open(dir.path()).unwrap();
    let total = ck.total_bytes();
    let largest = 97 * 64 * 2; // the embedding (and the LM head)
    ck.check_fits(largest, total).unwrap();
    match ck.check_fits(largest - 1, total).unwrap_err() {
        LoadError::TooLarge { what, bytes, limit } => {
            assert!(what.contains("model.embed_tokens.weight"), "{what}");
            assert_eq!((bytes, limit), (largest, largest - 1));
        }
        other => panic!("{other:?}"),
    }
    let e = ck.check_fits(largest, total - 1).unwrap_err();
    assert!(
        matches!(e, LoadError::TooLarge { bytes, limit, .. } if bytes == total && limit == total - 1),
        "{e:?}"
    );
    assert!(e.to_string().contains(&(total - 1).to_string()), "{e}");
}

#[test]
fn check_fits_takes_a_real_devices_limits() {
    let gpu = common::gpu();
    let (buffer, memory) = checkpoint::device_limits(&gpu);
    let i = gpu.info();
    assert!(buffer <= i.max_storage_buffer_range && buffer > 0);
    assert_eq!(memory, i.device_local_memory);
    let c = tiny::tiny_config(Arch::Llama, WeightDtype::Bf16);
    let dir = TempDir::new("device");
    tiny::write_checkpoint(dir.path(), &c, 1, 1).unwrap();
    Checkpoint::open(dir.path())
        .unwrap()
        .check_fits(buffer, memory)
        .unwrap();

    // An embedding one row past the largest binding, its data a hole in a
    // sparse file: the header is checked, no byte of data is written or read.
    let mut big = c.clone();
    big.vocab = u32::try_from(buffer / 128 + 1).unwrap();
    let bytes = u64::from(big.vocab) * 64 * 2;
    let header = serde_json::json!({
        "model.embed_tokens.weight":
            { "dtype": "BF16", "shape": [big.vocab, 64], "data_offsets": [0, bytes] }
    })
    .to_string();
    let dir = TempDir::new("device-big");
    std::fs::write(dir.path().join("config.json"), tiny::config_json(&big)).unwrap();
    let file = dir.path().join(checkpoint::SINGLE_FILE);
    let mut head = (header.len() as u64).to_le_bytes().to_vec();
    head.extend_from_slice(header.as_bytes());
    std::fs::write(&file, &head).unwrap();
    let f = std::fs::OpenOptions::new().write(true).open(&file).unwrap();
    f.set_len(head.len() as u64 + bytes).unwrap();
    let ck = Checkpoint::open(dir.path()).unwrap();
    match ck.check_fits(buffer, memory).unwrap_err() {
        LoadError::TooLarge {
            what,
            bytes: b,
            limit,
        } => {
            assert!(what.contains("model.embed_tokens.weight"), "{what}");
            assert_eq!((b, limit), (bytes, buffer));
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        ck.check_layout(),
        Err(LoadError::MissingTensor(_))
    ));
    drop(ck);
    gpu.finish();
}

fn with_field(c: &Config, field: &str, v: serde_json::Value) -> String {
    let mut json: serde_json::Value = serde_json::from_str(&tiny::config_json(c)).unwrap();
    if v.is_null() {
        json.as_object_mut().unwrap().remove(field);
    } else {
        json[field] = v;
    }
    json.to_string()
}

/// The field a config error names.
fn config_field(text: &str) -> (String, String) {
    match Config::from_json(text).unwrap_err() {
        LoadError::Config { field, problem } => (field, problem),
        other => panic!("{other:?}"),
    }
}

#[test]
fn bad_config_fields_are_named_with_their_limits() {
    use serde_json::json;
    let c = tiny::tiny_config(Arch::Qwen3, WeightDtype::Bf16);
    let (f, p) = config_field(&with_field(&c, "hidden_size", serde_json::Value::Null));
    assert_eq!((f.as_str(), p.as_str()), ("hidden_size", "is missing"));
    let (f, p) = config_field(&with_field(&c, "hidden_size", json!("64")));
    assert_eq!(f, "hidden_size", "{p}");
    let (f, p) = config_field(&with_field(&c, "num_key_value_heads", json!(3)));
    assert!(
        f == "num_key_value_heads" && p.contains('3') && p.contains('4'),
        "{f}: {p}"
    );
    let (f, p) = config_field(&with_field(&c, "head_dim", json!(258)));
    assert!(f == "head_dim" && p.contains("256"), "{f}: {p}");
    let (f, _) = config_field(&with_field(&c, "num_hidden_layers", json!(0)));
    assert_eq!(f, "num_hidden_layers");
    let mut no_head_dim: serde_json::Value =
        serde_json::from_str(&with_field(&c, "head_dim", serde_json::Value::Null)).unwrap();
    no_head_dim["num_attention_heads"] = json!(0);
    let (f, p) = config_field(&no_head_dim.to_string());
    assert_eq!(
        (f.as_str(), p.as_str()),
        ("num_attention_heads", "is 0; it must be at least 1")
    );
    let (f, _) = config_field(&with_field(&c, "vocab_size", json!(1u64 << 33)));
    assert_eq!(f, "vocab_size");
    let (f, p) = config_field(&with_field(&c, "torch_dtype", json!("float8_e4m3fn")));
    assert!(f == "torch_dtype" && p.contains("float8"), "{f}: {p}");
    let (f, _) = config_field(&with_field(&c, "hidden_act", json!("gelu")));
    assert_eq!(f, "hidden_act");
    let (f, _) = config_field(&with_field(&c, "attention_bias", json!(true)));
    assert_eq!(f, "attention_bias");
    let (f, p) = config_field(&with_field(
        &c,
        "rope_scaling",
        json!({"rope_type": "yarn", "factor": 4.0}),
    ));
    assert!(
        f == "rope_scaling.rope_type" && p.contains("yarn"),
        "{f}: {p}"
    );
    let (f, _) = config_field(&with_field(
        &c,
        "rope_scaling",
        json!({"type": "llama3", "factor": 8.0}),
    ));
    assert_eq!(f, "rope_scaling.low_freq_factor");
    let (f, _) = config_field(&with_field(&c, "eos_token_id", json!([96, 97])));
    assert_eq!(f, "eos_token_id");
    let (f, _) = config_field("{\"architectures\": [\"Qwen3ForCausalLM\"]");
    assert_eq!(f, "config.json");
    let e = Config::from_json(&with_field(&c, "hidden_size", serde_json::Value::Null)).unwrap_err();
    assert_eq!(e.to_string(), "config.json: hidden_size: is missing");
}

#[test]
fn a_missing_config_is_an_io_error_naming_it() {
    let c = tiny::tiny_config(Arch::Llama, WeightDtype::F32);
    let dir = TempDir::new("nocfg");
    tiny::write_checkpoint(dir.path(), &c, 1, 1).unwrap();
    std::fs::remove_file(dir.path().join("config.json")).unwrap();
    for e in [
        Checkpoint::open(dir.path()).unwrap_err(),
        Config::load(dir.path()).unwrap_err(),
    ] {
        match &e {
            LoadError::Io { path, source } => {
                assert_eq!(path, &dir.path().join("config.json"));
                assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
            }
            other => panic!("{other:?}"),
        }
        assert!(e.to_string().contains("config.json"), "{e}");
    }
    // And no weights at all.
    let dir = TempDir::new("noweights");
    std::fs::write(dir.path().join("config.json"), tiny::config_json(&c)).unwrap();
    let e = Checkpoint::open(dir.path()).unwrap_err();
    assert!(e.to_string().contains(checkpoint::INDEX_FILE), "{e}");
}

#[test]
fn oversized_json_files_are_refused_unread() {
    let c = tiny::tiny_config(Arch::Llama, WeightDtype::F32);
    let dir = TempDir::new("bigjson");
    tiny::write_checkpoint(dir.path(), &c, 1, 2).unwrap();
    let limit = checkpoint::MAX_JSON_BYTES;
    for name in ["config.json", checkpoint::INDEX_FILE] {
        let path = dir.path().join(name);
        let keep = std::fs::read(&path).unwrap();
        // A hole past the limit: nothing is written, nothing read.
        let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        f.set_len(limit + 1).unwrap();
        match Checkpoint::open(dir.path()).unwrap_err() {
            LoadError::TooLarge {
                what,
                bytes,
                limit: l,
            } => {
                assert!(what.ends_with(name), "{what}");
                assert_eq!((bytes, l), (limit + 1, limit));
            }
            other => panic!("{name}: {other:?}"),
        }
        std::fs::write(&path, keep).unwrap();
    }
    Checkpoint::open(dir.path())
        .unwrap()
        .check_layout()
        .unwrap();
}

const QWEN3_4B: &str = r#"{
  "architectures": ["Qwen3ForCausalLM"],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "bos_token_id": 151643,
  "eos_token_id": 151645,
  "head_dim": 128,
  "hidden_act": "silu",
  "hidden_size": 2560,
  "initializer_range": 0.02,
  "intermediate_size": 9728,
  "max_position_embeddings": 40960,
  "max_window_layers": 36,
  "model_type": "qwen3",
  "num_attention_heads": 32,
  "num_hidden_layers": 36,
  "num_key_value_heads": 8,
  "rms_norm_eps": 1e-06,
  "rope_scaling": null,
  "rope_theta": 1000000,
  "sliding_window": null,
  "tie_word_embeddings": true,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.51.0",
  "use_cache": true,
  "use_sliding_window": false,
  "vocab_size": 151936
}"#;

const LLAMA_3_1_8B: &str = r#"{
  "architectures": ["LlamaForCausalLM"],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "bos_token_id": 128000,
  "eos_token_id": [128001, 128008, 128009],
  "hidden_act": "silu",
  "hidden_size": 4096,
  "initializer_range": 0.02,
  "intermediate_size": 14336,
  "max_position_embeddings": 131072,
  "mlp_bias": false,
  "model_type": "llama",
  "num_attention_heads": 32,
  "num_hidden_layers": 32,
  "num_key_value_heads": 8,
  "pretraining_tp": 1,
  "rms_norm_eps": 1e-05,
  "rope_scaling": {
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192,
    "rope_type": "llama3"
  },
  "rope_theta": 500000.0,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.43.0.dev0",
  "use_cache": true,
  "vocab_size": 128256
}"#;

#[test]
fn a_qwen3_4b_config_is_read() {
    let c = Config::from_json(QWEN3_4B).unwrap();
    assert_eq!(c.arch, Arch::Qwen3);
    let sizes = [
        c.hidden,
        c.intermediate,
        c.layers,
        c.heads,
        c.kv_heads,
        c.head_dim,
        c.vocab,
        c.max_position,
    ];
    assert_eq!(sizes, [2560, 9728, 36, 32, 8, 128, 151936, 40960]);
    assert_eq!((c.rope_theta, c.rms_norm_eps), (1e6, 1e-6));
    assert!(c.rope_scaling.is_none() && c.tie_word_embeddings);
    assert_eq!(c.eos_token_ids, [151645]);
    assert_eq!(c.dtype, WeightDtype::Bf16);
    // head_dim 128 is not hidden / heads (80) here: q is 4096 wide.
    let l = layout(&c);
    assert_eq!(l.len(), 1 + 36 * 11 + 1);
    let q = l
        .iter()
        .find(|x| x.0 == layer_name(0, "self_attn.q_proj.weight"));
    assert_eq!(q.unwrap().1, [4096, 2560]);
    assert!(!l.iter().any(|x| x.0 == "lm_head.weight"));
}

#[test]
fn a_llama_3_config_is_read_with_its_rope_scaling() {
    let c = Config::from_json(LLAMA_3_1_8B).unwrap();
    assert_eq!(c.arch, Arch::Llama);
    assert_eq!((c.hidden, c.heads, c.kv_heads), (4096, 32, 8));
    assert_eq!(c.head_dim, 128, "hidden / heads when the config has none");
    assert_eq!(c.eos_token_ids, [128001, 128008, 128009]);
    assert_eq!(c.rope_theta, 500000.0);
    assert_eq!(
        c.rope_scaling,
        Some(vkcompute::ops::nn::RopeScaling::Llama3 {
            factor: 8.0,
            low_freq_factor: 1.0,
            high_freq_factor: 4.0,
            original_max_position_embeddings: 8192,
        })
    );
    assert!(!c.tie_word_embeddings);
    let l = layout(&c);
    assert_eq!(l.len(), 1 + 32 * 9 + 2);
    // The config the tiny writer makes from it reads back the same.
    let back = Config::from_json(&tiny::config_json(&c)).unwrap();
    assert_eq!(format!("{back:?}"), format!("{c:?}"));
}

#[test]
fn newer_configs_group_the_rotary_settings_in_rope_parameters() {
    use serde_json::json;
    let mut v: serde_json::Value = serde_json::from_str(LLAMA_3_1_8B).unwrap();
    let o = v.as_object_mut().unwrap();
    let mut params = o.remove("rope_scaling").unwrap();
    params["rope_theta"] = o.remove("rope_theta").unwrap();
    o.insert("rope_parameters".into(), params);
    let old = Config::from_json(LLAMA_3_1_8B).unwrap();
    let new = Config::from_json(&v.to_string()).unwrap();
    assert_eq!(format!("{new:?}"), format!("{old:?}"));
    // Unscaled: rope_type "default", or only rope_theta.
    for p in [
        json!({"rope_type": "default", "rope_theta": 1e6}),
        json!({"rope_theta": 1e6}),
    ] {
        v["rope_parameters"] = p;
        let c = Config::from_json(&v.to_string()).unwrap();
        assert_eq!((c.rope_theta, c.rope_scaling), (1e6, None));
    }
    v["rope_parameters"] = json!({"rope_type": "llama3", "rope_theta": 1e6, "factor": 8.0});
    let (f, _) = config_field(&v.to_string());
    assert_eq!(f, "rope_parameters.low_freq_factor");
    v["rope_parameters"] = json!({"rope_type": "default", "rope_theta": "big"});
    let (f, _) = config_field(&v.to_string());
    assert_eq!(f, "rope_parameters.rope_theta");
}
