//! The crate's one error type.
//!
//! Every failure a caller can cause or meet is a variant here, naming what was
//! asked, the limit or the Vulkan call at fault. Device loss is sticky: once a
//! Vulkan call reports `VK_ERROR_DEVICE_LOST`, every later call on that device
//! returns [`Error::DeviceLost`] without touching the driver.

use std::time::Duration;

use ash::vk;

mod megakernel;
pub use megakernel::MegakernelError;

use crate::install_hint::{self, Missing};

mod ops;
pub use ops::OpsError;

/// Result alias used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in vkcompute.
/// `Clone`, so a poisoned [`Batch`](crate::Batch) can return the error that
/// poisoned it from every later call.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The Vulkan loader library could not be found or opened; the text
    /// ends with what to install on this platform.
    #[error("could not load the Vulkan loader ({0}); {advice}", advice = install_hint::advice(Missing::Loader))]
    Loader(String),

    /// A Vulkan call failed.
    #[error("{call} failed: {result}")]
    Vulkan {
        /// The Vulkan entry point that failed.
        call: &'static str,
        /// The result code it returned.
        result: vk::Result,
    },

    /// The device was lost (driver reset, GPU fault, hang). Sticky: every
    /// later operation on the same `Device` returns this too.
    #[error("the Vulkan device was lost (first seen in {call}); recreate the Device")]
    DeviceLost {
        /// The call that first reported the loss.
        call: &'static str,
    },

    /// A wait ran out of time before the GPU finished.
    #[error("timed out after {waited:?} waiting for the GPU")]
    Timeout {
        /// How long the caller waited.
        waited: Duration,
    },

    /// No Vulkan adapter with a compute queue exists: no driver is
    /// installed, none loaded (a driver manifest naming a missing
    /// library), or none offers compute. The text ends with what to
    /// install on this platform.
    #[error("no Vulkan adapter with a compute queue was found (no driver loaded, or none offers compute); {}", install_hint::advice(Missing::Driver))]
    NoAdapter,

    /// The adapter asked for (by index or name) does not exist.
    #[error("no adapter matches {requested:?}; available: {available:?}")]
    AdapterNotFound {
        /// The index or name fragment that was asked for.
        requested: String,
        /// Names of the adapters that do exist, by index.
        available: Vec<String>,
    },

    /// Validation was asked for but the loader finds no Khronos validation
    /// layer. The text ends with what to install on this platform.
    #[error("validation was asked for (DeviceOptions::validation or VKCOMPUTE_VALIDATION=1) but the loader finds no VK_LAYER_KHRONOS_validation; {}", install_hint::advice(Missing::ValidationLayer))]
    ValidationLayerMissing,

    /// The validation layer reported messages between a batch's creation
    /// and the end of the wait on its ticket, and
    /// [`DeviceOptions::validation_errors`](crate::DeviceOptions::validation_errors)
    /// is on. The span is one of time on the device: a batch overlapping
    /// in time with others on the same device (other threads) reports
    /// their messages too. The work itself completed; waiting again
    /// reports the span up to then.
    #[error("{count} validation message(s) arrived between the batch's creation and the end of its wait; {}", first_messages(messages, *count))]
    Validation {
        /// How many messages arrived in the span.
        count: usize,
        /// The span's messages the device's log still holds (its latest
        /// 64), oldest first, verbatim.
        messages: Vec<String>,
    },

    /// The adapter lacks something the operation needs.
    #[error("{what} is not supported by adapter {adapter:?}")]
    Unsupported {
        /// The missing capability.
        what: &'static str,
        /// The adapter's name.
        adapter: String,
    },

    /// A buffer of zero elements was requested.
    #[error("{what}: zero-length buffers are not allowed")]
    ZeroLength {
        /// Which operation was asked for a zero-length buffer.
        what: &'static str,
    },

    /// A buffer larger than a device limit was requested.
    #[error("buffer of {requested} bytes exceeds {limit_name} ({limit} bytes)")]
    BufferTooLarge {
        /// Bytes requested.
        requested: u64,
        /// The limit in bytes.
        limit: u64,
        /// Which limit (maxMemoryAllocationSize, maxBufferSize, memory budget).
        limit_name: &'static str,
    },

    /// The allocator has no memory left for the request.
    #[error("out of device memory allocating {requested} bytes ({detail})")]
    OutOfMemory {
        /// Bytes requested.
        requested: u64,
        /// What ran out: the configured budget or the driver's heap.
        detail: String,
    },

    /// A range of elements lies outside a buffer.
    #[error("{what}: range {start}..{end} is outside a buffer of {len} elements")]
    OutOfRange {
        /// The operation.
        what: &'static str,
        /// First element asked for.
        start: u64,
        /// One past the last element asked for.
        end: u64,
        /// The buffer's length in elements.
        len: u64,
    },

    /// A host slice's length does not match the buffer (or range) length.
    #[error("{what}: expected {expected} elements, got {got}")]
    LengthMismatch {
        /// The operation.
        what: &'static str,
        /// Elements the buffer side holds.
        expected: u64,
        /// Elements the host side holds.
        got: u64,
    },

    /// The SPIR-V module is malformed.
    #[error("invalid SPIR-V: {reason}")]
    InvalidSpirv {
        /// What is wrong with it.
        reason: String,
    },

    /// No built-in kernel has this name (`ops::builtin_names` lists them).
    #[error("no built-in kernel named {name:?} (ops::builtin_names lists the {known} there are)")]
    UnknownBuiltin {
        /// The name asked for.
        name: String,
        /// How many built-ins this build embeds.
        known: usize,
    },

    /// The requested entry point does not exist or is not a compute shader.
    #[error("no compute entry point named {requested:?}; compute entry points: {available:?}")]
    EntryPointNotFound {
        /// The entry point asked for.
        requested: String,
        /// The module's compute entry points.
        available: Vec<String>,
    },

    /// The kernel uses a resource kind this crate cannot bind.
    #[error("kernel {kernel:?}: {detail}")]
    UnsupportedShader {
        /// The kernel's label.
        kernel: String,
        /// What is unsupported.
        detail: String,
    },

    /// GLSL failed to compile; the message holds shaderc's diagnostics with line numbers.
    #[error("GLSL compilation failed:\n{message}")]
    Glsl {
        /// shaderc's error output.
        message: String,
    },

    /// WGSL failed to compile; the message holds naga's diagnostics: the
    /// file, line and column, the source line and what is wrong with it.
    #[error("WGSL compilation failed:\n{message}")]
    Wgsl {
        /// naga's error output.
        message: String,
    },

    /// A specialization constant was given a bad id or a value of the wrong size.
    #[error("kernel {kernel:?}: specialization constant {id}: {detail}")]
    SpecConstant {
        /// The kernel's label.
        kernel: String,
        /// The constant's SpecId.
        id: u32,
        /// What is wrong.
        detail: String,
    },

    /// The kernel's workgroup size exceeds the adapter's limits.
    #[error("kernel {kernel:?}: workgroup size {size:?} exceeds maxComputeWorkGroupSize {limit:?} or maxComputeWorkGroupInvocations {max_invocations}")]
    WorkgroupSizeLimit {
        /// The kernel's label.
        kernel: String,
        /// The workgroup size after specialization.
        size: [u32; 3],
        /// The adapter's per-dimension limit.
        limit: [u32; 3],
        /// The adapter's limit on invocations per workgroup.
        max_invocations: u32,
    },

    /// The kernel declares more than the crate or the adapter can bind.
    #[error("kernel {kernel:?}: {what} is {got}, over the limit of {limit}")]
    KernelLimit {
        /// The kernel's label.
        kernel: String,
        /// What is over the limit (bindings, push-constant bytes).
        what: &'static str,
        /// What the kernel declares.
        got: u64,
        /// The limit.
        limit: u64,
    },

    /// A dispatch passed the wrong number of buffers.
    #[error("kernel {kernel:?} expects {expected} buffer bindings, got {got}")]
    BindingCount {
        /// The kernel's label.
        kernel: String,
        /// Bindings the kernel declares.
        expected: usize,
        /// Buffers passed.
        got: usize,
    },

    /// A buffer cannot be bound where the kernel expects it.
    #[error("kernel {kernel:?} binding {binding}: {detail}")]
    BindingMismatch {
        /// The kernel's label.
        kernel: String,
        /// Binding number.
        binding: u32,
        /// What is wrong (kind, size, alignment, range limit).
        detail: String,
    },

    /// A buffer's element type does not fit what the kernel's binding
    /// declares: a different scalar kind (float16, float32, float64, signed
    /// or unsigned integer), or element sizes of which neither divides the
    /// other. Checked where reflection knows the binding's element and the
    /// buffer's element type is one the crate names; the rule is in
    /// [`Batch::run`](crate::Batch::run). Kernels that read raw words on
    /// purpose are built with
    /// [`KernelBuilder::raw_elements`](crate::KernelBuilder::raw_elements).
    #[error("kernel {kernel:?} binding {binding}: the kernel reads {declared} elements, the buffer holds {buffer}: {detail}; bind a buffer of matching elements, or build the kernel with KernelBuilder::raw_elements if it reads raw words on purpose")]
    ElementMismatch {
        /// The kernel's label.
        kernel: String,
        /// Binding number.
        binding: u32,
        /// The element the kernel declares, in GLSL (`float`, `uvec4`).
        declared: String,
        /// The buffer's element type, in Rust (`u32`, `[f32; 3]`, `F16`).
        buffer: String,
        /// What differs (the scalar kinds, or the sizes).
        detail: String,
    },

    /// A kernel created on another `Device` was passed.
    #[error("kernel {kernel:?} belongs to another Device")]
    ForeignKernel {
        /// The kernel's label.
        kernel: String,
    },

    /// A buffer created on another `Device` was passed.
    #[error("kernel {kernel:?} binding {binding}: buffer belongs to another Device")]
    ForeignBuffer {
        /// The kernel's label (or the operation).
        kernel: String,
        /// Binding number (0 for copies).
        binding: u32,
    },

    /// Push-constant bytes do not match the kernel's push-constant block.
    #[error("kernel {kernel:?} expects {expected} bytes of push constants, got {got}")]
    PushConstantSize {
        /// The kernel's label.
        kernel: String,
        /// Size of the kernel's push-constant block in bytes.
        expected: u32,
        /// Bytes passed.
        got: usize,
    },

    /// A dispatch of zero invocations or zero workgroups.
    #[error("kernel {kernel:?}: a dispatch needs at least one invocation (got {workgroups:?} workgroups)")]
    EmptyDispatch {
        /// The kernel's label.
        kernel: String,
        /// Workgroups asked for.
        workgroups: [u32; 3],
    },

    /// The dispatch does not fit in the adapter's workgroup-count limits.
    #[error(
        "kernel {kernel:?}: {requested:?} workgroups exceed maxComputeWorkGroupCount {limit:?}"
    )]
    WorkgroupLimit {
        /// The kernel's label.
        kernel: String,
        /// Workgroups asked for (or needed).
        requested: [u64; 3],
        /// The adapter's limit per dimension.
        limit: [u32; 3],
    },

    /// A copy or fill with mismatched or misaligned sizes.
    #[error("{what}: {detail}")]
    BadTransfer {
        /// The operation.
        what: &'static str,
        /// What is wrong.
        detail: String,
    },

    /// The GPU-side memory allocator failed.
    #[error("gpu-allocator: {0}")]
    Allocator(String),

    /// Writing the on-disk cache failed (reading never fails: a bad or
    /// missing file is ignored).
    #[error("cache file {path:?}: {detail}")]
    CacheIo {
        /// The file that could not be written.
        path: std::path::PathBuf,
        /// What went wrong.
        detail: String,
    },

    /// A host copy of a buffer was asked for while an atomic view of it
    /// ([`Buffer::host_words`](crate::Buffer::host_words)) is alive: a copy
    /// beside atomic accesses to the same bytes would be a data race. Drop
    /// the view first.
    #[error(
        "{what}: the buffer has a live HostWords view; drop it before copying to or from the host"
    )]
    HostAccessBusy {
        /// The refused operation.
        what: &'static str,
    },

    /// The operation needs the buffer's memory mapped and host-coherent
    /// (place it in [`Memory::HostVisible`](crate::Memory::HostVisible)).
    #[error("{what}: the buffer's memory is not mapped host-coherent memory ({placement:?}); allocate it with Memory::HostVisible")]
    NotHostMapped {
        /// The operation.
        what: &'static str,
        /// Where the buffer was placed.
        placement: crate::memory::Memory,
    },

    /// A result was asked for before the batch holding its command was
    /// submitted (or after that batch was dropped unsubmitted).
    #[error("{what}: the batch that records it was not submitted")]
    NotSubmitted {
        /// The operation.
        what: &'static str,
    },

    /// A wait (or a launch, or host access to a buffer) that could never
    /// end: it needs a batch of stream `stream` that is held back behind an
    /// earlier batch of that stream which the calling thread still holds
    /// open (it submitted chunks as it grew and was neither submitted nor
    /// dropped). The held-back batch reaches the queue when that batch ends.
    #[error("{what}: it needs work on stream {stream} (queue {queue}) that waits behind a batch this thread holds open on that stream; submit or drop that open batch first")]
    BatchHeldOpen {
        /// The operation.
        what: &'static str,
        /// The stream's number ([`Stream::id`](crate::Stream::id)).
        stream: u64,
        /// The stream's queue ([`Stream::queue_id`](crate::Stream::queue_id)).
        queue: usize,
    },

    /// [`Batch::run`](crate::Batch::run) was asked for more invocations
    /// than one row of workgroups holds and the launch cannot be split
    /// along x into several dispatches, or the grid's spare invocations
    /// would index past 2^32. `reason` says which: the kernel reads
    /// `gl_NumWorkGroups`, uses `gl_GlobalInvocationID` in a way the
    /// rewrite does not handle, or the indices would wrap.
    #[error("kernel {kernel:?}: {invocations} invocations in workgroups of {local_size_x} along x ({} workgroups; maxComputeWorkGroupCount[0] = {limit}) cannot be launched by Batch::run: {reason}; use Batch::run_spread with the linear-index formula it documents, or a larger local_size_x", invocations.div_ceil(u64::from(*local_size_x).max(1)))]
    LaunchTooLarge {
        /// The kernel's label.
        kernel: String,
        /// Invocations asked for.
        invocations: u64,
        /// The kernel's local size in x.
        local_size_x: u32,
        /// The adapter's `maxComputeWorkGroupCount[0]`.
        limit: u32,
        /// Why the launch could not be split.
        reason: String,
    },

    /// An object of another `Device` was passed (a ticket to wait for, a
    /// capture pool).
    #[error("{what} belongs to another Device")]
    ForeignObject {
        /// What was passed.
        what: &'static str,
    },

    /// A graph was finished with nothing recorded.
    #[error("a graph needs at least one recorded command; nothing was recorded")]
    EmptyGraph,

    /// A per-launch parameter ring of an unusable number of slots.
    #[error("Params with {requested} slots: allowed 1..={limit}")]
    ParamsSlots {
        /// Slots asked for.
        requested: usize,
        /// The most allowed.
        limit: usize,
    },

    /// A ticket, event or stream used where it cannot be: one of another
    /// device, or a join of no tickets.
    #[error("{what}")]
    BadTicket {
        /// What was wrong.
        what: &'static str,
    },

    /// An event value the host cannot set or a batch cannot wait for:
    /// setting one not above the event's current value, or one further
    /// above it than Vulkan's guaranteed `maxTimelineSemaphoreValueDifference`.
    #[error("event value {value}: {what} (current value {current}, largest step {limit})")]
    EventValue {
        /// The value asked for.
        value: u64,
        /// The event's value when asked.
        current: u64,
        /// The largest step above the current value allowed.
        limit: u64,
        /// What was wrong.
        what: &'static str,
    },

    /// A wait named while recording a graph ([`crate::Batch::wait_for`],
    /// [`crate::Batch::wait_event`] on a [`crate::GraphRecorder`]): a graph
    /// keeps no one-off wait; name the ticket at each launch
    /// ([`crate::Graph::launch_after`]) instead.
    #[error("{what} while recording a graph: a graph keeps no waits; pass the ticket to Graph::launch_after at each launch (or wait in a batch before it)")]
    WaitInGraph {
        /// The call refused.
        what: &'static str,
    },

    /// A megakernel configuration or launch argument is invalid.
    #[error("megakernel {field}: {detail}")]
    MegakernelConfig {
        /// The field (or pair of fields) at fault.
        field: &'static str,
        /// What was wrong, with the limit.
        detail: String,
    },

    /// A megakernel task slot holds a state word that names no state.
    #[error("megakernel task slot {index}: state word {word} is not a task state (0..=7)")]
    InvalidTaskState {
        /// Index of the slot in the task list.
        index: usize,
        /// The word found.
        word: u32,
    },

    /// A task state change the task life cycle does not allow.
    #[error("megakernel task {task}: {from} -> {to} is not a legal transition")]
    IllegalTaskTransition {
        /// The task's id.
        task: u32,
        /// Its state.
        from: &'static str,
        /// The state asked for.
        to: &'static str,
    },

    /// A persistent grid larger than the adapter can keep resident at once
    /// (it could deadlock or silently miscompute).
    #[error("megakernel: {requested} workers asked, but only {cap} can be resident at once ({source_of_cap})")]
    MegakernelResidency {
        /// Workers asked for.
        requested: u32,
        /// The forward-progress cap.
        cap: u32,
        /// Where the cap came from.
        source_of_cap: String,
    },

    /// Megakernel tasks ended Faulted (reported by the check call).
    #[error("megakernel: {count} task(s) faulted: {tasks:?} (task id, fault code)")]
    TasksFaulted {
        /// How many tasks are Faulted.
        count: usize,
        /// (task id, fault code) of the first faulted tasks (at most 32).
        tasks: Vec<(u32, u32)>,
    },

    /// A helper thread (the futures' waiter) could not be started.
    #[error("{what} thread failed: {detail}")]
    Thread {
        /// Which thread.
        what: &'static str,
        /// What happened.
        detail: String,
    },

    /// A one-shot result (an awaited [`Download`](crate::Download)) was
    /// asked for again after it had been handed out.
    #[error("{what} already returned its result")]
    Consumed {
        /// What was polled again.
        what: &'static str,
    },

    /// A built-in op ([`crate::ops`]) was given operands whose lengths or
    /// shapes do not fit together.
    #[error("{op}: {detail}")]
    OpShape {
        /// The op.
        op: &'static str,
        /// What does not fit, with the sizes given and expected.
        detail: String,
    },

    /// A matmul's dimensions or buffers do not fit: a zero or oversized
    /// dimension, or a buffer whose length is not the shape's.
    #[error("matmul of {m}×{k} by {k}×{n}: {detail}")]
    MatmulShape {
        /// Rows of A and C.
        m: u32,
        /// Columns of A, rows of B.
        k: u32,
        /// Columns of B and C.
        n: u32,
        /// What is wrong, with the limit.
        detail: String,
    },

    /// An [`OpBatch`](crate::ops::OpBatch) cannot give a tensor's value:
    /// it belongs to another op batch, or it was recorded (or changed in
    /// place) after the last `execute`.
    #[error("tensor unavailable: {detail}")]
    TensorUnavailable {
        /// Why, and what to do.
        detail: String,
    },

    /// The resident megakernel's ring has no free slot: every slot holds a
    /// task the kernel has not finished or whose handle is still held.
    #[error("resident megakernel ring full: all {slots} slots are in use (oldest ticket {oldest} not finished or its handle not dropped); wait on or drop older handles, or start with more ring_slots")]
    ResidentRingFull {
        /// Slots in the ring.
        slots: u32,
        /// The ticket whose slot the push needed.
        oldest: u64,
    },

    /// The resident megakernel has stopped (or is stopping), so a task
    /// cannot be pushed or was not served.
    #[error("resident megakernel stopped ({reason}): {what}")]
    ResidentStopped {
        /// Why it stopped: "stop requested", "wall-time budget", "idle", "loop bound".
        reason: &'static str,
        /// What could not be done.
        what: &'static str,
    },

    /// A kernel's SPIR-V declares a capability whose device feature is not
    /// enabled (the adapter lacks it): refused before the driver sees it.
    /// Also a capability of vkcompute's own
    /// ([`Capability`](crate::Capability)) used where the adapter lacks
    /// what it needs.
    #[error("{}", missing_feature(capability, feature, adapter))]
    MissingFeature {
        /// The SPIR-V capability, e.g. `Float16`, or vkcompute's
        /// capability as [`Capability::describe`](crate::Capability::describe)
        /// puts it (with what to use instead).
        capability: &'static str,
        /// The device feature or extension it needs, e.g. `shaderFloat16`.
        feature: &'static str,
        /// The adapter's name.
        adapter: String,
    },

    /// A megakernel failure (new megakernel failures are variants of
    /// [`MegakernelError`], defined beside this enum so the core imports
    /// no capability).
    #[error("megakernel: {0}")]
    Megakernel(#[from] MegakernelError),

    /// A transformer op ([`crate::ops::nn`]) refused its operands or
    /// parameters at record time (nothing was recorded).
    #[error(transparent)]
    Ops(#[from] OpsError),
}

/// [`Error::MissingFeature`]'s text: what needs what, and what to do.
fn missing_feature(capability: &str, feature: &str, adapter: &str) -> String {
    // SPIR-V capability names are single identifiers; vkcompute's own are
    // phrases.
    let spirv = capability.bytes().all(|b| b.is_ascii_alphanumeric());
    let what = if spirv {
        format!("the kernel needs the SPIR-V capability {capability}, which")
    } else {
        capability.to_string()
    };
    format!(
        "{what} needs {feature}; {adapter} does not have it enabled: choose an adapter that \
         has it (Device::adapters lists them, VKCOMPUTE_DEVICE picks one) or update its driver"
    )
}

/// The start of [`Error::Validation`]'s text: the first messages listed.
fn first_messages(messages: &[String], count: usize) -> String {
    const SHOWN: usize = 3;
    let mut out = String::from("the first listed:");
    for m in messages.iter().take(SHOWN) {
        out.push_str("\n  ");
        out.push_str(m);
    }
    if messages.is_empty() {
        out.push_str(" none (the log no longer holds them)");
    }
    let rest = count.saturating_sub(messages.len().min(SHOWN));
    if rest > 0 {
        out.push_str(&format!("\n  ... and {rest} more"));
    }
    out
}

impl Error {
    /// True for [`Error::DeviceLost`].
    pub fn is_device_lost(&self) -> bool {
        matches!(self, Error::DeviceLost { .. })
    }
}

/// Maps a failed Vulkan result to an error, naming the call.
///
/// `VK_ERROR_DEVICE_LOST` becomes [`Error::DeviceLost`]; the caller records
/// it in the device's sticky flag. Out-of-memory results become
/// [`Error::OutOfMemory`].
pub(crate) fn vk_error(call: &'static str, result: vk::Result) -> Error {
    match result {
        vk::Result::ERROR_DEVICE_LOST => Error::DeviceLost { call },
        vk::Result::ERROR_OUT_OF_DEVICE_MEMORY | vk::Result::ERROR_OUT_OF_HOST_MEMORY => {
            Error::OutOfMemory {
                requested: 0,
                detail: format!("{call} returned {result}"),
            }
        }
        _ => Error::Vulkan { call, result },
    }
}

/// The device's sticky loss flag: set by the first call that reports
/// `VK_ERROR_DEVICE_LOST`, checked (one atomic load) before further work.
#[derive(Debug, Default)]
pub(crate) struct Sticky(std::sync::OnceLock<&'static str>);

impl Sticky {
    /// `Err(DeviceLost)` once the device was lost.
    #[inline]
    pub(crate) fn check(&self) -> Result<()> {
        match self.0.get() {
            None => Ok(()),
            Some(call) => Err(Error::DeviceLost { call }),
        }
    }

    /// Maps a failed result to an error, recording device loss.
    pub(crate) fn fail(&self, call: &'static str, result: vk::Result) -> Error {
        let e = vk_error(call, result);
        if e.is_device_lost() {
            let _ = self.0.set(call);
            return Error::DeviceLost {
                call: self.0.get().copied().unwrap_or(call),
            };
        }
        e
    }

    /// Whether the device was lost.
    pub(crate) fn is_lost(&self) -> bool {
        self.0.get().is_some()
    }
}

#[cfg(test)]
mod tests;
