//! The floor for graphs (`measure/examples/graph.rs`): a chain of dependent
//! dispatches recorded once, before the timer, then submitted and waited
//! for, as a graph launch re-submits what it recorded.

use std::time::{Duration, Instant};

use ash::vk;

use super::{push, Floor, ELEMENTS};

impl Floor {
    /// Wall time from submitting `n` dependent dispatches (x = x + 1, a
    /// barrier between each), recorded before the timer into the floor's
    /// command buffer, to the end of a spinning wait. Panics unless every
    /// `x[i]` went from i to i + n.
    pub fn chain_prerecorded(&mut self, n: usize) -> Duration {
        assert!(n > 0, "floor: at least one dispatch");
        let (cb, pc) = (self.cb, push(1.0, 1.0));
        self.begin(cb, vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
        for i in 0..n {
            self.step(cb, &pc, i + 1 < n);
        }
        self.host_barrier(cb);
        self.end(cb);
        self.reset_buffer();
        let start = Instant::now();
        let v = self.submit(cb);
        self.wait_spin(v);
        let wall = start.elapsed();
        let x = self.read();
        assert_eq!(x.len(), ELEMENTS);
        for (i, v) in x.into_iter().enumerate() {
            let want = (i + n) as f32;
            assert!(
                v == want,
                "floor: chain of {n}: x[{i}] = {v}, expected {want}"
            );
        }
        wall
    }
}

impl Floor {
    /// CPU time of `vkQueueSubmit` alone for a command buffer of `n`
    /// dependent dispatches recorded once, before the timer, and submitted
    /// `reps` times (each waited for, untimed, before the next): the
    /// driver's share of a graph launch. `simultaneous` begins it with
    /// `SIMULTANEOUS_USE` (what a graph that may be launched while an
    /// earlier launch is in flight needs), else with no usage flags.
    /// Panics unless every `x[i]` went from i to i + n × reps.
    pub fn submit_cost(&mut self, n: usize, simultaneous: bool, reps: usize) -> Vec<Duration> {
        assert!(
            n > 0 && reps > 0,
            "floor: at least one dispatch and one submission"
        );
        let (cb, pc) = (self.cb, push(1.0, 1.0));
        let flags = if simultaneous {
            vk::CommandBufferUsageFlags::SIMULTANEOUS_USE
        } else {
            vk::CommandBufferUsageFlags::empty()
        };
        self.begin(cb, flags);
        for i in 0..n {
            self.step(cb, &pc, i + 1 < n);
        }
        self.host_barrier(cb);
        self.end(cb);
        let costs = self.time_submits(cb, reps);
        self.check_grown(n * reps, true, "plain or SIMULTANEOUS_USE");
        costs
    }

    /// Resets the buffer, then submits `cb` `reps` times, each waited for
    /// (spinning, untimed) before the next: the CPU time of each
    /// `vkQueueSubmit`.
    fn time_submits(&mut self, cb: vk::CommandBuffer, reps: usize) -> Vec<Duration> {
        self.reset_buffer();
        let mut costs = Vec::with_capacity(reps);
        for _ in 0..reps {
            let start = Instant::now();
            let v = self.submit(cb);
            costs.push(start.elapsed());
            self.wait_spin(v);
        }
        costs
    }

    /// Panics unless every `x[i]` grew by `total` (`exact`), or, for
    /// dispatches that raced with no barrier between them, by a whole
    /// number in 1..=total.
    fn check_grown(&self, total: usize, exact: bool, what: &str) {
        assert!(total + ELEMENTS < 1 << 24, "floor: f32 no longer exact");
        for (i, v) in self.read().into_iter().enumerate() {
            let grown = v - i as f32;
            let ok = if exact {
                grown == total as f32
            } else {
                (1.0..=total as f32).contains(&grown) && grown.fract() == 0.0
            };
            assert!(ok, "floor: {what}, {total} dispatches in all: x[{i}] = {v}");
        }
    }
}

impl Floor {
    /// As [`Floor::submit_cost`], with the `n` dispatches recorded once into
    /// a secondary command buffer (`SIMULTANEOUS_USE`) that a small primary
    /// (no usage flags) executes: whether the driver's submit cost follows
    /// the primary's size or the work it reaches.
    pub fn submit_cost_secondary(&mut self, n: usize, reps: usize) -> Vec<Duration> {
        assert!(
            n > 0 && reps > 0,
            "floor: at least one dispatch and one submission"
        );
        let (d, pc) = (&self.dev, push(1.0, 1.0));
        let alloc = vk::CommandBufferAllocateInfo::default()
            .command_pool(self.pool)
            .level(vk::CommandBufferLevel::SECONDARY)
            .command_buffer_count(1);
        // SAFETY: the pool belongs to `d` and is used by this thread only.
        let sec = ok!(unsafe { d.allocate_command_buffers(&alloc) })[0];
        let inherit = vk::CommandBufferInheritanceInfo::default();
        let info = vk::CommandBufferBeginInfo::default()
            .flags(vk::CommandBufferUsageFlags::SIMULTANEOUS_USE)
            .inheritance_info(&inherit);
        let bind = vk::PipelineBindPoint::COMPUTE;
        // SAFETY: `sec` is new; pipeline and set are live and match `layout`.
        unsafe {
            ok!(d.begin_command_buffer(sec, &info));
            d.cmd_bind_pipeline(sec, bind, self.pipeline);
            d.cmd_bind_descriptor_sets(sec, bind, self.layout, 0, &[self.set], &[]);
        }
        for i in 0..n {
            self.step(sec, &pc, i + 1 < n);
        }
        self.end(sec);
        let cb = self.cb;
        let info = vk::CommandBufferBeginInfo::default();
        // SAFETY: `cb` is not pending (every submission was waited for);
        // `sec` is executable and was begun with SIMULTANEOUS_USE.
        unsafe {
            ok!(self.dev.begin_command_buffer(cb, &info));
            self.dev.cmd_execute_commands(cb, &[sec]);
        }
        self.host_barrier(cb);
        self.end(cb);
        let costs = self.time_submits(cb, reps);
        // SAFETY: nothing pending uses `sec` (every submission was waited for).
        unsafe { self.dev.free_command_buffers(self.pool, &[sec]) };
        self.check_grown(n * reps, true, "secondary");
        costs
    }
}

impl Floor {
    /// As [`Floor::submit_cost`] (no usage flags), with the command buffer
    /// allocated from a pool of its own created with `pool_flags`, and the
    /// barriers between dispatches left out when `barriers` is false (then
    /// the dispatches race, so each `x[i]` is only checked to have grown by
    /// a whole number in 1..=n × reps): what the driver's submit cost
    /// follows.
    pub fn submit_cost_pool(
        &mut self,
        n: usize,
        pool_flags: vk::CommandPoolCreateFlags,
        barriers: bool,
        reps: usize,
    ) -> Vec<Duration> {
        assert!(
            n > 0 && reps > 0,
            "floor: at least one dispatch and one submission"
        );
        let info = vk::CommandPoolCreateInfo::default()
            .queue_family_index(self.family)
            .flags(pool_flags);
        // SAFETY: `dev` is live; `family` is the floor's queue family.
        let pool = ok!(unsafe { self.dev.create_command_pool(&info, None) });
        let alloc = vk::CommandBufferAllocateInfo::default()
            .command_pool(pool)
            .level(vk::CommandBufferLevel::PRIMARY)
            .command_buffer_count(1);
        // SAFETY: `pool` was just created on `dev`.
        let cb = ok!(unsafe { self.dev.allocate_command_buffers(&alloc) })[0];
        let pc = push(1.0, 1.0);
        self.begin(cb, vk::CommandBufferUsageFlags::empty());
        for i in 0..n {
            self.step(cb, &pc, barriers && i + 1 < n);
        }
        self.host_barrier(cb);
        self.end(cb);
        let costs = self.time_submits(cb, reps);
        // SAFETY: every submission of `cb` completed (waited for above).
        unsafe { self.dev.destroy_command_pool(pool, None) };
        self.check_grown(n * reps, barriers, "own pool");
        costs
    }
}
