//! How a batch records and submits: chunking, profiling and automatic
//! barriers ([`BatchOptions`]).

use crate::profile::Profiling;

/// How a batch records and submits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchOptions {
    /// Submit what is recorded once this many commands are in the batch,
    /// then keep recording (0: record everything, submit once).
    pub first_chunk: u32,
    /// Later chunks double in length up to this many commands.
    pub max_chunk: u32,
    /// GPU timestamps to record.
    pub profiling: Profiling,
    /// Find the barriers the commands need (on by default): each command's
    /// reads and writes (a kernel's bindings by its reflection, read-only
    /// or written; a copy's source and destination; a fill's or host
    /// write's destination) are tracked by the byte ranges of the views
    /// bound, and a barrier is recorded before a command that reads bytes
    /// an earlier command wrote, or writes bytes an earlier command read or
    /// wrote, with no barrier between them; independent commands get none,
    /// and one buffer bound twice in one dispatch is not a hazard.
    /// [`Batch::barrier`](crate::Batch::barrier) keeps working (a barrier it makes is never
    /// doubled). Off: only [`Batch::barrier`](crate::Batch::barrier) orders commands (and
    /// [`Batch::write`](crate::Batch::write) / [`Batch::read`](crate::Batch::read) are ordered as if it stood on
    /// both sides of them), as a batch did before tracking existed.
    pub auto_barriers: bool,
    /// Keep a log of the barriers recorded and why
    /// ([`Batch::barrier_log`](crate::Batch::barrier_log)); off by default (the log allocates).
    pub record_plan: bool,
}

impl Default for BatchOptions {
    fn default() -> Self {
        BatchOptions {
            first_chunk: 16,
            max_chunk: 128,
            profiling: Profiling::Off,
            auto_barriers: true,
            record_plan: false,
        }
    }
}

impl BatchOptions {
    /// Options that record everything and submit once at the end.
    pub fn single_submit() -> Self {
        BatchOptions {
            first_chunk: 0,
            ..Default::default()
        }
    }

    /// These options with `profiling` set.
    pub fn with_profiling(mut self, profiling: Profiling) -> Self {
        self.profiling = profiling;
        self
    }

    /// These options with [`BatchOptions::auto_barriers`] set.
    pub fn with_auto_barriers(mut self, on: bool) -> Self {
        self.auto_barriers = on;
        self
    }

    /// These options with [`BatchOptions::record_plan`] set.
    pub fn with_record_plan(mut self, on: bool) -> Self {
        self.record_plan = on;
        self
    }
}
