//! Barrier choice: which stage and access masks a batch's barriers carry.
//!
//! A batch records a barrier where the user asked for one
//! ([`Batch::barrier`](crate::Batch::barrier)), where hazard tracking found
//! one due ([`crate::hazard`], on unless
//! [`BatchOptions::auto_barriers`](crate::BatchOptions::auto_barriers) is
//! off), and at the end of a submitted chunk that used memory the host reads
//! through a mapping (a HOST barrier, making its writes visible there).
//! Ordering against earlier submissions comes from a timeline-semaphore
//! wait, not a barrier.
//!
//! What ran since the last barrier is kept per destination stage (compute,
//! transfer). A requested barrier records nothing yet: it is resolved when
//! the next command of a stage arrives, so that its masks name exactly the
//! stages that ran before the request (source) and the stage of the command
//! that follows (destination). A chain of dispatches therefore gets the
//! narrow compute→compute, shader-write → shader-read|write barrier; a copy
//! after a dispatch gets compute→transfer. A later command of another stage
//! gets its own barrier from the same request. Repeated `barrier()` calls
//! with nothing in between collapse into one. A barrier hazard tracking
//! needs is forced towards the one stage of the command that needs it, with
//! everything that stage was not yet ordered after as its source. All of
//! this is plain logic, tested here without a GPU.

use ash::vk;

/// The pipeline stage a recorded command runs in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stage {
    /// A compute dispatch.
    Compute,
    /// A copy or fill.
    Transfer,
}

impl Stage {
    fn bit(self) -> u8 {
        match self {
            Stage::Compute => 1,
            Stage::Transfer => 2,
        }
    }
}

/// A set of stages, as bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct StageSet(u8);

impl StageSet {
    const ALL: StageSet = StageSet(3);

    fn contains(self, s: Stage) -> bool {
        self.0 & s.bit() != 0
    }
    fn is_empty(self) -> bool {
        self.0 == 0
    }
    fn stage_mask(self) -> vk::PipelineStageFlags {
        let mut m = vk::PipelineStageFlags::empty();
        if self.contains(Stage::Compute) {
            m |= vk::PipelineStageFlags::COMPUTE_SHADER;
        }
        if self.contains(Stage::Transfer) {
            m |= vk::PipelineStageFlags::TRANSFER;
        }
        m
    }
    fn write_mask(self) -> vk::AccessFlags {
        let mut m = vk::AccessFlags::empty();
        if self.contains(Stage::Compute) {
            m |= vk::AccessFlags::SHADER_WRITE;
        }
        if self.contains(Stage::Transfer) {
            m |= vk::AccessFlags::TRANSFER_WRITE;
        }
        m
    }
}

/// The masks of one `vkCmdPipelineBarrier` with a single global memory barrier.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Masks {
    /// Source stages.
    pub src_stage: vk::PipelineStageFlags,
    /// Destination stages.
    pub dst_stage: vk::PipelineStageFlags,
    /// Source accesses (writes to make available).
    pub src_access: vk::AccessFlags,
    /// Destination accesses (to make visible).
    pub dst_access: vk::AccessFlags,
}

/// What a command of `stage` may access: a dispatch reads storage buffers
/// (`SHADER_READ`) and uniform buffers (`UNIFORM_READ`, a separate access
/// type that `SHADER_READ` does not cover) and writes storage buffers.
fn dst_access(stage: Stage) -> vk::AccessFlags {
    match stage {
        Stage::Compute => {
            vk::AccessFlags::SHADER_READ
                | vk::AccessFlags::UNIFORM_READ
                | vk::AccessFlags::SHADER_WRITE
        }
        Stage::Transfer => vk::AccessFlags::TRANSFER_READ | vk::AccessFlags::TRANSFER_WRITE,
    }
}

/// The barrier state of one batch.
///
/// Kept per destination stage (compute, transfer), each a nibble of one
/// byte: the stages that ran since the last barrier towards it (bits 0-1,
/// [`Stage::bit`]) and those of them that wrote (bits 2-3). A requested
/// barrier moves what is open into what is owed; the next command of a
/// stage gets a barrier with what that stage is owed as its source.
#[derive(Debug, Clone)]
pub(crate) struct Tracker {
    /// Per destination stage: run (and written) since its last barrier.
    open: u8,
    /// Per destination stage: what a requested barrier still owes it.
    owed: u8,
    /// Stages and writes in the current chunk, for its closing host barrier.
    chunk_stages: StageSet,
    chunk_writes: StageSet,
}

/// The nibble's shift of destination `stage`.
#[inline]
fn shift(stage: Stage) -> u32 {
    match stage {
        Stage::Compute => 0,
        Stage::Transfer => 4,
    }
}

/// A command of `stage` (writing or not), noted in both destinations.
#[inline]
fn spread(stage: Stage, writes: bool) -> u8 {
    let bit = stage.bit();
    let nibble = bit | if writes { bit << 2 } else { 0 };
    nibble | nibble << 4
}

impl Tracker {
    /// A tracker for a new batch. Ordering against earlier submissions is
    /// not a barrier's job: the batch's first submission waits on the
    /// queue's timeline for them (`Queue::submit`).
    pub(crate) fn new_batch() -> Self {
        Tracker {
            open: 0,
            owed: 0,
            chunk_stages: StageSet::default(),
            chunk_writes: StageSet::default(),
        }
    }

    /// The user asked for a barrier.
    pub(crate) fn barrier(&mut self) {
        self.owed |= self.open;
        self.open = 0;
    }

    /// A command of `stage` is about to be recorded; `writes` says whether it
    /// may write memory. Returns the barrier to record before it, if any.
    #[inline]
    pub(crate) fn command(&mut self, stage: Stage, writes: bool) -> Option<Masks> {
        // The common case, kept to a few bit operations: no barrier owed
        // to this stage.
        if self.owed & (0xF << shift(stage)) == 0 {
            self.note(stage, writes);
            return None;
        }
        self.command_slow(stage, writes)
    }

    #[inline]
    fn note(&mut self, stage: Stage, writes: bool) {
        self.open |= spread(stage, writes);
        let bit = stage.bit();
        self.chunk_stages.0 |= bit;
        if writes {
            self.chunk_writes.0 |= bit;
        }
    }

    /// Takes destination `stage`'s nibble out of `set`, as masks.
    fn take(set: &mut u8, stage: Stage) -> Option<Masks> {
        let sh = shift(stage);
        let nibble = (*set >> sh) & 0xF;
        *set &= !(0xF << sh);
        let stages = StageSet(nibble & 3);
        if stages.is_empty() {
            return None;
        }
        Some(Masks {
            src_stage: stages.stage_mask(),
            dst_stage: StageSet(stage.bit()).stage_mask(),
            src_access: StageSet(nibble >> 2).write_mask(),
            dst_access: dst_access(stage),
        })
    }

    fn command_slow(&mut self, stage: Stage, writes: bool) -> Option<Masks> {
        let masks = Tracker::take(&mut self.owed, stage);
        self.note(stage, writes);
        masks
    }

    /// A hazard needs a barrier before a command of `stage`: the barrier
    /// towards it, covering everything since its last one (what it is owed
    /// and what ran since). Called before [`Tracker::command`], which then
    /// finds nothing owed to `stage`.
    pub(crate) fn force(&mut self, stage: Stage) -> Option<Masks> {
        let sh = shift(stage);
        let mut both = (self.owed | self.open) & (0xF << sh);
        self.owed &= !(0xF << sh);
        self.open &= !(0xF << sh);
        Tracker::take(&mut both, stage)
    }

    /// Closes a chunk: the barrier that makes its writes visible to the host,
    /// if it recorded anything.
    pub(crate) fn end_chunk(&mut self) -> Option<Masks> {
        let stages = std::mem::take(&mut self.chunk_stages);
        let writes = std::mem::take(&mut self.chunk_writes);
        if stages.is_empty() {
            return None;
        }
        Some(Masks {
            src_stage: stages.stage_mask(),
            dst_stage: vk::PipelineStageFlags::HOST,
            src_access: writes.write_mask(),
            dst_access: vk::AccessFlags::HOST_READ,
        })
    }
}

/// Masks at the start of a staging submission: order its copy after earlier
/// work on the same queue. On a transfer-only queue only transfer stages
/// exist; compute work there is ordered by a semaphore wait instead.
pub(crate) fn staging_before(transfer_only: bool) -> Masks {
    let src = if transfer_only {
        StageSet(Stage::Transfer.bit())
    } else {
        StageSet::ALL
    };
    Masks {
        src_stage: src.stage_mask(),
        dst_stage: vk::PipelineStageFlags::TRANSFER,
        src_access: src.write_mask(),
        dst_access: dst_access(Stage::Transfer),
    }
}

/// Masks at the end of a staging submission: what the copy wrote becomes
/// visible to the host (downloads) and to later work on the same queue.
pub(crate) fn staging_after(transfer_only: bool) -> Masks {
    let dst = if transfer_only {
        StageSet(Stage::Transfer.bit())
    } else {
        StageSet::ALL
    };
    let mut dst_acc = vk::AccessFlags::HOST_READ | dst_access(Stage::Transfer);
    if !transfer_only {
        dst_acc |= dst_access(Stage::Compute);
    }
    Masks {
        src_stage: vk::PipelineStageFlags::TRANSFER,
        dst_stage: dst.stage_mask() | vk::PipelineStageFlags::HOST,
        src_access: vk::AccessFlags::TRANSFER_WRITE,
        dst_access: dst_acc,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vk::AccessFlags as A;
    use vk::PipelineStageFlags as S;

    fn compute_to_compute() -> Masks {
        Masks {
            src_stage: S::COMPUTE_SHADER,
            dst_stage: S::COMPUTE_SHADER,
            src_access: A::SHADER_WRITE,
            dst_access: A::SHADER_READ | A::UNIFORM_READ | A::SHADER_WRITE,
        }
    }

    #[test]
    fn batch_start_needs_no_barrier() {
        let mut t = Tracker::new_batch();
        assert_eq!(t.command(Stage::Compute, true), None);
        assert_eq!(t.command(Stage::Transfer, true), None);
        // A leading barrier with nothing before it is dropped.
        let mut t = Tracker::new_batch();
        t.barrier();
        assert_eq!(t.command(Stage::Compute, true), None);
    }

    #[test]
    fn chain_gets_the_narrow_compute_barrier() {
        let mut t = Tracker::new_batch();
        t.command(Stage::Compute, true);
        for _ in 0..10 {
            t.barrier();
            assert_eq!(t.command(Stage::Compute, true), Some(compute_to_compute()));
        }
    }

    #[test]
    fn no_barrier_unless_asked() {
        let mut t = Tracker::new_batch();
        t.command(Stage::Compute, true);
        for _ in 0..100 {
            assert_eq!(t.command(Stage::Compute, true), None);
        }
    }

    #[test]
    fn repeated_barriers_collapse_and_leading_ones_vanish() {
        let mut t = Tracker::new_batch();
        t.command(Stage::Compute, true);
        t.barrier();
        t.barrier();
        t.barrier();
        assert!(t.command(Stage::Compute, true).is_some());
        assert_eq!(t.command(Stage::Compute, true), None);
        // A barrier right after an emitted one with no command between adds nothing.
        t.barrier();
        assert!(t.command(Stage::Compute, false).is_some());
        t.barrier();
        t.barrier();
        assert!(t.command(Stage::Compute, false).is_some());
        assert_eq!(t.command(Stage::Compute, false), None);
    }

    #[test]
    fn read_only_work_makes_execution_only_barriers() {
        let mut t = Tracker::new_batch();
        t.command(Stage::Compute, false);
        t.barrier();
        let m = t.command(Stage::Compute, true).unwrap();
        assert_eq!(m.src_stage, S::COMPUTE_SHADER);
        assert_eq!(m.src_access, A::empty());
    }

    #[test]
    fn mixed_stages_are_each_covered() {
        let mut t = Tracker::new_batch();
        t.command(Stage::Transfer, true); // fill
        t.barrier();
        let m = t.command(Stage::Compute, true).unwrap();
        assert_eq!(m.src_stage, S::TRANSFER);
        assert_eq!(m.src_access, A::TRANSFER_WRITE);
        assert_eq!(m.dst_stage, S::COMPUTE_SHADER);
        // A copy after the same barrier needs its own edge from the fill.
        let m = t.command(Stage::Transfer, false).unwrap();
        assert_eq!(m.src_stage, S::TRANSFER);
        assert_eq!(m.dst_stage, S::TRANSFER);
        // The next barrier's source names both stages used since.
        t.barrier();
        let m = t.command(Stage::Compute, true).unwrap();
        assert_eq!(m.src_stage, S::COMPUTE_SHADER | S::TRANSFER);
        assert_eq!(m.src_access, A::SHADER_WRITE);
    }

    #[test]
    fn a_second_request_before_a_stage_runs_adds_to_what_it_is_owed() {
        let mut t = Tracker::new_batch();
        t.command(Stage::Transfer, true);
        t.barrier();
        t.command(Stage::Compute, true);
        t.barrier();
        // The transfer after both requests waits for the fill and the dispatch.
        let m = t.command(Stage::Transfer, false).unwrap();
        assert_eq!(m.src_stage, S::COMPUTE_SHADER | S::TRANSFER);
        assert_eq!(m.src_access, A::SHADER_WRITE | A::TRANSFER_WRITE);
    }

    #[test]
    fn forced_barriers_cover_one_stage_only() {
        let mut t = Tracker::new_batch();
        assert_eq!(t.force(Stage::Compute), None);
        t.command(Stage::Compute, true);
        assert_eq!(t.force(Stage::Compute), Some(compute_to_compute()));
        assert_eq!(t.command(Stage::Compute, true), None);
        // The transfer stage was not ordered: forcing it covers both
        // dispatches, with nothing further owed.
        let m = t.force(Stage::Transfer).unwrap();
        assert_eq!(m.src_stage, S::COMPUTE_SHADER);
        assert_eq!(m.dst_stage, S::TRANSFER);
        assert_eq!(t.command(Stage::Transfer, false), None);
        // A forced barrier settles what a request owed that stage.
        t.command(Stage::Compute, false);
        t.barrier();
        let m = t.force(Stage::Compute).unwrap();
        assert_eq!(m.src_stage, S::COMPUTE_SHADER | S::TRANSFER);
        assert_eq!(t.command(Stage::Compute, true), None);
        assert!(t.command(Stage::Transfer, true).is_some());
    }

    #[test]
    fn chunk_end_makes_writes_host_visible_once() {
        let mut t = Tracker::new_batch();
        assert_eq!(t.end_chunk(), None);
        t.command(Stage::Compute, true);
        t.command(Stage::Transfer, false);
        let m = t.end_chunk().unwrap();
        assert_eq!(m.src_stage, S::COMPUTE_SHADER | S::TRANSFER);
        assert_eq!(m.src_access, A::SHADER_WRITE);
        assert_eq!(m.dst_stage, S::HOST);
        assert_eq!(m.dst_access, A::HOST_READ);
        assert_eq!(t.end_chunk(), None);
    }

    #[test]
    fn staging_masks_respect_the_queue_kind() {
        assert!(staging_before(false).src_stage.contains(S::COMPUTE_SHADER));
        assert_eq!(staging_before(true).src_stage, S::TRANSFER);
        assert_eq!(staging_before(true).dst_stage, S::TRANSFER);
        assert!(staging_after(false)
            .dst_stage
            .contains(S::HOST | S::COMPUTE_SHADER));
        assert_eq!(staging_after(true).dst_stage, S::TRANSFER | S::HOST);
        assert!(!staging_after(true).dst_access.contains(A::SHADER_READ));
        assert_eq!(staging_after(true).src_access, A::TRANSFER_WRITE);
    }
}
