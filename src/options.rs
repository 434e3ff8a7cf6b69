//! How a device is created: [`DeviceOptions`] and the environment
//! variables behind its defaults.

use std::path::PathBuf;
use std::time::Duration;

/// Environment variable naming the adapter: an index or a name fragment.
pub const ENV_DEVICE: &str = "VKCOMPUTE_DEVICE";
/// Environment variable that turns validation on (`1`, `true`, `yes`).
pub const ENV_VALIDATION: &str = "VKCOMPUTE_VALIDATION";
/// Environment variable behind [`DeviceOptions::validation_errors`]'s
/// default (`1`, `true`, `yes` or `on`); the test suite sets it.
pub const ENV_VALIDATION_ERRORS: &str = "VKCOMPUTE_VALIDATION_ERRORS";

/// How to create a [`Device`](crate::Device). `Default` gives what
/// [`Device::new`](crate::Device::new) uses.
#[derive(Debug, Clone)]
pub struct DeviceOptions {
    /// Adapter by index or case-insensitive name fragment. `None`: the
    /// `VKCOMPUTE_DEVICE` variable if set, else the best adapter.
    pub adapter: Option<String>,
    /// Enable the Khronos validation layer with synchronization validation.
    /// `None`: on when `VKCOMPUTE_VALIDATION` is `1`, `true` or `yes`.
    pub validation: Option<bool>,
    /// With validation on, also print each validation message (warnings and
    /// errors of the validation and performance kinds) to stderr:
    /// `Some(true)` always, `Some(false)` never, `None` only where no `log`
    /// logger would receive it (none installed, or its level or filter
    /// leaves out `Error`s of target `vkcompute::validation`). Messages that
    /// differ only in their numbers (handles, sequence numbers, sizes) are
    /// printed once. See [`ValidationLog`](crate::ValidationLog).
    pub validation_stderr: Option<bool>,
    /// With validation on, make [`Ticket::wait`](crate::Ticket::wait) (and
    /// so [`Batch::submit`](crate::Batch::submit)) of a batch's ticket
    /// return [`Error::Validation`](crate::Error::Validation) when the
    /// device's validation log received messages from the batch's creation
    /// until the wait ended. The rule is a span of time, not a set of
    /// commands: batches that overlap in time on one device (other
    /// threads) each report every message that arrived within their own
    /// span, including those another batch caused. `None`: on when
    /// `VKCOMPUTE_VALIDATION_ERRORS` is `1`, `true`, `yes` or `on` (the test
    /// suite sets it).
    pub validation_errors: Option<bool>,
    /// Use a transfer-only queue for staging copies when the adapter has one.
    pub transfer_queue: bool,
    /// Use VK_KHR_push_descriptor (`Some(true)`, where available) or
    /// pooled descriptor sets (`Some(false)`). `None` chooses per adapter:
    /// pooled sets on NVIDIA, where a push-descriptor layout was measured to
    /// add about 50 ns to every recorded dispatch (docs/PERF.md), push
    /// descriptors elsewhere. Default: `None`, or `Some(false)` when
    /// `VKCOMPUTE_PUSH_DESCRIPTORS` is `0`, `false`, `no` or `off`.
    pub push_descriptors: Option<bool>,
    /// Reach device-local memory that happens to be host-visible and cached
    /// through its mapping rather than staging copies; `false` forces staging.
    pub direct_host_access: bool,
    /// Size in bytes of each staging buffer (transfers larger than this are
    /// pipelined through two of them).
    pub staging_buffer_size: u64,
    /// Upper bound, in bytes, on the user buffers alive at once; an
    /// allocation past it fails with [`Error::OutOfMemory`](crate::Error::OutOfMemory). `None`: only the
    /// driver's limits apply.
    pub memory_budget: Option<u64>,
    /// How long a wait spins on the timeline before blocking in the driver.
    /// Spinning costs one CPU core for at most this long per wait and cuts
    /// the latency of short waits (blocking waits wake late on some drivers).
    /// Waits on graph launches are paced instead: they block until shortly
    /// before the launch is expected to end, then spin (at least this long;
    /// see [`Graph::learned_duration`](crate::Graph::learned_duration)).
    /// Zero: waits never spin.
    pub wait_spin: Duration,
    /// Directory of the on-disk caches: the driver's pipeline cache (per
    /// adapter and driver build) and GLSL compilations. `None`: the
    /// `VKCOMPUTE_CACHE_DIR` variable (`off` disables), else
    /// `$XDG_CACHE_HOME/vkcompute`, else `$HOME/.cache/vkcompute`.
    /// `Some` of an empty path disables the cache (nothing is read or written).
    pub cache_dir: Option<PathBuf>,
    /// Upper bound, in bytes, on what one binding of a large device copy
    /// covers (such copies run as dispatches of a copy kernel, split into
    /// pieces within `maxStorageBufferRange`). `None`: the adapter's
    /// `maxStorageBufferRange`. A lower value makes tests exercise the split
    /// on adapters whose binding range is larger than they can allocate.
    pub copy_binding_limit: Option<u64>,
    /// How many queues of the compute family to create (at least 1; more
    /// than the family has, or than the crate tracks, are capped): the
    /// default stream takes the first, further streams spread over the rest
    /// (with one queue, every stream shares it, still ordered and correct,
    /// but a long kernel on one stream can then delay another stream's
    /// work). Each queue costs device-creation time on some drivers.
    /// `None`: the `VKCOMPUTE_COMPUTE_QUEUES` variable if set, else
    /// [`DEFAULT_COMPUTE_QUEUES`].
    pub compute_queues: Option<u32>,
    /// Enable `VK_KHR_pipeline_executable_properties` (where the adapter
    /// lists it with its `pipelineExecutableInfo` feature) and create every
    /// pipeline with its statistics captured, so that
    /// [`Kernel::statistics`](crate::Kernel::statistics) and
    /// [`ops::builtin_statistics`](crate::ops::builtin_statistics) can say
    /// what the driver made of a kernel (registers, shared memory, spills:
    /// whatever it reports). Off by default: capturing costs
    /// pipeline-creation time, and such pipelines are compiled without the
    /// pipeline cache. Where the adapter lacks the extension the device is
    /// still created, and reading statistics is an
    /// [`Error::Unsupported`](crate::Error::Unsupported). Default: `false`,
    /// or `true` when `VKCOMPUTE_PIPELINE_STATISTICS` is `1`, `true`, `yes`
    /// or `on`.
    pub pipeline_statistics: bool,
}

/// Compute queues a device creates when [`DeviceOptions::compute_queues`]
/// and `VKCOMPUTE_COMPUTE_QUEUES` say nothing (capped by what the adapter's
/// compute family has): the default stream's, and one that further streams
/// share with it by turns, so a stream's long kernel need not hold up the
/// default stream. Each further queue cost about 20 ms of `vkCreateDevice`
/// on the H200 (docs/PERF.md: 1 queue 71 ms, 2 91 ms, 4 133 ms, 9 225 ms),
/// so more are an option, not the default.
pub const DEFAULT_COMPUTE_QUEUES: u32 = 2;

/// Environment variable behind [`DeviceOptions::compute_queues`]'s default.
pub const ENV_COMPUTE_QUEUES: &str = "VKCOMPUTE_COMPUTE_QUEUES";

/// The compute queues to create (pure): `requested` (else
/// [`DEFAULT_COMPUTE_QUEUES`]) within 1 ..= the family's `family_count`
/// and the crate's `cap`.
pub(crate) fn compute_queue_count(requested: Option<u32>, family_count: u32, cap: u32) -> u32 {
    requested
        .unwrap_or(DEFAULT_COMPUTE_QUEUES)
        .min(family_count)
        .min(cap)
        .max(1)
}

/// `VKCOMPUTE_COMPUTE_QUEUES` as a number, if set to one.
pub(crate) fn env_compute_queues() -> Option<u32> {
    std::env::var(ENV_COMPUTE_QUEUES).ok()?.trim().parse().ok()
}

impl Default for DeviceOptions {
    fn default() -> Self {
        DeviceOptions {
            adapter: None,
            validation: None,
            validation_stderr: None,
            validation_errors: None,
            transfer_queue: true,
            push_descriptors: env_off(ENV_PUSH_DESCRIPTORS).then_some(false),
            direct_host_access: true,
            staging_buffer_size: 32 << 20,
            memory_budget: None,
            wait_spin: Duration::from_micros(50),
            cache_dir: None,
            copy_binding_limit: None,
            compute_queues: None,
            pipeline_statistics: env_flag(ENV_PIPELINE_STATISTICS),
        }
    }
}

/// Environment variable behind [`DeviceOptions::pipeline_statistics`]'s
/// default (`1`, `true`, `yes` or `on`).
pub const ENV_PIPELINE_STATISTICS: &str = "VKCOMPUTE_PIPELINE_STATISTICS";

/// Environment variable that, set to `0`, `false`, `no` or `off`, makes
/// [`DeviceOptions::default`] use pooled descriptor sets instead of push
/// descriptors.
pub const ENV_PUSH_DESCRIPTORS: &str = "VKCOMPUTE_PUSH_DESCRIPTORS";

fn env_off(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| {
        matches!(
            v.trim().to_ascii_lowercase().as_str(),
            "0" | "false" | "no" | "off"
        )
    })
}

pub(crate) fn env_flag(name: &str) -> bool {
    std::env::var(name)
        .map(|v| {
            matches!(
                v.trim().to_ascii_lowercase().as_str(),
                "1" | "true" | "yes" | "on"
            )
        })
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compute_queue_count_stays_within_the_family_and_the_cap() {
        assert_eq!(
            compute_queue_count(None, 16, 9),
            DEFAULT_COMPUTE_QUEUES.min(9)
        );
        assert_eq!(compute_queue_count(None, 1, 9), 1);
        assert_eq!(compute_queue_count(Some(0), 16, 9), 1);
        assert_eq!(compute_queue_count(Some(2), 16, 9), 2);
        assert_eq!(compute_queue_count(Some(100), 16, 9), 9);
        assert_eq!(compute_queue_count(Some(4), 2, 9), 2);
        assert_eq!(
            compute_queue_count(Some(u32::MAX), u32::MAX, u32::MAX),
            u32::MAX
        );
    }
}
