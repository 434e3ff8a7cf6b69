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

shared uint mk_s_task;   // claimed task index, or 0xffffffff: stop
shared uint mk_s_ok;

// ---- wall-time budget, lane 0 only ----
uvec2 mk_start;
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
    return uvec2(lo, hi);
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
        }
        mk_ctl_max(MK_ITERATIONS, mk_iters);
        mk_ctl_add(MK_WORKERS_DONE, 1u);
    }
}

// ---- device-wide step barrier ----
// One invocation per worker arrives on a monotone counter (acq_rel); the
// last arrival of step `target` publishes it (release); the others spin on
// an acquire load, within spin_budget. Arrival counter and generation sit
// on their own 128-byte lines. Returns false (for every invocation of the
// worker) when the spin budget ran out: results past that point are not
// ordered, and the host sees MK_SPIN_EXHAUSTED.
bool mk_grid_barrier(uint target) {
    mk_workgroup_sync();
    if (gl_LocalInvocationIndex == 0u) {
        uint ok = 1u;
        uint goal = target * gl_NumWorkGroups.x;
        uint arrived = mk_ctl_add(MK_ARRIVE, 1u) + 1u;
        if (arrived == goal) {
            mk_ctl_store(MK_GEN, target);
        } else {
            uint spins = 0u;
            while (mk_ctl_load(MK_GEN) < target) {
                spins += 1u;
                if (spins >= mk.spin_budget) {
                    mk_ctl_max(MK_SPIN_EXHAUSTED, 1u);
                    ok = 0u;
                    break;
                }
            }
        }
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
    }
    for (uint step = 0u; step < mk.steps; step++) {
        run_step(step, gl_WorkGroupID.x, gl_NumWorkGroups.x, lane);
        if (!mk_grid_barrier(step + 1u)) {
            break;
        }
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
    uint spins = 0u;
    while (true) {
        uint entry = mk_order_load(slot);
        if (entry != 0u) {
            mk_ctl_add(MK_CLAIMED, 1u);
            return entry - 1u;
        }
        // Empty slot: a running task may still re-queue into it, unless
        // nothing is pending any more.
        if (mk_ctl_load(MK_PENDING) == 0u) return 0xffffffffu;
        if (mk_out_of_time()) return 0xffffffffu;
        spins += 1u;
        if (spins >= mk.spin_budget) {
            mk_ctl_max(MK_SPIN_EXHAUSTED, 1u);
            return 0xffffffffu;
        }
    }
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
    for (uint i = 0u; i < 4u; i++) mk_tasks[ti].params[i] = t.params[i];
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
    }
    while (true) {
        if (lane == 0u) {
            mk_s_task = mk_claim();
        }
        mk_workgroup_sync();
        uint ti = mk_s_task;
        if (ti == 0xffffffffu) break;
        MkTask t = mk_tasks[ti];
        uint fault = mk_check(t);
        uint result = MK_FAULTED;
        if (fault == 0u) {
            result = run_task(t, lane, uint(MK_LOCAL_SIZE));
        }
        mk_workgroup_sync();
        if (lane == 0u) {
            mk_finish(ti, t, fault, result);
        }
    }
    mk_finish_worker();
}

#endif
