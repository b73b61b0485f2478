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
        last || noack >= ACK_EVERY.min(self.size() / 2)
    }
}
