//! The per-device waiter thread behind [`Ticket`](crate::Ticket)'s `Future`.
//!
//! One thread per device, started at the first registration, blocks in
//! `vkWaitSemaphores` (`WAIT_ANY`) on the lowest pending value of every
//! timeline semaphore futures wait on, plus a host-signalled wake-up
//! timeline of its own. A registration that the current wait does not
//! already cover (a new semaphore, a lower value, an earlier deadline)
//! signals the wake-up timeline with `vkSignalSemaphore`, so the thread
//! rebuilds its wait set; so do device loss and shutdown. When the wait
//! returns, the thread reads each semaphore's counter once, takes the
//! wakers whose values were reached or whose deadlines passed, and wakes
//! them outside its lock. While nothing happens it sleeps in the driver.
//! Where the driver would spin in such a wait (lavapipe), the thread
//! instead reads the counters every 2 ms while waits are pending and
//! sleeps (parked, woken by registrations) while none are.
//!
//! The thread holds a clone of the `ash::Device` function table and the
//! raw handles, never the device itself, so it does not keep the device
//! alive; [`WaiterSlot::stop`] ends and joins it from `DeviceInner::drop`
//! before the device is destroyed. A waker registered for a future that
//! was dropped stays until its value completes (a spurious wake-up) or the
//! device goes away; a future polled again with a waker that
//! `will_wake` the same task is not registered twice.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::task::Waker;
use std::thread::JoinHandle;
use std::time::Instant;

use ash::vk;
use ash::vk::Handle;

use crate::error::{Result, Sticky};

/// Polling interval where `WAIT_ANY` would spin (see `Shared::wait_any`).
const POLL_SLICE: std::time::Duration = std::time::Duration::from_millis(2);

/// Wakers waiting on one timeline semaphore, by value.
type ByValue = BTreeMap<u64, Vec<Waker>>;

/// What the thread and the registering threads share.
struct Shared {
    raw: ash::Device,
    /// Whether the driver blocks in a `WAIT_ANY` wait on several
    /// semaphores. Where it does not (lavapipe: Mesa's emulated timelines
    /// spin through the set, and a blocking wait on a value that a
    /// host-gated submission signals trips the validation layer's state
    /// tracking), the thread reads the counters every [`POLL_SLICE`]
    /// while waits are pending, and sleeps (parked) while none are.
    wait_any: bool,
    /// The waiter thread, to unpark in polling mode.
    thread: OnceLock<std::thread::Thread>,
    wake: vk::Semaphore,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Last value signalled on the wake-up timeline.
    wake_value: u64,
    /// Pending waits: semaphore (raw handle) → value → wakers.
    waits: HashMap<u64, ByValue>,
    /// Deadlines: (when, sequence) → (semaphore, value, waker).
    deadlines: BTreeMap<(Instant, u64), (u64, u64, Waker)>,
    seq: u64,
    /// What the thread's current `vkWaitSemaphores` covers (None while it
    /// is not inside one: it rebuilds from `waits` before the next).
    armed: Option<Armed>,
    stop: bool,
    /// A wait failed (device loss reported by the driver, or simulated).
    lost: Option<vk::Result>,
}

struct Armed {
    /// Semaphore (raw) → the value waited for.
    values: HashMap<u64, u64>,
    deadline: Option<Instant>,
}

impl State {
    fn take_all(&mut self) -> Vec<Waker> {
        let mut out: Vec<Waker> = self
            .waits
            .drain()
            .flat_map(|(_, m)| m.into_values().flatten())
            .collect();
        out.extend(
            std::mem::take(&mut self.deadlines)
                .into_values()
                .map(|(_, _, w)| w),
        );
        out
    }
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Whether a new wait needs the thread to rebuild its wait set.
fn needs_rearm(armed: Option<&Armed>, sem: u64, value: u64, deadline: Option<Instant>) -> bool {
    let Some(a) = armed else {
        // Not inside a wait: the thread rebuilds from the state anyway.
        return false;
    };
    let covered = a.values.get(&sem).is_some_and(|&v| v <= value);
    let deadline_covered = match (deadline, a.deadline) {
        (None, _) => true,
        (Some(_), None) => false,
        (Some(d), Some(ad)) => ad <= d,
    };
    !(covered && deadline_covered)
}

/// Whether the driver named `driver_name` blocks in a `WAIT_ANY` wait on
/// several timeline semaphores (lavapipe's emulated timelines poll).
pub(crate) fn blocks_on_wait_any(driver_name: &str) -> bool {
    driver_name != "llvmpipe"
}

/// Nanoseconds from `now` until `deadline` (`u64::MAX`: none).
fn timeout_ns(now: Instant, deadline: Option<Instant>) -> u64 {
    deadline.map_or(u64::MAX, |d| {
        u64::try_from(d.saturating_duration_since(now).as_nanos()).unwrap_or(u64::MAX)
    })
}

impl Shared {
    /// Polling mode: wakes the thread from its sleep.
    fn unpark(&self) {
        if let Some(t) = self.thread.get() {
            t.unpark();
        }
    }

    fn signal_wake(&self, st: &mut State) {
        st.wake_value += 1;
        let info = vk::SemaphoreSignalInfo::default()
            .semaphore(self.wake)
            .value(st.wake_value);
        // SAFETY: `wake` is a live timeline semaphore of this device (it is
        // destroyed only after the thread was joined, and registrations end
        // before that: every future holds the device); values only grow,
        // under the state lock.
        if let Err(r) = unsafe { self.raw.signal_semaphore(&info) } {
            st.lost = Some(r);
        }
    }

    fn run(&self) {
        let mut sems: Vec<vk::Semaphore> = Vec::new();
        let mut vals: Vec<u64> = Vec::new();
        loop {
            let deadline;
            {
                let mut st = lock(&self.state);
                if st.stop {
                    return;
                }
                sems.clear();
                vals.clear();
                sems.push(self.wake);
                vals.push(st.wake_value + 1);
                let mut values = HashMap::new();
                if st.lost.is_none() {
                    for (&sem, by) in &st.waits {
                        if let Some((&v, _)) = by.first_key_value() {
                            sems.push(vk::Semaphore::from_raw(sem));
                            vals.push(v);
                            values.insert(sem, v);
                        }
                    }
                }
                deadline = st.deadlines.first_key_value().map(|((d, _), _)| *d);
                // Polling: registrations unpark the thread instead of
                // signalling (`armed` stays None).
                if self.wait_any {
                    st.armed = Some(Armed { values, deadline });
                }
            }
            let r = if self.wait_any {
                let info = vk::SemaphoreWaitInfo::default()
                    .flags(vk::SemaphoreWaitFlags::ANY)
                    .semaphores(&sems)
                    .values(&vals);
                // SAFETY: every semaphore is a live timeline semaphore of
                // this device: the wake-up one is destroyed after this
                // thread is joined, and queue timelines live as long as the
                // device, which `stop` outlives; the arrays outlive the call.
                unsafe {
                    self.raw
                        .wait_semaphores(&info, timeout_ns(Instant::now(), deadline))
                }
            } else {
                // Polling: sleep a slice (or until unparked by a
                // registration, loss or shutdown), then read the counters.
                if sems.len() > 1 {
                    let slice_end = Instant::now() + POLL_SLICE;
                    let until = deadline.map_or(slice_end, |d| d.min(slice_end));
                    std::thread::park_timeout(until.saturating_duration_since(Instant::now()));
                } else if let Some(d) = deadline {
                    std::thread::park_timeout(d.saturating_duration_since(Instant::now()));
                } else {
                    std::thread::park();
                }
                Ok(())
            };
            let woken = {
                let mut st = lock(&self.state);
                st.armed = None;
                if st.stop {
                    return;
                }
                match r {
                    Ok(()) | Err(vk::Result::TIMEOUT) => {}
                    Err(e) => st.lost = Some(e),
                }
                if st.lost.is_some() {
                    st.take_all()
                } else {
                    self.collect(&mut st)
                }
            };
            // Outside the lock: a waker may run arbitrary code.
            for w in woken {
                w.wake();
            }
        }
    }

    /// Takes the wakers whose values were reached or deadlines passed.
    fn collect(&self, st: &mut State) -> Vec<Waker> {
        let mut out = Vec::new();
        let sems: Vec<u64> = st.waits.keys().copied().collect();
        for sem in sems {
            // SAFETY: a live timeline semaphore of this device (see `run`).
            let now = match unsafe {
                self.raw
                    .get_semaphore_counter_value(vk::Semaphore::from_raw(sem))
            } {
                Ok(v) => v,
                Err(e) => {
                    st.lost = Some(e);
                    return st.take_all();
                }
            };
            if let Some(by) = st.waits.get_mut(&sem) {
                let pending = by.split_off(&(now + 1));
                let done = std::mem::replace(by, pending);
                out.extend(done.into_values().flatten());
                if by.is_empty() {
                    st.waits.remove(&sem);
                }
            }
        }
        let now = Instant::now();
        while let Some(entry) = st.deadlines.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let (sem, value, w) = entry.remove();
            // The same task's entry under its value goes too.
            if let Some(by) = st.waits.get_mut(&sem) {
                if let Some(list) = by.get_mut(&value) {
                    list.retain(|x| !x.will_wake(&w));
                    if list.is_empty() {
                        by.remove(&value);
                    }
                }
                if by.is_empty() {
                    st.waits.remove(&sem);
                }
            }
            out.push(w);
        }
        out
    }
}

/// The device's waiter: not started until a future first waits.
#[derive(Default)]
pub(crate) struct WaiterSlot {
    shared: OnceLock<Arc<Shared>>,
    thread: Mutex<Option<JoinHandle<()>>>,
    /// Semaphores of dropped [`Event`](crate::Event)s that futures waited
    /// on, destroyed with the waiter (the thread may be waiting on any of
    /// them).
    adopted: Mutex<Vec<vk::Semaphore>>,
}

impl WaiterSlot {
    fn get_or_start(
        &self,
        raw: &ash::Device,
        sticky: &Sticky,
        wait_any: bool,
    ) -> Result<&Arc<Shared>> {
        if let Some(s) = self.shared.get() {
            return Ok(s);
        }
        let mut thread = self.thread.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(s) = self.shared.get() {
            return Ok(s);
        }
        let mut type_info = vk::SemaphoreTypeCreateInfo::default()
            .semaphore_type(vk::SemaphoreType::TIMELINE)
            .initial_value(0);
        let info = vk::SemaphoreCreateInfo::default().push_next(&mut type_info);
        // SAFETY: `raw` is a live device; the info chain outlives the call.
        let wake = unsafe { raw.create_semaphore(&info, None) }
            .map_err(|r| sticky.fail("vkCreateSemaphore", r))?;
        let shared = Arc::new(Shared {
            raw: raw.clone(),
            wait_any,
            thread: OnceLock::new(),
            wake,
            state: Mutex::new(State::default()),
        });
        let runner = shared.clone();
        let spawned = std::thread::Builder::new()
            .name("vkcompute-waiter".into())
            .spawn(move || {
                let _ = runner.thread.set(std::thread::current());
                runner.run()
            });
        match spawned {
            Ok(h) => *thread = Some(h),
            Err(e) => {
                // SAFETY: the semaphore was never used.
                unsafe { raw.destroy_semaphore(wake, None) };
                return Err(crate::Error::Thread {
                    what: "vkcompute-waiter",
                    detail: e.to_string(),
                });
            }
        }
        Ok(self.shared.get_or_init(|| shared))
    }

    /// Wakes `waker` once `sem` reaches `value`, or at `deadline`, or on
    /// device loss. `Ok(false)` when the waiter already saw the device lost.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn register(
        &self,
        raw: &ash::Device,
        sticky: &Sticky,
        wait_any: bool,
        sem: vk::Semaphore,
        value: u64,
        deadline: Option<Instant>,
        waker: &Waker,
    ) -> Result<bool> {
        let shared = self.get_or_start(raw, sticky, wait_any)?;
        let key = sem.as_raw();
        let mut st = lock(&shared.state);
        if st.lost.is_some() {
            return Ok(false);
        }
        let list = st.waits.entry(key).or_default().entry(value).or_default();
        if !list.iter().any(|w| w.will_wake(waker)) {
            list.push(waker.clone());
        }
        if let Some(d) = deadline {
            st.seq += 1;
            let seq = st.seq;
            st.deadlines.insert((d, seq), (key, value, waker.clone()));
        }
        if needs_rearm(st.armed.as_ref(), key, value, deadline) {
            // The thread is inside a wait that does not cover this one.
            st.armed = None;
            shared.signal_wake(&mut st);
        }
        let ok = st.lost.is_none();
        drop(st);
        if !shared.wait_any {
            shared.unpark();
        }
        Ok(ok)
    }

    /// The failure the waiter thread saw, if any (device loss).
    pub(crate) fn failure(&self) -> Option<vk::Result> {
        self.shared.get().and_then(|s| lock(&s.state).lost)
    }

    /// Device loss: every pending future is woken (it then reports
    /// [`Error::DeviceLost`](crate::Error::DeviceLost)).
    pub(crate) fn device_lost(&self) {
        let Some(s) = self.shared.get() else { return };
        let woken = {
            let mut st = lock(&s.state);
            st.lost.get_or_insert(vk::Result::ERROR_DEVICE_LOST);
            let w = st.take_all();
            s.signal_wake(&mut st);
            w
        };
        s.unpark();
        for w in woken {
            w.wake();
        }
    }

    /// Ends the thread and destroys the wake-up semaphore. Called from the
    /// device's destructor, before the device is destroyed. When that
    /// destructor runs on the waiter thread itself (a waker dropped the
    /// last handle), the thread is not joined: it exits at its next check
    /// of the stop flag, before any further Vulkan call.
    pub(crate) fn stop(&self, raw: &ash::Device) {
        self.stop_thread(raw);
    }

    /// Destroys the adopted semaphores. Called from the device's destructor
    /// after [`WaiterSlot::stop`] and once the device is idle.
    pub(crate) fn destroy_adopted(&self, raw: &ash::Device) {
        let adopted = std::mem::take(&mut *self.adopted.lock().unwrap_or_else(|p| p.into_inner()));
        for sem in adopted {
            // SAFETY: the waiter thread is gone (or never waits again) and
            // no submission is pending (the device is idle).
            unsafe { raw.destroy_semaphore(sem, None) };
        }
    }

    /// Keeps `sem` until the device is dropped.
    pub(crate) fn adopt(&self, sem: vk::Semaphore) {
        self.adopted
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(sem);
    }

    fn stop_thread(&self, raw: &ash::Device) {
        let Some(s) = self.shared.get() else { return };
        let pending = {
            let mut st = lock(&s.state);
            st.stop = true;
            s.signal_wake(&mut st);
            st.take_all()
        };
        drop(pending);
        s.unpark();
        let handle = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(h) = handle {
            if h.thread().id() != std::thread::current().id() {
                let _ = h.join();
            }
        }
        // SAFETY: the thread has exited (joined) or runs this very code and
        // checks `stop` before any further Vulkan call; nothing else uses
        // the semaphore (the device is being destroyed).
        unsafe { raw.destroy_semaphore(s.wake, None) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn armed(values: &[(u64, u64)], deadline: Option<Instant>) -> Armed {
        Armed {
            values: values.iter().copied().collect(),
            deadline,
        }
    }

    #[test]
    fn rearm_only_when_the_wait_does_not_cover() {
        let t = Instant::now();
        let a = armed(&[(1, 10)], Some(t + Duration::from_secs(5)));
        // Not inside a wait: never signal.
        assert!(!needs_rearm(None, 1, 1, None));
        // Same semaphore, a value at or above the armed one: covered.
        assert!(!needs_rearm(Some(&a), 1, 10, None));
        assert!(!needs_rearm(Some(&a), 1, 11, None));
        // A lower value or another semaphore: rearm.
        assert!(needs_rearm(Some(&a), 1, 9, None));
        assert!(needs_rearm(Some(&a), 2, 10, None));
        // A later deadline is covered; an earlier one is not.
        assert!(!needs_rearm(
            Some(&a),
            1,
            12,
            Some(t + Duration::from_secs(6))
        ));
        assert!(needs_rearm(
            Some(&a),
            1,
            12,
            Some(t + Duration::from_secs(1))
        ));
        let b = armed(&[(1, 10)], None);
        assert!(needs_rearm(Some(&b), 1, 12, Some(t)));
    }

    #[test]
    fn timeout_counts_down_and_saturates() {
        let t = Instant::now();
        assert_eq!(timeout_ns(t, None), u64::MAX);
        assert_eq!(timeout_ns(t, Some(t)), 0);
        assert_eq!(timeout_ns(t + Duration::from_secs(1), Some(t)), 0);
        assert_eq!(timeout_ns(t, Some(t + Duration::from_millis(2))), 2_000_000);
    }
}
