//! Element types: what a buffer holds and what a kernel's binding reads,
//! compared when a dispatch is recorded (pure; no GPU).
//!
//! **The rule.** Where both sides are known, a binding is refused with
//! [`Error::ElementMismatch`](crate::Error::ElementMismatch) when their
//! scalar kinds differ or when neither element size divides the other:
//!
//! - The kernel side is known when the binding's block holds exactly one
//!   member that is a scalar or vector, or an array of them (`float x[]`,
//!   `uvec4 w[]`, `uniform U { vec4 scale; }`); its element size is the
//!   array stride (16 for a `vec3` under std430). Blocks of several members,
//!   structs and matrices are not checked.
//! - The buffer side is known for the element types this crate names:
//!   `f32`, `f64`, [`F16`], [`Bf16`], `u8`, `u16`, `u32`, `u64`, `i8`, `i16`, `i32`,
//!   `i64`, and arrays of 2, 3 or 4 of them. A user's struct is not checked.
//! - Scalar kinds are float16, bfloat16, float32, float64, signed integer
//!   and unsigned integer (no compiler here declares bfloat16, so a kernel
//!   reading [`Bf16`] buffers binds raw words and is built raw, below): `Buffer<u32>` on `float[]`, `Buffer<i32>` on
//!   `uint[]` or `Buffer<F16>` on `float[]` is refused. Integers of other
//!   widths pack: `Buffer<u8>` read as `uint` words passes, as does
//!   `Buffer<f32>` read as `vec4` (4 divides 16); `Buffer<[f32; 3]>` on
//!   `vec4[]` does not (12 and 16).
//! - A kernel that reads raw words on purpose (a copy kernel binding `uvec4`
//!   for any element type) is built with
//!   [`KernelBuilder::raw_elements`](crate::KernelBuilder::raw_elements) and
//!   is never checked.

use std::any::TypeId;
use std::fmt;

use bytemuck::{Pod, Zeroable};
use spirq::ty::{ScalarType, Type};

/// A 16-bit IEEE float, as stored on the GPU (bits in a `u16`).
#[repr(transparent)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Pod, Zeroable)]
pub struct F16(pub u16);

/// A bfloat16 (the top 16 bits of an f32: 8 exponent bits, 7 mantissa
/// bits), as stored on the GPU. Kernels read it as raw 16-bit words and
/// widen it with `uintBitsToFloat(uint(h) << 16)`.
#[repr(transparent)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Pod, Zeroable)]
pub struct Bf16(pub u16);

impl Bf16 {
    /// The nearest bfloat16 to `x` (round to nearest even; overflow to
    /// infinity; NaN stays NaN, quiet).
    pub fn from_f32(x: f32) -> Bf16 {
        let b = x.to_bits();
        if x.is_nan() {
            return Bf16(((b >> 16) as u16) | 0x0040);
        }
        // Adding 0x7fff plus the kept part's lowest bit rounds to nearest
        // even; a carry into the exponent is the correct rounding (up to
        // infinity at the top).
        let round = 0x7fff + ((b >> 16) & 1);
        Bf16((b.wrapping_add(round) >> 16) as u16)
    }

    /// The exact f32 value of this bfloat16.
    pub fn to_f32(self) -> f32 {
        f32::from_bits(u32::from(self.0) << 16)
    }
}

impl From<f32> for Bf16 {
    fn from(x: f32) -> Bf16 {
        Bf16::from_f32(x)
    }
}

impl From<Bf16> for f32 {
    fn from(x: Bf16) -> f32 {
        x.to_f32()
    }
}

/// The kind of an element's scalars, as the rule compares them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum ScalarKind {
    /// IEEE float of the given width in bytes (2, 4 or 8).
    Float(u8),
    /// bfloat16 (2 bytes; not an IEEE width, so its own kind).
    BFloat16,
    /// Two's-complement signed integer.
    Signed,
    /// Unsigned integer.
    Unsigned,
}

impl fmt::Display for ScalarKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ScalarKind::Float(b) => write!(f, "float{}", u32::from(*b) * 8),
            ScalarKind::BFloat16 => f.write_str("bfloat16"),
            ScalarKind::Signed => f.write_str("signed integer"),
            ScalarKind::Unsigned => f.write_str("unsigned integer"),
        }
    }
}

/// An element: `lanes` scalars of `kind`, `scalar_bytes` each, `size`
/// bytes apart in memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct ElementType {
    pub kind: ScalarKind,
    pub scalar_bytes: u8,
    pub lanes: u8,
    pub size: u32,
}

impl ElementType {
    const fn new(kind: ScalarKind, scalar_bytes: u8, lanes: u8) -> Self {
        ElementType {
            kind,
            scalar_bytes,
            lanes,
            size: scalar_bytes as u32 * lanes as u32,
        }
    }

    /// Whether a buffer of `have` elements may be bound where `self` is
    /// declared: [`ElementType::accepts`] without the reason, cheap enough
    /// for every binding a dispatch changes (equal sizes need no division).
    #[inline]
    pub(crate) fn fits(self, have: ElementType) -> bool {
        self.kind == have.kind && (self.size == have.size || self.sizes_divide(have))
    }

    /// Whether one element size divides the other (sizes that differ).
    #[cold]
    fn sizes_divide(self, have: ElementType) -> bool {
        let (a, b) = (self.size.max(1), have.size.max(1));
        a % b == 0 || b % a == 0
    }

    /// `Ok` when a buffer of `have` elements may be bound where `self` is
    /// declared; else why not.
    pub(crate) fn accepts(self, have: ElementType) -> Result<(), String> {
        if self.kind != have.kind {
            return Err(format!(
                "the scalar kinds differ ({} and {})",
                self.kind, have.kind
            ));
        }
        let (a, b) = (self.size.max(1), have.size.max(1));
        if a % b != 0 && b % a != 0 {
            return Err(format!(
                "neither element size divides the other ({a} and {b} bytes)"
            ));
        }
        Ok(())
    }

    /// The GLSL name of a declared element (`float`, `uvec4`, `f16vec2`).
    pub(crate) fn glsl_name(self) -> String {
        let (scalar, prefix) = match (self.kind, self.scalar_bytes) {
            (ScalarKind::Float(4), _) => ("float".to_string(), String::new()),
            (ScalarKind::BFloat16, _) => ("bfloat16_t".to_string(), "bf16".to_string()),
            (ScalarKind::Float(8), _) => ("double".to_string(), "d".to_string()),
            (ScalarKind::Float(b), _) => (
                format!("float{}_t", u32::from(b) * 8),
                format!("f{}", u32::from(b) * 8),
            ),
            (ScalarKind::Signed, 4) => ("int".to_string(), "i".to_string()),
            (ScalarKind::Unsigned, 4) => ("uint".to_string(), "u".to_string()),
            (ScalarKind::Signed, b) => (
                format!("int{}_t", u32::from(b) * 8),
                format!("i{}", u32::from(b) * 8),
            ),
            (ScalarKind::Unsigned, b) => (
                format!("uint{}_t", u32::from(b) * 8),
                format!("u{}", u32::from(b) * 8),
            ),
        };
        if self.lanes == 1 {
            scalar
        } else {
            format!("{prefix}vec{}", self.lanes)
        }
    }

    /// The Rust name of a buffer's element (`f32`, `F16`, `[u32; 4]`).
    pub(crate) fn rust_name(self) -> String {
        let bits = u32::from(self.scalar_bytes) * 8;
        let scalar = match self.kind {
            ScalarKind::Float(2) => "F16".to_string(),
            ScalarKind::BFloat16 => "Bf16".to_string(),
            ScalarKind::Float(_) => format!("f{bits}"),
            ScalarKind::Signed => format!("i{bits}"),
            ScalarKind::Unsigned => format!("u{bits}"),
        };
        if self.lanes == 1 {
            scalar
        } else {
            format!("[{scalar}; {}]", self.lanes)
        }
    }

    /// What the kernel declares for a binding whose block type is `ty`
    /// (see the module's rule), or `None` when the rule does not apply.
    pub(crate) fn declared(ty: &Type) -> Option<ElementType> {
        let Type::Struct(block) = ty else {
            return None;
        };
        let [member] = block.members.as_slice() else {
            return None;
        };
        match &member.ty {
            Type::Array(a) => {
                let mut e = of_spirv(&a.element_ty)?;
                if let Some(stride) = a.stride {
                    e.size = u32::try_from(stride).ok()?;
                }
                Some(e)
            }
            other => of_spirv(other),
        }
    }
}

/// A SPIR-V scalar or vector as an element.
fn of_spirv(ty: &Type) -> Option<ElementType> {
    let (scalar, lanes) = match ty {
        Type::Scalar(s) => (s, 1),
        Type::Vector(v) => (&v.scalar_ty, v.nscalar),
        _ => return None,
    };
    let (kind, bits) = match *scalar {
        ScalarType::Float { bits } => (ScalarKind::Float((bits / 8) as u8), bits),
        ScalarType::Integer { bits, is_signed } => (
            if is_signed {
                ScalarKind::Signed
            } else {
                ScalarKind::Unsigned
            },
            bits,
        ),
        _ => return None,
    };
    if !matches!(bits, 8 | 16 | 32 | 64) || !(1..=4).contains(&lanes) {
        return None;
    }
    Some(ElementType::new(kind, (bits / 8) as u8, lanes as u8))
}

/// The element type of `T` when it is one the crate names (see the
/// module's rule), else `None`. Compiles to a constant per `T` in
/// optimised builds.
pub(crate) fn of<T: 'static>() -> Option<ElementType> {
    use ScalarKind::{BFloat16, Float, Signed, Unsigned};
    let id = TypeId::of::<T>();
    macro_rules! named {
        ($($t:ty => $kind:expr),* $(,)?) => {
            $(
                if id == TypeId::of::<$t>() {
                    return Some(ElementType::new($kind, std::mem::size_of::<$t>() as u8, 1));
                }
                if id == TypeId::of::<[$t; 2]>() {
                    return Some(ElementType::new($kind, std::mem::size_of::<$t>() as u8, 2));
                }
                if id == TypeId::of::<[$t; 3]>() {
                    return Some(ElementType::new($kind, std::mem::size_of::<$t>() as u8, 3));
                }
                if id == TypeId::of::<[$t; 4]>() {
                    return Some(ElementType::new($kind, std::mem::size_of::<$t>() as u8, 4));
                }
            )*
        };
    }
    named!(
        f32 => Float(4), F16 => Float(2), Bf16 => BFloat16, f64 => Float(8),
        u32 => Unsigned, i32 => Signed, u16 => Unsigned, i16 => Signed,
        u8 => Unsigned, i8 => Signed, u64 => Unsigned, i64 => Signed,
    );
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_types_and_user_types() {
        assert_eq!(
            of::<f32>(),
            Some(ElementType::new(ScalarKind::Float(4), 4, 1))
        );
        assert_eq!(
            of::<F16>(),
            Some(ElementType::new(ScalarKind::Float(2), 2, 1))
        );
        let u4 = of::<[u32; 4]>().unwrap();
        assert_eq!((u4.kind, u4.lanes, u4.size), (ScalarKind::Unsigned, 4, 16));
        assert_eq!(of::<[i8; 3]>().unwrap().size, 3);
        assert_eq!(of::<[f32; 5]>(), None);
        #[derive(Clone, Copy)]
        struct Mine(#[allow(dead_code)] u32);
        assert_eq!(of::<Mine>(), None);
        assert_eq!(of::<[f32; 3]>().unwrap().rust_name(), "[f32; 3]");
        assert_eq!(of::<F16>().unwrap().rust_name(), "F16");
        assert_eq!(of::<i64>().unwrap().rust_name(), "i64");
    }

    #[test]
    fn the_rule() {
        let float = of::<f32>().unwrap();
        let mut vec4 = of::<[f32; 4]>().unwrap();
        let uint = of::<u32>().unwrap();
        assert!(float.accepts(of::<f32>().unwrap()).is_ok());
        assert!(vec4.accepts(float).is_ok(), "f32 read as vec4");
        assert!(float.accepts(vec4).is_ok(), "[f32; 4] read as float");
        assert!(uint.accepts(of::<u8>().unwrap()).is_ok(), "packed bytes");
        assert!(uint.accepts(of::<[u16; 2]>().unwrap()).is_ok());
        let e = float.accepts(uint).unwrap_err();
        assert!(
            e.contains("float32") && e.contains("unsigned integer"),
            "{e}"
        );
        assert!(uint.accepts(of::<i32>().unwrap()).is_err(), "signedness");
        assert!(float.accepts(of::<F16>().unwrap()).is_err(), "float widths");
        let e = vec4.accepts(of::<[f32; 3]>().unwrap()).unwrap_err();
        assert!(e.contains("16 and 12"), "{e}");
        // A std430 vec3 array: 16-byte stride.
        vec4.lanes = 3;
        assert!(vec4.accepts(float).is_ok());
        assert!(vec4.accepts(of::<[f32; 3]>().unwrap()).is_err());
    }

    /// What reflection says each binding declares, from GLSL.
    #[cfg(feature = "glsl")]
    #[test]
    fn declared_elements_from_reflection() {
        let src = r#"
#version 450
layout(local_size_x = 1) in;
layout(std430, binding = 0) buffer A { float a[]; };
layout(std430, binding = 1) buffer B { vec3 b[]; };
layout(std430, binding = 2) buffer C { uint n; float c[]; };
struct S { vec4 p; };
layout(std430, binding = 3) buffer D { S d[]; };
layout(binding = 4) uniform U { ivec2 u; };
layout(std430, binding = 5) buffer E { mat4 m[]; };
void main() { a[0] = b[0].x + c[n] + d[0].p.x + float(u.x) + m[0][0].x; }
"#;
        let words = crate::glsl::compile_glsl(src).unwrap();
        let (r, e) = crate::reflect::reflect_with_elements(&words, None).unwrap();
        assert_eq!(r.bindings.len(), e.len());
        let float = of::<f32>();
        assert_eq!(e[0], float);
        // std430 vec3: three floats, 16 bytes apart.
        let v3 = e[1].unwrap();
        assert_eq!((v3.kind, v3.lanes, v3.size), (ScalarKind::Float(4), 3, 16));
        assert_eq!(e[2], None, "two members");
        assert_eq!(e[3], None, "a struct");
        assert_eq!(e[4], of::<[i32; 2]>());
        assert_eq!(e[5], None, "a matrix");
    }

    #[test]
    fn bfloat16_is_its_own_kind() {
        let bf = of::<Bf16>().unwrap();
        assert_eq!((bf.kind, bf.size), (ScalarKind::BFloat16, 2));
        assert_eq!(bf.rust_name(), "Bf16");
        assert_eq!(of::<[Bf16; 2]>().unwrap().rust_name(), "[Bf16; 2]");
        let e = of::<F16>().unwrap().accepts(bf).unwrap_err();
        assert!(e.contains("float16") && e.contains("bfloat16"), "{e}");
        assert!(of::<u16>().unwrap().accepts(bf).is_err());
        assert!(of::<f32>().unwrap().accepts(bf).is_err());
        assert!(bf.accepts(bf).is_ok());
    }

    #[test]
    fn bfloat16_rounds_to_nearest_even() {
        // Every bfloat16 survives the round trip (NaNs stay NaN).
        for bits in 0..=u16::MAX {
            let f = Bf16(bits).to_f32();
            if f.is_nan() {
                assert!(Bf16::from_f32(f).to_f32().is_nan(), "{bits:#x}");
            } else {
                assert_eq!(Bf16::from_f32(f), Bf16(bits), "{bits:#x}");
            }
        }
        assert_eq!(Bf16::from_f32(1.0).0, 0x3f80);
        assert_eq!(Bf16::from_f32(-2.0).0, 0xc000);
        // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (1).
        assert_eq!(Bf16::from_f32(1.0 + 2f32.powi(-8)).0, 0x3f80);
        // 1 + 3·2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: even is up.
        assert_eq!(Bf16::from_f32(1.0 + 3.0 * 2f32.powi(-8)).0, 0x3f82);
        // Just above the halfway point rounds up.
        assert_eq!(
            Bf16::from_f32(1.0 + 2f32.powi(-8) + 2f32.powi(-20)).0,
            0x3f81
        );
        assert_eq!(Bf16::from_f32(f32::MAX).0, 0x7f80, "overflow to infinity");
        assert_eq!(Bf16::from_f32(f32::NEG_INFINITY).0, 0xff80);
        assert!(Bf16::from_f32(f32::NAN).to_f32().is_nan());
        // The smallest subnormal f32 rounds to zero (a tie, to even).
        assert_eq!(Bf16::from_f32(f32::from_bits(0x8000)).0, 0);
        assert_eq!(Bf16::from_f32(f32::from_bits(0x8001)).0, 1);
        assert_eq!(f32::from(Bf16(0x4049)), 3.140625);
    }

    #[test]
    fn glsl_names() {
        let n = |t: Option<ElementType>| t.unwrap().glsl_name();
        assert_eq!(n(of::<f32>()), "float");
        assert_eq!(n(of::<[u32; 4]>()), "uvec4");
        assert_eq!(n(of::<[F16; 2]>()), "f16vec2");
        assert_eq!(n(of::<u16>()), "uint16_t");
        assert_eq!(n(of::<[f64; 3]>()), "dvec3");
        assert_eq!(n(of::<[i32; 2]>()), "ivec2");
    }
}
