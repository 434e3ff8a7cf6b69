// vkcompute resident megakernel: workers stay running and serve tasks the
// host pushes into a ring while they run (src/megakernel/resident.rs).
// The host assembles: "#version 450", the MKR_* defines, this file up to
// the user-code marker, the user's GLSL, then the rest.
//
// Defines set by the host:
//   MKR_LOCAL_SIZE    invocations per worker
//   MKR_SLOTS         ring slots (a power of two)
//   MKR_CLOCK         0: iteration budgets, 1: device clock, 2: subgroup clock
//   MKR_SINGLE        1: one worker, which keeps the claim counter in a
//                     register and claims with a store
//   MKR_ORDERED_DATA  1: a device-scope release fence between a task's data
//                     writes and its completion (ResidentConfig::ordered_data)
//   MKR_LOOP_CHECK    1: after every task, check that no lane's loops were
//                     cut short (llvmpipe's loop limit)
//   MKR_MEMORY_MODEL  1: acquire/release atomics under the Vulkan memory
//                     model at device scope, with MakeVisible/MakeAvailable
//                     (the ring is host memory or host-visible device
//                     memory); 0: atomics + memoryBarrierBuffer
//
// The user's code is the drain-mode megakernel's: it defines MK_OP_COUNT
// and uint run_task(inout MkTask t, uint lane, uint lanes), reads and
// writes mk_data, and returns MK_DONE or MK_FAULTED (other words fault the
// task with MK_FAULT_BAD_RETURN: the resident ring does not re-queue).
//
// Every wait reads through an atomic (a plain or volatile load in a spin
// was silently hoisted: notes/persistent-kernels.md) and is bounded by the
// idle budget, the wall-time budget and a loop bound.

#if MKR_MEMORY_MODEL
#pragma use_vulkan_memory_model
#extension GL_KHR_memory_scope_semantics : require
#endif
#if MKR_CLOCK == 1
#extension GL_EXT_shader_realtime_clock : require
#elif MKR_CLOCK == 2
#extension GL_ARB_shader_clock : require
#endif

layout(local_size_x = MKR_LOCAL_SIZE) in;

#define MK_EMPTY 0u
#define MK_READY 1u
#define MK_RUNNING 2u
#define MK_DONE 3u
#define MK_PAUSED 4u
#define MK_YIELDED 5u
#define MK_REQUEUED 6u
#define MK_FAULTED 7u
#define MK_FAULT_UNKNOWN_OP 1u
#define MK_FAULT_INPUT_OOB 2u
#define MK_FAULT_OUTPUT_OOB 3u
#define MK_FAULT_TASK 4u
#define MK_FAULT_BAD_RETURN 5u
// The driver ended some of the worker's loops during the task (llvmpipe's
// loop limit): its results are not to be trusted.
#define MK_FAULT_LOOP_CUT 6u

// Ring words (binding 0), each hot word on its own 128-byte line.
#define MKR_STOP 0u
#define MKR_CLAIM 32u
#define MKR_SERVED 64u
#define MKR_FAULTED 65u
#define MKR_USER 66u
#define MKR_EXIT_RING 96u
#define MKR_WORKERS_DONE 97u
#define MKR_STARTED 98u
#define MKR_SLOT_BASE 128u
#define MKR_SLOT_WORDS 16u
// Completion words (binding 1; host memory where the adapter has it, so
// only stores go there, never read-modify-writes): a copy of the exit
// reason, then 16 words per slot.
#define MKR_EXIT 0u
#define MKR_DONE_BASE 32u
#define MKR_DONE_WORDS 16u
#define MKR_DONE_TAG 8u
#define MKR_SLOT_TAG 11u
// Exit reasons.
#define MKR_RUN 0u
#define MKR_BY_STOP 1u
#define MKR_BY_WALL 2u
#define MKR_BY_IDLE 3u
#define MKR_BY_LOOP 4u

struct MkTask {
    uint state;
    uint op;
    uint priority;
    uint task_id;
    uint parent_id;
    uint input_offset;
    uint input_len;
    uint output_offset;
    uint output_len;
    uint continuation;
    uint runs;
    uint fault;
    uint params[4];
};

layout(set = 0, binding = 0) coherent buffer MkrRing { uint mkr_ring[]; };
layout(set = 0, binding = 1) coherent buffer MkrDone { uint mkr_done[]; };
layout(set = 0, binding = 2) coherent buffer MkData { float mk_data[]; };

layout(push_constant) uniform MkrParams {
    uint idle_lo;    // idle budget: clock ticks (lo, hi) or iterations (lo)
    uint idle_hi;
    uint wall_lo;    // wall-time budget: clock ticks (lo, hi) or iterations (lo)
    uint wall_hi;
    uint loop_budget; // loop iterations a worker may spend per launch (llvmpipe), else ~0
    uint two;         // 2: the trip count of the loop-cut probe
} mkr;

#if MKR_MEMORY_MODEL
#define MKR_SC gl_StorageSemanticsBuffer
#define MKR_ACQ (gl_SemanticsAcquire | gl_SemanticsMakeVisible)
#define MKR_REL (gl_SemanticsRelease | gl_SemanticsMakeAvailable)
#define MKR_AR (gl_SemanticsAcquireRelease | gl_SemanticsMakeAvailable | gl_SemanticsMakeVisible)
uint mkr_ring_load(uint i) { return atomicLoad(mkr_ring[i], gl_ScopeDevice, MKR_SC, MKR_ACQ); }
uint mkr_ring_add(uint i, uint v) { return atomicAdd(mkr_ring[i], v, gl_ScopeDevice, MKR_SC, MKR_AR); }
uint mkr_ring_cas(uint i, uint c, uint v) {
    return atomicCompSwap(mkr_ring[i], c, v, gl_ScopeDevice, MKR_SC, MKR_AR, MKR_SC, MKR_ACQ);
}
void mkr_done_store(uint i, uint v) { atomicStore(mkr_done[i], v, gl_ScopeDevice, MKR_SC, MKR_REL); }
void mkr_done_store_relaxed(uint i, uint v) { atomicStore(mkr_done[i], v, gl_ScopeDevice, 0, gl_SemanticsRelaxed); }
void mkr_ring_store_relaxed(uint i, uint v) { atomicStore(mkr_ring[i], v, gl_ScopeDevice, 0, gl_SemanticsRelaxed); }
uint mkr_ring_add_relaxed(uint i, uint v) { return atomicAdd(mkr_ring[i], v, gl_ScopeDevice, 0, gl_SemanticsRelaxed); }
void mkr_fence_release() { memoryBarrier(gl_ScopeDevice, MKR_SC, MKR_REL); }
void mkr_sync() {
    controlBarrier(gl_ScopeWorkgroup, gl_ScopeWorkgroup,
                   gl_StorageSemanticsBuffer | gl_StorageSemanticsShared, gl_SemanticsAcquireRelease);
}
#else
uint mkr_ring_load(uint i) { uint v = atomicAdd(mkr_ring[i], 0u); memoryBarrierBuffer(); return v; }
uint mkr_ring_add(uint i, uint v) { memoryBarrierBuffer(); uint r = atomicAdd(mkr_ring[i], v); memoryBarrierBuffer(); return r; }
uint mkr_ring_cas(uint i, uint c, uint v) { memoryBarrierBuffer(); uint r = atomicCompSwap(mkr_ring[i], c, v); memoryBarrierBuffer(); return r; }
void mkr_done_store(uint i, uint v) { memoryBarrierBuffer(); atomicExchange(mkr_done[i], v); }
void mkr_done_store_relaxed(uint i, uint v) { atomicExchange(mkr_done[i], v); }
void mkr_ring_store_relaxed(uint i, uint v) { atomicExchange(mkr_ring[i], v); }
uint mkr_ring_add_relaxed(uint i, uint v) { return atomicAdd(mkr_ring[i], v); }
void mkr_fence_release() { memoryBarrierBuffer(); }
void mkr_sync() { memoryBarrierBuffer(); barrier(); memoryBarrierBuffer(); }
#endif

// Counts something for the host (ResidentStats::user_counter).
void mk_count_user(uint n) { mkr_ring_add(MKR_USER, n); }

//@@USER@@

#define MK_CHUNK 1024u
shared MkTask mkr_s_task;
shared uint mkr_s_ticket;
shared uint mkr_s_reason;
shared uint mkr_s_arrived;
shared uint mkr_s_cut;

// Whether the driver has started cutting this invocation's loops short: a
// loop of `two` iterations (unknown to the compiler) then runs once.
bool mkr_loops_cut() {
    uint k = 0u;
    for (uint j = 0u; j < mkr.two; j++) k += 1u;
    return k != mkr.two;
}

// ---- budgets, lane 0 only: 64-bit (lo, hi) clock arithmetic ----
uvec2 mkr_now() {
#if MKR_CLOCK == 1
    return clockRealtime2x32EXT();
#elif MKR_CLOCK == 2
    return clock2x32ARB();
#else
    return uvec2(0u);
#endif
}
uvec2 mkr_since(uvec2 t0) {
    uvec2 c = mkr_now();
    return uvec2(c.x - t0.x, c.y - t0.y - (c.x < t0.x ? 1u : 0u));
}
// A "negative" span (the clock stepped back: a CPU core's cycle counter
// read after the thread moved to another core, on lavapipe) is not over:
// it must not look like 2^64 ticks elapsed.
bool mkr_over(uvec2 e, uint lo, uint hi) {
    return e.y < 0x80000000u && (e.y > hi || (e.y == hi && e.x >= lo));
}

uvec2 mkr_start;
uvec2 mkr_last_work;
uint mkr_iters = 0u;
uint mkr_idle_iters = 0u;
uint mkr_tasks = 0u;
// Loop iterations one task may cost a worker's busiest lanes, counted
// against loop_budget.
#define MKR_TASK_LOOP_COST 64u

bool mkr_loops_spent() {
    return mkr_iters + mkr_tasks * MKR_TASK_LOOP_COST >= mkr.loop_budget;
}

// Why to stop now (MKR_RUN: keep going). Counts one iteration.
uint mkr_should_stop() {
    mkr_iters += 1u;
    mkr_idle_iters += 1u;
    if (mkr_ring_load(MKR_STOP) != 0u) return MKR_BY_STOP;
    if (mkr_loops_spent()) return MKR_BY_LOOP;
#if MKR_CLOCK != 0
    if (mkr_over(mkr_since(mkr_start), mkr.wall_lo, mkr.wall_hi)) return MKR_BY_WALL;
    if (mkr_over(mkr_since(mkr_last_work), mkr.idle_lo, mkr.idle_hi)) return MKR_BY_IDLE;
#else
    if (mkr_iters >= mkr.wall_lo) return MKR_BY_WALL;
    if (mkr_idle_iters >= mkr.idle_lo) return MKR_BY_IDLE;
#endif
    return MKR_RUN;
}

// Tags (layout.rs `tag`): a hash of the sequence word and a record's
// words, checked before the words are trusted (stores across the bus need
// not arrive in order). Each word is hashed with its position on its own
// and the hashes are XORed, so the terms are computed in parallel.
uint mkr_seed(uint seq) { uint x = seq * 0x9E3779B1u; return x ^ (x >> 13); }
uint mkr_term(uint w, uint k) { uint x = (w + k * 0x7F4A7C15u) * 0x85EBCA77u; return x ^ (x >> 15); }

uint mkr_w[16];   // lane 0: the words of the claimed slot

// One look at the ring: claims the next published task whose words have
// all arrived (true: its ticket in `ticket`, its words in mkr_w) or finds
// none. The slot's words are loaded with its sequence word, not after it:
// the host publishes all sixteen in one write-combined burst with no
// order among them, so only the tag (a hash of the sequence word and the
// others) says they belong together, and a look costs one memory round
// trip instead of two.
#if MKR_SINGLE
uint mkr_claim;   // lane 0 of the only worker: the next ticket
#endif
bool mkr_try_claim(inout uint ticket) {
#if MKR_SINGLE
    uint c = mkr_claim;
#else
    uint c = mkr_ring_load(MKR_CLAIM);
#endif
    uint base = MKR_SLOT_BASE + (c & (MKR_SLOTS - 1u)) * MKR_SLOT_WORDS;
    uint tag = mkr_ring[base + MKR_SLOT_TAG];
    for (uint i = 1u; i < 16u; i++) mkr_w[i] = mkr_ring[base + i];
    uint seq = mkr_ring_load(base);
    if (seq != c + 1u) return false;
    // Positions 1..14 are words 1..10 and 12..15 (word 11 is the tag).
    uint h = ((mkr_seed(seq) ^ mkr_term(mkr_w[1], 1u)) ^ (mkr_term(mkr_w[2], 2u) ^ mkr_term(mkr_w[3], 3u)))
        ^ ((mkr_term(mkr_w[4], 4u) ^ mkr_term(mkr_w[5], 5u)) ^ (mkr_term(mkr_w[6], 6u) ^ mkr_term(mkr_w[7], 7u)));
    uint h2 = ((mkr_term(mkr_w[8], 8u) ^ mkr_term(mkr_w[9], 9u)) ^ (mkr_term(mkr_w[10], 10u) ^ mkr_term(mkr_w[12], 11u)))
        ^ ((mkr_term(mkr_w[13], 12u) ^ mkr_term(mkr_w[14], 13u)) ^ mkr_term(mkr_w[15], 14u));
    if ((h ^ h2) != tag) return false;   // words in flight, or of the slot's last lap
#if MKR_SINGLE
    mkr_claim = c + 1u;
    // For the host and the next launch; it orders nothing, so no fence.
    mkr_ring_store_relaxed(MKR_CLAIM, c + 1u);
#else
    if (mkr_ring_cas(MKR_CLAIM, c, c + 1u) != c) return false;
#endif
    ticket = c;
    return true;
}

// Lane 0: waits for a task (MKR_RUN, its ticket in `ticket`) or a reason
// to stop. Eight looks per loop iteration: llvmpipe ends an invocation's
// loops after 65,535 iterations in all.
uint mkr_wait(inout uint ticket) {
    if (mkr_loops_spent()) return MKR_BY_LOOP;
    for (uint o = 0u; o < 0xffffu; o++) {
        for (uint i = 0u; i < MK_CHUNK; i++) {
            if (mkr_try_claim(ticket) || mkr_try_claim(ticket) || mkr_try_claim(ticket)
                || mkr_try_claim(ticket) || mkr_try_claim(ticket) || mkr_try_claim(ticket)
                || mkr_try_claim(ticket) || mkr_try_claim(ticket)) {
                return MKR_RUN;
            }
            uint why = mkr_should_stop();
            if (why != MKR_RUN) return why;
        }
    }
    return MKR_BY_LOOP;
}

uint mkr_check(MkTask t) {
    uint len = uint(mk_data.length());
    if (t.op >= uint(MK_OP_COUNT)) return MK_FAULT_UNKNOWN_OP;
    if (t.input_len > len || t.input_offset > len - t.input_len) return MK_FAULT_INPUT_OOB;
    if (t.output_len > len || t.output_offset > len - t.output_len) return MK_FAULT_OUTPUT_OOB;
    return 0u;
}

void main() {
    uint lane = gl_LocalInvocationIndex;
    if (lane == 0u) {
        mkr_start = mkr_now();
        mkr_last_work = mkr_start;
        mkr_ring_add(MKR_STARTED, 1u);
#if MKR_SINGLE
        mkr_claim = mkr_ring_load(MKR_CLAIM);
#endif
    }
    uint reason = MKR_BY_LOOP;
    bool stopped = false;
    bool cut = false;
    for (uint o = 0u; o < 0xffffu && !stopped; o++) {
        for (uint k = 0u; k < MK_CHUNK; k++) {
            if (lane == 0u) {
                uint ticket = 0u;
                uint why = cut ? MKR_BY_LOOP : mkr_wait(ticket);
                mkr_s_arrived = 0u;
                mkr_s_cut = 0u;
                mkr_s_reason = why;
                mkr_s_ticket = ticket;
                if (why == MKR_RUN) {
                    MkTask t;
                    t.state = MK_RUNNING;
                    t.op = mkr_w[1];
                    t.priority = mkr_w[2];
                    t.task_id = mkr_w[3];
                    t.parent_id = mkr_w[4];
                    t.input_offset = mkr_w[5];
                    t.input_len = mkr_w[6];
                    t.output_offset = mkr_w[7];
                    t.output_len = mkr_w[8];
                    t.continuation = mkr_w[9];
                    t.runs = mkr_w[10];
                    t.fault = 0u;
                    t.params[0] = mkr_w[12];
                    t.params[1] = mkr_w[13];
                    t.params[2] = mkr_w[14];
                    t.params[3] = mkr_w[15];
                    mkr_s_task = t;
                }
            }
            mkr_sync();
            if (mkr_s_reason != MKR_RUN) {
                reason = mkr_s_reason;
                stopped = true;
                break;
            }
            MkTask t = mkr_s_task;
            uint ticket = mkr_s_ticket;
            uint fault = mkr_check(t);
            uint result = MK_FAULTED;
            if (fault == 0u) {
                result = run_task(t, lane, uint(MKR_LOCAL_SIZE));
            }
            // Every lane checks in; a lane whose loops the driver cut (now or
            // at an earlier task, when it left the worker loop) fails it.
#if MKR_LOOP_CHECK
            atomicAdd(mkr_s_arrived, 1u);
            if (mkr_loops_cut()) atomicOr(mkr_s_cut, 1u);
#endif
            mkr_sync();
            if (lane == 0u) {
                uint state = MK_DONE;
#if MKR_LOOP_CHECK
                cut = mkr_s_cut != 0u || mkr_s_arrived != uint(MKR_LOCAL_SIZE);
#endif
                if (cut) {
                    state = MK_FAULTED;
                    fault = MK_FAULT_LOOP_CUT;
                    t.params[2] = mkr_s_arrived;
                    t.params[3] = mkr_s_cut + 2u * mkr_tasks;
                } else if (fault != 0u) {
                    state = MK_FAULTED;
                } else if (result == MK_FAULTED) {
                    state = MK_FAULTED;
                    fault = MK_FAULT_TASK;
                } else if (result != MK_DONE) {
                    state = MK_FAULTED;
                    fault = MK_FAULT_BAD_RETURN;
                }
#if MKR_ORDERED_DATA
                // The workgroup's data writes (ordered before lane 0 by the
                // barrier above) reach the device's memory before the record.
                mkr_fence_release();
#endif
                uint rec = MKR_DONE_BASE + (ticket & (MKR_SLOTS - 1u)) * MKR_DONE_WORDS;
                mkr_done[rec + 1u] = state;
                mkr_done[rec + 2u] = fault;
                mkr_done[rec + 3u] = t.task_id;
                mkr_done[rec + 4u] = t.params[0];
                mkr_done[rec + 5u] = t.params[1];
                mkr_done[rec + 6u] = t.params[2];
                mkr_done[rec + 7u] = t.params[3];
                uint h = ((mkr_seed(ticket + 1u) ^ mkr_term(state, 1u)) ^ (mkr_term(fault, 2u) ^ mkr_term(t.task_id, 3u)))
                    ^ ((mkr_term(t.params[0], 4u) ^ mkr_term(t.params[1], 5u))
                       ^ (mkr_term(t.params[2], 6u) ^ mkr_term(t.params[3], 7u)));
                mkr_done[rec + MKR_DONE_TAG] = h;
                // No release fence before the sequence word: the host trusts
                // the record only once its tag matches, so the words need no
                // order, and a device-scope fence here waited for these
                // stores to cross the bus (+0.6 µs per task on an H100,
                // docs/PERF.md). The task's writes to mk_data are ordered
                // before the record only with MKR_ORDERED_DATA (above);
                // otherwise they are read once the launch has ended: any
                // batch or host read that uses mk_data waits for that (the
                // execution model's automatic wait).
                mkr_done_store_relaxed(rec, ticket + 1u);
                mkr_ring_add_relaxed(state == MK_DONE ? MKR_SERVED : MKR_FAULTED, 1u);
                mkr_last_work = mkr_now();
                mkr_idle_iters = 0u;
                mkr_tasks += 1u;
            }
        }
    }
    if (lane == 0u) {
        if (mkr_ring_cas(MKR_EXIT_RING, 0u, reason) == 0u) {
            mkr_done_store(MKR_EXIT, reason);   // the first worker to end names why
        }
        mkr_ring_add(MKR_WORKERS_DONE, 1u);
    }
}
