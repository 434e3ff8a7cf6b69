//! SPIR-V reflection: what a compute kernel binds, pushes and launches with.
//!
//! The heavy lifting is `spirq`'s (bindings with their declared access,
//! push-constant block layout, specialization constants, execution modes).
//! Two things are done here by hand because spirq leaves them out: checking
//! the module header before anything parses it, and resolving a workgroup
//! size given through the `WorkgroupSize` built-in (GLSL's
//! `local_size_x_id`), which overrides the `LocalSize` execution mode.
//! No GPU is involved; everything here is unit-tested.

use std::collections::HashMap;

use spirq::prelude::{ConstantValue, DescriptorType, ExecutionModel, Variable};
use spirq::ty::{AccessType, Type};

use crate::error::{Error, Result};

const MAGIC: u32 = 0x0723_0203;

/// How a buffer binding is declared in the shader.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BindingKind {
    /// `buffer` block: a storage buffer (`VK_DESCRIPTOR_TYPE_STORAGE_BUFFER`).
    Storage,
    /// `uniform` block: a uniform buffer (`VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER`).
    Uniform,
}

/// One buffer binding of a kernel (descriptor set 0).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BindingInfo {
    /// Binding number in set 0.
    pub binding: u32,
    /// Storage or uniform.
    pub kind: BindingKind,
    /// True when the shader never writes it (`readonly` storage, or uniform).
    pub read_only: bool,
    /// The block's instance name, when the module keeps debug names.
    pub name: Option<String>,
}

/// One specialization constant a kernel declares.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SpecConstantInfo {
    /// Its `constant_id` / SpecId.
    pub id: u32,
    /// Size of its value in bytes (4 for bool, int, uint, float; 8 for 64-bit types).
    pub size: u32,
    /// Its name, when the module keeps debug names.
    pub name: Option<String>,
}

/// What reflection found in a compute entry point.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Reflection {
    /// The entry point's name.
    pub entry_point: String,
    /// Buffer bindings, sorted by binding number. A dispatch passes one
    /// buffer per entry, in this order.
    pub bindings: Vec<BindingInfo>,
    /// Size of the push-constant block in bytes (0 when there is none).
    pub push_constant_size: u32,
    /// Workgroup size as declared (before specialization).
    pub workgroup_size: [u32; 3],
    /// SpecIds that set the workgroup size per dimension, if any.
    pub workgroup_size_ids: [Option<u32>; 3],
    /// Specialization constants, sorted by id.
    pub spec_constants: Vec<SpecConstantInfo>,
}

/// Turns bytes into SPIR-V words, checking length, magic and header.
/// Accepts either byte order.
pub(crate) fn words_from_bytes(bytes: &[u8]) -> Result<Vec<u32>> {
    if bytes.len() % 4 != 0 {
        return Err(Error::InvalidSpirv {
            reason: format!("length {} bytes is not a multiple of 4", bytes.len()),
        });
    }
    let mut words: Vec<u32> = bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    if words.first() == Some(&MAGIC.swap_bytes()) {
        for w in &mut words {
            *w = w.swap_bytes();
        }
    }
    check_header(&words)?;
    Ok(words)
}

/// Checks the 5-word header and that instructions tile the module exactly.
pub(crate) fn check_header(words: &[u32]) -> Result<()> {
    if words.len() < 5 {
        return Err(Error::InvalidSpirv {
            reason: format!("{} words is shorter than the 5-word header", words.len()),
        });
    }
    if words[0] != MAGIC {
        return Err(Error::InvalidSpirv {
            reason: format!(
                "bad magic number {:#010x} (expected {MAGIC:#010x})",
                words[0]
            ),
        });
    }
    let mut i = 5;
    while i < words.len() {
        let count = (words[i] >> 16) as usize;
        if count == 0 {
            return Err(Error::InvalidSpirv {
                reason: format!("instruction at word {i} has word count 0"),
            });
        }
        i += count;
    }
    if i != words.len() {
        return Err(Error::InvalidSpirv {
            reason: "the last instruction runs past the end of the module".into(),
        });
    }
    Ok(())
}

/// Reflects the compute entry point `entry` (or the only / `main` one).
pub(crate) fn reflect(words: &[u32], entry: Option<&str>) -> Result<Reflection> {
    check_header(words)?;
    // spirq is not hardened against hostile input; a panic inside it must not
    // reach the caller.
    let parsed = std::panic::catch_unwind(|| {
        spirq::ReflectConfig::new()
            .spv(words)
            .ref_all_rscs(false)
            .reflect()
    });
    let entry_points = match parsed {
        Ok(Ok(eps)) => eps,
        Ok(Err(e)) => {
            return Err(Error::InvalidSpirv {
                reason: e.to_string(),
            })
        }
        Err(_) => {
            return Err(Error::InvalidSpirv {
                reason: "the reflection parser rejected the module".into(),
            })
        }
    };
    let compute: Vec<_> = entry_points
        .iter()
        .filter(|e| e.exec_model == ExecutionModel::GLCompute)
        .collect();
    let names: Vec<String> = compute.iter().map(|e| e.name.clone()).collect();
    let chosen = match entry {
        Some(name) => compute.iter().find(|e| e.name == name),
        None => compute
            .iter()
            .find(|e| e.name == "main")
            .or(if compute.len() == 1 {
                compute.first()
            } else {
                None
            }),
    };
    let Some(ep) = chosen else {
        return Err(Error::EntryPointNotFound {
            requested: entry.unwrap_or("main").to_string(),
            available: names,
        });
    };
    let label = ep.name.clone();
    let unsupported = |detail: String| Error::UnsupportedShader {
        kernel: label.clone(),
        detail,
    };

    let mut bindings = Vec::new();
    let mut push_constant_size = 0u32;
    let mut spec_constants = Vec::new();
    for var in &ep.vars {
        match var {
            Variable::Descriptor {
                name,
                desc_bind,
                desc_ty,
                nbind,
                ..
            } => {
                if desc_bind.set() != 0 {
                    return Err(unsupported(format!(
                        "binding {} is in descriptor set {}; only set 0 is supported",
                        desc_bind.bind(),
                        desc_bind.set()
                    )));
                }
                if *nbind != 1 {
                    return Err(unsupported(format!(
                        "binding {} is an array of descriptors; bind one buffer per binding",
                        desc_bind.bind()
                    )));
                }
                let (kind, read_only) = match desc_ty {
                    DescriptorType::StorageBuffer(access) => {
                        (BindingKind::Storage, *access == AccessType::ReadOnly)
                    }
                    DescriptorType::UniformBuffer() => (BindingKind::Uniform, true),
                    other => {
                        return Err(unsupported(format!(
                        "binding {} is a {other:?}; only storage and uniform buffers are supported",
                        desc_bind.bind()
                    )))
                    }
                };
                bindings.push(BindingInfo {
                    binding: desc_bind.bind(),
                    kind,
                    read_only,
                    name: name.clone(),
                });
            }
            Variable::PushConstant { ty, .. } => {
                push_constant_size = block_size(ty)
                    .ok_or_else(|| unsupported("push-constant block has no fixed size".into()))?;
            }
            Variable::SpecConstant {
                name, spec_id, ty, ..
            } => {
                let size = ty
                    .nbyte()
                    .filter(|&n| n == 1 || n == 4 || n == 8)
                    .map(|n| n.max(4) as u32)
                    .ok_or_else(|| {
                        unsupported(format!(
                            "specialization constant {spec_id} has no scalar size"
                        ))
                    })?;
                spec_constants.push(SpecConstantInfo {
                    id: *spec_id,
                    size,
                    name: name.clone(),
                });
            }
            _ => {}
        }
    }
    bindings.sort_by_key(|b| b.binding);
    if let Some(w) = bindings.windows(2).find(|w| w[0].binding == w[1].binding) {
        return Err(unsupported(format!(
            "binding {} is declared twice",
            w[0].binding
        )));
    }
    spec_constants.sort_by_key(|s| s.id);
    spec_constants.dedup_by_key(|s| s.id);

    let mut workgroup_size = [1, 1, 1];
    let mut workgroup_size_ids = [None; 3];
    for mode in &ep.exec_modes {
        use spirq::spirv::ExecutionMode as M;
        if matches!(mode.exec_mode, M::LocalSize | M::LocalSizeId) && mode.operands.len() == 3 {
            for (d, op) in mode.operands.iter().enumerate() {
                workgroup_size[d] = constant_u32(&op.value).unwrap_or(1);
                workgroup_size_ids[d] = op.spec_id;
            }
        }
    }
    if let Some(builtin) = builtin_workgroup_size(words) {
        workgroup_size = builtin.0;
        workgroup_size_ids = builtin.1;
    }
    if workgroup_size.contains(&0) {
        return Err(unsupported(format!(
            "workgroup size {workgroup_size:?} has a zero dimension"
        )));
    }
    Ok(Reflection {
        entry_point: label,
        bindings,
        push_constant_size,
        workgroup_size,
        workgroup_size_ids,
        spec_constants,
    })
}

/// The size in bytes of a push-constant block: the end of its last member.
fn block_size(ty: &Type) -> Option<u32> {
    if let Type::Struct(s) = ty {
        let mut end = 0usize;
        for m in &s.members {
            let off = m.offset?;
            end = end.max(off + m.ty.nbyte()?);
        }
        return u32::try_from(end).ok();
    }
    ty.nbyte().and_then(|n| u32::try_from(n).ok())
}

fn constant_u32(v: &ConstantValue) -> Option<u32> {
    match v {
        ConstantValue::U32(x) => Some(*x),
        ConstantValue::S32(x) => u32::try_from(*x).ok(),
        _ => None,
    }
}

const OP_DECORATE: u32 = 71;
const OP_CONSTANT: u32 = 43;
const OP_SPEC_CONSTANT: u32 = 50;
const OP_CONSTANT_COMPOSITE: u32 = 44;
const OP_SPEC_CONSTANT_COMPOSITE: u32 = 51;
const DECORATION_BUILTIN: u32 = 11;
const DECORATION_SPEC_ID: u32 = 1;
const BUILTIN_WORKGROUP_SIZE: u32 = 25;

type WorkgroupSize = ([u32; 3], [Option<u32>; 3]);

/// Resolves a `WorkgroupSize` built-in constant, which takes precedence over
/// the `LocalSize` execution mode: its three components, and the SpecId of
/// each that is a specialization constant.
fn builtin_workgroup_size(words: &[u32]) -> Option<WorkgroupSize> {
    let mut target = None;
    let mut spec_ids: HashMap<u32, u32> = HashMap::new();
    let mut scalars: HashMap<u32, u32> = HashMap::new();
    let mut composites: HashMap<u32, [u32; 3]> = HashMap::new();
    let mut i = 5;
    while i < words.len() {
        let count = (words[i] >> 16) as usize;
        let op = words[i] & 0xffff;
        let inst = words.get(i..i + count)?;
        match (op, inst.len()) {
            (OP_DECORATE, 4..) if inst[2] == DECORATION_BUILTIN => {
                if inst[3] == BUILTIN_WORKGROUP_SIZE {
                    target = Some(inst[1]);
                }
            }
            (OP_DECORATE, 4..) if inst[2] == DECORATION_SPEC_ID => {
                spec_ids.insert(inst[1], inst[3]);
            }
            (OP_CONSTANT | OP_SPEC_CONSTANT, 4) => {
                scalars.insert(inst[2], inst[3]);
            }
            (OP_CONSTANT_COMPOSITE | OP_SPEC_CONSTANT_COMPOSITE, 6) => {
                composites.insert(inst[2], [inst[3], inst[4], inst[5]]);
            }
            _ => {}
        }
        i += count.max(1);
    }
    let parts = composites.get(&target?)?;
    let mut size = [1; 3];
    let mut ids = [None; 3];
    for d in 0..3 {
        size[d] = *scalars.get(&parts[d])?;
        ids[d] = spec_ids.get(&parts[d]).copied();
    }
    Some((size, ids))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_checks() {
        assert!(matches!(
            words_from_bytes(&[1, 2, 3]),
            Err(Error::InvalidSpirv { .. })
        ));
        assert!(matches!(
            words_from_bytes(&[0; 20]),
            Err(Error::InvalidSpirv { reason }) if reason.contains("magic")
        ));
        assert!(matches!(
            words_from_bytes(&MAGIC.to_le_bytes()),
            Err(Error::InvalidSpirv { reason }) if reason.contains("header")
        ));
        // A header followed by an instruction with word count 0.
        let w = [MAGIC, 0x0001_0000, 0, 10, 0, 0x0000_0011];
        assert!(check_header(&w).is_err());
        // An instruction claiming 9 words with 1 left.
        let w = [MAGIC, 0x0001_0000, 0, 10, 0, 0x0009_0011];
        assert!(check_header(&w).is_err());
        // A header alone is well formed (but has no entry point).
        let w = [MAGIC, 0x0001_0000, 0, 10, 0];
        assert!(check_header(&w).is_ok());
        assert!(matches!(
            reflect(&w, None),
            Err(Error::EntryPointNotFound { .. })
        ));
    }

    #[test]
    fn big_endian_modules_are_swapped() {
        let w = [MAGIC, 0x0001_0000, 0, 10, 0];
        let be: Vec<u8> = w.iter().flat_map(|x| x.to_be_bytes()).collect();
        assert_eq!(words_from_bytes(&be).unwrap(), w);
    }

    #[test]
    fn builtin_workgroup_size_resolution() {
        // OpDecorate %9 BuiltIn WorkgroupSize; OpDecorate %5 SpecId 7;
        // %5 = OpSpecConstant %u 64; %6 = OpConstant %u 1;
        // %9 = OpSpecConstantComposite %v3 %5 %6 %6
        let w = vec![
            MAGIC,
            0x0001_0000,
            0,
            10,
            0,
            (4 << 16) | OP_DECORATE,
            9,
            DECORATION_BUILTIN,
            BUILTIN_WORKGROUP_SIZE,
            (4 << 16) | OP_DECORATE,
            5,
            DECORATION_SPEC_ID,
            7,
            (4 << 16) | OP_SPEC_CONSTANT,
            2,
            5,
            64,
            (4 << 16) | OP_CONSTANT,
            2,
            6,
            1,
            (6 << 16) | OP_SPEC_CONSTANT_COMPOSITE,
            3,
            9,
            5,
            6,
            6,
        ];
        assert_eq!(
            builtin_workgroup_size(&w),
            Some(([64, 1, 1], [Some(7), None, None]))
        );
        assert_eq!(builtin_workgroup_size(&w[..21]), None);
    }
}
