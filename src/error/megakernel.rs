//! The megakernel's errors, nested in the crate's [`Error`](super::Error) as
//! [`Error::Megakernel`](super::Error::Megakernel).
//!
//! Why here and not in `src/megakernel/`: the core's `Error` holds this
//! enum, and the core never imports a capability (layers run one way), so
//! the type lives in this leaf beside `error.rs`, with no imports from the
//! megakernel; the megakernel re-exports it as
//! `vkcompute::megakernel::MegakernelError`. New megakernel failures become
//! variants here, so the core enum stops growing with each capability (the
//! megakernel variants already in `Error` stay where they are).

/// A megakernel failure: `Error::Megakernel(MegakernelError)`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MegakernelError {
    /// A step launch was cut short: a worker's wait ran out of its spin
    /// budget, or the driver ended a device loop early (llvmpipe ends an
    /// invocation's loops after 65,535 iterations), so later steps ran
    /// unordered or not at all and the data holds no result. The device's
    /// cached residency cap was lowered below `workers`: launch again with
    /// at most `cap` workers.
    #[error(
        "a step launch of {workers} workers was cut short ({}) after asking for {steps} steps: \
         its data is not a result; the residency cap is now {cap} workers ({source_of_cap}), \
         launch again with at most that many",
        cut_reason(*spin_exhausted, *loop_cut)
    )]
    LaunchCut {
        /// Workers of the launch.
        workers: u32,
        /// Steps asked for.
        steps: u32,
        /// Whether a device-side wait ran out of its spin budget.
        spin_exhausted: bool,
        /// Whether a device loop ended before its condition.
        loop_cut: bool,
        /// The residency cap after lowering.
        cap: u32,
        /// Where that cap came from.
        source_of_cap: String,
    },

    /// The megakernel compiles its GLSL template with the user's GLSL at
    /// run time, which needs the crate's `glsl` feature; this build has it
    /// off.
    #[error(
        "{what} compiles GLSL at run time, which needs the crate's `glsl` feature \
         (this build has it off)"
    )]
    NeedsGlsl {
        /// What needed it.
        what: &'static str,
    },
}

fn cut_reason(spin_exhausted: bool, loop_cut: bool) -> &'static str {
    match (spin_exhausted, loop_cut) {
        (true, true) => "a spin budget ran out and a device loop was cut",
        (true, false) => "a spin budget ran out",
        (false, true) => "a device loop was cut",
        (false, false) => "no reason recorded",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_what_happened_and_the_new_cap() {
        let e = MegakernelError::LaunchCut {
            workers: 2,
            steps: 1000,
            spin_exhausted: true,
            loop_cut: false,
            cap: 1,
            source_of_cap: "lowered".into(),
        };
        let m = e.to_string();
        assert!(
            m.contains("2 workers") && m.contains("spin budget ran out"),
            "{m}"
        );
        assert!(m.contains("cap is now 1 workers"), "{m}");
        let m = crate::Error::from(MegakernelError::NeedsGlsl {
            what: "Megakernel::steps",
        })
        .to_string();
        assert!(
            m.starts_with("megakernel: Megakernel::steps") && m.contains("`glsl`"),
            "{m}"
        );
    }
}
