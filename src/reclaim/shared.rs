//! One use record shared by every buffer of a recorded graph, so a launch
//! costs the same whatever the number of buffers it uses.
//!
//! A graph's launches mark one [`SharedUse`] (its `launches`) instead of
//! each buffer's [`LastUse`]. Each buffer the graph uses holds a [`Link`]
//! to it, and the buffer's own record consults its links (hazards, marks:
//! host access, deferred release and other streams' waits all see the
//! launches). The other direction, other work using a linked buffer, is
//! gathered in the record's `others` (every use that conflicts with the
//! graph's use of that buffer), and graphs sharing a buffer they may not
//! use concurrently name each other as `peers`, so a launch orders after
//! both by reading a fixed number of words. When the graph goes, its
//! launches are folded into each buffer's own record before the link is
//! removed ([`LastUse::unlink`]), so release stays correct.

use std::sync::{Arc, Mutex, Weak};

use super::{LastUse, UseMark};

/// The launches of one graph, and what they must follow.
#[derive(Debug, Default)]
pub(crate) struct SharedUse {
    /// Every launch (used on the queue it ran on; never a write here: the
    /// link says whether a launch writes the buffer).
    pub(crate) launches: LastUse,
    /// Other work's use of the graph's buffers that a launch must follow
    /// (writes of anything, uses of what the graph writes).
    pub(crate) others: LastUse,
    /// Graphs sharing a buffer with this one where either writes it.
    peers: Mutex<Vec<Weak<SharedUse>>>,
}

/// A buffer's registration with a graph's [`SharedUse`].
#[derive(Debug, Clone)]
pub(crate) struct Link {
    pub(crate) shared: Arc<SharedUse>,
    /// Whether the graph's launches write the buffer.
    pub(crate) writes: bool,
}

impl SharedUse {
    /// A new record, behind the `Arc` buffers link to.
    pub(crate) fn new() -> Arc<SharedUse> {
        Arc::new(SharedUse::default())
    }

    /// Records a launch at `value` on queue slot `slot`.
    #[inline]
    pub(crate) fn launched(&self, slot: usize, value: u64) {
        self.launches.used_on(slot, value, false);
    }

    /// What a new launch must follow: other work's conflicting use of the
    /// graph's buffers and the launches of conflicting graphs.
    #[inline]
    pub(crate) fn hazards(&self, need: &mut UseMark) {
        self.others.hazards(true, need);
        let peers = self.peers.lock().unwrap_or_else(|p| p.into_inner());
        for p in peers.iter() {
            if let Some(p) = p.upgrade() {
                p.launches.hazards(true, need);
            }
        }
    }

    fn add_peer(&self, other: &Arc<SharedUse>) {
        let mut peers = self.peers.lock().unwrap_or_else(|p| p.into_inner());
        peers.retain(|w| w.strong_count() > 0);
        if !peers
            .iter()
            .any(|w| std::ptr::eq(w.as_ptr(), Arc::as_ptr(other)))
        {
            peers.push(Arc::downgrade(other));
        }
    }
}

impl LastUse {
    /// Registers this object with a graph's `shared` record (`writes`:
    /// whether its launches write it): later launches count as its uses,
    /// its use so far (and from now on, by other work) as what launches
    /// follow, and graphs already linked that conflict become peers.
    pub(crate) fn link(&self, shared: &Arc<SharedUse>, writes: bool) {
        let mut links = self.links.lock().unwrap_or_else(|p| p.into_inner());
        let mut before = UseMark::default();
        self.own_hazards(writes, &mut before);
        for l in links.iter() {
            if writes || l.writes {
                shared.add_peer(&l.shared);
                l.shared.add_peer(shared);
            }
        }
        for (s, v) in before.points() {
            shared.others.used_on(s, v, false);
        }
        links.push(Link {
            shared: shared.clone(),
            writes,
        });
        self.slots
            .fetch_or(super::LINKED_BIT, std::sync::atomic::Ordering::AcqRel);
    }

    /// Removes the link to `shared`, first folding its launches into this
    /// object's own record (so the last use stays known).
    pub(crate) fn unlink(&self, shared: &Arc<SharedUse>) {
        let Some(writes) = ({
            let links = self.links.lock().unwrap_or_else(|p| p.into_inner());
            links
                .iter()
                .find(|l| Arc::ptr_eq(&l.shared, shared))
                .map(|l| l.writes)
        }) else {
            return;
        };
        for (s, v) in shared.launches.mark().points() {
            self.used_on(s, v, writes);
        }
        let mut links = self.links.lock().unwrap_or_else(|p| p.into_inner());
        links.retain(|l| !Arc::ptr_eq(&l.shared, shared));
        if links.is_empty() {
            self.slots
                .fetch_and(!super::LINKED_BIT, std::sync::atomic::Ordering::AcqRel);
        }
    }

    /// Number of graphs linked (tests).
    #[cfg(test)]
    pub(crate) fn link_count(&self) -> usize {
        self.links.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pts(m: UseMark) -> Vec<(usize, u64)> {
        m.points().collect()
    }

    #[test]
    fn launches_count_as_uses_of_linked_objects() {
        let (read, written) = (LastUse::default(), LastUse::default());
        read.used_on(0, 3, true);
        let g = SharedUse::new();
        read.link(&g, false);
        written.link(&g, true);
        // The write before linking is what the first launch follows.
        let mut need = UseMark::default();
        g.hazards(&mut need);
        assert_eq!(pts(need), vec![(0, 3)]);
        g.launched(2, 9);
        assert_eq!(pts(read.mark()), vec![(0, 3), (2, 9)]);
        assert_eq!(pts(written.mark()), vec![(2, 9)]);
        // Reading the read-only object does not follow the launch; writing
        // it does; reading the written one does.
        let mut r = UseMark::default();
        read.hazards(false, &mut r);
        assert_eq!(pts(r), vec![(0, 3)]);
        let mut w = UseMark::default();
        assert!(read.hazards(true, &mut w));
        assert_eq!(pts(w), vec![(0, 3), (2, 9)]);
        let mut r2 = UseMark::default();
        assert!(written.hazards(false, &mut r2));
        assert_eq!(pts(r2), vec![(2, 9)]);
    }

    #[test]
    fn other_uses_and_conflicting_graphs_order_launches() {
        let (read, written) = (LastUse::default(), LastUse::default());
        let (a, b, c) = (SharedUse::new(), SharedUse::new(), SharedUse::new());
        read.link(&a, false);
        written.link(&a, true);
        read.link(&b, false); // both only read it: no order between a and b
        written.link(&c, false); // a writes it: a and c are peers
        read.used_on(3, 4, false); // a read of what a reads: nothing
        written.used_on(3, 5, false); // a read of what a writes
        read.used_on(4, 6, true); // a write of what a reads
        b.launched(5, 7);
        c.launched(6, 8);
        let mut need = UseMark::default();
        a.hazards(&mut need);
        assert_eq!(pts(need), vec![(3, 5), (4, 6), (6, 8)]);
        let mut nb = UseMark::default();
        b.hazards(&mut nb);
        assert_eq!(pts(nb), vec![(4, 6)]);
    }

    #[test]
    fn unlinking_folds_launches_into_the_object() {
        let x = LastUse::default();
        let g = SharedUse::new();
        x.link(&g, true);
        g.launched(0, 11);
        assert_eq!(x.link_count(), 1);
        x.unlink(&g);
        assert_eq!(x.link_count(), 0);
        g.launched(0, 12); // no longer counts
        assert_eq!(pts(x.mark()), vec![(0, 11)]);
        let mut r = UseMark::default();
        assert!(x.hazards(false, &mut r));
        assert_eq!(pts(r), vec![(0, 11)]);
    }
}
