//! Assembling one kernel from the GLSL template and the user's code.
//! Plain string work, tested without a GPU.

/// Part 1 of the template: declarations the user's code sees.
pub(crate) const PRELUDE: &str = include_str!("../../shaders/megakernel/prelude.glsl");
/// Part 2 of the template: the worker loop and `main`.
pub(crate) const WORKER: &str = include_str!("../../shaders/megakernel/worker.glsl");

/// Which loop the template runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MegakernelMode {
    /// Workers claim tasks from the queue; the user defines `MK_OP_COUNT`
    /// and `uint run_task(inout MkTask t, uint lane, uint lanes)`.
    Tasks,
    /// Every worker runs every step, with a device-wide barrier between
    /// steps; the user defines `void run_step(uint step, uint worker, uint
    /// workers, uint lane)`.
    Steps,
}

/// How the device measures the wall-time budget (reported per launch).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ClockKind {
    /// No clock: a budget of worker-loop iterations.
    IterationBudget,
    /// VK_KHR_shader_clock's device clock (`clockRealtime2x32EXT`).
    DeviceClock,
    /// VK_KHR_shader_clock's subgroup clock (`clock2x32ARB`).
    SubgroupClock,
}

impl ClockKind {
    fn define(self) -> u32 {
        match self {
            ClockKind::IterationBudget => 0,
            ClockKind::DeviceClock => 1,
            ClockKind::SubgroupClock => 2,
        }
    }
}

/// What one compiled variant of the template is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Variant {
    pub mode: MegakernelMode,
    pub local_size: u32,
    pub clock: ClockKind,
    pub memory_model: bool,
    pub barrier: StepBarrier,
    /// Task mode: check after every task that no lane's loops were cut
    /// (where the driver cuts them: [`loop_limit`]).
    pub loop_check: bool,
}

/// Whether the driver ends an invocation's loops after a fixed count of
/// iterations (llvmpipe: 65,535 over all its loops, silently).
pub(crate) fn loop_limit(driver_name: &str) -> bool {
    driver_name == "llvmpipe"
}

/// How the device-wide step barrier tells waiters that all have arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum StepBarrier {
    /// Waiters poll the monotone arrival counter itself (one atomic round
    /// trip on the critical path).
    #[default]
    Counter,
    /// The last arrival publishes the step number in a generation word on
    /// its own cache line; waiters poll that.
    CounterAndFlag,
}

/// The whole kernel source: version, defines, prelude, user code, worker loop.
pub(crate) fn assemble(user: &str, v: Variant) -> String {
    let mut s = String::with_capacity(PRELUDE.len() + WORKER.len() + user.len() + 256);
    s.push_str("#version 450\n");
    s.push_str(&format!("#define MK_LOCAL_SIZE {}\n", v.local_size));
    s.push_str(&format!(
        "#define MK_STEPS {}\n",
        u32::from(v.mode == MegakernelMode::Steps)
    ));
    s.push_str(&format!("#define MK_CLOCK {}\n", v.clock.define()));
    s.push_str(&format!(
        "#define MK_MEMORY_MODEL {}\n",
        u32::from(v.memory_model)
    ));
    s.push_str(&format!(
        "#define MK_BARRIER_FLAG {}\n",
        u32::from(v.barrier == StepBarrier::CounterAndFlag)
    ));
    s.push_str(&format!(
        "#define MK_LOOP_CHECK {}\n",
        u32::from(v.loop_check)
    ));
    s.push_str("#line 1\n");
    s.push_str(PRELUDE);
    s.push_str("\n#line 1\n");
    s.push_str(user);
    s.push_str("\n#line 1\n");
    s.push_str(WORKER);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assembles_in_order_with_defines() {
        let v = Variant {
            mode: MegakernelMode::Steps,
            local_size: 128,
            clock: ClockKind::SubgroupClock,
            memory_model: true,
            barrier: StepBarrier::CounterAndFlag,
            loop_check: true,
        };
        let s = assemble("// USER CODE", v);
        assert!(s.starts_with("#version 450\n"));
        for d in [
            "#define MK_LOCAL_SIZE 128",
            "#define MK_STEPS 1",
            "#define MK_CLOCK 2",
            "#define MK_MEMORY_MODEL 1",
            "#define MK_BARRIER_FLAG 1",
            "#define MK_LOOP_CHECK 1",
        ] {
            assert!(s.contains(d), "{d}");
        }
        let (p, u, w) = (
            s.find("struct MkTask").unwrap(),
            s.find("// USER CODE").unwrap(),
            s.find("bool mk_grid_barrier").unwrap(),
        );
        assert!(p < u && u < w);
    }

    #[test]
    fn template_spins_only_on_atomics() {
        // A plain or volatile load in a spin loop was silently broken
        // (notes/persistent-kernels.md): every wait reads through an atomic.
        let code = |src: &str| -> String {
            src.lines()
                .map(|l| l.split("//").next().unwrap_or(""))
                .collect::<Vec<_>>()
                .join("\n")
        };
        assert!(!code(PRELUDE).contains("volatile") && !code(WORKER).contains("volatile"));
        assert!(WORKER.contains("if (mk_ctl_load_relaxed(MK_POLL_WORD) >= MK_POLL_GOAL)"));
        assert!(WORKER.contains("if (!seen && mk_ctl_load_relaxed(MK_POLL_WORD) < MK_POLL_GOAL)"));
        // No unbounded loop: lavapipe silently ends loops at 65,535 iterations.
        assert!(!code(WORKER).contains("while"));
        assert!(WORKER.contains("#define MK_CHUNK 1024u"));
        assert!(loop_limit("llvmpipe") && !loop_limit("NVIDIA"));
    }
}
