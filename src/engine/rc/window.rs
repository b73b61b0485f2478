// SPDX-License-Identifier: GPL-2.0

//! The requester's send window.
//!
//! At most [`WINDOW`] packets are in flight (sent, not acknowledged). A loss
//! (a PSN sequence NAK or a retransmission timeout) halves the window, down
//! to [`MIN_WINDOW`]; every acknowledgement that moves the oldest
//! unacknowledged PSN grows it back by one packet. Go-back-N resends
//! everything after a lost packet, so on a lossy path a smaller window
//! wastes less.

use crate::engine::psn::Psn;

/// Most packets in flight (sent, not acknowledged) per QP.
pub const WINDOW: u32 = 128;
/// The smallest the window shrinks to after losses.
pub const MIN_WINDOW: u32 = 8;
/// The requester asks for an ACK at least every this many packets (four
/// times per full window; an ACK costs the responder a packet and the
/// requester a receive: rdma_rxe asks every 64).
pub const ACK_EVERY: u32 = 32;

/// The send window: how far it is below [`WINDOW`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Window {
    /// Reduction of the window after losses (0: the full [`WINDOW`]).
    shrink: u32,
}

impl Window {
    /// Packets that may be unacknowledged at once, in
    /// `MIN_WINDOW..=WINDOW`.
    pub const fn size(self) -> u32 {
        let max_shrink = WINDOW - MIN_WINDOW;
        let s = if self.shrink < max_shrink {
            self.shrink
        } else {
            max_shrink
        };
        WINDOW - s
    }

    /// A loss (sequence NAK or timeout): halve the window, not below
    /// [`MIN_WINDOW`].
    pub fn on_loss(&mut self) {
        let w = self.size();
        self.shrink = WINDOW - (w / 2).max(MIN_WINDOW);
    }

    /// Forward progress (the oldest unacknowledged PSN moved): grow back by
    /// one packet, up to [`WINDOW`].
    pub fn on_progress(&mut self) {
        self.shrink = self.shrink.saturating_sub(1);
    }

    /// Whether one more packet may be sent at `psn` while `una` is the
    /// oldest unacknowledged PSN.
    pub const fn may_send(self, psn: Psn, una: Psn) -> bool {
        psn.distance_from(una) < self.size()
    }

    /// Whether a data packet asks for an ACK: the last of its message, or
    /// `noack` packets (this one included) went without asking. A shrunken
    /// window must not stall waiting for an ACK nobody asked for, so it
    /// asks at least twice per window.
    pub fn ack_req(self, last: bool, noack: u32) -> bool {
        last || self.ack_due(noack)
    }

    /// Whether `noack` packets (this one included) going without an ACK
    /// request is enough to ask: [`ACK_EVERY`], or half a shrunken window.
    pub fn ack_due(self, noack: u32) -> bool {
        noack >= ACK_EVERY.min(self.size() / 2)
    }

    /// [`Self::ack_req`] when one requester pass asks once at its tail
    /// (`at_tail`, see [`ask_at_tail`]): a message's last packet asks only
    /// if it is due anyway; the pass's last packet asks for the rest.
    pub fn ack_req_in_pass(self, last: bool, noack: u32, at_tail: bool) -> bool {
        if at_tail {
            self.ack_due(noack)
        } else {
            self.ack_req(last, noack)
        }
    }
}

/// Whether a requester pass that queued data packets ends by setting the
/// AckReq bit of its last queued request packet: some packet it queued
/// since its last ACK request went without one (`unasked`).
///
/// Without it every message's last packet asks for an ACK, so a pass of
/// small messages costs the responder one ACK (and the requester one
/// receive) per message. With it, the pass asks once: an ACK covers every
/// PSN up to its own, so each message of the pass still completes when it
/// comes back, and every pass that sends ends with a request, so nothing
/// waits for an ACK nobody asked for. A pass stopped in a message's middle
/// (the window, absent ODP pages) asks at that packet: the messages before
/// it complete without waiting for the rest.
pub const fn ask_at_tail(at_tail: bool, unasked: bool) -> bool {
    at_tail && unasked
}
