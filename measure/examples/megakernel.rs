//! Persistent megakernel figures, each result checked before it is printed:
//!
//! (a) dependent steps in one persistent dispatch (every element of 1,024
//!     f32 updated from its neighbours' previous values) at 1, 8, 32, 66,
//!     132 workers (clamped to the forward-progress cap), µs per step, beside
//!     a chain of dispatches with barriers (the floor) in the same process;
//! (b) tiny independent tasks (each adds two 256-element f32 slices):
//!     megakernel vs one dispatch per task in one batch vs one submit per
//!     task: tasks/s and time per task;
//! (c) a 5 ms wall-time budget (2 ms on llvmpipe, whose loop limit would
//!     end the launch first) over endless work (tasks written first):
//!     from submitting the launch to seeing it complete, and by how much
//!     that overshot; the launch's host prep before the submit beside it;
//!
//! Resident mode (a task pushed into a running kernel) has its own example,
//! `measure/examples/megakernel_resident.rs`.
//!
//! `cargo run --release -p vkcompute-measure --example megakernel -- [--json PATH] [--tasks N] [--steps N] [--busy N] [--cuda-persist cuda_persist.jsonl]`
//!
//! (`--busy`: loop iterations per element of each task in (c), default
//! 40,000 (100 on llvmpipe), about 0.1 ms per task on the H200, over 50,000 tasks.)
//!
//! `VKCOMPUTE_MEGAKERNEL_MEMORY_MODEL=0` measures the classic atomics
//! instead of the Vulkan memory model's acquire/release.
//!
//! Per-step and per-task times come from differences of host wall times
//! (2S steps minus S steps), so submit overhead cancels; the shader clock's
//! own reading is printed beside where the device has one.

use vkcompute_measure::cuda_ref;

use std::time::{Duration, Instant};

use vkcompute::megakernel::{
    fault, Megakernel, MegakernelConfig, MegakernelError, MegakernelWorkloadHints, StepBarrier,
    TaskState, TaskWorkItem,
};
use vkcompute::{bytemuck, BatchOptions, Device};

const N: usize = 1024;
const MODULUS: u32 = 65521;

const STEP: &str = r#"
void run_step(uint step, uint worker, uint workers, uint lane) {
    uint src = (step & 1u) * 1024u;
    uint dst = 1024u - src;
    for (uint i = worker * MK_LOCAL_SIZE + lane; i < 1024u; i += workers * MK_LOCAL_SIZE) {
        uint l = uint(mk_data[src + ((i + 1023u) & 1023u)]);
        uint r = uint(mk_data[src + ((i + 1u) & 1023u)]);
        mk_data[dst + i] = float((3u * l + r + step) % 65521u);
    }
}
"#;

const CHAIN_STEP: &str = r#"
#version 450
layout(local_size_x = 256) in;
layout(set = 0, binding = 0) buffer D { float d[]; };
layout(push_constant) uniform P { uint step; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i >= 1024u) return;
    uint src = (step & 1u) * 1024u;
    uint dst = 1024u - src;
    uint l = uint(d[src + ((i + 1023u) & 1023u)]);
    uint r = uint(d[src + ((i + 1u) & 1023u)]);
    d[dst + i] = float((3u * l + r + step) % 65521u);
}
"#;

/// op 0: out = a + b (input holds a then b); op 1: busy work, then Done.
const TASK_OPS: &str = r#"
#define MK_OP_COUNT 2
uint run_task(inout MkTask t, uint lane, uint lanes) {
    uint n = t.output_len;
    if (t.op == 0u) {
        for (uint i = lane; i < n; i += lanes)
            mk_data[t.output_offset + i] = mk_data[t.input_offset + i] + mk_data[t.input_offset + n + i];
        return MK_DONE;
    }
    for (uint i = lane; i < n; i += lanes) {
        float acc = mk_data[t.input_offset + i];
        for (uint k = 0u; k < t.params[0]; k++) acc = acc * 0.999 + 0.5;
        mk_data[t.output_offset + i] = acc;
    }
    return MK_DONE;
}
"#;

const ADD: &str = r#"
#version 450
layout(local_size_x = 256) in;
layout(set = 0, binding = 0) buffer D { float d[]; };
layout(push_constant) uniform P { uint a; uint out_off; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    d[out_off + i] = d[a + i] + d[a + 256u + i];
}
"#;

fn reference(init: &[u32], steps: u32) -> Vec<u32> {
    let mut a = init.to_vec();
    let mut b = vec![0u32; N];
    for k in 0..steps {
        for i in 0..N {
            b[i] = (3 * a[(i + N - 1) % N] + a[(i + 1) % N] + k) % MODULUS;
        }
        std::mem::swap(&mut a, &mut b);
    }
    a
}

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// The median of `reps` timed runs after one untimed warm-up run, as
/// `cuda_persist.cu` takes the median of its runs after the first.
fn median_time<F: FnMut() -> vkcompute::Result<Duration>>(
    reps: usize,
    mut f: F,
) -> vkcompute::Result<Duration> {
    f()?;
    let mut v = (0..reps)
        .map(|_| f())
        .collect::<vkcompute::Result<Vec<_>>>()?;
    v.sort_unstable();
    Ok(v[v.len() / 2])
}

fn check(ok: bool, what: &str) {
    if !ok {
        eprintln!("RESULT CHECK FAILED: {what}");
        std::process::exit(1);
    }
}

fn main() -> vkcompute::Result<()> {
    let gpu = Device::new()?;
    let steps: u32 = arg("--steps").and_then(|s| s.parse().ok()).unwrap_or(1000);
    let n_tasks: u32 = arg("--tasks")
        .and_then(|s| s.parse().ok())
        .unwrap_or(100_000);
    // llvmpipe ends an invocation's loops after 65,535 iterations in all
    // (about 5 ms of one lane's looping there): (c) gets a 2 ms budget and
    // 100-iteration tasks on it, so the budget, not the loop limit, ends
    // the launch.
    let lavapipe = gpu.info().driver_name == "llvmpipe";
    let busy_iters: u32 = arg("--busy")
        .and_then(|s| s.parse().ok())
        .unwrap_or(if lavapipe { 100 } else { 40_000 });
    let budget_ms: u64 = if lavapipe { 2 } else { 5 };
    println!("adapter: {} ({})", gpu.info().name, gpu.info().driver_info);
    let mut json = Vec::new();

    // (a) dependent steps
    let init: Vec<u32> = (0..N as u32).map(|i| (i * 7919 + 13) % MODULUS).collect();
    let mut host: Vec<f32> = init.iter().map(|&v| v as f32).collect();
    host.resize(2 * N, 0.0);
    let want_s = reference(&init, steps);
    let want_2s = reference(&init, 2 * steps);
    let data = gpu.upload(&host)?;
    let hints = MegakernelWorkloadHints {
        workgroup_size: 256,
        ..Default::default()
    };
    let mut mk = Megakernel::steps(&gpu, STEP, &hints, &data)?;
    // The launches below use the default hints' workgroup size (64), so
    // the cap that bounds them is that size's.
    let launch_ws = MegakernelWorkloadHints::default().workgroup_size;
    let cap = mk.residency_cap(launch_ws)?;
    println!(
        "\n(a) {steps} dependent steps, 1,024 f32; residency cap {} ({cap}); memory model: {}",
        cap.workers,
        mk.uses_memory_model()
    );
    let mut counts: Vec<u32> = [1u32, 8, 32, 66, 132]
        .iter()
        .map(|&w| w.min(cap.workers))
        .collect();
    counts.dedup();
    // `--cuda-persist PATH`: cuda_persist.cu's lines from the same run.
    let grid_sync = arg("--cuda-persist")
        .and_then(|p| std::fs::read_to_string(p).ok())
        .map(|t| cuda_ref::persist_grid_sync(&t))
        .unwrap_or_default();
    println!(
        "{:>8} {:>16} {:>12} {:>16} {:>16}",
        "workers", "barrier", "µs/step", "shader clock", "CUDA grid.sync"
    );
    let kinds = [StepBarrier::Counter, StepBarrier::CounterAndFlag];
    for (w, barrier) in counts.iter().flat_map(|&w| kinds.map(|k| (w, k))) {
        // A launch cut short (a spin budget spent, or llvmpipe's loop
        // limit) is an error that lowers the cap for the launch's workgroup
        // size: counts over it are skipped, and said so.
        let cap_now = mk.residency_cap(launch_ws)?;
        if w > cap_now.workers {
            println!(
                "{w:>8} {:>16} skipped: over the residency cap, now {} ({cap_now})",
                format!("{barrier:?}"),
                cap_now.workers
            );
            continue;
        }
        let mut c = MegakernelConfig {
            worker_count: w,
            ..Default::default()
        };
        c.workload.step_barrier = barrier;
        let mut clock_per_step = None;
        let mut run = |s: u32, want: &[u32]| -> vkcompute::Result<Duration> {
            data.write(0, &host)?;
            let t = Instant::now();
            mk.launch_steps(&c, s)?.wait()?;
            let dt = t.elapsed();
            let r = mk.report()?;
            let got = data.read_range(0..N)?;
            check(
                !r.spin_exhausted
                    && !r.loop_cut
                    && got.iter().zip(want).all(|(g, w)| *g == *w as f32),
                &format!("{w} workers, {s} steps"),
            );
            if s == 2 * steps {
                clock_per_step = r.device_elapsed.map(|d| us(d) / f64::from(s));
            }
            Ok(dt)
        };
        let timed = median_time(7, || run(steps, &want_s))
            .and_then(|t1| Ok((t1, median_time(7, || run(2 * steps, &want_2s))?)));
        let (t1, t2) = match timed {
            Ok(t) => t,
            Err(vkcompute::Error::Megakernel(MegakernelError::LaunchCut { cap, .. })) => {
                println!(
                    "{w:>8} {:>16} launch cut short: residency cap lowered to {cap}; row skipped",
                    format!("{barrier:?}")
                );
                continue;
            }
            Err(e) => return Err(e),
        };
        let per = us(t2.saturating_sub(t1)) / f64::from(steps);
        let clk = clock_per_step.map_or("-".into(), |v| format!("{v:.3}"));
        let cuda = grid_sync
            .iter()
            .find(|(b, _)| *b == w)
            .map_or("-".into(), |(_, v)| format!("{v:.3}"));
        println!(
            "{w:>8} {:>16} {per:>12.3} {clk:>16} {cuda:>16}",
            format!("{barrier:?}")
        );
        json.push(format!(
            "{{\"figure\":\"steps\",\"workers\":{w},\"barrier\":\"{barrier:?}\",\"memory_model\":{},\"us_per_step\":{per:.4},\"shader_clock_us_per_step\":{}}}",
            mk.uses_memory_model(),
            clock_per_step.map_or("null".into(), |v| format!("{v:.4}"))
        ));
    }
    let chain = gpu.kernel_glsl(CHAIN_STEP)?;
    let chain_run = |s: u32, want: &[u32]| -> vkcompute::Result<Duration> {
        data.write(0, &host)?;
        // One submission, so no step runs before the timer starts.
        let mut b = gpu.batch_with(BatchOptions::single_submit())?;
        for k in 0..s {
            b.run_with_push_constants(&chain, &[&data], N as u32, bytemuck::bytes_of(&k))?;
            b.barrier();
        }
        let t = Instant::now();
        b.submit()?;
        let dt = t.elapsed();
        let got = data.read_range(0..N)?;
        check(
            got.iter().zip(want).all(|(g, w)| *g == *w as f32),
            "chain of dispatches",
        );
        Ok(dt)
    };
    let t1 = median_time(7, || chain_run(steps, &want_s))?;
    let t2 = median_time(7, || chain_run(2 * steps, &want_2s))?;
    let floor = us(t2.saturating_sub(t1)) / f64::from(steps);
    println!("chain of dispatches with barriers (floor): {floor:.3} µs/step");
    json.push(format!(
        "{{\"figure\":\"steps_chain_floor\",\"us_per_step\":{floor:.4}}}"
    ));

    // (b) tiny independent tasks
    println!("\n(b) {n_tasks} tasks, each adds two 256-element f32 slices");
    let slices = 1024u32; // distinct input pairs
    let in_len = slices * 512;
    let mut d: Vec<f32> = (0..in_len).map(|i| (i % 1000) as f32 * 0.25).collect();
    d.resize((in_len + n_tasks * 256) as usize, 0.0);
    let tasks: Vec<TaskWorkItem> = (0..n_tasks)
        .map(|i| {
            let a = (i % slices) * 512;
            let o = in_len + i * 256;
            TaskWorkItem::ready(i, 0, a..a + 512, o..o + 256)
        })
        .collect();
    let check_out = |buf: &vkcompute::Buffer<f32>, what: &str| -> vkcompute::Result<()> {
        let got = buf.read_range(in_len as usize..)?;
        let ok = (0..n_tasks as usize).all(|t| {
            let a = (t as u32 % slices * 512) as usize;
            (0..256).all(|i| got[t * 256 + i] == d[a + i] + d[a + 256 + i])
        });
        check(ok, what);
        Ok(())
    };
    let tdata = gpu.upload(&d)?;
    let mut rows = Vec::new();
    for ws in [64u32, 256] {
        let h = MegakernelWorkloadHints {
            workgroup_size: ws,
            ..Default::default()
        };
        let mut tk = Megakernel::tasks(&gpu, TASK_OPS, &h, &tasks[..1], &tdata)?;
        let workers = tk.residency_cap(ws)?.workers;
        let c = MegakernelConfig {
            worker_count: workers,
            max_wall_time: Duration::from_secs(60),
            workload: h,
            ..Default::default()
        };
        tk.launch(&c)?.wait()?; // compile, probe, calibrate
        tdata.write(0, &d)?;
        tk.set_tasks(&tasks)?;
        let t = Instant::now();
        let ticket = tk.launch(&c)?;
        let submitted = t.elapsed();
        ticket.wait()?;
        let mut r = tk.report()?;
        let (mut done, mut launches) = (r.done, 1u32);
        let mut kernel = r.device_elapsed;
        // llvmpipe ends an invocation's loops after 65,535 iterations in
        // all: a worker there gets through some thousands of tasks, says so
        // (loop_cut; the task the cut landed in ends Faulted with
        // fault::LOOP_CUT), and the next launch goes on with what is left,
        // that task made Ready again (its run can be repeated), as
        // tests/megakernel.rs does. On a GPU one launch does all of them.
        while r.loop_cut && r.done > 0 && done < n_tasks {
            let mut items = tk.task_items()?;
            for t in items.iter_mut() {
                if t.task_state()? == TaskState::Faulted && t.fault == fault::LOOP_CUT {
                    t.transition(TaskState::Ready)?;
                }
            }
            tk.set_tasks(&items)?;
            tk.launch(&c)?.wait()?;
            r = tk.report()?;
            (done, launches) = (done + r.done, launches + 1);
            kernel = kernel.zip(r.device_elapsed).map(|(a, b)| a + b);
        }
        let faulted = tk
            .task_items()?
            .iter()
            .filter(|t| t.task_state().ok() == Some(TaskState::Faulted))
            .count();
        let total = t.elapsed();
        check(
            done == n_tasks && faulted == 0 && !r.loop_cut,
            &format!(
                "megakernel tasks all Done ({ws} per worker, {launches} launches, {done} done): \
                 {r:?}"
            ),
        );
        check_out(&tdata, "megakernel task results")?;
        println!(
            "megakernel ({workers} workers × {ws}, {launches} launch{}): {:.1} ms total ({:.1} ms \
             host prep), kernel {}",
            if launches == 1 { "" } else { "es" },
            total.as_secs_f64() * 1e3,
            submitted.as_secs_f64() * 1e3,
            kernel.map_or("-".into(), |k| format!(
                "{:.1} ms by shader clock",
                k.as_secs_f64() * 1e3
            ))
        );
        rows.push((format!("megakernel_ws{ws} (launch→done)"), total, n_tasks));
    }
    let add = gpu.kernel_glsl(ADD)?;
    tdata.write(0, &d)?;
    // Recording counts: it is the per-task cost this path pays (and the
    // batch submits chunks while it records).
    let t = Instant::now();
    let mut b = gpu.batch()?;
    for t in &tasks {
        let pc = [t.input_offset, t.output_offset];
        b.run_configured(&add, &[&tdata], [1, 1, 1], Some(bytemuck::cast_slice(&pc)))?;
    }
    b.submit()?;
    let per_batch = t.elapsed();
    check_out(&tdata, "one dispatch per task")?;
    rows.push((
        "dispatch_per_task_one_batch (record→done)".into(),
        per_batch,
        n_tasks,
    ));
    let subs = n_tasks.min(10_000);
    tdata.write(0, &d)?;
    let t = Instant::now();
    for task in &tasks[..subs as usize] {
        let pc = [task.input_offset, task.output_offset];
        let mut b = gpu.batch()?;
        b.run_configured(&add, &[&tdata], [1, 1, 1], Some(bytemuck::cast_slice(&pc)))?;
        let _pipelined = b.submit_async()?;
    }
    gpu.wait_idle()?;
    let per_submit = t.elapsed();
    let got = tdata.read_range(in_len as usize..(in_len + subs * 256) as usize)?;
    check(
        (0..subs as usize).all(|t| {
            let a = (t as u32 % slices * 512) as usize;
            (0..256).all(|i| got[t * 256 + i] == d[a + i] + d[a + 256 + i])
        }),
        "one submit per task",
    );
    rows.push(("submit_per_task (pipelined)".into(), per_submit, subs));
    println!("{:<44} {:>12} {:>12}", "path", "tasks/s", "µs/task");
    for (name, t, n) in &rows {
        let per = us(*t) / f64::from(*n);
        println!("{name:<44} {:>12.0} {per:>12.3}", 1e6 / per);
        json.push(format!(
            "{{\"figure\":\"tasks\",\"path\":\"{name}\",\"tasks\":{n},\"tasks_per_s\":{:.0},\"us_per_task\":{per:.4}}}",
            1e6 / per
        ));
    }
    // The headline uses the shape a user gets by default (the default
    // hints' workgroup size, 64, at the residency cap): a rule, not the
    // faster of the two rows; the 256-wide row is a diagnostic.
    let default_ws = MegakernelWorkloadHints::default().workgroup_size;
    let chosen = rows
        .iter()
        .find(|r| r.0 == format!("megakernel_ws{default_ws} (launch→done)"))
        .map_or(f64::NAN, |r| us(r.1) / f64::from(r.2));
    let ratio = (us(per_batch) / f64::from(n_tasks)) / chosen;
    println!(
        "megakernel (default workgroup size {default_ws}) vs one dispatch per task in one batch: \
         {ratio:.1}× (goal ≥ 20×)"
    );
    json.push(format!(
        "{{\"figure\":\"tasks_ratio_vs_dispatch_per_task\",\"ratio\":{ratio:.2}}}"
    ));

    // (c) a 5 ms budget (2 ms on llvmpipe) over endless work
    let endless = 50_000u32;
    let budget = Duration::from_millis(budget_ms);
    let mut ed = vec![1.0f32; 256 * 2];
    ed.resize(256 * 2 + endless as usize * 64, 0.0);
    let edata = gpu.upload(&ed)?;
    let busy: Vec<TaskWorkItem> = (0..endless)
        .map(|i| {
            let o = 512 + i * 64;
            TaskWorkItem::ready(i, 1, 0..64, o..o + 64).with_params([busy_iters, 0, 0, 0])
        })
        .collect();
    let h = MegakernelWorkloadHints {
        workgroup_size: 64,
        max_requeues_per_task: 0,
        ..Default::default()
    };
    let mut ek = Megakernel::tasks(&gpu, TASK_OPS, &h, &busy[..1], &edata)?;
    let c = MegakernelConfig {
        worker_count: ek.residency_cap(64)?.workers,
        max_wall_time: budget,
        workload: h,
        ..Default::default()
    };
    ek.launch(&c)?.wait()?;
    // The tasks are written before the timed span (as a caller would have
    // them in place); the launch's own host work (claim order, counters,
    // recording) is timed apart, and the figure is submit → complete.
    ek.set_tasks(&busy)?;
    let t = Instant::now();
    let prepared = ek.prepare_launch(&c)?;
    let prep = t.elapsed();
    let t_sub = Instant::now();
    prepared.submit()?.wait()?;
    let returned = t_sub.elapsed();
    let with_prep = t.elapsed();
    let r = ek.report()?;
    let left = ek
        .task_items()?
        .iter()
        .filter(|t| t.task_state().ok() == Some(TaskState::Ready))
        .count() as u32;
    check(
        r.deadline_hit && left > 0 && left + r.done == endless,
        "budget left work Ready",
    );
    let over = returned.as_secs_f64() * 1e3 - budget_ms as f64;
    println!(
        "\n(c) {budget_ms} ms budget over {endless} busy tasks ({:?}): complete {:.2} ms after the submit (overshoot {over:.2} ms; goal within {} ms); host prep before it {:.2} ms ({:.2} ms with it), {} done, {left} left Ready, worker 0 by shader clock {}",
        r.clock.unwrap_or(vkcompute::megakernel::ClockKind::IterationBudget),
        returned.as_secs_f64() * 1e3,
        budget_ms + 2,
        prep.as_secs_f64() * 1e3,
        with_prep.as_secs_f64() * 1e3,
        r.done,
        r.device_elapsed.map_or("-".into(), |d| format!("{:.2} ms", d.as_secs_f64() * 1e3))
    );
    json.push(format!(
        "{{\"figure\":\"wall_time_budget\",\"budget_ms\":{budget_ms},\"returned_ms\":{:.3},\"overshoot_ms\":{over:.3},\"host_prep_ms\":{:.3},\"with_prep_ms\":{:.3},\"clock\":\"{:?}\",\"done\":{},\"left_ready\":{left}}}",
        returned.as_secs_f64() * 1e3,
        prep.as_secs_f64() * 1e3,
        with_prep.as_secs_f64() * 1e3,
        r.clock.unwrap_or(vkcompute::megakernel::ClockKind::IterationBudget),
        r.done
    ));

    if let Some(path) = arg("--json") {
        let body = format!(
            "{{\"adapter\":\"{}\",\"results\":[\n{}\n]}}\n",
            gpu.info().name,
            json.join(",\n")
        );
        std::fs::write(&path, body).map_err(|e| vkcompute::Error::CacheIo {
            path: path.into(),
            detail: e.to_string(),
        })?;
    }
    Ok(())
}
