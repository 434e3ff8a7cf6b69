//! Errors of the transformer ops (`ops::nn`): a nested enum, so the core's
//! [`Error`](crate::Error) gains one variant ([`Error::Ops`](crate::Error::Ops))
//! instead of one per op. Defined here, below the ops, because the core may
//! not import a capability; `ops` re-exports it.
//!
//! Every message names the op, the tensor (or parameter) at fault and the
//! limit it broke.

/// What a transformer op refused at record time.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum OpsError {
    /// A tensor's length or a dimension does not fit the op: a zero or
    /// oversized dimension, a buffer of the wrong length, head counts that
    /// do not divide.
    #[error("{op}: {tensor}: {detail}")]
    Shape {
        /// The op, e.g. `ops::nn::rms_norm`.
        op: &'static str,
        /// The tensor or dimension at fault, e.g. `weight`, `head_dim`.
        tensor: &'static str,
        /// What does not fit, with the sizes given and the limit.
        detail: String,
    },
    /// A scalar parameter out of its range (a negative epsilon, a top-p
    /// outside (0, 1]).
    #[error("{op}: parameter {param}: {detail}")]
    Param {
        /// The op.
        op: &'static str,
        /// The parameter.
        param: &'static str,
        /// The value given and the range allowed.
        detail: String,
    },
    /// An [`OpBatch`](crate::ops::OpBatch) op was given a tensor of an
    /// element type it does not take (an f32-only op given an f16 tensor),
    /// or operands of different element types (an f16 tensor added to a
    /// bf16 one). Nothing is recorded then.
    #[error("{op}: {operand} is {dtype}; {detail}")]
    Dtype {
        /// The op.
        op: &'static str,
        /// The operand at fault and its shape (`b [4]`).
        operand: String,
        /// Its element type's name (`f16`, as
        /// [`DType::name`](crate::ops::DType::name) gives it).
        dtype: &'static str,
        /// What the op takes instead (the other operand's type, or the
        /// types it accepts).
        detail: String,
    },
    /// Kernels of an op batch's launch (an execute or a graph launch)
    /// raised a bound flag: they met values only known at launch past
    /// their limits (token ids past the vocabulary, positions past the
    /// cache), wrote nothing out of bounds for them and counted them. Read
    /// by the launch's ticket once its work completed.
    #[error("{op}: {count} {detail} in this launch")]
    Flagged {
        /// The op whose flag grew (the first, where several share it).
        op: &'static str,
        /// How much the flag grew in this launch.
        count: u64,
        /// What was counted, and the flags of other ops that grew too.
        detail: String,
    },
    /// A model-configuration field the op does not implement (an unknown
    /// `rope_scaling` type) or whose value it cannot use.
    #[error("{op}: config field {field}: {detail}")]
    Config {
        /// The op.
        op: &'static str,
        /// The field, e.g. `rope_scaling.rope_type`.
        field: &'static str,
        /// The value found and what is supported.
        detail: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_op_the_tensor_and_the_limit() {
        let e = OpsError::Shape {
            op: "ops::nn::rotary",
            tensor: "head_dim",
            detail: "300 exceeds the limit 256".into(),
        };
        assert_eq!(
            e.to_string(),
            "ops::nn::rotary: head_dim: 300 exceeds the limit 256"
        );
        let e = OpsError::Config {
            op: "ops::nn::rope_inv_freq",
            field: "rope_scaling.rope_type",
            detail: "\"yarn\" is not supported (only \"llama3\")".into(),
        };
        assert!(e.to_string().contains("rope_scaling.rope_type"), "{e}");
        let e = OpsError::Param {
            op: "ops::nn::sample",
            param: "top_p",
            detail: "1.5 is outside (0, 1]".into(),
        };
        assert!(e.to_string().contains("top_p") && e.to_string().contains("(0, 1]"));
    }
}
