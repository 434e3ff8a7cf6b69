//! The floor for graphs (`examples/graph.rs`): a chain of dependent
//! dispatches recorded once, before the timer, then submitted and waited
//! for, as a graph launch re-submits what it recorded.

use std::time::{Duration, Instant};

use ash::vk;

use super::{push, Floor, ELEMENTS};

impl Floor {
    /// Wall time from submitting `n` dependent dispatches (x = x + 1, a
    /// barrier between each), recorded before the timer into the floor's
    /// command buffer, to the end of a spinning wait. Panics unless every
    /// x[i] went from i to i + n.
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
