//! Rewriting a kernel's SPIR-V so that `gl_GlobalInvocationID.x` (and
//! `gl_WorkGroupID.x`) start at a base given by a specialization constant.
//!
//! [`Batch::run`](crate::Batch::run) launches past
//! `maxComputeWorkGroupCount[0]` workgroups by splitting the launch along x
//! into pieces of at most that many workgroups. Every piece is a plain
//! dispatch, so each sees `gl_GlobalInvocationID.x` from 0 again; the piece
//! runs a variant of the kernel in which each load of the built-in is
//! followed by an `OpIAdd` of the piece's base (a specialization constant
//! added here, with a SpecId the module does not use). The load's result id
//! moves to a fresh id and the add takes the old one, so every later use
//! sees the offset value without being rewritten.
//!
//! Handled: a load of the whole vector, and a load through an
//! `OpAccessChain` / `OpInBoundsAccessChain` with one constant index (0 is
//! offset; 1 and 2 are left alone, they are 0 in every piece anyway).
//! Anything else is refused with a reason ([`patch`]): a module that declares
//! `gl_NumWorkGroups` (each piece would see its own count), a dynamic
//! component index, the built-in's pointer passed on (copied, stored,
//! selected, given to a function), or a built-in declared on a block member.
//! Pure function over the word stream; no GPU involved.

use std::collections::{HashMap, HashSet};

const OP_DECORATE: u16 = 71;
const OP_MEMBER_DECORATE: u16 = 72;
const OP_TYPE_INT: u16 = 21;
const OP_TYPE_VECTOR: u16 = 23;
const OP_CONSTANT: u16 = 43;
const OP_SPEC_CONSTANT: u16 = 50;
const OP_SPEC_CONSTANT_COMPOSITE: u16 = 51;
const OP_FUNCTION: u16 = 54;
const OP_FUNCTION_CALL: u16 = 57;
const OP_VARIABLE: u16 = 59;
const OP_LOAD: u16 = 61;
const OP_STORE: u16 = 62;
const OP_COPY_MEMORY: u16 = 63;
const OP_COPY_MEMORY_SIZED: u16 = 64;
const OP_ACCESS_CHAIN: u16 = 65;
const OP_IN_BOUNDS_ACCESS_CHAIN: u16 = 66;
const OP_PTR_ACCESS_CHAIN: u16 = 67;
const OP_IN_BOUNDS_PTR_ACCESS_CHAIN: u16 = 70;
const OP_COPY_OBJECT: u16 = 83;
const OP_IADD: u16 = 128;
const OP_SELECT: u16 = 169;
const OP_PHI: u16 = 245;
const OP_PTR_EQUAL: u16 = 401;
const OP_PTR_NOT_EQUAL: u16 = 402;
const OP_PTR_DIFF: u16 = 403;

const DECORATION_SPEC_ID: u32 = 1;
const DECORATION_BUILT_IN: u32 = 11;
const BUILT_IN_NUM_WORKGROUPS: u32 = 24;
const BUILT_IN_WORKGROUP_ID: u32 = 26;
const BUILT_IN_GLOBAL_INVOCATION_ID: u32 = 28;

/// The built-ins looked for.
const BUILT_INS: [u32; 3] = [
    BUILT_IN_NUM_WORKGROUPS,
    BUILT_IN_WORKGROUP_ID,
    BUILT_IN_GLOBAL_INVOCATION_ID,
];

/// The first SpecId tried for the added constants (the next unused one is
/// taken): near the top of what GLSL's `constant_id` allows (2047), where
/// kernels rarely put theirs.
const FIRST_SPEC_ID: u32 = 2040;

/// A module rewritten by [`patch`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Patched {
    /// The rewritten module.
    pub words: Vec<u32>,
    /// SpecId of the `uint` added to `gl_GlobalInvocationID.x` (`None`:
    /// the kernel never loads it).
    pub invocation_base: Option<u32>,
    /// SpecId of the `uint` added to `gl_WorkGroupID.x` (`None`: the kernel
    /// never loads it).
    pub group_base: Option<u32>,
}

/// One instruction: where it starts, its opcode, its words.
#[derive(Clone, Copy)]
struct Inst<'a> {
    at: usize,
    op: u16,
    w: &'a [u32],
}

fn instructions(words: &[u32]) -> Result<Vec<Inst<'_>>, String> {
    if words.len() < 5 {
        return Err("the module is shorter than its header".into());
    }
    let mut out = Vec::new();
    let mut at = 5;
    while at < words.len() {
        let count = (words[at] >> 16) as usize;
        if count == 0 || at + count > words.len() {
            return Err(format!("malformed instruction at word {at}"));
        }
        out.push(Inst {
            at,
            op: (words[at] & 0xffff) as u16,
            w: &words[at..at + count],
        });
        at += count;
    }
    Ok(out)
}

fn inst(op: u16, operands: &[u32]) -> impl Iterator<Item = u32> + '_ {
    std::iter::once(((operands.len() as u32 + 1) << 16) | u32::from(op))
        .chain(operands.iter().copied())
}

/// A load to rewrite: where it is, which built-in, whole vector or not.
struct Load {
    at: usize,
    builtin: u32,
    vector: bool,
}

/// What is added for one built-in.
#[derive(Default)]
struct Added {
    /// Its scalar (32-bit integer) type.
    scalar: Option<u32>,
    /// Vector types it is loaded as, each with the composite added for it.
    vectors: Vec<(u32, u32)>,
    /// The spec constant's id and SpecId.
    constant: u32,
    spec_id: u32,
    /// A zero of the scalar type (for the composites).
    zero: u32,
}

fn builtin_name(b: u32) -> &'static str {
    match b {
        BUILT_IN_WORKGROUP_ID => "gl_WorkGroupID",
        BUILT_IN_NUM_WORKGROUPS => "gl_NumWorkGroups",
        _ => "gl_GlobalInvocationID",
    }
}

/// Rewrites `words` so that loads of `gl_GlobalInvocationID` and
/// `gl_WorkGroupID` see x offset by two added `uint` specialization
/// constants (default 0: the rewritten module behaves as the original).
/// `Err` names why the module cannot be rewritten safely.
pub(crate) fn patch(words: &[u32]) -> Result<Patched, String> {
    let insts = instructions(words)?;
    let mut builtins: HashMap<u32, u32> = HashMap::new();
    let mut builtin_decorations = Vec::new();
    let mut spec_ids = HashSet::new();
    let mut int32 = HashSet::new();
    let mut vectors: HashMap<u32, (u32, u32)> = HashMap::new();
    let mut constants: HashMap<u32, u32> = HashMap::new();
    let mut variables = HashSet::new();
    let mut first_function = None;
    for i in &insts {
        let w = i.w;
        match i.op {
            OP_DECORATE
                if w.len() >= 4 && w[2] == DECORATION_BUILT_IN && BUILT_INS.contains(&w[3]) =>
            {
                builtins.insert(w[1], w[3]);
                builtin_decorations.push(i.at);
            }
            OP_DECORATE if w.len() >= 4 && w[2] == DECORATION_SPEC_ID => {
                spec_ids.insert(w[3]);
            }
            OP_MEMBER_DECORATE
                if w.len() >= 5 && w[3] == DECORATION_BUILT_IN && BUILT_INS.contains(&w[4]) =>
            {
                return Err(format!(
                    "{} is declared as a block member",
                    builtin_name(w[4])
                ));
            }
            OP_TYPE_INT if w.len() == 4 && w[2] == 32 => {
                int32.insert(w[1]);
            }
            OP_TYPE_VECTOR if w.len() == 4 => {
                vectors.insert(w[1], (w[2], w[3]));
            }
            OP_CONSTANT if w.len() == 4 => {
                constants.insert(w[2], w[3]);
            }
            OP_VARIABLE if w.len() >= 4 => {
                variables.insert(w[2]);
            }
            OP_FUNCTION if first_function.is_none() => first_function = Some(i.at),
            _ => {}
        }
    }
    if builtins.values().any(|&b| b == BUILT_IN_NUM_WORKGROUPS) {
        return Err("it reads gl_NumWorkGroups, which each piece of a split launch would see as its own count".into());
    }
    if let Some(b) = builtins.keys().find(|id| !variables.contains(id)) {
        return Err(format!(
            "{} is decorated on something other than a variable",
            builtin_name(builtins[b])
        ));
    }
    if builtins.is_empty() {
        return Ok(Patched {
            words: words.to_vec(),
            invocation_base: None,
            group_base: None,
        });
    }
    let Some(first_function) = first_function else {
        return Err("the module has no function".into());
    };

    // Pointers into the built-ins: the variables, and access chains on them
    // with their component (constant index).
    let mut component: HashMap<u32, (u32, u32)> = HashMap::new();
    for i in &insts {
        let w = i.w;
        let chain = matches!(i.op, OP_ACCESS_CHAIN | OP_IN_BOUNDS_ACCESS_CHAIN);
        if chain && w.len() >= 4 && builtins.contains_key(&w[3]) {
            let b = builtins[&w[3]];
            let index = (w.len() == 5).then(|| constants.get(&w[4])).flatten();
            match index {
                Some(&c) if c < 3 => {
                    component.insert(w[2], (b, c));
                }
                _ => {
                    return Err(format!(
                        "{} is indexed by something other than one constant component",
                        builtin_name(b)
                    ))
                }
            }
        }
    }
    let pointer = |id: u32| builtins.contains_key(&id) || component.contains_key(&id);
    let mut loads = Vec::new();
    for i in &insts {
        let w = i.w;
        let ids: &[u32] = match i.op {
            OP_LOAD if w.len() >= 4 => {
                if let Some(&b) = builtins.get(&w[3]) {
                    match vectors.get(&w[1]) {
                        Some(&(s, 3)) if int32.contains(&s) => {}
                        _ => {
                            return Err(format!(
                                "{} is loaded as something other than a 32-bit integer vector",
                                builtin_name(b)
                            ))
                        }
                    }
                    loads.push(Load {
                        at: i.at,
                        builtin: b,
                        vector: true,
                    });
                } else if let Some(&(b, c)) = component.get(&w[3]) {
                    if !int32.contains(&w[1]) {
                        return Err(format!(
                            "{} is loaded as something other than a 32-bit integer",
                            builtin_name(b)
                        ));
                    }
                    if c == 0 {
                        loads.push(Load {
                            at: i.at,
                            builtin: b,
                            vector: false,
                        });
                    }
                }
                &[]
            }
            OP_ACCESS_CHAIN | OP_IN_BOUNDS_ACCESS_CHAIN if w.len() >= 4 => {
                // Chains on the variables were taken above; a chain on a
                // chain is not handled.
                if component.contains_key(&w[3]) {
                    &w[3..4]
                } else {
                    &[]
                }
            }
            OP_PTR_ACCESS_CHAIN | OP_IN_BOUNDS_PTR_ACCESS_CHAIN | OP_COPY_OBJECT
                if w.len() >= 4 =>
            {
                &w[3..4]
            }
            OP_STORE | OP_COPY_MEMORY | OP_COPY_MEMORY_SIZED if w.len() >= 3 => &w[1..3],
            OP_FUNCTION_CALL if w.len() >= 4 => &w[4..],
            OP_PHI if w.len() >= 3 => &w[3..],
            OP_SELECT if w.len() >= 6 => &w[4..6],
            OP_PTR_EQUAL | OP_PTR_NOT_EQUAL | OP_PTR_DIFF if w.len() >= 5 => &w[3..5],
            _ => &[],
        };
        if let Some(&p) = ids.iter().find(|&&id| pointer(id)) {
            let b = builtins
                .get(&p)
                .or_else(|| component.get(&p).map(|(b, _)| b));
            return Err(format!(
                "{} is used by an instruction other than a load (opcode {})",
                builtin_name(b.copied().unwrap_or(BUILT_IN_GLOBAL_INVOCATION_ID)),
                i.op
            ));
        }
    }

    // What to add, per built-in: one spec constant (scalar type of its
    // loads), and a composite (base, 0, 0) per vector type it is loaded as.
    let mut next = words[3];
    let mut fresh = || {
        let id = next;
        next += 1;
        id
    };
    let mut added: HashMap<u32, Added> = HashMap::new();
    let mut spec_id = FIRST_SPEC_ID;
    for b in [BUILT_IN_GLOBAL_INVOCATION_ID, BUILT_IN_WORKGROUP_ID] {
        let of_b: Vec<&Load> = loads.iter().filter(|l| l.builtin == b).collect();
        if of_b.is_empty() {
            continue;
        }
        let mut a = Added::default();
        for l in &of_b {
            let ty = words[l.at + 1];
            let scalar = if l.vector { vectors[&ty].0 } else { ty };
            if a.scalar.is_some_and(|s| s != scalar) {
                return Err(format!(
                    "{} is loaded as two different integer types",
                    builtin_name(b)
                ));
            }
            a.scalar = Some(scalar);
            if l.vector && !a.vectors.iter().any(|&(v, _)| v == ty) {
                a.vectors.push((ty, 0));
            }
        }
        while spec_ids.contains(&spec_id) {
            spec_id += 1;
        }
        a.spec_id = spec_id;
        spec_id += 1;
        a.constant = fresh();
        if !a.vectors.is_empty() {
            a.zero = fresh();
            for v in &mut a.vectors {
                v.1 = fresh();
            }
        }
        added.insert(b, a);
    }
    let renamed: Vec<u32> = loads.iter().map(|_| fresh()).collect();

    let mut out = Vec::with_capacity(words.len() + 16 + 5 * loads.len());
    out.extend_from_slice(&words[..5]);
    out[3] = next;
    let mut load_index = 0;
    for i in &insts {
        if i.at == first_function {
            for b in [BUILT_IN_GLOBAL_INVOCATION_ID, BUILT_IN_WORKGROUP_ID] {
                let Some(a) = added.get(&b) else { continue };
                let s = a.scalar.unwrap_or_default();
                out.extend(inst(OP_SPEC_CONSTANT, &[s, a.constant, 0]));
                if !a.vectors.is_empty() {
                    out.extend(inst(OP_CONSTANT, &[s, a.zero, 0]));
                }
                for &(v, c) in &a.vectors {
                    out.extend(inst(
                        OP_SPEC_CONSTANT_COMPOSITE,
                        &[v, c, a.constant, a.zero, a.zero],
                    ));
                }
            }
        }
        match loads.get(load_index) {
            Some(l) if l.at == i.at => {
                let (ty, result) = (i.w[1], i.w[2]);
                let mut w = i.w.to_vec();
                w[2] = renamed[load_index];
                out.extend_from_slice(&w);
                let a = &added[&l.builtin];
                let base = if l.vector {
                    a.vectors.iter().find(|&&(v, _)| v == ty).map_or(0, |v| v.1)
                } else {
                    a.constant
                };
                out.extend(inst(OP_IADD, &[ty, result, renamed[load_index], base]));
                load_index += 1;
            }
            _ => out.extend_from_slice(i.w),
        }
        if Some(&i.at) == builtin_decorations.first() {
            for b in [BUILT_IN_GLOBAL_INVOCATION_ID, BUILT_IN_WORKGROUP_ID] {
                if let Some(a) = added.get(&b) {
                    out.extend(inst(
                        OP_DECORATE,
                        &[a.constant, DECORATION_SPEC_ID, a.spec_id],
                    ));
                }
            }
        }
    }
    Ok(Patched {
        words: out,
        invocation_base: added.get(&BUILT_IN_GLOBAL_INVOCATION_ID).map(|a| a.spec_id),
        group_base: added.get(&BUILT_IN_WORKGROUP_ID).map(|a| a.spec_id),
    })
}

// The tests compile GLSL kernels to patch.
#[cfg(test)]
#[cfg(feature = "glsl")]
mod tests {
    use super::*;
    use crate::glsl::compile_glsl;

    fn glsl(body: &str) -> Vec<u32> {
        compile_glsl(&format!(
            "#version 450\nlayout(local_size_x = 64) in;\n\
             layout(set = 0, binding = 0) buffer D {{ uint d[]; }};\n\
             layout(push_constant) uniform P {{ uint n; }};\n\
             void main() {{ {body} }}\n"
        ))
        .unwrap()
    }

    fn count(words: &[u32], op: u16) -> usize {
        instructions(words)
            .unwrap()
            .iter()
            .filter(|i| i.op == op)
            .count()
    }

    /// Decorations `SpecId id` in the module, by target.
    fn spec_decorations(words: &[u32]) -> HashMap<u32, u32> {
        instructions(words)
            .unwrap()
            .iter()
            .filter(|i| i.op == OP_DECORATE && i.w.len() == 4 && i.w[2] == DECORATION_SPEC_ID)
            .map(|i| (i.w[3], i.w[1]))
            .collect()
    }

    fn check_valid(p: &Patched) {
        crate::reflect::validate_spirv(&p.words).unwrap();
        crate::reflect::reflect(&p.words, None).unwrap();
    }

    /// Every add of `base` directly follows a load whose result it takes,
    /// and takes over an id the original module loaded into; returns how
    /// many there are.
    fn check_adds(original: &[u32], p: &[u32], base: u32) -> usize {
        let loaded: HashSet<u32> = instructions(original)
            .unwrap()
            .iter()
            .filter(|i| i.op == OP_LOAD)
            .map(|i| i.w[2])
            .collect();
        let insts = instructions(p).unwrap();
        let mut adds = 0;
        for pair in insts.windows(2) {
            let (load, add) = (pair[0], pair[1]);
            if add.op == OP_IADD && add.w[4] == base {
                assert_eq!(load.op, OP_LOAD);
                assert_eq!((add.w[1], add.w[3]), (load.w[1], load.w[2]));
                assert!(loaded.contains(&add.w[2]) && !loaded.contains(&load.w[2]));
                adds += 1;
            }
        }
        adds
    }

    #[test]
    fn an_access_chain_load_of_x_gets_the_base_added() {
        let words = glsl("uint i = gl_GlobalInvocationID.x; if (i < n) d[i] += 1u;");
        let p = patch(&words).unwrap();
        check_valid(&p);
        let id = p.invocation_base.unwrap();
        assert_eq!(id, FIRST_SPEC_ID);
        assert_eq!(p.group_base, None);
        assert_eq!(count(&p.words, OP_IADD), count(&words, OP_IADD) + 1);
        assert_eq!(count(&p.words, OP_SPEC_CONSTANT), 1);
        assert_eq!(count(&p.words, OP_SPEC_CONSTANT_COMPOSITE), 0);
        let constant = spec_decorations(&p.words)[&id];
        assert_eq!(check_adds(&words, &p.words, constant), 1);
        assert!(p.words[3] > words[3]);
        // The reflection sees the new constant as a 4-byte one.
        let r = crate::reflect::reflect(&p.words, None).unwrap();
        assert!(r.spec_constants.iter().any(|s| s.id == id && s.size == 4));
    }

    #[test]
    fn a_vector_load_gets_a_composite_base() {
        let words = glsl("uvec3 g = gl_GlobalInvocationID; if (g.x < n) d[g.x] += g.y + g.z;");
        let p = patch(&words).unwrap();
        check_valid(&p);
        assert!(p.invocation_base.is_some());
        assert_eq!(count(&p.words, OP_SPEC_CONSTANT_COMPOSITE), 1);
        assert_eq!(count(&p.words, OP_IADD), count(&words, OP_IADD) + 1);
    }

    #[test]
    fn y_and_z_components_are_left_alone() {
        let words = glsl("d[0] = gl_GlobalInvocationID.y + gl_GlobalInvocationID.z;");
        let p = patch(&words).unwrap();
        check_valid(&p);
        // Nothing loads x: nothing to add.
        assert_eq!(p.invocation_base, None);
        assert_eq!(count(&p.words, OP_IADD), count(&words, OP_IADD));
    }

    #[test]
    fn workgroup_id_gets_its_own_base() {
        let words = glsl(
            "uint i = gl_WorkGroupID.x * 64u + gl_LocalInvocationID.x; \
             uint j = gl_GlobalInvocationID.x; if (i < n) d[i] += j;",
        );
        let p = patch(&words).unwrap();
        check_valid(&p);
        let (inv, grp) = (p.invocation_base.unwrap(), p.group_base.unwrap());
        assert_ne!(inv, grp);
        let decorated = spec_decorations(&p.words);
        assert!(decorated.contains_key(&inv) && decorated.contains_key(&grp));
        assert_eq!(count(&p.words, OP_IADD), count(&words, OP_IADD) + 2);
    }

    #[test]
    fn spec_ids_in_use_are_skipped() {
        let words = compile_glsl(&format!(
            "#version 450\nlayout(local_size_x = 64) in;\n\
             layout(constant_id = {FIRST_SPEC_ID}) const uint k = 1u;\n\
             layout(set = 0, binding = 0) buffer D {{ uint d[]; }};\n\
             void main() {{ d[gl_GlobalInvocationID.x] = k; }}\n"
        ))
        .unwrap();
        let p = patch(&words).unwrap();
        check_valid(&p);
        assert_eq!(p.invocation_base, Some(FIRST_SPEC_ID + 1));
    }

    #[test]
    fn unoptimized_modules_are_patched_too() {
        let opts = crate::glsl::GlslOptions {
            optimization: crate::glsl::GlslOptimization::None,
            ..Default::default()
        };
        let src = "#version 450\nlayout(local_size_x = 64) in;\n\
                   layout(set = 0, binding = 0) buffer D { uint d[]; };\n\
                   void main() { uvec3 g = gl_GlobalInvocationID; d[g.x] += g.y + gl_GlobalInvocationID.x; }\n";
        let words = crate::glsl::compile_glsl_with(src, &opts).unwrap();
        let p = patch(&words).unwrap();
        check_valid(&p);
        assert!(p.invocation_base.is_some());
        assert_eq!(count(&p.words, OP_SPEC_CONSTANT_COMPOSITE), 1);
        assert_eq!(count(&p.words, OP_IADD), count(&words, OP_IADD) + 2);
    }

    #[test]
    fn kernels_that_cannot_be_split_are_refused_with_a_reason() {
        let words = glsl("uint i = gl_GlobalInvocationID.x + gl_NumWorkGroups.x; d[i] = 1u;");
        assert!(patch(&words).unwrap_err().contains("gl_NumWorkGroups"));
        let words = glsl("uint i = gl_GlobalInvocationID[n % 3u]; d[i] = 1u;");
        assert!(patch(&words).unwrap_err().contains("constant component"));
        assert!(patch(&[0x0723_0203, 0x10000]).is_err());
    }

    /// `words` with `%fresh = OpCopyObject %type %var` of the
    /// `gl_GlobalInvocationID` variable after the first label.
    fn with_pointer_copy(words: &[u32]) -> Vec<u32> {
        let insts = instructions(words).unwrap();
        let var = insts
            .iter()
            .find(|i| {
                i.op == OP_DECORATE
                    && i.w[2] == DECORATION_BUILT_IN
                    && i.w[3] == BUILT_IN_GLOBAL_INVOCATION_ID
            })
            .unwrap()
            .w[1];
        let ty = insts
            .iter()
            .find(|i| i.op == OP_VARIABLE && i.w[2] == var)
            .unwrap()
            .w[1];
        let label = insts.iter().find(|i| i.op == 248).unwrap();
        let at = label.at + label.w.len();
        let mut out = words[..at].to_vec();
        out.extend(inst(OP_COPY_OBJECT, &[ty, words[3], var]));
        out.extend_from_slice(&words[at..]);
        out[3] += 1;
        out
    }

    #[test]
    fn a_pointer_passed_on_is_refused() {
        let words = glsl("uint i = gl_GlobalInvocationID.x; if (i < n) d[i] = 1u;");
        let copied = with_pointer_copy(&words);
        // Still a valid module: the refusal is the patcher's.
        crate::reflect::validate_spirv(&copied).unwrap();
        let e = patch(&copied).unwrap_err();
        assert!(
            e.contains("other than a load") && e.contains("gl_GlobalInvocationID"),
            "{e}"
        );
    }

    #[test]
    fn kernels_without_the_builtins_are_unchanged() {
        let words = glsl("d[gl_LocalInvocationID.x] = n;");
        let p = patch(&words).unwrap();
        assert_eq!(p.words, words);
        assert_eq!((p.invocation_base, p.group_base), (None, None));
    }
}
