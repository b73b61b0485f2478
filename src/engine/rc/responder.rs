// SPDX-License-Identifier: GPL-2.0

//! The responder's decisions: new, duplicate or out-of-sequence request,
//! the opcode sequence and payload length checks, what a duplicate is
//! answered with, and the remembered atomic results it is replayed from.

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
/// `nak_sent`: a sequence NAK was already sent for the current gap.
pub const fn classify_request(psn: Psn, epsn: Psn, nak_sent: bool) -> RequestClass {
    match psn.classify(epsn) {
        PsnClass::Expected => RequestClass::New,
        PsnClass::Duplicate => RequestClass::Duplicate,
        PsnClass::Ahead => RequestClass::OutOfSequence { nak: !nak_sent },
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
    /// A READ: its responses are built again from the memory as it is now
    /// (the request is checked again, not recorded).
    ReplayRead,
    /// An atomic: its original result is sent again if it is still
    /// remembered ([`AtomicReplay::lookup`]), else nothing.
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
        OpKind::RdmaReadRequest => Duplicate::ReplayRead,
        OpKind::CompareSwap | OpKind::FetchAdd => Duplicate::ReplayAtomic,
        _ if ack_req => Duplicate::Ack(epsn.prev()),
        _ => Duplicate::Ignore,
    }
}

/// Atomic results remembered for replays.
pub const ATOMIC_REPLAYS: usize = 8;

/// The results of the last [`ATOMIC_REPLAYS`] atomics, by PSN: a duplicate
/// atomic must return the original value, not execute again.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AtomicReplay {
    /// (PSN, original value, valid).
    slots: [(u32, u64, bool); ATOMIC_REPLAYS],
    /// The slot the next result goes to (modulo [`ATOMIC_REPLAYS`]).
    next: usize,
}

impl AtomicReplay {
    /// Remembers the original value `orig` of the atomic at `psn`,
    /// replacing the oldest remembered one.
    pub fn remember(&mut self, psn: Psn, orig: u64) {
        let slot = self.next % ATOMIC_REPLAYS;
        if let Some(s) = self.slots.get_mut(slot) {
            *s = (psn.get(), orig, true);
        }
        self.next = slot + 1;
    }

    /// The original value of the atomic at `psn`, if still remembered
    /// (the first slot holding that PSN).
    pub fn lookup(&self, psn: Psn) -> Option<u64> {
        self.slots
            .iter()
            .find(|(p, _, valid)| *valid && *p == psn.get())
            .map(|(_, v, _)| *v)
    }
}
