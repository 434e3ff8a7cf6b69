//! The on-disk cache: plain file logic, tested without a GPU.
//!
//! Two kinds of file live in one directory (see [`resolve_dir`] for where):
//!
//! - `pipelines-<vendor>-<device>-<driver>-<uuid>.bin`: the driver's
//!   `VkPipelineCache` data for one adapter and driver build. The name and a
//!   header of our own both carry the key (PCI vendor id, device id, driver
//!   version, `pipelineCacheUUID`); the payload must also start with the
//!   header the driver itself writes (`VkPipelineCacheHeaderVersionOne`)
//!   naming the same vendor, device and UUID.
//! - `spirv-<hash>.bin`: the SPIR-V shaderc produced for one GLSL source with
//!   one set of options and one build of shaderc. The file holds the whole
//!   key (not just its hash), so a hash collision can only miss, never hand
//!   back another kernel's code; the words must start with a valid SPIR-V
//!   header.
//!
//! Every file carries a magic tag, a format version, its payload length and
//! a 64-bit checksum. A file that is missing, truncated, corrupt, foreign
//! (another adapter or driver) or from another format version is ignored:
//! the caller starts empty and overwrites it on the next save. Reading never
//! fails loudly; writing is atomic (a temporary file in the same directory,
//! then a rename), so a reader sees the old file or the new one, never half.
//! No `fsync`: after a crash a file may be empty or torn, which the checksum
//! catches.

// The SPIR-V half serves the `glsl` feature only.
#![cfg_attr(not(feature = "glsl"), allow(dead_code))]

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Environment variable naming the cache directory (`off` disables it).
pub const ENV_CACHE_DIR: &str = "VKCOMPUTE_CACHE_DIR";

/// Largest pipeline-cache file read back (a bigger one is ignored).
pub(crate) const MAX_PIPELINE_FILE: u64 = 256 << 20;
/// Largest SPIR-V cache file read back.
pub(crate) const MAX_SPIRV_FILE: u64 = 64 << 20;

const PIPELINE_MAGIC: &[u8; 8] = b"VKCPIPE\x01";
const SPIRV_MAGIC: &[u8; 8] = b"VKCSPIR\x01";
/// Bytes of our pipeline-file header: magic, vendor, device, driver,
/// reserved, UUID, payload length, checksum.
const PIPELINE_HEADER: usize = 8 + 4 * 4 + 16 + 8 + 8;
/// Bytes of our SPIR-V-file header: magic, key length, word count, checksum.
const SPIRV_HEADER: usize = 8 + 4 + 4 + 8;
/// `VK_PIPELINE_CACHE_HEADER_VERSION_ONE` and its size in bytes.
const VK_HEADER_VERSION_ONE: u32 = 1;
const VK_HEADER_SIZE: usize = 32;
/// The SPIR-V magic number.
pub(crate) const SPIRV_MAGIC_NUMBER: u32 = 0x0723_0203;

/// Resolves the cache directory: `option` when given (an empty path
/// disables the cache), else `$VKCOMPUTE_CACHE_DIR` (`off`, `0`, `none` or
/// empty disables), else `$XDG_CACHE_HOME/vkcompute` (when absolute), else
/// `$HOME/.cache/vkcompute`, else none. `env` reads a variable.
pub(crate) fn resolve_dir(
    option: Option<&Path>,
    env: impl Fn(&str) -> Option<OsString>,
) -> Option<PathBuf> {
    if let Some(p) = option {
        return (!p.as_os_str().is_empty()).then(|| p.to_path_buf());
    }
    if let Some(v) = env(ENV_CACHE_DIR) {
        let s = v.to_string_lossy();
        let off = matches!(
            s.trim().to_ascii_lowercase().as_str(),
            "" | "off" | "0" | "none" | "false" | "no"
        );
        return (!off).then(|| PathBuf::from(v));
    }
    if let Some(x) = env("XDG_CACHE_HOME") {
        let p = PathBuf::from(x);
        if p.is_absolute() {
            return Some(p.join("vkcompute"));
        }
    }
    let home = PathBuf::from(env("HOME")?);
    (home.is_absolute()).then(|| home.join(".cache").join("vkcompute"))
}

/// What a pipeline-cache file is keyed by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PipelineKey {
    pub vendor_id: u32,
    pub device_id: u32,
    pub driver_version: u32,
    pub uuid: [u8; 16],
}

impl PipelineKey {
    /// The file name for this key.
    pub(crate) fn file_name(&self) -> String {
        format!(
            "pipelines-{:04x}-{:04x}-{:08x}-{}.bin",
            self.vendor_id,
            self.device_id,
            self.driver_version,
            hex(&self.uuid)
        )
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Why a cache file was not used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Reject {
    /// Shorter than its headers say.
    Truncated,
    /// Not a file of ours, or another format version.
    BadMagic,
    /// Written for another adapter or driver build.
    Foreign,
    /// The payload does not match its checksum.
    Checksum,
    /// The driver's own header (or the SPIR-V header) is not valid.
    BadPayloadHeader,
    /// The stored key differs from the one asked for (a hash collision).
    KeyMismatch,
}

impl std::fmt::Display for Reject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Reject::Truncated => "truncated",
            Reject::BadMagic => "not a vkcompute cache file of this format version",
            Reject::Foreign => "written for another adapter or driver",
            Reject::Checksum => "checksum mismatch (corrupt)",
            Reject::BadPayloadHeader => "invalid payload header",
            Reject::KeyMismatch => "stored key differs",
        })
    }
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

/// A 64-bit hash (murmur3-style mixing over 8-byte words): stable across
/// builds and platforms, for checksums and file names, not for security.
pub(crate) fn hash64(data: &[u8], seed: u64) -> u64 {
    const K1: u64 = 0x87c3_7b91_1142_53d5;
    const K2: u64 = 0x4cf5_ad43_2745_937f;
    let mut h = seed ^ (data.len() as u64).wrapping_mul(K1);
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        let mut w = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        w = w.wrapping_mul(K1).rotate_left(31).wrapping_mul(K2);
        h = (h ^ w)
            .rotate_left(27)
            .wrapping_mul(5)
            .wrapping_add(0x52dc_e729);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut t = [0u8; 8];
        t[..rest.len()].copy_from_slice(rest);
        let w = u64::from_le_bytes(t)
            .wrapping_mul(K1)
            .rotate_left(31)
            .wrapping_mul(K2);
        h ^= w;
    }
    fmix64(h)
}

fn fmix64(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^ (k >> 33)
}

/// Checks the header a driver writes at the start of `vkGetPipelineCacheData`
/// output (`VkPipelineCacheHeaderVersionOne`) against `key`.
pub(crate) fn check_vk_header(key: &PipelineKey, data: &[u8]) -> Result<(), Reject> {
    if data.len() < VK_HEADER_SIZE {
        return Err(Reject::BadPayloadHeader);
    }
    let header_size = u32_at(data, 0) as usize;
    let version = u32_at(data, 4);
    if header_size < VK_HEADER_SIZE || header_size > data.len() || version != VK_HEADER_VERSION_ONE
    {
        return Err(Reject::BadPayloadHeader);
    }
    if u32_at(data, 8) != key.vendor_id
        || u32_at(data, 12) != key.device_id
        || data[16..32] != key.uuid
    {
        return Err(Reject::Foreign);
    }
    Ok(())
}

/// A pipeline-cache file holding `data` (which must pass [`check_vk_header`]).
pub(crate) fn encode_pipelines(key: &PipelineKey, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(PIPELINE_HEADER + data.len());
    out.extend_from_slice(PIPELINE_MAGIC);
    out.extend_from_slice(&key.vendor_id.to_le_bytes());
    out.extend_from_slice(&key.device_id.to_le_bytes());
    out.extend_from_slice(&key.driver_version.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(&key.uuid);
    out.extend_from_slice(&(data.len() as u64).to_le_bytes());
    out.extend_from_slice(&hash64(data, 0).to_le_bytes());
    out.extend_from_slice(data);
    out
}

/// The driver data in a pipeline-cache file, if the file is whole, ours,
/// for `key`, and its payload carries the driver's matching header.
pub(crate) fn decode_pipelines<'a>(key: &PipelineKey, file: &'a [u8]) -> Result<&'a [u8], Reject> {
    if file.len() < PIPELINE_HEADER {
        return Err(if file.starts_with(PIPELINE_MAGIC) || file.len() < 8 {
            Reject::Truncated
        } else {
            Reject::BadMagic
        });
    }
    if &file[..8] != PIPELINE_MAGIC {
        return Err(Reject::BadMagic);
    }
    if u32_at(file, 8) != key.vendor_id
        || u32_at(file, 12) != key.device_id
        || u32_at(file, 16) != key.driver_version
        || file[24..40] != key.uuid
    {
        return Err(Reject::Foreign);
    }
    let len = u64_at(file, 40);
    let data = &file[PIPELINE_HEADER..];
    if len != data.len() as u64 {
        return Err(Reject::Truncated);
    }
    if hash64(data, 0) != u64_at(file, 48) {
        return Err(Reject::Checksum);
    }
    check_vk_header(key, data)?;
    Ok(data)
}

/// The checksum field of an encoded pipeline-cache file (0 when too short).
pub(crate) fn stored_checksum(file: &[u8]) -> u64 {
    if file.len() < PIPELINE_HEADER {
        return 0;
    }
    u64_at(file, 48)
}

/// Whether `words` start with a plausible SPIR-V header: magic number,
/// version 1.0 to 1.6, a non-zero id bound, schema 0.
pub(crate) fn check_spirv_header(words: &[u32]) -> bool {
    if words.len() < 5 || words[0] != SPIRV_MAGIC_NUMBER {
        return false;
    }
    let version = words[1];
    let (major, minor) = ((version >> 16) & 0xff, (version >> 8) & 0xff);
    major == 1 && minor <= 6 && version & 0xff00_00ff == 0 && words[3] > 0 && words[4] == 0
}

/// The key of one GLSL compilation: everything that decides its output.
pub(crate) fn spirv_key(compiler: &str, source: &str, options: &[(&str, &str)]) -> Vec<u8> {
    let mut key = Vec::with_capacity(source.len() + 256);
    let mut field = |b: &[u8]| {
        key.extend_from_slice(&(b.len() as u64).to_le_bytes());
        key.extend_from_slice(b);
    };
    field(compiler.as_bytes());
    for (name, value) in options {
        field(name.as_bytes());
        field(value.as_bytes());
    }
    field(source.as_bytes());
    key
}

/// The file name for a SPIR-V cache entry keyed by `key`.
pub(crate) fn spirv_file_name(key: &[u8]) -> String {
    format!(
        "spirv-{:016x}{:016x}.bin",
        hash64(key, 0x5eed_0001),
        hash64(key, 0x5eed_0002)
    )
}

/// A SPIR-V cache file for `key` holding `words`.
pub(crate) fn encode_spirv(key: &[u8], words: &[u32]) -> Vec<u8> {
    let code: &[u8] = bytemuck::cast_slice(words);
    let mut out = Vec::with_capacity(SPIRV_HEADER + key.len() + code.len());
    out.extend_from_slice(SPIRV_MAGIC);
    out.extend_from_slice(&(key.len() as u32).to_le_bytes());
    out.extend_from_slice(&(words.len() as u32).to_le_bytes());
    out.extend_from_slice(&0u64.to_le_bytes());
    out.extend_from_slice(key);
    for w in words {
        out.extend_from_slice(&w.to_le_bytes());
    }
    let sum = hash64(&out[SPIRV_HEADER..], 0);
    out[16..24].copy_from_slice(&sum.to_le_bytes());
    out
}

/// The SPIR-V words in a cache file, if it is whole, holds exactly `key`
/// and the words carry a valid SPIR-V header.
pub(crate) fn decode_spirv(key: &[u8], file: &[u8]) -> Result<Vec<u32>, Reject> {
    if file.len() < SPIRV_HEADER {
        return Err(Reject::Truncated);
    }
    if &file[..8] != SPIRV_MAGIC {
        return Err(Reject::BadMagic);
    }
    let key_len = u32_at(file, 8) as usize;
    let n_words = u32_at(file, 12) as usize;
    let body = &file[SPIRV_HEADER..];
    if body.len() as u64 != key_len as u64 + 4 * n_words as u64 {
        return Err(Reject::Truncated);
    }
    if hash64(body, 0) != u64_at(file, 16) {
        return Err(Reject::Checksum);
    }
    if &body[..key_len] != key {
        return Err(Reject::KeyMismatch);
    }
    let words: Vec<u32> = body[key_len..]
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    if !check_spirv_header(&words) {
        return Err(Reject::BadPayloadHeader);
    }
    Ok(words)
}

/// Reads `path` whole if it exists and is at most `max` bytes.
pub(crate) fn read_file(path: &Path, max: u64) -> Option<Vec<u8>> {
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() || meta.len() > max {
        return None;
    }
    std::fs::read(path).ok()
}

/// Writes `bytes` to `path` atomically: into a temporary file beside it,
/// then renamed over it. Creates the directory when missing.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(
        ".{name}.{}.{}.tmp",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    let written = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        drop(f);
        std::fs::rename(&tmp, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Live counts of what the disk cache did (shown by [`CacheStats`]).
#[derive(Debug, Default)]
pub(crate) struct CacheCounters {
    pub spirv_hits: AtomicU64,
    pub spirv_misses: AtomicU64,
    pub spirv_rejected: AtomicU64,
    pub pipeline_saves: AtomicU64,
}

/// What the on-disk cache did for a device ([`crate::Device::cache_stats`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CacheStats {
    /// The cache directory; `None` when the cache is off.
    pub dir: Option<PathBuf>,
    /// Bytes of pipeline-cache data loaded when the device was created (0:
    /// none found, or the file was ignored).
    pub pipeline_bytes_loaded: u64,
    /// Why the pipeline-cache file was ignored, when it was.
    pub pipeline_file_ignored: Option<String>,
    /// Pipeline-cache files written so far.
    pub pipeline_saves: u64,
    /// GLSL compilations answered from the cache.
    pub spirv_hits: u64,
    /// GLSL compilations that ran shaderc (and were then stored).
    pub spirv_misses: u64,
    /// Cached SPIR-V files found but ignored (corrupt, foreign, bad header).
    pub spirv_rejected: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> PipelineKey {
        PipelineKey {
            vendor_id: 0x10de,
            device_id: 0x2335,
            driver_version: 0x9133_c100,
            uuid: *b"0123456789abcdef",
        }
    }

    fn vk_data(k: &PipelineKey, extra: &[u8]) -> Vec<u8> {
        let mut d = Vec::new();
        d.extend_from_slice(&32u32.to_le_bytes());
        d.extend_from_slice(&1u32.to_le_bytes());
        d.extend_from_slice(&k.vendor_id.to_le_bytes());
        d.extend_from_slice(&k.device_id.to_le_bytes());
        d.extend_from_slice(&k.uuid);
        d.extend_from_slice(extra);
        d
    }

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<OsString> + 'a {
        move |name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| OsString::from(v))
        }
    }

    #[test]
    fn directory_resolution_order() {
        let all = [
            (ENV_CACHE_DIR, "/c"),
            ("XDG_CACHE_HOME", "/x"),
            ("HOME", "/h"),
        ];
        assert_eq!(
            resolve_dir(Some(Path::new("/o")), env(&all)),
            Some("/o".into())
        );
        assert_eq!(resolve_dir(Some(Path::new("")), env(&all)), None);
        assert_eq!(resolve_dir(None, env(&all)), Some("/c".into()));
        assert_eq!(
            resolve_dir(None, env(&all[1..])),
            Some("/x/vkcompute".into())
        );
        assert_eq!(
            resolve_dir(None, env(&all[2..])),
            Some("/h/.cache/vkcompute".into())
        );
        assert_eq!(resolve_dir(None, env(&[])), None);
        for off in ["off", "OFF", "0", "", "none"] {
            assert_eq!(
                resolve_dir(None, env(&[(ENV_CACHE_DIR, off), ("HOME", "/h")])),
                None
            );
        }
        // A relative XDG_CACHE_HOME is invalid per the spec: skipped.
        assert_eq!(
            resolve_dir(None, env(&[("XDG_CACHE_HOME", "rel"), ("HOME", "/h")])),
            Some("/h/.cache/vkcompute".into())
        );
    }

    #[test]
    fn pipeline_file_round_trip() {
        let k = key();
        let data = vk_data(&k, b"driver blob");
        let file = encode_pipelines(&k, &data);
        assert_eq!(decode_pipelines(&k, &file).unwrap(), &data[..]);
        assert!(k
            .file_name()
            .starts_with("pipelines-10de-2335-9133c100-3031"));
    }

    #[test]
    fn pipeline_file_rejections() {
        let k = key();
        let file = encode_pipelines(&k, &vk_data(&k, &[7u8; 100]));
        for cut in [0, 5, 30, file.len() - 1] {
            assert_eq!(
                decode_pipelines(&k, &file[..cut]),
                Err(Reject::Truncated),
                "cut {cut}"
            );
        }
        let mut flipped = file.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 1;
        assert_eq!(decode_pipelines(&k, &flipped), Err(Reject::Checksum));
        let mut magic = file.clone();
        magic[7] = 2;
        assert_eq!(decode_pipelines(&k, &magic), Err(Reject::BadMagic));
        assert_eq!(decode_pipelines(&k, &[0u8; 200]), Err(Reject::BadMagic));
        for change in [
            |k: &mut PipelineKey| k.vendor_id += 1,
            |k: &mut PipelineKey| k.device_id += 1,
            |k: &mut PipelineKey| k.driver_version += 1,
            |k: &mut PipelineKey| k.uuid[15] ^= 1,
        ] {
            let mut other = k;
            change(&mut other);
            assert_eq!(decode_pipelines(&other, &file), Err(Reject::Foreign));
        }
        // Our header fine, the driver's header wrong.
        let mut bad = vk_data(&k, b"x");
        bad[4] = 2;
        let file = encode_pipelines(&k, &bad);
        assert_eq!(decode_pipelines(&k, &file), Err(Reject::BadPayloadHeader));
        let mut other_dev = vk_data(&k, b"x");
        other_dev[12] ^= 1;
        let file = encode_pipelines(&k, &other_dev);
        assert_eq!(decode_pipelines(&k, &file), Err(Reject::Foreign));
    }

    #[test]
    fn driver_header_checks() {
        let k = key();
        assert!(check_vk_header(&k, &vk_data(&k, &[])).is_ok());
        assert_eq!(
            check_vk_header(&k, &[0u8; 16]),
            Err(Reject::BadPayloadHeader)
        );
        let mut big = vk_data(&k, &[]);
        big[0] = 200; // header size beyond the data
        assert_eq!(check_vk_header(&k, &big), Err(Reject::BadPayloadHeader));
    }

    fn module() -> Vec<u32> {
        vec![
            SPIRV_MAGIC_NUMBER,
            0x0001_0500,
            0x000d_000b,
            42,
            0,
            0x0002_0011,
            1,
        ]
    }

    #[test]
    fn spirv_round_trip_and_rejections() {
        let key = spirv_key("shaderc 1", "void main(){}", &[("opt", "perf")]);
        let file = encode_spirv(&key, &module());
        assert_eq!(decode_spirv(&key, &file).unwrap(), module());

        let other = spirv_key("shaderc 1", "void main(){ }", &[("opt", "perf")]);
        assert_eq!(decode_spirv(&other, &file), Err(Reject::KeyMismatch));
        let mut flipped = file.clone();
        let last = flipped.len() - 2;
        flipped[last] ^= 0x40;
        assert_eq!(decode_spirv(&key, &flipped), Err(Reject::Checksum));
        assert_eq!(
            decode_spirv(&key, &file[..file.len() - 4]),
            Err(Reject::Truncated)
        );
        assert_eq!(decode_spirv(&key, &[1, 2, 3]), Err(Reject::Truncated));
        let mut bad = module();
        bad[0] = 0x0302_2307; // byte-swapped magic
        assert_eq!(
            decode_spirv(&key, &encode_spirv(&key, &bad)),
            Err(Reject::BadPayloadHeader)
        );
    }

    #[test]
    fn spirv_keys_separate_fields() {
        // Field boundaries are length-prefixed: moving bytes between fields
        // changes the key.
        let a = spirv_key("c", "ab", &[("x", "y")]);
        let b = spirv_key("c", "b", &[("x", "ya")]);
        assert_ne!(a, b);
        assert_ne!(spirv_file_name(&a), spirv_file_name(&b));
        assert_eq!(spirv_file_name(&a), spirv_file_name(&a.clone()));
    }

    #[test]
    fn spirv_header_checks() {
        assert!(check_spirv_header(&module()));
        let mut v = module();
        v[1] = 0x0002_0000;
        assert!(!check_spirv_header(&v));
        let mut v = module();
        v[3] = 0;
        assert!(!check_spirv_header(&v));
        let mut v = module();
        v[4] = 1;
        assert!(!check_spirv_header(&v));
        assert!(!check_spirv_header(&module()[..4]));
    }

    #[test]
    fn hash_is_stable_and_spreads() {
        // Fixed values: a change would silently invalidate every cache.
        assert_eq!(hash64(b"vkcompute", 0), 0x4f8d_df5e_e446_3d64);
        assert_eq!(hash64(&[7u8; 100], 3), 0x7610_c777_db8d_5713);
        assert_ne!(hash64(b"a", 0), hash64(b"b", 0));
        assert_ne!(hash64(b"abcdefgh", 0), hash64(b"abcdefgi", 0));
        assert_ne!(hash64(b"abcdefgh1", 0), hash64(b"abcdefgh2", 0));
        assert_ne!(hash64(b"abc", 1), hash64(b"abc", 2));
        assert_ne!(hash64(&[0u8; 8], 0), hash64(&[0u8; 9], 0));
    }

    #[test]
    fn atomic_write_replaces_and_leaves_no_temporaries() {
        let dir = std::env::temp_dir().join(format!("vkcompute-dc-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let path = dir.join("sub").join("f.bin");
        write_atomic(&path, b"one").unwrap();
        write_atomic(&path, b"two!").unwrap();
        assert_eq!(read_file(&path, 100).unwrap(), b"two!");
        assert_eq!(read_file(&path, 3), None, "over the size cap");
        assert_eq!(read_file(&dir.join("missing"), 100), None);
        assert_eq!(read_file(&dir, 100), None, "a directory");
        let names: Vec<_> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![OsString::from("f.bin")]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
