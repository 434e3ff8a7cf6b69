//! vkcompute's side of the new-bindings workloads (beside
//! `measure/src/floor/more.rs`): recording where every dispatch binds a
//! different buffer, and where two kernels alternate; each checked once.

use std::time::Instant;

use vkcompute::{BatchOptions, Buffer, Kernel};

use crate::ours::{manual, Ours, N};
use crate::us;

/// The second kernel: `x = x * a + 2b` (the floor's kernel B).
const AXPB2: &str = r#"
#version 450
layout(local_size_x = 256) in;
layout(set = 0, binding = 0) buffer X { float x[]; };
layout(push_constant) uniform P { float a; float b; uint n; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < n) x[i] = x[i] * a + 2.0 * b;
}
"#;

/// `count` distinct buffers of N f32 and the second kernel, on `ours`'s device.
pub struct NewBindings<'a> {
    ours: &'a Ours,
    bufs: Vec<Buffer<f32>>,
    k2: Kernel,
}

impl<'a> NewBindings<'a> {
    /// Allocates the buffers (zeroed) and builds the second kernel.
    pub fn new(ours: &'a Ours, count: usize) -> vkcompute::Result<Self> {
        let bufs = (0..count)
            .map(|_| ours.gpu.alloc::<f32>(N as usize))
            .collect::<vkcompute::Result<_>>()?;
        let k2 = ours.gpu.kernel_glsl(AXPB2)?;
        Ok(NewBindings { ours, bufs, k2 })
    }

    /// Records one dispatch per buffer (x += 1 each), independent.
    fn record_each(&self, b: &mut vkcompute::Batch, n: usize) -> vkcompute::Result<()> {
        for buf in &self.bufs[..n] {
            b.run_with_push_constants(&self.ours.k, &[buf], N, &self.ours.pc)?;
        }
        Ok(())
    }

    /// Records `n` dispatches alternating the two kernels on `x`, a barrier
    /// after each.
    fn record_alternating(&self, b: &mut vkcompute::Batch, n: usize) -> vkcompute::Result<()> {
        for i in 0..n {
            let k = if i % 2 == 0 { &self.ours.k } else { &self.k2 };
            b.run_with_push_constants(k, &[&self.ours.x], N, &self.ours.pc)?;
            b.barrier();
        }
        Ok(())
    }

    /// Runs both workloads once, submitted, and the first again with
    /// automatic barriers (none due), and checks every element: each buffer
    /// went from 0 to 2; `x` went from 0 to 1.5 × `n` (even `n`).
    pub fn check(&self, n: usize) -> Result<(), String> {
        let e = |e: vkcompute::Error| e.to_string();
        for buf in &self.bufs {
            buf.write(0, &vec![0.0; N as usize]).map_err(e)?;
        }
        self.ours.x.write(0, &vec![0.0; N as usize]).map_err(e)?;
        let mut b = self
            .ours
            .gpu
            .batch_with(manual(BatchOptions::default()))
            .map_err(e)?;
        self.record_each(&mut b, self.bufs.len()).map_err(e)?;
        self.record_alternating(&mut b, n).map_err(e)?;
        b.submit().map_err(e)?;
        // The same buffers again with automatic barriers: none is due.
        let mut b = self.ours.gpu.batch().map_err(e)?;
        self.record_each(&mut b, self.bufs.len()).map_err(e)?;
        if b.barrier_count() != 0 {
            return Err(format!(
                "distinct buffers with automatic barriers: {} barriers",
                b.barrier_count()
            ));
        }
        b.submit().map_err(e)?;
        for (i, buf) in self.bufs.iter().enumerate() {
            let got = buf.download().map_err(e)?;
            if let Some(j) = got.iter().position(|&v| v != 2.0) {
                return Err(format!("buffer {i}: x[{j}] = {}, expected 2", got[j]));
            }
        }
        let want = (n / 2) as f32 * 3.0 + (n % 2) as f32;
        let got = self.ours.x.download().map_err(e)?;
        if let Some(j) = got.iter().position(|&v| v != want) {
            return Err(format!("alternating: x[{j}] = {}, expected {want}", got[j]));
        }
        Ok(())
    }

    /// CPU µs per dispatch recording `n` dispatches each binding its own
    /// buffer; one dispatch on another buffer is recorded before the timer
    /// (begin, pipeline bind), as the floor begins before its timer. The
    /// batch is dropped unsubmitted.
    pub fn record_new_bindings(&self, n: usize) -> vkcompute::Result<f64> {
        self.record_new_bindings_with(n, false)
    }

    /// The twin of [`NewBindings::record_new_bindings`] with automatic
    /// barriers: every access tracked, no barrier due.
    pub fn record_new_bindings_auto(&self, n: usize) -> vkcompute::Result<f64> {
        self.record_new_bindings_with(n, true)
    }

    fn record_new_bindings_with(&self, n: usize, auto: bool) -> vkcompute::Result<f64> {
        let o = self.ours;
        let options = BatchOptions::single_submit().with_auto_barriers(auto);
        let mut b = o.gpu.batch_with(options)?;
        b.run_with_push_constants(&o.k, &[&o.x], N, &o.pc)?;
        let t = Instant::now();
        self.record_each(&mut b, n)?;
        let e = t.elapsed();
        drop(b);
        Ok(us(e) / n as f64)
    }

    /// CPU µs per dispatch recording `n` dispatches alternating the two
    /// kernels (barrier after each); the batch is begun before the timer
    /// and dropped unsubmitted.
    pub fn record_alternating_cost(&self, n: usize) -> vkcompute::Result<f64> {
        let o = self.ours;
        let mut b = o.gpu.batch_with(manual(BatchOptions::single_submit()))?;
        b.run_with_push_constants(&o.k, &[&o.x], N, &o.pc)?;
        b.barrier();
        let t = Instant::now();
        self.record_alternating(&mut b, n)?;
        let e = t.elapsed();
        drop(b);
        Ok(us(e) / n as f64)
    }
}
