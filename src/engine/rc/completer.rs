// SPDX-License-Identifier: GPL-2.0

//! The completer's decisions: which responses count, what an AETH asks
//! for, the RNR retry budget, the retransmission timer, and the PSN and
//! WQE go-back-N resumes at.

use crate::engine::{
    psn::Psn,
    wire::{NakCode, Syndrome},
};

/// Whether a response at `psn` answers something sent: at or after `una`
/// (the oldest unacknowledged PSN) and before `limit`. For an ACK or NAK
/// the limit is one past the highest PSN ever sent (`max_psn`: it may cover
/// packets sent before a rewind); for READ and atomic responses it is the
/// next PSN to send, so responses still in flight from before a rewind
/// start no retry. See [`response_limit`].
pub const fn response_in_range(psn: Psn, una: Psn, limit: Psn) -> bool {
    !(psn.diff(una) < 0 || psn.diff(limit) >= 0)
}

/// The `limit` of [`response_in_range`]: `max_psn` for an ACK/NAK
/// (`is_ack`), else `next_psn`.
pub const fn response_limit(is_ack: bool, next_psn: Psn, max_psn: Psn) -> Psn {
    if is_ack {
        max_psn
    } else {
        next_psn
    }
}

/// A remote error a NAK reports: the send WQE at the head fails with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RemoteError {
    /// NAK invalid request: `IB_WC_REM_INV_REQ_ERR`.
    InvalidRequest,
    /// NAK remote access error: `IB_WC_REM_ACCESS_ERR`.
    Access,
    /// NAK remote operational error: `IB_WC_REM_OP_ERR`.
    Operational,
    /// NAK invalid RD request: `IB_WC_BAD_RESP_ERR`.
    InvalidRdRequest,
}

/// What an ACKNOWLEDGE's syndrome asks of the completer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AckClass {
    /// An ACK: everything through its PSN arrived.
    Ack,
    /// Receiver not ready: resend from the oldest unacknowledged PSN after
    /// the RNR timer `timer` (a 5-bit encoding) expires.
    RnrNak {
        /// The AETH's RNR timer encoding.
        timer: u8,
    },
    /// PSN sequence error: the responder missed a packet; go back
    /// ([`rewind_on_sequence_nak`]).
    SequenceNak,
    /// A fatal NAK: the head WQE fails, the QP goes to the error state.
    Fatal(RemoteError),
}

/// Classifies an ACKNOWLEDGE by its AETH syndrome.
pub const fn classify_ack(syndrome: Syndrome) -> AckClass {
    match syndrome {
        Syndrome::Ack { .. } => AckClass::Ack,
        Syndrome::RnrNak { timer } => AckClass::RnrNak { timer },
        Syndrome::Nak(NakCode::PsnSequenceError) => AckClass::SequenceNak,
        Syndrome::Nak(NakCode::InvalidRequest) => AckClass::Fatal(RemoteError::InvalidRequest),
        Syndrome::Nak(NakCode::RemoteAccessError) => AckClass::Fatal(RemoteError::Access),
        Syndrome::Nak(NakCode::RemoteOperationalError) => AckClass::Fatal(RemoteError::Operational),
        Syndrome::Nak(NakCode::InvalidRdRequest) => AckClass::Fatal(RemoteError::InvalidRdRequest),
    }
}

/// A NAK at `psn` implicitly acknowledges everything before it: the PSN to
/// acknowledge through, or `None` when the NAK is for `una` itself.
pub const fn nak_acks_through(psn: Psn, una: Psn) -> Option<Psn> {
    if psn.get() != una.get() {
        Some(psn.prev())
    } else {
        None
    }
}

/// The `rnr_retry` attribute value that means "retry forever".
pub const RNR_RETRY_INFINITE: u8 = 7;

/// An RNR NAK against an RNR retry budget of `left`: the budget left after
/// this retry, or `None` when it is exhausted (the head WQE fails with
/// `IB_WC_RNR_RETRY_EXC_ERR`). [`RNR_RETRY_INFINITE`] never runs out.
pub const fn rnr_retry(left: u8) -> Option<u8> {
    match left {
        0 => None,
        RNR_RETRY_INFINITE => Some(RNR_RETRY_INFINITE),
        n => Some(n - 1),
    }
}

/// Where a PSN sequence NAK sends the requester back to: the oldest
/// unacknowledged PSN, unless a missing READ/atomic response was already
/// asked for again (`rd_retry`), which covers it. A rewind also counts as
/// a loss for the window.
pub const fn rewind_on_sequence_nak(una: Psn, rd_retry: Option<u32>) -> Option<Psn> {
    if rd_retry.is_none() {
        Some(una)
    } else {
        None
    }
}

/// A READ/atomic response at `missing` did not arrive: go back to it,
/// unless it was already asked for again (`rd_retry`) and has not arrived
/// since. Later out-of-order responses (still in flight from before) must
/// not each start another retry (as rxe's `started_retry`).
pub fn read_retry(missing: Psn, rd_retry: Option<u32>) -> Option<Psn> {
    (rd_retry != Some(missing.get())).then_some(missing)
}

/// After a response moved `una` past the next PSN to send (what the
/// responder acknowledged was being resent), the requester skips ahead to
/// `una`.
pub const fn skip_ahead(una: Psn, next_psn: Psn) -> Option<Psn> {
    if una.diff(next_psn) > 0 {
        Some(una)
    } else {
        None
    }
}

/// What the QP's timer firing means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimerAction {
    /// An RNR wait ended: resume sending (and re-arm the timer).
    EndRnrWait,
    /// The requester's last pass stopped because a packet could not be
    /// allocated: try again (and re-arm the timer).
    EndMemWait,
    /// The requester itself is stopped, waiting for ODP pages of the WQE
    /// it is sending: the peer is not late, so no retry is charged; the
    /// timer is armed again (and afresh once the pages are in).
    OdpWait,
    /// Nothing is in flight: nothing to do.
    Idle,
    /// Responses for this QP wait, received, on a local receive thread:
    /// the peer answered and the answer is not yet read, so no retry is
    /// charged; the timer is armed again and `defers_left` more such
    /// expiries may pass before one counts.
    Defer {
        /// The deferral budget after this one.
        defers_left: u8,
    },
    /// The retry budget is spent: the head WQE fails with
    /// `IB_WC_RETRY_EXC_ERR`.
    RetryExceeded,
    /// A retransmission timeout: the budget becomes `retry_left`, the
    /// window shrinks, and the requester goes back to the oldest
    /// unacknowledged PSN.
    Retransmit {
        /// The retry budget after this retry.
        retry_left: u8,
    },
}

/// The requester as its timer finds it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TimerState {
    /// Waiting out an RNR NAK's timer.
    pub rnr_wait: bool,
    /// Stopped until ODP pages of the current WQE are faulted in.
    pub odp_wait: bool,
    /// The last pass stopped for lack of memory for a packet with nothing
    /// in flight (nothing else would run the requester again: an idle QP
    /// expects no ACK and arms no retransmission timer).
    pub mem_wait: bool,
    /// Nothing in flight (`una == max_psn`).
    pub idle: bool,
    /// Retransmission timeouts left before the head WQE fails.
    pub retry_left: u8,
    /// Packets of the QP's responses role were received and handed to a
    /// receive thread, and not yet processed.
    pub responses_queued: bool,
    /// Expiries that may still be deferred for queued responses before
    /// one is charged (reset to [`MAX_DEFERS`] by progress).
    pub defers_left: u8,
}

/// Expiries in a row, without progress, that queued responses may defer.
/// The bound keeps a peer that streams useless responses (duplicates,
/// responses to nothing) from holding a timeout off for ever: after it,
/// expiries are charged as if nothing were queued.
pub const MAX_DEFERS: u8 = 8;

/// How long a requester that could not allocate a packet waits before it
/// tries again (microseconds): long enough not to spin on an allocator
/// that is out of atomic memory, short against any retransmission timeout.
pub const MEM_RETRY_US: u32 = 1000;

/// The timer fired. An RNR wait ends first, then a wait for memory (the
/// requester runs again, charged nothing); a requester stopped for its
/// own ODP pages is not timed out (what it sent before stopping may go
/// unacknowledged until it sends the rest, as no packet since asked for
/// an ACK); nor is one whose responses arrived and wait, unread, on a
/// receive thread that this machine's load keeps from running (up to
/// [`MAX_DEFERS`] times without progress); otherwise a timeout with
/// something in flight costs a retry.
pub const fn on_timer(t: TimerState) -> TimerAction {
    if t.rnr_wait {
        TimerAction::EndRnrWait
    } else if t.mem_wait {
        TimerAction::EndMemWait
    } else if t.idle {
        TimerAction::Idle
    } else if t.odp_wait {
        TimerAction::OdpWait
    } else if t.responses_queued && t.defers_left > 0 {
        TimerAction::Defer {
            defers_left: t.defers_left - 1,
        }
    } else if t.retry_left == 0 {
        TimerAction::RetryExceeded
    } else {
        TimerAction::Retransmit {
            retry_left: t.retry_left - 1,
        }
    }
}

/// A send WQE as go-back-N sees it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SentWqe {
    /// Its first PSN.
    pub first_psn: Psn,
    /// Its packets (READ: response packets), 0 counting as 1.
    pub npkts: u32,
    /// Retired (acknowledged or answered).
    pub done: bool,
}

/// Where a rewind to a PSN resumes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rewind {
    /// The PSN is `max_psn`: fast-forward to the furthest point sent
    /// (`max_psn`, `max_cur`, `max_cur_off`).
    ToMax,
    /// Resend WQE `k` from its packet `idx` (byte `idx * mtu`).
    At {
        /// The WQE, counted from the consumer index.
        k: u32,
        /// The packet within it.
        idx: u32,
    },
    /// No sent, unretired WQE holds the PSN: nothing changes.
    Nowhere,
}

/// Goes back (or forward, up to what was sent) to `psn`: the WQE holding
/// it, among `wqes` (from the consumer index, in order) that have had
/// packets sent: those before `max_cur`, and `max_cur` itself when
/// `max_cur_off` is not 0.
pub fn rewind_target(
    psn: Psn,
    max_psn: Psn,
    max_cur: u32,
    max_cur_off: u32,
    wqes: impl IntoIterator<Item = SentWqe>,
) -> Rewind {
    if psn == max_psn {
        return Rewind::ToMax;
    }
    for (k, w) in (0u32..).zip(wqes) {
        if k > max_cur || (k == max_cur && max_cur_off == 0) {
            break;
        }
        if w.done {
            continue;
        }
        let idx = psn.distance_from(w.first_psn);
        if idx < w.npkts.max(1) {
            return Rewind::At { k, idx };
        }
    }
    Rewind::Nowhere
}
