//! A batch's hazard tracking ([`crate::hazard`]) and its barrier log: the
//! accesses of each command checked and noted, the barrier a hazard needs
//! recorded, and every barrier counted and, when asked, logged
//! ([`BatchOptions::record_plan`](crate::BatchOptions::record_plan)).

use std::ops::Range;
use std::sync::Arc;

use ash::vk;

use super::Batch;
use crate::barrier::{Masks, Stage};
use crate::buffer::BufView;
use crate::error::Result;
use crate::hazard::{command_index, Access, BarrierCause, Conflict, PlannedBarrier};
use crate::recorder::cmd_barrier;

impl Batch {
    /// Whether the batch finds its barriers
    /// ([`BatchOptions::auto_barriers`](crate::BatchOptions::auto_barriers)).
    pub fn auto_barriers(&self) -> bool {
        self.auto
    }

    /// Turns automatic barriers on or off for the commands recorded from
    /// now on (a graph recorder's way to choose, as it has no
    /// [`BatchOptions`](crate::BatchOptions)). Commands recorded while it was off are not
    /// tracked: order them against later ones with [`Batch::barrier`].
    pub fn set_auto_barriers(&mut self, on: bool) -> &mut Self {
        if on != self.auto {
            self.hazards.clear();
            self.auto = on;
        }
        self
    }

    /// Starts (or stops) logging the barriers recorded from now on
    /// ([`BatchOptions::record_plan`](crate::BatchOptions::record_plan));
    /// stopping keeps what was logged.
    pub fn set_record_plan(&mut self, on: bool) -> &mut Self {
        self.logging = on;
        self
    }

    /// The barriers recorded so far, in order, each with the command it
    /// precedes, why it was recorded (requested, or the hazard found: the
    /// earlier command, the buffer and bytes) and its stages and accesses.
    /// Empty unless [`BatchOptions::record_plan`](crate::BatchOptions::record_plan) (or
    /// [`Batch::set_record_plan`]) is on; the closing host barrier of a
    /// chunk the host reads through a mapping is not listed.
    pub fn barrier_log(&self) -> &[PlannedBarrier] {
        &self.plan
    }

    /// Barriers recorded so far between the batch's commands (logged or
    /// not; the closing host barriers of chunks are not counted).
    pub fn barrier_count(&self) -> u64 {
        self.barriers
    }
}

impl Batch {
    /// Checks a dispatch's bindings against what earlier commands touched
    /// (recording the barrier a hazard needs), then notes them: all are
    /// checked before any is noted, so bindings of one dispatch never
    /// conflict with each other. The bindings are read from what the
    /// dispatch just bound (`last_owner`, `last_infos`: the views of
    /// `bindings`, in order).
    #[inline(always)]
    pub(super) fn track_dispatch(
        &mut self,
        bindings: &[crate::reflect::BindingInfo],
    ) -> Result<()> {
        let access = |this: &Self, i: usize, info: &crate::reflect::BindingInfo| {
            let d = &this.last_infos[i];
            Access {
                owner: this.last_owner[i],
                start: d.offset,
                end: d.offset + d.range,
                write: !info.read_only,
            }
        };
        if let [info] = bindings {
            // One binding (the common case): one probe, no list.
            let a = access(self, 0, info);
            if let Some((c, key)) = self.hazards.track_one(Stage::Compute, &a, self.commands) {
                self.hazard_barrier(Stage::Compute, c, self.last_infos[0].buffer)?;
                self.hazards.note_one(key, &a, self.commands);
            }
            return Ok(());
        }
        self.hazards.start();
        for (i, info) in bindings.iter().enumerate() {
            let a = access(self, i, info);
            self.hazards.list(a);
        }
        self.track_listed(Stage::Compute, |b, j| b.last_infos[j].buffer)
    }

    /// As [`Batch::track_dispatch`], for a transfer's bytes of its views'
    /// buffers (each with whether it is written) at `stage`. Does nothing
    /// with automatic barriers off.
    pub(super) fn track_views(
        &mut self,
        stage: Stage,
        views: &[(&BufView<'_>, Range<u64>, bool)],
    ) -> Result<()> {
        if !self.auto {
            return Ok(());
        }
        self.hazards.start();
        for (v, r, write) in views {
            self.hazards.list(Access {
                owner: Arc::as_ptr(v.inner) as usize,
                start: r.start,
                end: r.end,
                write: *write,
            });
        }
        self.track_listed(stage, |_, j| views[j].0.inner.raw)
    }

    /// Checks the listed accesses of a command of `stage`, records the
    /// barrier a hazard needs (naming the buffer `raw` gives for the
    /// access), and notes them.
    #[inline(always)]
    fn track_listed(
        &mut self,
        stage: Stage,
        raw: impl Fn(&Self, usize) -> vk::Buffer,
    ) -> Result<()> {
        if let Some((c, j)) = self.hazards.check_listed(stage) {
            let buffer = raw(self, j);
            self.hazard_barrier(stage, c, buffer)?;
        }
        self.hazards.note_listed(self.commands);
        Ok(())
    }

    /// Records the barrier hazard `c` (on `buffer`) needs before a command
    /// of `stage`, opening a chunk first if none is open.
    #[cold]
    #[inline(never)]
    fn hazard_barrier(&mut self, stage: Stage, c: Conflict, buffer: vk::Buffer) -> Result<()> {
        if self.cb == vk::CommandBuffer::null() {
            self.open_chunk()?;
        }
        if let Some(m) = self.tracker.force(stage) {
            self.barriers += 1;
            if self.logging {
                let cause = BarrierCause::Hazard {
                    kind: c.kind,
                    earlier_command: command_index(self.commands, c.earlier_command),
                    buffer,
                    bytes: c.start..c.end,
                };
                self.log_plan(m, cause);
            }
            cmd_barrier(&self.dev.raw, self.cb, m);
        }
        self.hazards.resolve(stage);
        Ok(())
    }

    /// Counts a barrier about to be recorded, and logs it when asked to.
    pub(super) fn log_barrier(&mut self, m: Masks, cause: BarrierCause) {
        self.barriers += 1;
        if self.logging {
            self.log_plan(m, cause);
        }
    }

    /// Logs a barrier about to be recorded before the next command.
    #[cold]
    fn log_plan(&mut self, m: Masks, cause: BarrierCause) {
        self.plan.push(PlannedBarrier {
            before_command: self.commands,
            cause,
            src_stages: m.src_stage,
            dst_stages: m.dst_stage,
            src_access: m.src_access,
            dst_access: m.dst_access,
        });
    }
}
