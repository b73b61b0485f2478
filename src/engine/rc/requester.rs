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

/// Whether a requester in SQD (send queue drain) sends the packet at
/// `psn`, the next of its WQE at byte `cur_off`; `max_psn` is one past
/// the highest PSN sent. It finishes what it began: it sends again what
/// was sent before (a rewind for retransmission left `psn` behind
/// `max_psn`) and the rest of a message partly sent (`cur_off` past 0).
/// A WQE not begun waits for RTS: the IBA's send queue drain lets the
/// messages in progress complete and starts no new one (nor does
/// rdma_rxe's requester start a posted WQE in SQD).
pub const fn sqd_sends(psn: Psn, max_psn: Psn, cur_off: u32) -> bool {
    psn.diff(max_psn) < 0 || cur_off != 0
}

/// Whether the send queue of a QP in SQD has drained: nothing sent is
/// unacknowledged (`una` at `max_psn`) and nothing begun is left to send
/// ([`sqd_sends`] says no).
pub const fn sq_drained(una: Psn, psn: Psn, max_psn: Psn, cur_off: u32) -> bool {
    una.diff(max_psn) == 0 && !sqd_sends(psn, max_psn, cur_off)
}

#[cfg(test)]
mod tests {
    use crate::engine::psn::{Psn, PSN_MASK};

    #[test]
    fn read_parts_end_at_aligned_psns() {
        use super::{ends_part, part_pkts, READ_PART};
        // A READ no longer than one part is one request.
        assert_eq!(part_pkts(1, 0), 1);
        assert_eq!(part_pkts(READ_PART, 0), READ_PART);
        assert!(ends_part(READ_PART, READ_PART - 1));
        assert!(!ends_part(READ_PART, READ_PART - 2));
        // 1 MiB at MTU 1024: 16 parts of 64.
        let n = 1024;
        let mut idx = 0;
        let mut parts = 0;
        while idx < n {
            let k = part_pkts(n, idx);
            assert_eq!(k, READ_PART);
            assert!(ends_part(n, idx + k - 1));
            for j in idx..idx + k - 1 {
                assert!(!ends_part(n, j));
            }
            idx += k;
            parts += 1;
        }
        assert_eq!(parts, 16);
        // A short last part.
        assert_eq!(part_pkts(100, 64), 36);
        assert!(ends_part(100, 99));
        assert!(!ends_part(100, 98));
        // A retry resumes mid-part and asks up to the same part end.
        assert_eq!(part_pkts(1024, 70), 58);
        assert_eq!(part_pkts(100, 90), 10);
        // Past the WQE: nothing.
        assert_eq!(part_pkts(100, 100), 0);
        assert!(!ends_part(100, 100));
        assert!(!ends_part(0, 0));
        // No overflow at the top of the range.
        assert!(ends_part(u32::MAX, u32::MAX - 1));
        assert_eq!(part_pkts(u32::MAX, u32::MAX - 1), 1);
    }

    #[test]
    fn read_parts_outstanding() {
        use super::{requests_outstanding, READ_PART};
        // Nothing sent, or everything sent answered: none.
        assert_eq!(requests_outstanding(1024, 0, 0), 0);
        assert_eq!(requests_outstanding(1024, 1024, 1024), 0);
        // One part sent, none of it answered; half answered: still one.
        assert_eq!(requests_outstanding(1024, 0, READ_PART), 1);
        assert_eq!(requests_outstanding(1024, READ_PART / 2, READ_PART), 1);
        // Part answered in full: none left.
        assert_eq!(requests_outstanding(1024, READ_PART, READ_PART), 0);
        // Three parts sent, the first half answered: three.
        assert_eq!(requests_outstanding(1024, 10, 3 * READ_PART), 3);
        // Whole WQE sent: every part not answered in full.
        assert_eq!(requests_outstanding(1024, 0, 1024), 16);
        assert_eq!(requests_outstanding(1024, 1000, 1024), 1);
        // A short READ: one request.
        assert_eq!(requests_outstanding(1, 0, 1), 1);
        assert_eq!(requests_outstanding(100, 64, 100), 1);
        // A retry resumed at the first missing packet: nothing counted for
        // the part it asks for again until it is sent.
        assert_eq!(requests_outstanding(1024, 70, 70), 0);
        assert_eq!(requests_outstanding(1024, 70, 128), 1);
        // `sent` beyond the WQE is clamped.
        assert_eq!(requests_outstanding(100, 0, 500), 2);
    }

    #[test]
    fn requests_in_flight_until_the_newest_is_heard_of() {
        use super::{heard_after, requests_in_flight};
        let base = PSN_MASK - 100; // across the wrap
        let q = |d: u32| Psn::new(base).add(d);
        // No rewind since the start (`resent_until` at the first PSN).
        let f = |una, sent, first, heard| requests_in_flight(una, sent, first, heard, q(0));
        // Nothing unacknowledged: nothing in flight, whatever was heard.
        assert!(!f(q(10), q(10), q(9), q(0)));
        // A WRITE stream: the newest packet (PSN 19) is heard of only by an
        // ACK at 19 (heard 20); an ACK at 18 leaves it possibly queued.
        assert!(f(q(10), q(20), q(19), q(19)));
        assert!(!f(q(20), q(20), q(19), q(20)));
        // A READ stream: una far behind (responses owed), but the newest
        // part's request (first PSN 128) was answered once: none queued.
        assert!(f(q(100), q(192), q(128), q(128)));
        assert!(!f(q(100), q(192), q(128), q(129)));
        assert!(!f(q(129), q(192), q(128), q(129)));
        // A rewind to 64 with 192 sent: the part at 64 is sent again. A
        // response to the part at 128 sent before the rewind (heard 129)
        // says nothing of the new copy of 64, still maybe queued.
        assert!(requests_in_flight(q(64), q(192), q(128), q(129), q(192)));
        assert!(requests_in_flight(q(191), q(192), q(128), q(192), q(192)));
        // Once una reaches what was sent before the rewind, the rule is
        // back: newer requests heard of end the flight.
        assert!(!requests_in_flight(q(192), q(256), q(192), q(193), q(192)));
        assert!(requests_in_flight(q(192), q(256), q(192), q(192), q(192)));
        // Nothing unacknowledged ends it whatever the rewind.
        assert!(!requests_in_flight(q(192), q(192), q(128), q(129), q(500)));
        // heard only moves forward, across the wrap too.
        assert_eq!(heard_after(q(50), q(60)), q(60));
        assert_eq!(heard_after(q(60), q(50)), q(60));
        assert_eq!(heard_after(q(90), q(130)), q(130));
    }

    #[test]
    fn sqd_finishes_what_it_began() {
        use super::{sq_drained, sqd_sends};
        let base = PSN_MASK - 2; // across the wrap
        let q = |d: u32| Psn::new(base).add(d);
        // At the frontier, at a message boundary: the next WQE waits.
        assert!(!sqd_sends(q(5), q(5), 0));
        // The rest of a message begun goes out.
        assert!(sqd_sends(q(5), q(5), 1024));
        // Sent before: sent again after a rewind, begun or not.
        assert!(sqd_sends(q(3), q(5), 0));
        assert!(sqd_sends(q(3), q(5), 2048));
        // Drained: all sent acknowledged and nothing begun left.
        assert!(sq_drained(q(5), q(5), q(5), 0));
        assert!(!sq_drained(q(4), q(5), q(5), 0));
        assert!(!sq_drained(q(5), q(5), q(5), 1024));
        assert!(!sq_drained(q(5), q(3), q(5), 0));
    }
}
