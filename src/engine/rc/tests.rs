// SPDX-License-Identifier: GPL-2.0

//! Host tests of the RC transport's decisions.

use super::{
    checks::{is_notification, opcode_fits_qp, path_matches, pkey_matches, response_expected},
    completer::{
        classify_ack, nak_acks_through, on_timer, read_retry, response_in_range, response_limit,
        rewind_on_sequence_nak, rewind_target, rnr_retry, skip_ahead, AckClass, RemoteError,
        Rewind, SentWqe, TimerAction, TimerState, MAX_DEFERS, RNR_RETRY_INFINITE,
    },
    responder::{
        admit_rd_atomic, classify_request, duplicate_action, find_atomic_replay, find_read_replay,
        opcode_sequence_ok, payload_len_ok, reth_len_ok, uc_request, Duplicate, RdEntry, RdKind,
        RdTable, ReadReplay, RequestClass, UcRequest, MAX_MSG_LEN,
    },
    window::{ask_at_tail, Window, ACK_EVERY, MIN_WINDOW, WINDOW},
};
use crate::engine::{
    psn::{Psn, PSN_HALF, PSN_MASK},
    wire::{NakCode, OpKind, Position, Syndrome, Transport},
};

fn p(v: u32) -> Psn {
    Psn::new(v)
}

// ---- window --------------------------------------------------------------

#[test]
fn window_starts_full() {
    assert_eq!(Window::default().size(), WINDOW);
}

#[test]
fn window_halves_on_loss_down_to_min() {
    let mut w = Window::default();
    let mut sizes = Vec::new();
    for _ in 0..6 {
        w.on_loss();
        sizes.push(w.size());
    }
    assert_eq!(sizes, [64, 32, 16, 8, 8, 8]);
    assert_eq!(w.size(), MIN_WINDOW);
}

#[test]
fn window_grows_by_one_per_progress_up_to_max() {
    let mut w = Window::default();
    w.on_loss();
    assert_eq!(w.size(), 64);
    w.on_progress();
    assert_eq!(w.size(), 65);
    for _ in 0..200 {
        w.on_progress();
    }
    assert_eq!(w.size(), WINDOW);
    w.on_progress();
    assert_eq!(w.size(), WINDOW);
}

#[test]
fn window_loss_after_partial_regrowth() {
    let mut w = Window::default();
    for _ in 0..4 {
        w.on_loss();
    }
    assert_eq!(w.size(), MIN_WINDOW);
    for _ in 0..11 {
        w.on_progress();
    }
    assert_eq!(w.size(), 19);
    w.on_loss();
    assert_eq!(w.size(), 9);
}

#[test]
fn window_may_send_boundary_and_wraparound() {
    let w = Window::default();
    let una = p(PSN_MASK - 10);
    assert!(w.may_send(una, una));
    assert!(w.may_send(una.add(WINDOW - 1), una));
    assert!(!w.may_send(una.add(WINDOW), una));
    let mut small = w;
    for _ in 0..4 {
        small.on_loss();
    }
    assert!(small.may_send(una.add(MIN_WINDOW - 1), una));
    assert!(!small.may_send(una.add(MIN_WINDOW), una));
}

#[test]
fn window_ack_request_interval() {
    let w = Window::default();
    assert!(w.ack_req(true, 1));
    assert!(!w.ack_req(false, ACK_EVERY - 1));
    assert!(w.ack_req(false, ACK_EVERY));
    let mut small = w;
    for _ in 0..4 {
        small.on_loss();
    }
    // Twice per window once the window is below 2 * ACK_EVERY.
    assert!(!small.ack_req(false, MIN_WINDOW / 2 - 1));
    assert!(small.ack_req(false, MIN_WINDOW / 2));
}

#[test]
fn window_ack_request_once_per_pass() {
    let w = Window::default();
    // Off: as `ack_req`.
    assert!(w.ack_req_in_pass(true, 1, false));
    assert!(!w.ack_req_in_pass(false, 1, false));
    // On: a message end asks only when due; the tail asks for the rest.
    assert!(!w.ack_req_in_pass(true, 1, true));
    assert!(!w.ack_req_in_pass(true, ACK_EVERY - 1, true));
    assert!(w.ack_req_in_pass(true, ACK_EVERY, true));
    assert!(w.ack_req_in_pass(false, ACK_EVERY, true));
    let mut small = w;
    for _ in 0..4 {
        small.on_loss();
    }
    assert!(small.ack_req_in_pass(false, MIN_WINDOW / 2, true));
    assert!(!small.ack_req_in_pass(true, MIN_WINDOW / 2 - 1, true));
    assert!(ask_at_tail(true, true));
    assert!(!ask_at_tail(true, false));
    assert!(!ask_at_tail(false, true));
}

// ---- completer -----------------------------------------------------------

#[test]
fn ack_classification_covers_every_syndrome() {
    assert_eq!(classify_ack(Syndrome::Ack { credits: 0 }), AckClass::Ack);
    assert_eq!(
        classify_ack(Syndrome::Ack {
            credits: Syndrome::CREDITS_INVALID
        }),
        AckClass::Ack
    );
    assert_eq!(
        classify_ack(Syndrome::RnrNak { timer: 14 }),
        AckClass::RnrNak { timer: 14 }
    );
    let cases = [
        (NakCode::PsnSequenceError, AckClass::SequenceNak),
        (
            NakCode::InvalidRequest,
            AckClass::Fatal(RemoteError::InvalidRequest),
        ),
        (
            NakCode::RemoteAccessError,
            AckClass::Fatal(RemoteError::Access),
        ),
        (
            NakCode::RemoteOperationalError,
            AckClass::Fatal(RemoteError::Operational),
        ),
        (
            NakCode::InvalidRdRequest,
            AckClass::Fatal(RemoteError::InvalidRdRequest),
        ),
    ];
    for (code, class) in cases {
        assert_eq!(classify_ack(Syndrome::Nak(code)), class, "{code:?}");
    }
}

#[test]
fn every_syndrome_byte_classifies() {
    // Each decodable AETH syndrome byte maps to the class of its type.
    for b in 0..=u8::MAX {
        let Some(s) = Syndrome::from_byte(b) else {
            continue;
        };
        let c = classify_ack(s);
        match b >> 5 {
            0 => assert_eq!(c, AckClass::Ack),
            1 => assert!(matches!(c, AckClass::RnrNak { timer } if timer == b & 0x1f)),
            3 => assert!(matches!(c, AckClass::SequenceNak | AckClass::Fatal(_))),
            _ => panic!("byte {b:#x} decoded"),
        }
    }
}

#[test]
fn response_range_boundaries() {
    let una = p(100);
    let next = p(110);
    let max = p(120);
    // An ACK may cover up to max_psn - 1; a READ response up to psn - 1.
    let ack_limit = response_limit(true, next, max);
    let rd_limit = response_limit(false, next, max);
    assert_eq!(ack_limit, max);
    assert_eq!(rd_limit, next);
    assert!(!response_in_range(p(99), una, ack_limit));
    assert!(response_in_range(p(100), una, ack_limit));
    assert!(response_in_range(p(119), una, ack_limit));
    assert!(!response_in_range(p(120), una, ack_limit));
    assert!(response_in_range(p(109), una, rd_limit));
    assert!(!response_in_range(p(110), una, rd_limit));
}

#[test]
fn response_range_across_wrap() {
    let una = p(PSN_MASK - 1);
    let limit = p(3);
    assert!(response_in_range(p(PSN_MASK), una, limit));
    assert!(response_in_range(p(0), una, limit));
    assert!(response_in_range(p(2), una, limit));
    assert!(!response_in_range(p(3), una, limit));
    assert!(!response_in_range(p(PSN_MASK - 2), una, limit));
    // Nothing in flight: nothing counts.
    assert!(!response_in_range(una, una, una));
}

#[test]
fn nak_implicitly_acks_what_precedes_it() {
    assert_eq!(nak_acks_through(p(5), p(5)), None);
    assert_eq!(nak_acks_through(p(7), p(5)), Some(p(6)));
    assert_eq!(nak_acks_through(p(0), p(PSN_MASK - 3)), Some(p(PSN_MASK)));
}

#[test]
fn rnr_retry_budget() {
    assert_eq!(rnr_retry(0), None);
    assert_eq!(rnr_retry(1), Some(0));
    assert_eq!(rnr_retry(6), Some(5));
    assert_eq!(rnr_retry(RNR_RETRY_INFINITE), Some(RNR_RETRY_INFINITE));
}

fn timer(rnr_wait: bool, odp_wait: bool, idle: bool, retry_left: u8) -> TimerAction {
    on_timer(TimerState {
        rnr_wait,
        odp_wait,
        mem_wait: false,
        idle,
        retry_left,
        responses_queued: false,
        defers_left: MAX_DEFERS,
    })
}

#[test]
fn timer_actions() {
    assert_eq!(timer(true, false, true, 0), TimerAction::EndRnrWait);
    assert_eq!(timer(true, false, false, 3), TimerAction::EndRnrWait);
    assert_eq!(timer(false, false, true, 0), TimerAction::Idle);
    assert_eq!(timer(false, false, false, 0), TimerAction::RetryExceeded);
    assert_eq!(
        timer(false, false, false, 1),
        TimerAction::Retransmit { retry_left: 0 }
    );
    assert_eq!(
        timer(false, false, false, 7),
        TimerAction::Retransmit { retry_left: 6 }
    );
}

fn queued_timer(retry_left: u8, defers_left: u8) -> TimerAction {
    on_timer(TimerState {
        retry_left,
        responses_queued: true,
        defers_left,
        ..TimerState::default()
    })
}

/// Under a load the receive threads cannot keep up with (two busy-polling
/// processes on two emulated CPUs), a READ's responses arrive, are handed
/// to a receive thread and wait there past the retransmission timeout:
/// charging a retry for them resends what was answered, and a stream of
/// such expiries failed 4-QP READ streams with "retry exceeded" while
/// every response was on this host. While responses wait, an expiry is
/// deferred, up to `MAX_DEFERS` in a row without progress; then expiries
/// count again, so a peer streaming responses that answer nothing cannot
/// hold a timeout off.
#[test]
fn queued_responses_defer_the_timeout() {
    assert_eq!(queued_timer(0, 1), TimerAction::Defer { defers_left: 0 });
    assert_eq!(
        queued_timer(3, MAX_DEFERS),
        TimerAction::Defer {
            defers_left: MAX_DEFERS - 1
        }
    );
    assert_eq!(queued_timer(0, 0), TimerAction::RetryExceeded);
    assert_eq!(
        queued_timer(2, 0),
        TimerAction::Retransmit { retry_left: 1 }
    );
    // An RNR wait ends, an idle QP stays idle, an ODP wait stays one,
    // whatever waits on the threads.
    let base = TimerState {
        responses_queued: true,
        defers_left: MAX_DEFERS,
        retry_left: 3,
        ..TimerState::default()
    };
    let rnr = TimerState {
        rnr_wait: true,
        ..base
    };
    assert_eq!(on_timer(rnr), TimerAction::EndRnrWait);
    let idle = TimerState { idle: true, ..base };
    assert_eq!(on_timer(idle), TimerAction::Idle);
    let odp = TimerState {
        odp_wait: true,
        ..base
    };
    assert_eq!(on_timer(odp), TimerAction::OdpWait);
    // Expiries without progress: MAX_DEFERS deferred, then the retry
    // budget is spent as if nothing were queued.
    let (mut retry, mut defers, mut deferred, mut charged) = (2u8, MAX_DEFERS, 0, 0);
    loop {
        match queued_timer(retry, defers) {
            TimerAction::Defer { defers_left } => {
                defers = defers_left;
                deferred += 1;
            }
            TimerAction::Retransmit { retry_left } => {
                retry = retry_left;
                charged += 1;
            }
            TimerAction::RetryExceeded => break,
            a => panic!("unexpected {a:?}"),
        }
    }
    assert_eq!((deferred, charged), (u32::from(MAX_DEFERS), 2));
}

/// A requester stopped for its own ODP pages (a SEND from pages the
/// process wrote after registering them, faulted in by a work item that
/// a loaded machine runs late) had sent the message's first packets,
/// none asking for an ACK: each expiry charged a retry while nothing
/// could be resent, and the SEND failed with "retry exceeded" (seen in
/// the hostile-user suite). Waiting for pages costs nothing, however
/// long; an RNR wait still ends first, and with no budget left the
/// timeout fails the WQE only once the requester sends again.
#[test]
fn odp_wait_is_not_a_timeout() {
    for left in [0, 1, 3, 7] {
        assert_eq!(timer(false, true, false, left), TimerAction::OdpWait);
    }
    assert_eq!(timer(true, true, false, 0), TimerAction::EndRnrWait);
    assert_eq!(timer(false, true, true, 0), TimerAction::Idle);
    // Many expiries in a row leave the budget as it was.
    let mut left = 3;
    for _ in 0..100 {
        match timer(false, true, false, left) {
            TimerAction::Retransmit { retry_left } => left = retry_left,
            TimerAction::OdpWait => {}
            a => panic!("unexpected {a:?}"),
        }
    }
    assert_eq!(left, 3);
}

/// A requester whose pass could not allocate a packet stops: with
/// nothing in flight no ACK and no retransmission timeout would ever run
/// it again, and the WQE waited for the next doorbell (for ever, if the
/// consumer waited for its completion first). Its timer brings it back,
/// whatever else holds: idle, out of retries, responses queued, an ODP
/// wait (the pass that stopped for memory is the later one); only an
/// RNR wait ends first, as it too resumes the requester.
#[test]
fn memory_wait_runs_the_requester_again() {
    let base = TimerState {
        mem_wait: true,
        ..TimerState::default()
    };
    for (idle, retry_left, responses_queued, odp_wait, defers_left) in [
        (true, 0, false, false, 0),
        (false, 0, false, false, 0),
        (false, 7, true, false, MAX_DEFERS),
        (false, 3, false, true, 0),
    ] {
        let t = TimerState {
            idle,
            retry_left,
            responses_queued,
            odp_wait,
            defers_left,
            ..base
        };
        assert_eq!(on_timer(t), TimerAction::EndMemWait, "{t:?}");
    }
    let rnr = TimerState {
        rnr_wait: true,
        ..base
    };
    assert_eq!(on_timer(rnr), TimerAction::EndRnrWait);
    // Without it an idle QP's expiry does nothing, as before.
    let idle = TimerState {
        idle: true,
        ..TimerState::default()
    };
    assert_eq!(on_timer(idle), TimerAction::Idle);
}

#[test]
fn sequence_nak_and_read_retry_rewind_points() {
    assert_eq!(rewind_on_sequence_nak(p(40), None), Some(p(40)));
    assert_eq!(rewind_on_sequence_nak(p(40), Some(40)), None);
    assert_eq!(rewind_on_sequence_nak(p(40), Some(12)), None);
    assert_eq!(read_retry(p(9), None), Some(p(9)));
    assert_eq!(read_retry(p(9), Some(9)), None);
    assert_eq!(read_retry(p(9), Some(8)), Some(p(9)));
}

#[test]
fn skip_ahead_only_forward() {
    assert_eq!(skip_ahead(p(10), p(10)), None);
    assert_eq!(skip_ahead(p(9), p(10)), None);
    assert_eq!(skip_ahead(p(11), p(10)), Some(p(11)));
    assert_eq!(skip_ahead(p(1), p(PSN_MASK)), Some(p(1)));
    assert_eq!(skip_ahead(p(PSN_MASK), p(1)), None);
}

fn wqe(first: u32, npkts: u32, done: bool) -> SentWqe {
    SentWqe {
        first_psn: p(first),
        npkts,
        done,
    }
}

#[test]
fn rewind_to_max_fast_forwards() {
    let w = [wqe(0, 4, false)];
    assert_eq!(rewind_target(p(4), p(4), 1, 0, w), Rewind::ToMax);
}

#[test]
fn rewind_finds_wqe_and_packet() {
    // WQE 0: PSNs 10..13 (done), WQE 1: 14..15, WQE 2: 16 (0 packets
    // counts as 1), WQE 3: 17..19, partly sent (max_cur 3, offset > 0).
    let w = [
        wqe(10, 4, true),
        wqe(14, 2, false),
        wqe(16, 0, false),
        wqe(17, 3, false),
    ];
    assert_eq!(rewind_target(p(11), p(19), 3, 1, w), Rewind::Nowhere);
    assert_eq!(
        rewind_target(p(15), p(19), 3, 1, w),
        Rewind::At { k: 1, idx: 1 }
    );
    assert_eq!(
        rewind_target(p(16), p(19), 3, 1, w),
        Rewind::At { k: 2, idx: 0 }
    );
    assert_eq!(
        rewind_target(p(18), p(19), 3, 1, w),
        Rewind::At { k: 3, idx: 1 }
    );
    // WQE 3 not started (offset 0): not a rewind target.
    assert_eq!(rewind_target(p(18), p(17), 3, 0, w), Rewind::Nowhere);
}

#[test]
fn rewind_across_psn_wrap() {
    let w = [wqe(PSN_MASK - 1, 4, false)];
    assert_eq!(
        rewind_target(p(1), p(2), 1, 0, w),
        Rewind::At { k: 0, idx: 3 }
    );
    assert_eq!(
        rewind_target(p(PSN_MASK), p(2), 1, 0, w),
        Rewind::At { k: 0, idx: 1 }
    );
    assert_eq!(rewind_target(p(2), p(2), 1, 0, w), Rewind::ToMax);
}

// ---- responder -----------------------------------------------------------

#[test]
fn request_classes() {
    let e = p(50);
    assert_eq!(classify_request(e, e, false), RequestClass::New);
    assert_eq!(classify_request(e, e, true), RequestClass::New);
    assert_eq!(classify_request(p(49), e, false), RequestClass::Duplicate);
    assert_eq!(
        classify_request(p(51), e, false),
        RequestClass::OutOfSequence { nak: true }
    );
    assert_eq!(
        classify_request(p(51), e, true),
        RequestClass::OutOfSequence { nak: false }
    );
}

#[test]
fn request_classes_at_wrap_and_half_space() {
    let e = p(1);
    assert_eq!(
        classify_request(p(PSN_MASK), e, false),
        RequestClass::Duplicate
    );
    assert_eq!(classify_request(p(0), e, false), RequestClass::Duplicate);
    // Exactly half the space away counts as behind (a duplicate).
    assert_eq!(
        classify_request(e.add(PSN_HALF), e, false),
        RequestClass::Duplicate
    );
    assert_eq!(
        classify_request(e.add(PSN_HALF - 1), e, false),
        RequestClass::OutOfSequence { nak: true }
    );
    let e = p(PSN_MASK);
    assert_eq!(
        classify_request(p(0), e, false),
        RequestClass::OutOfSequence { nak: true }
    );
}

#[test]
fn opcode_sequence() {
    use Position::*;
    // Idle: only message starts and READ/atomic requests.
    assert!(opcode_sequence_ok(OpKind::Send, First, false, false));
    assert!(opcode_sequence_ok(OpKind::Send, Only, false, false));
    assert!(!opcode_sequence_ok(OpKind::Send, Middle, false, false));
    assert!(!opcode_sequence_ok(OpKind::RdmaWrite, Last, false, false));
    assert!(opcode_sequence_ok(
        OpKind::RdmaReadRequest,
        Only,
        false,
        false
    ));
    assert!(opcode_sequence_ok(OpKind::FetchAdd, Only, false, false));
    // In a SEND: only its continuation.
    assert!(opcode_sequence_ok(OpKind::Send, Middle, true, false));
    assert!(opcode_sequence_ok(OpKind::Send, Last, true, false));
    assert!(!opcode_sequence_ok(OpKind::Send, First, true, false));
    assert!(!opcode_sequence_ok(OpKind::RdmaWrite, Middle, true, false));
    assert!(!opcode_sequence_ok(
        OpKind::RdmaReadRequest,
        Only,
        true,
        false
    ));
    // In a WRITE.
    assert!(opcode_sequence_ok(OpKind::RdmaWrite, Last, false, true));
    assert!(!opcode_sequence_ok(OpKind::RdmaWrite, Only, false, true));
    assert!(!opcode_sequence_ok(OpKind::Send, Only, false, true));
    assert!(!opcode_sequence_ok(OpKind::CompareSwap, Only, false, true));
}

#[test]
fn payload_lengths_by_position() {
    use Position::*;
    let mtu = 1024;
    for kind in [OpKind::Send, OpKind::RdmaWrite] {
        assert!(payload_len_ok(kind, First, mtu, mtu));
        assert!(!payload_len_ok(kind, First, mtu - 1, mtu));
        assert!(payload_len_ok(kind, Middle, mtu, mtu));
        assert!(!payload_len_ok(kind, Middle, mtu + 1, mtu));
        assert!(payload_len_ok(kind, Last, 1, mtu));
        assert!(payload_len_ok(kind, Last, mtu, mtu));
        assert!(!payload_len_ok(kind, Last, 0, mtu));
        assert!(!payload_len_ok(kind, Last, mtu + 1, mtu));
        assert!(payload_len_ok(kind, Only, 0, mtu));
        assert!(payload_len_ok(kind, Only, mtu, mtu));
        assert!(!payload_len_ok(kind, Only, mtu + 1, mtu));
    }
    assert!(payload_len_ok(OpKind::RdmaReadRequest, Only, 9999, mtu));
}

#[test]
fn duplicate_answers() {
    let e = p(0);
    assert_eq!(
        duplicate_action(OpKind::RdmaReadRequest, false, e),
        Duplicate::ReplayRead
    );
    assert_eq!(
        duplicate_action(OpKind::CompareSwap, true, e),
        Duplicate::ReplayAtomic
    );
    assert_eq!(
        duplicate_action(OpKind::FetchAdd, false, e),
        Duplicate::ReplayAtomic
    );
    assert_eq!(
        duplicate_action(OpKind::Send, true, e),
        Duplicate::Ack(p(PSN_MASK))
    );
    assert_eq!(
        duplicate_action(OpKind::RdmaWrite, true, p(7)),
        Duplicate::Ack(p(6))
    );
    assert_eq!(duplicate_action(OpKind::Send, false, e), Duplicate::Ignore);
    // An ATOMIC WRITE is never written twice: its empty READ response is
    // sent again, whatever the ACK request bit says.
    for ack_req in [false, true] {
        assert_eq!(
            duplicate_action(OpKind::AtomicWrite, ack_req, p(7)),
            Duplicate::ReplayRead
        );
    }
}

fn atomic(psn: u32, orig: u64) -> RdEntry {
    RdEntry {
        kind: RdKind::Atomic,
        psn,
        npkts: 1,
        rkey: 0x1234,
        va: 0x1000 + u64::from(psn) * 8,
        len: 8,
        mtu: 1024,
        orig,
    }
}

fn read(psn: u32, va: u64, len: u32, mtu: u32) -> RdEntry {
    RdEntry {
        kind: RdKind::Read,
        psn,
        npkts: len.div_ceil(mtu).max(1),
        rkey: 0x5678,
        va,
        len,
        mtu,
        orig: 0,
    }
}

#[test]
fn atomic_replays_cover_max_dest_rd_atomic() {
    // max_dest_rd_atomic 16: all 16 atomics are answerable, the 17th
    // replaces the oldest.
    let mut slots = [RdEntry::default(); 128];
    let mut t = RdTable::default();
    for i in 0..16u32 {
        t.remember(&mut slots, 16, atomic(i, u64::from(i) + 1));
    }
    let e = atomic(0, 0);
    assert_eq!(find_atomic_replay(&slots, 16, p(0), e.rkey, e.va), Some(1));
    let e15 = atomic(15, 0);
    assert_eq!(
        find_atomic_replay(&slots, 16, p(15), e15.rkey, e15.va),
        Some(16)
    );
    t.remember(&mut slots, 16, atomic(PSN_MASK, 99));
    assert_eq!(find_atomic_replay(&slots, 16, p(0), e.rkey, e.va), None);
    let em = atomic(PSN_MASK, 0);
    assert_eq!(
        find_atomic_replay(&slots, 16, p(PSN_MASK), em.rkey, em.va),
        Some(99)
    );
}

#[test]
fn atomic_replay_needs_a_remembered_request() {
    let mut slots = [RdEntry::default(); 8];
    let mut t = RdTable::default();
    // Nothing remembered: a duplicate atomic of nothing is dropped.
    assert_eq!(find_atomic_replay(&slots, 8, p(0), 0, 0), None);
    t.remember(&mut slots, 8, atomic(5, 7));
    let e = atomic(5, 0);
    assert_eq!(find_atomic_replay(&slots, 8, p(5), e.rkey, e.va), Some(7));
    // Another key or address at that PSN is not the same request.
    assert_eq!(find_atomic_replay(&slots, 8, p(5), e.rkey + 1, e.va), None);
    assert_eq!(find_atomic_replay(&slots, 8, p(5), e.rkey, e.va + 8), None);
    // A READ at that PSN is not an atomic.
    t.clear(&mut slots);
    t.remember(&mut slots, 8, read(5, e.va, 8, 1024));
    assert_eq!(find_atomic_replay(&slots, 8, p(5), e.rkey, e.va), None);
    // Slots past the QP's max_dest_rd_atomic are not looked at.
    t.clear(&mut slots);
    slots[7] = atomic(5, 7);
    assert_eq!(find_atomic_replay(&slots, 4, p(5), e.rkey, e.va), None);
    // A limit of 0 remembers nothing.
    let mut t0 = RdTable::default();
    let mut s0 = [RdEntry::default(); 4];
    t0.remember(&mut s0, 0, atomic(1, 1));
    assert!(s0.iter().all(|e| e.kind == RdKind::Free));
}

#[test]
fn duplicate_read_of_nothing_is_dropped() {
    let slots = [RdEntry::default(); 8];
    assert_eq!(
        find_read_replay(&slots, 8, p(10), (0x5678, 0x1000, 4096), 1024),
        None
    );
}

#[test]
fn duplicate_read_replays_remembered_request() {
    let mut slots = [RdEntry::default(); 8];
    let mut t = RdTable::default();
    t.remember(&mut slots, 8, read(100, 0x10_000, 4000, 1024));
    let whole = find_read_replay(&slots, 8, p(100), (0x5678, 0x10_000, 4000), 1024);
    assert_eq!(
        whole,
        Some(ReadReplay {
            psn: p(100),
            va: 0x10_000,
            len: 4000,
            npkts: 4,
            rkey: 0x5678,
        })
    );
    // Resumed at the third response: answered from there.
    let mid = find_read_replay(
        &slots,
        8,
        p(102),
        (0x5678, 0x10_000 + 2048, 4000 - 2048),
        1024,
    );
    assert_eq!(
        mid,
        Some(ReadReplay {
            psn: p(102),
            va: 0x10_000 + 2048,
            len: 4000 - 2048,
            npkts: 2,
            rkey: 0x5678,
        })
    );
}

#[test]
fn duplicate_read_must_match() {
    let mut slots = [RdEntry::default(); 8];
    let mut t = RdTable::default();
    t.remember(&mut slots, 8, read(100, 0x10_000, 4000, 1024));
    let f = |psn: u32, rkey: u32, va: u64, len: u32, mtu: u32| {
        find_read_replay(&slots, 8, p(psn), (rkey, va, len), mtu)
    };
    // Other key; a range reaching outside the remembered one; a PSN
    // outside its responses; another MTU.
    assert_eq!(f(100, 0x9999, 0x10_000, 4000, 1024), None);
    assert_eq!(f(100, 0x5678, 0x10_000, 1 << 30, 1024), None);
    assert_eq!(f(100, 0x5678, 0x0f_000, 4000, 1024), None);
    assert_eq!(f(100, 0x5678, 0x10_001, 4000, 1024), None);
    assert_eq!(f(104, 0x5678, 0x10_000, 4000, 1024), None);
    assert_eq!(f(99, 0x5678, 0x10_000, 4000, 1024), None);
    assert_eq!(f(100, 0x5678, 0x10_000, 4000, 4096), None);
    // A replay never reads more than the original: the answer is the
    // remembered range from that PSN, whatever subset was asked for.
    let r = f(101, 0x5678, 0x10_000, 16, 1024).unwrap();
    assert_eq!((r.va, r.len, r.npkts), (0x10_000 + 1024, 4000 - 1024, 3));
}

#[test]
fn duplicate_read_across_psn_wrap() {
    let mut slots = [RdEntry::default(); 2];
    let mut t = RdTable::default();
    t.remember(&mut slots, 2, read(PSN_MASK - 1, 0x2000, 4 * 256, 256));
    let r = find_read_replay(&slots, 2, p(1), (0x5678, 0x2000 + 768, 256), 256).unwrap();
    assert_eq!((r.va, r.len, r.npkts), (0x2000 + 768, 256, 1));
    assert_eq!(
        find_read_replay(&slots, 2, p(2), (0x5678, 0x2000, 1024), 256),
        None
    );
}

#[test]
fn zero_length_read_replays() {
    let mut slots = [RdEntry::default(); 2];
    let mut t = RdTable::default();
    t.remember(&mut slots, 2, read(7, 0, 0, 1024));
    let r = find_read_replay(&slots, 2, p(7), (0x5678, 0, 0), 1024).unwrap();
    assert_eq!((r.len, r.npkts), (0, 1));
}

#[test]
fn rd_atomic_limit() {
    assert!(!admit_rd_atomic(0, 0));
    assert!(admit_rd_atomic(1, 0));
    assert!(!admit_rd_atomic(1, 1));
    assert!(admit_rd_atomic(128, 127));
    assert!(!admit_rd_atomic(128, 128));
}

#[test]
fn reth_length_cap() {
    assert!(reth_len_ok(0));
    assert!(reth_len_ok(MAX_MSG_LEN));
    assert!(!reth_len_ok(MAX_MSG_LEN + 1));
    assert!(!reth_len_ok(u32::MAX));
}

// ---- receive checks --------------------------------------------------------

#[test]
fn pkey_rules() {
    assert!(pkey_matches(0xffff, 0xffff));
    assert!(pkey_matches(0x7fff, 0xffff));
    assert!(!pkey_matches(0x7fff, 0x7fff));
    assert!(!pkey_matches(0x8000, 0xffff));
    assert!(!pkey_matches(0x0000, 0xffff));
    assert!(!pkey_matches(0x1234, 0xffff));
    assert!(!pkey_matches(0xfffe, 0xffff));
}

#[test]
fn opcodes_by_qp_type() {
    let all = [Transport::Rc, Transport::Uc, Transport::Ud, Transport::Cnp];
    for t in all {
        for qp in all {
            let fits = t == qp && t != Transport::Cnp;
            assert_eq!(opcode_fits_qp(t, qp), fits, "{t:?} to a {qp:?} QP");
        }
    }
    assert!(is_notification(Transport::Cnp));
    assert!(!is_notification(Transport::Rc));
}

#[test]
fn path_addresses() {
    let mut a = [0u8; 16];
    a[10] = 0xff;
    a[11] = 0xff;
    let (mut local, mut peer) = (a, a);
    local[12..].copy_from_slice(&[10, 0, 0, 1]);
    peer[12..].copy_from_slice(&[10, 0, 0, 2]);
    let mut spoof = peer;
    spoof[15] = 3;
    // A packet from the peer to us, against an AV to the peer from us.
    assert!(path_matches(&peer, &local, &peer, &local));
    assert!(!path_matches(&spoof, &local, &peer, &local));
    assert!(!path_matches(&peer, &spoof, &peer, &local));
    assert!(!path_matches(&local, &peer, &peer, &local));
}

#[test]
fn unexpected_responses() {
    // Nothing outstanding: any response is unexpected.
    assert!(!response_expected(p(5), p(5), p(5)));
    assert!(!response_expected(p(4), p(5), p(5)));
    // Outstanding 5..10: in range or stale is fine, beyond is not.
    assert!(response_expected(p(5), p(5), p(10)));
    assert!(response_expected(p(9), p(5), p(10)));
    assert!(response_expected(p(1), p(5), p(10)));
    assert!(!response_expected(p(10), p(5), p(10)));
    assert!(!response_expected(p(1000), p(5), p(10)));
    // Across the wrap.
    assert!(response_expected(p(1), p(PSN_MASK), p(3)));
    assert!(!response_expected(p(3), p(PSN_MASK), p(3)));
}

#[test]
fn fresh_table_ignores_stale_slots() {
    // The responder's state is reset at RTR; slots from the previous
    // connection must not answer duplicates of the new one.
    let mut slots = [RdEntry::default(); 4];
    let mut old = RdTable::default();
    old.remember(&mut slots, 4, atomic(3, 9));
    old.remember(&mut slots, 4, read(10, 0x1000, 100, 1024));
    let e = atomic(3, 0);
    assert_eq!(old.find_atomic(&slots, 4, p(3), e.rkey, e.va), Some(9));
    let fresh = RdTable::default();
    assert_eq!(fresh.find_atomic(&slots, 4, p(3), e.rkey, e.va), None);
    assert_eq!(
        fresh.find_read(&slots, 4, p(10), (0x5678, 0x1000, 100), 1024),
        None
    );
    let mut t = fresh;
    t.remember(&mut slots, 4, atomic(20, 1));
    assert_eq!(t.find_atomic(&slots, 4, p(3), e.rkey, e.va), None);
    assert_eq!(slots.iter().filter(|s| s.kind != RdKind::Free).count(), 1);
}

#[test]
fn uc_requests() {
    // In sequence: taken, whether it starts a message or continues one.
    assert_eq!(uc_request(p(10), p(10), false, true), UcRequest::Take);
    assert_eq!(uc_request(p(10), p(10), false, false), UcRequest::Take);
    // A gap (ahead, or behind: UC never resends, so "behind" is a
    // wrap or a peer that started over): a new message starts over, the
    // rest of a broken one is dropped.
    for psn in [p(11), p(9), p(PSN_MASK)] {
        assert_eq!(uc_request(psn, p(10), false, true), UcRequest::Resync);
        assert_eq!(uc_request(psn, p(10), false, false), UcRequest::Drop);
    }
    // While dropping, even the expected PSN is dropped until a message
    // starts.
    assert_eq!(uc_request(p(10), p(10), true, false), UcRequest::Drop);
    assert_eq!(uc_request(p(10), p(10), true, true), UcRequest::Resync);
}
