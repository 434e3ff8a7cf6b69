//! The driver floor (`measure/src/floor.rs`: the same dispatch
//! workloads in minimal hand-written ash), run inside `peers_report`'s own
//! process before the peers, so each peer is stated as a ratio to the floor
//! of its own process (host-side figures move by tens of percent between
//! processes on the GPU machine). One device at a time: the floor's is
//! destroyed before the first peer starts. Bandwidth rows are not part of
//! the floor.

use vkcompute_measure::floor;

use floor::diag::FloorDiag;
use floor::Floor;

use crate::{measure, us, Config, Fail, PeerReport, Workload};

const NOT_MEASURED: &str = "dispatch rows only";

/// Runs the floor's dispatch workloads: every result is checked by the
/// floor itself (it panics on a wrong value, which `run_peer` reports).
pub fn run(cfg: &Config) -> PeerReport {
    let mut r = PeerReport::new("floor", "ash (hand-written)");
    let mut fl = Floor::new();
    r.setup = fl.description.clone();
    let (warm, reps, steps) = (cfg.warm, cfg.reps, cfg.steps);
    let per = |d: std::time::Duration| Ok::<f64, Fail>(us(d) / steps as f64);
    for (w, barrier) in [
        (Workload::RecordDispatch, false),
        (Workload::RecordDispatchBarrier, true),
    ] {
        let v = measure(warm * 5, reps, || per(fl.record_cost(steps, barrier)));
        r.put(
            w,
            v,
            "push constants + vkCmdDispatch [+ vkCmdPipelineBarrier] × n into a command buffer \
             with pipeline and set bound, not submitted",
        );
    }
    let v = measure(warm, reps, || per(fl.chain_gpu(steps).0));
    r.put(
        Workload::ChainGpu,
        v,
        "timestamps around n dispatches with barriers",
    );
    let v = measure(warm, reps, || per(fl.chain_gpu(steps).1));
    r.put(
        Workload::ChainWall,
        v,
        "record all, one vkQueueSubmit, vkWaitSemaphores (timeline); result checked",
    );
    let v = measure(warm, reps, || per(fl.independent_gpu(steps).0));
    r.put(
        Workload::IndependentGpu,
        v,
        "timestamps around n dispatches, no barriers",
    );
    let v = measure(warm, reps, || per(fl.independent_gpu(steps).1));
    r.put(
        Workload::IndependentWall,
        v,
        "record all, one submission, blocking wait",
    );
    {
        let mut diag = FloorDiag::new(&fl);
        let v = measure(cfg.rt_warm, cfg.rt_reps, || {
            Ok(us(diag.round_trip_rerecord(&mut fl, false)))
        });
        r.put(
            Workload::RoundTripSpin,
            v,
            "reset pool, record one dispatch (pipeline + pre-written set), submit, spin on \
             the timeline counter",
        );
    }
    let v = measure(cfg.rt_warm, cfg.rt_reps, || Ok(us(fl.round_trip(false))));
    r.put(
        Workload::RoundTripBlocking,
        v,
        "submit a pre-recorded one-dispatch command buffer, vkWaitSemaphores",
    );
    for w in [
        Workload::SaxpyGpu,
        Workload::SaxpyWall,
        Workload::CopyGpu,
        Workload::CopyWall,
        Workload::Upload,
        Workload::Download,
    ] {
        r.na(w, NOT_MEASURED);
    }
    drop(fl);
    r
}
