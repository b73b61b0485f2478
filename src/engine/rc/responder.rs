// SPDX-License-Identifier: GPL-2.0

//! The responder's decisions: new, duplicate or out-of-sequence request,
//! the opcode sequence and payload length checks, what a duplicate is
//! answered with, and the remembered READ/atomic requests it is replayed
//! from ([`RdTable`]); the `max_dest_rd_atomic` limit and the message
//! length cap.

use crate::engine::{
    psn::{Psn, PsnClass},
    wire::{OpKind, Position},
};

/// What a request's PSN makes of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestClass {
    /// At the expected PSN: process it.
    New,
    /// Before the expected PSN (within 2^23): a retried request, answered
    /// as [`duplicate_action`] says.
    Duplicate,
    /// After the expected PSN: packets were lost. `nak`: send a PSN
    /// sequence NAK for the expected PSN (once per gap).
    OutOfSequence {
        /// The first packet of this gap: NAK it.
        nak: bool,
    },
}

/// Classifies a request at `psn` against the expected PSN `epsn`;
/// `nak_sent`: a sequence or RNR NAK was already sent for `epsn`.
pub const fn classify_request(psn: Psn, epsn: Psn, nak_sent: bool) -> RequestClass {
    match psn.classify(epsn) {
        PsnClass::Expected => RequestClass::New,
        PsnClass::Duplicate => RequestClass::Duplicate,
        PsnClass::Ahead => RequestClass::OutOfSequence { nak: !nak_sent },
    }
}

/// What a UC responder does with a request (IBA 9.8.3; rxe's
/// `check_psn` for UC): there are no NAKs and nothing is resent, so a gap
/// loses the message it falls in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UcRequest {
    /// The expected packet of the message being received: take it.
    Take,
    /// A first or only packet after a gap (or while dropping): a new
    /// message starts at its PSN; anything in progress is lost.
    Resync,
    /// A middle or last packet after a gap: dropped, with the rest of its
    /// message.
    Drop,
}

/// Classifies a UC request at `psn` against the expected `epsn`;
/// `dropping`: the message in progress already lost a packet; `starts`:
/// the packet is a first or only one.
pub const fn uc_request(psn: Psn, epsn: Psn, dropping: bool, starts: bool) -> UcRequest {
    if psn.get() == epsn.get() && !dropping {
        UcRequest::Take
    } else if starts {
        UcRequest::Resync
    } else {
        UcRequest::Drop
    }
}

/// Whether a new request of `kind` at `position` may come now: a SEND or
/// WRITE message in progress (`in_send`, `in_write`) continues with a
/// middle or last packet of its kind, else a new message starts (a first
/// or only packet, or a READ/atomic request).
pub const fn opcode_sequence_ok(
    kind: OpKind,
    position: Position,
    in_send: bool,
    in_write: bool,
) -> bool {
    let starts = matches!(position, Position::First | Position::Only);
    match kind {
        OpKind::Send => (in_send && !starts) || (!in_send && !in_write && starts),
        OpKind::RdmaWrite => (in_write && !starts) || (!in_send && !in_write && starts),
        _ => !in_send && !in_write,
    }
}

/// Whether a SEND or WRITE packet's payload of `len` bytes fits its
/// position at path MTU `mtu`: first and middle packets carry exactly one
/// MTU, a last one 1 to `mtu` bytes, an only one up to `mtu`. Other
/// requests carry no payload checked here.
pub const fn payload_len_ok(kind: OpKind, position: Position, len: usize, mtu: usize) -> bool {
    match kind {
        OpKind::Send | OpKind::RdmaWrite => match position {
            Position::First | Position::Middle => len == mtu,
            Position::Last => len != 0 && len <= mtu,
            Position::Only => len <= mtu,
        },
        _ => true,
    }
}

/// How a duplicate request is answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Duplicate {
    /// A READ (or an ATOMIC WRITE, remembered as an empty READ): answered
    /// again if it matches a remembered request
    /// ([`find_read_replay`]), from the memory as it is now, else dropped.
    ReplayRead,
    /// An atomic: its original result is sent again if it is still
    /// remembered ([`find_atomic_replay`]), else dropped.
    ReplayAtomic,
    /// A SEND or WRITE asking for an ACK: acknowledge everything received,
    /// through this PSN (the expected one minus one).
    Ack(Psn),
    /// A SEND or WRITE not asking for an ACK: drop it.
    Ignore,
}

/// What answers a duplicate request of `kind` (`ack_req`: its BTH asks for
/// an ACK) while the responder expects `epsn`.
pub const fn duplicate_action(kind: OpKind, ack_req: bool, epsn: Psn) -> Duplicate {
    match kind {
        OpKind::RdmaReadRequest | OpKind::AtomicWrite => Duplicate::ReplayRead,
        OpKind::CompareSwap | OpKind::FetchAdd => Duplicate::ReplayAtomic,
        _ if ack_req => Duplicate::Ack(epsn.prev()),
        _ => Duplicate::Ignore,
    }
}

/// Largest message length (IBTA: 2^31 bytes); a READ or WRITE asking for
/// more is an invalid request.
pub const MAX_MSG_LEN: u32 = 1 << 31;

/// Whether a RETH's DMA length is one a message may have.
pub const fn reth_len_ok(len: u32) -> bool {
    len <= MAX_MSG_LEN
}

/// Whether one more READ/atomic request may be accepted while
/// `outstanding` earlier ones still have responses to build, with the QP's
/// `max_dest_rd_atomic`. A requester keeps at most its `max_rd_atomic`
/// (never above our `max_dest_rd_atomic`) unanswered, so more is an
/// invalid request, as is any READ/atomic with a limit of 0.
pub const fn admit_rd_atomic(max_dest_rd_atomic: u8, outstanding: usize) -> bool {
    outstanding < max_dest_rd_atomic as usize
}

/// What a remembered request was.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RdKind {
    /// An empty slot.
    #[default]
    Free,
    /// An RDMA READ.
    Read,
    /// A CmpSwap or FetchAdd.
    Atomic,
}

/// A READ or atomic request the responder accepted, remembered so that a
/// duplicate of it can be answered (and one of nothing cannot).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RdEntry {
    /// Read, atomic, or a free slot.
    pub kind: RdKind,
    /// PSN of the request (the first response's).
    pub psn: u32,
    /// Response packets (1 for an atomic).
    pub npkts: u32,
    /// The request's R_Key, virtual address and length.
    pub rkey: u32,
    /// See `rkey`.
    pub va: u64,
    /// See `rkey`.
    pub len: u32,
    /// Path MTU the responses were cut at (READ).
    pub mtu: u32,
    /// An atomic's original value (what its ACK returned).
    pub orig: u64,
}

/// The last `max_dest_rd_atomic` accepted READ/atomic requests, kept in a
/// slot array the caller owns (`slots`, at least as long as any
/// `max_dest_rd_atomic` it passes as `cap`): a new request replaces the
/// oldest.
///
/// A new table (`RdTable::default()`, as the responder's state is reset
/// at RTR) has forgotten everything: whatever its slots still hold is
/// ignored by [`RdTable::find_read`] and [`RdTable::find_atomic`], and
/// cleared when it first remembers a request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RdTable {
    /// The slot the next request goes to (modulo `cap`).
    next: usize,
    /// The slots hold this table's requests (else stale ones).
    live: bool,
}

impl RdTable {
    /// Remembers `entry` in `slots[..cap]`, replacing the oldest; nothing
    /// is remembered with a `cap` of 0.
    pub fn remember(&mut self, slots: &mut [RdEntry], cap: usize, entry: RdEntry) {
        if !self.live {
            self.clear(slots);
        }
        let cap = cap.min(slots.len());
        if cap == 0 {
            return;
        }
        let i = self.next % cap;
        if let Some(s) = slots.get_mut(i) {
            *s = entry;
        }
        self.next = (i + 1) % cap;
    }

    /// Forgets every request.
    pub fn clear(&mut self, slots: &mut [RdEntry]) {
        slots.fill(RdEntry::default());
        self.next = 0;
        self.live = true;
    }

    /// [`find_read_replay`] in this table's requests.
    pub fn find_read(
        &self,
        slots: &[RdEntry],
        cap: usize,
        psn: Psn,
        req: (u32, u64, u32),
        mtu: u32,
    ) -> Option<ReadReplay> {
        self.live
            .then(|| find_read_replay(slots, cap, psn, req, mtu))
            .flatten()
    }

    /// [`find_atomic_replay`] in this table's requests.
    pub fn find_atomic(
        &self,
        slots: &[RdEntry],
        cap: usize,
        psn: Psn,
        rkey: u32,
        va: u64,
    ) -> Option<u64> {
        self.live
            .then(|| find_atomic_replay(slots, cap, psn, rkey, va))
            .flatten()
    }
}

/// How a duplicate READ is answered: responses from `psn` on, for `len`
/// bytes at `va` under `rkey` (the remembered request's, from that PSN).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadReplay {
    /// PSN of the first response to send again.
    pub psn: Psn,
    /// Where the data starts.
    pub va: u64,
    /// Bytes left from `va`.
    pub len: u32,
    /// Response packets from `psn` on.
    pub npkts: u32,
    /// The remembered R_Key.
    pub rkey: u32,
}

/// The remembered READ in `slots[..cap]` a duplicate READ at `psn` for
/// (`rkey`, `va`, `len`) repeats, at path MTU `mtu`, and how to answer
/// it; `None` if it repeats none (the duplicate is dropped).
///
/// As rxe's `find_resource`: the PSN may fall anywhere in the remembered
/// request's response PSNs (a requester resumes a READ after a lost
/// response), the R_Key must be the same and the range asked for must lie
/// inside the one remembered. The answer comes from the remembered
/// request, from that PSN on, so no duplicate reads anything the original
/// did not.
pub fn find_read_replay(
    slots: &[RdEntry],
    cap: usize,
    psn: Psn,
    (rkey, va, len): (u32, u64, u32),
    mtu: u32,
) -> Option<ReadReplay> {
    let e = slots
        .get(..cap.min(slots.len()))?
        .iter()
        .find(|e| e.kind == RdKind::Read && psn.distance_from(Psn::new(e.psn)) < e.npkts)?;
    if e.rkey != rkey || e.mtu != mtu {
        return None;
    }
    let k = psn.distance_from(Psn::new(e.psn));
    let off = u64::from(k).checked_mul(u64::from(e.mtu))?;
    let off32 = u32::try_from(off)
        .ok()
        .filter(|o| *o <= e.len || e.len == 0)?;
    let end = va.checked_add(u64::from(len))?;
    let e_end = e.va.checked_add(u64::from(e.len))?;
    if va < e.va || end > e_end {
        return None;
    }
    let left = e.len - off32.min(e.len);
    Some(ReadReplay {
        psn,
        va: e.va.checked_add(off)?,
        len: left,
        npkts: e.npkts - k,
        rkey: e.rkey,
    })
}

/// The original value of the remembered atomic in `slots[..cap]` that a
/// duplicate atomic at `psn` for (`rkey`, `va`) repeats; `None` if none
/// (the duplicate is dropped, never executed again).
pub fn find_atomic_replay(
    slots: &[RdEntry],
    cap: usize,
    psn: Psn,
    rkey: u32,
    va: u64,
) -> Option<u64> {
    slots
        .get(..cap.min(slots.len()))?
        .iter()
        .find(|e| e.kind == RdKind::Atomic && e.psn == psn.get() && e.rkey == rkey && e.va == va)
        .map(|e| e.orig)
}
