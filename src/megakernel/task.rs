//! Task slots: what one megakernel task is, in the words the GPU reads, and
//! its life cycle, enforced on the host.
//!
//! A [`TaskWorkItem`] is 16 `u32` words (64 bytes), the same layout as the
//! `MkTask` struct of the GLSL template (`shaders/megakernel/prelude.glsl`).
//! Its state word follows [`TaskState`]:
//!
//! ```text
//!   Empty ──▶ Ready ──▶ Running ──▶ Done ──▶ Empty
//!               │  ▲       │ ├──▶ Faulted ──▶ Ready | Empty
//!               ▼  │       │ ├──▶ Yielded ──▶ Running | Paused
//!             Paused ◀─────┘ └──▶ Requeued ─▶ Running | Paused
//! ```
//!
//! The device moves a task from a schedulable state (Ready, Yielded,
//! Requeued) to Running when a worker claims it, and to the state the
//! task's code returned when it ends; the host moves it with
//! [`TaskWorkItem::transition`].

use bytemuck::{Pod, Zeroable};

use crate::error::{Error, Result};

/// The life-cycle state of a task slot (its state word).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum TaskState {
    /// An unused slot.
    Empty = 0,
    /// Waiting to be claimed.
    Ready = 1,
    /// Claimed by a worker (only seen while a launch runs).
    Running = 2,
    /// Finished.
    Done = 3,
    /// Held back by the host; not scheduled until made Ready.
    Paused = 4,
    /// Gave up its worker part-way, to continue from its `continuation`.
    Yielded = 5,
    /// Asked to be run again (behind the tasks already queued).
    Requeued = 6,
    /// An unknown op, an out-of-bounds range, or the task's code said so;
    /// `fault` holds the reason.
    Faulted = 7,
}

impl TaskState {
    /// Every state, in state-word order.
    pub const ALL: [TaskState; 8] = [
        TaskState::Empty,
        TaskState::Ready,
        TaskState::Running,
        TaskState::Done,
        TaskState::Paused,
        TaskState::Yielded,
        TaskState::Requeued,
        TaskState::Faulted,
    ];

    /// The state a word names, if any.
    pub fn from_word(word: u32) -> Option<TaskState> {
        TaskState::ALL.get(word as usize).copied()
    }

    /// Whether a worker may claim a task in this state (Ready, Yielded,
    /// Requeued). Only schedulable tasks add lanes to a launch.
    pub fn is_schedulable(self) -> bool {
        matches!(
            self,
            TaskState::Ready | TaskState::Yielded | TaskState::Requeued
        )
    }

    /// The state's name.
    pub fn name(self) -> &'static str {
        match self {
            TaskState::Empty => "Empty",
            TaskState::Ready => "Ready",
            TaskState::Running => "Running",
            TaskState::Done => "Done",
            TaskState::Paused => "Paused",
            TaskState::Yielded => "Yielded",
            TaskState::Requeued => "Requeued",
            TaskState::Faulted => "Faulted",
        }
    }

    /// Whether the life cycle allows `self -> next` (see the module diagram).
    pub fn can_transition_to(self, next: TaskState) -> bool {
        use TaskState::*;
        matches!(
            (self, next),
            (Empty, Ready)
                | (Ready, Running)
                | (Ready, Paused)
                | (Ready, Empty)
                | (Running, Done)
                | (Running, Faulted)
                | (Running, Yielded)
                | (Running, Requeued)
                | (Running, Paused)
                | (Yielded, Running)
                | (Yielded, Paused)
                | (Requeued, Running)
                | (Requeued, Paused)
                | (Paused, Ready)
                | (Paused, Empty)
                | (Done, Empty)
                | (Faulted, Ready)
                | (Faulted, Empty)
        )
    }
}

/// Why the device marked a task Faulted (its `fault` word).
pub mod fault {
    /// No fault.
    pub const NONE: u32 = 0;
    /// The op is not one the kernel knows (`op >= MK_OP_COUNT`).
    pub const UNKNOWN_OP: u32 = 1;
    /// `input_offset + input_len` is past the end of the data buffer.
    pub const INPUT_OUT_OF_BOUNDS: u32 = 2;
    /// `output_offset + output_len` is past the end of the data buffer.
    pub const OUTPUT_OUT_OF_BOUNDS: u32 = 3;
    /// The task's own code returned `MK_FAULTED`.
    pub const TASK_REPORTED: u32 = 4;
    /// The task's code returned a word that is not an end state.
    pub const BAD_RETURN: u32 = 5;
    /// The driver cut a loop of the task's lanes short (llvmpipe ends an
    /// invocation's loops after 65,535 iterations in all), so its output
    /// may be incomplete; its worker stopped there. A task whose run can be
    /// repeated (it does not read what it writes) may be made Ready and
    /// launched again. The same code as resident mode's
    /// [`FAULT_LOOP_CUT`](crate::megakernel::resident::FAULT_LOOP_CUT).
    pub const LOOP_CUT: u32 = 6;
}

/// Number of parameter words in a [`TaskWorkItem`].
pub const TASK_PARAMS: usize = 4;

/// One task slot as the GPU reads it: 16 `u32` words (64 bytes),
/// `#[repr(C)]`, matching `MkTask` in the GLSL template. Offsets and lengths
/// count elements of the data buffer (binding 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct TaskWorkItem {
    /// A [`TaskState`] word.
    pub state: u32,
    /// Which of the kernel's ops runs (`0..MK_OP_COUNT`).
    pub op: u32,
    /// Higher runs first within a launch.
    pub priority: u32,
    /// The caller's id for the task (reported in faults).
    pub task_id: u32,
    /// The caller's parent task id (carried, not interpreted).
    pub parent_id: u32,
    /// First input element in the data buffer.
    pub input_offset: u32,
    /// Input elements read from `input_offset`.
    pub input_len: u32,
    /// First output element in the data buffer.
    pub output_offset: u32,
    /// Output elements written from `output_offset`.
    pub output_len: u32,
    /// Where a yielded task continues (the task's code reads and writes it).
    pub continuation: u32,
    /// How many times a worker ran the task (written by the device).
    pub runs: u32,
    /// Why it faulted (see [`fault`]), 0 otherwise (written by the device).
    pub fault: u32,
    /// Op-specific parameters.
    pub params: [u32; TASK_PARAMS],
}

impl TaskWorkItem {
    /// A Ready task running `op` over the given input and output ranges.
    pub fn ready(
        task_id: u32,
        op: u32,
        input: std::ops::Range<u32>,
        output: std::ops::Range<u32>,
    ) -> TaskWorkItem {
        TaskWorkItem {
            state: TaskState::Ready as u32,
            op,
            task_id,
            input_offset: input.start,
            input_len: input.end.saturating_sub(input.start),
            output_offset: output.start,
            output_len: output.end.saturating_sub(output.start),
            ..TaskWorkItem::zeroed()
        }
    }

    /// The same task with `priority`.
    pub fn with_priority(mut self, priority: u32) -> TaskWorkItem {
        self.priority = priority;
        self
    }

    /// The same task with `params`.
    pub fn with_params(mut self, params: [u32; TASK_PARAMS]) -> TaskWorkItem {
        self.params = params;
        self
    }

    /// The same task with a parent id.
    pub fn with_parent(mut self, parent_id: u32) -> TaskWorkItem {
        self.parent_id = parent_id;
        self
    }

    /// The task's state.
    ///
    /// # Errors
    /// [`Error::InvalidTaskState`] (with slot index 0; list-level callers
    /// name the slot) when the state word names no state.
    pub fn task_state(&self) -> Result<TaskState> {
        TaskState::from_word(self.state).ok_or(Error::InvalidTaskState {
            index: 0,
            word: self.state,
        })
    }

    /// Moves the task to `next` if the life cycle allows it.
    ///
    /// # Errors
    /// [`Error::InvalidTaskState`] for a bad state word,
    /// [`Error::IllegalTaskTransition`] for a move the life cycle forbids.
    pub fn transition(&mut self, next: TaskState) -> Result<()> {
        let from = self.task_state()?;
        if !from.can_transition_to(next) {
            return Err(Error::IllegalTaskTransition {
                task: self.task_id,
                from: from.name(),
                to: next.name(),
            });
        }
        self.state = next as u32;
        if next == TaskState::Ready {
            self.fault = fault::NONE;
        }
        Ok(())
    }
}

/// The state of every slot, or the first slot with a bad state word.
pub(crate) fn states_of(tasks: &[TaskWorkItem]) -> Result<Vec<TaskState>> {
    tasks
        .iter()
        .enumerate()
        .map(|(index, t)| {
            TaskState::from_word(t.state).ok_or(Error::InvalidTaskState {
                index,
                word: t.state,
            })
        })
        .collect()
}

/// The claim order for one launch: indices of schedulable slots, higher
/// priority first, then lower index.
pub(crate) fn claim_order(tasks: &[TaskWorkItem]) -> Result<Vec<u32>> {
    let states = states_of(tasks)?;
    let mut order: Vec<u32> = (0..tasks.len() as u32)
        .filter(|&i| states[i as usize].is_schedulable())
        .collect();
    order.sort_by_key(|&i| std::cmp::Reverse(tasks[i as usize].priority));
    Ok(order)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_is_sixteen_words() {
        assert_eq!(std::mem::size_of::<TaskWorkItem>(), 64);
        assert_eq!(std::mem::align_of::<TaskWorkItem>(), 4);
    }

    #[test]
    fn state_words_round_trip_and_bad_words_are_rejected() {
        for (i, s) in TaskState::ALL.iter().enumerate() {
            assert_eq!(*s as u32, i as u32);
            assert_eq!(TaskState::from_word(i as u32), Some(*s));
        }
        assert_eq!(TaskState::from_word(8), None);
        assert_eq!(TaskState::from_word(u32::MAX), None);
        let t = TaskWorkItem {
            state: 99,
            ..TaskWorkItem::zeroed()
        };
        assert!(matches!(
            t.task_state(),
            Err(Error::InvalidTaskState { word: 99, .. })
        ));
    }

    #[test]
    fn schedulable_states() {
        use TaskState::*;
        let yes: Vec<_> = TaskState::ALL
            .iter()
            .filter(|s| s.is_schedulable())
            .copied()
            .collect();
        assert_eq!(yes, vec![Ready, Yielded, Requeued]);
    }

    #[test]
    fn transitions_follow_the_life_cycle() {
        use TaskState::*;
        let legal = [
            (Empty, Ready),
            (Ready, Running),
            (Running, Done),
            (Running, Yielded),
            (Yielded, Running),
            (Running, Requeued),
            (Requeued, Running),
            (Running, Faulted),
            (Faulted, Ready),
            (Ready, Paused),
            (Paused, Ready),
            (Done, Empty),
        ];
        for (a, b) in legal {
            assert!(a.can_transition_to(b), "{a:?} -> {b:?}");
        }
        let illegal = [
            (Empty, Done),
            (Done, Ready),
            (Done, Running),
            (Paused, Running),
            (Faulted, Done),
            (Ready, Done),
            (Empty, Running),
            (Yielded, Done),
        ];
        for (a, b) in illegal {
            assert!(!a.can_transition_to(b), "{a:?} -> {b:?}");
        }
        for s in TaskState::ALL {
            assert!(!s.can_transition_to(s), "{s:?} -> itself");
        }
    }

    #[test]
    fn transition_enforces_and_clears_fault() {
        let mut t = TaskWorkItem::ready(7, 0, 0..4, 4..8);
        assert!(matches!(
            t.transition(TaskState::Done),
            Err(Error::IllegalTaskTransition {
                task: 7,
                from: "Ready",
                to: "Done"
            })
        ));
        t.state = TaskState::Faulted as u32;
        t.fault = fault::UNKNOWN_OP;
        t.transition(TaskState::Ready).unwrap();
        assert_eq!(t.fault, 0);
        assert_eq!(t.task_state().unwrap(), TaskState::Ready);
    }

    #[test]
    fn claim_order_is_priority_then_index_and_skips_unschedulable() {
        let mk = |state: TaskState, prio| TaskWorkItem {
            state: state as u32,
            priority: prio,
            ..TaskWorkItem::zeroed()
        };
        let tasks = [
            mk(TaskState::Ready, 1),
            mk(TaskState::Done, 9),
            mk(TaskState::Yielded, 5),
            mk(TaskState::Paused, 9),
            mk(TaskState::Requeued, 1),
            mk(TaskState::Ready, 5),
            mk(TaskState::Faulted, 9),
            mk(TaskState::Empty, 9),
            mk(TaskState::Running, 9),
        ];
        assert_eq!(claim_order(&tasks).unwrap(), vec![2, 5, 0, 4]);
        let mut bad = tasks.to_vec();
        bad[4].state = 8;
        assert!(matches!(
            claim_order(&bad),
            Err(Error::InvalidTaskState { index: 4, word: 8 })
        ));
    }
}
