// SPDX-License-Identifier: GPL-2.0

//! How the requester asks for a READ: in parts.
//!
//! A READ WQE takes one PSN per response packet it will get back. Asked
//! for whole, a 1 MiB READ at a 1024-byte path MTU makes the responder owe
//! 1024 packets at once, and a QP with 16 such READs outstanding 16384: a
//! burst no receive queue holds (a software device's peer sends as fast as
//! its CPU copies), so the tail is dropped and asked for again. The send
//! window ([`super::window`]) bounds the packets a SEND or WRITE has in
//! flight, but a READ request is one packet that sends its whole window's
//! worth of work the other way.
//!
//! So a READ of more than [`READ_PART`] packets is asked for in parts: one
//! READ request per aligned run of [`READ_PART`] PSNs of the WQE (the last
//! run shorter), each a request of its own to the responder (its own RETH
//! address and length, its own `max_dest_rd_atomic` slot, its own READ
//! RESPONSE FIRST..LAST). A part is asked for only when its first PSN is
//! inside the send window, so a QP is owed at most
//! `window size - 1 + READ_PART` response packets, and the window's loss
//! response (halving) now slows READs as it slows WRITEs. A retried READ
//! resumes at the first missing PSN and asks up to the end of that part,
//! so parts always end at the same PSNs and the completer knows where a
//! READ RESPONSE LAST belongs ([`ends_part`]).
//!
//! The parts of one WQE are requests outstanding at once, counted against
//! the QP's `max_rd_atomic` ([`requests_outstanding`]).
//!
//! The next part is asked for by the completer, on the CPU its responses
//! arrive on, while earlier parts are still owed: [`requests_in_flight`]
//! says whether a request sent from another CPU could still be queued on
//! the way (then it must leave from the same CPU, or it may overtake).

use crate::engine::psn::Psn;

/// Most response packets one READ request asks for. Half the full send
/// window: with the first PSN of a part inside the window, a QP is owed
/// at most 191 packets (four QPs on one CPU's receive queue of 1000:
/// 764).
pub const READ_PART: u32 = 64;

/// Response packets the READ request starting at packet `idx` of a READ
/// WQE of `npkts` packets asks for: up to the end of `idx`'s part.
/// 0 when `idx` is past the WQE.
pub const fn part_pkts(npkts: u32, idx: u32) -> u32 {
    if idx >= npkts {
        return 0;
    }
    let to_part_end = READ_PART - idx % READ_PART;
    let left = npkts - idx;
    if left < to_part_end {
        left
    } else {
        to_part_end
    }
}

/// Whether response packet `idx` of a READ WQE of `npkts` packets ends a
/// READ request's response (must be a READ RESPONSE LAST or ONLY; any
/// other packet must be a FIRST or MIDDLE).
pub const fn ends_part(npkts: u32, idx: u32) -> bool {
    // `idx < npkts <= u32::MAX`: `idx + 1` does not overflow.
    idx < npkts && (idx + 1 == npkts || (idx + 1).is_multiple_of(READ_PART))
}

/// READ requests of one READ WQE of `npkts` packets still owed a response:
/// requests were sent for packets `..sent` and responses arrived for
/// packets `..answered` (both `<= npkts`). Every part touched by
/// `answered..sent` counts once: a part half answered is still a request
/// the responder is working on.
pub const fn requests_outstanding(npkts: u32, answered: u32, sent: u32) -> u32 {
    let sent = if sent < npkts { sent } else { npkts };
    if sent <= answered {
        return 0;
    }
    sent.div_ceil(READ_PART) - answered / READ_PART
}

/// Whether a request packet of the QP could still be on its way to the
/// responder (queued on the backlog of the CPU that sent it, where a
/// packet sent later from another CPU could overtake it). `una`: the
/// oldest unacknowledged PSN; `sent`: one past the highest PSN taken to be
/// sent; `sent_first`: the first PSN of the newest request packet taken
/// (a READ request's is its part's first); `heard`: every request below
/// it is known to have reached the responder (an ACK at `p` says so up to
/// `p`, a sequence NAK at `p` below `p`, a READ response or atomic ACK at
/// `p` up to `p`, as its request is the one packet covering it).
///
/// Nothing unacknowledged: none. Otherwise one is, unless the newest
/// request was heard of: the requests in flight left from one CPU's
/// queue, in order, so the newest heard of means every earlier one
/// arrived too. (A READ stream keeps `una` behind `sent` all the time,
/// but each part's request is heard of once its first response comes.)
///
/// After a rewind for retransmission that order no longer holds by PSN:
/// requests below `resent_until` (the highest PSN sent when the QP last
/// went back) were sent twice, and a response to a copy sent before the
/// rewind says nothing of the copies sent after it. Until `una` reaches
/// `resent_until`, only "nothing unacknowledged" ends the flight.
pub const fn requests_in_flight(
    una: Psn,
    sent: Psn,
    sent_first: Psn,
    heard: Psn,
    resent_until: Psn,
) -> bool {
    sent.diff(una) > 0 && (una.diff(resent_until) < 0 || heard.diff(sent_first) <= 0)
}

/// `heard` after a response at `psn` that says the requests below
/// `below` reached the responder: it only moves forward.
pub const fn heard_after(heard: Psn, below: Psn) -> Psn {
    if below.diff(heard) > 0 {
        below
    } else {
        heard
    }
}
