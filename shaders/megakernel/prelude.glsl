// vkcompute megakernel template, part 1 of 2: declarations the user's code
// sees. The host assembles: "#version 450", the MK_* defines, this file,
// the user's GLSL, then worker.glsl (the worker loop and main).
//
// Defines set by the host:
//   MK_LOCAL_SIZE    invocations per worker (workgroup size)
//   MK_STEPS         1: device-wide step mode (user defines run_step);
//                    0: task mode (user defines run_task and MK_OP_COUNT)
//   MK_CLOCK         0: no shader clock (iteration budget), 1: device clock
//                    (GL_EXT_shader_realtime_clock), 2: subgroup clock
//                    (GL_ARB_shader_clock)
//   MK_MEMORY_MODEL  1: acquire/release atomics under the Vulkan memory
//                    model at device scope; 0: atomics + memoryBarrierBuffer
//   MK_BARRIER_FLAG  step barrier: 0 waiters poll the arrival counter,
//                    1 the last arrival publishes a generation word
//
// Every device-side wait spins on an atomic (never a plain or volatile
// load: the compiler may hoist those out of the loop) and has a budget.

#if MK_MEMORY_MODEL
#pragma use_vulkan_memory_model
#extension GL_KHR_memory_scope_semantics : require
#endif
#if MK_CLOCK == 1
#extension GL_EXT_shader_realtime_clock : require
#elif MK_CLOCK == 2
#extension GL_ARB_shader_clock : require
#endif

layout(local_size_x = MK_LOCAL_SIZE) in;

// Task states (TaskState on the host).
#define MK_EMPTY 0u
#define MK_READY 1u
#define MK_RUNNING 2u
#define MK_DONE 3u
#define MK_PAUSED 4u
#define MK_YIELDED 5u
#define MK_REQUEUED 6u
#define MK_FAULTED 7u

// Fault codes (vkcompute::megakernel::fault).
#define MK_FAULT_UNKNOWN_OP 1u
#define MK_FAULT_INPUT_OOB 2u
#define MK_FAULT_OUTPUT_OOB 3u
#define MK_FAULT_TASK 4u
#define MK_FAULT_BAD_RETURN 5u
#define MK_FAULT_LOOP_CUT 6u

// Control words: each hot counter on its own 128-byte line (32 words).
#define MK_HEAD 0u
#define MK_TAIL 32u
#define MK_PENDING 64u
#define MK_ARRIVE 96u
#define MK_GEN 128u
#define MK_CLAIMED 160u
#define MK_DONE_COUNT 161u
#define MK_FAULTED_COUNT 162u
#define MK_REQUEUED_COUNT 163u
#define MK_YIELDED_COUNT 164u
#define MK_PAUSED_COUNT 165u
#define MK_DEADLINE_HIT 166u
#define MK_SPIN_EXHAUSTED 167u
#define MK_DROPPED_REQUEUES 168u
#define MK_USER_COUNTER 169u
#define MK_WORKERS_DONE 170u
#define MK_MAX_ELAPSED_LO 171u
#define MK_MAX_ELAPSED_HI 172u
#define MK_ITERATIONS 173u
#define MK_SIZES 174u
#define MK_LOOP_CUT 177u

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

layout(set = 0, binding = 0) coherent buffer MkTasks { MkTask mk_tasks[]; };
layout(set = 0, binding = 1) coherent buffer MkControl { uint mk_ctl[]; };
layout(set = 0, binding = 2) coherent buffer MkOrder { uint mk_order[]; };
// The user's data: task offsets and lengths count its elements.
layout(set = 0, binding = 3) coherent buffer MkData { float mk_data[]; };

layout(push_constant) uniform MkParams {
    uint order_cap;      // entries the claim order can hold
    uint steps;          // step mode: steps to run
    uint spin_budget;    // iterations a device-side wait may spin
    uint iter_budget;    // iteration-budget mode: loop iterations per worker
    uint budget_lo;      // clock mode: wall-time budget in clock ticks
    uint budget_hi;
    uint two;            // 2: the trip count of the loop-cut probe
} mk;

// ---- atomics: acquire loads, release stores, acq_rel read-modify-writes ----
#if MK_MEMORY_MODEL
#define MK_ACQ gl_SemanticsAcquire
#define MK_REL gl_SemanticsRelease
#define MK_AR gl_SemanticsAcquireRelease
#define MK_SC gl_StorageSemanticsBuffer
uint mk_ctl_load(uint i) { return atomicLoad(mk_ctl[i], gl_ScopeDevice, MK_SC, MK_ACQ); }
void mk_ctl_store(uint i, uint v) { atomicStore(mk_ctl[i], v, gl_ScopeDevice, MK_SC, MK_REL); }
uint mk_ctl_add(uint i, uint v) { return atomicAdd(mk_ctl[i], v, gl_ScopeDevice, MK_SC, MK_AR); }
uint mk_ctl_max(uint i, uint v) { return atomicMax(mk_ctl[i], v, gl_ScopeDevice, MK_SC, MK_AR); }
uint mk_ctl_add_release(uint i, uint v) { return atomicAdd(mk_ctl[i], v, gl_ScopeDevice, MK_SC, MK_REL); }
uint mk_ctl_load_relaxed(uint i) { return atomicLoad(mk_ctl[i], gl_ScopeDevice, 0, gl_SemanticsRelaxed); }
void mk_fence_acquire() { memoryBarrier(gl_ScopeDevice, MK_SC, MK_ACQ); }
uint mk_order_load(uint i) { return atomicLoad(mk_order[i], gl_ScopeDevice, MK_SC, MK_ACQ); }
void mk_order_store(uint i, uint v) { atomicStore(mk_order[i], v, gl_ScopeDevice, MK_SC, MK_REL); }
// Workgroup barrier that also orders buffer memory (acquire + release).
void mk_workgroup_sync() {
    controlBarrier(gl_ScopeWorkgroup, gl_ScopeWorkgroup,
                   gl_StorageSemanticsBuffer | gl_StorageSemanticsShared, gl_SemanticsAcquireRelease);
}
#else
uint mk_ctl_load(uint i) { uint v = atomicAdd(mk_ctl[i], 0u); memoryBarrierBuffer(); return v; }
void mk_ctl_store(uint i, uint v) { memoryBarrierBuffer(); atomicExchange(mk_ctl[i], v); }
uint mk_ctl_add(uint i, uint v) { memoryBarrierBuffer(); uint r = atomicAdd(mk_ctl[i], v); memoryBarrierBuffer(); return r; }
uint mk_ctl_max(uint i, uint v) { return atomicMax(mk_ctl[i], v); }
uint mk_ctl_add_release(uint i, uint v) { memoryBarrierBuffer(); return atomicAdd(mk_ctl[i], v); }
uint mk_ctl_load_relaxed(uint i) { return atomicAdd(mk_ctl[i], 0u); }
void mk_fence_acquire() { memoryBarrierBuffer(); }
uint mk_order_load(uint i) { uint v = atomicAdd(mk_order[i], 0u); memoryBarrierBuffer(); return v; }
void mk_order_store(uint i, uint v) { memoryBarrierBuffer(); atomicExchange(mk_order[i], v); }
void mk_workgroup_sync() { memoryBarrierBuffer(); barrier(); memoryBarrierBuffer(); }
#endif

// Counts something for the host (MkReport::user_counter).
void mk_count_user(uint n) { mk_ctl_add(MK_USER_COUNTER, n); }
