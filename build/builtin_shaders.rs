//! Embeds the checked-in SPIR-V of the built-in kernels; runs no compiler.
//!
//! `scripts/shaders.py` compiles every `shaders/*.comp` (and each
//! `// variant:` line's definitions) into `shaders/spv/<output>.spv` and
//! lists them in `shaders/spv/MANIFEST.tsv` with the hash of every input
//! file, the compiler and the output's hash. This reads that manifest and
//! writes `$OUT_DIR/builtin_spirv.rs`, a table
//! `BUILTIN_SPIRV: &[(&str, &[u32])]` of (output name, SPIR-V words) in the
//! manifest's (sorted) order. Building the crate therefore needs neither
//! glslc nor glslangValidator; `scripts/test.sh` proves it by building with
//! both shadowed on PATH.
//!
//! An output whose file is missing, not whole words, not SPIR-V or not the
//! bytes the manifest hashed fails the build (the package is broken). A
//! source that changed since its SPIR-V was made only warns (the build
//! embeds the old SPIR-V): editing a shader and then running
//! `scripts/shaders.py` is the normal order of work, and
//! `scripts/shaders.py --check` is what fails CI.

use std::collections::{BTreeMap, BTreeSet};
use std::env;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::sha256;

/// The manifest's columns, in order (scripts/shaders.py writes them).
const COLUMNS: [&str; 7] = [
    "output",
    "source",
    "defines",
    "inputs",
    "compiler",
    "args",
    "spirv_sha256",
];

/// One manifest row, the fields this script uses.
struct Row {
    output: String,
    source: String,
    /// (path relative to the crate root, SHA-256) of every input file.
    inputs: Vec<(String, String)>,
    spirv_sha256: String,
}

/// Parses the manifest's text; `Err` names the row at fault. Pure.
fn parse_manifest(text: &str) -> Result<Vec<Row>, String> {
    let mut lines = text.lines().filter(|l| !l.starts_with('#'));
    let header: Vec<&str> = lines.next().unwrap_or_default().split('\t').collect();
    if header != COLUMNS {
        return Err(format!("header is {header:?}, expected {COLUMNS:?}"));
    }
    lines
        .map(|line| {
            let f: Vec<&str> = line.split('\t').collect();
            if f.len() != COLUMNS.len() {
                return Err(format!("row {line:?} has {} fields, not 7", f.len()));
            }
            let inputs = f[3]
                .split_whitespace()
                .map(|e| {
                    e.rsplit_once(':')
                        .map(|(p, h)| (p.to_string(), h.to_string()))
                        .ok_or_else(|| format!("input {e:?} of {} is not path:sha256", f[0]))
                })
                .collect::<Result<_, _>>()?;
            Ok(Row {
                output: f[0].to_string(),
                source: f[1].to_string(),
                inputs,
                spirv_sha256: f[6].to_string(),
            })
        })
        .collect()
}

/// Reads `shaders/spv/MANIFEST.tsv` and the SPIR-V it lists, warns about
/// changed sources, and writes `$OUT_DIR/builtin_spirv.rs`.
pub fn embed_all() {
    sha256::check_known_digests();
    let root = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let out_dir = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR"));
    // A folder: cargo reruns this when anything below it changes.
    println!("cargo:rerun-if-changed=shaders");
    let manifest = Path::new("shaders/spv/MANIFEST.tsv");
    let text = std::fs::read_to_string(root.join(manifest)).unwrap_or_else(|e| {
        panic!(
            "vkcompute: cannot read {} ({e}): the built-in kernels' SPIR-V ships with the \
             crate; regenerate it with scripts/shaders.py",
            manifest.display()
        )
    });
    let rows =
        parse_manifest(&text).unwrap_or_else(|e| panic!("vkcompute: {}: {e}", manifest.display()));
    warn_stale(&root, &rows);
    let mut table = String::from(
        "/// Built-in SPIR-V, checked in under `shaders/spv/` (compiled from `shaders/*.comp` \
         by scripts/shaders.py): (output name, words).\n\
         pub(crate) static BUILTIN_SPIRV: &[(&str, &[u32])] = &[\n",
    );
    for row in &rows {
        let path = Path::new("shaders/spv").join(format!("{}.spv", row.output));
        let bytes = std::fs::read(root.join(&path))
            .unwrap_or_else(|e| panic!("vkcompute: cannot read {} ({e})", path.display()));
        assert_eq!(
            sha256::hex_digest(&bytes),
            row.spirv_sha256,
            "vkcompute: {} is not the file {} lists; regenerate with scripts/shaders.py",
            path.display(),
            manifest.display()
        );
        assert!(
            bytes.len() % 4 == 0 && bytes.starts_with(&[0x03, 0x02, 0x23, 0x07]),
            "vkcompute: {} is not little-endian SPIR-V words",
            path.display()
        );
        let _ = write!(table, "    ({:?}, &[", row.output);
        for (i, w) in bytes.chunks_exact(4).enumerate() {
            if i % 8 == 0 {
                table.push_str("\n        ");
            }
            let word = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
            let _ = write!(table, "0x{word:08x}, ");
        }
        table.push_str("\n    ]),\n");
    }
    table.push_str("];\n");
    std::fs::write(out_dir.join("builtin_spirv.rs"), table).expect("write builtin_spirv.rs");
}

/// Warns, once per file, about inputs that changed since their outputs were
/// compiled, and about `shaders/*.comp` files no output comes from.
fn warn_stale(root: &Path, rows: &[Row]) {
    let mut changed: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for row in rows {
        for (path, hash) in &row.inputs {
            let now = std::fs::read(root.join(path)).map(|b| sha256::hex_digest(&b));
            if now.as_deref().ok() != Some(hash.as_str()) {
                changed.entry(path).or_default().push(&row.output);
            }
        }
    }
    for (path, outputs) in changed {
        println!(
            "cargo:warning=vkcompute: {path} changed since the SPIR-V of {} was compiled; \
             this build embeds the old SPIR-V; run scripts/shaders.py",
            outputs.join(", ")
        );
    }
    let sources: BTreeSet<&str> = rows.iter().map(|r| r.source.as_str()).collect();
    let comps = std::fs::read_dir(root.join("shaders"))
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".comp"));
    for name in comps {
        let path = format!("shaders/{name}");
        if !sources.contains(path.as_str()) {
            println!(
                "cargo:warning=vkcompute: {path} has no SPIR-V in shaders/spv/ and is not \
                 embedded; run scripts/shaders.py"
            );
        }
    }
}
