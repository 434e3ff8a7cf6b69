//! Host transfers: writing, reading and zeroing a buffer from the host.
//!
//! Every transfer first makes sure no submitted GPU work still uses the
//! buffer: a mapped transfer waits for the buffer's last use on the host;
//! a staged transfer makes its copy wait on the GPU (a barrier on the same
//! queue, and a semaphore wait on the timeline of every other queue that
//! used the buffer: the compute queue when copies run on a transfer-only
//! queue, and stream queues). Staged transfers larger than one staging buffer
//! alternate between two, so the host fills (or drains) one while the GPU
//! copies the other. Transfers return once the data is in place.
//!
//! Every transfer holds the buffer's host lock ([`crate::host_lock`]) from
//! its wait to its last byte, on either path: reads shared, writes and
//! zeroing exclusive. Two threads writing one buffer (through clones)
//! therefore apply whole writes one after the other, and a read sees the
//! buffer before or after each write, never in between.

use std::ops::Range;

use ash::vk;

use super::BufferInner;
use crate::barrier;
use crate::device::{DeviceInner, Garbage};
use crate::error::Result;
use crate::host_lock::Access;
use crate::memory::HostPath;
use crate::queue::{SemaphoreWait, WaitList};
use crate::recorder::{cmd_barrier, Recorder};
use crate::staging::StagingBuffer;

/// Writes `data` at byte `offset` of `buf`.
pub(crate) fn write_bytes(buf: &BufferInner, offset: u64, data: &[u8]) -> Result<()> {
    let d = &*buf.dev;
    d.sticky.check()?;
    buf.held.settle("Buffer::write")?;
    let _host = buf.host.acquire(Access::Write, "write")?;
    match (buf.write_path, buf.mapped()) {
        (HostPath::Mapped, Some(ptr)) => {
            d.wait_mark(buf.last_use.mark(), None)?;
            // SAFETY: the range lies inside the mapped buffer (callers check
            // it against the buffer's length), no GPU work uses the buffer
            // (waited above) and no other host thread touches its bytes
            // (the exclusive host lock is held).
            unsafe {
                std::ptr::copy_nonoverlapping(
                    data.as_ptr(),
                    ptr.as_ptr().add(offset as usize),
                    data.len(),
                );
            }
            Ok(())
        }
        _ => staged_write(d, buf, offset, data),
    }
}

/// Reads `out.len()` bytes at byte `offset` of `buf`.
pub(crate) fn read_bytes(buf: &BufferInner, offset: u64, out: &mut [u8]) -> Result<()> {
    let d = &*buf.dev;
    d.sticky.check()?;
    buf.held.settle("Buffer::download")?;
    let _host = buf.host.acquire(Access::Read, "download")?;
    match (buf.read_path, buf.mapped()) {
        (HostPath::Mapped, Some(ptr)) => {
            d.wait_mark(buf.last_use.mark(), None)?;
            // SAFETY: the range lies inside the mapped buffer; GPU writes to
            // it completed and were made visible to the host by the closing
            // barrier of their submission; host threads only read it while
            // the shared host lock is held.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    ptr.as_ptr().add(offset as usize),
                    out.as_mut_ptr(),
                    out.len(),
                );
            }
            Ok(())
        }
        _ => staged_read(d, buf, offset, out),
    }
}

/// Fills the whole buffer with zeros.
pub(crate) fn zero(buf: &BufferInner) -> Result<()> {
    let d = &*buf.dev;
    d.sticky.check()?;
    buf.held.settle("Buffer::zero")?;
    let _host = buf.host.acquire(Access::Write, "zero")?;
    match (buf.write_path, buf.mapped()) {
        (HostPath::Mapped, Some(ptr)) => {
            d.wait_mark(buf.last_use.mark(), None)?;
            // SAFETY: the mapping covers the whole buffer; no GPU use is
            // pending; the exclusive host lock is held.
            unsafe { std::ptr::write_bytes(ptr.as_ptr(), 0, buf.vk_size as usize) };
            Ok(())
        }
        _ => {
            let mut run = Run::start(d, buf)?;
            let r = run.submit(|dev, cb| {
                // SAFETY: `cb` is recording; the buffer is live and its size
                // is a multiple of 4 (WHOLE_SIZE covers it exactly).
                unsafe { dev.cmd_fill_buffer(cb, buf.raw, 0, vk::WHOLE_SIZE, 0) };
            });
            let fin = run.finish();
            r.map(|_| ()).and(fin)
        }
    }
}

/// Byte ranges of `len` bytes in pieces of at most `chunk`.
pub(crate) fn pieces(len: u64, chunk: u64) -> impl Iterator<Item = Range<u64>> {
    let chunk = chunk.max(1);
    (0..len.div_ceil(chunk)).map(move |i| i * chunk..((i + 1) * chunk).min(len))
}

fn take_slots(d: &DeviceInner, len: u64) -> Result<(u64, Vec<StagingBuffer>)> {
    let chunk = d.options.staging_buffer_size.max(4096).min(len);
    let count = if len > chunk { 2 } else { 1 };
    let mut slots = Vec::with_capacity(count);
    for _ in 0..count {
        match d.take_staging(chunk) {
            Ok(s) => slots.push(s),
            Err(e) => {
                for s in slots {
                    d.give_staging(s);
                }
                return Err(e);
            }
        }
    }
    Ok((chunk, slots))
}

/// Transfers (and staged pieces) at least this large copy on several host
/// threads.
pub(crate) const PARALLEL_MIN: u64 = 32 << 20;
/// Most host threads one transfer copies on.
pub(crate) const MAX_WORKERS: usize = 4;

/// Host threads for a copy of `len` bytes with `cores` available (pure).
pub(crate) fn workers_for(len: u64, cores: usize) -> usize {
    if len < PARALLEL_MIN {
        1
    } else {
        cores.clamp(1, MAX_WORKERS)
    }
}

pub(crate) fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Copies the staging buffer's first `dst.len()` bytes into `dst`, on
/// several threads for pieces of [`PARALLEL_MIN`] and more (a fresh `Vec` also faults its pages in
/// on those threads).
fn read_parallel(s: &StagingBuffer, dst: &mut [u8]) {
    let threads = workers_for(dst.len() as u64, cores());
    if threads <= 1 {
        return s.read(dst);
    }
    let chunk = dst.len().div_ceil(threads);
    std::thread::scope(|scope| {
        for (i, part) in dst.chunks_mut(chunk).enumerate() {
            scope.spawn(move || {
                // SAFETY: `part` is a disjoint piece of `dst`, written by this
                // thread only; its range `i * chunk..` lies in the staging
                // buffer (the whole `dst` does); the GPU copy into it
                // completed and was made visible to the host (the caller
                // waited for it).
                unsafe { s.read_at((i * chunk) as u64, part.as_mut_ptr(), part.len()) }
            });
        }
    });
}

/// Copies `src` into the staging buffer at byte 0, on several threads for
/// large pieces.
fn write_parallel(s: &mut StagingBuffer, src: &[u8]) {
    let threads = workers_for(src.len() as u64, cores());
    if threads <= 1 {
        return s.write(src);
    }
    let chunk = src.len().div_ceil(threads);
    let s = &*s;
    std::thread::scope(|scope| {
        for (i, part) in src.chunks(chunk).enumerate() {
            scope.spawn(move || {
                // SAFETY: each thread writes the disjoint range
                // `i * chunk..` (+ its length) of the buffer, inside it (the
                // whole `src` fits in the slot: pieces are at most its size);
                // no GPU copy reads the buffer while the host fills it (the
                // caller waited for the slot's previous copy).
                unsafe { s.write_at((i * chunk) as u64, part) }
            });
        }
    });
}

fn staged_write(d: &DeviceInner, buf: &BufferInner, offset: u64, data: &[u8]) -> Result<()> {
    let (chunk, mut slots) = take_slots(d, data.len() as u64)?;
    let mut run = Run::start(d, buf);
    let result = match &mut run {
        Err(_) => Ok(()),
        Ok(run) => (|| {
            let mut pending = [0u64; 2];
            for (i, r) in pieces(data.len() as u64, chunk).enumerate() {
                let slot = i % slots.len();
                run.wait(pending[slot])?;
                let s = &mut slots[slot];
                write_parallel(s, &data[r.start as usize..r.end as usize]);
                let region = vk::BufferCopy {
                    src_offset: 0,
                    dst_offset: offset + r.start,
                    size: r.end - r.start,
                };
                let src = s.raw;
                pending[slot] = run.submit(|dev, cb| {
                    // SAFETY: `cb` is recording; both buffers are live and
                    // the regions lie inside them.
                    unsafe { dev.cmd_copy_buffer(cb, src, buf.raw, &[region]) };
                })?;
            }
            Ok(())
        })(),
    };
    let last = run.as_ref().map_or(0, |r| r.last);
    let fin = run.and_then(Run::finish);
    return_slots(d, slots, last, result.is_ok() && fin.is_ok());
    result.and(fin)
}

fn staged_read(d: &DeviceInner, buf: &BufferInner, offset: u64, out: &mut [u8]) -> Result<()> {
    let (chunk, slots) = take_slots(d, out.len() as u64)?;
    let mut run = Run::start(d, buf);
    let result = match &mut run {
        Err(_) => Ok(()),
        Ok(run) => (|| {
            let total = out.len() as u64;
            let mut pending: [Option<(u64, Range<u64>)>; 2] = [None, None];
            let mut drain = |run: &mut Run<'_>,
                             p: Option<(u64, Range<u64>)>,
                             s: &StagingBuffer|
             -> Result<()> {
                if let Some((value, r)) = p {
                    run.wait(value)?;
                    read_parallel(s, &mut out[r.start as usize..r.end as usize]);
                }
                Ok(())
            };
            for (i, r) in pieces(total, chunk).enumerate() {
                let slot = i % slots.len();
                drain(run, pending[slot].take(), &slots[slot])?;
                let region = vk::BufferCopy {
                    src_offset: offset + r.start,
                    dst_offset: 0,
                    size: r.end - r.start,
                };
                let dst = slots[slot].raw;
                let value = run.submit(|dev, cb| {
                    // SAFETY: `cb` is recording; both buffers are live and
                    // the regions lie inside them.
                    unsafe { dev.cmd_copy_buffer(cb, buf.raw, dst, &[region]) };
                })?;
                pending[slot] = Some((value, r));
            }
            // `slots` may hold one buffer (a transfer of one chunk): zip, so
            // the unused second entry of `pending` never indexes past it.
            for (p, s) in pending.iter_mut().zip(&slots) {
                drain(run, p.take(), s)?;
            }
            Ok(())
        })(),
    };
    let last = run.as_ref().map_or(0, |r| r.last);
    let fin = run.and_then(Run::finish);
    return_slots(d, slots, last, result.is_ok() && fin.is_ok());
    result.and(fin)
}

/// Gives a transfer's staging buffers back. After an error (a device loss
/// seen while copies were still queued, say) the last submission may not
/// have completed: the buffers then wait in the deferred release behind it,
/// so neither the pool's next user nor a destroy touches a buffer a copy
/// still uses.
fn return_slots(d: &DeviceInner, slots: Vec<StagingBuffer>, last: u64, completed: bool) {
    for s in slots {
        if completed {
            d.give_staging(s);
        } else {
            d.release(d.transfer_mark(last), Garbage::Staging(s));
        }
    }
}

/// A sequence of staging submissions for one buffer.
struct Run<'a> {
    d: &'a DeviceInner,
    buf: &'a BufferInner,
    rec: Option<Recorder>,
    transfer_only: bool,
    /// What the first submission waits for (other queues' use of the buffer).
    waits: Option<WaitList>,
    last: u64,
}

impl<'a> Run<'a> {
    fn start(d: &'a DeviceInner, buf: &'a BufferInner) -> Result<Run<'a>> {
        let rec = d.transfer_recorder_pool().take(
            &d.raw,
            &d.sticky,
            &d.counters,
            d.completed_cached(),
            || d.completed(),
        )?;
        let transfer_only = d.has_transfer_queue();
        let own = d.transfer_queue().slot;
        let mut waits = WaitList::default();
        for (slot, v) in buf.last_use.mark().points() {
            if slot == own {
                continue;
            }
            if let Some(q) = d.queue(slot).filter(|q| v > q.completed_cached()) {
                waits.push(SemaphoreWait {
                    semaphore: q.timeline,
                    value: v,
                    stage: vk::PipelineStageFlags::TRANSFER,
                });
            }
        }
        Ok(Run {
            d,
            buf,
            rec: Some(rec),
            transfer_only,
            waits: Some(waits),
            last: 0,
        })
    }

    /// Records one command buffer (`record` between the staging barriers),
    /// submits it, and returns its timeline value.
    fn submit(&mut self, record: impl FnOnce(&ash::Device, vk::CommandBuffer)) -> Result<u64> {
        let d = self.d;
        let rec = self
            .rec
            .as_mut()
            .ok_or(crate::Error::DeviceLost { call: "staging" })?;
        let (cb, _) = rec.begin(&d.raw, &d.sticky, &d.counters)?;
        cmd_barrier(&d.raw, cb, barrier::staging_before(self.transfer_only));
        record(&d.raw, cb);
        cmd_barrier(&d.raw, cb, barrier::staging_after(self.transfer_only));
        // SAFETY: `cb` is in the recording state.
        unsafe { d.raw.end_command_buffer(cb) }
            .map_err(|r| d.sticky.fail("vkEndCommandBuffer", r))?;
        let waits = self.waits.take().unwrap_or_default();
        let order = crate::queue::Order {
            stages: vk::PipelineStageFlags::TRANSFER,
            own: 0,
            whole_queue: false,
            stream: None,
            after_stream: false,
            gate: None,
        };
        let value = d.transfer_queue().submit_ordered(
            &d.raw,
            &d.sticky,
            &[cb],
            waits.iter(),
            waits.len(),
            order,
        )?;
        d.counters
            .submissions
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.last = value;
        Ok(value)
    }

    /// Waits for one submitted value (0: nothing to wait for).
    fn wait(&self, value: u64) -> Result<()> {
        if value == 0 {
            return Ok(());
        }
        let d = self.d;
        d.transfer_queue()
            .wait(&d.raw, &d.sticky, value, None, d.options.wait_spin)
    }

    /// Waits for the last submission, records the buffer's use and retires
    /// the recorder.
    fn finish(mut self) -> Result<()> {
        let d = self.d;
        let waited = self.wait(self.last);
        if self.last > 0 {
            self.buf
                .last_use
                .used_on(d.transfer_queue().slot, self.last, true);
        }
        if let Some(rec) = self.rec.take() {
            d.transfer_recorder_pool()
                .retire(d.transfer_mark(self.last), rec);
        }
        waited
    }
}

impl Drop for Run<'_> {
    fn drop(&mut self) {
        // Reached only when `finish` was not called (an error path): park
        // the recorder behind whatever was submitted.
        if let Some(rec) = self.rec.take() {
            self.d
                .transfer_recorder_pool()
                .retire(self.d.transfer_mark(self.last), rec);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::pieces;

    #[test]
    fn pieces_tile_the_range() {
        assert_eq!(pieces(10, 4).collect::<Vec<_>>(), vec![0..4, 4..8, 8..10]);
        assert_eq!(pieces(8, 4).collect::<Vec<_>>(), vec![0..4, 4..8]);
        assert_eq!(pieces(3, 4).collect::<Vec<_>>(), vec![0..3]);
        assert_eq!(pieces(0, 4).count(), 0);
    }
}
