//! The per-device registry of built-in kernels (core: the device holds it
//! and `Batch::copy` uses it; [`crate::ops`] records the built-ins).
//!
//! Every `shaders/*.comp` file (and each of its `// variant:` lines) is
//! compiled ahead of time by `scripts/shaders.py` into `shaders/spv/`, which
//! ships with the crate; `build/builtin_shaders.rs` embeds those files in
//! [`BUILTIN_SPIRV`], keyed by output name, without running a compiler. A device's registry turns a (name, specialization) pair into a
//! pipeline the first time it is asked for, through the same kernel and
//! pipeline cache as user kernels ([`crate::pipeline_cache`]: one
//! `VkPipelineCache`, written to disk with the rest), and hands the same
//! pipeline back on every later request without touching SPIR-V again. No
//! runtime GLSL compiler is involved: built-ins work with
//! `default-features = false`.

use std::sync::Arc;

use crate::device::{Device, DeviceInner};
use crate::error::{Error, Result};
use crate::kernel::Kernel;
use crate::pipeline_cache::BuiltinStore;

include!(concat!(env!("OUT_DIR"), "/builtin_spirv.rs"));

/// The embedded SPIR-V of built-in `name` (a `shaders/*.comp` file stem).
pub(crate) fn spirv(name: &str) -> Option<&'static [u32]> {
    BUILTIN_SPIRV
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, words)| *words)
}

/// The built-in pipelines of `dev`: [`BuiltinStore`] (held by the device)
/// with the building on top.
struct Registry<'a>(&'a BuiltinStore);

/// Whether built-in `name` reads its buffers as raw words whatever their
/// element type, so that its bindings are not checked against buffers'
/// element types ([`crate::element`]): the copy kernel binds `uvec4` for
/// any element type, the f16 widening and batched kernels read the `u16`
/// buffers `matmul_f16` takes as `float16_t`, the conversion kernels
/// (`ops::convert`) read and write 16-bit tensors as `uint16_t` words, the
/// coopmat matmul kernels read
/// those `u16` buffers as `uvec4` (NV and KHR alike, the workgroup-scope
/// ones as `float16_t`); the 16-bit-weight linear kernels
/// read [`F16`](crate::element::F16) and [`Bf16`](crate::element::Bf16)
/// weights as `uvec4` and `uint16_t` words, and so do the bf16-weight
/// matmuls and the workgroup-scope linear kernels (`matmul_cm2_decode.comp`,
/// `matmul_bf16w_batched.comp`), their f16 operands as `float16_t`, and the
/// tensor-core streaming linear kernels (`linear_tc_stream.comp`) read
/// weights as `float16_t` or `uint16_t` words.
fn reads_raw_words(name: &str) -> bool {
    matches!(
        name,
        "copy" | "convert_f16_f32" | "matmul_f16_batched" | "matmul_f16_batched_bt"
    ) || name.starts_with("cast")
        || name.starts_with("matmul_f16_coopmat")
        || name.starts_with("matmul_f16_cm2")
        || name.starts_with("matmul_f16_khr")
        || name.starts_with("linear_f16")
        || name.starts_with("linear_bf16")
        || name.starts_with("mlp_f16")
        || name.starts_with("mlp_bf16")
        || name.starts_with("linear_cm2")
        || name.starts_with("linear_tc_")
        || name.starts_with("matmul_bf16w")
        || name == "matmul_cm2_decode"
        || is_bf16_words(name)
}

/// Whether built-in `name` is a transformer kernel reading bf16 as 16-bit
/// words (`uint16_t`): the ops hand it `u16` buffers today, and a bf16
/// element type later, so its bindings are not checked.
fn is_bf16_words(name: &str) -> bool {
    name.starts_with("nn_") && name.ends_with("_bf16")
}

impl Registry<'_> {
    /// The pipeline of built-in `name` with `spec` applied, built on first use.
    fn get(
        &self,
        dev: &Arc<DeviceInner>,
        name: &'static str,
        spec: &[(u32, u32)],
    ) -> Result<Kernel> {
        let mut spec = spec.to_vec();
        spec.sort_unstable();
        if let Some((core, label)) = self.0.get(name, &spec) {
            return Ok(Kernel {
                dev: dev.clone(),
                core,
                label,
            });
        }
        let words = spirv(name).ok_or_else(|| Error::InvalidSpirv {
            reason: format!("no built-in kernel named {name:?} (shaders/{name}.comp)"),
        })?;
        let gpu = Device { inner: dev.clone() };
        let mut b = Kernel::builder(&gpu)
            .spirv(words)
            .label(&format!("vkcompute {name}"));
        if reads_raw_words(name) {
            b = b.raw_elements();
        }
        for &(id, v) in &spec {
            b = b.spec_u32(id, v);
        }
        let k = b.build()?;
        self.0.insert(name, spec, k.core.clone(), k.label.clone());
        Ok(k)
    }
}

/// The pipeline of built-in `name` with `spec` on `dev`, built on first
/// use (for the core's own use: `Batch::copy` and [`crate::ops`]).
pub(crate) fn get(
    dev: &Arc<DeviceInner>,
    name: &'static str,
    spec: &[(u32, u32)],
) -> Result<Kernel> {
    Registry(dev.builtins()).get(dev, name, spec)
}

/// What a device's built-in registry did so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct RegistryStats {
    /// Distinct (built-in, specialization) pipelines held.
    pub pipelines: usize,
    /// Requests that built a pipeline.
    pub built: u64,
    /// Requests served from the registry without building anything.
    pub hits: u64,
}

/// Counts of the built-in kernels `gpu` made and reused.
pub fn registry_stats(gpu: &Device) -> RegistryStats {
    let (pipelines, built, hits) = gpu.inner.builtins().stats();
    RegistryStats {
        pipelines,
        built,
        hits,
    }
}

/// Names of the built-in kernels embedded in this build (`shaders/*.comp`
/// file stems), sorted.
pub fn builtin_names() -> Vec<&'static str> {
    BUILTIN_SPIRV.iter().map(|(n, _)| *n).collect()
}

/// Built-in kernel `name` (see [`builtin_names`]) with `uint`
/// specialization constants `spec` (id, value), from `gpu`'s registry:
/// built at first use, the same pipeline afterwards. For running a built-in
/// with [`Batch::run_configured`](crate::Batch::run_configured) directly;
/// the functions of [`crate::ops`] do this for you.
pub fn builtin_kernel(gpu: &Device, name: &str, spec: &[(u32, u32)]) -> Result<Kernel> {
    let name = BUILTIN_SPIRV
        .iter()
        .map(|(n, _)| *n)
        .find(|n| *n == name)
        .ok_or_else(|| Error::InvalidSpirv {
            reason: format!("no built-in kernel named {name:?}"),
        })?;
    get(&gpu.inner, name, spec)
}

/// The statistics of one pipeline of a built-in kernel
/// ([`builtin_statistics`]).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct BuiltinStatistics {
    /// The built-in's name (its kernels' label is `vkcompute <name>`).
    pub name: &'static str,
    /// The `uint` specialization constants (id, value) the pipeline was
    /// built with, sorted by id (empty: none set).
    pub spec: Vec<(u32, u32)>,
    /// Its executables and the statistics the driver reports for each.
    pub executables: Vec<crate::ExecutableStatistics>,
}

/// The built-in that `kernel` names: a name [`builtin_names`] lists, or
/// the label of its kernels (`vkcompute <name>`, as profile rows show
/// it). Pure.
fn resolve(kernel: &str) -> Option<&'static str> {
    let kernel = kernel.trim();
    let name = kernel.strip_prefix("vkcompute ").unwrap_or(kernel).trim();
    BUILTIN_SPIRV.iter().map(|(n, _)| *n).find(|n| *n == name)
}

/// What the driver made of built-in `kernel` on `gpu`: the statistics
/// ([`Kernel::statistics`]) of every pipeline of it the device has built,
/// one per specialization, in specialization order; where the device has
/// built none yet, of the pipeline without specialization, built now.
/// `kernel` is a built-in's name or its kernels' label (`vkcompute
/// matmul_f16_cm2_128x256x64`, as [`Profile`](crate::Profile) rows name the
/// command that ran), so a benchmark can ask about the kernel it just
/// timed. Needs a device created with
/// [`DeviceOptions::pipeline_statistics`](crate::DeviceOptions::pipeline_statistics)
/// on an adapter with `VK_KHR_pipeline_executable_properties`, else
/// [`Error::Unsupported`] naming the extension; an unknown name is
/// [`Error::UnknownBuiltin`].
pub fn builtin_statistics(gpu: &Device, kernel: &str) -> Result<Vec<BuiltinStatistics>> {
    let name = resolve(kernel).ok_or_else(|| Error::UnknownBuiltin {
        name: kernel.to_string(),
        known: BUILTIN_SPIRV.len(),
    })?;
    let d = &gpu.inner;
    if d.pipeline_statistics.is_none() {
        let has = d.info.pipeline_executable_properties;
        return Err(crate::pipeline_stats::unavailable(has, &d.info.name));
    }
    let mut held = d.builtins().held(name);
    if held.is_empty() {
        let k = get(d, name, &[])?;
        held.push((Vec::new(), (k.core, k.label)));
    }
    held.into_iter()
        .map(|(spec, (core, label))| {
            let kernel = Kernel {
                dev: d.clone(),
                core,
                label,
            };
            Ok(BuiltinStatistics {
                name,
                spec,
                executables: kernel.statistics()?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_ins_resolve_by_name_or_label() {
        assert_eq!(resolve("copy"), Some("copy"));
        assert_eq!(resolve("vkcompute copy"), Some("copy"));
        assert_eq!(resolve(" vkcompute  reduce_sg "), Some("reduce_sg"));
        assert_eq!(resolve("vkcompute"), None);
        assert_eq!(resolve("vkcompute no_such_kernel"), None);
        assert_eq!(resolve("src/model.rs:42"), None);
        assert_eq!(resolve(""), None);
    }

    #[test]
    fn every_shader_is_embedded_as_valid_spirv() {
        let names = builtin_names();
        for want in [
            "copy",
            "ew_unary_f32",
            "ew_binary_f32",
            "reduce_sg",
            "softmax_wg",
        ] {
            assert!(names.contains(&want), "{want} missing from {names:?}");
        }
        for (name, words) in BUILTIN_SPIRV {
            assert_eq!(words.first(), Some(&0x0723_0203), "{name}: magic");
            crate::reflect::reflect(words, None).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        assert!(spirv("no such kernel").is_none());
    }

    #[test]
    fn every_comp_file_and_variant_is_embedded() {
        // build.rs only warns about a shader with no checked-in SPIR-V
        // (scripts/shaders.py --check fails CI on it); this fails
        // `cargo test` too.
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("shaders");
        let names = builtin_names();
        let mut outputs = 0;
        for entry in std::fs::read_dir(&dir).expect("shaders/") {
            let path = entry.expect("shaders/ entry").path();
            if path.extension().and_then(|e| e.to_str()) != Some("comp") {
                continue;
            }
            let source = std::fs::read_to_string(&path).expect("read shader");
            let stem = path.file_stem().and_then(|s| s.to_str()).expect("UTF-8");
            let variants = source
                .lines()
                .filter_map(|l| l.trim().strip_prefix("// variant:"))
                .filter_map(|rest| rest.split_whitespace().next());
            for name in std::iter::once(stem).chain(variants) {
                assert!(names.contains(&name), "{name} ({path:?}) is not embedded");
                outputs += 1;
            }
        }
        assert_eq!(outputs, names.len(), "embedded outputs no shader asks for");
    }

    #[test]
    fn only_kernels_that_read_raw_words_skip_the_element_check() {
        use crate::element::ScalarKind;
        for (name, words) in BUILTIN_SPIRV {
            let (_, elements) = crate::reflect::reflect_with_elements(words, None).unwrap();
            let kinds: Vec<ScalarKind> = elements.iter().flatten().map(|e| e.kind).collect();
            if reads_raw_words(name) {
                // Each declares elements that the buffers it is given
                // (any type; f16 bits in u16) would not always match.
                assert!(!kinds.is_empty(), "{name}");
            } else {
                // The rest read the f32 or F16 buffers the ops take (and
                // the transformer kernels, u32 ids, positions and lengths;
                // ops::increment and the fused MLP kernels, u32 counters).
                let words_too =
                    name.starts_with("nn_") || *name == "u32_add" || name.starts_with("mlp_");
                assert!(
                    kinds.iter().all(|k| matches!(k, ScalarKind::Float(_))
                        || (words_too && *k == ScalarKind::Unsigned)),
                    "{name}: {kinds:?}"
                );
            }
        }
    }

    /// Every built-in kernel parses on the first try once what the
    /// reflection parser cannot read is made opaque: none goes through the
    /// parser's panic (whose message the default hook would print to a
    /// user's terminal).
    #[test]
    fn builtins_parse_without_the_parser_panicking() {
        for (name, words) in BUILTIN_SPIRV {
            assert!(!crate::reflect::parser_panics(words), "{name}");
        }
    }

    /// glslang leaves `[[unroll]]` loops over arrays of cooperative
    /// matrices as arrays, which NVIDIA's driver ran at a tenth of the rate
    /// of separate values: the KHR and coopmat2 kernels (compiled by a
    /// glslang no spirv-opt here follows) declare no such array.
    #[test]
    fn khr_and_coopmat2_kernels_hold_no_arrays_of_cooperative_matrices() {
        const OP_TYPE_ARRAY: u32 = 28;
        const OP_TYPE_COOPMAT_KHR: u32 = 4456;
        let mut seen = 0;
        for (name, words) in BUILTIN_SPIRV {
            let cm2 = name.starts_with("matmul_f16_cm2")
                || name.starts_with("matmul_bf16w_cm2")
                || name.starts_with("linear_cm2")
                || name.starts_with("linear_tc_")
                || name.starts_with("nn_attn_prefill_tc")
                || *name == "matmul_cm2_decode";
            if !(name.starts_with("matmul_f16_khr") || cm2) {
                continue;
            }
            seen += 1;
            let mut coop = std::collections::HashSet::new();
            let mut i = 5;
            while i < words.len() {
                let (count, op) = ((words[i] >> 16) as usize, words[i] & 0xffff);
                if op == OP_TYPE_COOPMAT_KHR {
                    coop.insert(words[i + 1]);
                }
                if op == OP_TYPE_ARRAY {
                    assert!(
                        !coop.contains(&words[i + 2]),
                        "{name}: an array of cooperative matrices"
                    );
                }
                i += count.max(1);
            }
            assert!(!coop.is_empty(), "{name}: no cooperative-matrix type");
        }
        assert!(seen >= 6, "{seen} KHR and coopmat2 kernels");
    }

    #[test]
    fn fixed_matmul_tiles_are_embedded_without_specialization_constants() {
        use crate::ops::{CoopTile, TileConfig};
        let f32_tiles = [TileConfig::LARGE, TileConfig::SMALL, TileConfig::NARROW];
        let coop_tiles = [CoopTile::DEFAULT, CoopTile::WIDE, CoopTile::TALL];
        let names = f32_tiles
            .iter()
            .map(TileConfig::fixed_kernel)
            .chain(coop_tiles.iter().map(CoopTile::fixed_kernel));
        for name in names {
            let name = name.expect("every built-in tile has a fixed kernel");
            let words = spirv(name).unwrap_or_else(|| panic!("{name} embedded"));
            let r = crate::reflect::reflect(words, None).expect("reflects");
            assert!(r.spec_constants.is_empty(), "{name}");
            assert_eq!(r.bindings.len(), 3, "{name}");
        }
        // Each f32 kernel's workgroup is the tile's thread count.
        for t in f32_tiles {
            let words = spirv(t.fixed_kernel().unwrap_or_default()).expect("embedded");
            let r = crate::reflect::reflect(words, None).expect("reflects");
            assert_eq!(r.workgroup_size[0], t.threads(), "{t:?}");
            assert_eq!(r.workgroup_size_ids[0], None, "{t:?}");
        }
        // Other shapes and the 16-byte kernel have none.
        let other = TileConfig {
            bk: 16,
            ..TileConfig::LARGE
        };
        assert_eq!(other.fixed_kernel(), None);
        let v4 = TileConfig {
            vec4: true,
            ..TileConfig::LARGE
        };
        assert_eq!(v4.fixed_kernel(), None);
        let odd = CoopTile {
            bk: 48,
            ..CoopTile::DEFAULT
        };
        assert_eq!(odd.fixed_kernel(), None);
    }

    #[test]
    fn cooperative_matrix_kernel_reflects() {
        // spirq cannot parse cooperative-matrix types; reflection replaces
        // them and still finds the bindings and constants.
        let words = spirv("matmul_f16_coopmat").expect("embedded");
        let r = crate::reflect::reflect(words, None).expect("reflects");
        assert_eq!(r.bindings.len(), 3);
        assert_eq!(r.push_constant_size, 12);
        let mut ids: Vec<u32> = r.spec_constants.iter().map(|c| c.id).collect();
        ids.sort_unstable();
        assert_eq!(ids, [0, 1, 2, 3]);
    }
}
