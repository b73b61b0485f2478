// SPDX-License-Identifier: GPL-2.0

//! The responder's queue of responses still to build, and the slots of
//! the READ/atomic requests it remembers for duplicates
//! (`engine::rc::responder::RdTable`).

use kernel::prelude::*;

use crate::{
    abi::MAX_QP_RD_ATOM,
    engine::{psn::Psn, rc::responder::RdEntry, wire::Syndrome},
};

/// A response still to build.
#[derive(Clone, Copy)]
pub(super) enum RespItem {
    Read(ReadItem),
    Ack {
        syndrome: Syndrome,
        psn: u32,
        msn: u32,
    },
    AtomicAck {
        psn: u32,
        msn: u32,
        orig: u64,
    },
}

/// The responses of one READ request still to build: packet `next` of
/// `npkts` (PSNs from `psn`), cut at the path MTU the request was accepted
/// at (`mtu`, kept with the item: a later MTU change cannot move the
/// offsets).
#[derive(Clone, Copy)]
pub(super) struct ReadItem {
    pub(super) va: u64,
    pub(super) rkey: u32,
    pub(super) len: u32,
    pub(super) psn: u32,
    pub(super) npkts: u32,
    pub(super) next: u32,
    pub(super) msn: u32,
    pub(super) mtu: u32,
    /// Answers a duplicate (does not count against `max_dest_rd_atomic`).
    pub(super) replay: bool,
}

impl ReadItem {
    /// Byte offset and length of packet `next`, or `None` if it does not
    /// fit (no arithmetic here can overflow).
    pub(super) fn packet(&self) -> Option<(u32, u32)> {
        let off = self.next.checked_mul(self.mtu)?;
        let n = self.len.saturating_sub(off).min(self.mtu);
        Some((off, n))
    }

    /// Whether this READ's responses include PSN `psn`.
    pub(super) fn covers(&self, psn: Psn) -> bool {
        psn.distance_from(Psn::new(self.psn)) < self.npkts
    }
}

/// Responses queued behind a READ (more than `max_dest_rd_atomic`, 128,
/// READs plus the ACKs between them).
const RESP_QUEUE: usize = 160;

/// A fixed ring of [`RespItem`]s: the responses not yet built, in PSN
/// order. READ responses are built a burst at a time (a large READ must not
/// become thousands of packets at once), and an ACK or atomic ACK for a
/// later request waits behind them. Heap-allocated: it is too large for a
/// kernel stack. Also holds the slots of the remembered READ/atomic
/// requests (`rd`, one per possible `max_dest_rd_atomic`).
pub(crate) struct RespQueue {
    items: KVec<Option<RespItem>>,
    head: usize,
    len: usize,
    pub(super) rd: KVec<RdEntry>,
    /// The last pump stopped on a response it could not build now (no
    /// memory, or ODP pages to fault in): its next pass is the work
    /// item's, which runs at normal priority and may sleep, rather than a
    /// receive thread's.
    stalled: bool,
}

impl RespQueue {
    /// An empty queue of [`RESP_QUEUE`] entries.
    pub(crate) fn new() -> Result<Self> {
        let mut items = KVec::with_capacity(RESP_QUEUE, GFP_KERNEL)?;
        for _ in 0..RESP_QUEUE {
            items.push(None, GFP_KERNEL)?;
        }
        let rd = KVec::from_elem(RdEntry::default(), MAX_QP_RD_ATOM as usize, GFP_KERNEL)?;
        Ok(Self {
            items,
            head: 0,
            len: 0,
            rd,
            stalled: false,
        })
    }

    /// Whether the last pump stopped on a response it could not build.
    pub(crate) fn stalled(&self) -> bool {
        self.stalled
    }

    /// Records whether a pump stopped on a response it could not build.
    pub(super) fn set_stalled(&mut self, stalled: bool) {
        self.stalled = stalled;
    }

    /// Drops every queued response.
    pub(crate) fn clear(&mut self) {
        for i in self.items.iter_mut() {
            *i = None;
        }
        self.head = 0;
        self.len = 0;
        self.stalled = false;
    }

    fn slot(&mut self, i: usize) -> Option<&mut Option<RespItem>> {
        let cap = self.items.len();
        self.items.get_mut(i % cap.max(1))
    }

    pub(super) fn push(&mut self, item: RespItem) -> bool {
        // A new ACK replaces an ACK at the tail: ACKs are cumulative.
        if let (RespItem::Ack { .. }, Some(last)) = (item, self.len.checked_sub(1)) {
            let i = self.head + last;
            if let Some(slot @ Some(RespItem::Ack { .. })) = self.slot(i) {
                *slot = Some(item);
                return true;
            }
        }
        if self.len >= self.items.len() {
            return false;
        }
        let i = self.head + self.len;
        match self.slot(i) {
            Some(slot) => *slot = Some(item),
            None => return false,
        }
        self.len += 1;
        true
    }

    pub(super) fn front(&self) -> Option<RespItem> {
        if self.len == 0 {
            None
        } else {
            self.items.get(self.head).copied().flatten()
        }
    }

    pub(super) fn set_front(&mut self, item: RespItem) {
        if self.len != 0 {
            let h = self.head;
            if let Some(slot) = self.slot(h) {
                *slot = Some(item);
            }
        }
    }

    pub(super) fn pop(&mut self) {
        if self.len != 0 {
            let h = self.head;
            if let Some(slot) = self.slot(h) {
                *slot = None;
            }
            self.head = (self.head + 1) % self.items.len().max(1);
            self.len -= 1;
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// How many responses are queued.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The queued items, oldest first: the `len` slots from `head` on,
    /// wrapping (per READ request, so no walk of the empty slots).
    fn queued_mut(&mut self) -> impl Iterator<Item = &mut RespItem> {
        let len = self.len;
        let head = self.head.min(self.items.len());
        let (before, from_head) = self.items.split_at_mut(head);
        Iterator::chain(from_head.iter_mut(), before.iter_mut())
            .take(len)
            .filter_map(|it| it.as_mut())
    }

    /// READ requests (not replays) whose responses are not all built yet:
    /// what counts against `max_dest_rd_atomic`.
    pub(super) fn outstanding(&mut self) -> usize {
        self.queued_mut()
            .filter(|it| matches!(it, RespItem::Read(r) if !r.replay))
            .count()
    }

    /// Restarts the queued READ whose responses include `r.psn` at `r`
    /// (a duplicate asked again while its responses are still being
    /// built); `false` if none is queued.
    pub(super) fn restart_read(&mut self, r: ReadItem) -> bool {
        let psn = Psn::new(r.psn);
        for it in self.queued_mut() {
            if let RespItem::Read(q) = it {
                if q.covers(psn) || Psn::new(q.psn).distance_from(psn) < r.npkts {
                    *q = ReadItem {
                        replay: q.replay,
                        ..r
                    };
                    return true;
                }
            }
        }
        false
    }
}

/// Checks run by KUnit.
#[cfg(CONFIG_KUNIT)]
pub(crate) mod selftest {
    use super::{ReadItem, RespItem, RespQueue, RESP_QUEUE};

    fn read(psn: u32, npkts: u32, replay: bool) -> RespItem {
        RespItem::Read(ReadItem {
            va: 0x1000,
            rkey: 7,
            len: npkts * 1024,
            psn,
            npkts,
            next: 0,
            msn: 0,
            mtu: 1024,
            replay,
        })
    }

    /// The queued items are walked oldest first, wrapping round the ring:
    /// what counts against `max_dest_rd_atomic`, and which READ a
    /// duplicate restarts.
    pub(crate) fn oldest_first() -> Result<(), &'static str> {
        let mut q = RespQueue::new().map_err(|_| "no memory")?;
        // Move the head near the end of the ring, so that what follows
        // wraps.
        for _ in 0..RESP_QUEUE - 2 {
            if !q.push(RespItem::AtomicAck {
                psn: 0,
                msn: 0,
                orig: 0,
            }) {
                return Err("push refused on an empty queue");
            }
            q.pop();
        }
        // Two READs before the wrap, one after it; the middle one is a
        // replay. The first and third both reach PSN 105 (the third's
        // window: `distance_from(105) < npkts`).
        for it in [
            read(100, 10, false),
            read(110, 2, true),
            read(104, 4, false),
        ] {
            if !q.push(it) {
                return Err("push refused");
            }
        }
        if q.len() != 3 {
            return Err("three items pushed, length is not 3");
        }
        if q.outstanding() != 2 {
            return Err("outstanding READs across the wrap miscounted");
        }
        // A duplicate from PSN 105: the oldest queued READ covering it
        // (PSN 100) is restarted, not the newer one past the wrap.
        let dup = ReadItem {
            va: 0x2000,
            rkey: 9,
            len: 5 * 1024,
            psn: 105,
            npkts: 5,
            next: 0,
            msn: 0,
            mtu: 1024,
            replay: true,
        };
        if !q.restart_read(dup) {
            return Err("no queued READ covers the duplicate");
        }
        match q.front() {
            Some(RespItem::Read(r)) if r.psn == 105 && r.rkey == 9 && !r.replay => {}
            _ => return Err("the duplicate did not restart the oldest READ"),
        }
        // Drain in order.
        let mut psns = [0u32; 3];
        for p in psns.iter_mut() {
            match q.front() {
                Some(RespItem::Read(r)) => *p = r.psn,
                _ => return Err("a queued READ went missing"),
            }
            q.pop();
        }
        if psns != [105, 110, 104] || !q.is_empty() {
            return Err("items not kept in order across the wrap");
        }
        Ok(())
    }
}
