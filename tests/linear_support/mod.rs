//! Helpers shared by the linear tests (`ops_linear`, `ops_linear_normed`,
//! `ops_linear_tensor`, `ops_linear_stream`): the stored weight types, the epilogues tested and
//! weights uploaded in any stored type.
#![allow(dead_code)]

pub mod tensor;

use vkcompute::ops::{Bf16, Weights, F16};
use vkcompute::{Buffer, Device};

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
