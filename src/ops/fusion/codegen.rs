//! GLSL for fused groups: an element-wise chain as one kernel, or a matmul
//! with the chain as its epilogue. The source names nothing specific to one
//! op batch (values and bindings are numbered within the group), so equal
//! chains in any op batch give equal source and share one pipeline through
//! the device's kernel cache and the on-disk GLSL cache.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::plan::{group_inputs, Group};
use super::program::{Op, Program, S, V};
use crate::ops::{Binary, DType, Unary};

/// Workgroup size of the generated element-wise kernels.
pub(crate) const LOCAL: u32 = 256;

/// A generated kernel and how to bind and launch it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Generated {
    /// GLSL compute source.
    pub source: String,
    /// Storage bound at each binding (element-wise: from 0; epilogue: from
    /// 2, after A and B).
    pub bindings: Vec<S>,
    /// Push-constant scalars, in order.
    pub scalars: Vec<f32>,
    /// Element-wise kernels: each invocation handles a vec4.
    pub vec4: bool,
}

const ACTIVATIONS: &str = include_str!("../../../shaders/activations.glsl");
const MATMUL: &str = include_str!("../../../shaders/matmul_f32.comp");

const VEC4_WRAPPERS: &str = "
#define VKC_VEC4(f) vec4 f(vec4 x) { return vec4(f(x.x), f(x.y), f(x.z), f(x.w)); }
VKC_VEC4(vkc_tanh)
VKC_VEC4(vkc_sigmoid)
VKC_VEC4(vkc_gelu_erf)
VKC_VEC4(vkc_gelu_tanh)
";

/// Conversions between the stored element types and the f32 the kernels
/// compute in, with integer bit operations (no 16-bit arithmetic, and the
/// same rounding on every device): loads widen (`vkc_h2f`, `vkc_b2f`,
/// `vkc_u2f`), stores narrow (`vkc_f2h`, `vkc_f2b`, `vkc_f2u`), and
/// `vkc_r*` rounds an f32 to the nearest value of a type, as every value
/// of that type is rounded where it is computed (stored or not). f16 and
/// bf16 round to nearest even (overflow to infinity, NaN quiet), as the
/// crate's `F16::from_f32` and `Bf16::from_f32`; u32 to f32 rounds to
/// nearest even (one correctly rounded addition of two exact halves); f32
/// to u32 truncates toward zero, saturating (NaN and negatives to 0).
const DTYPE_FNS: &str = "
float vkc_h2f(uint h) { return unpackHalf2x16(h).x; }
uint vkc_f2h(float f) {
    uint b = floatBitsToUint(f);
    uint sign = (b >> 16) & 0x8000u;
    int e = int((b >> 23) & 0xffu);
    uint man = b & 0x7fffffu;
    if (e == 0xff) return sign | 0x7c00u | (man != 0u ? 0x200u : 0u);
    int he = e - 127 + 15;
    if (he >= 0x1f) return sign | 0x7c00u;
    if (he <= 0) {
        if (he < -10) return sign;
        uint m = man | 0x800000u;
        uint shift = uint(14 - he);
        uint half_ = m >> shift;
        uint rem = m & ((1u << shift) - 1u);
        uint mid = 1u << (shift - 1u);
        bool up = rem > mid || (rem == mid && (half_ & 1u) == 1u);
        return sign | (half_ + (up ? 1u : 0u));
    }
    uint half_ = (uint(he) << 10) | (man >> 13);
    uint rem = man & 0x1fffu;
    bool up = rem > 0x1000u || (rem == 0x1000u && (half_ & 1u) == 1u);
    return sign | (half_ + (up ? 1u : 0u));
}
float vkc_b2f(uint b) { return uintBitsToFloat(b << 16); }
uint vkc_f2b(float f) {
    uint u = floatBitsToUint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (u >> 16) | 0x40u;
    return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}
float vkc_u2f(uint u) { return float(u >> 16) * 65536.0 + float(u & 0xffffu); }
uint vkc_f2u(float x) {
    return (x != x || x <= 0.0) ? 0u : (x >= 4294967296.0 ? 0xffffffffu : uint(x));
}
float vkc_rh(float x) { return vkc_h2f(vkc_f2h(x)); }
float vkc_rb(float x) { return vkc_b2f(vkc_f2b(x)); }
float vkc_ru(float x) { return vkc_u2f(vkc_f2u(x)); }
#define VKC_WIDEN4(f) vec4 f(uvec4 x) { return vec4(f(x.x), f(x.y), f(x.z), f(x.w)); }
#define VKC_NARROW4(f) uvec4 f(vec4 x) { return uvec4(f(x.x), f(x.y), f(x.z), f(x.w)); }
#define VKC_ROUND4(f) vec4 f(vec4 x) { return vec4(f(x.x), f(x.y), f(x.z), f(x.w)); }
VKC_WIDEN4(vkc_h2f)
VKC_WIDEN4(vkc_b2f)
VKC_WIDEN4(vkc_u2f)
VKC_NARROW4(vkc_f2h)
VKC_NARROW4(vkc_f2b)
VKC_NARROW4(vkc_f2u)
VKC_ROUND4(vkc_rh)
VKC_ROUND4(vkc_rb)
VKC_ROUND4(vkc_ru)
";

/// The GLSL element type a binding of `d` declares (`vec4`: the vec4
/// kernels' type).
fn storage_type(d: DType, vec4: bool) -> &'static str {
    match (d, vec4) {
        (DType::F16 | DType::Bf16, false) => "uint16_t",
        (DType::F16 | DType::Bf16, true) => "u16vec4",
        (DType::U32, false) => "uint",
        (DType::U32, true) => "uvec4",
        (_, false) => "float",
        (_, true) => "vec4",
    }
}

/// `x`, an element loaded from a binding of `d`, as f32.
fn widen(d: DType, x: &str, vec4: bool) -> String {
    let u = if vec4 { "uvec4" } else { "uint" };
    match d {
        DType::F16 => format!("vkc_h2f({u}({x}))"),
        DType::Bf16 => format!("vkc_b2f({u}({x}))"),
        DType::U32 => format!("vkc_u2f({x})"),
        _ => x.to_string(),
    }
}

/// `t`, an f32 local, as the element stored in a binding of `d`.
fn narrow(d: DType, t: &str, vec4: bool) -> String {
    let h = if vec4 { "u16vec4" } else { "uint16_t" };
    match d {
        DType::F16 => format!("{h}(vkc_f2h({t}))"),
        DType::Bf16 => format!("{h}(vkc_f2b({t}))"),
        DType::U32 => format!("vkc_f2u({t})"),
        _ => t.to_string(),
    }
}

/// `e` rounded to the nearest value of `d`.
fn round(d: DType, e: &str) -> String {
    match d {
        DType::F16 => format!("vkc_rh({e})"),
        DType::Bf16 => format!("vkc_rb({e})"),
        DType::U32 => format!("vkc_ru({e})"),
        _ => e.to_string(),
    }
}

/// Whether a group touches a type other than f32 (its kernel needs the
/// conversions, and 16-bit storage where it touches f16 or bf16).
fn typed(g: &Program, gr: &Group) -> (bool, bool) {
    let vals: Vec<V> = gr
        .nodes
        .iter()
        .flat_map(|&n| {
            let node = &g.nodes[n];
            node.op
                .inputs()
                .into_iter()
                .chain(std::iter::once(node.out))
        })
        .collect();
    let any = vals.iter().any(|&v| g.values[v].dtype != DType::F32);
    let half = vals
        .iter()
        .any(|&v| matches!(g.values[v].dtype, DType::F16 | DType::Bf16));
    (any, half)
}

/// The expression of element-wise `op` over local names.
fn expr(op: &Op, name: &dyn Fn(V) -> String, scalar: &mut usize, ty: &str) -> String {
    let zero = if ty == "vec4" { "vec4(0.0)" } else { "0.0" };
    let mut s = || {
        let i = *scalar;
        *scalar += 1;
        format!("S[{i}]")
    };
    match *op {
        Op::Unary(f, x) => {
            let x = name(x);
            match f {
                Unary::Copy => x,
                Unary::Scale(_) => format!("{} * {x}", s()),
                Unary::Relu => format!("max({x}, {zero})"),
                Unary::Sigmoid => format!("vkc_sigmoid({x})"),
                Unary::Tanh => format!("vkc_tanh({x})"),
                Unary::Swish => format!("{x} * vkc_sigmoid({x})"),
                Unary::Gelu => format!("vkc_gelu_erf({x})"),
                Unary::GeluTanh => format!("vkc_gelu_tanh({x})"),
            }
        }
        Op::Binary(f, a, b) => {
            let (a, b) = (name(a), name(b));
            match f {
                Binary::Add => format!("{a} + {b}"),
                Binary::Sub => format!("{a} - {b}"),
                Binary::Mul => format!("{a} * {b}"),
                Binary::Axpy(_) => format!("{} * {a} + {b}", s()),
            }
        }
        Op::AddRow(a, _) => name(a), // the bias term is added by the caller
        Op::Cast(x) => name(x),      // the caller rounds to the output's type
        Op::Fill(_) => format!("{ty}({})", s()),
        _ => unreachable!("only element-wise ops are fused"),
    }
}

/// Where element `var` of value `v` lives in its binding: `var` itself for
/// a value contiguous from its storage's start, else through its layout
/// (views; only scalar kernels have them).
fn index(g: &Program, v: V, var: &str) -> String {
    match g.values[v].layout {
        None => var.to_string(),
        Some(l) => l.glsl_index(g.values[v].shape, var),
    }
}

/// The body shared by both kernel kinds: loads of external inputs, one
/// local per value, stores of stored values. `head`: the matmul output,
/// already in local `t0`. Returns (body, bindings in order, scalars).
fn body(
    g: &Program,
    gr: &Group,
    stored: &[bool],
    ty: &str,
    head: Option<V>,
    arr: &str,
) -> (String, Vec<S>, Vec<f32>, BTreeMap<V, usize>) {
    let mut bindings: Vec<S> = Vec::new();
    let mut bind = |s: S| -> usize {
        if let Some(j) = bindings.iter().position(|&b| b == s) {
            j
        } else {
            bindings.push(s);
            bindings.len() - 1
        }
    };
    let mut local: BTreeMap<V, usize> = BTreeMap::new();
    let mut rows: BTreeMap<V, usize> = BTreeMap::new();
    let mut src = String::new();
    if let Some(h) = head {
        local.insert(h, 0);
    }
    let vec4 = ty == "vec4";
    for v in group_inputs(g, gr) {
        if head == Some(v) {
            continue;
        }
        let bcast = gr
            .nodes
            .iter()
            .any(|&n| matches!(g.nodes[n].op, Op::AddRow(_, b) if b == v));
        let plain = gr.nodes.iter().any(|&n| match g.nodes[n].op {
            Op::AddRow(a, _) => a == v,
            op => op.inputs().contains(&v),
        });
        let j = bind(g.values[v].storage);
        let d = g.values[v].dtype;
        if plain {
            let t = local.len();
            local.insert(v, t);
            let at = index(g, v, "idx");
            let load = widen(d, &format!("{arr}{j}[{at}]"), vec4);
            let _ = writeln!(src, "    {ty} t{t} = {load};");
        }
        if bcast {
            rows.insert(v, j);
            let at = index(g, v, "col");
            let load = widen(d, &format!("d{j}[{at}]"), false);
            let _ = writeln!(src, "    float r{j} = {load};");
        }
    }
    let mut scalars = Vec::new();
    let mut scalar = 0usize;
    for &n in &gr.nodes {
        let node = &g.nodes[n];
        scalars.extend(node.op.scalars());
        let name = |v: V| format!("t{}", local[&v]);
        let mut e = expr(&node.op, &name, &mut scalar, ty);
        if let Op::AddRow(_, b) = node.op {
            e = format!("{e} + r{}", rows[&b]);
        }
        let t = local.len();
        local.insert(node.out, t);
        let e = round(g.values[node.out].dtype, &e);
        let _ = writeln!(src, "    {ty} t{t} = {e};");
    }
    // Store the last stored value of each storage (earlier versions in the
    // same storage would be overwritten by it anyway).
    let outs: Vec<V> = head
        .into_iter()
        .chain(gr.nodes.iter().map(|&n| g.nodes[n].out))
        .collect();
    for (k, &v) in outs.iter().enumerate() {
        let s = g.values[v].storage;
        let later = outs[k + 1..]
            .iter()
            .any(|&w| stored[w] && g.values[w].storage == s);
        if stored[v] && !later {
            let j = bind(s);
            let t = narrow(g.values[v].dtype, &format!("t{}", local[&v]), vec4);
            let at = index(g, v, "idx");
            let _ = writeln!(src, "    {arr}{j}[{at}] = {t};");
        }
    }
    (src, bindings, scalars, local)
}

fn push_block(prefix: &str, scalars: usize) -> String {
    if scalars == 0 {
        format!("layout(push_constant) uniform P {{ {prefix} }};\n")
    } else {
        format!("layout(push_constant) uniform P {{ {prefix} float S[{scalars}]; }};\n")
    }
}

fn buffers(first: usize, count: usize, ty: &str) -> String {
    (0..count)
        .map(|j| {
            format!(
                "layout(std430, set = 0, binding = {}) buffer B{j} {{ {ty} d{j}[]; }};\n",
                first + j
            )
        })
        .collect()
}

/// Bindings from 0, each declared as its storage's element type.
fn typed_buffers(g: &Program, bindings: &[S], vec4: bool) -> String {
    bindings
        .iter()
        .enumerate()
        .map(|(j, &s)| {
            let ty = storage_type(g.storage_dtype[s], vec4);
            format!("layout(std430, set = 0, binding = {j}) buffer B{j} {{ {ty} d{j}[]; }};\n")
        })
        .collect()
}

/// An element-wise group (no head) as one kernel. Push constants: items
/// (invocations with work), cols (row length, for broadcasts), scalars.
pub(crate) fn elementwise(g: &Program, gr: &Group, stored: &[bool], numel: u64) -> Generated {
    let bcast = gr
        .nodes
        .iter()
        .any(|&n| matches!(g.nodes[n].op, Op::AddRow(..)));
    // Views index element by element: scalar loads.
    let views = gr.nodes.iter().any(|&n| {
        let node = &g.nodes[n];
        node.op
            .inputs()
            .into_iter()
            .chain(std::iter::once(node.out))
            .any(|v| g.values[v].layout.is_some())
    });
    let vec4 = !bcast && !views && numel % 4 == 0;
    let ty = if vec4 { "vec4" } else { "float" };
    let (b, bindings, scalars, _) = body(g, gr, stored, ty, None, "d");
    let (any, half) = typed(g, gr);
    let mut src = String::from("#version 450\n// vkcompute fused element-wise chain\n");
    if half {
        src += "#extension GL_EXT_shader_16bit_storage : require\n";
        src += "#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require\n";
    }
    let _ = writeln!(src, "layout(local_size_x = {LOCAL}) in;");
    if any {
        src += &typed_buffers(g, &bindings, vec4);
    } else {
        src += &buffers(0, bindings.len(), ty);
    }
    src += &push_block("uint items; uint cols;", scalars.len());
    src += ACTIVATIONS;
    if vec4 {
        src += VEC4_WRAPPERS;
    }
    if any {
        src += DTYPE_FNS;
    }
    src += "void main() {\n";
    src += "    uint idx = gl_GlobalInvocationID.x\n";
    src += "        + gl_GlobalInvocationID.y * (gl_NumWorkGroups.x * gl_WorkGroupSize.x)\n";
    src += "        + gl_GlobalInvocationID.z * (gl_NumWorkGroups.x * gl_WorkGroupSize.x * gl_NumWorkGroups.y);\n";
    src += "    if (idx >= items) return;\n";
    if bcast {
        src += "    uint col = idx % cols;\n";
    }
    src += &b;
    src += "}\n";
    Generated {
        source: src,
        bindings,
        scalars,
        vec4,
    }
}

/// The tiled matmul kernel (`shaders/matmul_f32.comp`) with `gr` as its
/// epilogue: each element of C goes through the chain before it is stored.
/// A and B stay at bindings 0 and 1; the epilogue's storages follow from
/// binding 2 (C among them only where it is stored). `None` if the matmul
/// source no longer has the shape this rewrite expects.
pub(crate) fn matmul_epilogue(g: &Program, gr: &Group, stored: &[bool]) -> Option<Generated> {
    let head = g.nodes[gr.head?].out;
    let (b, bindings, scalars, _) = body(g, gr, stored, "float", Some(head), "d");
    let c_decl = "layout(std430, set = 0, binding = 2) writeonly buffer MatC { float c[]; };\n";
    let push = "layout(push_constant) uniform Shape { uint M; uint K; uint N; };\n";
    let full = "                    c[ci] = v.x;\n                    c[ci + 1] = v.y;\n                    c[ci + 2] = v.z;\n                    c[ci + 3] = v.w;\n";
    let edge = "if (col + e < N) c[row * N + col + e] = v[e];";
    let main = "void main() {";
    if [c_decl, push, full, edge, main]
        .iter()
        .any(|p| MATMUL.matches(p).count() != 1)
    {
        return None;
    }
    let mut decl = buffers(2, bindings.len(), "float");
    decl += &push_block("uint M; uint K; uint N;", scalars.len());
    let mut epi = String::from(ACTIVATIONS);
    epi += "void epi(uint idx, uint col, float t0) {\n";
    epi += &b;
    epi += "}\n\n";
    epi += main;
    let src = MATMUL
        .replacen(c_decl, &decl, 1)
        .replacen(push, "", 1)
        .replacen(
            full,
            "                    epi(ci, col, v.x);\n                    epi(ci + 1, col + 1, v.y);\n                    epi(ci + 2, col + 2, v.z);\n                    epi(ci + 3, col + 3, v.w);\n",
            1,
        )
        .replacen(edge, "if (col + e < N) epi(row * N + col + e, col + e, v[e]);", 1)
        .replacen(main, &epi, 1)
        .replacen(
            "#version 450\n",
            "#version 450\n// vkcompute matmul with a fused epilogue\n",
            1,
        );
    Some(Generated {
        source: src,
        bindings,
        scalars,
        vec4: false,
    })
}

const REDUCE: &str = include_str!("../../../shaders/reduce.glsl");
const COMMON: &str = include_str!("../../../shaders/common.glsl");

/// The one-pass reduction (`shaders/reduce.glsl`, sum or max by its OP
/// constant) with `gr` as its prologue: every element it loads is computed
/// by the chain (and stored where it must be) on the way in. Each storage
/// is bound twice (vec4 at 2j, float at 2j + 1), then scratch and the
/// result. `None` if the reduction source no longer has the shape this
/// rewrite expects.
pub(crate) fn reduction_prologue(
    g: &Program,
    gr: &Group,
    stored: &[bool],
    subgroups: bool,
) -> Option<Generated> {
    let tail = &g.nodes[gr.tail?];
    let input = match tail.op {
        Op::Sum(x) | Op::Max(x) => x,
        _ => return None,
    };
    let (b4, bindings, scalars, local) = body(g, gr, stored, "vec4", None, "e");
    let (b1, bindings1, _, _) = body(g, gr, stored, "float", None, "d");
    if bindings != bindings1 {
        return None;
    }
    let ret = local.get(&input)?;
    let decl_in = "layout(set = 0, binding = 0) readonly buffer X4 { vec4 x4[]; };\n\
        layout(set = 0, binding = 1) readonly buffer X1 { float x1[]; };\n\
        layout(set = 0, binding = 2) readonly buffer Y4 { vec4 y4[]; };\n\
        layout(set = 0, binding = 3) readonly buffer Y1 { float y1[]; };\n";
    let scratch = "layout(set = 0, binding = 4) coherent buffer";
    let out = "layout(set = 0, binding = 5) writeonly buffer";
    let push = "layout(push_constant) uniform P { uint n; uint n4; };\n";
    let loads = "vec4 load4(uint i) { return OP == 2u ? x4[i] * y4[i] : x4[i]; }\n\
        float load1(uint i) { return OP == 2u ? x1[i] * y1[i] : x1[i]; }\n";
    let include = "#include \"common.glsl\"\n";
    if [decl_in, scratch, out, push, loads, include]
        .iter()
        .any(|p| REDUCE.matches(p).count() != 1)
    {
        return None;
    }
    let j = bindings.len();
    let mut decl = String::new();
    for k in 0..j {
        let _ = writeln!(
            decl,
            "layout(std430, set = 0, binding = {}) buffer E{k} {{ vec4 e{k}[]; }};",
            2 * k
        );
        let _ = writeln!(
            decl,
            "layout(std430, set = 0, binding = {}) buffer D{k} {{ float d{k}[]; }};",
            2 * k + 1
        );
    }
    let mut fns = String::from(ACTIVATIONS);
    fns += VEC4_WRAPPERS;
    let _ = write!(fns, "vec4 load4(uint idx) {{\n{b4}    return t{ret};\n}}\n");
    let _ = write!(
        fns,
        "float load1(uint idx) {{\n{b1}    return t{ret};\n}}\n"
    );
    let mut src = String::from("#version 450\n// vkcompute reduction with a fused prologue\n");
    if subgroups {
        src += "#define USE_SUBGROUPS\n";
    }
    src += &REDUCE
        .replacen(include, COMMON, 1)
        .replacen(decl_in, &decl, 1)
        .replacen(
            scratch,
            &format!("layout(set = 0, binding = {}) coherent buffer", 2 * j),
            1,
        )
        .replacen(
            out,
            &format!("layout(set = 0, binding = {}) writeonly buffer", 2 * j + 1),
            1,
        )
        .replacen(push, &push_block("uint n; uint n4;", scalars.len()), 1)
        .replacen(loads, &fns, 1);
    Some(Generated {
        source: src,
        bindings,
        scalars,
        vec4: true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::tensor::Shape;

    #[test]
    fn chain_source_is_independent_of_value_numbering() {
        let build = |pad: usize| {
            let mut g = Program::default();
            for _ in 0..pad {
                g.leaf(Shape::Vector(3));
            }
            let x = g.leaf(Shape::Vector(8));
            let b = g.leaf(Shape::Vector(8));
            let s = g.op(Op::Unary(Unary::Scale(2.0), x), Shape::Vector(8));
            let a = g.op(Op::Binary(Binary::Add, s, b), Shape::Vector(8));
            let n0 = g.nodes.len() - 2;
            let mut stored = vec![true; g.values.len()];
            stored[s] = false;
            let gr = Group {
                head: None,
                nodes: vec![n0, n0 + 1],
                tail: None,
            };
            let _ = a;
            elementwise(&g, &gr, &stored, 8)
        };
        let (a, b) = (build(0), build(5));
        assert_eq!(a.source, b.source);
        assert!(a.vec4);
        assert_eq!(a.scalars, vec![2.0]);
        assert_eq!(a.bindings.len(), 3);
        assert!(a.source.contains("S[0] * t0"));
    }

    #[test]
    fn typed_chains_convert_on_load_round_each_value_and_narrow_on_store() {
        let v = Shape::Vector(8);
        let mut g = Program::default();
        let (a, r, c) = g.f16_chain(8);
        g.op_typed(Op::Cast(c), v, DType::Bf16);
        let mut stored = vec![true; g.values.len()];
        stored[a] = false;
        stored[r] = false;
        let gr = Group {
            head: None,
            nodes: vec![0, 1, 2, 3],
            tail: None,
        };
        let gen = elementwise(&g, &gr, &stored, 8);
        assert!(gen.vec4);
        let src = &gen.source;
        assert!(src.contains("GL_EXT_shader_16bit_storage"), "{src}");
        assert!(src.contains("buffer B0 { u16vec4 d0[]; }"), "{src}");
        assert!(src.contains("buffer B2 { vec4 d2[]; }"), "{src}");
        assert!(src.contains("vec4 t0 = vkc_h2f(uvec4(d0[idx]));"), "{src}");
        assert!(src.contains("vec4 t2 = vkc_rh(t0 + t1);"), "{src}");
        assert!(src.contains("vec4 t5 = vkc_rb(t4);"), "{src}");
        assert!(src.contains("d3[idx] = u16vec4(vkc_f2b(t5));"), "{src}");
        assert_eq!(gen.bindings.len(), 4);
        // A lone fill of a 16-bit tensor (scalar kernel: 7 elements).
        let mut g = Program::default();
        let f = g.op_typed(Op::Fill(1.5), Shape::Vector(7), DType::F16);
        let gr = Group {
            head: None,
            nodes: vec![0],
            tail: None,
        };
        let gen = elementwise(&g, &gr, &[true], 7);
        assert!(!gen.vec4 && gen.scalars == [1.5]);
        assert!(
            gen.source.contains("float t0 = vkc_rh(float(S[0]));"),
            "{}",
            gen.source
        );
        assert!(gen.source.contains("d0[idx] = uint16_t(vkc_f2h(t0));"));
        let _ = f;
    }

    #[test]
    fn views_load_and_store_through_their_layouts() {
        use crate::ops::fusion::strides::{select, Layout};
        let base = Shape::Dims3(2, 3, 4);
        let mut g = Program::default();
        let x = g.leaf(base);
        let (hs, hl) = select(base, Layout::of(base, None), 1, 1).expect("a head");
        let h = g.view(x, hs, hl);
        let y = g.leaf(hs);
        // `h += y` in place through the view: loaded and stored strided.
        let out = g.op_into_layout(
            Op::Binary(Binary::Add, h, y),
            hs,
            g.values[x].storage,
            g.values[h].layout,
        );
        let gr = Group {
            head: None,
            nodes: vec![0],
            tail: None,
        };
        let stored = vec![true; g.values.len()];
        let gen = elementwise(&g, &gr, &stored, hs.numel());
        assert!(!gen.vec4);
        let at = "(4u + (idx % 4u) * 1u + (idx / 4u) * 12u)";
        assert!(
            gen.source.contains(&format!("float t0 = d0[{at}];")),
            "{}",
            gen.source
        );
        assert!(gen.source.contains("float t1 = d1[idx];"), "{}", gen.source);
        assert!(
            gen.source.contains(&format!("d0[{at}] = t2;")),
            "{}",
            gen.source
        );
        let _ = out;
    }

    #[test]
    fn reduction_source_takes_a_prologue() {
        let mut g = Program::default();
        let x = g.leaf(Shape::Vector(8));
        let r = g.op(Op::Unary(Unary::Relu, x), Shape::Vector(8));
        g.op(Op::Sum(r), Shape::Vector(1));
        let mut stored = vec![true; g.values.len()];
        stored[r] = false;
        let gr = Group {
            head: None,
            nodes: vec![0],
            tail: Some(1),
        };
        let gen = reduction_prologue(&g, &gr, &stored, true).expect("reduce source rewrites");
        assert!(gen.source.contains("vec4 load4(uint idx)"));
        assert!(gen.source.contains("binding = 3) writeonly buffer"));
        assert!(!gen.source.contains("#include"));
        assert_eq!(gen.bindings, vec![g.values[x].storage]);
    }

    #[test]
    fn matmul_source_takes_an_epilogue() {
        let mut g = Program::default();
        let a = g.leaf(Shape::Matrix(4, 4));
        let w = g.leaf(Shape::Matrix(4, 4));
        let bias = g.leaf(Shape::Vector(4));
        let c = g.op(Op::Matmul(a, w), Shape::Matrix(4, 4));
        let d = g.op(Op::AddRow(c, bias), Shape::Matrix(4, 4));
        let e = g.op(Op::Unary(Unary::Gelu, d), Shape::Matrix(4, 4));
        let mut stored = vec![true; g.values.len()];
        stored[c] = false;
        stored[d] = false;
        let gr = Group {
            head: Some(0),
            nodes: vec![1, 2],
            tail: None,
        };
        let gen = matmul_epilogue(&g, &gr, &stored).expect("matmul source rewrites");
        assert!(gen.source.contains("epi(ci + 3, col + 3, v.w);"));
        assert!(!gen.source.contains(" c[ci]"));
        assert_eq!(
            gen.bindings,
            vec![g.values[bias].storage, g.values[e].storage]
        );
    }
}
