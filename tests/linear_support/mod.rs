//! Helpers shared by the linear tests (`ops_linear`, `ops_linear_normed`,
//! `ops_linear_tensor`, `ops_linear_stream`): the stored weight types, the
//! epilogues tested, weights uploaded in any stored type, and the check of
//! a forced tensor-core plan on adapters with and without its kernel.
#![allow(dead_code)]

pub mod tensor;

use vkcompute::ops::{Bf16, Weights, F16};
use vkcompute::{Batch, Buffer, Device, Error};

/// Checks a forced tensor-core plan's result `r`, recorded into `batch`:
/// where the adapter has the kernel (`has`), the layer ran and every
/// output of `y` is `want` (the Unsupported half prints `skipped:`, naming
/// `kernel`); else the error is `Error::Unsupported` naming `needs`, and
/// nothing was recorded.
pub fn runs_or_unsupported(
    r: vkcompute::Result<()>,
    batch: Batch,
    y: &Buffer<f32>,
    (has, kernel): (bool, &str),
    want: f32,
    needs: &str,
) {
    if has {
        crate::common::skipped(format!(
            "the Unsupported error for {kernel}: this adapter has the kernel"
        ));
        r.unwrap();
        batch.submit().unwrap();
        assert!(y.download().unwrap().iter().all(|&v| v == want));
    } else {
        match r {
            Err(Error::Unsupported { what, .. }) => assert!(what.contains(needs), "{what}"),
            other => panic!("want Unsupported, got {other:?}"),
        }
        assert!(batch.is_empty(), "a refused layer recorded nothing");
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Dt {
    F32,
    F16,
    Bf16,
}

impl Dt {
    /// Relative rounding of a weight stored in this type.
    pub fn unit(self) -> f64 {
        match self {
            Dt::F32 => 0.0,
            Dt::F16 => f64::powi(2.0, -11),
            Dt::Bf16 => f64::powi(2.0, -8),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Epi {
    None,
    Residual,
    ResidualInPlace,
    SiluMul,
}

/// Uploaded weights of any stored type.
pub enum GpuW {
    F32(Buffer<f32>),
    F16(Buffer<F16>),
    Bf16(Buffer<Bf16>),
}

impl GpuW {
    /// The weights as `ops::linear` takes them, whatever their type.
    pub fn weights(&self) -> Weights<'_> {
        match self {
            GpuW::F32(b) => b.into(),
            GpuW::F16(b) => b.into(),
            GpuW::Bf16(b) => b.into(),
        }
    }
}

pub fn upload_w(gpu: &Device, dt: Dt, w: &[f32]) -> GpuW {
    match dt {
        Dt::F32 => GpuW::F32(gpu.upload(w).unwrap()),
        Dt::F16 => GpuW::F16(
            gpu.upload(&w.iter().map(|&v| F16::from_f32(v)).collect::<Vec<_>>())
                .unwrap(),
        ),
        Dt::Bf16 => GpuW::Bf16(
            gpu.upload(&w.iter().map(|&v| Bf16::from_f32(v)).collect::<Vec<_>>())
                .unwrap(),
        ),
    }
}
