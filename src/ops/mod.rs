//! Built-in ops that record into an ordinary [`Batch`](crate::Batch), mixing freely with user kernels.
pub mod matmul;
pub use matmul::{
    choose_matmul, matmul, matmul_f16, CoopTile, MatmulCaps, MatmulDtype, MatmulKernel, MatmulPlan,
    TileConfig,
};
