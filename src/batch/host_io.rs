//! Host reads and writes that belong to a batch: [`Batch::write`],
//! [`Batch::upload`] and [`Batch::read`] record GPU commands, so they take effect exactly where
//! they were recorded among the batch's commands, however the batch is cut
//! into chunks ([`BatchOptions`](crate::BatchOptions)).
//!
//! A write of at most 64 KiB at 4-byte granularity travels inside the
//! command buffer (`vkCmdUpdateBuffer`); anything else is copied from a
//! host-visible staging buffer made for it and kept alive by the batch until
//! the chunk holding the copy completes. A read copies into a host-visible
//! buffer that the returned [`Readback`] owns. Each is ordered against the
//! commands recorded before and after it that touch the bytes it writes or
//! reads: by hazard tracking, as a copy is, with
//! [`BatchOptions::auto_barriers`](crate::BatchOptions::auto_barriers) on
//! (the default); otherwise as if [`Batch::barrier`] stood on both sides.

use std::ops::RangeBounds;

use ash::vk;
use bytemuck::Pod;

use super::Batch;
use crate::barrier::Stage;
use crate::buffer::transfer;
use crate::buffer::{Buffer, GpuBuf};
use crate::device::Device;
use crate::error::{Error, Result};
use crate::memory::Memory;

/// Largest write recorded inline (`vkCmdUpdateBuffer`'s limit).
const INLINE_MAX: usize = 65536;

impl Batch {
    /// Writes `data` into `dst` starting at element `offset`, as a command
    /// of the batch: commands recorded before it do not see the data,
    /// commands recorded after it do, whatever the chunking
    /// ([`BatchOptions`](crate::BatchOptions)). Compare
    /// [`Buffer::write`], which acts when it is called (see the crate
    /// guide's "Ordering" section). The data is copied now; `data` may be
    /// reused at once.
    pub fn write<T: Pod>(
        &mut self,
        dst: &Buffer<T>,
        offset: usize,
        data: &[T],
    ) -> Result<&mut Self> {
        self.usable()?;
        let end = (offset as u64).saturating_add(data.len() as u64);
        if end > dst.len() as u64 {
            return Err(Error::OutOfRange {
                what: "Batch::write",
                start: offset as u64,
                end,
                len: dst.len() as u64,
            });
        }
        let t = dst.view();
        self.check_own(&t, "Batch::write")?;
        if data.is_empty() {
            return Ok(self);
        }
        let bytes: &[u8] = bytemuck::cast_slice(data);
        let at = offset as u64 * std::mem::size_of::<T>() as u64;
        let inline = bytes.len() <= INLINE_MAX && bytes.len() % 4 == 0 && at % 4 == 0;
        // Made before recording starts, so a failure leaves nothing recorded.
        let staging = if inline {
            None
        } else {
            let dev = Device {
                inner: self.dev.clone(),
            };
            let s =
                Buffer::<u8>::create(&dev, bytes.len() as u64, Memory::HostVisible, "batch write")?;
            transfer::write_bytes(&s.inner, 0, bytes)?;
            Some(s)
        };
        let bytes_at = t.offset + at..t.offset + at + bytes.len() as u64;
        self.ordered_around(|b| b.track_views(Stage::Transfer, &[(&t, bytes_at, true)]))?;
        self.begin_command(Stage::Transfer, true)?;
        self.keep_view(&t, true);
        let cb = self.cb;
        let raw = &self.dev.raw;
        match &staging {
            None => {
                // SAFETY: `cb` is recording outside a render pass; the range
                // lies inside the live buffer (checked), offset and size are
                // multiples of 4 and the size is at most 65536 bytes.
                unsafe { raw.cmd_update_buffer(cb, t.inner.raw, at, bytes) };
            }
            Some(s) => {
                let region = vk::BufferCopy {
                    src_offset: 0,
                    dst_offset: at,
                    size: bytes.len() as u64,
                };
                // SAFETY: `cb` is recording; both buffers are live (the
                // staging buffer is kept below until the chunk completes)
                // and the regions lie inside them.
                unsafe { raw.cmd_copy_buffer(cb, s.inner.raw, t.inner.raw, &[region]) };
            }
        }
        if let Some(s) = &staging {
            self.keep_view(&s.view(), false);
        }
        self.end_command("write")?;
        self.ordered_after();
        Ok(self)
    }

    /// A new device-local buffer holding `data`, filled as a command of the
    /// batch ([`Batch::write`]): commands recorded after this call see the
    /// data. Host reads of the buffer see it once the batch is submitted;
    /// before that (or if the batch is dropped unsubmitted) its contents
    /// are unspecified.
    pub fn upload<T: Pod>(&mut self, data: &[T]) -> Result<Buffer<T>> {
        self.usable()?;
        let dev = Device {
            inner: self.dev.clone(),
        };
        let buf = Buffer::<T>::create(
            &dev,
            data.len() as u64,
            Memory::DeviceLocal,
            "Batch::upload",
        )?;
        self.write(&buf, 0, data)?;
        Ok(buf)
    }

    /// Reads all of `src` as a command of the batch: the returned
    /// [`Readback`] yields the contents as they were after the commands
    /// recorded before this call and before those recorded after it, once
    /// the batch has been submitted and completes.
    pub fn read<T: Pod>(&mut self, src: &Buffer<T>) -> Result<Readback<T>> {
        self.read_range(src, ..)
    }

    /// Like [`Batch::read`], for elements `range` of `src`.
    pub fn read_range<T: Pod>(
        &mut self,
        src: &Buffer<T>,
        range: impl RangeBounds<usize>,
    ) -> Result<Readback<T>> {
        self.usable()?;
        let view = src.slice(range)?;
        let s = view.view();
        self.check_own(&s, "Batch::read")?;
        let dev = Device {
            inner: self.dev.clone(),
        };
        let out = Buffer::<T>::create(&dev, view.len() as u64, Memory::HostVisible, "batch read")?;
        let o = out.view();
        self.ordered_around(|b| {
            b.track_views(Stage::Transfer, &[(&s, s.offset..s.offset + s.size, false)])
        })?;
        self.begin_command(Stage::Transfer, true)?;
        self.keep_view(&s, false);
        self.keep_view(&o, true);
        let region = vk::BufferCopy {
            src_offset: s.offset,
            dst_offset: 0,
            size: s.size,
        };
        // SAFETY: `cb` is recording; both buffers are live (kept by the
        // batch until the chunk completes) and the regions lie inside them.
        unsafe {
            self.dev
                .raw
                .cmd_copy_buffer(self.cb, s.inner.raw, o.inner.raw, &[region])
        };
        self.end_command("read")?;
        self.ordered_after();
        Ok(Readback { buf: out })
    }

    /// Orders a host write or read before it is recorded: by tracking its
    /// bytes (`track`) with automatic barriers, else by a barrier request.
    fn ordered_around(&mut self, track: impl FnOnce(&mut Self) -> Result<()>) -> Result<()> {
        if self.auto {
            track(self)
        } else {
            self.tracker.barrier();
            Ok(())
        }
    }

    /// Orders a host write or read against what follows: a barrier
    /// request, with automatic barriers off (tracking orders it otherwise).
    fn ordered_after(&mut self) {
        if !self.auto {
            self.tracker.barrier();
        }
    }
}

/// Data a batch reads back ([`Batch::read`]): available once the batch
/// holding the read has been submitted and has completed. `Send + Sync`:
/// it may be waited on from another thread than the one that recorded it.
#[must_use = "a Readback holds the data the batch reads; call wait() to get it"]
pub struct Readback<T: Pod> {
    buf: Buffer<T>,
}

impl<T: Pod> std::fmt::Debug for Readback<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Readback")
            .field("len", &self.buf.len())
            .field("submitted", &self.is_submitted())
            .finish()
    }
}

impl<T: Pod> Readback<T> {
    /// Number of elements read.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// Always false: empty reads are refused.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Whether the command that fills it was submitted (it may still run,
    /// or be held back behind an open batch of its stream: then
    /// [`Readback::wait`] waits for that batch as [`crate::Ticket::wait`]
    /// does).
    pub fn is_submitted(&self) -> bool {
        self.buf.inner.held.any() || !self.buf.inner.last_use.mark().is_empty()
    }

    /// Waits for the read to complete and returns the elements.
    /// [`Error::NotSubmitted`] if its batch was not submitted (or was
    /// dropped before the chunk holding the read was).
    pub fn wait(self) -> Result<Vec<T>> {
        if !self.is_submitted() {
            return Err(Error::NotSubmitted {
                what: "Readback::wait",
            });
        }
        self.buf.download()
    }
}

const _: fn() = || {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Readback<u32>>();
};
