//! An op batch's launch reports: the bound flags its transformer kernels
//! raise (the embedding's token ids past the vocabulary, the KV append's
//! positions past the cache) read back per execute and per graph launch,
//! so that the launch's ticket returns [`OpsError::Flagged`] for them.
//!
//! At the end of every execute and graph recording that has flags, one
//! single-invocation kernel (`shaders/nn_flag_report.comp`) writes how
//! much each flag word grew since the previous launch into the launch's
//! entry of a host-visible ring; each launch takes its entry's number as
//! it is submitted (the kernel counts launches the same way on the GPU),
//! and its ticket's wait reads that entry.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::error::{Error, OpsError, Result};
use crate::ticket::LaunchReport;
use crate::{Batch, Buffer, Device, Memory};

/// Distinct flag words one op batch reports.
pub(crate) const MAX_FLAG_WORDS: usize = 4;
/// Launches whose reports the ring holds: a ticket waited after this many
/// later launches of its op batch completed finds its entry reused and
/// reports nothing.
const SLOTS: u32 = 1024;
/// Words per ring entry: the launch's number and a count per flag word.
const ENTRY: u32 = 1 + MAX_FLAG_WORDS as u32;

/// One flag word: its buffer (word 0 is counted) and the ops counting
/// into it, with what they count.
struct Word {
    buffer: Buffer<u32>,
    ops: Vec<(&'static str, &'static str)>,
}

/// The reports of one op batch (shared with the graphs it records).
pub(crate) struct FlagReport {
    gpu: Device,
    words: Mutex<Vec<Word>>,
    /// [launch counter, the last value seen of each word] (device).
    state: Buffer<u32>,
    /// `SLOTS` entries of `ENTRY` words (host-visible).
    ring: Buffer<u32>,
    /// Launches submitted so far (the next launch's number).
    next: AtomicU64,
}

impl FlagReport {
    /// Empty reports for an op batch on `gpu`.
    pub(crate) fn new(gpu: &Device) -> Result<FlagReport> {
        let ring = gpu.alloc_with::<u32>((SLOTS * ENTRY) as usize, Memory::HostVisible)?;
        ring.write(0, &vec![u32::MAX; (SLOTS * ENTRY) as usize])?;
        Ok(FlagReport {
            gpu: gpu.clone(),
            words: Mutex::new(Vec::new()),
            state: gpu.upload(&[0u32; ENTRY as usize])?,
            ring,
            next: AtomicU64::new(0),
        })
    }

    /// Reports `flag` (word 0) for `op`, which counts `what` into it: a
    /// buffer already reported is shared. More than [`MAX_FLAG_WORDS`]
    /// distinct buffers is an [`Error::OpShape`].
    pub(crate) fn note(
        &self,
        op: &'static str,
        what: &'static str,
        flag: &Buffer<u32>,
    ) -> Result<()> {
        let mut words = self.words.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(w) = words
            .iter_mut()
            .find(|w| Arc::ptr_eq(&w.buffer.inner, &flag.inner))
        {
            if !w.ops.iter().any(|(o, _)| *o == op) {
                w.ops.push((op, what));
            }
            return Ok(());
        }
        if words.len() == MAX_FLAG_WORDS {
            return Err(Error::OpShape {
                op,
                detail: format!(
                    "flag is a {}th distinct flag buffer in this op batch; its launch reports take at most {MAX_FLAG_WORDS} (share a flag buffer between ops)",
                    MAX_FLAG_WORDS + 1
                ),
            });
        }
        words.push(Word {
            buffer: flag.clone(),
            ops: vec![(op, what)],
        });
        Ok(())
    }

    /// Whether any flag is reported.
    pub(crate) fn is_empty(&self) -> bool {
        self.words
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_empty()
    }

    /// Records the report of a launch at the end of `batch`, after a
    /// barrier (the flags' counts come from the steps before it).
    pub(crate) fn record(&self, batch: &mut Batch) -> Result<()> {
        let words = self.words.lock().unwrap_or_else(|p| p.into_inner());
        let k = crate::builtins::get(&self.gpu.inner, "nn_flag_report", &[])?;
        let mut bufs: Vec<&dyn crate::GpuBuf> = words.iter().map(|w| &w.buffer as _).collect();
        // Unreported slots bind the state buffer, which the kernel never
        // reads through them.
        bufs.resize(MAX_FLAG_WORDS, &self.state);
        bufs.push(&self.state);
        bufs.push(&self.ring);
        let n = words.len() as u32;
        batch.barrier();
        batch.run_configured(
            &k,
            &bufs,
            [1, 1, 1],
            Some(&super::super::words(&[0, 0, 0, 0, n, SLOTS])),
        )?;
        Ok(())
    }
}

impl LaunchReport for FlagReport {
    fn launched(&self) -> u64 {
        self.next.fetch_add(1, Ordering::Relaxed)
    }

    fn check(&self, token: u64) -> Result<()> {
        let base = (token % u64::from(SLOTS)) as usize * ENTRY as usize;
        let ring = self.ring.host_words()?;
        if u64::from(ring[base].load(Ordering::Acquire)) != token & u64::from(u32::MAX) {
            // Reused by a later launch (or never reached): nothing to say.
            return Ok(());
        }
        let counts: Vec<u32> = (1..ENTRY as usize)
            .map(|i| ring[base + i].load(Ordering::Relaxed))
            .collect();
        drop(ring);
        let words = self.words.lock().unwrap_or_else(|p| p.into_inner());
        let grew: Vec<(&Word, u32)> = words.iter().zip(counts).filter(|(_, c)| *c > 0).collect();
        let Some(((first, count), rest)) = grew.split_first() else {
            return Ok(());
        };
        let (op, what) = first.ops[0];
        let mut detail = what.to_string();
        for (o, w) in first.ops.iter().skip(1) {
            detail += &format!(" (its flag also counts {o}'s {w})");
        }
        for (w, c) in rest {
            detail += &format!("; {}: {c} {}", w.ops[0].0, w.ops[0].1);
        }
        Err(Error::Ops(OpsError::Flagged {
            op,
            count: u64::from(*count),
            detail,
        }))
    }
}
