//! The floor's dependent chain under each way Vulkan has of ordering one
//! dispatch after another (`measure/examples/barrier_floor.rs`): what the
//! driver charges per dependency, by the form the dependency is recorded
//! in. The library records every dependency as a `vkCmdPipelineBarrier`
//! with one global memory barrier ([`BarrierKind::Global`], the form of
//! [`Floor::chain_gpu`]); the others order the same work through
//! synchronization2, a buffer barrier, a by-region dependency, or an event
//! set after one dispatch and waited on before the next. `ExecOnly` orders
//! execution without making the writes visible: a measurement of what the
//! memory half of a barrier costs, not a correct way to chain.

use std::time::Duration;

use ash::vk;
use vk::{
    AccessFlags as A, AccessFlags2 as A2, PipelineStageFlags as S, PipelineStageFlags2 as S2,
};

use super::{push, Floor, ELEMENTS};

/// How [`Floor::chain_gpu_kind`] orders each dispatch after the one before.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BarrierKind {
    /// `vkCmdPipelineBarrier`, one global memory barrier (shader write →
    /// shader read | write): the library's form.
    Global,
    /// `vkCmdPipelineBarrier2`, one global memory barrier with the storage
    /// accesses only (storage write → storage read | write).
    Sync2,
    /// `vkCmdPipelineBarrier`, one buffer memory barrier over the buffer.
    Buffer,
    /// [`BarrierKind::Global`] with `VK_DEPENDENCY_BY_REGION_BIT`.
    ByRegion,
    /// `vkCmdPipelineBarrier` with no memory barrier: execution order only.
    ExecOnly,
    /// `vkCmdSetEvent` after the dispatch, `vkCmdWaitEvents` (with the
    /// global memory barrier) before the next: one event per dependency.
    Event,
    /// The same through `vkCmdSetEvent2` / `vkCmdWaitEvents2`.
    Event2,
}

impl BarrierKind {
    /// Every kind, in the order the example prints them.
    pub const ALL: [BarrierKind; 7] = [
        BarrierKind::Global,
        BarrierKind::Sync2,
        BarrierKind::Buffer,
        BarrierKind::ByRegion,
        BarrierKind::ExecOnly,
        BarrierKind::Event,
        BarrierKind::Event2,
    ];

    /// The kind's name on the command line and in the output.
    pub fn name(self) -> &'static str {
        match self {
            BarrierKind::Global => "global",
            BarrierKind::Sync2 => "sync2",
            BarrierKind::Buffer => "buffer",
            BarrierKind::ByRegion => "by-region",
            BarrierKind::ExecOnly => "exec-only",
            BarrierKind::Event => "event",
            BarrierKind::Event2 => "event2",
        }
    }

    /// The kind named `name`, if any.
    pub fn parse(name: &str) -> Option<BarrierKind> {
        BarrierKind::ALL.into_iter().find(|k| k.name() == name)
    }

    /// Whether the kind needs the `synchronization2` feature.
    pub fn needs_sync2(self) -> bool {
        matches!(self, BarrierKind::Sync2 | BarrierKind::Event2)
    }

    /// Whether the kind makes each dispatch's writes visible to the next
    /// (every kind but [`BarrierKind::ExecOnly`]).
    pub fn orders_memory(self) -> bool {
        self != BarrierKind::ExecOnly
    }
}

impl Floor {
    /// Whether `synchronization2` is enabled on the floor's device.
    pub fn has_sync2(&self) -> bool {
        self.sync2
    }

    /// `n` dependent dispatches (x = x + 1), each ordered after the one
    /// before by `kind`: (GPU time from timestamps, wall time from the
    /// start of recording to the end of the wait), and whether every `x[i]`
    /// went from i to i + n. Panics if `kind` needs `synchronization2`
    /// and the device lacks it, or if a kind that orders memory gave a
    /// wrong value.
    pub fn chain_gpu_kind(&mut self, n: usize, kind: BarrierKind) -> (Duration, Duration, bool) {
        assert!(n > 0, "floor: at least one dispatch");
        assert!(
            self.sync2 || !kind.needs_sync2(),
            "floor: {} needs synchronization2, which this device lacks",
            kind.name()
        );
        let events = self.events(
            if matches!(kind, BarrierKind::Event | BarrierKind::Event2) {
                n.saturating_sub(1)
            } else {
                0
            },
        );
        let pc = push(1.0, 1.0);
        let once = vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT;
        let (gpu, wall) = self.timed_record(once, |fl, cb| {
            for i in 0..n {
                fl.step(cb, &pc, false);
                if i + 1 < n {
                    fl.order(cb, kind, events.get(i).copied());
                }
            }
        });
        for e in events {
            // SAFETY: the events' only submission has completed.
            unsafe { self.dev.destroy_event(e, None) };
        }
        let x = self.read();
        assert_eq!(x.len(), ELEMENTS);
        let right = x.iter().enumerate().all(|(i, &v)| v == (i + n) as f32);
        assert!(
            right || !kind.orders_memory(),
            "floor: chain of {n} ordered by {}: wrong values",
            kind.name()
        );
        (gpu, wall, right)
    }

    /// `count` new (unsignaled) events, device-only.
    fn events(&self, count: usize) -> Vec<vk::Event> {
        let info = vk::EventCreateInfo::default().flags(if self.sync2 {
            vk::EventCreateFlags::DEVICE_ONLY
        } else {
            vk::EventCreateFlags::empty()
        });
        // SAFETY: `dev` is live; DEVICE_ONLY only with synchronization2.
        (0..count)
            .map(|_| ok!(unsafe { self.dev.create_event(&info, None) }))
            .collect()
    }

    /// Records the dependency of the next dispatch on the last by `kind`
    /// (`event`: this dependency's own event, for the event kinds).
    fn order(&self, cb: vk::CommandBuffer, kind: BarrierKind, event: Option<vk::Event>) {
        let d = &self.dev;
        let (cs, none) = (S::COMPUTE_SHADER, vk::DependencyFlags::empty());
        let mb = [vk::MemoryBarrier::default()
            .src_access_mask(A::SHADER_WRITE)
            .dst_access_mask(A::SHADER_READ | A::SHADER_WRITE)];
        let mb2 = [vk::MemoryBarrier2::default()
            .src_stage_mask(S2::COMPUTE_SHADER)
            .src_access_mask(A2::SHADER_STORAGE_WRITE)
            .dst_stage_mask(S2::COMPUTE_SHADER)
            .dst_access_mask(A2::SHADER_STORAGE_READ | A2::SHADER_STORAGE_WRITE)];
        let bb = [vk::BufferMemoryBarrier::default()
            .src_access_mask(A::SHADER_WRITE)
            .dst_access_mask(A::SHADER_READ | A::SHADER_WRITE)
            .src_queue_family_index(vk::QUEUE_FAMILY_IGNORED)
            .dst_queue_family_index(vk::QUEUE_FAMILY_IGNORED)
            .buffer(self.buffer)
            .size(vk::WHOLE_SIZE)];
        let dep2 = vk::DependencyInfo::default().memory_barriers(&mb2);
        let ev = || event.expect("floor: an event per dependency");
        // SAFETY: `cb` is recording on a compute queue, so every stage named
        // exists there; `synchronization2` is enabled for the kinds that use
        // its commands (checked by the caller); each event is set once and
        // waited on once, after its set, within this command buffer.
        unsafe {
            match kind {
                BarrierKind::Global => d.cmd_pipeline_barrier(cb, cs, cs, none, &mb, &[], &[]),
                BarrierKind::Sync2 => d.cmd_pipeline_barrier2(cb, &dep2),
                BarrierKind::Buffer => d.cmd_pipeline_barrier(cb, cs, cs, none, &[], &bb, &[]),
                BarrierKind::ByRegion => {
                    let by = vk::DependencyFlags::BY_REGION;
                    d.cmd_pipeline_barrier(cb, cs, cs, by, &mb, &[], &[])
                }
                BarrierKind::ExecOnly => d.cmd_pipeline_barrier(cb, cs, cs, none, &[], &[], &[]),
                BarrierKind::Event => {
                    d.cmd_set_event(cb, ev(), cs);
                    d.cmd_wait_events(cb, &[ev()], cs, cs, &mb, &[], &[]);
                }
                BarrierKind::Event2 => {
                    d.cmd_set_event2(cb, ev(), &dep2);
                    d.cmd_wait_events2(cb, &[ev()], std::slice::from_ref(&dep2));
                }
            }
        }
    }
}
