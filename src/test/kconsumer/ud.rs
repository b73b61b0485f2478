// SPDX-License-Identifier: GPL-2.0

//! A kernel consumer's UD datagrams, and a post racing a move to SQD.

use super::{
    qplife::{last_wqe_events, TestSrq},
    *,
};
use crate::qp::RroceQp;

/// The Q_Key both test QPs use.
const QKEY: u32 = 0x1111_2222;

/// A kernel AH towards `gid` from GID index `sgid`, destroyed on drop.
struct TestAh(*mut sys::ib_ah);

impl TestAh {
    fn new(pd: &TestPd, gid: &sys::ib_gid, sgid: u8) -> Result<Self, &'static str> {
        use sys::*;
        // SAFETY: all-zero is a valid `rdma_ah_attr`.
        let mut a: rdma_ah_attr = unsafe { core::mem::zeroed() };
        a.type_ = rdma_ah_attr_type_RDMA_AH_ATTR_TYPE_ROCE;
        a.port_num = 1;
        a.ah_flags = ib_ah_flags_IB_AH_GRH as u8;
        a.grh.dgid = *gid;
        a.grh.sgid_index = sgid;
        a.grh.hop_limit = 64;
        // SAFETY: a live kernel PD; valid attributes.
        let ah =
            unsafe { rdma_create_ah(pd.0, &mut a, rdma_create_ah_flags_RDMA_CREATE_AH_SLEEPABLE) };
        if bad_ptr(ah) {
            pr_err!("rdma_create_ah: {}\n", ah as isize);
            return Err("rdma_create_ah failed");
        }
        Ok(Self(ah))
    }
}

impl Drop for TestAh {
    fn drop(&mut self) {
        // SAFETY: created by `new`, not used after this.
        unsafe {
            sys::rdma_destroy_ah_user(
                self.0,
                sys::rdma_destroy_ah_flags_RDMA_DESTROY_AH_SLEEPABLE,
                null_mut(),
            )
        };
    }
}

/// RESET -> INIT -> RTR -> RTS of UD QP `qp` (Q_Key [`QKEY`]).
fn ud_up(qp: &TestQp) -> Result<(), &'static str> {
    use sys::*;
    // SAFETY: all-zero is a valid `ib_qp_attr`.
    let mut a: ib_qp_attr = unsafe { core::mem::zeroed() };
    a.qp_state = ib_qp_state_IB_QPS_INIT;
    a.port_num = 1;
    a.qkey = QKEY;
    let m = ib_qp_attr_mask_IB_QP_STATE
        | ib_qp_attr_mask_IB_QP_PKEY_INDEX
        | ib_qp_attr_mask_IB_QP_PORT
        | ib_qp_attr_mask_IB_QP_QKEY;
    if qp.modify(&mut a, m) != 0 {
        return Err("UD modify to INIT failed");
    }
    a.qp_state = ib_qp_state_IB_QPS_RTR;
    if qp.modify(&mut a, ib_qp_attr_mask_IB_QP_STATE) != 0 {
        return Err("UD modify to RTR failed");
    }
    a.qp_state = ib_qp_state_IB_QPS_RTS;
    a.sq_psn = 0x10;
    let m = ib_qp_attr_mask_IB_QP_STATE | ib_qp_attr_mask_IB_QP_SQ_PSN;
    if qp.modify(&mut a, m) != 0 {
        return Err("UD modify to RTS failed");
    }
    Ok(())
}

/// A kernel consumer's UD post whose QP moves to SQD while the post runs
/// (`modify_qp` on another CPU, between the post writing its WQE and
/// sending it) still sends the datagram before it returns, to the
/// address its AH named: the consumer may destroy the AH once the post
/// has returned, and the WQE holds the AH itself. (The WQE was left in
/// the ring for RTS, to be sent later through the AH, then possibly
/// freed.)
pub(crate) fn ud_post_racing_sqd_sends() -> Result<(), &'static str> {
    use sys::*;
    const LEN: usize = 64;
    let dev = TestDev::new()?;
    let Some((sgid, gid)) = loopback_gid(&dev) else {
        return Err("no ::ffff:127.0.0.1 GID on the loopback device");
    };
    let src = pattern(LEN, 21)?;
    let mut dst = pattern(40 + LEN, 0)?;
    let pd = TestPd::new(&dev)?;
    let c = Consumer::new(false);
    let cq = TestCq::new(&dev, 16, 0, &c)?;
    let rcq = TestCq::new(&dev, 16, 0, &c)?;
    let a = TestQp::create(&pd, &cq, None, null_mut(), ib_qp_type_IB_QPT_UD)?;
    let b = TestQp::create(&pd, &rcq, None, null_mut(), ib_qp_type_IB_QPT_UD)?;
    ud_up(&a)?;
    ud_up(&b)?;
    let r = sge(dst.as_mut_ptr(), dst.len(), pd.lkey());
    if b.post_recv(&recv_wr(0xf1, &r)).0 != 0 {
        return Err("post_recv on the receiving UD QP failed");
    }
    let ah = TestAh::new(&pd, &gid, sgid)?;
    let s = sge(src.as_ptr(), LEN, pd.lkey());
    // SAFETY: all-zero is a valid `ib_ud_wr`.
    let mut w: ib_ud_wr = unsafe { core::mem::zeroed() };
    w.wr = send_wr(0xf2, ib_wr_opcode_IB_WR_SEND, &s);
    w.ah = ah.0;
    w.remote_qpn = b.qpn();
    w.remote_qkey = QKEY;
    // SAFETY: a live QP of an rroce device.
    unsafe { RroceQp::state(a.0) }.sqd_in_ud_post();
    if a.post_send(&w.wr).0 != 0 {
        return Err("the UD post failed");
    }
    // Whatever the post left behind may not use the AH from here on.
    drop(ah);
    let (st, _) = super::qplife::query(&a, 0)?;
    if st.qp_state != ib_qp_state_IB_QPS_SQD {
        return Err("the QP did not move to SQD during the post");
    }
    match wait_wcs(&cq, 1).first() {
        Some(wc) if wc.status == ib_wc_status_IB_WC_SUCCESS && wr_id(wc) == 0xf2 => {}
        Some(_) => return Err("the UD SEND completed in error"),
        None => return Err("the UD post returned without sending its datagram"),
    }
    match wait_wcs(&rcq, 1).first() {
        Some(wc)
            if wc.status == ib_wc_status_IB_WC_SUCCESS
                && wr_id(wc) == 0xf1
                && wc.byte_len == (40 + LEN) as u32 => {}
        Some(_) => return Err("the datagram arrived wrong"),
        None => return Err("the datagram did not arrive"),
    }
    if dst.get(40..) != Some(&src[..]) {
        return Err("the datagram's payload is not what was sent");
    }
    drop(a);
    drop(b);
    Ok(())
}

/// A UD QP on an SRQ whose send queue's producer index is corrupted
/// between a post writing its WQE and sending it (as a process may
/// between its doorbells) fails in the UD sender's fetch and raises
/// `IB_EVENT_QP_LAST_WQE_REACHED`, from its work item. (The UD sender
/// left the event due without handing the QP to its work item: no flush
/// follows a UD doorbell, and the event never came.)
pub(crate) fn ud_doorbell_failure_raises_last_wqe() -> Result<(), &'static str> {
    use sys::*;
    static EVENTS: QpEvents = QpEvents::new();
    EVENTS.clear();
    let dev = TestDev::new()?;
    let Some((sgid, gid)) = loopback_gid(&dev) else {
        return Err("no ::ffff:127.0.0.1 GID on the loopback device");
    };
    let src = pattern(16, 3)?;
    let pd = TestPd::new(&dev)?;
    let c = Consumer::new(false);
    let cq = TestCq::new(&dev, 16, 0, &c)?;
    let srq = TestSrq::new(&pd)?;
    let a = TestQp::create(&pd, &cq, Some(&EVENTS), srq.0, ib_qp_type_IB_QPT_UD)?;
    ud_up(&a)?;
    let ah = TestAh::new(&pd, &gid, sgid)?;
    let s = sge(src.as_ptr(), src.len(), pd.lkey());
    // SAFETY: all-zero is a valid `ib_ud_wr`.
    let mut w: ib_ud_wr = unsafe { core::mem::zeroed() };
    w.wr = send_wr(0xf3, ib_wr_opcode_IB_WR_SEND, &s);
    w.ah = ah.0;
    w.remote_qpn = a.qpn();
    w.remote_qkey = QKEY;
    // SAFETY: a live QP of an rroce device.
    unsafe { RroceQp::state(a.0) }.corrupt_in_ud_post();
    if a.post_send(&w.wr).0 != 0 {
        return Err("the UD post failed");
    }
    drop(ah);
    let (st, _) = super::qplife::query(&a, 0)?;
    if st.qp_state != ib_qp_state_IB_QPS_ERR {
        return Err("the corrupt producer index did not fail the QP");
    }
    if last_wqe_events(&EVENTS, 1) != 1 {
        return Err("the UD QP failed at its doorbell raised no IB_EVENT_QP_LAST_WQE_REACHED");
    }
    if EVENTS.atomic.load(Ordering::SeqCst) != 0 {
        return Err("IB_EVENT_QP_LAST_WQE_REACHED raised with interrupts or BHs off");
    }
    drop(a);
    drop(srq);
    Ok(())
}
