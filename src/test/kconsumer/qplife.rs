// SPDX-License-Identifier: GPL-2.0

//! A QP's life through the verbs: what `query_qp` hands back, what RESET
//! leaves behind, what a rejected `modify_qp` changes, and what happens
//! when the QP table is full.

use super::*;

use crate::{
    dev::{limits, RroceDev},
    engine::index::IndexAllocator,
    qp::{QpState, RroceQp},
};

/// The address vector the tests connect with: every field a value of its
/// own, so `query_qp` must return what was set, not a default.
const SL: u8 = 2;
const HOP_LIMIT: u8 = 17;
const TRAFFIC_CLASS: u8 = 0x28;
const FLOW_LABEL: u32 = 0x1_2345;
const PSN: u32 = 0x100;

/// A kernel RC QP on `pd` completing into `cq`, every send signaled if
/// `sig_all`; the errno if the core refuses it.
fn create_qp(pd: &TestPd, cq: &TestCq, sig_all: bool) -> Result<TestQp, i32> {
    // SAFETY: all-zero is a valid `ib_qp_init_attr`.
    let mut init: sys::ib_qp_init_attr = unsafe { core::mem::zeroed() };
    init.send_cq = cq.0;
    init.recv_cq = cq.0;
    init.cap.max_send_wr = 16;
    init.cap.max_recv_wr = 16;
    init.cap.max_send_sge = 2;
    init.cap.max_recv_sge = 2;
    init.sq_sig_type = if sig_all {
        sys::ib_sig_type_IB_SIGNAL_ALL_WR
    } else {
        sys::ib_sig_type_IB_SIGNAL_REQ_WR
    };
    init.qp_type = sys::ib_qp_type_IB_QPT_RC;
    // SAFETY: a live kernel PD; valid attributes.
    let qp = unsafe { sys::ib_create_qp_kernel(pd.0, &mut init, c"rroce_kunit".as_char_ptr()) };
    if bad_ptr(qp) {
        return Err(qp as isize as i32);
    }
    Ok(TestQp(qp))
}

/// Moves `qp` to `state` with nothing else.
fn to_state(qp: &TestQp, state: sys::ib_qp_state) -> i32 {
    // SAFETY: all-zero is a valid `ib_qp_attr`.
    let mut a: sys::ib_qp_attr = unsafe { core::mem::zeroed() };
    a.qp_state = state;
    qp.modify(&mut a, sys::ib_qp_attr_mask_IB_QP_STATE)
}

/// The RTR attributes towards `dest` at `gid` (GID index `sgid`), path
/// MTU `mtu`, and their mask.
fn rtr_attr(dest: u32, gid: &sys::ib_gid, sgid: u8, mtu: sys::ib_mtu) -> (sys::ib_qp_attr, u32) {
    use sys::*;
    // SAFETY: all-zero is a valid `ib_qp_attr`.
    let mut a: ib_qp_attr = unsafe { core::mem::zeroed() };
    a.qp_state = ib_qp_state_IB_QPS_RTR;
    a.path_mtu = mtu;
    a.dest_qp_num = dest;
    a.rq_psn = PSN;
    a.max_dest_rd_atomic = 4;
    a.min_rnr_timer = 1;
    a.ah_attr.type_ = rdma_ah_attr_type_RDMA_AH_ATTR_TYPE_ROCE;
    a.ah_attr.port_num = 1;
    a.ah_attr.sl = SL;
    a.ah_attr.ah_flags = ib_ah_flags_IB_AH_GRH as u8;
    a.ah_attr.grh.dgid = *gid;
    a.ah_attr.grh.sgid_index = sgid;
    a.ah_attr.grh.hop_limit = HOP_LIMIT;
    a.ah_attr.grh.traffic_class = TRAFFIC_CLASS;
    a.ah_attr.grh.flow_label = FLOW_LABEL;
    let m = ib_qp_attr_mask_IB_QP_STATE
        | ib_qp_attr_mask_IB_QP_AV
        | ib_qp_attr_mask_IB_QP_PATH_MTU
        | ib_qp_attr_mask_IB_QP_DEST_QPN
        | ib_qp_attr_mask_IB_QP_RQ_PSN
        | ib_qp_attr_mask_IB_QP_MAX_DEST_RD_ATOMIC
        | ib_qp_attr_mask_IB_QP_MIN_RNR_TIMER;
    (a, m)
}

/// RESET -> INIT, port 1, local and remote access.
fn to_init(qp: &TestQp) -> Result<(), &'static str> {
    use sys::*;
    // SAFETY: all-zero is a valid `ib_qp_attr`.
    let mut a: ib_qp_attr = unsafe { core::mem::zeroed() };
    a.qp_state = ib_qp_state_IB_QPS_INIT;
    a.port_num = 1;
    a.qp_access_flags = (ib_access_flags_IB_ACCESS_LOCAL_WRITE
        | ib_access_flags_IB_ACCESS_REMOTE_WRITE
        | ib_access_flags_IB_ACCESS_REMOTE_READ) as i32;
    let m = ib_qp_attr_mask_IB_QP_STATE
        | ib_qp_attr_mask_IB_QP_PKEY_INDEX
        | ib_qp_attr_mask_IB_QP_PORT
        | ib_qp_attr_mask_IB_QP_ACCESS_FLAGS;
    if qp.modify(&mut a, m) != 0 {
        return Err("modify to INIT failed");
    }
    Ok(())
}

/// RESET -> INIT -> RTR -> RTS towards `dest` at `gid`, path MTU `mtu`.
fn bring_up(
    qp: &TestQp,
    dest: u32,
    gid: &sys::ib_gid,
    sgid: u8,
    mtu: sys::ib_mtu,
) -> Result<(), &'static str> {
    use sys::*;
    to_init(qp)?;
    let (mut a, m) = rtr_attr(dest, gid, sgid, mtu);
    if qp.modify(&mut a, m) != 0 {
        return Err("modify to RTR failed");
    }
    // SAFETY: all-zero is a valid `ib_qp_attr`.
    let mut a: ib_qp_attr = unsafe { core::mem::zeroed() };
    a.qp_state = ib_qp_state_IB_QPS_RTS;
    a.sq_psn = PSN;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 4;
    let m = ib_qp_attr_mask_IB_QP_STATE
        | ib_qp_attr_mask_IB_QP_SQ_PSN
        | ib_qp_attr_mask_IB_QP_TIMEOUT
        | ib_qp_attr_mask_IB_QP_RETRY_CNT
        | ib_qp_attr_mask_IB_QP_RNR_RETRY
        | ib_qp_attr_mask_IB_QP_MAX_QP_RD_ATOMIC;
    if qp.modify(&mut a, m) != 0 {
        return Err("modify to RTS failed");
    }
    Ok(())
}

/// The driver's `query_qp` into structures first filled with `poison`.
pub(super) fn query(
    qp: &TestQp,
    poison: u8,
) -> Result<(sys::ib_qp_attr, sys::ib_qp_init_attr), &'static str> {
    let mut attr = core::mem::MaybeUninit::<sys::ib_qp_attr>::uninit();
    let mut init = core::mem::MaybeUninit::<sys::ib_qp_init_attr>::uninit();
    // SAFETY: plain byte fills of the structures' own memory.
    unsafe {
        core::ptr::write_bytes(attr.as_mut_ptr(), poison, 1);
        core::ptr::write_bytes(init.as_mut_ptr(), poison, 1);
    }
    // SAFETY: a live QP of an rroce device, which sets `query_qp`; the
    // structures are writable (the core's `kmalloc`ed ones are not
    // initialized either).
    let r = unsafe {
        match (*(*qp.0).device).ops.query_qp {
            Some(f) => f(qp.0, attr.as_mut_ptr(), 0, init.as_mut_ptr()),
            None => -1,
        }
    };
    if r != 0 {
        return Err("query_qp failed");
    }
    // SAFETY: every byte is initialized (poison or the driver's values);
    // the structures are plain C data, any pointer value included (never
    // dereferenced here).
    Ok(unsafe { (attr.assume_init(), init.assume_init()) })
}

/// The bytes of a plain C structure.
fn bytes_of<T>(v: &T) -> &[u8] {
    // SAFETY: `v` is `size_of::<T>()` initialized bytes (filled whole by
    // `query`).
    unsafe { core::slice::from_raw_parts(core::ptr::from_ref(v).cast::<u8>(), size_of::<T>()) }
}

/// `query_qp` writes every byte of both structures (nothing of the
/// caller's memory survives to be copied to user space), and returns the
/// QP's real address vector and signaling type.
pub(crate) fn query_fills_every_field() -> Result<(), &'static str> {
    use sys::*;
    let dev = TestDev::new()?;
    let Some((sgid, gid)) = loopback_gid(&dev) else {
        return Err("no ::ffff:127.0.0.1 GID on the loopback device");
    };
    let pd = TestPd::new(&dev)?;
    let c = Consumer::new(false);
    let cq = TestCq::new(&dev, 64, 0, &c)?;
    let a = create_qp(&pd, &cq, true).map_err(|_| "create_qp failed")?;
    let b = create_qp(&pd, &cq, false).map_err(|_| "create_qp failed")?;
    bring_up(&a, b.qpn(), &gid, sgid, ib_mtu_IB_MTU_2048)?;
    let (attr1, init1) = query(&a, 0xa5)?;
    let (attr2, init2) = query(&a, 0x5a)?;
    if bytes_of(&attr1) != bytes_of(&attr2) {
        return Err("query_qp left bytes of ib_qp_attr unwritten");
    }
    if bytes_of(&init1) != bytes_of(&init2) {
        return Err("query_qp left bytes of ib_qp_init_attr unwritten");
    }
    let (at, ah) = (&attr1, &attr1.ah_attr);
    // SAFETY: `raw` covers the union.
    let dgid = unsafe { ah.grh.dgid.raw };
    // SAFETY: as above.
    if dgid != unsafe { gid.raw }
        || ah.type_ != rdma_ah_attr_type_RDMA_AH_ATTR_TYPE_ROCE
        || u32::from(ah.ah_flags) & ib_ah_flags_IB_AH_GRH == 0
        || ah.port_num != 1
        || ah.sl != SL
        || ah.grh.hop_limit != HOP_LIMIT
        || ah.grh.traffic_class != TRAFFIC_CLASS
        || ah.grh.flow_label != FLOW_LABEL
        || ah.grh.sgid_index != sgid
        || !ah.grh.sgid_attr.is_null()
    {
        return Err("query_qp's ah_attr is not the address vector set at RTR");
    }
    if at.qp_state != ib_qp_state_IB_QPS_RTS
        || at.path_mtu != ib_mtu_IB_MTU_2048
        || at.dest_qp_num != b.qpn()
        || at.rq_psn != PSN
        || at.sq_psn != PSN
        || at.port_num != 1
        || at.sq_draining != 0
        || at.alt_port_num != 0
        || at.path_mig_state != ib_mig_state_IB_MIG_MIGRATED
    {
        return Err("query_qp's attributes are not the ones set");
    }
    if init1.sq_sig_type != ib_sig_type_IB_SIGNAL_ALL_WR
        || init1.qp_type != ib_qp_type_IB_QPT_RC
        || init1.send_cq != cq.0
        || init1.recv_cq != cq.0
        || !init1.srq.is_null()
        || init1.port_num != 1
    {
        return Err("query_qp's init attributes are wrong (sq_sig_type, CQs, port)");
    }
    let (_, initb) = query(&b, 0xa5)?;
    if initb.sq_sig_type != ib_sig_type_IB_SIGNAL_REQ_WR {
        return Err("query_qp reports the wrong sq_sig_type");
    }
    drop(a);
    drop(b);
    Ok(())
}

/// A kernel buffer of `len` bytes (vmalloc'ed if large) holding the
/// test pattern of `seed`, or zeroes.
fn big(len: usize, seed: Option<u8>) -> Result<KVVec<u8>, &'static str> {
    let mut v = KVVec::from_elem(0u8, len, GFP_KERNEL).map_err(|_| "no memory")?;
    if let Some(seed) = seed {
        for (i, b) in v.iter_mut().enumerate() {
            *b = seed.wrapping_add((i as u8).wrapping_mul(13)) ^ (i >> 10) as u8;
        }
    }
    Ok(v)
}

/// Bytes of the WRITE that fills the send window: at MTU 1024, more
/// packets than the window (`engine::rc::window::WINDOW`, 128) holds.
const WINDOW_WRITE: usize = 200 << 10;

/// Posts (`post`: whether it succeeded) with `st`'s transmit held
/// (`QpState::hold_tx_after`), so that nothing is acknowledged meanwhile,
/// waits (up to 10 s) until `n` request packets are built behind the
/// gate, reads the requester's hint, and opens the gate again whatever
/// happened. Fails with `errs`: the post failed, the packets were not
/// built, the requester does not wait.
fn waits_while_held(
    st: &QpState,
    n: usize,
    post: impl FnOnce() -> bool,
    errs: [&'static str; 3],
) -> Result<(), &'static str> {
    st.hold_tx_after(0);
    let posted = post();
    let mut built = false;
    for _ in 0..1000 {
        if !posted || st.requests_waiting() >= n {
            built = posted;
            break;
        }
        fsleep(Delta::from_millis(10));
    }
    let waits = st.requester_waits();
    st.open_tx();
    if !posted {
        return Err(errs[0]);
    }
    if !built {
        return Err(errs[1]);
    }
    if !waits {
        return Err(errs[2]);
    }
    Ok(())
}

/// The requester's hint to the receive hand-over (`QpFixed::req_waits`,
/// `engine::handover::Arrival::requester_waits`), with its transmit held
/// ([`waits_while_held`]): a WRITE of more packets than the send window
/// stops the requester at the window, and six READs with `max_rd_atomic`
/// 4 stop it at that limit; both times it waits. Idle, and once
/// everything completed (the data checked), it waits for nothing.
pub(crate) fn requester_waits_hint() -> Result<(), &'static str> {
    use sys::*;
    // Declared before the QPs so they outlive them (dropped after).
    let src = big(WINDOW_WRITE, Some(5))?;
    let mut dst = big(WINDOW_WRITE, None)?;
    let p = super::peer::Pair::new()?;
    let (lkey, rkey) = (p.pd.lkey(), p.pd.rkey());
    // SAFETY: a live QP of an rroce device.
    let st_a = unsafe { RroceQp::state(p.a.0) };
    if st_a.requester_waits() {
        return Err("an idle requester waits");
    }

    // The window: 128 packets built behind the gate, the rest not.
    let s = sge(src.as_ptr(), WINDOW_WRITE, lkey);
    let remote = dst.as_mut_ptr() as u64;
    let w = rdma_wr(1, ib_wr_opcode_IB_WR_RDMA_WRITE, &s, remote, rkey);
    waits_while_held(
        st_a,
        128,
        || p.a.post_send(&w.wr).0 == 0,
        [
            "posting the WRITE failed",
            "the WRITE's first window was not built",
            "a requester stopped at its send window does not wait",
        ],
    )?;
    let done = wait_wcs(&p.cq_a, 1);
    if done.len() != 1 || done[0].status != ib_wc_status_IB_WC_SUCCESS || wr_id(&done[0]) != 1 {
        return Err("the WRITE did not complete");
    }
    if dst[..] != src[..] {
        return Err("the WRITE's data differs");
    }
    if st_a.requester_waits() {
        return Err("a requester with nothing left to send waits");
    }

    // The READ limit: four READ requests built, two held back.
    let (local, remote) = (dst.as_mut_ptr(), src.as_ptr());
    let post_reads = || {
        (10u64..16).enumerate().all(|(k, id)| {
            let off = k * 64;
            let (l, r) = (local.wrapping_add(off), remote.wrapping_add(off + 4096));
            post_read(&p.a, id, l, r, 64, &p.pd) == 0
        })
    };
    waits_while_held(
        st_a,
        4,
        post_reads,
        [
            "posting the READs failed",
            "the first four READ requests were not built",
            "a requester stopped at max_rd_atomic does not wait",
        ],
    )?;
    let done = wait_wcs(&p.cq_a, 6);
    let ok = |(k, w): (usize, &ib_wc)| {
        w.status == ib_wc_status_IB_WC_SUCCESS && wr_id(w) == 10 + k as u64
    };
    if done.len() != 6 || !done.iter().enumerate().all(ok) {
        return Err("the READs did not complete in order");
    }
    if dst[..6 * 64] != src[4096..4096 + 6 * 64] {
        return Err("the READs' data differs");
    }
    if st_a.requester_waits() {
        return Err("a requester whose READs all completed waits");
    }
    Ok(())
}

/// The hint that the requester's process streams (`QpFixed::req_streams`,
/// read as `engine::handover::Arrival::requester_streams`) is written
/// only by a user QP's doorbell: a kernel consumer's posts leave it
/// false. ERR and RESET clear it, so that a QP brought back starts as a
/// round trip (the hint set by hand here stands for a user doorbell).
pub(crate) fn requester_streams_hint() -> Result<(), &'static str> {
    use core::sync::atomic::Ordering::Relaxed;
    use sys::*;
    // Declared before the QPs so they outlive them (dropped after).
    let src = big(4096, Some(7))?;
    let mut dst = big(4096, None)?;
    let p = super::peer::Pair::new()?;
    // SAFETY: a live QP of an rroce device.
    let st_a = unsafe { RroceQp::state(p.a.0) };
    let streams = || st_a.fixed.req_streams.load(Relaxed);
    if streams() {
        return Err("a new QP's process streams");
    }
    let s = sge(src.as_ptr(), 4096, p.pd.lkey());
    let remote = dst.as_mut_ptr() as u64;
    for id in 1..=3u64 {
        let w = rdma_wr(id, ib_wr_opcode_IB_WR_RDMA_WRITE, &s, remote, p.pd.rkey());
        if p.a.post_send(&w.wr).0 != 0 {
            return Err("posting a WRITE failed");
        }
    }
    let done = wait_wcs(&p.cq_a, 3);
    if done.len() != 3 || done.iter().any(|w| w.status != ib_wc_status_IB_WC_SUCCESS) {
        return Err("the WRITEs did not complete");
    }
    if dst[..] != src[..] {
        return Err("the WRITEs' data differs");
    }
    if streams() {
        return Err("a kernel consumer's posts set the stream hint");
    }
    // Set without the QP's lock, which its writers hold: this kernel QP
    // has no other writer (its posts ring no user doorbell).
    st_a.fixed.req_streams.store(true, Relaxed);
    if to_state(&p.a, ib_qp_state_IB_QPS_ERR) != 0 {
        return Err("modify to ERR failed");
    }
    if streams() {
        return Err("ERR left the stream hint set");
    }
    st_a.fixed.req_streams.store(true, Relaxed);
    if to_state(&p.a, ib_qp_state_IB_QPS_RESET) != 0 {
        return Err("modify to RESET failed");
    }
    if streams() {
        return Err("RESET left the stream hint set");
    }
    Ok(())
}

/// Bytes of the READ left in flight when the responder is reset.
const LONG_READ: usize = 4 << 20;
/// Responses to it the responder sends before it holds the rest.
const HELD_AFTER: u32 = 1000;
/// Bytes moved by the traffic after the QPs are brought back.
const AFTER_READ: usize = 64 << 10;
const AFTER_SEND: usize = 3000;

/// Posts a signaled RDMA READ of `len` bytes from `remote` into `local`.
fn post_read(
    a: &TestQp,
    id: u64,
    local: *mut u8,
    remote: *const u8,
    len: usize,
    pd: &TestPd,
) -> i32 {
    use sys::*;
    let s = sge(local, len, pd.lkey());
    let w = rdma_wr(
        id,
        ib_wr_opcode_IB_WR_RDMA_READ,
        &s,
        remote as u64,
        pd.rkey(),
    );
    a.post_send(&w.wr).0
}

/// RESET quiesces a QP as `rxe_qp_reset` does: with a long READ in
/// flight (the responder holding its transmit after its first responses,
/// `QpState::hold_tx_after`), the responder moved to RESET keeps no queued
/// response, packet, requester or responder state, and its ring indices
/// start over; both QPs then come back at a larger MTU with the same PSNs
/// and move data correctly (no stale response lands in the new READ).
pub(crate) fn reset_quiesces_qp() -> Result<(), &'static str> {
    use sys::*;
    let dev = TestDev::new()?;
    let Some((sgid, gid)) = loopback_gid(&dev) else {
        return Err("no ::ffff:127.0.0.1 GID on the loopback device");
    };
    let src = big(LONG_READ, Some(1))?;
    let mut dst = big(LONG_READ, None)?;
    let src2 = big(AFTER_READ, Some(77))?;
    let mut dst2 = big(AFTER_READ, None)?;
    let mut rbuf = big(4096, None)?;
    let pd = TestPd::new(&dev)?;
    let c = Consumer::new(false);
    let cq_a = TestCq::new(&dev, 64, 0, &c)?;
    let cq_b = TestCq::new(&dev, 64, 0, &c)?;
    let a = create_qp(&pd, &cq_a, false).map_err(|_| "create_qp failed")?;
    let b = create_qp(&pd, &cq_b, false).map_err(|_| "create_qp failed")?;
    bring_up(&a, b.qpn(), &gid, sgid, ib_mtu_IB_MTU_1024)?;
    bring_up(&b, a.qpn(), &gid, sgid, ib_mtu_IB_MTU_1024)?;
    // SAFETY: a live QP of an rroce device.
    let st_b = unsafe { RroceQp::state(b.0) };
    // B sends the first responses, then holds the rest of the READ, so it
    // is mid-response at RESET whatever the scheduler does meanwhile;
    // those first responses are on their way to A (or in its receive
    // thread's queue) when A is reset, and must not land in A's next READ.
    st_b.hold_tx_after(HELD_AFTER);
    if post_read(&a, 1, dst.as_mut_ptr(), src.as_ptr(), LONG_READ, &pd) != 0 {
        st_b.open_tx();
        return Err("posting the long READ failed");
    }
    let mut tries = 0;
    // Held, with responses built behind the gate (freed by the RESET),
    // and more owed than the gate's queue holds. A asks for the READ in
    // parts of 64 PSNs (`engine::rc::requester`), the next ones as the
    // earlier ones' responses arrive: B, held after 1000 packets, queues
    // the rest of the part at 960 behind the gate at once, but is owed
    // more (parts at 1024 and 1088, beyond the 64 packets it queues) only
    // once A has taken those 1000 responses and asked; until then it is
    // not yet answering anything it has not built.
    while !st_b.tx_held() || st_b.packets_waiting() == 0 || !st_b.responding() {
        tries += 1;
        if tries > 1000 {
            st_b.open_tx();
            return Err(if !st_b.tx_held() || st_b.packets_waiting() == 0 {
                "B did not send the READ's first responses"
            } else {
                "B held its transmit but is not answering the READ"
            });
        }
        fsleep(Delta::from_millis(10));
    }
    // The responses held back are freed by the RESET, after the QP's
    // lock is let go: none with interrupts off.
    crate::net::skb::freed_irqs_off::watch();
    let reset = to_state(&b, ib_qp_state_IB_QPS_RESET);
    let freed = crate::net::skb::freed_irqs_off::unwatch();
    st_b.open_tx();
    if reset != 0 {
        return Err("modify to RESET failed");
    }
    if freed != 0 {
        pr_err!(
            "qp {}: RESET freed {freed} packets with interrupts off\n",
            b.qpn()
        );
        return Err("RESET freed queued packets under the QP's lock");
    }
    if let Some(what) = st_b.not_quiesced() {
        pr_err!("qp {}: after RESET: {what}\n", b.qpn());
        return Err("RESET left the responder's state behind");
    }
    // The requester side: flush the READ, then reset.
    if to_state(&a, ib_qp_state_IB_QPS_ERR) != 0 {
        return Err("modify to ERR failed");
    }
    let _ = wait_wcs(&cq_a, 1);
    // What a wait for ODP pages leaves (a user QP's; a kernel QP has no
    // ODP MRs) must not outlive RESET either: a failed fault left over
    // failed the reused QP's first access to those pages at once.
    // SAFETY: a live QP of an rroce device.
    unsafe { RroceQp::state(a.0) }.leave_odp_behind();
    if to_state(&a, ib_qp_state_IB_QPS_RESET) != 0 {
        return Err("modify to RESET failed");
    }
    // SAFETY: a live QP of an rroce device.
    if let Some(what) = unsafe { RroceQp::state(a.0) }.not_quiesced() {
        pr_err!("qp {}: after RESET: {what}\n", a.qpn());
        return Err("RESET left the requester's state behind");
    }
    // Give stale responses (if any were left) time to arrive.
    fsleep(Delta::from_millis(50));
    bring_up(&a, b.qpn(), &gid, sgid, ib_mtu_IB_MTU_4096)?;
    bring_up(&b, a.qpn(), &gid, sgid, ib_mtu_IB_MTU_4096)?;
    traffic_after_reset(&a, &b, &pd, (&cq_a, &cq_b), &src2, &mut dst2, &mut rbuf)?;
    drop(a);
    drop(b);
    Ok(())
}

/// A READ and a SEND over the QPs brought back after RESET complete with
/// the right data.
fn traffic_after_reset(
    a: &TestQp,
    b: &TestQp,
    pd: &TestPd,
    (cq_a, cq_b): (&TestCq, &TestCq),
    src2: &[u8],
    dst2: &mut [u8],
    rbuf: &mut [u8],
) -> Result<(), &'static str> {
    use sys::*;
    let r = sge(rbuf.as_mut_ptr(), rbuf.len(), pd.lkey());
    if b.post_recv(&recv_wr(0xb1, &r)).0 != 0 {
        return Err("post_recv after RESET failed");
    }
    if post_read(a, 2, dst2.as_mut_ptr(), src2.as_ptr(), AFTER_READ, pd) != 0 {
        return Err("posting a READ after RESET failed");
    }
    let s = sge(src2.as_ptr(), AFTER_SEND, pd.lkey());
    if a.post_send(&send_wr(3, ib_wr_opcode_IB_WR_SEND, &s)).0 != 0 {
        return Err("posting a SEND after RESET failed");
    }
    let sent = wait_wcs(cq_a, 2);
    let got = wait_wcs(cq_b, 1);
    let ok = |w: &ib_wc| w.status == ib_wc_status_IB_WC_SUCCESS;
    if sent.len() != 2 || got.len() != 1 || !sent.iter().all(ok) || !ok(&got[0]) {
        pr_err!(
            "after RESET: {} send and {} receive completions\n",
            sent.len(),
            got.len()
        );
        return Err("traffic after RESET did not complete successfully");
    }
    if wr_id(&sent[0]) != 2 || wr_id(&sent[1]) != 3 || got[0].byte_len != AFTER_SEND as u32 {
        return Err("completions after RESET are wrong");
    }
    if dst2[..] != src2[..] {
        return Err("the READ after RESET returned wrong data");
    }
    if rbuf[..AFTER_SEND] != src2[..AFTER_SEND] {
        return Err("the SEND after RESET delivered wrong data");
    }
    Ok(())
}

/// Asks `qp` for `mask` of `attr`, which must be refused, and checks that
/// every attribute `query_qp` reports stayed the same.
fn refused_unchanged(
    qp: &TestQp,
    attr: &mut sys::ib_qp_attr,
    mask: u32,
    what: &'static str,
) -> Result<(), &'static str> {
    let (before, _) = query(qp, 0)?;
    if qp.modify(attr, mask) == 0 {
        pr_err!("{what}: accepted\n");
        return Err("a modify_qp from a false current state was accepted");
    }
    let (after, _) = query(qp, 0)?;
    if bytes_of(&before) != bytes_of(&after) {
        pr_err!(
            "{what}: state {} -> {}, sq_psn {:#x} -> {:#x}, timeout {} -> {}, rnr timer {} -> {}\n",
            before.qp_state,
            after.qp_state,
            before.sq_psn,
            after.sq_psn,
            before.timeout,
            after.timeout,
            before.min_rnr_timer,
            after.min_rnr_timer
        );
        return Err("a rejected modify_qp changed the QP's attributes");
    }
    Ok(())
}

/// A rejected `modify_qp` changes nothing, and the current state a caller
/// claims (`IB_QP_CUR_STATE`) must be the QP's: an RTS QP claiming RTR
/// cannot take new RTS attributes (a new send PSN under packets in
/// flight), and a QP in ERR claiming RTS cannot go back to RTS without
/// passing through RESET.
pub(crate) fn rejected_modify_changes_nothing() -> Result<(), &'static str> {
    use sys::*;
    let dev = TestDev::new()?;
    let Some((sgid, gid)) = loopback_gid(&dev) else {
        return Err("no ::ffff:127.0.0.1 GID on the loopback device");
    };
    let pd = TestPd::new(&dev)?;
    let c = Consumer::new(false);
    let cq = TestCq::new(&dev, 64, 0, &c)?;
    let a = create_qp(&pd, &cq, false).map_err(|_| "create_qp failed")?;
    let b = create_qp(&pd, &cq, false).map_err(|_| "create_qp failed")?;
    bring_up(&a, b.qpn(), &gid, sgid, ib_mtu_IB_MTU_1024)?;
    // SAFETY: all-zero is a valid `ib_qp_attr`.
    let mut m: ib_qp_attr = unsafe { core::mem::zeroed() };
    m.qp_state = ib_qp_state_IB_QPS_RTS;
    m.cur_qp_state = ib_qp_state_IB_QPS_RTR;
    m.sq_psn = 0x777;
    m.timeout = 3;
    m.retry_cnt = 1;
    m.rnr_retry = 1;
    m.max_rd_atomic = 1;
    let mask = ib_qp_attr_mask_IB_QP_STATE
        | ib_qp_attr_mask_IB_QP_CUR_STATE
        | ib_qp_attr_mask_IB_QP_SQ_PSN
        | ib_qp_attr_mask_IB_QP_TIMEOUT
        | ib_qp_attr_mask_IB_QP_RETRY_CNT
        | ib_qp_attr_mask_IB_QP_RNR_RETRY
        | ib_qp_attr_mask_IB_QP_MAX_QP_RD_ATOMIC;
    refused_unchanged(&a, &mut m, mask, "RTS claiming RTR -> RTS")?;
    if to_state(&a, ib_qp_state_IB_QPS_ERR) != 0 {
        return Err("modify to ERR failed");
    }
    // SAFETY: all-zero is a valid `ib_qp_attr`.
    let mut m: ib_qp_attr = unsafe { core::mem::zeroed() };
    m.qp_state = ib_qp_state_IB_QPS_RTS;
    m.cur_qp_state = ib_qp_state_IB_QPS_RTS;
    m.min_rnr_timer = 9;
    let mask = ib_qp_attr_mask_IB_QP_STATE
        | ib_qp_attr_mask_IB_QP_CUR_STATE
        | ib_qp_attr_mask_IB_QP_MIN_RNR_TIMER;
    refused_unchanged(&a, &mut m, mask, "ERR claiming RTS -> RTS")?;
    drop(a);
    drop(b);
    Ok(())
}

/// QP numbers the test leaves free below the end of the QP table.
const LEFT_FREE: u32 = 4;

/// A full QP table: creating QPs until it fails ends with ENOMEM exactly
/// when the table is full, and every QP created is reachable by its number
/// (none gets a number past the table, where packets cannot find it).
pub(crate) fn qp_table_full() -> Result<(), &'static str> {
    let dev = TestDev::new()?;
    let pd = TestPd::new(&dev)?;
    let c = Consumer::new(false);
    let cq = TestCq::new(&dev, 16, 0, &c)?;
    // SAFETY: a registered rroce device, alive until `dev` drops.
    let rdev = unsafe { RroceDev::from_ib(dev.0) };
    // Take every number, then give back the last few with a table slot and
    // every one past the table.
    let cap = IndexAllocator::<{ limits::QP_ID_WORDS }>::CAPACITY as u32;
    let mut taken = 0u32;
    while taken < cap && rdev.qp_ids.alloc().is_ok() {
        taken += 1;
    }
    let keep = limits::MAX_QP - LEFT_FREE;
    for i in keep + 1..cap {
        let _ = rdev.qp_ids.free(i);
    }
    let mut qps = KVec::new();
    let mut err = 0;
    while qps.len() < 256 {
        match create_qp(&pd, &cq, false) {
            Ok(q) => qps.push(q, GFP_KERNEL).map_err(|_| "no memory")?,
            Err(e) => {
                err = e;
                break;
            }
        }
    }
    let mut unreachable = 0;
    {
        let guard = kernel::sync::rcu::read_lock();
        for q in qps.iter() {
            // SAFETY: a live QP of an rroce device.
            let st = unsafe { RroceQp::state(q.0) };
            match rdev.qps.get(q.qpn() as usize, &guard) {
                Some(s) if core::ptr::eq(s, st) => {}
                _ => unreachable += 1,
            }
        }
    }
    let created = qps.len();
    drop(qps);
    for i in 1..=keep {
        let _ = rdev.qp_ids.free(i);
    }
    if unreachable != 0 {
        pr_err!("{created} QPs created, {unreachable} not in the QP table\n");
        return Err("QPs were created that cannot be found by their number");
    }
    if err != ENOMEM.to_errno() || created != LEFT_FREE as usize {
        pr_err!("{created} QPs created, then {err}\n");
        return Err("a full QP table must fail create_qp with ENOMEM");
    }
    Ok(())
}

/// `rdma_query_ah` gives back the address an AH was created with (the
/// `query_ah` op).
pub(crate) fn query_ah_returns_its_address() -> Result<(), &'static str> {
    use sys::*;
    let dev = TestDev::new()?;
    let Some((sgid, gid)) = loopback_gid(&dev) else {
        return Err("no ::ffff:127.0.0.1 GID on the loopback device");
    };
    let pd = TestPd::new(&dev)?;
    // SAFETY: all-zero is a valid `rdma_ah_attr`.
    let mut attr: rdma_ah_attr = unsafe { core::mem::zeroed() };
    attr.type_ = rdma_ah_attr_type_RDMA_AH_ATTR_TYPE_ROCE;
    attr.ah_flags = ib_ah_flags_IB_AH_GRH as u8;
    attr.port_num = 1;
    attr.sl = SL;
    attr.grh.dgid = gid;
    attr.grh.sgid_index = sgid;
    attr.grh.hop_limit = HOP_LIMIT;
    attr.grh.traffic_class = 0x20;
    // SAFETY: a live kernel PD of the device; `attr` is valid.
    let ah = unsafe { rdma_create_ah(pd.0, &mut attr, 0) };
    if bad_ptr(ah) {
        return Err("rdma_create_ah failed");
    }
    // SAFETY: all-zero is a valid `rdma_ah_attr`.
    let mut out: rdma_ah_attr = unsafe { core::mem::zeroed() };
    // SAFETY: a live AH; `out` is ours.
    let r = unsafe { rdma_query_ah(ah, &mut out) };
    // SAFETY: `raw` covers the union.
    let same = r == 0
        && unsafe { out.grh.dgid.raw == gid.raw }
        && out.grh.sgid_index == sgid
        && out.grh.hop_limit == HOP_LIMIT
        && out.grh.traffic_class == 0x20
        && out.sl == SL
        && out.port_num == 1
        && out.type_ == rdma_ah_attr_type_RDMA_AH_ATTR_TYPE_ROCE;
    // SAFETY: created above, destroyed once.
    unsafe { rdma_destroy_ah_user(ah, 0, null_mut()) };
    if !same {
        return Err("rdma_query_ah did not return the AH's address");
    }
    Ok(())
}

/// A kernel SRQ on `pd` (`ib_create_srq`), destroyed on drop.
pub(super) struct TestSrq(pub(super) *mut sys::ib_srq);

impl TestSrq {
    pub(super) fn new(pd: &TestPd) -> Result<Self, &'static str> {
        // SAFETY: all-zero is a valid `ib_srq_init_attr`.
        let mut init: sys::ib_srq_init_attr = unsafe { core::mem::zeroed() };
        init.srq_type = sys::ib_srq_type_IB_SRQT_BASIC;
        init.attr.max_wr = 8;
        init.attr.max_sge = 1;
        // SAFETY: a live kernel PD; valid attributes; no user data.
        let srq = unsafe { sys::ib_create_srq_user(pd.0, &mut init, null_mut(), null_mut()) };
        if bad_ptr(srq) {
            return Err("ib_create_srq failed");
        }
        Ok(Self(srq))
    }
}

impl Drop for TestSrq {
    fn drop(&mut self) {
        // SAFETY: created by `new`; its QPs are destroyed first.
        unsafe { sys::ib_destroy_srq_user(self.0, null_mut()) };
    }
}

/// `IB_EVENT_QP_LAST_WQE_REACHED` events counted, after up to a second
/// for them to reach `want` (they come from the QP's work item).
pub(super) fn last_wqe_events(events: &QpEvents, want: u32) -> u32 {
    for _ in 0..100 {
        if events.last_wqe.load(Ordering::SeqCst) >= want {
            break;
        }
        fsleep(Delta::from_millis(10));
    }
    events.last_wqe.load(Ordering::SeqCst)
}

/// A QP on an SRQ raises `IB_EVENT_QP_LAST_WQE_REACHED` once per entry to
/// the error state (`ib_drain_qp` waits for it), and raises it from its
/// work item: the handler runs with interrupts and bottom halves on,
/// outside the QP's lock, so it may query or modify the QP. (It was
/// raised inside `modify_qp`, under the QP's lock with interrupts off.)
pub(crate) fn last_wqe_event_outside_lock() -> Result<(), &'static str> {
    use sys::*;
    static EVENTS: QpEvents = QpEvents::new();
    EVENTS.clear();
    let dev = TestDev::new()?;
    let pd = TestPd::new(&dev)?;
    let c = Consumer::new(false);
    let cq = TestCq::new(&dev, 16, 0, &c)?;
    let srq = TestSrq::new(&pd)?;
    let qp = TestQp::create(&pd, &cq, Some(&EVENTS), srq.0, ib_qp_type_IB_QPT_RC)?;
    to_init(&qp)?;
    if to_state(&qp, ib_qp_state_IB_QPS_ERR) != 0 {
        return Err("INIT -> ERR failed");
    }
    if last_wqe_events(&EVENTS, 1) != 1 {
        return Err("no IB_EVENT_QP_LAST_WQE_REACHED on entry to ERR");
    }
    if EVENTS.atomic.load(Ordering::SeqCst) != 0 {
        return Err("IB_EVENT_QP_LAST_WQE_REACHED raised with interrupts or BHs off");
    }
    // ERR -> ERR is no new entry.
    if to_state(&qp, ib_qp_state_IB_QPS_ERR) != 0 {
        return Err("ERR -> ERR failed");
    }
    if last_wqe_events(&EVENTS, 2) != 1 {
        return Err("IB_EVENT_QP_LAST_WQE_REACHED raised again in ERR");
    }
    if to_state(&qp, ib_qp_state_IB_QPS_RESET) != 0 {
        return Err("ERR -> RESET failed");
    }
    to_init(&qp)?;
    if to_state(&qp, ib_qp_state_IB_QPS_ERR) != 0 {
        return Err("INIT -> ERR failed");
    }
    if last_wqe_events(&EVENTS, 2) != 2 || EVENTS.atomic.load(Ordering::SeqCst) != 0 {
        return Err("the second entry to ERR raised no event, or raised it atomically");
    }
    drop(qp);
    drop(srq);
    Ok(())
}
