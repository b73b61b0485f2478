// SPDX-License-Identifier: GPL-2.0

//! A kernel consumer's RC traffic over two kernel QPs on one device.

use super::*;

/// Bytes sent, written and read back by the test's requests.
const SEND_LEN: usize = 3000;
const WRITE_LEN: usize = 4100;
const READ_LEN: usize = 2500;

/// A kernel consumer's RC traffic: two kernel QPs on one device (over
/// the loopback netdev) connected through `ib_modify_qp`, buffers in
/// kmalloc memory reached through the PD's DMA MR. SEND (across MTU
/// boundaries, with immediate data, inline), RDMA WRITE and READ move
/// patterned data that is checked byte by byte; completions come back
/// as `ib_wc`s with the QP pointer; bad requests are refused with
/// EINVAL and `bad_wr`; after the QP enters ERR every post flushes.
pub(crate) fn kernel_rc_qps() -> Result<(), &'static str> {
    use sys::*;
    let dev = TestDev::new()?;
    let Some((sgid, gid)) = loopback_gid(&dev) else {
        return Err("no ::ffff:127.0.0.1 GID on the loopback device");
    };
    // Declared before the QPs so they outlive them (dropped after).
    let src = pattern(WRITE_LEN, 3)?;
    let mut rbuf = zeroed(4096)?;
    let mut wbuf = zeroed(WRITE_LEN)?;
    let mut rdbuf = zeroed(READ_LEN)?;
    let inl = pattern(16, 99)?;
    let mut rbuf2 = zeroed(64)?;
    let pd = TestPd::new(&dev)?;
    let c = Consumer::new(false);
    let cq_a = TestCq::new(&dev, 64, 0, &c)?;
    let cq_b = TestCq::new(&dev, 64, 0, &c)?;
    let a = TestQp::new(&pd, &cq_a)?;
    let b = TestQp::new(&pd, &cq_b)?;
    a.connect(b.qpn(), &gid, sgid)?;
    b.connect(a.qpn(), &gid, sgid)?;
    let (lkey, rkey) = (pd.lkey(), pd.rkey());

    // Two receives on B: the second split over two SGEs.
    let r1 = sge(rbuf.as_mut_ptr(), 4096, lkey);
    let r2 = [
        sge(rbuf2.as_mut_ptr(), 8, lkey),
        sge(rbuf2.as_mut_ptr().wrapping_add(8), 56, lkey),
    ];
    // SAFETY: all-zero is a valid `ib_recv_wr`.
    let mut rw2: ib_recv_wr = unsafe { core::mem::zeroed() };
    rw2.__bindgen_anon_1.wr_id = 0xb2;
    rw2.sg_list = r2.as_ptr().cast_mut();
    rw2.num_sge = 2;
    // SAFETY: as above.
    let mut rw1: ib_recv_wr = unsafe { core::mem::zeroed() };
    rw1.__bindgen_anon_1.wr_id = 0xb1;
    rw1.sg_list = core::ptr::from_ref(&r1).cast_mut();
    rw1.num_sge = 1;
    rw1.next = &mut rw2;
    if b.post_recv(&rw1).0 != 0 {
        return Err("post_recv failed");
    }

    // A: SEND 3000 bytes, WRITE 4100, READ 2500 back, SEND inline
    // with immediate data; only the last is unsignaled.
    let s_send = sge(src.as_ptr(), SEND_LEN, lkey);
    let s_write = sge(src.as_ptr(), WRITE_LEN, lkey);
    let s_read = sge(rdbuf.as_mut_ptr(), READ_LEN, lkey);
    let s_inl = sge(inl.as_ptr(), 16, 0);
    // SAFETY: all-zero is a valid work request of each kind.
    let (mut w_inl, mut w_read, mut w_write, mut w_send): (
        ib_send_wr,
        ib_rdma_wr,
        ib_rdma_wr,
        ib_send_wr,
    ) = unsafe { core::mem::zeroed() };
    w_inl.__bindgen_anon_1.wr_id = 0xa4;
    w_inl.opcode = ib_wr_opcode_IB_WR_SEND_WITH_IMM;
    w_inl.send_flags = ib_send_flags_IB_SEND_INLINE;
    w_inl.ex.imm_data = 0x1234_5678u32.to_be();
    w_inl.sg_list = core::ptr::from_ref(&s_inl).cast_mut();
    w_inl.num_sge = 1;
    w_read.wr.__bindgen_anon_1.wr_id = 0xa3;
    w_read.wr.opcode = ib_wr_opcode_IB_WR_RDMA_READ;
    w_read.wr.send_flags = ib_send_flags_IB_SEND_SIGNALED;
    w_read.wr.sg_list = core::ptr::from_ref(&s_read).cast_mut();
    w_read.wr.num_sge = 1;
    w_read.remote_addr = wbuf.as_mut_ptr() as u64 + 7;
    w_read.rkey = rkey;
    w_read.wr.next = &mut w_inl;
    w_write.wr.__bindgen_anon_1.wr_id = 0xa2;
    w_write.wr.opcode = ib_wr_opcode_IB_WR_RDMA_WRITE;
    w_write.wr.send_flags = ib_send_flags_IB_SEND_SIGNALED;
    w_write.wr.sg_list = core::ptr::from_ref(&s_write).cast_mut();
    w_write.wr.num_sge = 1;
    w_write.remote_addr = wbuf.as_mut_ptr() as u64;
    w_write.rkey = rkey;
    w_write.wr.next = &mut w_read.wr;
    w_send.__bindgen_anon_1.wr_id = 0xa1;
    w_send.opcode = ib_wr_opcode_IB_WR_SEND;
    w_send.send_flags = ib_send_flags_IB_SEND_SIGNALED;
    w_send.sg_list = core::ptr::from_ref(&s_send).cast_mut();
    w_send.num_sge = 1;
    w_send.next = &mut w_write.wr;
    let (r, _) = a.post_send(&w_send);
    if r != 0 {
        pr_err!("post_send: {r}\n");
        return Err("post_send of a valid chain failed");
    }
    check_completions(&a, &b, &cq_a, &cq_b)?;
    if rbuf[..SEND_LEN] != src[..SEND_LEN] || rbuf[SEND_LEN..].iter().any(|&x| x != 0) {
        return Err("SEND data differs");
    }
    if rbuf2[..16] != inl[..] {
        return Err("inline SEND data differs");
    }
    if wbuf[..] != src[..] {
        return Err("RDMA WRITE data differs");
    }
    if rdbuf[..] != src[7..7 + READ_LEN] {
        return Err("RDMA READ data differs");
    }

    check_bad_requests(&a, &b, s_send)?;

    check_flush(&a, &cq_a, &mut w_send, &mut rw1)?;
    drop(a);
    drop(b);
    drop(cq_a);
    drop(cq_b);
    Ok(())
}

/// The three signaled requests and the two receives completed as posted.
fn check_completions(
    a: &TestQp,
    b: &TestQp,
    cq_a: &TestCq,
    cq_b: &TestCq,
) -> Result<(), &'static str> {
    use sys::*;
    let sent = wait_wcs(cq_a, 3);
    let recvd = wait_wcs(cq_b, 2);
    if sent.len() != 3 || recvd.len() != 2 {
        pr_err!(
            "{} send and {} receive completions\n",
            sent.len(),
            recvd.len()
        );
        return Err("completions missing (the unsignaled SEND must not complete)");
    }
    let want_sent = [
        (0xa1, ib_wc_opcode_IB_WC_SEND),
        (0xa2, ib_wc_opcode_IB_WC_RDMA_WRITE),
        (0xa3, ib_wc_opcode_IB_WC_RDMA_READ),
    ];
    for (wc, (id, op)) in sent.iter().zip(want_sent) {
        if wc.status != ib_wc_status_IB_WC_SUCCESS || wr_id(wc) != id || wc.opcode != op {
            pr_err!(
                "send wc {:#x}: status {} opcode {}\n",
                wr_id(wc),
                wc.status,
                wc.opcode
            );
            return Err("a send completion has the wrong id, opcode or status");
        }
        if wc.qp != a.0 {
            return Err("ib_wc::qp is not the QP");
        }
    }
    let (w1, w2) = (&recvd[0], &recvd[1]);
    if w1.status != ib_wc_status_IB_WC_SUCCESS
        || wr_id(w1) != 0xb1
        || w1.opcode != ib_wc_opcode_IB_WC_RECV
        || w1.byte_len != SEND_LEN as u32
        || w1.qp != b.0
    {
        return Err("the first receive completion is wrong");
    }
    // SAFETY: the union's `imm_data` member is plain data.
    let imm = unsafe { w2.ex.imm_data };
    if w2.status != ib_wc_status_IB_WC_SUCCESS
        || wr_id(w2) != 0xb2
        || w2.byte_len != 16
        || w2.wc_flags & ib_wc_flags_IB_WC_WITH_IMM as i32 == 0
        || u32::from_be(imm) != 0x1234_5678
    {
        return Err("the SEND with immediate completed wrong");
    }
    Ok(())
}

/// Requests a kernel QP must refuse with EINVAL and `bad_wr`.
fn check_bad_requests(a: &TestQp, b: &TestQp, s_send: sys::ib_sge) -> Result<(), &'static str> {
    use sys::*;
    // Bad requests: too many SGEs, an unknown opcode.
    // (the SQ's SGE cap grew to fill its 64-byte inline area: 4 SGEs).
    let many = [s_send; 9];
    // SAFETY: all-zero is a valid `ib_send_wr`.
    let mut bad: ib_send_wr = unsafe { core::mem::zeroed() };
    bad.opcode = ib_wr_opcode_IB_WR_SEND;
    bad.sg_list = many.as_ptr().cast_mut();
    bad.num_sge = 9;
    let (r, bw) = a.post_send(&bad);
    if r != EINVAL.to_errno() || bw != core::ptr::from_ref(&bad) {
        return Err("a SEND with too many SGEs was not refused with EINVAL");
    }
    bad.num_sge = 1;
    bad.opcode = ib_wr_opcode_IB_WR_REG_MR;
    if a.post_send(&bad).0 == 0 {
        return Err("an unsupported opcode was accepted");
    }
    // SAFETY: all-zero is a valid `ib_recv_wr`.
    let mut badr: ib_recv_wr = unsafe { core::mem::zeroed() };
    badr.sg_list = many.as_ptr().cast_mut();
    badr.num_sge = 3;
    if b.post_recv(&badr).0 == 0 {
        return Err("a receive with too many SGEs was accepted");
    }
    Ok(())
}

/// After the QP enters ERR, posts complete flushed, in order.
fn check_flush(
    a: &TestQp,
    cq_a: &TestCq,
    w_send: &mut sys::ib_send_wr,
    rw1: &mut sys::ib_recv_wr,
) -> Result<(), &'static str> {
    use sys::*;
    a.to_error()?;
    w_send.next = core::ptr::null_mut();
    w_send.__bindgen_anon_1.wr_id = 0xf1;
    if a.post_send(w_send).0 != 0 {
        return Err("post_send to a QP in ERR was refused");
    }
    rw1.next = core::ptr::null_mut();
    if a.post_recv(rw1).0 != 0 {
        return Err("post_recv to a QP in ERR was refused");
    }
    let flushed = wait_wcs(cq_a, 2);
    if flushed.len() != 2
        || flushed
            .iter()
            .any(|w| w.status != ib_wc_status_IB_WC_WR_FLUSH_ERR)
    {
        return Err("posts to a QP in ERR did not complete flushed");
    }
    Ok(())
}

/// A packet an idle QP cannot allocate (atomic memory ran out) is tried
/// again by the QP's timer: the SEND goes out, intact, without another
/// post. (It waited for the next doorbell: with nothing in flight no ACK
/// and no retransmission timeout runs the requester, and a consumer that
/// waits for the completion before posting again waited for ever.)
pub(crate) fn idle_qp_retries_after_no_memory() -> Result<(), &'static str> {
    use crate::net::skb::fail_alloc;
    use sys::*;
    let dev = TestDev::new()?;
    let Some((sgid, gid)) = loopback_gid(&dev) else {
        return Err("no ::ffff:127.0.0.1 GID on the loopback device");
    };
    let src = pattern(SEND_LEN, 11)?;
    let mut rbuf = zeroed(4096)?;
    let pd = TestPd::new(&dev)?;
    let c = Consumer::new(false);
    let cq_a = TestCq::new(&dev, 16, 0, &c)?;
    let cq_b = TestCq::new(&dev, 16, 0, &c)?;
    let a = TestQp::new(&pd, &cq_a)?;
    let b = TestQp::new(&pd, &cq_b)?;
    a.connect(b.qpn(), &gid, sgid)?;
    b.connect(a.qpn(), &gid, sgid)?;
    let lkey = pd.lkey();
    let r = sge(rbuf.as_mut_ptr(), rbuf.len(), lkey);
    if b.post_recv(&recv_wr(0xc1, &r)).0 != 0 {
        return Err("post_recv failed");
    }
    // The SEND's first packet fails twice: as a GSO run and alone in
    // one pass, or (a netdev without UDP GSO) alone in two. The count is
    // global: nothing else sends on this KUnit-time device.
    fail_alloc::arm(2);
    let s = sge(src.as_ptr(), SEND_LEN, lkey);
    let posted = a.post_send(&send_wr(0xc2, ib_wr_opcode_IB_WR_SEND, &s)).0;
    let sent = wait_wcs(&cq_a, 1);
    let recvd = wait_wcs(&cq_b, 1);
    let left = fail_alloc::left();
    fail_alloc::arm(0);
    if posted != 0 {
        return Err("post_send failed");
    }
    if left != 0 {
        return Err("the armed allocation failures did not happen");
    }
    match (sent.first(), recvd.first()) {
        (Some(s), Some(r))
            if s.status == ib_wc_status_IB_WC_SUCCESS
                && wr_id(s) == 0xc2
                && r.status == ib_wc_status_IB_WC_SUCCESS
                && r.byte_len == SEND_LEN as u32 => {}
        (None, _) => return Err("the SEND never completed: nothing retried it"),
        _ => return Err("the SEND or its receive completed wrong"),
    }
    if rbuf[..SEND_LEN] != src[..] {
        return Err("SEND data differs");
    }
    if super::wire::diag(&a, "req_mem_waits") == 0 {
        return Err("the requester did not count a wait for memory");
    }
    if super::wire::diag(&a, "mem_wait") != 0 {
        return Err("the QP still waits for memory");
    }
    Ok(())
}
