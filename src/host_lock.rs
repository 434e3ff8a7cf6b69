//! The per-buffer host lock: what makes host access to a shared buffer sound.
//!
//! A [`Buffer`](crate::Buffer) is `Clone + Sync`, so several threads may
//! reach the same memory at once. Every host copy takes this lock first:
//! reads ([`Buffer::download`](crate::Buffer::download) and friends) share
//! it, writes ([`Buffer::write`](crate::Buffer::write), uploads, zeroing)
//! hold it alone, so a read never sees half of a write and two writes never
//! interleave, on the mapped and the staged path alike.
//!
//! A [`HostWords`](crate::HostWords) view (atomic words over the mapping,
//! for kernels that poll host-written memory while they run) is a third
//! kind of holder: views share the lock with each other but with no copy,
//! because a plain `memcpy` beside atomic accesses to the same bytes would be
//! a data race. A copy asked for while a view is alive is refused with
//! [`Error::HostAccessBusy`] rather than blocked (views are long-lived; a
//! copy waiting for one could wait forever); a view asked for while a copy
//! runs waits for that copy (copies are short).

use std::sync::{Condvar, Mutex, MutexGuard};

use crate::error::{Error, Result};

/// Who holds the lock now.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Holders {
    /// Host copies reading the buffer.
    readers: u32,
    /// A host copy writing the buffer.
    writer: bool,
    /// Live atomic views.
    views: u32,
}

/// What a caller asks the lock for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// A host copy out of the buffer (shared with other reads).
    Read,
    /// A host copy into the buffer (exclusive).
    Write,
    /// An atomic view (shared with other views only).
    View,
}

/// What the lock's state says about a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Decision {
    Grant,
    Wait,
    Refuse,
}

/// The pure rule: may `access` be granted with `h` holding the lock?
fn decide(h: Holders, access: Access) -> Decision {
    match access {
        Access::Read | Access::Write if h.views > 0 => Decision::Refuse,
        Access::Read if h.writer => Decision::Wait,
        Access::Write if h.writer || h.readers > 0 => Decision::Wait,
        Access::View if h.writer || h.readers > 0 => Decision::Wait,
        _ => Decision::Grant,
    }
}

fn take(h: &mut Holders, access: Access) {
    match access {
        Access::Read => h.readers += 1,
        Access::Write => h.writer = true,
        Access::View => h.views += 1,
    }
}

fn give(h: &mut Holders, access: Access) {
    match access {
        Access::Read => h.readers -= 1,
        Access::Write => h.writer = false,
        Access::View => h.views -= 1,
    }
}

/// A buffer's host lock (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct HostLock {
    state: Mutex<Holders>,
    freed: Condvar,
}

/// Holds a [`HostLock`] in one mode until dropped.
#[derive(Debug)]
pub(crate) struct HostGuard<'a> {
    lock: &'a HostLock,
    access: Access,
}

impl HostLock {
    fn state(&self) -> MutexGuard<'_, Holders> {
        // The state is three counters updated without unwinding in between:
        // a poisoned mutex still holds a consistent value.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes the lock for `access`, waiting for holders it cannot share
    /// with; `what` names the operation in the error when an atomic view
    /// makes a copy impossible.
    pub(crate) fn acquire(&self, access: Access, what: &'static str) -> Result<HostGuard<'_>> {
        let mut h = self.state();
        loop {
            match decide(*h, access) {
                Decision::Grant => break,
                Decision::Refuse => return Err(Error::HostAccessBusy { what }),
                Decision::Wait => {
                    h = self.freed.wait(h).unwrap_or_else(|p| p.into_inner());
                }
            }
        }
        take(&mut h, access);
        Ok(HostGuard { lock: self, access })
    }
}

impl Drop for HostGuard<'_> {
    fn drop(&mut self) {
        let mut h = self.lock.state();
        give(&mut h, self.access);
        drop(h);
        self.lock.freed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FREE: Holders = Holders {
        readers: 0,
        writer: false,
        views: 0,
    };

    #[test]
    fn reads_share_writes_exclude() {
        let reading = Holders { readers: 2, ..FREE };
        let writing = Holders {
            writer: true,
            ..FREE
        };
        assert_eq!(decide(FREE, Access::Read), Decision::Grant);
        assert_eq!(decide(FREE, Access::Write), Decision::Grant);
        assert_eq!(decide(reading, Access::Read), Decision::Grant);
        assert_eq!(decide(reading, Access::Write), Decision::Wait);
        assert_eq!(decide(writing, Access::Read), Decision::Wait);
        assert_eq!(decide(writing, Access::Write), Decision::Wait);
    }

    #[test]
    fn views_share_with_views_refuse_copies_and_wait_for_them() {
        let viewed = Holders { views: 1, ..FREE };
        assert_eq!(decide(viewed, Access::View), Decision::Grant);
        assert_eq!(decide(viewed, Access::Read), Decision::Refuse);
        assert_eq!(decide(viewed, Access::Write), Decision::Refuse);
        assert_eq!(
            decide(Holders { readers: 1, ..FREE }, Access::View),
            Decision::Wait
        );
        assert_eq!(
            decide(
                Holders {
                    writer: true,
                    ..FREE
                },
                Access::View
            ),
            Decision::Wait
        );
    }

    #[test]
    fn guards_release_on_drop() {
        let lock = HostLock::default();
        let w = lock.acquire(Access::Write, "write").unwrap();
        assert_eq!(
            *lock.state(),
            Holders {
                writer: true,
                ..FREE
            }
        );
        drop(w);
        let v = lock.acquire(Access::View, "view").unwrap();
        assert!(matches!(
            lock.acquire(Access::Read, "download"),
            Err(Error::HostAccessBusy { what: "download" })
        ));
        drop(v);
        let _r1 = lock.acquire(Access::Read, "download").unwrap();
        let _r2 = lock.acquire(Access::Read, "download").unwrap();
        assert_eq!(*lock.state(), Holders { readers: 2, ..FREE });
    }

    #[test]
    fn a_writer_waits_for_readers_across_threads() {
        let lock = std::sync::Arc::new(HostLock::default());
        let r = lock.acquire(Access::Read, "download").unwrap();
        let l2 = lock.clone();
        let t = std::thread::spawn(move || {
            let w = l2.acquire(Access::Write, "write").unwrap();
            let seen = *l2.state();
            drop(w);
            seen
        });
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert_eq!(lock.state().readers, 1, "the writer got in beside a reader");
        drop(r);
        let seen = t.join().unwrap();
        assert_eq!(
            seen,
            Holders {
                writer: true,
                ..FREE
            }
        );
    }
}
