// SPDX-License-Identifier: GPL-2.0

//! The RC transport's decisions, as pure functions and small state machines.
//!
//! The transport (`src/transport/`) holds the QP lock, owns the queues and
//! builds packets; what it should *do* with an incoming ACK, a timeout, a
//! duplicate request or a loss is decided here, from plain values, and
//! returned as an action the transport carries out. Nothing here touches a
//! packet buffer, a ring or the kernel, so every decision is tested on the
//! host (`tests.rs`, plain `cargo test`; no KUnit selftest), including PSN
//! wraparound at 2^24.
//!
//! - [`window`]: the send window (go-back-N wastes less with a smaller one
//!   on a lossy path) and when to ask for an ACK.
//! - [`completer`]: which responses count, what an AETH syndrome asks for,
//!   the RNR retry budget, the timer, and where go-back-N resumes.
//! - [`requester`]: a READ is asked for in parts, each a request of its
//!   own, so a QP is owed a bounded number of response packets.
//! - [`responder`]: new, duplicate or out-of-sequence request; opcode
//!   sequence and payload length checks; what a duplicate is answered with,
//!   the remembered READ/atomic requests it is replayed from, and the
//!   `max_dest_rd_atomic` limit.
//! - [`checks`]: the receive path's checks of a packet against its QP
//!   (opcode for the QP type, P_Key, path addresses) and of a response
//!   against what is outstanding.

pub mod checks;
pub mod completer;
pub mod requester;
pub mod responder;
pub mod window;

#[cfg(test)]
mod tests;
