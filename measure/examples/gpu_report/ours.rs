//! `Ours`: vkcompute's side of the dispatch workloads (one device, the
//! `axpb` kernel on a 1024-f32 buffer), shared by the dispatch and diag parts.
//!
//! The rows dispatch into one buffer on purpose (a race when unbarriered,
//! a chain when barriered), so their batches stay on hand-written barriers
//! (`manual`); the automatic-barrier rows are their twins
//! ([`Ours::record_chain_auto_warm`]).

use std::time::Instant;

use vkcompute::{BatchOptions, Buffer, Device, DeviceOptions, Kernel, Profiling};

use crate::us;

/// `options` with automatic barriers off: the rows' barriers are the ones
/// they write.
pub fn manual(options: BatchOptions) -> BatchOptions {
    options.with_auto_barriers(false)
}

const AXPB: &str = include_str!("../../../shaders/axpb.comp");
/// Elements per tiny dispatch (the floor's `ELEMENTS`).
pub const N: u32 = 1024;

/// One vkcompute device with the `axpb` kernel (`x = x * a + b`), its
/// buffers and push constants (a = 1, b = 1), created once per device.
pub struct Ours {
    /// The device.
    pub gpu: Device,
    pub(crate) k: Kernel,
    /// The N-element buffer every chained or repeated dispatch works on.
    pub x: Buffer<f32>,
    many: Buffer<f32>,
    pub(crate) pc: [u8; 12],
}

impl Ours {
    /// Creates the device with `options`, the kernel, and buffers for up to
    /// `steps` independent dispatches.
    pub fn new(options: DeviceOptions, steps: usize) -> vkcompute::Result<Ours> {
        let gpu = Device::with_options(options)?;
        let k = gpu.kernel_glsl(AXPB)?;
        let x = gpu.upload(&vec![0.0f32; N as usize])?;
        let many = gpu.alloc::<f32>(N as usize * steps)?;
        let mut pc = [0u8; 12];
        pc[..4].copy_from_slice(&1.0f32.to_le_bytes());
        pc[4..8].copy_from_slice(&1.0f32.to_le_bytes());
        pc[8..].copy_from_slice(&N.to_le_bytes());
        Ok(Ours {
            gpu,
            k,
            x,
            many,
            pc,
        })
    }

    fn record(&self, b: &mut vkcompute::Batch, n: usize, chain: bool) -> vkcompute::Result<()> {
        for i in 0..n {
            if chain {
                b.run_with_push_constants(&self.k, &[&self.x], N, &self.pc)?;
                b.barrier();
            } else {
                let off = i * N as usize;
                let slice = self.many.slice(off..off + N as usize)?;
                b.run_with_push_constants(&self.k, &[&slice], N, &self.pc)?;
            }
        }
        Ok(())
    }

    /// CPU µs per recorded dispatch: the same kernel on the same buffer, as
    /// the floor records it (pipeline and bindings unchanged between
    /// dispatches). The batch is dropped unsubmitted: without barriers the
    /// dispatches would race.
    pub fn record_cost(&self, n: usize, barrier: bool) -> vkcompute::Result<f64> {
        self.record_timed(0, n, barrier, false)
    }

    /// As [`Ours::record_cost`], but one dispatch (and the barrier, if
    /// asked) is recorded before the timer starts, so `vkBeginCommandBuffer`,
    /// the pipeline bind and the descriptor binding are outside the timing,
    /// as they are in the floor's `record_cost`; then `n` dispatches are
    /// timed. The batch is dropped unsubmitted.
    pub fn record_cost_warm(&self, n: usize, barrier: bool) -> vkcompute::Result<f64> {
        self.record_timed(1, n, barrier, false)
    }

    /// The twin of `record_cost_warm(n, true)` with automatic barriers: the
    /// same dependent chain on `x`, no barrier written, each found.
    pub fn record_chain_auto_warm(&self, n: usize) -> vkcompute::Result<f64> {
        self.record_timed(1, n, false, true)
    }

    /// Checks the automatic chain: `n` steps add `n` to every element, with
    /// `n - 1` barriers found.
    pub fn check_chain_auto(&self, n: usize) -> Result<(), String> {
        let e = |e: vkcompute::Error| e.to_string();
        self.x.write(0, &vec![0.0f32; N as usize]).map_err(e)?;
        let mut b = self.gpu.batch().map_err(e)?;
        for _ in 0..n {
            b.run_with_push_constants(&self.k, &[&self.x], N, &self.pc)
                .map_err(e)?;
        }
        let barriers = b.barrier_count();
        b.submit().map_err(e)?;
        let x = self.x.download().map_err(e)?;
        if barriers != n as u64 - 1 || x.iter().any(|&v| v != n as f32) {
            return Err(format!(
                "automatic chain: {barriers} barriers, x[0] = {}",
                x[0]
            ));
        }
        Ok(())
    }

    /// Records `untimed` then `n` timed dispatches (each followed by a
    /// barrier if asked; with automatic barriers if `auto`) into one batch:
    /// µs per timed dispatch.
    fn record_timed(
        &self,
        untimed: usize,
        n: usize,
        barrier: bool,
        auto: bool,
    ) -> vkcompute::Result<f64> {
        let options = BatchOptions::single_submit().with_auto_barriers(auto);
        let mut b = self.gpu.batch_with(options)?;
        let mut t = Instant::now();
        for i in 0..untimed + n {
            if i == untimed {
                t = Instant::now();
            }
            b.run_with_push_constants(&self.k, &[&self.x], N, &self.pc)?;
            if barrier {
                b.barrier();
            }
        }
        let e = t.elapsed();
        drop(b);
        Ok(us(e) / n as f64)
    }

    /// Wall µs per dispatch of `n` dispatches (chained or independent)
    /// recorded, submitted in one submission, and waited for.
    pub fn wall_single_submit(&self, n: usize, chain: bool) -> vkcompute::Result<f64> {
        let start = Instant::now();
        let mut b = self.gpu.batch_with(manual(BatchOptions::single_submit()))?;
        self.record(&mut b, n, chain)?;
        b.submit()?;
        Ok(us(start.elapsed()) / n as f64)
    }

    /// µs per dispatch: GPU time from timestamps (`profile`: recorded in
    /// full, then submitted once, so the GPU never waits for the CPU), or
    /// wall time of record + chunked submission + wait.
    pub fn run(&self, n: usize, chain: bool, profile: bool) -> vkcompute::Result<f64> {
        if profile {
            let mut b = self.gpu.batch_with(manual(
                BatchOptions::single_submit().with_profiling(Profiling::Batch),
            ))?;
            self.record(&mut b, n, chain)?;
            let t = b.submit_async()?;
            Ok(t.profile()?.total_ns / 1e3 / n as f64)
        } else {
            let start = Instant::now();
            let mut b = self.gpu.batch_with(manual(BatchOptions::default()))?;
            self.record(&mut b, n, chain)?;
            b.submit()?;
            Ok(us(start.elapsed()) / n as f64)
        }
    }

    /// One round trip split into phases: (new batch, record, submit, wait) in µs.
    pub fn round_trip_phases(&self) -> vkcompute::Result<[f64; 4]> {
        let t0 = Instant::now();
        let mut b = self.gpu.batch()?;
        let t1 = Instant::now();
        b.run_with_push_constants(&self.k, &[&self.x], N, &self.pc)?;
        let t2 = Instant::now();
        let ticket = b.submit_async()?;
        let t3 = Instant::now();
        ticket.wait()?;
        let t4 = Instant::now();
        Ok([us(t1 - t0), us(t2 - t1), us(t3 - t2), us(t4 - t3)])
    }

    /// Wall µs per dispatch of a chain recorded with chunking `first..max`.
    pub fn chain_wall_chunked(&self, n: usize, first: u32, max: u32) -> vkcompute::Result<f64> {
        let start = Instant::now();
        let mut b = self.gpu.batch_with(manual(BatchOptions {
            first_chunk: first,
            max_chunk: max,
            ..Default::default()
        }))?;
        self.record(&mut b, n, true)?;
        b.submit()?;
        Ok(us(start.elapsed()) / n as f64)
    }

    /// Wall µs of one round trip: new batch, record one dispatch, submit,
    /// wait (spin then block, the device's default).
    /// µs from submitting an already recorded one-dispatch batch to the
    /// end of its wait (`vkEndCommandBuffer`, submission, spin then block):
    /// the span the floor's round trip of a pre-recorded command buffer
    /// covers. Creating the batch and recording happen before the timer.
    pub fn submit_wait(&self) -> vkcompute::Result<f64> {
        let mut b = self.gpu.batch()?;
        b.run_with_push_constants(&self.k, &[&self.x], N, &self.pc)?;
        let t = Instant::now();
        b.submit()?;
        Ok(us(t.elapsed()))
    }

    /// µs for a whole one-dispatch round trip: new batch, record, submit,
    /// wait.
    pub fn round_trip(&self) -> vkcompute::Result<f64> {
        let t = Instant::now();
        let mut b = self.gpu.batch()?;
        b.run_with_push_constants(&self.k, &[&self.x], N, &self.pc)?;
        b.submit()?;
        Ok(us(t.elapsed()))
    }
}
