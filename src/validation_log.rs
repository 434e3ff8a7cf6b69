//! What the validation layer reported on one device, and where else it goes.
//!
//! The rules are on [`ValidationLog`].

use std::collections::{HashSet, VecDeque};
use std::hash::{Hash, Hasher};
use std::io::Write;
use std::sync::Mutex;

use crate::error::Error;

/// How many messages are kept verbatim from the start; all are counted.
const KEPT_MESSAGES: usize = 64;
/// How many of the latest messages are kept for the windows of batches.
const RECENT_MESSAGES: usize = 64;
/// The `log` target validation messages are logged under.
pub(crate) const LOG_TARGET: &str = "vkcompute::validation";

/// Messages the validation layer reported on one device's instance.
///
/// The instance's debug messenger hands every warning and error of the
/// validation and performance kinds to the device's [`ValidationLog`],
/// which counts it, keeps the first and the latest ones verbatim, and makes
/// sure the user sees it even where nothing reads the log:
///
/// - **stderr without a logger.** Every such message also goes to the `log`
///   crate (target `vkcompute::validation`, level `Error`). Where no logger
///   would receive it, it is printed to stderr instead
///   ([`DeviceOptions::validation_stderr`] changes that), once per distinct
///   message: messages that differ only in their numbers (handles, sequence
///   numbers, sizes, indices) count as one, so a hazard repeated in a loop
///   prints one line. "No logger would receive it" is the `log` crate's own
///   test before it calls a logger: `Level::Error` above
///   `log::max_level()` (or the compile-time `log::STATIC_MAX_LEVEL`), or
///   `log::logger().enabled(..)` false for the message's target and level,
///   which is what the no-op logger in place until one is installed answers
///   (as does a logger whose filter leaves the target out).
/// - **errors from waits.** With [`DeviceOptions::validation_errors`] on, a
///   batch notes the log's count when it is created, and
///   [`Ticket::wait`](crate::Ticket::wait) of its ticket (so also
///   [`Batch::submit`](crate::Batch::submit)) returns
///   [`Error::Validation`] with every message the log received from that
///   moment until the wait ended. The window is a span of time on the
///   device, not a set of commands: batches that overlap in time (recorded
///   or waited for on other threads of the same device) each report the
///   messages that arrived during their own window, so a message raised by
///   one of them is reported by every batch whose window covers it. A
///   message raised outside every window (kernel creation, a transfer
///   outside a batch, teardown) is only counted.
///
/// - **one misreport set aside.** A synchronization hazard on a buffer that
///   "must protect layout transition accesses" cannot be satisfied by any
///   barrier: only images have layouts. Debian 13's Khronos layer
///   (1.4.309) reports exactly that for buffers that cooperative-matrix-2
///   kernels (`coopMatLoadTensorNV`) only read, read-only as declared,
///   whatever barrier stands between them. Such messages are counted apart
///   ([`ValidationLog::misreports`]), logged at `Debug` level and never
///   fail a wait; every other message counts as above.
///
/// Shared ([`Device::validation_log`](crate::Device::validation_log)) so it
/// outlives the device: messages emitted while the device and its instance
/// are destroyed (objects still alive at `vkDestroyDevice`, leaks) are
/// counted too, and can be read after the last clone of the device is gone.
///
/// [`DeviceOptions::validation_stderr`]: crate::DeviceOptions::validation_stderr
/// [`DeviceOptions::validation_errors`]: crate::DeviceOptions::validation_errors
#[derive(Debug, Default)]
pub struct ValidationLog {
    inner: Mutex<LogInner>,
    /// Print to stderr: always, never, or (`None`) when no logger takes it.
    stderr: Option<bool>,
    /// Whether batches open windows ([`ValidationLog::window_start`]).
    errors: bool,
}

#[derive(Debug, Default)]
struct LogInner {
    count: usize,
    /// Messages set aside by [`layer_misreport`].
    misreports: usize,
    kept: Vec<String>,
    /// The latest messages; the last is message number `count - 1`.
    recent: VecDeque<String>,
    /// Keys ([`fold_key`]) of the messages printed to stderr.
    printed: HashSet<u64>,
}

impl ValidationLog {
    /// A log that prints to stderr as `stderr` says and opens windows for
    /// batches when `errors` is on.
    pub(crate) fn with_settings(stderr: Option<bool>, errors: bool) -> Self {
        ValidationLog {
            stderr,
            errors,
            ..Default::default()
        }
    }

    /// Records a counted message, printing it to stderr where the rule
    /// says (the module's "stderr without a logger").
    pub(crate) fn record(&self, text: String) {
        if layer_misreport(&text) {
            self.inner
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .misreports += 1;
            log::debug!(target: LOG_TARGET, "set aside (a buffer has no layout): {text}");
            return;
        }
        let print = self.stderr.unwrap_or_else(|| !logger_takes_errors());
        let to_print = {
            let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
            g.count += 1;
            if g.kept.len() < KEPT_MESSAGES {
                g.kept.push(text.clone());
            }
            let fresh = print && g.printed.insert(fold_key(&text));
            let to_print = fresh.then(|| text.clone());
            if g.recent.len() == RECENT_MESSAGES {
                g.recent.pop_front();
            }
            g.recent.push_back(text);
            to_print
        };
        if let Some(text) = to_print {
            // Straight to the process's stderr; a failed write has nowhere
            // better to go.
            let _ = writeln!(std::io::stderr().lock(), "vkcompute validation: {text}");
        }
    }

    /// Warnings and errors of the validation and performance kinds so far.
    pub fn count(&self) -> usize {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).count
    }

    /// Messages set aside as the layer's misreport (the module's "one
    /// misreport set aside"), not in [`ValidationLog::count`].
    pub fn misreports(&self) -> usize {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .misreports
    }

    /// The first messages (up to 64), verbatim.
    pub fn messages(&self) -> Vec<String> {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .kept
            .clone()
    }

    /// Where a batch's window starts (the count now), or `None` when the
    /// device reports no validation errors from waits.
    pub(crate) fn window_start(&self) -> Option<usize> {
        self.errors.then(|| self.count())
    }

    /// [`Error::Validation`] with the messages received since `start` (a
    /// [`ValidationLog::window_start`]), or `None` when there were none.
    pub(crate) fn since(&self, start: usize) -> Option<Error> {
        let g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        window(&g.recent, g.count, start)
    }
}

/// The window's error (pure): `count` messages so far, the latest in
/// `recent`, the window starting at message number `start`. Lists the
/// window's messages still held, oldest first.
fn window(recent: &VecDeque<String>, count: usize, start: usize) -> Option<Error> {
    let n = count.checked_sub(start).filter(|&n| n > 0)?;
    let held = n.min(recent.len());
    let messages = recent.iter().skip(recent.len() - held).cloned().collect();
    Some(Error::Validation { count: n, messages })
}

/// Whether a `log` logger would receive an `Error` of the validation
/// target: the test the `log` macros make before calling the logger.
/// Whether `text` is a synchronization hazard on a buffer that asks for
/// protection of layout transitions (which only images have): the layer's
/// misreport the module describes. Pure.
fn layer_misreport(text: &str) -> bool {
    text.contains("SYNC-HAZARD")
        && text.contains("VkBuffer")
        && !text.contains("VkImage")
        && text.contains("must protect layout transition accesses")
}

fn logger_takes_errors() -> bool {
    let metadata = log::Metadata::builder()
        .level(log::Level::Error)
        .target(LOG_TARGET)
        .build();
    logger_takes(
        log::STATIC_MAX_LEVEL,
        log::max_level(),
        log::logger().enabled(&metadata),
    )
}

/// The rule behind [`logger_takes_errors`] (pure): an `Error` passes both
/// level filters and the logger says it is enabled for it.
fn logger_takes(static_max: log::LevelFilter, max: log::LevelFilter, enabled: bool) -> bool {
    log::Level::Error <= static_max && log::Level::Error <= max && enabled
}

/// The key under which messages are folded on stderr (pure): the text with
/// every run of hexadecimal or decimal digits (handles, sequence numbers,
/// sizes, indices) as one placeholder, hashed.
fn fold_key(text: &str) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    let mut in_number = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        let hex_prefix = c == '0' && matches!(chars.peek(), Some('x' | 'X'));
        if c.is_ascii_digit() || (in_number && c.is_ascii_hexdigit()) || hex_prefix {
            if hex_prefix {
                chars.next();
            }
            if !in_number {
                '#'.hash(&mut h);
            }
            in_number = true;
        } else {
            in_number = false;
            c.hash(&mut h);
        }
    }
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use log::LevelFilter;

    const WAW: &str = "Validation Error: [ SYNC-HAZARD-WRITE-AFTER-WRITE ] Object 0: handle = 0x90000000009, type = VK_OBJECT_TYPE_BUFFER; | MessageID = 0x5c0ec5d6 | vkCmdFillBuffer: Hazard WRITE_AFTER_WRITE (seq_no: 3, reset_no: 1).";

    #[test]
    fn only_buffer_hazards_asking_for_layout_transitions_are_set_aside() {
        let misreport = "[ SYNC-HAZARD-WRITE-AFTER-WRITE ] vkCmdDispatch(): WRITE_AFTER_WRITE \
            hazard detected. Shader stage VK_SHADER_STAGE_COMPUTE_BIT writes to VkBuffer \
            0xc100000000c1[vkcompute alloc 12288 x F16], which was previously written by \
            another vkCmdDispatch command. The current synchronization allows \
            VK_ACCESS_2_SHADER_READ_BIT accesses at VK_PIPELINE_STAGE_2_COMPUTE_SHADER_BIT, \
            but to prevent this hazard, it must protect layout transition accesses.";
        assert!(layer_misreport(misreport));
        let real = "[ SYNC-HAZARD-READ-AFTER-WRITE ] vkCmdDispatch(): Hazard READ_AFTER_WRITE \
            for VkBuffer 0x1[x]: no barrier since the write, it must protect \
            VK_ACCESS_2_SHADER_STORAGE_WRITE_BIT accesses.";
        assert!(!layer_misreport(real));
        let image = misreport.replace("VkBuffer", "VkImage");
        assert!(!layer_misreport(&image));
        let other = "[ VUID-vkCmdDispatch-None-08600 ] layout transition accesses VkBuffer";
        assert!(!layer_misreport(other), "not a synchronization hazard");
        let log = ValidationLog::with_settings(Some(false), true);
        log.record(misreport.to_string());
        log.record(real.to_string());
        assert_eq!((log.count(), log.misreports()), (1, 1));
        assert_eq!(log.messages(), [real.to_string()]);
    }

    #[test]
    fn messages_differing_only_in_numbers_fold_into_one() {
        let other = WAW
            .replace("0x90000000009", "0xa000000000a")
            .replace("seq_no: 3", "seq_no: 12")
            .replace("reset_no: 1", "reset_no: 7");
        assert_eq!(fold_key(WAW), fold_key(&other));
        let read = WAW.replace("WRITE_AFTER_WRITE", "READ_AFTER_WRITE");
        assert_ne!(fold_key(WAW), fold_key(&read));
        // Words that merely contain hex letters are not numbers.
        assert_ne!(fold_key("a dead buffer"), fold_key("a bead buffer"));
        assert_ne!(fold_key("binding 1 of set"), fold_key("binding 1 of get"));
        assert_eq!(fold_key("size 64"), fold_key("size 0x1000"));
    }

    #[test]
    fn a_logger_takes_errors_only_through_both_filters_and_enabled() {
        assert!(logger_takes(LevelFilter::Trace, LevelFilter::Error, true));
        // The no-op logger (none installed) is never enabled.
        assert!(!logger_takes(LevelFilter::Trace, LevelFilter::Trace, false));
        // `log`'s runtime filter starts at Off until a logger raises it.
        assert!(!logger_takes(LevelFilter::Trace, LevelFilter::Off, true));
        assert!(!logger_takes(LevelFilter::Off, LevelFilter::Trace, true));
    }

    #[test]
    fn a_window_holds_what_arrived_since_it_opened() {
        let log = ValidationLog::with_settings(Some(false), true);
        log.record("before".into());
        let start = log.window_start().expect("errors are on");
        assert_eq!(start, 1);
        assert!(log.since(start).is_none());
        log.record("first".into());
        log.record("second".into());
        match log.since(start) {
            Some(Error::Validation { count, messages }) => {
                assert_eq!(count, 2);
                assert_eq!(messages, ["first", "second"]);
            }
            other => panic!("expected a validation error, got {other:?}"),
        }
        // A later window sees only its own; an earlier one sees both.
        let later = log.window_start().expect("errors are on");
        log.record("third".into());
        assert!(matches!(
            log.since(later),
            Some(Error::Validation { count: 1, .. })
        ));
        assert!(matches!(
            log.since(start),
            Some(Error::Validation { count: 3, .. })
        ));
        assert_eq!(log.count(), 4);
        assert_eq!(log.messages(), ["before", "first", "second", "third"]);
        assert!(ValidationLog::with_settings(None, false)
            .window_start()
            .is_none());
    }

    #[test]
    fn a_long_window_lists_its_latest_messages_and_counts_all() {
        let log = ValidationLog::with_settings(Some(false), true);
        let start = log.window_start().expect("errors are on");
        let total = RECENT_MESSAGES + 10;
        for i in 0..total {
            log.record(format!("m{i}"));
        }
        match log.since(start) {
            Some(Error::Validation { count, messages }) => {
                assert_eq!(count, total);
                assert_eq!(messages.len(), RECENT_MESSAGES);
                assert_eq!(messages[0], "m10");
                assert_eq!(messages.last().map(String::as_str), Some("m73"));
            }
            other => panic!("expected a validation error, got {other:?}"),
        }
        assert_eq!(log.messages().len(), KEPT_MESSAGES);
        // A start past the count (never made by the log) reports nothing.
        assert!(window(&VecDeque::new(), 3, 5).is_none());
    }
}
