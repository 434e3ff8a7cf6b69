//! SPIR-V reflection: what a compute kernel binds, pushes and launches with.
//!
//! The heavy lifting is `spirq`'s (bindings with their declared access,
//! push-constant block layout, specialization constants, execution modes).
//! Two things are done here by hand because spirq leaves them out: checking
//! the module header before anything parses it, and resolving a workgroup
//! size given through the `WorkgroupSize` built-in (GLSL's
//! `local_size_x_id`), which overrides the `LocalSize` execution mode.
//! With the `glsl` feature, which links SPIRV-Tools, every module is also
//! run through its validator first: spirq does not look for ids past the
//! header's bound, undefined ids or bad operands, which crash drivers and
//! the validation layer (found by `tests/properties.rs`).
//! No GPU is involved; everything here is unit-tested.

use std::collections::HashMap;

use spirq::prelude::{ConstantValue, DescriptorType, ExecutionModel, Variable};
use spirq::ty::{AccessType, ScalarType, Type};

use crate::element::ElementType;
use crate::error::{Error, Result};

/// Most buffer bindings one kernel may declare.
pub const MAX_BINDINGS: usize = 32;

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
    /// Size of its value in bytes: 4 for bool and 32-bit types, 8, 2 or 1
    /// for 64-, 16- or 8-bit types.
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

/// Why a binding outside descriptor set 0 is refused, in each source
/// language's terms. A dispatch passes one flat buffer list, bound to set 0;
/// the set is named so the author can move the binding.
fn other_set(set: u32, binding: u32) -> String {
    format!(
        "binding {binding} is in descriptor set {set} (GLSL set = {set}, WGSL @group({set}), \
         HLSL space{set}); kernels bind descriptor set 0 only: declare every buffer in set 0 \
         (@group(0), space0) with its own binding number"
    )
}

/// Turns bytes into SPIR-V words, checking length, magic and header, and
/// drops what [`crate::spirv_compat`] lists. Accepts either byte order.
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
    // Reflection-only decorations and late source languages that drivers
    // or validators of some ages refuse (other toolchains' output).
    if let Some(portable) = crate::spirv_compat::portable(&words) {
        words = portable;
    }
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
    if words[4] != 0 {
        // Reserved; drivers refuse modules that set it, validators do not.
        return Err(Error::InvalidSpirv {
            reason: format!(
                "header word 4 (schema) is {:#x}; it is reserved and must be 0",
                words[4]
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

/// Checks the module's structure beyond its header: one memory model, an
/// entry point, functions opened and closed in turn, and every entry point
/// and function call naming a function the module defines. Catches
/// truncated modules, which the parser below may accept and drivers (or the
/// validation layer) may crash on.
pub(crate) fn check_structure(words: &[u32]) -> Result<()> {
    let invalid = |reason: String| Err(Error::InvalidSpirv { reason });
    let mut memory_models = 0;
    let mut open_function: Option<u32> = None;
    let mut defined = std::collections::HashSet::new();
    let mut needed: Vec<(&'static str, u32)> = Vec::new();
    let mut i = 5;
    while i < words.len() {
        let count = ((words[i] >> 16) as usize).max(1);
        let inst = &words[i..(i + count).min(words.len())];
        match (inst[0] & 0xffff, inst.len()) {
            (OP_MEMORY_MODEL, _) => memory_models += 1,
            (OP_ENTRY_POINT, 3..) => needed.push(("entry point", inst[2])),
            (OP_FUNCTION, 5..) => {
                if let Some(f) = open_function {
                    return invalid(format!("function %{} starts inside function %{f}", inst[2]));
                }
                open_function = Some(inst[2]);
                defined.insert(inst[2]);
            }
            (OP_FUNCTION_END, _) => {
                let Some(_) = open_function.take() else {
                    return invalid(format!("OpFunctionEnd at word {i} closes no function"));
                };
            }
            (OP_FUNCTION_CALL, 4..) => needed.push(("function call", inst[3])),
            (OP_FUNCTION | OP_ENTRY_POINT | OP_FUNCTION_CALL, _) => {
                return invalid(format!("instruction at word {i} is too short"));
            }
            _ => {}
        }
        i += count;
    }
    if memory_models != 1 {
        return invalid(format!(
            "the module has {memory_models} OpMemoryModel instructions (exactly one is required)"
        ));
    }
    if !needed.iter().any(|(what, _)| *what == "entry point") {
        return invalid("the module declares no entry point (OpEntryPoint)".into());
    }
    if let Some(f) = open_function {
        return invalid(format!(
            "function %{f} is not closed by OpFunctionEnd (truncated module?)"
        ));
    }
    if let Some((what, id)) = needed.iter().find(|(_, id)| !defined.contains(id)) {
        return invalid(format!(
            "{what} names function %{id}, which the module does not define (truncated module?)"
        ));
    }
    Ok(())
}

/// `words` with what the reflection parser cannot read made opaque
/// (cooperative-matrix types, [`without_coopmat_types`]; the instructions it
/// does not know, [`without_unknown_ops`]), or `None` when it has none.
fn opaque_to_parser(words: &[u32]) -> Option<Vec<u32>> {
    let coop = without_coopmat_types(words);
    match without_unknown_ops(coop.as_deref().unwrap_or(words)) {
        Some(known) => Some(known),
        None => coop,
    }
}

/// The reason [`parse`] gives when the parser panicked.
const PARSER_PANICKED: &str = "the reflection parser rejected the module";

/// Whether the reflection parser panics on `words` as reflection first
/// hands it to it (what it cannot read made opaque): the panic is caught,
/// but the default hook prints its message.
#[cfg(test)]
pub(crate) fn parser_panics(words: &[u32]) -> bool {
    let opaque = opaque_to_parser(words);
    matches!(
        parse(opaque.as_deref().unwrap_or(words)),
        Err(Error::InvalidSpirv { reason }) if reason == PARSER_PANICKED
    )
}

/// Runs spirq over `words`, turning its errors and panics into `InvalidSpirv`.
fn parse(words: &[u32]) -> Result<Vec<spirq::prelude::EntryPoint>> {
    // spirq is not hardened against hostile input; a panic inside it must not
    // reach the caller.
    let parsed = std::panic::catch_unwind(|| {
        spirq::ReflectConfig::new()
            .spv(words)
            .ref_all_rscs(true)
            .reflect()
    });
    match parsed {
        Ok(Ok(eps)) => Ok(eps),
        Ok(Err(e)) => Err(Error::InvalidSpirv {
            reason: e.to_string(),
        }),
        Err(_) => Err(Error::InvalidSpirv {
            reason: PARSER_PANICKED.into(),
        }),
    }
}

/// Reflects the compute entry point `entry` (or the only / `main` one).
pub(crate) fn reflect(words: &[u32], entry: Option<&str>) -> Result<Reflection> {
    reflect_with_elements(words, entry).map(|(r, _)| r)
}

/// [`reflect`], and the element each binding declares where the
/// element-type rule applies ([`crate::element`]), in binding order.
pub(crate) fn reflect_with_elements(
    words: &[u32],
    entry: Option<&str>,
) -> Result<(Reflection, Vec<Option<ElementType>>)> {
    check_header(words)?;
    check_structure(words)?;
    // The checks above catch truncation; the validator catches the rest
    // (ids past the bound, undefined ids, bad operands), which spirq does
    // not look for and which crash drivers and the validation layer.
    #[cfg(feature = "glsl")]
    if !declares_unknown_to_validator(words) {
        spirv_tools::validate(words).map_err(|reason| Error::InvalidSpirv { reason })?;
    }
    // spirq cannot parse cooperative-matrix types (which never hold a
    // binding) nor the instructions of SPV_NV_cooperative_matrix2 and
    // SPV_NV_tensor_addressing (some of which make it panic): a module with
    // any of them is parsed with those made opaque from the start. Nor can
    // it evaluate some specialization-constant expressions (any that read a
    // component of a composite, such as `gl_WorkGroupSize.x` under
    // `local_size_x_id`). None of them decides what is reflected here, so
    // when parsing fails, parse again with them replaced by plain constants.
    let coop = opaque_to_parser(words);
    let base = coop.as_deref().unwrap_or(words);
    let entry_points = match parse(base) {
        Ok(eps) => eps,
        Err(e) => match without_spec_ops(base) {
            Some(plain) => parse(&plain).map_err(|_| e)?,
            None => return Err(e),
        },
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
    let mut elements = Vec::new();
    let mut push_constant_size = 0u32;
    let mut spec_constants = Vec::new();
    for var in &ep.vars {
        match var {
            Variable::Descriptor {
                name,
                desc_bind,
                desc_ty,
                nbind,
                ty,
                ..
            } => {
                if desc_bind.set() != 0 {
                    return Err(unsupported(other_set(desc_bind.set(), desc_bind.bind())));
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
                elements.push((desc_bind.bind(), ElementType::declared(ty)));
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
                // A specialization map entry has the constant's exact size;
                // booleans have no memory size in SPIR-V and pass as a VkBool32.
                let bytes = match ty {
                    Type::Scalar(ScalarType::Boolean) => Some(4),
                    _ => ty.nbyte(),
                };
                let size = bytes
                    .filter(|&n| matches!(n, 1 | 2 | 4 | 8))
                    .map(|n| n as u32)
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
    elements.sort_by_key(|e| e.0);
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
    let reflection = Reflection {
        entry_point: label,
        bindings,
        push_constant_size,
        workgroup_size,
        workgroup_size_ids,
        spec_constants,
    };
    Ok((reflection, elements.into_iter().map(|e| e.1).collect()))
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

const OP_MEMORY_MODEL: u32 = 14;
const OP_ENTRY_POINT: u32 = 15;
const OP_TYPE_BOOL: u32 = 20;
const OP_TYPE_INT: u32 = 21;
const OP_TYPE_FLOAT: u32 = 22;
const OP_CONSTANT_TRUE: u32 = 41;
const OP_CONSTANT_NULL: u32 = 46;
const OP_SPEC_CONSTANT_OP: u32 = 52;
const OP_FUNCTION: u32 = 54;
const OP_FUNCTION_END: u32 = 56;
const OP_FUNCTION_CALL: u32 = 57;
const OP_DECORATE: u32 = 71;
const OP_CONSTANT: u32 = 43;
const OP_SPEC_CONSTANT: u32 = 50;
const OP_CONSTANT_COMPOSITE: u32 = 44;
const OP_SPEC_CONSTANT_COMPOSITE: u32 = 51;
const DECORATION_BUILTIN: u32 = 11;
const DECORATION_SPEC_ID: u32 = 1;
const BUILTIN_WORKGROUP_SIZE: u32 = 25;

/// A copy of the module with every `OpSpecConstantOp` replaced by a plain
/// constant of its type (1, true, or null), or `None` when it has none.
fn without_spec_ops(words: &[u32]) -> Option<Vec<u32>> {
    // Scalar types by id: Some(width) for numbers, None for bool.
    let mut scalars: HashMap<u32, Option<u32>> = HashMap::new();
    let mut out = Vec::with_capacity(words.len());
    out.extend_from_slice(words.get(..5)?);
    let mut replaced = false;
    let mut i = 5;
    while i < words.len() {
        let count = ((words[i] >> 16) as usize).max(1);
        let inst = words.get(i..i + count)?;
        match (inst[0] & 0xffff, inst.len()) {
            (OP_TYPE_BOOL, 2..) => {
                scalars.insert(inst[1], None);
            }
            (OP_TYPE_INT | OP_TYPE_FLOAT, 3..) => {
                scalars.insert(inst[1], Some(inst[2]));
            }
            (OP_SPEC_CONSTANT_OP, 4..) => {
                let (ty, id) = (inst[1], inst[2]);
                replaced = true;
                match scalars.get(&ty) {
                    Some(None) => out.extend_from_slice(&[(3 << 16) | OP_CONSTANT_TRUE, ty, id]),
                    Some(Some(64)) => {
                        out.extend_from_slice(&[(5 << 16) | OP_CONSTANT, ty, id, 1, 0])
                    }
                    Some(Some(_)) => out.extend_from_slice(&[(4 << 16) | OP_CONSTANT, ty, id, 1]),
                    None => out.extend_from_slice(&[(3 << 16) | OP_CONSTANT_NULL, ty, id]),
                }
                i += count;
                continue;
            }
            _ => {}
        }
        out.extend_from_slice(inst);
        i += count;
    }
    replaced.then_some(out)
}

/// Capabilities of SPV_NV_cooperative_matrix2 (5430–5434),
/// SPV_NV_tensor_addressing (5439) and SPV_KHR_cooperative_matrix (6022),
/// which postdate the SPIRV-Tools the `glsl` feature links (Debian 12's
/// 2022.4 rejects them as invalid operands).
const CAPS_NEWER_THAN_VALIDATOR: [u32; 7] = [5430, 5431, 5432, 5433, 5434, 5439, 6022];

/// Whether `words` declares a capability the linked validator does not
/// know: such a module is left to the driver and the validation layer
/// (which carries its own SPIRV-Tools), as it would fail here whatever it
/// holds. The scan stops at OpMemoryModel, after every OpCapability.
#[cfg_attr(not(feature = "glsl"), allow(dead_code))]
fn declares_unknown_to_validator(words: &[u32]) -> bool {
    const OP_CAPABILITY: u32 = 17;
    const OP_MEMORY_MODEL: u32 = 14;
    let mut i = 5;
    while i < words.len() {
        let (count, op) = ((words[i] >> 16) as usize, words[i] & 0xffff);
        if count == 0 || op == OP_MEMORY_MODEL {
            return false;
        }
        if op == OP_CAPABILITY
            && words
                .get(i + 1)
                .is_some_and(|c| CAPS_NEWER_THAN_VALIDATOR.contains(c))
        {
            return true;
        }
        i += count;
    }
    false
}

/// `words` with each OpTypeCooperativeMatrixNV / OpTypeCooperativeMatrixKHR
/// replaced by an OpTypeRayQueryKHR of the same id (an opaque type spirq
/// knows; reflection of bindings, push constants and spec constants never
/// depends on it); `None` if there is none.
fn without_coopmat_types(words: &[u32]) -> Option<Vec<u32>> {
    const OP_TYPE_COOPMAT_NV: u32 = 5358;
    const OP_TYPE_COOPMAT_KHR: u32 = 4456;
    const OP_TYPE_RAY_QUERY_KHR: u32 = 4472;
    let mut out = Vec::with_capacity(words.len());
    out.extend_from_slice(words.get(..5)?);
    let mut replaced = false;
    let mut i = 5;
    while i < words.len() {
        let count = ((words[i] >> 16) as usize).max(1);
        let inst = words.get(i..i + count)?;
        match (inst[0] & 0xffff, inst.len()) {
            (OP_TYPE_COOPMAT_NV | OP_TYPE_COOPMAT_KHR, 2..) => {
                out.extend_from_slice(&[(2 << 16) | OP_TYPE_RAY_QUERY_KHR, inst[1]]);
                replaced = true;
            }
            _ => out.extend_from_slice(inst),
        }
        i += count;
    }
    replaced.then_some(out)
}

/// `words` with each instruction whose opcode the reflection parser does
/// not know (those of SPV_NV_cooperative_matrix2 and
/// SPV_NV_tensor_addressing) made opaque: a type declaration becomes an
/// OpTypeRayQueryKHR of the same id and anything else (instructions in
/// function bodies) is left out: resources are reflected from their
/// declarations, all of them known. For reflection only; `None` if there
/// is none.
fn without_unknown_ops(words: &[u32]) -> Option<Vec<u32>> {
    const OP_TYPE_RAY_QUERY_KHR: u32 = 4472;
    // SPV_NV_tensor_addressing's OpTypeTensorLayoutNV and OpTypeTensorViewNV.
    const OP_TYPE_TENSOR_LAYOUT_NV: u32 = 5370;
    const OP_TYPE_TENSOR_VIEW_NV: u32 = 5371;
    let mut out = Vec::with_capacity(words.len());
    out.extend_from_slice(words.get(..5)?);
    let mut replaced = false;
    let mut i = 5;
    while i < words.len() {
        let count = ((words[i] >> 16) as usize).max(1);
        let inst = words.get(i..i + count)?;
        let op = inst[0] & 0xffff;
        if spirq::spirv::Op::from_u32(op).is_some() {
            out.extend_from_slice(inst);
        } else if matches!(op, OP_TYPE_TENSOR_LAYOUT_NV | OP_TYPE_TENSOR_VIEW_NV) && count >= 2 {
            out.extend_from_slice(&[(2 << 16) | OP_TYPE_RAY_QUERY_KHR, inst[1]]);
            replaced = true;
        } else {
            replaced = true;
        }
        i += count;
    }
    replaced.then_some(out)
}

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
            (OP_DECORATE, 4..)
                if inst[2] == DECORATION_BUILTIN && inst[3] == BUILTIN_WORKGROUP_SIZE =>
            {
                target = Some(inst[1]);
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

/// Validates `words` with SPIRV-Tools (as [`reflect`] does): `Err` holds
/// the validator's message.
#[cfg(feature = "glsl")]
pub(crate) fn validate_spirv(words: &[u32]) -> std::result::Result<(), String> {
    spirv_tools::validate(words)
}

#[cfg(feature = "glsl")]
mod spirv_tools;

#[cfg(test)]
mod tests;
