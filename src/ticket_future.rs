//! Tickets as futures, with no async runtime: `ticket.await`, or
//! `ticket.with_deadline(d).await` for a wait that gives up.
//!
//! Polling reads the timeline counters the ticket depends on (one driver
//! call each) and, when the work is unfinished, hands the task's waker to
//! the device's waiter thread ([`crate::waiter`]), which wakes it when the
//! GPU signals the value, when the deadline passes, or when the device is
//! lost. The poll path does nothing else: the housekeeping that
//! [`Ticket::wait`] does inline (releasing finished objects, readying a
//! recorder) is left to the device's next blocking wait or batch. A ticket
//! of a batch held back behind an open batch of its stream is woken when
//! the batch reaches the queue (a deadline is checked each time it is
//! polled meanwhile), or resolves to [`Error::BatchHeldOpen`] when
//! polled on the thread that holds that open batch.

use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use ash::vk;

use crate::device::DeviceInner;
use crate::error::{Error, Result};
use crate::ticket::Ticket;

/// Polls until every `(semaphore, value)` in `points` is reached: the
/// shared poll step of every future the crate hands out.
pub(crate) fn poll_points(
    d: &DeviceInner,
    points: &[(vk::Semaphore, u64)],
    deadline: Option<Instant>,
    started: Instant,
    cx: &mut Context<'_>,
) -> Poll<Result<()>> {
    if let Err(e) = d.sticky.check() {
        return Poll::Ready(Err(e));
    }
    if let Some(r) = d.waiter().failure() {
        return Poll::Ready(Err(d.sticky.fail("vkWaitSemaphores", r)));
    }
    for &(sem, value) in points {
        // SAFETY: `sem` is a live timeline semaphore of `d` (a queue
        // timeline, alive as long as the device, which the caller holds).
        let now = match unsafe { d.raw.get_semaphore_counter_value(sem) } {
            Ok(v) => v,
            Err(r) => return Poll::Ready(Err(d.sticky.fail("vkGetSemaphoreCounterValue", r))),
        };
        if now >= value {
            continue;
        }
        if deadline.is_some_and(|t| Instant::now() >= t) {
            return Poll::Ready(Err(Error::Timeout {
                waited: started.elapsed(),
            }));
        }
        return match d.waiter().register(
            &d.raw,
            &d.sticky,
            crate::waiter::blocks_on_wait_any(&d.info.driver_name),
            sem,
            value,
            deadline,
            cx.waker(),
        ) {
            Ok(true) => Poll::Pending,
            Ok(false) => {
                let r = d
                    .waiter()
                    .failure()
                    .unwrap_or(vk::Result::ERROR_DEVICE_LOST);
                Poll::Ready(Err(d.sticky.fail("vkWaitSemaphores", r)))
            }
            Err(e) => Poll::Ready(Err(e)),
        };
    }
    Poll::Ready(Ok(()))
}

/// A ticket awaited by reference, optionally with a deadline: from
/// [`Ticket::wait_async`] or [`Ticket::with_deadline`]. Resolves to
/// `Ok(())` when the batch completed, [`Error::Timeout`] when the deadline
/// passed first (the ticket stays valid), [`Error::DeviceLost`] when the
/// device was lost. `Send`, `Sync` and `Unpin`.
#[must_use = "futures do nothing unless awaited or polled"]
#[derive(Debug)]
pub struct TicketWait<'a> {
    ticket: &'a Ticket,
    deadline: Option<Instant>,
    started: Instant,
}

impl Ticket {
    /// A future of this ticket's completion that borrows it (so one ticket,
    /// e.g. in an `Arc`, can be awaited by many tasks).
    pub fn wait_async(&self) -> TicketWait<'_> {
        TicketWait {
            ticket: self,
            deadline: None,
            started: Instant::now(),
        }
    }

    /// A future of this ticket's completion that resolves to
    /// [`Error::Timeout`] once `timeout` has passed (counted from this call).
    pub fn with_deadline(&self, timeout: Duration) -> TicketWait<'_> {
        let started = Instant::now();
        TicketWait {
            ticket: self,
            // A timeout too long to represent never expires.
            deadline: started.checked_add(timeout),
            started,
        }
    }
}

impl Future for TicketWait<'_> {
    type Output = Result<()>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        let mark = match self.ticket.poll_mark(cx) {
            Poll::Ready(Ok(m)) => m,
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            Poll::Pending => {
                if self.deadline.is_some_and(|t| Instant::now() >= t) {
                    return Poll::Ready(Err(Error::Timeout {
                        waited: self.started.elapsed(),
                    }));
                }
                return Poll::Pending;
            }
        };
        let (d, points) = self.ticket.wait_points(mark);
        poll_points(d, &points, self.deadline, self.started, cx)
    }
}

/// `ticket.await`: resolves when the batch completed (`Ok(())`), or to
/// [`Error::DeviceLost`]. Needs no async runtime: the
/// device's waiter thread wakes the task.
impl Future for Ticket {
    type Output = Result<()>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        let mark = match self.poll_mark(cx) {
            Poll::Ready(Ok(m)) => m,
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            Poll::Pending => return Poll::Pending,
        };
        let (d, points) = self.wait_points(mark);
        poll_points(d, &points, None, Instant::now(), cx)
    }
}

impl<'a> IntoFuture for &'a Ticket {
    type Output = Result<()>;
    type IntoFuture = TicketWait<'a>;

    /// `(&ticket).await`: waits without consuming the ticket.
    fn into_future(self) -> TicketWait<'a> {
        self.wait_async()
    }
}

const _: () = {
    const fn send_sync_unpin<T: Send + Sync + Unpin>() {}
    send_sync_unpin::<TicketWait<'static>>();
    send_sync_unpin::<Ticket>();
};
