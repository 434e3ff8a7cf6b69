//! Element types of the built-in ops: `f32`, and [`F16`] storage; [`Bf16`]
//! storage for the weights of [`linear`](super::linear); and the element
//! types of an [`OpBatch`](super::OpBatch)'s tensors ([`TensorElement`]:
//! f32, f16, bf16 and `u32`).

use bytemuck::Pod;

use crate::device::Device;
use crate::error::{Error, Result};

/// The storage type of an op's operands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DType {
    /// 32-bit IEEE float.
    F32,
    /// 16-bit IEEE float (storage only; ops compute in f32).
    F16,
    /// bfloat16 (storage only: the weights of [`linear`](super::linear),
    /// and [`OpBatch`](super::OpBatch) tensors, whose ops compute in f32;
    /// no free element-wise op takes it).
    Bf16,
    /// 32-bit unsigned integer ([`OpBatch`](super::OpBatch) tensors only:
    /// uploaded, imported, read and cast to and from f32).
    U32,
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for super::F16 {}
    pub trait SealedTensor {}
    impl SealedTensor for f32 {}
    impl SealedTensor for super::F16 {}
    impl SealedTensor for super::Bf16 {}
    impl SealedTensor for u32 {}
}

/// An element type of an [`OpBatch`](super::OpBatch)'s tensors, for its
/// typed uploads, imports and reads
/// ([`OpBatch::upload_as`](super::OpBatch::upload_as),
/// [`OpBatch::import_as`](super::OpBatch::import_as),
/// [`OpBatch::read_as`](super::OpBatch::read_as)). Sealed: `f32`, [`F16`],
/// [`Bf16`] and `u32`.
pub trait TensorElement: Pod + sealed::SealedTensor {
    /// The tensor's element type.
    const DTYPE: DType;
}

impl TensorElement for f32 {
    const DTYPE: DType = DType::F32;
}

impl TensorElement for F16 {
    const DTYPE: DType = DType::F16;
}

impl TensorElement for Bf16 {
    const DTYPE: DType = DType::Bf16;
}

impl TensorElement for u32 {
    const DTYPE: DType = DType::U32;
}

/// An element type the built-in ops accept. Sealed: `f32` and [`F16`].
pub trait Element: Pod + sealed::Sealed {
    /// The storage type.
    const DTYPE: DType;
}

impl Element for f32 {
    const DTYPE: DType = DType::F32;
}

impl Element for F16 {
    const DTYPE: DType = DType::F16;
}

impl DType {
    /// Bytes per element.
    pub fn size(self) -> u64 {
        match self {
            DType::F32 | DType::U32 => 4,
            DType::F16 | DType::Bf16 => 2,
        }
    }

    /// The type's short name (`f32`, `f16`, `bf16`, `u32`), as errors
    /// name it.
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::Bf16 => "bf16",
            DType::U32 => "u32",
        }
    }

    /// A floating-point type (f32, f16, bf16): element-wise ops take it.
    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F16 | DType::Bf16)
    }

    /// Whether `gpu` can run element-wise kernels on this type: f16 needs
    /// `shaderFloat16` and `storageBuffer16BitAccess`, bf16 (read and
    /// written as 16-bit words) `storageBuffer16BitAccess`.
    pub(crate) fn check(self, gpu: &Device) -> Result<()> {
        let i = gpu.info();
        if self == DType::F16 && !(i.float16 && i.storage_buffer16) {
            return Err(Error::Unsupported {
                what: "f16 storage (shaderFloat16 + storageBuffer16BitAccess)",
                adapter: i.name.clone(),
            });
        }
        if self == DType::Bf16 && !i.storage_buffer16 {
            return Err(Error::Unsupported {
                what: "bf16 storage (storageBuffer16BitAccess)",
                adapter: i.name.clone(),
            });
        }
        Ok(())
    }
}

impl std::fmt::Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

// Defined beside the other element types the crate names (the binding
// check recognises them); F16's conversions live here, Bf16's with it.
pub use crate::element::{Bf16, F16};

impl F16 {
    /// The nearest half to `x` (round to nearest even; overflow to
    /// infinity; NaN stays NaN).
    pub fn from_f32(x: f32) -> F16 {
        let b = x.to_bits();
        let sign = ((b >> 16) & 0x8000) as u16;
        let exp = ((b >> 23) & 0xff) as i32;
        let man = b & 0x7f_ffff;
        if exp == 0xff {
            let nan = if man != 0 { 0x200 } else { 0 };
            return F16(sign | 0x7c00 | nan);
        }
        let e = exp - 127 + 15;
        if e >= 0x1f {
            return F16(sign | 0x7c00);
        }
        if e <= 0 {
            // Subnormal half (or zero).
            if e < -10 {
                return F16(sign);
            }
            let m = man | 0x80_0000;
            let shift = (14 - e) as u32;
            let half = m >> shift;
            let rem = m & ((1 << shift) - 1);
            let mid = 1 << (shift - 1);
            let up = rem > mid || (rem == mid && half & 1 == 1);
            return F16(sign | (half + u32::from(up)) as u16);
        }
        let half = ((e as u32) << 10) | (man >> 13);
        let rem = man & 0x1fff;
        let up = rem > 0x1000 || (rem == 0x1000 && half & 1 == 1);
        // A carry out of the mantissa correctly bumps the exponent (to
        // infinity at the top).
        F16(sign | (half + u32::from(up)) as u16)
    }

    /// The exact f32 value of this half.
    pub fn to_f32(self) -> f32 {
        let h = u32::from(self.0);
        let sign = (h & 0x8000) << 16;
        let exp = (h >> 10) & 0x1f;
        let man = h & 0x3ff;
        let bits = match (exp, man) {
            (0, 0) => sign,
            (0, m) => {
                // Subnormal: normalise.
                let shift = m.leading_zeros() - 21;
                let m = (m << shift) & 0x3ff;
                sign | ((113 - shift) << 23) | (m << 13)
            }
            (0x1f, m) => sign | 0x7f80_0000 | (m << 13),
            (e, m) => sign | ((e + 112) << 23) | (m << 13),
        };
        f32::from_bits(bits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_names() {
        assert_eq!(DType::F32.size(), 4);
        assert_eq!(DType::U32.size(), 4);
        assert_eq!(DType::F16.size(), 2);
        assert_eq!(DType::Bf16.size(), 2);
        assert_eq!(DType::Bf16.to_string(), "bf16");
        assert!(DType::F16.is_float() && !DType::U32.is_float());
        assert_eq!(<u32 as TensorElement>::DTYPE, DType::U32);
        assert_eq!(<Bf16 as TensorElement>::DTYPE, DType::Bf16);
    }

    #[test]
    fn halves_round_trip_and_round_to_nearest_even() {
        for bits in 0..=u16::MAX {
            let h = F16(bits);
            let f = h.to_f32();
            if f.is_nan() {
                assert!(F16::from_f32(f).to_f32().is_nan());
            } else {
                assert_eq!(F16::from_f32(f), h, "{bits:#x} -> {f}");
            }
        }
        assert_eq!(F16::from_f32(1.0).0, 0x3c00);
        assert_eq!(F16::from_f32(-2.0).0, 0xc000);
        assert_eq!(F16::from_f32(65504.0).0, 0x7bff);
        assert_eq!(F16::from_f32(1e6).0, 0x7c00);
        assert_eq!(F16::from_f32(f32::NEG_INFINITY).0, 0xfc00);
        // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to even (1).
        assert_eq!(F16::from_f32(1.0 + 2f32.powi(-11)).0, 0x3c00);
        assert_eq!(F16::from_f32(1.0 + 3.0 * 2f32.powi(-11)).0, 0x3c02);
        assert_eq!(F16(1).to_f32(), 2f32.powi(-24));
        assert_eq!(F16::from_f32(2f32.powi(-25)).0, 0); // tie to even: 0
        assert_eq!(F16::from_f32(3.0 * 2f32.powi(-26)).0, 1);
    }
}
