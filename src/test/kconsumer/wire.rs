// SPDX-License-Identifier: GPL-2.0

//! A peer's responses, built with the wire codec and handed to a kernel
//! QP's completer as the receive path would (under the QP lock), in orders
//! a real peer produces only by chance: each case pins down one sequence.
//! Also what a responder answers to the requests behind its RNR NAK.

use kernel::sync::rcu;

use super::*;
use crate::{
    engine::{
        psn::Psn,
        wire::{self, Aeth, Bth, Headers, Opcode, Syndrome},
    },
    qp::RroceQp,
};

/// The first PSN `TestQp::connect` gives a QP's send queue.
const FIRST_PSN: u32 = 0x100;

/// One of the transport's values in `qp`'s restrack snapshot.
pub(super) fn diag(qp: &TestQp, name: &str) -> u32 {
    // SAFETY: a live QP of an rroce device.
    let d = unsafe { RroceQp::state(qp.0) }.diag();
    d.iter()
        .find(|(n, _)| n.to_bytes() == name.as_bytes())
        .map_or(u32::MAX, |&(_, v)| v)
}

/// Waits up to a second for `qp`'s diagnostic value `name` to satisfy
/// `want`.
fn wait_diag(qp: &TestQp, name: &str, want: impl Fn(u32) -> bool) -> bool {
    for _ in 0..100 {
        if want(diag(qp, name)) {
            return true;
        }
        fsleep(Delta::from_millis(10));
    }
    false
}

/// Waits up to a second for `qp`'s next PSN to reach `psn`.
fn sent_through(qp: &TestQp, psn: u32) -> bool {
    wait_diag(qp, "psn", |v| v == psn)
}

/// Hands `qp` an ACK-class response (RNR NAK, ACK) at `psn` as its peer's.
fn respond(qp: &TestQp, psn: u32, syndrome: Syndrome, msn: u32) -> Result<(), &'static str> {
    let mut h = Headers::new(Bth::new(Opcode::RcAck, 0xffff, qp.qpn(), Psn::new(psn)));
    h.aeth = Some(Aeth { syndrome, msn });
    let mut buf = [0u8; 64];
    let n = wire::build(&h, &[], &mut buf).map_err(|_| "cannot build the response")?;
    let pkt = wire::parse(buf.get(..n).ok_or("short")?, None).map_err(|_| "cannot parse it")?;
    let guard = rcu::read_lock();
    // SAFETY: a live QP of an rroce device.
    unsafe { RroceQp::state(qp.0) }.deliver(&guard, |ctx| ctx.on_response(&pkt));
    Ok(())
}

/// Acknowledges through `psn` (MSN `msn`) and waits for the completion
/// that ACK must produce: `id` with `status`. Fails with `errs[0]` for
/// another completion (logged), `errs[1]` for none.
fn ack_completes(
    qp: &TestQp,
    cq: &TestCq,
    (psn, msn): (u32, u32),
    (id, status): (u64, sys::ib_wc_status),
    errs: [&'static str; 2],
) -> Result<(), &'static str> {
    let credits = Syndrome::CREDITS_INVALID;
    respond(qp, psn, Syndrome::Ack { credits }, msn)?;
    match wait_wcs(cq, 1).first() {
        Some(wc) if wc.status == status && wr_id(wc) == id => Ok(()),
        Some(wc) => {
            pr_err!("completion: wr_id {:#x} status {}\n", wr_id(wc), wc.status);
            Err(errs[0])
        }
        None => Err(errs[1]),
    }
}

/// An RNR NAK for a WRITE, then an ACK for it before the RNR timer (the
/// responder took a second copy of the packet, sent before the NAK came:
/// what ODP faults and retransmissions produce). The ACK retires the
/// WRITE; the QP must not keep waiting out an RNR timer the ACK made
/// pointless: the next WQE goes out at once. (It was left waiting
/// forever: the ACK cancelled the timer, whose expiry alone ended the
/// wait, and nothing was sent on that QP again.)
pub(crate) fn ack_ends_rnr_wait() -> Result<(), &'static str> {
    use sys::*;
    let dev = TestDev::new()?;
    let Some((sgid, gid)) = loopback_gid(&dev) else {
        return Err("no ::ffff:127.0.0.1 GID on the loopback device");
    };
    let src = pattern(8, 5)?;
    let pd = TestPd::new(&dev)?;
    let c = Consumer::new(false);
    let cq = TestCq::new(&dev, 16, 0, &c)?;
    let a = TestQp::new(&pd, &cq)?;
    // The peer: a QP left in RESET, which drops what `a` sends. The
    // responses `a` gets are this test's.
    let peer = TestQp::new(&pd, &cq)?;
    a.connect(peer.qpn(), &gid, sgid)?;
    let s = sge(src.as_ptr(), src.len(), pd.lkey());
    let mut w = rdma_wr(0xe1, ib_wr_opcode_IB_WR_RDMA_WRITE, &s, 0x1000, 0x4242);
    if a.post_send(&w.wr).0 != 0 {
        return Err("post_send of the first WRITE failed");
    }
    if !sent_through(&a, FIRST_PSN + 1) {
        return Err("the first WRITE was not sent");
    }
    // RNR NAK with the longest timer (491.52 ms), then the ACK.
    respond(&a, FIRST_PSN, Syndrome::RnrNak { timer: 31 }, 0)?;
    if diag(&a, "rnr_wait") != 1 {
        return Err("the RNR NAK did not start an RNR wait");
    }
    ack_completes(
        &a,
        &cq,
        (FIRST_PSN, 1),
        (0xe1, ib_wc_status_IB_WC_SUCCESS),
        [
            "the first WRITE completed in error",
            "the ACK did not complete the first WRITE",
        ],
    )?;
    if diag(&a, "rnr_wait") != 0 {
        pr_err!(
            "after the ACK: una {:#x} psn {:#x}\n",
            diag(&a, "una"),
            diag(&a, "psn")
        );
        return Err("the ACK of everything sent left the QP in its RNR wait");
    }
    w.wr.__bindgen_anon_1.wr_id = 0xe2;
    if a.post_send(&w.wr).0 != 0 {
        return Err("post_send of the second WRITE failed");
    }
    // Well before the RNR timer would have run out.
    let sent = (0..10).any(|_| {
        fsleep(Delta::from_millis(10));
        diag(&a, "psn") == FIRST_PSN + 2
    });
    a.to_error()?;
    let _ = wait_wcs(&cq, 1);
    if !sent {
        return Err("the next WRITE was not sent");
    }
    Ok(())
}

/// `query_qp`'s `sq_draining` of `qp`.
fn sq_draining(qp: &TestQp) -> Result<u8, &'static str> {
    Ok(super::qplife::query(qp, 0)?.0.sq_draining)
}

/// Moves `qp` to `state` (`notify`: asking for `IB_EVENT_SQ_DRAINED`).
fn move_to(qp: &TestQp, state: sys::ib_qp_state, notify: bool) -> Result<(), &'static str> {
    use sys::*;
    // SAFETY: all-zero is a valid `ib_qp_attr`.
    let mut a: ib_qp_attr = unsafe { core::mem::zeroed() };
    a.qp_state = state;
    let mut mask = ib_qp_attr_mask_IB_QP_STATE;
    if notify {
        a.en_sqd_async_notify = 1;
        mask |= ib_qp_attr_mask_IB_QP_EN_SQD_ASYNC_NOTIFY;
    }
    if qp.modify(&mut a, mask) != 0 {
        return Err("modify_qp failed");
    }
    Ok(())
}

/// `IB_EVENT_SQ_DRAINED` events counted, after up to a second for them to
/// reach `want` (they come from the QP's work item).
fn drained_events(events: &QpEvents, want: u32) -> u32 {
    for _ in 0..100 {
        if events.sq_drained.load(Ordering::SeqCst) >= want {
            break;
        }
        fsleep(Delta::from_millis(10));
    }
    events.sq_drained.load(Ordering::SeqCst)
}

/// SQD (send queue drain) finishes what the QP began and starts nothing
/// new. A SEND lost on the wire is retransmitted in SQD; once it is
/// acknowledged the drain is over (`sq_draining` falls, the one
/// `IB_EVENT_SQ_DRAINED` asked for is raised), while a SEND posted in SQD
/// waits; back in RTS it goes out with no further post. A drain with
/// nothing in flight is over at once, and raises nothing unless asked.
/// (The timer was ignored in SQD, so a lost packet was never sent again
/// and the drain never ended; the return to RTS left the waiting SEND for
/// the next post.)
pub(crate) fn sqd_finishes_then_resumes() -> Result<(), &'static str> {
    use sys::*;
    static EVENTS: QpEvents = QpEvents::new();
    EVENTS.clear();
    let dev = TestDev::new()?;
    let Some((sgid, gid)) = loopback_gid(&dev) else {
        return Err("no ::ffff:127.0.0.1 GID on the loopback device");
    };
    let src = pattern(8, 9)?;
    let pd = TestPd::new(&dev)?;
    let c = Consumer::new(false);
    let cq = TestCq::new(&dev, 16, 0, &c)?;
    let a = TestQp::with_events(&pd, &cq, &EVENTS)?;
    // The peer: a QP left in RESET, which drops what `a` sends. The
    // ACKs `a` gets are this test's.
    let peer = TestQp::new(&pd, &cq)?;
    // Timeout 14: 67 ms, seven retries (about half a second of losses).
    a.connect(peer.qpn(), &gid, sgid)?;
    let s = sge(src.as_ptr(), src.len(), pd.lkey());
    if a.post_send(&send_wr(0xd1, ib_wr_opcode_IB_WR_SEND, &s)).0 != 0 {
        return Err("post_send of the first SEND failed");
    }
    if !sent_through(&a, FIRST_PSN + 1) {
        return Err("the first SEND was not sent");
    }
    move_to(&a, ib_qp_state_IB_QPS_SQD, true)?;
    // Resent in SQD (a timeout before the move resent it in RTS).
    let resent = diag(&a, "req_resent");
    if sq_draining(&a)? != 1 {
        return Err("a QP with a SEND unacknowledged is not draining");
    }
    if a.post_send(&send_wr(0xd2, ib_wr_opcode_IB_WR_SEND, &s)).0 != 0 {
        return Err("post_send in SQD failed");
    }
    if !wait_diag(&a, "req_resent", |v| v > resent) {
        return Err("the lost SEND was not sent again in SQD");
    }
    if diag(&a, "max_psn") != FIRST_PSN + 1 {
        return Err("the SEND posted in SQD was sent");
    }
    ack_completes(
        &a,
        &cq,
        (FIRST_PSN, 1),
        (0xd1, ib_wc_status_IB_WC_SUCCESS),
        [
            "the first SEND completed wrong",
            "the ACK did not complete the first SEND",
        ],
    )?;
    if sq_draining(&a)? != 0 || drained_events(&EVENTS, 1) != 1 {
        return Err("the drain did not end with one IB_EVENT_SQ_DRAINED");
    }
    if diag(&a, "max_psn") != FIRST_PSN + 1 {
        return Err("the SEND posted in SQD was sent before RTS");
    }
    move_to(&a, ib_qp_state_IB_QPS_RTS, false)?;
    if !sent_through(&a, FIRST_PSN + 2) {
        return Err("the SEND posted in SQD did not go out at RTS");
    }
    ack_completes(
        &a,
        &cq,
        (FIRST_PSN + 1, 2),
        (0xd2, ib_wc_status_IB_WC_SUCCESS),
        [
            "the second SEND completed wrong",
            "the ACK did not complete the second SEND",
        ],
    )?;
    // Nothing in flight, no event asked for: drained on entry, silently.
    move_to(&a, ib_qp_state_IB_QPS_SQD, false)?;
    if sq_draining(&a)? != 0 {
        return Err("an idle QP's drain did not end at once");
    }
    if drained_events(&EVENTS, 2) != 1 {
        return Err("IB_EVENT_SQ_DRAINED raised unasked");
    }
    // A drain whose event the work item has not raised yet (it cannot
    // run: the transmit is held) when the QP leaves SQD: the event goes
    // with SQD, rather than reach a handler that finds the QP in RTS.
    move_to(&a, ib_qp_state_IB_QPS_RTS, false)?;
    // SAFETY: a live QP of an rroce device.
    let st = unsafe { RroceQp::state(a.0) };
    st.hold_tx_after(0);
    let moved = move_to(&a, ib_qp_state_IB_QPS_SQD, true)
        .and_then(|()| move_to(&a, ib_qp_state_IB_QPS_RTS, false));
    // Runs the work item.
    st.open_tx();
    moved?;
    if drained_events(&EVENTS, 2) != 1 {
        return Err("IB_EVENT_SQ_DRAINED raised after the QP left SQD");
    }
    Ok(())
}

/// SQD is where a connected QP's timeout and retry counts may change
/// (`ib_modify_qp_is_ok`): they apply to what is in flight at once. A
/// SEND lost while the QP has no timeout (0: never) is resent once SQD
/// gives it one, and the drain ends. (The new timeout waited for the next
/// packet sent, which a draining QP does not send: the SEND was never
/// resent and the drain never ended.)
pub(crate) fn sqd_applies_new_timeout() -> Result<(), &'static str> {
    use sys::*;
    let dev = TestDev::new()?;
    let Some((sgid, gid)) = loopback_gid(&dev) else {
        return Err("no ::ffff:127.0.0.1 GID on the loopback device");
    };
    let src = pattern(8, 10)?;
    let pd = TestPd::new(&dev)?;
    let c = Consumer::new(false);
    let cq = TestCq::new(&dev, 16, 0, &c)?;
    let a = TestQp::new(&pd, &cq)?;
    // The peer: a QP left in RESET, which drops what `a` sends.
    let peer = TestQp::new(&pd, &cq)?;
    a.connect_with(peer.qpn(), &gid, sgid, 0)?;
    let s = sge(src.as_ptr(), src.len(), pd.lkey());
    if a.post_send(&send_wr(0xd5, ib_wr_opcode_IB_WR_SEND, &s)).0 != 0 {
        return Err("post_send failed");
    }
    if !sent_through(&a, FIRST_PSN + 1) {
        return Err("the SEND was not sent");
    }
    move_to(&a, ib_qp_state_IB_QPS_SQD, false)?;
    // SAFETY: all-zero is a valid `ib_qp_attr`.
    let mut m: ib_qp_attr = unsafe { core::mem::zeroed() };
    m.qp_state = ib_qp_state_IB_QPS_SQD;
    m.timeout = 14;
    if a.modify(
        &mut m,
        ib_qp_attr_mask_IB_QP_STATE | ib_qp_attr_mask_IB_QP_TIMEOUT,
    ) != 0
    {
        return Err("modify SQD -> SQD with a timeout failed");
    }
    if !wait_diag(&a, "req_resent", |v| v > 0) {
        return Err("the new timeout did not resend the lost SEND");
    }
    ack_completes(
        &a,
        &cq,
        (FIRST_PSN, 1),
        (0xd5, ib_wc_status_IB_WC_SUCCESS),
        [
            "the SEND completed wrong",
            "the ACK did not complete the SEND",
        ],
    )?;
    if sq_draining(&a)? != 0 {
        return Err("the drain did not end");
    }
    Ok(())
}

/// A SEND whose second SGE names no MR fails at its third packet, after
/// two were sent. When those two are lost they are resent: the WQE then
/// completes with its own error once they are acknowledged. (The
/// requester stopped at the failed WQE even to resend what of it was
/// sent, so it ran out of retries: `IB_WC_RETRY_EXC_ERR`, for a local
/// protection error.)
pub(crate) fn partly_sent_bad_wqe_resent() -> Result<(), &'static str> {
    use sys::*;
    let dev = TestDev::new()?;
    let Some((sgid, gid)) = loopback_gid(&dev) else {
        return Err("no ::ffff:127.0.0.1 GID on the loopback device");
    };
    let src = pattern(2048, 13)?;
    let pd = TestPd::new(&dev)?;
    let c = Consumer::new(false);
    let cq = TestCq::new(&dev, 16, 0, &c)?;
    let a = TestQp::new(&pd, &cq)?;
    // The peer: a QP left in RESET, which drops what `a` sends.
    let peer = TestQp::new(&pd, &cq)?;
    a.connect(peer.qpn(), &gid, sgid)?;
    let sges = [
        sge(src.as_ptr(), 2048, pd.lkey()),
        sge(src.as_ptr(), 8, pd.lkey() ^ 0x5a_5a00),
    ];
    let mut w = send_wr(0xd7, ib_wr_opcode_IB_WR_SEND, &sges[0]);
    w.num_sge = 2;
    if a.post_send(&w).0 != 0 {
        return Err("post_send failed");
    }
    // Two packets of 1024 bytes sent, the third not built.
    if !sent_through(&a, FIRST_PSN + 2) {
        return Err("the first two packets were not sent");
    }
    if !wait_diag(&a, "req_resent", |v| v >= 2) {
        return Err("the lost packets of the failed SEND were not resent");
    }
    ack_completes(
        &a,
        &cq,
        (FIRST_PSN + 1, 0),
        (0xd7, ib_wc_status_IB_WC_LOC_PROT_ERR),
        [
            "the failed SEND completed with another status",
            "the failed SEND never completed",
        ],
    )
}

/// `wcs` are successful completions of exactly the work requests `ids`,
/// in any order.
fn succeeded(wcs: &KVec<sys::ib_wc>, ids: [u64; 2]) -> bool {
    let mut got: KVec<(u32, u64)> = KVec::new();
    for wc in wcs.iter() {
        if got.push((wc.status, wr_id(wc)), GFP_KERNEL).is_err() {
            return false;
        }
    }
    got.sort_unstable_by_key(|&(_, id)| id);
    got.iter()
        .copied()
        .eq(ids.iter().map(|&id| (sys::ib_wc_status_IB_WC_SUCCESS, id)))
}

/// The end of a case where `a` and `b` each sent the other one SEND of
/// `src`: each side's CQ serves its send and receive queues, so `a`'s
/// holds its SEND and its receive (`a_ids`), `b`'s the same (`b_ids`),
/// all successful, and both receive buffers (`bufs`) hold `src`.
fn sends_crossed(
    p: &super::peer::Pair,
    a_ids: [u64; 2],
    b_ids: [u64; 2],
    src: &[u8],
    bufs: [&[u8]; 2],
) -> Result<(), &'static str> {
    let recvd = wait_wcs(&p.cq_b, 2);
    let sent = wait_wcs(&p.cq_a, 2);
    // Each side's receive completes first (it is done at arrival), then
    // its SEND once acked.
    if !succeeded(&sent, a_ids) || !succeeded(&recvd, b_ids) {
        return Err("the SENDs did not complete on both sides");
    }
    if bufs.iter().any(|b| b[..] != src[..]) {
        return Err("SEND data differs");
    }
    Ok(())
}

/// A SEND posted while another context sends the QP's responses (here the
/// test, holding the response lane's busy flag: on two CPUs, the softirq
/// sending the ACKs the QP's responder owes to a peer that is itself
/// waiting for this SEND) leaves at once: the requester's and the
/// responder's packets go in separate lanes, each with its own sender.
/// With one sender for both, the SEND waited for the ACKs' sender to
/// finish and leave, and went from its CPU (a ping-pong's every message,
/// half of them on the wrong CPU). The ACK the QP owes for the peer's
/// SEND meanwhile does wait for the lane's sender: it is a response.
pub(crate) fn request_passes_held_responses() -> Result<(), &'static str> {
    use sys::*;
    let p = super::peer::Pair::new()?;
    let lkey = p.pd.lkey();
    let src = pattern(64, 5)?;
    let mut rbuf = zeroed(64)?;
    let mut back = zeroed(64)?;
    let r = sge(rbuf.as_mut_ptr(), 64, lkey);
    if p.b.post_recv(&recv_wr(0xf1, &r)).0 != 0 {
        return Err("post_recv failed");
    }
    // SAFETY: a live QP of an rroce device.
    let a = unsafe { RroceQp::state(p.a.0) };
    if !a.hold_responses(true) {
        return Err("the response lane of an idle QP was busy");
    }
    let s = sge(src.as_ptr(), 64, lkey);
    let posted = p.a.post_send(&send_wr(0xf2, ib_wr_opcode_IB_WR_SEND, &s)).0 == 0;
    let arrived = posted && wait_diag(&p.b, "epsn", |v| v == FIRST_PSN + 1);
    // The other way: a SEND from B, whose ACK A's responder queues in the
    // held lane.
    let r2 = sge(back.as_mut_ptr(), 64, lkey);
    let back_posted = p.a.post_recv(&recv_wr(0xf3, &r2)).0 == 0
        && p.b.post_send(&send_wr(0xf4, ib_wr_opcode_IB_WR_SEND, &s)).0 == 0;
    let back_arrived = back_posted && wait_diag(&p.a, "epsn", |v| v == FIRST_PSN + 1);
    // Long enough for the ACK to come back, were it sent.
    fsleep(Delta::from_millis(50));
    let acked_while_held = diag(&p.b, "una") != FIRST_PSN;
    let was_held = a.hold_responses(false);
    if !posted || !back_posted {
        return Err("post_send or post_recv failed");
    }
    if !arrived {
        return Err("the SEND waited behind the sender of the QP's responses");
    }
    if !back_arrived {
        return Err("the peer's SEND did not arrive");
    }
    if !was_held {
        return Err("the response lane was let go by someone else");
    }
    if acked_while_held {
        return Err("an ACK left while another context held the response lane");
    }
    sends_crossed(&p, [0xf2, 0xf3], [0xf1, 0xf4], &src, [&rbuf, &back])
}

/// A request its post built but has not sent yet (on two CPUs: a
/// doorbell between the two, while the other CPU's softirq receives for
/// the QP) is left for the post to send: a received packet's dispatch
/// sends only the lanes it queued packets into, here the ACK it owes.
/// When it sent the request lane too, with requests in flight from the
/// poster's CPU it kicked the transmit to that CPU's receive thread, which
/// woke for a packet the post was about to send itself (in a ping-pong,
/// nearly every request). Then the post's send takes the request, and
/// both SENDs complete with their data. `a` has no retransmission timer:
/// nothing else may send its request meanwhile.
pub(crate) fn receive_leaves_requests_to_their_post() -> Result<(), &'static str> {
    use sys::*;
    let p = super::peer::Pair::with_timeout(0)?;
    let lkey = p.pd.lkey();
    let src = pattern(64, 7)?;
    let mut rbuf = zeroed(64)?;
    let mut back = zeroed(64)?;
    let r = sge(rbuf.as_mut_ptr(), 64, lkey);
    let r2 = sge(back.as_mut_ptr(), 64, lkey);
    if p.b.post_recv(&recv_wr(0xe1, &r)).0 != 0 || p.a.post_recv(&recv_wr(0xe3, &r2)).0 != 0 {
        return Err("post_recv failed");
    }
    // SAFETY: a live QP of an rroce device.
    let a = unsafe { RroceQp::state(p.a.0) };
    a.leave_unsent();
    let s = sge(src.as_ptr(), 64, lkey);
    if p.a.post_send(&send_wr(0xe2, ib_wr_opcode_IB_WR_SEND, &s)).0 != 0 {
        return Err("post_send failed");
    }
    let built = a.requests_waiting();
    // The other way: a SEND from B, which A's responder ACKs.
    let back_posted = p.b.post_send(&send_wr(0xe4, ib_wr_opcode_IB_WR_SEND, &s)).0 == 0;
    let back_arrived = back_posted && wait_diag(&p.a, "epsn", |v| v == FIRST_PSN + 1);
    let acked = back_arrived && wait_diag(&p.b, "una", |v| v == FIRST_PSN + 1);
    let left = a.requests_waiting();
    let early = diag(&p.b, "epsn") != FIRST_PSN;
    // The post's own send, which it made after the dispatch.
    a.flush_tx();
    if built != 1 {
        return Err("the post did not leave its request waiting");
    }
    if !back_posted {
        return Err("post_send on the peer failed");
    }
    if !back_arrived {
        return Err("the peer's SEND did not arrive");
    }
    if !acked {
        return Err("the dispatch did not send the ACK it owed");
    }
    if left != 1 || early {
        return Err("a received packet's dispatch sent a request it had not built");
    }
    sends_crossed(&p, [0xe2, 0xe3], [0xe1, 0xe4], &src, [&rbuf, &back])
}

/// A QP whose requests are all acknowledged sends its next one from the
/// CPU it is posted on: the CPU its requests must leave from while some
/// are in flight (`QpState::send_queued`) follows an idle QP's poster.
/// A request used to count as in flight from the moment it was built, so
/// the first CPU to send for a QP stayed its home for good and every post
/// from another CPU kicked the transmit back there (for a kernel consumer
/// posting from whichever CPU its caller runs on, a wake-up per request).
///
/// Needs CPUs 0 and 1 online and the module parameter `tx_keep_cpu` on
/// (the default); `a` has no retransmission timer, so nothing but the
/// posts sends its requests.
pub(crate) fn home_follows_an_idle_qps_poster() -> Result<(), &'static str> {
    use sys::*;
    let p = super::peer::Pair::with_timeout(0)?;
    let lkey = p.pd.lkey();
    let src = pattern(64, 3)?;
    let mut rbuf = zeroed(128)?;
    let r = [
        sge(rbuf.as_mut_ptr(), 64, lkey),
        sge(rbuf.as_mut_ptr().wrapping_add(64), 64, lkey),
    ];
    if p.b.post_recv(&recv_wr(0xd1, &r[0])).0 != 0 || p.b.post_recv(&recv_wr(0xd2, &r[1])).0 != 0 {
        return Err("post_recv failed");
    }
    // SAFETY: a live QP of an rroce device.
    let a = unsafe { RroceQp::state(p.a.0) };
    let s = sge(src.as_ptr(), 64, lkey);
    let send = |id: u64, cpu: i32| {
        // SAFETY: plain call; binds this thread only.
        if unsafe { sys::rroce_helper_test_run_on(cpu) } != 0 {
            return Err("cannot run on CPU 0 and 1");
        }
        // SAFETY: plain query. On CPU 0, a QP whose requests in flight
        // left from CPU 1 must send from there: the rule is on.
        if cpu == 0 && unsafe { sys::rroce_helper_tx_elsewhere(1) } != 1 {
            // SAFETY: as above.
            unsafe { sys::rroce_helper_test_run_on(-1) };
            return Err("tx_keep_cpu is off: this case needs it on");
        }
        let posted = p.a.post_send(&send_wr(id, ib_wr_opcode_IB_WR_SEND, &s)).0 == 0;
        // SAFETY: as above.
        unsafe { sys::rroce_helper_test_run_on(-1) };
        let wcs = wait_wcs(&p.cq_a, 1);
        let home = a.home_and_kicks();
        match wcs.first() {
            _ if !posted => Err("post_send failed"),
            Some(wc) if wc.status == ib_wc_status_IB_WC_SUCCESS && wr_id(wc) == id => Ok(home),
            _ => Err("the SEND did not complete"),
        }
    };
    let (home0, kicks0) = send(0xd3, 0)?;
    // The first SEND is acknowledged (it completed): nothing is in flight.
    let (home1, kicks1) = send(0xd4, 1)?;
    let recvd = wait_wcs(&p.cq_b, 2);
    if home0 != 0 || home1 != 1 {
        pr_err!("homes {home0} then {home1}\n");
        return Err("an idle QP's requests did not leave from the CPU they were posted on");
    }
    if kicks1 != kicks0 {
        return Err("a post on another CPU kicked an idle QP's transmit to its old CPU");
    }
    if !succeeded(&recvd, [0xd1, 0xd2]) || rbuf[..64] != src[..] || rbuf[64..] != src[..] {
        return Err("the SENDs did not arrive intact");
    }
    Ok(())
}

/// Two SENDs in one post to a responder with no receive WQE: the first
/// gets an RNR NAK; the second, already on its way, must be dropped in
/// silence, not NAKed as out of sequence (that NAK told the requester of
/// a loss that did not happen, which halved its window; a stream of small
/// SENDs outrunning its receiver drew one at every RNR).
/// Once receives are posted both SENDs arrive, in order, intact.
pub(crate) fn rnr_nak_silences_the_rest() -> Result<(), &'static str> {
    use sys::*;
    let p = super::peer::Pair::new()?;
    let lkey = p.pd.lkey();
    let src = pattern(128, 9)?;
    let mut rbuf = zeroed(128)?;
    let s = [
        sge(src.as_ptr(), 64, lkey),
        sge(src.as_ptr().wrapping_add(64), 64, lkey),
    ];
    let mut w = [
        send_wr(0xc1, ib_wr_opcode_IB_WR_SEND, &s[0]),
        send_wr(0xc2, ib_wr_opcode_IB_WR_SEND, &s[1]),
    ];
    let [w1, w2] = &mut w;
    w1.next = w2;
    if p.a.post_send(w1).0 != 0 {
        return Err("post_send of two SENDs failed");
    }
    // Two RNR NAKs: the second SEND of the first round (sent before the
    // first NAK was handled: `max_psn`) reached the responder before the
    // retry that drew the second, over the loopback's one queue.
    if !wait_diag(&p.b, "resp_rnr_naks", |v| v >= 2) {
        return Err("the responder sent no RNR NAK, or only one");
    }
    if diag(&p.a, "max_psn") != FIRST_PSN + 2 {
        return Err("the second SEND was never sent");
    }
    // Both SENDs arrive now, at whichever retry comes next.
    let r = [
        sge(rbuf.as_mut_ptr(), 64, lkey),
        sge(rbuf.as_mut_ptr().wrapping_add(64), 64, lkey),
    ];
    let mut rw = [recv_wr(0xd1, &r[0]), recv_wr(0xd2, &r[1])];
    let [r1, r2] = &mut rw;
    r1.next = r2;
    if p.b.post_recv(r1).0 != 0 {
        return Err("post_recv failed");
    }
    let sent = wait_wcs(&p.cq_a, 2);
    let recvd = wait_wcs(&p.cq_b, 2);
    let (seq_b, seq_a) = (diag(&p.b, "resp_seq_naks"), diag(&p.a, "req_seq_naks"));
    if seq_b != 0 || seq_a != 0 {
        pr_err!("sequence NAKs during the RNR retries: sent {seq_b}, received {seq_a}\n");
        return Err("requests behind an RNR NAK were NAKed as out of sequence");
    }
    let ok = |v: &KVec<ib_wc>, id: u64| {
        v.iter().map(|wc| (wc.status, wr_id(wc))).eq([
            (ib_wc_status_IB_WC_SUCCESS, id),
            (ib_wc_status_IB_WC_SUCCESS, id + 1),
        ])
    };
    if !ok(&sent, 0xc1) || !ok(&recvd, 0xd1) {
        return Err("the SENDs did not both complete, in order, after the RNR NAKs");
    }
    if rbuf[..] != src[..] {
        return Err("SEND data differs");
    }
    Ok(())
}

/// RESET -> INIT -> RTR -> RTS of UC QP `qp` towards `dest` at `gid` (GID
/// index `sgid`), path MTU 1024: the attributes UC takes, no more.
fn connect_uc(qp: &TestQp, dest: u32, gid: &sys::ib_gid, sgid: u8) -> Result<(), &'static str> {
    use sys::*;
    // SAFETY: all-zero is a valid `ib_qp_attr`.
    let mut a: ib_qp_attr = unsafe { core::mem::zeroed() };
    a.qp_state = ib_qp_state_IB_QPS_INIT;
    a.port_num = 1;
    a.qp_access_flags = ib_access_flags_IB_ACCESS_LOCAL_WRITE as i32;
    let m = ib_qp_attr_mask_IB_QP_STATE
        | ib_qp_attr_mask_IB_QP_PKEY_INDEX
        | ib_qp_attr_mask_IB_QP_PORT
        | ib_qp_attr_mask_IB_QP_ACCESS_FLAGS;
    if qp.modify(&mut a, m) != 0 {
        return Err("UC modify to INIT failed");
    }
    // SAFETY: as above.
    let mut a: ib_qp_attr = unsafe { core::mem::zeroed() };
    a.qp_state = ib_qp_state_IB_QPS_RTR;
    a.path_mtu = ib_mtu_IB_MTU_1024;
    a.dest_qp_num = dest;
    a.rq_psn = FIRST_PSN;
    a.ah_attr.type_ = rdma_ah_attr_type_RDMA_AH_ATTR_TYPE_ROCE;
    a.ah_attr.port_num = 1;
    a.ah_attr.ah_flags = ib_ah_flags_IB_AH_GRH as u8;
    a.ah_attr.grh.dgid = *gid;
    a.ah_attr.grh.sgid_index = sgid;
    a.ah_attr.grh.hop_limit = 64;
    let m = ib_qp_attr_mask_IB_QP_STATE
        | ib_qp_attr_mask_IB_QP_AV
        | ib_qp_attr_mask_IB_QP_PATH_MTU
        | ib_qp_attr_mask_IB_QP_DEST_QPN
        | ib_qp_attr_mask_IB_QP_RQ_PSN;
    if qp.modify(&mut a, m) != 0 {
        return Err("UC modify to RTR failed");
    }
    // SAFETY: as above.
    let mut a: ib_qp_attr = unsafe { core::mem::zeroed() };
    a.qp_state = ib_qp_state_IB_QPS_RTS;
    a.sq_psn = FIRST_PSN;
    let m = ib_qp_attr_mask_IB_QP_STATE | ib_qp_attr_mask_IB_QP_SQ_PSN;
    if qp.modify(&mut a, m) != 0 {
        return Err("UC modify to RTS failed");
    }
    Ok(())
}

/// A UC requester asks for no ACK and so counts no packet as sent
/// without asking: after a SEND of eight packets (which UC completes once
/// sent), its count of packets since the last ACK request (`noack`, an RC
/// requester's) is 0. (UC counted every packet and never started over:
/// 2^32 packets on one UC QP overflowed the count, an oops in a kernel
/// built with overflow checks.)
pub(crate) fn uc_counts_no_ack_requests() -> Result<(), &'static str> {
    use sys::*;
    let dev = TestDev::new()?;
    let Some((sgid, gid)) = loopback_gid(&dev) else {
        return Err("no ::ffff:127.0.0.1 GID on the loopback device");
    };
    let src = pattern(8 << 10, 11)?;
    let pd = TestPd::new(&dev)?;
    let c = Consumer::new(false);
    let cq = TestCq::new(&dev, 16, 0, &c)?;
    let a = TestQp::create(&pd, &cq, None, null_mut(), ib_qp_type_IB_QPT_UC)?;
    // The peer: a QP left in RESET, which drops what `a` sends.
    let peer = TestQp::new(&pd, &cq)?;
    connect_uc(&a, peer.qpn(), &gid, sgid)?;
    let s = sge(src.as_ptr(), src.len(), pd.lkey());
    if a.post_send(&send_wr(0xe5, ib_wr_opcode_IB_WR_SEND, &s)).0 != 0 {
        return Err("post_send of the UC SEND failed");
    }
    match wait_wcs(&cq, 1).first() {
        Some(wc) if wc.status == ib_wc_status_IB_WC_SUCCESS && wr_id(wc) == 0xe5 => {}
        Some(_) => return Err("the UC SEND completed in error"),
        None => return Err("the UC SEND did not complete"),
    }
    if diag(&a, "psn") != FIRST_PSN + 8 {
        return Err("the UC SEND was not sent as eight packets");
    }
    if diag(&a, "noack") != 0 {
        return Err("a UC requester counts packets sent without an ACK request");
    }
    Ok(())
}
