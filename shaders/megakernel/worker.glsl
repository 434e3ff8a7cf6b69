// vkcompute megakernel template, part 2 of 2: the worker loop. Compiled
// after the user's code, which defines (task mode)
//     #define MK_OP_COUNT <n>
//     uint run_task(inout MkTask t, uint lane, uint lanes);
// returning MK_DONE, MK_YIELDED, MK_REQUEUED, MK_PAUSED or MK_FAULTED (the
// value of lane 0 counts; every lane of the worker calls it with the same
// task), or (step mode)
//     void run_step(uint step, uint worker, uint workers, uint lane);
// called by every invocation of every worker, with a device-wide barrier
// between steps.

// Loops: lavapipe (llvmpipe) ends a shader invocation's loops after 65,535
// iterations (counted over all its loops) as if their conditions had
// failed, silently: a spinning worker there soon runs out. So every wait
// re-checks its condition after its loop instead of trusting the exit, a
// loop cut short is flagged (MK_LOOP_CUT) rather than taken for success,
// and loops are nested chunks of MK_CHUNK (no single loop counts past
// 65,535 on drivers that limit per loop).
#define MK_CHUNK 1024u

shared uint mk_s_task;   // claimed task index, or 0xffffffff: stop
shared uint mk_s_ok;

#if MK_LOOP_CHECK
// Task mode where the driver cuts loops (MK_LOOP_CHECK 1, llvmpipe): a cut
// inside a task's loops would leave its output part-written, so after
// every task each lane checks in and probes its loops; a task that a lane
// missed or whose loops were cut ends Faulted (MK_FAULT_LOOP_CUT), never
// Done, and the worker stops (its loops no longer run).
shared uint mk_s_arrived;  // lanes that finished this task
shared uint mk_s_cut;      // sticky: some lane's loops were cut

// Whether the driver has started cutting this invocation's loops short: a
// loop of `two` iterations (unknown to the compiler) then runs once.
bool mk_loops_cut() {
    uint k = 0u;
    for (uint j = 0u; j < mk.two; j++) k += 1u;
    return k != mk.two;
}
#endif

// ---- wall-time budget, lane 0 only ----
// Time is accumulated from forward steps of the clock only: a clock read
// on a CPU core's cycle counter (lavapipe) can step back when the thread
// moves to another core, which must not look like 2^64 ticks elapsed.
uvec2 mk_start;   // last reading
uvec2 mk_acc;     // ticks accumulated since the worker started
uint mk_iters = 0u;

uvec2 mk_now() {
#if MK_CLOCK == 1
    return clockRealtime2x32EXT();
#elif MK_CLOCK == 2
    return clock2x32ARB();
#else
    return uvec2(0u);
#endif
}

uvec2 mk_elapsed() {
    uvec2 c = mk_now();
    uint lo = c.x - mk_start.x;
    uint hi = c.y - mk_start.y - (c.x < mk_start.x ? 1u : 0u);
    mk_start = c;
    if (hi >= 0x80000000u) {
        return mk_acc;   // the clock stepped back: count nothing
    }
    uint sum = mk_acc.x + lo;
    mk_acc = uvec2(sum, mk_acc.y + hi + (sum < lo ? 1u : 0u));
    return mk_acc;
}

// True (and flagged for the host) once the budget is spent. Counts one
// iteration per call.
bool mk_out_of_time() {
    mk_iters += 1u;
#if MK_CLOCK != 0
    uvec2 e = mk_elapsed();
    bool over = e.y > mk.budget_hi || (e.y == mk.budget_hi && e.x >= mk.budget_lo);
#else
    bool over = mk_iters > mk.iter_budget;
#endif
    if (over) {
        mk_ctl_max(MK_DEADLINE_HIT, 1u);
    }
    return over;
}

void mk_finish_worker() {
    if (gl_LocalInvocationIndex == 0u) {
        if (gl_WorkGroupID.x == 0u) {
            uvec2 e = mk_elapsed();
            mk_ctl_store(MK_MAX_ELAPSED_LO, e.x);
            mk_ctl_store(MK_MAX_ELAPSED_HI, e.y);
            // Buffer sizes as seen by the kernel (keeps every binding in
            // the kernel's interface whatever the user's code uses).
            mk_ctl_store(MK_SIZES, uint(mk_tasks.length()));
            mk_ctl_store(MK_SIZES + 1u, uint(mk_order.length()));
            mk_ctl_store(MK_SIZES + 2u, uint(mk_data.length()));
        }
        mk_ctl_max(MK_ITERATIONS, mk_iters);
        mk_ctl_add(MK_WORKERS_DONE, 1u);
    }
}

// ---- device-wide step barrier ----
// One invocation per worker arrives on a monotone counter with a release
// add, so every arrival stays in the counter's release sequence. Then:
//  - MK_BARRIER_FLAG 0 (counter): every worker, the last to arrive
//    included, polls the arrival counter itself until it reaches target ×
//    workers. The arrival's add returns nothing, so it is sent without
//    waiting for its answer and the worker starts polling at once (0.06 µs
//    per step less at 132 workers on an H100 than waiting for the add's
//    result to spot the last arrival, docs/PERF.md);
//  - MK_BARRIER_FLAG 1 (counter + flag): the last arrival stores the step
//    number into a generation word on its own 128-byte line; waiters poll
//    that (polling stays off the line the arrivals hit).
// Polls are relaxed; one acquire fence follows, and the workgroup barrier
// after it hands the acquired writes to the other invocations. Returns
// false (for every invocation of the worker) when the spin budget ran out:
// results past that point are not ordered, and the host sees
// MK_SPIN_EXHAUSTED.
#if MK_BARRIER_FLAG
#define MK_POLL_WORD MK_GEN
#define MK_POLL_GOAL target
#else
#define MK_POLL_WORD MK_ARRIVE
#define MK_POLL_GOAL goal
#endif
bool mk_grid_barrier(uint target) {
    mk_workgroup_sync();
    if (gl_LocalInvocationIndex == 0u) {
        uint ok = 1u;
        uint goal = target * gl_NumWorkGroups.x;
#if MK_BARRIER_FLAG
        uint arrived = mk_ctl_add_release(MK_ARRIVE, 1u) + 1u;
        if (arrived == goal) {
            mk_fence_acquire();
            mk_ctl_store(MK_GEN, target);
        } else
#else
        mk_ctl_add_release(MK_ARRIVE, 1u);
        uint arrived = 0u;   // learnt by polling, as every other worker does
#endif
        if (arrived < goal) {
            uint outer = (mk.spin_budget + MK_CHUNK - 1u) / MK_CHUNK;
            bool seen = false;
            for (uint o = 0u; o < outer && !seen; o++) {
                for (uint i = 0u; i < MK_CHUNK; i++) {
                    if (mk_ctl_load_relaxed(MK_POLL_WORD) >= MK_POLL_GOAL) {
                        seen = true;
                        break;
                    }
                }
            }
            if (!seen && mk_ctl_load_relaxed(MK_POLL_WORD) < MK_POLL_GOAL) {
                mk_ctl_max(MK_SPIN_EXHAUSTED, 1u);
                ok = 0u;
            }
        }
        mk_fence_acquire();
        mk_s_ok = ok;
    }
    mk_workgroup_sync();
    return mk_s_ok != 0u;
}

#if MK_STEPS

void main() {
    uint lane = gl_LocalInvocationIndex;
    if (lane == 0u) {
        mk_start = mk_now();
        mk_acc = uvec2(0u);
    }
    uint step = 0u;
    bool failed = false;
    for (uint o = 0u; o <= mk.steps / MK_CHUNK && !failed; o++) {
        for (uint i = 0u; i < MK_CHUNK; i++) {
            if (step >= mk.steps) break;
            run_step(step, gl_WorkGroupID.x, gl_NumWorkGroups.x, lane);
            step += 1u;
            if (!mk_grid_barrier(step)) {
                failed = true;
                break;
            }
        }
    }
    if (!failed && step != mk.steps && lane == 0u) {
        mk_ctl_max(MK_LOOP_CUT, 1u);
    }
    mk_finish_worker();
}

#else

// Why a task cannot run, or 0.
uint mk_check(MkTask t) {
    uint len = uint(mk_data.length());
    if (t.op >= uint(MK_OP_COUNT)) return MK_FAULT_UNKNOWN_OP;
    if (t.input_len > len || t.input_offset > len - t.input_len) return MK_FAULT_INPUT_OOB;
    if (t.output_len > len || t.output_offset > len - t.output_len) return MK_FAULT_OUTPUT_OOB;
    return 0u;
}

// Lane 0: the next task index to run, or 0xffffffff to stop.
uint mk_claim() {
    if (mk_out_of_time()) return 0xffffffffu;
    uint slot = mk_ctl_add(MK_HEAD, 1u);
    if (slot >= mk.order_cap) return 0xffffffffu;
    uint outer = (mk.spin_budget + MK_CHUNK - 1u) / MK_CHUNK;
    for (uint o = 0u; o < outer; o++) {
        for (uint i = 0u; i < MK_CHUNK; i++) {
            uint entry = mk_order_load(slot);
            if (entry != 0u) {
                mk_ctl_add(MK_CLAIMED, 1u);
                mk_tasks[entry - 1u].state = MK_RUNNING;
                return entry - 1u;
            }
            // Empty slot: a running task may still re-queue into it, unless
            // nothing is pending any more.
            if (mk_ctl_load(MK_PENDING) == 0u) return 0xffffffffu;
            if (mk_out_of_time()) return 0xffffffffu;
        }
    }
    mk_ctl_max(MK_SPIN_EXHAUSTED, 1u);
    return 0xffffffffu;
}

// Lane 0: record how the task ended; re-queue it when asked and there is room.
void mk_finish(uint ti, MkTask t, uint fault, uint result) {
    uint state;
    uint code = fault;
    if (fault != 0u) {
        state = MK_FAULTED;
    } else if (result == MK_DONE || result == MK_YIELDED || result == MK_REQUEUED
               || result == MK_PAUSED) {
        state = result;
    } else if (result == MK_FAULTED) {
        state = MK_FAULTED;
        code = MK_FAULT_TASK;
    } else {
        state = MK_FAULTED;
        code = MK_FAULT_BAD_RETURN;
    }
    mk_tasks[ti].continuation = t.continuation;
    mk_tasks[ti].params[0] = t.params[0];
    mk_tasks[ti].params[1] = t.params[1];
    mk_tasks[ti].params[2] = t.params[2];
    mk_tasks[ti].params[3] = t.params[3];
    mk_tasks[ti].runs = t.runs + 1u;
    mk_tasks[ti].fault = code;
    mk_tasks[ti].state = state;
    if (state == MK_DONE) mk_ctl_add(MK_DONE_COUNT, 1u);
    if (state == MK_FAULTED) mk_ctl_add(MK_FAULTED_COUNT, 1u);
    if (state == MK_PAUSED) mk_ctl_add(MK_PAUSED_COUNT, 1u);
    if (state == MK_YIELDED) mk_ctl_add(MK_YIELDED_COUNT, 1u);
    if (state == MK_REQUEUED) mk_ctl_add(MK_REQUEUED_COUNT, 1u);
    if (state == MK_YIELDED || state == MK_REQUEUED) {
        uint pos = mk_ctl_add(MK_TAIL, 1u);
        if (pos < mk.order_cap) {
            mk_order_store(pos, ti + 1u);   // release: the task words above first
            return;                         // still pending
        }
        mk_ctl_add(MK_DROPPED_REQUEUES, 1u); // stays Yielded/Requeued for the next launch
    }
    mk_ctl_add(MK_PENDING, 0xffffffffu);     // one fewer pending task
}


void main() {
    uint lane = gl_LocalInvocationIndex;
    if (lane == 0u) {
        mk_start = mk_now();
        mk_acc = uvec2(0u);
    }
    bool stopped = false;
#if MK_LOOP_CHECK
    if (lane == 0u) mk_s_cut = 0u;
#endif
    for (uint o = 0u; o < 0xffffu && !stopped; o++) {
        for (uint k = 0u; k < MK_CHUNK; k++) {
            if (lane == 0u) {
#if MK_LOOP_CHECK
                mk_s_arrived = 0u;
                mk_s_task = mk_s_cut != 0u ? 0xffffffffu : mk_claim();
#else
                mk_s_task = mk_claim();
#endif
            }
            mk_workgroup_sync();
            uint ti = mk_s_task;
            if (ti == 0xffffffffu) {
                stopped = true;
                break;
            }
            MkTask t = mk_tasks[ti];
            uint fault = mk_check(t);
            uint result = MK_FAULTED;
            if (fault == 0u) {
                result = run_task(t, lane, uint(MK_LOCAL_SIZE));
            }
#if MK_LOOP_CHECK
            atomicAdd(mk_s_arrived, 1u);
            if (mk_loops_cut()) atomicOr(mk_s_cut, 1u);
#endif
            mk_workgroup_sync();
            if (lane == 0u) {
#if MK_LOOP_CHECK
                if (mk_s_cut != 0u || mk_s_arrived != uint(MK_LOCAL_SIZE)) {
                    mk_s_cut = 1u;
                    fault = MK_FAULT_LOOP_CUT;
                    mk_ctl_max(MK_LOOP_CUT, 1u);
                }
#endif
                mk_finish(ti, t, fault, result);
            }
        }
    }
    if (!stopped && lane == 0u) {
        mk_ctl_max(MK_LOOP_CUT, 1u);
    }
    mk_finish_worker();
}

#endif
