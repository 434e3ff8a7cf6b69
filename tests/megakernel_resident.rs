//! Resident megakernel: the host pushes tasks into a mapped ring while the
//! kernel runs, and reads completions back, with no submission per task.
mod common;

use std::time::{Duration, Instant};

use common::{assert_clean, gpu, is_lavapipe, skipped, Rng};
use vkcompute::megakernel::resident::{ExitReason, ResidentConfig, ResidentMegakernel};
use vkcompute::megakernel::{TaskState, TaskWorkItem};
use vkcompute::{Device, Error};

/// op 0: out = data[input] + data[params[0]] over output_len elements;
/// params[1] = the last element's sum, computed by lane 0 from the inputs
/// (so every completion carries a checkable result).
/// op 1: out = data[input] * uintBitsToFloat(params[0]).
const USER: &str = r#"
#define MK_OP_COUNT 2
uint run_task(inout MkTask t, uint lane, uint lanes) {
    uint n = t.output_len;
    if (n == 0u || t.input_len < n) return MK_FAULTED;
    if (t.op == 0u) {
        if (t.params[0] > uint(mk_data.length()) - n) return MK_FAULTED;
        for (uint i = lane; i < n; i += lanes)
            mk_data[t.output_offset + i] = mk_data[t.input_offset + i] + mk_data[t.params[0] + i];
        t.params[1] = floatBitsToUint(mk_data[t.input_offset + n - 1u] + mk_data[t.params[0] + n - 1u]);
    } else {
        float s = uintBitsToFloat(t.params[0]);
        for (uint i = lane; i < n; i += lanes)
            mk_data[t.output_offset + i] = mk_data[t.input_offset + i] * s;
        t.params[1] = floatBitsToUint(mk_data[t.input_offset + n - 1u] * s);
    }
    return MK_DONE;
}
"#;

const INPUT: usize = 4096;
/// Lanes per worker: one SIMD chunk of lavapipe (wider workers are refused
/// there; see `check_lanes`).
const LANES: u32 = 8;

fn quick() -> bool {
    std::env::var("VKCOMPUTE_QUICK").is_ok_and(|v| v == "1")
}

/// The task `i` (output region `i`, `len` elements) and its expected output.
fn task(i: u32, len: u32, input: &[f32]) -> (TaskWorkItem, Vec<f32>) {
    let a = (i * 7) % (INPUT as u32 - len);
    let b = (i * 13 + 5) % (INPUT as u32 - len);
    let out = INPUT as u32 + i * len;
    let op = i % 2;
    let scale = 0.5 + (i % 5) as f32;
    let t = TaskWorkItem::ready(i, op, a..a + len, out..out + len).with_params([
        if op == 0 { b } else { scale.to_bits() },
        0,
        0,
        0,
    ]);
    let want = (0..len as usize)
        .map(|k| {
            let x = input[a as usize + k];
            if op == 0 {
                x + input[b as usize + k]
            } else {
                x * scale
            }
        })
        .collect();
    (t, want)
}

fn setup(gpu: &Device, tasks: usize, len: usize) -> (vkcompute::Buffer<f32>, Vec<f32>) {
    let mut rng = Rng::new(10);
    let input = rng.vec_f32(INPUT);
    let mut all = input.clone();
    all.resize(INPUT + tasks * len, -1.0);
    (gpu.upload(&all).unwrap(), input)
}

/// Whether a running dispatch on this adapter sees host writes (and the
/// host its writes): start a kernel with a long idle budget, push one task
/// and wait for it. Returns the reason when it does not.
fn host_writes_reach_running_dispatch(gpu: &Device) -> Result<Duration, String> {
    let (data, input) = setup(gpu, 1, 16);
    let stream = gpu.stream().unwrap();
    let config = ResidentConfig {
        workgroup_size: LANES,
        idle_timeout: Duration::from_secs(2),
        max_wall_time: Duration::from_secs(5),
        ..Default::default()
    };
    let t0 = Instant::now();
    let mk = ResidentMegakernel::start(gpu, &stream, USER, &data, &config).unwrap();
    let start_took = t0.elapsed();
    let (t, want) = task(0, 16, &input);
    let mut last = String::new();
    for _ in 0..5 {
        // Push only once a worker runs, and count the answer only if that
        // same launch gave it (on lavapipe a launch may end at its loop
        // bound and the host start the next, which would see the task at
        // its start rather than while running).
        let until = Instant::now() + Duration::from_secs(5);
        while mk.workers_started() < mk.launches().unwrap() {
            if Instant::now() > until {
                break;
            }
            std::thread::yield_now();
        }
        let launches = mk.launches().unwrap();
        if mk.workers_started() < launches {
            return Err(format!(
                "no worker had started 5 s after start() returned ({start_took:?})"
            ));
        }
        let t1 = Instant::now();
        let h = mk.push(&t).unwrap();
        let c = match mk.wait(h) {
            Ok(c) => c,
            Err(e) => return Err(format!("a pushed task was not served while running: {e}")),
        };
        let round_trip = t1.elapsed();
        assert_eq!(c.state, TaskState::Done, "{c:?}");
        assert_eq!(f32::from_bits(c.params[1]), want[15]);
        if mk.launches().unwrap() == launches {
            let stats = mk.stop().unwrap();
            println!("start took {start_took:?}; {stats:?}");
            let out = data.read_range(INPUT..INPUT + 16).unwrap();
            assert_eq!(out, want);
            return Ok(round_trip);
        }
        last = format!("served only after a relaunch ({round_trip:?})");
    }
    Err(last)
}

#[test]
fn running_dispatch_sees_host_writes() {
    let gpu = gpu();
    match host_writes_reach_running_dispatch(&gpu) {
        Ok(rt) => println!(
            "{}: a running dispatch saw a host-pushed task and the host its completion ({rt:?})",
            gpu.info().name
        ),
        Err(why) => panic!("{}: {why}", gpu.info().name),
    }
    assert_clean(&gpu);
}

#[test]
fn serves_10000_tasks_from_4_threads() {
    let gpu = gpu();
    if let Err(why) = host_writes_reach_running_dispatch(&gpu) {
        skipped(format!("resident ring on {}: {why}", gpu.info().name));
        return;
    }
    let (n, len) = (10_000usize, if quick() { 16 } else { 64 });
    let (data, input) = setup(&gpu, n, len);
    let stream = gpu.stream().unwrap();
    let config = ResidentConfig {
        workgroup_size: LANES,
        ring_slots: 256,
        idle_timeout: Duration::from_secs(1),
        max_wall_time: Duration::from_secs(60),
        ..Default::default()
    };
    let mk = ResidentMegakernel::start(&gpu, &stream, USER, &data, &config).unwrap();
    let full = std::sync::atomic::AtomicU64::new(0);
    std::thread::scope(|s| {
        for th in 0..4u32 {
            let (mk, input, full) = (&mk, &input, &full);
            s.spawn(move || {
                let mut pending = std::collections::VecDeque::new();
                let check = |h, want: f32, id: u32| {
                    let c = mk.wait(h).unwrap();
                    assert_eq!((c.state, c.task_id), (TaskState::Done, id), "{c:?}");
                    assert_eq!(f32::from_bits(c.params[1]), want, "task {id}");
                };
                for i in (th..n as u32).step_by(4) {
                    let (t, want) = task(i, len as u32, input);
                    let h = loop {
                        match mk.push(&t) {
                            Ok(h) => break h,
                            Err(Error::ResidentRingFull { .. }) => {
                                // The slot may be held by another thread's
                                // older handle: finish one of ours, or let
                                // the others run.
                                full.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                                match pending.pop_front() {
                                    Some((h, w, id)) => check(h, w, id),
                                    None => std::thread::yield_now(),
                                }
                            }
                            Err(e) => panic!("push {i}: {e}"),
                        }
                    };
                    pending.push_back((h, want[len - 1], i));
                    if pending.len() > 32 {
                        let (h, w, id) = pending.pop_front().unwrap();
                        check(h, w, id);
                    }
                }
                for (h, w, id) in pending {
                    check(h, w, id);
                }
            });
        }
    });
    let stats = mk.stop().unwrap();
    println!("10,000 tasks from 4 threads: {stats:?}, ring full {full:?} times");
    assert_eq!(stats.pushed, n as u64);
    assert_eq!((stats.served, stats.faulted), (n as u32, 0), "{stats:?}");
    // Stopped on request, or its last generation had just reached its loop
    // bound (lavapipe) when the stop came.
    assert!(
        matches!(
            stats.exit,
            ExitReason::StopRequested | ExitReason::LoopBound
        ),
        "{stats:?}"
    );
    assert_eq!(stats.workers.0, stats.workers.1);
    let out = data.read_range(INPUT..).unwrap();
    for i in 0..n {
        let (_, want) = task(i as u32, len as u32, &input);
        assert_eq!(&out[i * len..(i + 1) * len], &want[..], "task {i}");
    }
    assert_clean(&gpu);
}

/// `ordered_data`: each task reads the previous task's output, pushed only
/// once the host has seen that task's completion, on up to two workers (so
/// consecutive tasks often run on different ones). Doubling each time keeps
/// every value exact and makes a stale read (an older power of two) show.
#[test]
fn ordered_data_lets_a_task_read_an_earlier_tasks_output() {
    let gpu = gpu();
    if let Err(why) = host_writes_reach_running_dispatch(&gpu) {
        skipped(format!("resident ring on {}: {why}", gpu.info().name));
        return;
    }
    let (n, len) = (100usize, 64usize);
    let (data, input) = setup(&gpu, n, len);
    let workers = vkcompute::megakernel::resident::residency_cap(&gpu, LANES)
        .unwrap()
        .workers
        .min(2);
    let stream = gpu.stream().unwrap();
    let config = ResidentConfig {
        worker_count: workers,
        workgroup_size: LANES,
        ring_slots: 16,
        idle_timeout: Duration::from_secs(1),
        max_wall_time: Duration::from_secs(60),
        ordered_data: true,
        ..Default::default()
    };
    let mk = ResidentMegakernel::start(&gpu, &stream, USER, &data, &config).unwrap();
    let region = |k: usize| (INPUT + k * len) as u32;
    for k in 0..n {
        let from = if k == 0 { 0 } else { region(k - 1) };
        let t = TaskWorkItem::ready(
            k as u32,
            1,
            from..from + len as u32,
            region(k)..region(k) + len as u32,
        )
        .with_params([2.0f32.to_bits(), 0, 0, 0]);
        let c = mk.wait(mk.push(&t).unwrap()).unwrap();
        assert_eq!((c.state, c.task_id), (TaskState::Done, k as u32), "{c:?}");
        let want = input[len - 1] * 2f32.powi(k as i32 + 1);
        assert_eq!(
            f32::from_bits(c.params[1]),
            want,
            "task {k} read a stale input"
        );
    }
    let stats = mk.stop().unwrap();
    assert_eq!((stats.served, stats.faulted), (n as u32, 0), "{stats:?}");
    let out = data.read_range(INPUT..).unwrap();
    for k in 0..n {
        for i in 0..len {
            assert_eq!(
                out[k * len + i],
                input[i] * 2f32.powi(k as i32 + 1),
                "task {k}, element {i}"
            );
        }
    }
    println!(
        "{n} dependent tasks on {workers} worker(s), each reading the last one's output: exact"
    );
    assert_clean(&gpu);
}

#[test]
fn ends_by_itself_when_the_host_stops_pushing() {
    let gpu = gpu();
    let (data, input) = setup(&gpu, 4, 16);
    let stream = gpu.stream().unwrap();
    let config = ResidentConfig {
        workgroup_size: LANES,
        idle_timeout: Duration::from_millis(20),
        max_wall_time: Duration::from_secs(5),
        ..Default::default()
    };
    let mk = ResidentMegakernel::start(&gpu, &stream, USER, &data, &config).unwrap();
    let t0 = Instant::now();
    let stats = mk.join().unwrap();
    let took = t0.elapsed();
    println!("idle exit after {took:?}: {stats:?}");
    assert!(
        matches!(stats.exit, ExitReason::Idle | ExitReason::LoopBound),
        "{stats:?}"
    );
    // 20 ms by the device clock; generous for a loaded 2-core CI machine.
    assert!(took < Duration::from_secs(10), "{took:?}");
    // A stopped kernel refuses pushes with a typed error.
    let mk = ResidentMegakernel::start(&gpu, &stream, USER, &data, &config).unwrap();
    let deadline = Instant::now() + Duration::from_secs(3);
    while !mk.is_finished().unwrap() {
        assert!(Instant::now() < deadline, "idle exit did not come");
        std::thread::sleep(Duration::from_millis(5));
    }
    // The host has not pushed for longer than the idle timeout either.
    std::thread::sleep(config.idle_timeout);
    let (t, _) = task(0, 16, &input);
    match (mk.exit_reason(), mk.push(&t)) {
        (ExitReason::Idle, Err(Error::ResidentStopped { reason: "idle", .. })) => {}
        // Ended at a loop bound (lavapipe) or without a reason: the push
        // starts the next generation, which ends on its own again.
        (ExitReason::LoopBound | ExitReason::Running, Ok(h)) => drop(h),
        other => panic!("{other:?}"),
    }
    drop(mk);
    assert_clean(&gpu);
}

#[test]
fn stops_on_request_and_drop_does_not_hang() {
    let gpu = gpu();
    let (data, _) = setup(&gpu, 1, 16);
    let stream = gpu.stream().unwrap();
    let config = ResidentConfig {
        workgroup_size: LANES,
        idle_timeout: Duration::from_secs(30),
        max_wall_time: Duration::from_secs(60),
        ..Default::default()
    };
    let mk = ResidentMegakernel::start(&gpu, &stream, USER, &data, &config).unwrap();
    let t0 = Instant::now();
    let stats = mk.stop().unwrap();
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    // The launch's ticket comes back completed.
    assert!(stats.ticket.is_ready().unwrap());
    assert!(
        matches!(
            stats.exit,
            ExitReason::StopRequested | ExitReason::LoopBound
        ),
        "{stats:?}"
    );
    let mk = ResidentMegakernel::start(&gpu, &stream, USER, &data, &config).unwrap();
    let t0 = Instant::now();
    drop(mk);
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    // The stream is usable afterwards.
    let mut b = stream.batch().unwrap();
    b.fill(&data, 0u32).unwrap();
    b.submit().unwrap();
    assert_clean(&gpu);
}

#[test]
fn faults_and_bad_config_are_typed() {
    let gpu = gpu();
    let (data, _) = setup(&gpu, 1, 16);
    let stream = gpu.stream().unwrap();
    let bad = ResidentConfig {
        workgroup_size: LANES,
        ring_slots: 100,
        ..Default::default()
    };
    if is_lavapipe(&gpu) {
        let wide = ResidentConfig {
            workgroup_size: 64,
            ..Default::default()
        };
        assert!(matches!(
            ResidentMegakernel::start(&gpu, &stream, USER, &data, &wide),
            Err(Error::MegakernelConfig {
                field: "workgroup_size",
                ..
            })
        ));
    }
    assert!(matches!(
        ResidentMegakernel::start(&gpu, &stream, USER, &data, &bad),
        Err(Error::MegakernelConfig {
            field: "ring_slots",
            ..
        })
    ));
    let over = ResidentConfig {
        workgroup_size: LANES,
        worker_count: 100_000,
        ..Default::default()
    };
    assert!(matches!(
        ResidentMegakernel::start(&gpu, &stream, USER, &data, &over),
        Err(Error::MegakernelResidency { .. })
    ));
    let config = ResidentConfig {
        workgroup_size: LANES,
        idle_timeout: Duration::from_secs(2),
        ..Default::default()
    };
    let mk = ResidentMegakernel::start(&gpu, &stream, USER, &data, &config).unwrap();
    let unknown = TaskWorkItem::ready(7, 9, 0..16, 16..32);
    let oob = TaskWorkItem::ready(8, 0, 0..16, u32::MAX - 4..u32::MAX);
    let (a, b) = (mk.push(&unknown).unwrap(), mk.push(&oob).unwrap());
    let (a, b) = (mk.wait(a).unwrap(), mk.wait(b).unwrap());
    assert_eq!((a.state, a.fault, a.task_id), (TaskState::Faulted, 1, 7));
    assert_eq!((b.state, b.fault, b.task_id), (TaskState::Faulted, 3, 8));
    let stats = mk.stop().unwrap();
    assert_eq!(stats.faulted, 2, "{stats:?}");
    assert_clean(&gpu);
}

#[test]
fn ring_full_is_a_typed_error() {
    let gpu = gpu();
    let (data, input) = setup(&gpu, 4, 16);
    let stream = gpu.stream().unwrap();
    let config = ResidentConfig {
        workgroup_size: LANES,
        ring_slots: 2,
        idle_timeout: Duration::from_secs(2),
        ..Default::default()
    };
    let mk = ResidentMegakernel::start(&gpu, &stream, USER, &data, &config).unwrap();
    let (t, want) = task(0, 16, &input);
    let held: Vec<_> = (0..2).map(|_| mk.push(&t).unwrap()).collect();
    // Both slots are held by live handles, finished or not.
    assert!(matches!(
        mk.push(&t),
        Err(Error::ResidentRingFull {
            slots: 2,
            oldest: 0
        })
    ));
    for h in held {
        let c = mk.wait(h).unwrap();
        assert_eq!(f32::from_bits(c.params[1]), want[15]);
    }
    // Waited handles are dropped: both slots are free again.
    let again: Vec<_> = (0..2).map(|_| mk.push(&t).unwrap()).collect();
    for h in again {
        mk.wait(h).unwrap();
    }
    let stats = mk.stop().unwrap();
    assert_eq!(stats.served, 4, "{stats:?}");
    assert_clean(&gpu);
}

#[test]
fn other_streams_run_beside_it() {
    let gpu = gpu();
    if is_lavapipe(&gpu) || gpu.stream_queue_count() < 2 {
        skipped("one compute queue: every stream shares it, so a batch waits for the resident kernel (a GPU machine test)");
        return;
    }
    let (data, input) = setup(&gpu, 1, 16);
    let stream = gpu.stream().unwrap();
    let config = ResidentConfig {
        workgroup_size: LANES,
        idle_timeout: Duration::from_secs(10),
        max_wall_time: Duration::from_secs(20),
        ..Default::default()
    };
    let mk = ResidentMegakernel::start(&gpu, &stream, USER, &data, &config).unwrap();
    let other = gpu.stream().unwrap();
    let xs = gpu.alloc::<u32>(1 << 16).unwrap();
    let mut b = other.batch().unwrap();
    b.fill(&xs, 7).unwrap();
    let t = b.submit_async().unwrap();
    t.wait_timeout(Duration::from_secs(5))
        .expect("a batch on another stream completes while the resident kernel runs");
    assert!(
        !mk.is_finished().unwrap(),
        "the resident kernel ended early"
    );
    assert_eq!(xs.read_range(..4).unwrap(), vec![7; 4]);
    let (task0, want) = task(0, 16, &input);
    let c = mk.wait(mk.push(&task0).unwrap()).unwrap();
    assert_eq!(f32::from_bits(c.params[1]), want[15]);
    let stats = mk.stop().unwrap();
    assert_eq!(stats.served, 1);
    assert_clean(&gpu);
}

#[test]
fn device_loss_reaches_push_wait_and_stop() {
    let gpu = gpu();
    let (data, input) = setup(&gpu, 1, 16);
    let stream = gpu.stream().unwrap();
    let config = ResidentConfig {
        workgroup_size: LANES,
        idle_timeout: Duration::from_secs(2),
        ..Default::default()
    };
    let mk = ResidentMegakernel::start(&gpu, &stream, USER, &data, &config).unwrap();
    let (t, _) = task(0, 16, &input);
    let h = mk.push(&t).unwrap();
    mk.wait(h).unwrap();
    gpu.simulate_device_loss();
    assert!(matches!(mk.push(&t), Err(Error::DeviceLost { .. })));
    assert!(matches!(mk.is_finished(), Err(Error::DeviceLost { .. })));
    let t0 = Instant::now();
    assert!(matches!(mk.stop(), Err(Error::DeviceLost { .. })));
    assert!(t0.elapsed() < Duration::from_secs(5));
}
