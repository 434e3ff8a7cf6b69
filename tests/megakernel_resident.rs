//! Megakernel resident mode: the kernel keeps running while the host pushes
//! tasks into a host-visible ring and reads completions back, with no
//! submission per task; it stops on request or after an idle time.

mod common;
use common::*;

use std::time::{Duration, Instant};

use vkcompute::megakernel::{Megakernel, MegakernelConfig, TaskState, TaskWorkItem};
use vkcompute::Error;

/// op 0: out = a + b (input holds a then b).
const ADD: &str = r#"
#define MK_OP_COUNT 1
uint run_task(inout MkTask t, uint lane, uint lanes) {
    uint n = t.output_len;
    for (uint i = lane; i < n; i += lanes)
        mk_data[t.output_offset + i] = mk_data[t.input_offset + i] + mk_data[t.input_offset + n + i];
    return MK_DONE;
}
"#;

/// Measured here: a running lavapipe dispatch does see host writes to the
/// ring (the single-thread test passes there), but lavapipe ends a shader
/// invocation's loops after 65,535 iterations in all, so its polling worker
/// served about 640 of the 10,000 requests from 4 threads before it ended.
const LOOP_LIMIT: &str = "lavapipe ends a shader invocation's loops after 65,535 iterations in all: a polling resident kernel served ~640 of 10,000 requests from 4 threads there before it ended; this test runs on the GPU machine";

fn setup(n: u32) -> (Vec<f32>, Vec<TaskWorkItem>) {
    let mut rng = Rng::new(3);
    let mut d = rng.vec_f32(512);
    d.resize(512 + n as usize * 256, 0.0);
    let tasks = (0..n)
        .map(|i| TaskWorkItem::ready(i, 0, 0..512, 512 + i * 256..768 + i * 256))
        .collect();
    (d, tasks)
}

fn check_outputs(d: &[f32], got: &[f32], n: u32) {
    for t in 0..n as usize {
        for i in 0..256 {
            assert_eq!(
                got[512 + t * 256 + i],
                d[i] + d[256 + i],
                "task {t} element {i}"
            );
        }
    }
}

#[test]
fn pushed_tasks_are_served_and_the_kernel_stops_on_request() {
    let gpu = gpu();
    let n = 64u32;
    let (d, tasks) = setup(n);
    let data = gpu.upload(&d).unwrap();
    let c = MegakernelConfig {
        worker_count: 1,
        max_wall_time: Duration::from_secs(30),
        ..Default::default()
    };
    let mut mk = Megakernel::resident(&gpu, ADD, &c.workload, &data, 16).unwrap();
    let session = mk.start_resident(&c, Duration::from_secs(5)).unwrap();
    let mut served = 0;
    let mut cut = false;
    for t in &tasks {
        let k = session.push(t, Duration::from_secs(10)).unwrap();
        match session.wait(k, Duration::from_secs(10)) {
            Ok(done) => {
                assert_eq!(done.task_state().unwrap(), TaskState::Done);
                assert_eq!((done.task_id, done.runs), (t.task_id, 1));
                served += 1;
            }
            Err(Error::ResidentStopped { .. }) if is_lavapipe(&gpu) => {
                cut = true;
                break;
            }
            Err(e) => panic!("request {k}: {e}"),
        }
    }
    let r = session.stop().unwrap();
    if cut {
        // Where the limit strikes decides whether the worker still gets to
        // flag it (loop_cut) or ends at once; either way it served requests.
        assert!(served > 0 && r.done >= served, "{r:?}");
        skipped(format!(
            "{LOOP_LIMIT}: served {served} of {n} before it ended"
        ));
    } else {
        assert_eq!((r.done, r.faulted, r.claimed), (n, 0, n), "{r:?}");
        check_outputs(&d, &data.download().unwrap(), n);
    }
    assert_clean(&gpu);
}

#[test]
fn an_idle_kernel_ends_by_itself() {
    let gpu = gpu();
    let data = gpu.upload(&[0f32; 16]).unwrap();
    let c = MegakernelConfig {
        worker_count: 1,
        max_wall_time: Duration::from_secs(30),
        ..Default::default()
    };
    let mut mk = Megakernel::resident(&gpu, ADD, &c.workload, &data, 4).unwrap();
    let session = mk.start_resident(&c, Duration::from_millis(20)).unwrap();
    let t0 = Instant::now();
    while session.is_running().unwrap() {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "an idle resident kernel kept running"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    let r = session.stop().unwrap();
    assert_eq!(r.claimed, 0);
    if is_lavapipe(&gpu) {
        // It ended by itself; whether the idle time or the loop limit
        // ended it first is lavapipe's timing.
        skipped(format!("{LOOP_LIMIT} (idle end: {r:?})"));
    } else {
        assert!(r.workers_finished == 1 && !r.loop_cut, "{r:?}");
    }
    assert_clean(&gpu);
}

#[test]
fn four_host_threads_push_ten_thousand_tasks() {
    let gpu = gpu();
    if is_lavapipe(&gpu) {
        skipped(LOOP_LIMIT);
        return;
    }
    let n = 10_000u32;
    let (d, tasks) = setup(n);
    let data = gpu.upload(&d).unwrap();
    let mut c = MegakernelConfig {
        max_wall_time: Duration::from_secs(60),
        ..Default::default()
    };
    let mut mk = Megakernel::resident(&gpu, ADD, &c.workload, &data, 256).unwrap();
    c.worker_count = mk
        .residency_cap(c.workload.workgroup_size)
        .unwrap()
        .workers
        .min(32);
    let session = mk.start_resident(&c, Duration::from_secs(5)).unwrap();
    std::thread::scope(|s| {
        for chunk in tasks.chunks(tasks.len() / 4) {
            let session = &session;
            s.spawn(move || {
                for t in chunk {
                    let k = session.push(t, Duration::from_secs(10)).unwrap();
                    let done = session.wait(k, Duration::from_secs(10)).unwrap();
                    assert_eq!(done.task_state().unwrap(), TaskState::Done);
                    assert_eq!(done.task_id, t.task_id);
                }
            });
        }
    });
    let r = session.stop().unwrap();
    assert_eq!((r.done, r.faulted), (n, 0), "{r:?}");
    check_outputs(&d, &data.download().unwrap(), n);
    assert_clean(&gpu);
}
