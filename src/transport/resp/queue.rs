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
        })
    }

    /// Drops every queued response.
    pub(crate) fn clear(&mut self) {
        for i in self.items.iter_mut() {
            *i = None;
        }
        self.head = 0;
        self.len = 0;
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

    /// The queued items, oldest first.
    fn queued_mut(&mut self) -> impl Iterator<Item = &mut RespItem> {
        let (head, len, cap) = (self.head, self.len, self.items.len().max(1));
        self.items
            .iter_mut()
            .enumerate()
            .filter(move |(i, _)| (i + cap - head) % cap < len)
            .filter_map(|(_, it)| it.as_mut())
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
