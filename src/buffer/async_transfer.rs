//! Async transfers: [`Device::upload_async`] and [`Buffer::download_async`]
//! return before the GPU copies, on the transfer-only queue where the
//! adapter has one (else on the compute queue).
//!
//! Ordering with compute work is by semaphores, with no CPU wait: a batch
//! that uses an uploaded buffer waits (on the GPU) for the upload's
//! transfer-queue value, as it does for every buffer a transfer touched;
//! a download's first copy waits for the compute work that last used the
//! buffer; a later batch that uses the buffer waits for the download's
//! copies. Without a transfer queue, copies follow earlier work on the
//! compute queue through a pipeline barrier.
//!
//! Where the time goes, and the pipeline: a transfer from or into a user's
//! `Vec` is a host `memcpy` into (out of) mapped staging memory plus a DMA
//! copy between staging and the device-local buffer. The data is cut into
//! pieces of [`PIECE`] bytes, each its own submission, so the DMA of piece
//! i runs while the host copies piece i + 1 (upload), or the host drains
//! piece i while the DMA of later pieces runs (download). Large transfers
//! copy on up to [`MAX_WORKERS`] threads, since one core's `memcpy` (and
//! the page faults of a fresh `Vec`) is slower than the DMA. Staging covers
//! the whole transfer (so every copy is submitted before the call returns
//! and the buffer's last use is known); it comes from the device's pool and
//! goes back once the copies completed.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Instant;

use ash::vk;
use bytemuck::Pod;

use crate::barrier;
use crate::buffer::transfer::{self, cores, pieces, workers_for};
use crate::buffer::{Buffer, BufferInner};
use crate::device::{Device, DeviceInner, Garbage};
use crate::error::{Error, Result};
use crate::memory::{HostPath, Memory};
use crate::queue::SemaphoreWait;
use crate::reclaim::{UseMark, SLOT_COMPUTE};
use crate::recorder::{cmd_barrier, Recorder};
use crate::staging::StagingBuffer;
use crate::ticket::Ticket;
use crate::ticket_future::poll_points;

/// Bytes per copy submission.
pub(crate) const PIECE: u64 = 8 << 20;
/// Copy submissions of one transfer on the staging queue.
struct Copier<'a> {
    d: &'a DeviceInner,
    rec: Option<Recorder>,
    transfer_only: bool,
    /// What the first copy waits for on other queues (the buffer's earlier
    /// use; work on the copies' own queue is ordered by their barriers).
    waits: Vec<SemaphoreWait>,
    last: u64,
}

impl<'a> Copier<'a> {
    fn start(d: &'a DeviceInner, wait_for: UseMark) -> Result<Copier<'a>> {
        let rec = d.transfer_recorder_pool().take(
            &d.raw,
            &d.sticky,
            &d.counters,
            d.completed_cached(),
            || d.completed(),
        )?;
        let transfer_only = d.has_transfer_queue();
        Ok(Copier {
            d,
            rec: Some(rec),
            transfer_only,
            waits: {
                let own = d.transfer_queue().slot;
                wait_for
                    .points()
                    .filter(|&(slot, _)| slot != own)
                    .filter_map(|(slot, value)| {
                        d.queue(slot).map(|q| SemaphoreWait {
                            semaphore: q.timeline,
                            value,
                            stage: vk::PipelineStageFlags::TRANSFER,
                        })
                    })
                    .collect()
            },
            last: 0,
        })
    }

    /// Submits one `vkCmdCopyBuffer` between the staging barriers.
    fn copy(&mut self, src: vk::Buffer, dst: vk::Buffer, region: vk::BufferCopy) -> Result<u64> {
        let d = self.d;
        let rec = self
            .rec
            .as_mut()
            .ok_or(Error::DeviceLost { call: "staging" })?;
        let (cb, _) = rec.begin(&d.raw, &d.sticky, &d.counters)?;
        cmd_barrier(&d.raw, cb, barrier::staging_before(self.transfer_only));
        // SAFETY: `cb` is recording; both buffers are live (the caller holds
        // them until the returned value completes) and the region lies
        // inside both.
        unsafe { d.raw.cmd_copy_buffer(cb, src, dst, &[region]) };
        cmd_barrier(&d.raw, cb, barrier::staging_after(self.transfer_only));
        // SAFETY: `cb` is in the recording state.
        unsafe { d.raw.end_command_buffer(cb) }
            .map_err(|r| d.sticky.fail("vkEndCommandBuffer", r))?;
        let waits = std::mem::take(&mut self.waits);
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
            waits.iter().copied(),
            waits.len(),
            order,
        )?;
        d.counters.submissions.fetch_add(1, Ordering::Relaxed);
        self.last = value;
        Ok(value)
    }

    /// Records `buf`'s use by the copies submitted so far.
    fn mark_use(&self, buf: &BufferInner, writes: bool) {
        if self.last == 0 {
            return;
        }
        buf.last_use
            .used_on(self.d.transfer_queue().slot, self.last, writes);
    }

    /// The mark every submitted copy passes.
    fn mark(&self) -> UseMark {
        self.d.transfer_mark(self.last)
    }
}

impl Drop for Copier<'_> {
    fn drop(&mut self) {
        if let Some(rec) = self.rec.take() {
            self.d
                .transfer_recorder_pool()
                .retire(self.d.transfer_mark(self.last), rec);
        }
    }
}

/// Fills `staging` from `src` piece by piece on `workers` threads, calling
/// `submit` for each piece in order as soon as it is filled.
fn fill_and_submit(
    staging: &StagingBuffer,
    src: &[u8],
    ranges: &[Range<u64>],
    workers: usize,
    mut submit: impl FnMut(&Range<u64>) -> Result<()>,
) -> Result<()> {
    let fill = |r: &Range<u64>| {
        // SAFETY: each piece is filled by exactly one thread (claimed
        // through `next`, or the serial loop), and its copy is submitted
        // only after the fill.
        unsafe { staging.write_at(r.start, &src[r.start as usize..r.end as usize]) };
    };
    if workers <= 1 || ranges.len() <= 1 {
        for r in ranges {
            fill(r);
            submit(r)?;
        }
        return Ok(());
    }
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let done: Vec<AtomicBool> = ranges.iter().map(|_| AtomicBool::new(false)).collect();
    std::thread::scope(|s| {
        let work = || loop {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(r) = ranges.get(i) else { break };
            fill(r);
            done[i].store(true, Ordering::Release);
        };
        for _ in 1..workers {
            // A thread that cannot start leaves its share to the others.
            let _ = std::thread::Builder::new()
                .name("vkcompute-copy".into())
                .spawn_scoped(s, work);
        }
        let mut submitted = 0;
        let result = loop {
            if submitted == ranges.len() {
                break Ok(());
            }
            if done[submitted].load(Ordering::Acquire) {
                if let Err(e) = submit(&ranges[submitted]) {
                    break Err(e);
                }
                submitted += 1;
                continue;
            }
            // Copy a piece here too, or wait for the piece next in line.
            let i = next.fetch_add(1, Ordering::Relaxed);
            match ranges.get(i) {
                Some(r) => {
                    fill(r);
                    done[i].store(true, Ordering::Release);
                }
                None => std::thread::yield_now(),
            }
        };
        stop.store(true, Ordering::Relaxed);
        result
    })
}

impl Device {
    /// A device-local buffer holding a copy of `data`, and the ticket of
    /// the copy. Returns once `data` has been copied to staging memory and
    /// the GPU copies are submitted (on the transfer-only queue where the
    /// adapter has one); batches that use the buffer wait for the copy on
    /// the GPU, so the ticket needs no waiting before them. With a transfer
    /// queue, the ticket is an empty compute-queue submission that waits for
    /// the copy (later compute batches run after it). Where device-local
    /// memory is host-visible the data is written through the mapping and
    /// the ticket is already complete.
    pub fn upload_async<T: Pod>(&self, data: &[T]) -> Result<(Buffer<T>, Ticket)> {
        let d = &self.inner;
        d.sticky.check()?;
        let buf =
            Buffer::<T>::create(self, data.len() as u64, Memory::DeviceLocal, "upload_async")?;
        let bytes: &[u8] = bytemuck::cast_slice(data);
        if let (HostPath::Mapped, Some(_)) = (buf.inner.write_path, buf.inner.mapped()) {
            // A new buffer: no GPU work uses it, the write does not wait.
            transfer::write_bytes(&buf.inner, 0, bytes)?;
            return Ok((
                buf,
                Ticket::new(d.clone(), SLOT_COMPUTE, UseMark::default(), None),
            ));
        }
        let len = bytes.len() as u64;
        let staging = d.take_staging(len)?;
        let mut copier = match Copier::start(d, UseMark::default()) {
            Ok(c) => c,
            Err(e) => {
                d.give_staging(staging);
                return Err(e);
            }
        };
        let ranges: Vec<Range<u64>> = pieces(len, PIECE).collect();
        let (src, dst) = (staging.raw, buf.inner.raw);
        let filled = fill_and_submit(&staging, bytes, &ranges, workers_for(len, cores()), |r| {
            let region = vk::BufferCopy {
                src_offset: r.start,
                dst_offset: r.start,
                size: r.end - r.start,
            };
            copier.copy(src, dst, region).map(|_| ())
        });
        copier.mark_use(&buf.inner, true);
        let (mark, last) = (copier.mark(), copier.last);
        drop(copier);
        d.release(mark, Garbage::Staging(staging));
        filled?;
        // The copies' own queue: the transfer-only queue where there is one.
        let slot = d.transfer_queue().slot;
        let ticket = Ticket::new(d.clone(), slot, UseMark::at(slot, last), None);
        Ok((buf, ticket))
    }
}

impl<T: Pod> Buffer<T> {
    /// Starts reading the buffer back: the GPU copies are submitted now
    /// (after the compute work that uses the buffer, on the GPU) and the
    /// returned [`Download`] waits for them ([`Download::wait`]) or is
    /// awaited. A batch submitted later that uses the buffer runs after the
    /// copies.
    pub fn download_async(&self) -> Result<Download<T>> {
        let inner = &self.inner;
        let d = &inner.dev;
        d.sticky.check()?;
        inner.held.settle("Buffer::download_async")?;
        let n = self.len();
        // Always a GPU copy, even where the buffer is mapped: it snapshots
        // the data in queue order, so work submitted after this call (which
        // waits for the copies) cannot change what the download returns.
        let len = inner.size;
        let staging = d.take_staging(len)?;
        let mut copier = match Copier::start(d, inner.last_use.mark()) {
            Ok(c) => c,
            Err(e) => {
                d.give_staging(staging);
                return Err(e);
            }
        };
        let mut submitted = Vec::new();
        let mut failed = None;
        for r in pieces(len, PIECE) {
            let region = vk::BufferCopy {
                src_offset: r.start,
                dst_offset: r.start,
                size: r.end - r.start,
            };
            match copier.copy(inner.raw, staging.raw, region) {
                Ok(v) => submitted.push((r, v)),
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        copier.mark_use(inner, false);
        let mark = copier.mark();
        drop(copier);
        if let Some(e) = failed {
            d.release(mark, Garbage::Staging(staging));
            return Err(e);
        }
        Ok(Download {
            dev: d.clone(),
            n,
            source: Source {
                staging: Some(staging),
                pieces: submitted,
                mark,
            },
            out: Some(Vec::with_capacity(n)),
            drained: 0,
            started: Instant::now(),
        })
    }
}

/// Copies into `staging`: byte range and staging-queue value of each.
struct Source {
    staging: Option<StagingBuffer>,
    pieces: Vec<(Range<u64>, u64)>,
    mark: UseMark,
}

/// A download in flight (from [`Buffer::download_async`]): [`Download::wait`]
/// blocks for the data; awaiting it resolves to the same `Vec`. Dropping it
/// unwaited frees its staging memory once the copies complete. `Send` and
/// `Sync` for `T: Send + Sync`; `Unpin`.
#[must_use = "a download does nothing unless waited on or awaited"]
pub struct Download<T: Pod> {
    dev: Arc<DeviceInner>,
    n: usize,
    source: Source,
    /// The result, filled piece by piece (staged) and handed out once.
    out: Option<Vec<T>>,
    /// Pieces copied into `out` so far.
    drained: usize,
    started: Instant,
}

impl<T: Pod> std::fmt::Debug for Download<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Download")
            .field("len", &self.n)
            .field("drained", &self.drained)
            .finish()
    }
}

/// A `*mut u8` handed to copy threads that write disjoint ranges.
#[derive(Clone, Copy)]
struct OutPtr(*mut u8);
// SAFETY: the threads that receive it write disjoint byte ranges of one
// allocation that outlives them (a scoped thread).
unsafe impl Send for OutPtr {}
// SAFETY: as above.
unsafe impl Sync for OutPtr {}

impl<T: Pod> Download<T> {
    /// Number of elements the download returns.
    pub fn len(&self) -> usize {
        self.n
    }

    /// Whether the download returns no elements (never: buffers are not empty).
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Whether the GPU copies have completed (never blocks).
    pub fn is_ready(&self) -> Result<bool> {
        let d = &self.dev;
        d.sticky.check()?;
        Ok(self.source.mark.reached(d.completed()?))
    }

    /// Blocks until the data is on the host and returns it. The pieces
    /// are copied out as their GPU copies complete, on several threads for
    /// large buffers.
    pub fn wait(mut self) -> Result<Vec<T>> {
        let d = self.dev.clone();
        d.sticky.check()?;
        let mut out = self
            .out
            .take()
            .ok_or(Error::Consumed { what: "Download" })?;
        let Source {
            staging, pieces, ..
        } = &mut self.source;
        let Some(st) = staging.as_ref() else {
            return Err(Error::Consumed { what: "Download" });
        };
        let rest = &pieces[self.drained..];
        let total: u64 = rest.iter().map(|(r, _)| r.end - r.start).sum();
        drain_parallel(
            &d,
            st,
            rest,
            out.as_mut_ptr().cast(),
            workers_for(total, cores()),
        )?;
        // A loss seen while the copies ran (e.g. by another thread).
        d.sticky.check()?;
        // SAFETY: every byte of the `n` elements was written: the pieces
        // tile the buffer, earlier ones drained by `poll`.
        unsafe { out.set_len(self.n) };
        if let Some(s) = staging.take() {
            d.give_staging(s);
        }
        Ok(out)
    }

    /// Blocks until the data is on the host and copies it into `out`, which
    /// must hold exactly [`Download::len`] elements: the form to use when
    /// the destination is reused, as a fresh `Vec` pays a page fault per
    /// 4 KiB page on first touch (often slower than the copy itself). The
    /// pieces are copied out as their GPU copies complete, on several
    /// threads for large buffers. On a length mismatch the download stays
    /// usable.
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] (naming both lengths), [`Error::Consumed`]
    /// after a successful wait or await, [`Error::DeviceLost`].
    pub fn wait_into(&mut self, out: &mut [T]) -> Result<()> {
        if out.len() != self.n {
            return Err(Error::LengthMismatch {
                what: "Download::wait_into",
                expected: self.n as u64,
                got: out.len() as u64,
            });
        }
        let d = self.dev.clone();
        d.sticky.check()?;
        let Some(drained_out) = self.out.take() else {
            return Err(Error::Consumed { what: "Download" });
        };
        let Source {
            staging, pieces, ..
        } = &mut self.source;
        let Some(st) = staging.as_ref() else {
            return Err(Error::Consumed { what: "Download" });
        };
        let out_bytes: &mut [u8] = bytemuck::cast_slice_mut(out);
        // Pieces an earlier poll already drained sit at the front of the
        // partial result.
        let done = pieces
            .get(self.drained)
            .map_or(out_bytes.len() as u64, |(r, _)| r.start) as usize;
        // SAFETY: the first `done` bytes of `drained_out`'s allocation were
        // written by the drained pieces (they tile the buffer from 0 in
        // order); `out_bytes` holds at least `done` bytes (its length is the
        // buffer's); the two do not overlap.
        unsafe {
            std::ptr::copy_nonoverlapping(
                drained_out.as_ptr().cast::<u8>(),
                out_bytes.as_mut_ptr(),
                done,
            )
        };
        drop(drained_out);
        let rest = &pieces[self.drained..];
        let total: u64 = rest.iter().map(|(r, _)| r.end - r.start).sum();
        drain_parallel(
            &d,
            st,
            rest,
            out_bytes.as_mut_ptr(),
            workers_for(total, cores()),
        )?;
        d.sticky.check()?;
        self.drained = pieces.len();
        if let Some(s) = staging.take() {
            d.give_staging(s);
        }
        Ok(())
    }

    /// One poll step of the staged source: drain the pieces whose copies
    /// completed, register for the next one.
    fn poll_pieces(&mut self, cx: &mut Context<'_>) -> Poll<Result<Vec<T>>> {
        let d = self.dev.clone();
        let Source {
            staging, pieces, ..
        } = &mut self.source;
        let Some(st) = staging.as_ref() else {
            return Poll::Ready(Err(Error::Consumed { what: "Download" }));
        };
        let Some(out) = self.out.as_mut() else {
            return Poll::Ready(Err(Error::Consumed { what: "Download" }));
        };
        let q = d.transfer_queue();
        while let Some((r, value)) = pieces.get(self.drained) {
            match poll_points(&d, &[(q.timeline, *value)], None, self.started, cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Ready(Ok(())) => {}
            }
            // SAFETY: `out` has capacity for the whole buffer and the range
            // lies inside it; the copy into staging completed (polled above)
            // and its closing barrier made it visible to the host.
            unsafe {
                st.read_at(
                    r.start,
                    out.as_mut_ptr().cast::<u8>().add(r.start as usize),
                    (r.end - r.start) as usize,
                )
            };
            self.drained += 1;
        }
        let mut v = self.out.take().unwrap_or_default();
        // SAFETY: the drained pieces tile all `n` elements.
        unsafe { v.set_len(self.n) };
        if let Some(s) = staging.take() {
            d.give_staging(s);
        }
        Poll::Ready(Ok(v))
    }
}

/// Waits for each piece's copy and copies it to `out` (at the piece's
/// byte offset), on `workers` threads taking pieces in order.
fn drain_parallel(
    d: &DeviceInner,
    st: &StagingBuffer,
    pieces: &[(Range<u64>, u64)],
    out: *mut u8,
    workers: usize,
) -> Result<()> {
    let q = d.transfer_queue();
    let out = OutPtr(out);
    let next = AtomicUsize::new(0);
    let failed: Mutex<Option<Error>> = Mutex::new(None);
    let work = || loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        let Some((r, value)) = pieces.get(i) else {
            break;
        };
        if let Err(e) = q.wait(&d.raw, &d.sticky, *value, None, d.options.wait_spin) {
            *failed.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
            next.store(pieces.len(), Ordering::Relaxed);
            break;
        }
        let o = out;
        // SAFETY: each piece is claimed by one thread; its range lies in
        // the output's capacity; the copy completed and was made visible
        // to the host by its closing barrier.
        unsafe {
            st.read_at(
                r.start,
                o.0.add(r.start as usize),
                (r.end - r.start) as usize,
            )
        };
    };
    if workers <= 1 || pieces.len() <= 1 {
        work();
    } else {
        std::thread::scope(|s| {
            for _ in 1..workers {
                let _ = std::thread::Builder::new()
                    .name("vkcompute-copy".into())
                    .spawn_scoped(s, work);
            }
            work();
        });
    }
    match failed.into_inner().unwrap_or_else(|p| p.into_inner()) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

// Nothing in a download is pinned: it is moved freely between polls.
impl<T: Pod> Unpin for Download<T> {}

impl<T: Pod> std::future::Future for Download<T> {
    type Output = Result<Vec<T>>;

    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<Vec<T>>> {
        let this = &mut *self;
        if let Err(e) = this.dev.sticky.check() {
            return Poll::Ready(Err(e));
        }
        this.poll_pieces(cx)
    }
}

impl<T: Pod> Drop for Download<T> {
    fn drop(&mut self) {
        if let Some(s) = self.source.staging.take() {
            self.dev.release(self.source.mark, Garbage::Staging(s));
        }
    }
}

const _: () = {
    const fn send_sync_unpin<T: Send + Sync + Unpin>() {}
    send_sync_unpin::<Download<f32>>();
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buffer::transfer::{MAX_WORKERS, PARALLEL_MIN};

    #[test]
    fn pieces_tile_the_range() {
        let pieces = |len, piece| pieces(len, piece).collect::<Vec<_>>();
        assert_eq!(pieces(10, 4), vec![0..4, 4..8, 8..10]);
        assert_eq!(pieces(8, 4), vec![0..4, 4..8]);
        assert_eq!(pieces(3, 4), vec![0..3]);
        assert!(pieces(0, 4).is_empty());
    }

    #[test]
    fn small_transfers_copy_on_one_thread() {
        assert_eq!(workers_for(PARALLEL_MIN - 1, 16), 1);
        assert_eq!(workers_for(PARALLEL_MIN, 16), MAX_WORKERS);
        assert_eq!(workers_for(PARALLEL_MIN, 2), 2);
        assert_eq!(workers_for(PARALLEL_MIN, 0), 1);
    }
}
