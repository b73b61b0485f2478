// SPDX-License-Identifier: GPL-2.0

//! In-kernel consumer conformance tests (KUnit).
//!
//! These tests are a kernel ULP's view of rroce's completion queues: they
//! register a real rroce device (on `init_net`'s loopback netdev), create
//! CQs through the RDMA core (`__ib_create_cq`, which calls rroce's
//! `create_cq` op), and drive completions through the same entry the
//! transport uses (`CqState::post`) from several kernel threads at once
//! (work items pinned to different CPUs), while the consumer arms with
//! `req_notify_cq`, polls with `poll_cq` (both through the device's ops, as
//! `ib_req_notify_cq`/`ib_poll_cq` do) and counts its `comp_handler`
//! callbacks. They check the NDKPI rules in `../shared/seeds/` that a
//! kernel consumer can observe (see `Documentation/conformance.rst`):
//! one callback per arm, callbacks never concurrent nor nested and free
//! to re-arm and poll, fire-on-arm after new completions, errors waking
//! every arm, fatal overrun with its error event, resize under load, the
//! completion vector's CPU.

use core::{
    ffi::c_void,
    mem::size_of,
    ptr::null_mut,
    sync::atomic::{AtomicI32, AtomicU32, Ordering},
};

use kernel::{
    prelude::*,
    time::{delay::fsleep, Delta},
};

use crate::{
    cq::{CqState, Kind, RroceCq},
    rdma::sys,
};

const NEXT_COMP: u32 = sys::ib_cq_notify_flags_IB_CQ_NEXT_COMP;
const SOLICITED: u32 = sys::ib_cq_notify_flags_IB_CQ_SOLICITED;
const REPORT_MISSED: u32 = sys::ib_cq_notify_flags_IB_CQ_REPORT_MISSED_EVENTS;

/// Producers (kernel threads) posting at once.
const PRODUCERS: usize = 3;

/// What a consumer's handlers saw.
struct Consumer {
    /// `comp_handler` calls.
    calls: AtomicU32,
    /// Handlers running now; `overlap` counts a second one entering.
    running: AtomicU32,
    overlap: AtomicU32,
    /// Arms placed (by the test and from inside the handler).
    arms: AtomicU32,
    /// Completions polled, and how many broke a producer's order or had a
    /// bad status.
    polled: AtomicU32,
    disorder: AtomicU32,
    bad: AtomicU32,
    /// The next sequence number expected from each producer.
    next: [AtomicU32; PRODUCERS],
    /// The CPU of the last callback.
    cpu: AtomicI32,
    /// `IB_EVENT_CQ_ERR` events.
    cq_err: AtomicU32,
    /// Whether `comp_handler` drains the CQ and re-arms (else it counts).
    drain: bool,
}

impl Consumer {
    fn new(drain: bool) -> Self {
        Self {
            calls: AtomicU32::new(0),
            running: AtomicU32::new(0),
            overlap: AtomicU32::new(0),
            arms: AtomicU32::new(0),
            polled: AtomicU32::new(0),
            disorder: AtomicU32::new(0),
            bad: AtomicU32::new(0),
            next: [const { AtomicU32::new(0) }; PRODUCERS],
            cpu: AtomicI32::new(-1),
            cq_err: AtomicU32::new(0),
            drain,
        }
    }

    fn calls(&self) -> u32 {
        self.calls.load(Ordering::SeqCst)
    }

    fn record(&self, wc: &sys::ib_wc) {
        // SAFETY: the producers write `wr_id` into the union.
        let id = unsafe { wc.__bindgen_anon_1.wr_id };
        if wc.status != sys::ib_wc_status_IB_WC_SUCCESS {
            self.bad.fetch_add(1, Ordering::SeqCst);
        }
        let p = (id >> 32) as usize;
        let seq = id as u32;
        match self.next.get(p) {
            Some(n) if n.load(Ordering::SeqCst) == seq => {
                n.store(seq + 1, Ordering::SeqCst);
            }
            _ => {
                self.disorder.fetch_add(1, Ordering::SeqCst);
            }
        }
        self.polled.fetch_add(1, Ordering::SeqCst);
    }
}

/// `ib_poll_cq`: through the device's ops, as the core's inline does.
///
/// # Safety
///
/// `cq` is a live CQ of an rroce device; `wc` has room for `n` entries.
unsafe fn poll(cq: *mut sys::ib_cq, n: i32, wc: *mut sys::ib_wc) -> i32 {
    // SAFETY: per the caller; rroce sets `poll_cq`.
    unsafe {
        match (*(*cq).device).ops.poll_cq {
            Some(f) => f(cq, n, wc),
            None => -1,
        }
    }
}

/// `ib_req_notify_cq`: through the device's ops.
///
/// # Safety
///
/// `cq` is a live CQ of an rroce device.
unsafe fn notify(cq: *mut sys::ib_cq, flags: u32) -> i32 {
    // SAFETY: per the caller; rroce sets `req_notify_cq`.
    unsafe {
        match (*(*cq).device).ops.req_notify_cq {
            Some(f) => f(cq, flags),
            None => -1,
        }
    }
}

/// The consumer's `comp_handler`. In drain mode it does what a kernel ULP
/// does: poll everything, re-arm with `IB_CQ_REPORT_MISSED_EVENTS`, poll
/// again while that reports completions — from inside the callback.
///
/// # Safety
///
/// Registered with `__ib_create_cq` with a `Consumer` as `cq_context`,
/// which outlives the CQ.
unsafe extern "C" fn comp_handler(cq: *mut sys::ib_cq, ctx: *mut c_void) {
    // SAFETY: see the function's safety section.
    let c = unsafe { &*ctx.cast::<Consumer>() };
    if c.running.fetch_add(1, Ordering::SeqCst) != 0 {
        c.overlap.fetch_add(1, Ordering::SeqCst);
    }
    // SAFETY: plain function call.
    let cpu = unsafe { sys::rroce_helper_smp_processor_id() };
    c.cpu.store(cpu as i32, Ordering::SeqCst);
    c.calls.fetch_add(1, Ordering::SeqCst);
    if !c.drain {
        c.running.fetch_sub(1, Ordering::SeqCst);
        return;
    }
    loop {
        // SAFETY: all-zero is a valid `ib_wc`.
        let mut wcs: [sys::ib_wc; 8] = unsafe { core::mem::zeroed() };
        // SAFETY: `cq` is live during its handler; room for 8.
        let n = unsafe { poll(cq, 8, wcs.as_mut_ptr()) };
        if n < 0 {
            c.bad.fetch_add(1, Ordering::SeqCst);
            break;
        }
        for wc in wcs.iter().take(n as usize) {
            c.record(wc);
        }
        if n > 0 {
            continue;
        }
        c.arms.fetch_add(1, Ordering::SeqCst);
        // SAFETY: as above.
        if unsafe { notify(cq, NEXT_COMP | REPORT_MISSED) } <= 0 {
            break;
        }
    }
    c.running.fetch_sub(1, Ordering::SeqCst);
}

/// The consumer's CQ `event_handler`.
///
/// # Safety
///
/// As for [`comp_handler`]; `ev` is a valid event.
unsafe extern "C" fn event_handler(ev: *mut sys::ib_event, ctx: *mut c_void) {
    // SAFETY: see the function's safety section.
    let (c, ev) = unsafe { (&*ctx.cast::<Consumer>(), &*ev) };
    if ev.event == sys::ib_event_type_IB_EVENT_CQ_ERR {
        c.cq_err.fetch_add(1, Ordering::SeqCst);
    }
}

/// An rroce device on the loopback netdev, unregistered on drop.
struct TestDev(*mut sys::ib_device);

impl TestDev {
    fn new() -> Result<Self, &'static str> {
        // SAFETY: `init_net`'s loopback netdev lives as long as the kernel;
        // the name is NUL-terminated.
        let dev = unsafe {
            crate::link::add_device(
                c"rroce_kunit".as_char_ptr(),
                sys::rroce_helper_init_net_loopback(),
            )
        }
        .map_err(|_| "cannot register an rroce device on lo")?;
        Ok(Self(dev))
    }
}

impl Drop for TestDev {
    fn drop(&mut self) {
        // SAFETY: registered by `new`, every CQ of the test destroyed; the
        // core frees the device (through `dealloc_driver`) before returning.
        unsafe { sys::ib_unregister_device(self.0) };
    }
}

/// A kernel CQ created through the core, destroyed on drop.
struct TestCq(*mut sys::ib_cq);

impl TestCq {
    fn new(dev: &TestDev, entries: u32, vector: u32, c: &Consumer) -> Result<Self, &'static str> {
        let attr = sys::ib_cq_init_attr {
            cqe: entries,
            comp_vector: vector,
            flags: 0,
        };
        // SAFETY: a registered device; the handlers match their contract,
        // and `c` outlives the CQ (callers drop the CQ first).
        let cq = unsafe {
            sys::__ib_create_cq(
                dev.0,
                Some(comp_handler),
                Some(event_handler),
                core::ptr::from_ref(c).cast_mut().cast(),
                &attr,
                c"rroce_kunit".as_char_ptr(),
            )
        };
        if cq.is_null() || (cq as isize) < 0 && (cq as isize) >= -4095 {
            return Err("__ib_create_cq failed");
        }
        Ok(Self(cq))
    }

    fn state(&self) -> &CqState {
        // SAFETY: a live CQ of an rroce device.
        unsafe { RroceCq::state(self.0) }
    }

    fn capacity(&self) -> u32 {
        // SAFETY: live CQ; the core's `cqe` is what `create_cq` reported.
        unsafe { (*self.0).cqe as u32 }
    }

    fn notify(&self, flags: u32) -> i32 {
        // SAFETY: live CQ.
        unsafe { notify(self.0, flags) }
    }

    /// Polls everything into `c`; returns how many.
    fn drain(&self, c: &Consumer) -> u32 {
        let mut total = 0;
        loop {
            // SAFETY: all-zero is a valid `ib_wc`.
            let mut wcs: [sys::ib_wc; 8] = unsafe { core::mem::zeroed() };
            // SAFETY: live CQ; room for 8.
            let n = unsafe { poll(self.0, 8, wcs.as_mut_ptr()) };
            if n <= 0 {
                return total;
            }
            for wc in wcs.iter().take(n as usize) {
                c.record(wc);
            }
            total += n as u32;
        }
    }
}

impl Drop for TestCq {
    fn drop(&mut self) {
        // SAFETY: created by `new`, not used after this.
        unsafe { sys::ib_destroy_cq_user(self.0, null_mut()) };
    }
}

/// A completion as the transport posts it into a kernel CQ.
fn post(st: &CqState, wr_id: u64, kind: Kind) -> Result {
    // SAFETY: all-zero is a valid `ib_wc`.
    let mut wc: sys::ib_wc = unsafe { core::mem::zeroed() };
    wc.__bindgen_anon_1.wr_id = wr_id;
    wc.status = if kind == Kind::Error {
        sys::ib_wc_status_IB_WC_WR_FLUSH_ERR
    } else {
        sys::ib_wc_status_IB_WC_SUCCESS
    };
    wc.opcode = sys::ib_wc_opcode_IB_WC_RECV;
    // SAFETY: `wc` is plain data of `size_of::<ib_wc>()` bytes.
    let bytes = unsafe {
        core::slice::from_raw_parts(
            core::ptr::from_ref(&wc).cast::<u8>(),
            size_of::<sys::ib_wc>(),
        )
    };
    st.post(bytes, kind)
}

/// A kernel thread's worth of completions: a work item queued on one CPU.
///
/// # Invariants
///
/// `work` is first, so a `*mut work_struct` of a producer is a `*mut
/// Producer`; `cq` is live until the work item has been flushed.
#[repr(C)]
struct Producer {
    work: sys::work_struct,
    cq: *mut sys::ib_cq,
    id: u64,
    count: u32,
    failed: AtomicU32,
}

/// # Safety
///
/// Called by the workqueue with the `work` of a live `Producer`.
unsafe extern "C" fn produce(work: *mut sys::work_struct) {
    // SAFETY: `work` is the first field of a live `Producer` (type
    // invariant).
    let p = unsafe { &*work.cast::<Producer>() };
    // SAFETY: the CQ is live until this work item is flushed.
    let st = unsafe { RroceCq::state(p.cq) };
    for i in 0..p.count {
        let kind = if i % 17 == 0 {
            Kind::Solicited
        } else {
            Kind::Unsolicited
        };
        if post(st, (p.id << 32) | u64::from(i), kind).is_err() {
            p.failed.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// Starts `PRODUCERS` producers of `count` completions each, spread over
/// the CPUs; returns them (flush with [`join`]).
fn start(cq: &TestCq, count: u32) -> Result<KVec<KBox<Producer>>, &'static str> {
    let mut v = KVec::new();
    for id in 0..PRODUCERS {
        let p = KBox::new(
            Producer {
                // SAFETY: all-zero is a valid placeholder, initialized below.
                work: unsafe { core::mem::zeroed() },
                cq: cq.0,
                id: id as u64,
                count,
                failed: AtomicU32::new(0),
            },
            GFP_KERNEL,
        )
        .map_err(|_| "alloc")?;
        v.push(p, GFP_KERNEL).map_err(|_| "alloc")?;
    }
    for (i, p) in v.iter_mut().enumerate() {
        let w: *mut sys::work_struct = &mut p.work;
        // SAFETY: the producer is boxed and not moved until joined.
        unsafe {
            sys::rroce_helper_init_work(w, Some(produce));
            sys::rroce_helper_queue_work_on_vector(i as u32, w);
        }
    }
    Ok(v)
}

/// Waits for the producers; returns how many posts failed.
fn join(v: &mut KVec<KBox<Producer>>) -> u32 {
    let mut failed = 0;
    for p in v.iter_mut() {
        // SAFETY: initialized and queued by `start`.
        unsafe { sys::rroce_helper_flush_work(&mut p.work) };
        failed += p.failed.load(Ordering::SeqCst);
    }
    failed
}

/// `IS_ERR_OR_NULL` for a pointer the core returned.
fn bad_ptr<T>(p: *mut T) -> bool {
    p.is_null() || (p as isize) < 0 && (p as isize) >= -4095
}

/// A kernel PD with the unsafe global rkey (so the test's kernel buffers
/// can be RDMA targets), deallocated on drop.
struct TestPd(*mut sys::ib_pd);

impl TestPd {
    fn new(dev: &TestDev) -> Result<Self, &'static str> {
        // SAFETY: a registered device; the name is NUL-terminated.
        let pd = unsafe {
            sys::__ib_alloc_pd(
                dev.0,
                sys::ib_pd_flags_IB_PD_UNSAFE_GLOBAL_RKEY,
                c"rroce_kunit".as_char_ptr(),
            )
        };
        if bad_ptr(pd) {
            return Err("ib_alloc_pd failed");
        }
        Ok(Self(pd))
    }

    fn lkey(&self) -> u32 {
        // SAFETY: live PD.
        unsafe { (*self.0).local_dma_lkey }
    }

    fn rkey(&self) -> u32 {
        // SAFETY: live PD.
        unsafe { (*self.0).unsafe_global_rkey }
    }
}

impl Drop for TestPd {
    fn drop(&mut self) {
        // SAFETY: allocated by `new`; its QPs are destroyed first.
        unsafe { sys::ib_dealloc_pd_user(self.0, null_mut()) };
    }
}

/// A kernel RC QP created through the core, destroyed on drop.
struct TestQp(*mut sys::ib_qp);

impl TestQp {
    fn new(pd: &TestPd, cq: &TestCq) -> Result<Self, &'static str> {
        // SAFETY: all-zero is a valid `ib_qp_init_attr`.
        let mut init: sys::ib_qp_init_attr = unsafe { core::mem::zeroed() };
        init.send_cq = cq.0;
        init.recv_cq = cq.0;
        init.cap.max_send_wr = 16;
        init.cap.max_recv_wr = 16;
        init.cap.max_send_sge = 2;
        init.cap.max_recv_sge = 2;
        init.cap.max_inline_data = 64;
        init.sq_sig_type = sys::ib_sig_type_IB_SIGNAL_REQ_WR;
        init.qp_type = sys::ib_qp_type_IB_QPT_RC;
        // SAFETY: a live kernel PD; valid attributes.
        let qp = unsafe { sys::ib_create_qp_kernel(pd.0, &mut init, c"rroce_kunit".as_char_ptr()) };
        if bad_ptr(qp) {
            pr_err!("ib_create_qp: {}\n", qp as isize);
            return Err("ib_create_qp of a kernel RC QP failed");
        }
        Ok(Self(qp))
    }

    fn qpn(&self) -> u32 {
        // SAFETY: live QP.
        unsafe { (*self.0).qp_num }
    }

    fn modify(&self, attr: &mut sys::ib_qp_attr, mask: u32) -> i32 {
        // SAFETY: live QP, valid attributes.
        unsafe { sys::ib_modify_qp(self.0, attr, mask as i32) }
    }

    /// RESET -> INIT -> RTR -> RTS towards `dest` at `gid` (GID index
    /// `sgid`), path MTU 1024.
    fn connect(&self, dest: u32, gid: &sys::ib_gid, sgid: u8) -> Result<(), &'static str> {
        use sys::*;
        // SAFETY: all-zero is a valid `ib_qp_attr`.
        let mut a: ib_qp_attr = unsafe { core::mem::zeroed() };
        a.qp_state = ib_qp_state_IB_QPS_INIT;
        a.port_num = 1;
        a.qp_access_flags = (ib_access_flags_IB_ACCESS_LOCAL_WRITE
            | ib_access_flags_IB_ACCESS_REMOTE_WRITE
            | ib_access_flags_IB_ACCESS_REMOTE_READ
            | ib_access_flags_IB_ACCESS_REMOTE_ATOMIC) as i32;
        let m = ib_qp_attr_mask_IB_QP_STATE
            | ib_qp_attr_mask_IB_QP_PKEY_INDEX
            | ib_qp_attr_mask_IB_QP_PORT
            | ib_qp_attr_mask_IB_QP_ACCESS_FLAGS;
        if self.modify(&mut a, m) != 0 {
            return Err("modify to INIT failed");
        }
        // SAFETY: as above.
        let mut a: ib_qp_attr = unsafe { core::mem::zeroed() };
        a.qp_state = ib_qp_state_IB_QPS_RTR;
        a.path_mtu = ib_mtu_IB_MTU_1024;
        a.dest_qp_num = dest;
        a.rq_psn = 0x100;
        a.max_dest_rd_atomic = 4;
        a.min_rnr_timer = 1;
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
            | ib_qp_attr_mask_IB_QP_RQ_PSN
            | ib_qp_attr_mask_IB_QP_MAX_DEST_RD_ATOMIC
            | ib_qp_attr_mask_IB_QP_MIN_RNR_TIMER;
        let r = self.modify(&mut a, m);
        if r != 0 {
            pr_err!("modify to RTR: {r}\n");
            return Err("modify to RTR failed");
        }
        // SAFETY: as above.
        let mut a: ib_qp_attr = unsafe { core::mem::zeroed() };
        a.qp_state = ib_qp_state_IB_QPS_RTS;
        a.sq_psn = 0x100;
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
        if self.modify(&mut a, m) != 0 {
            return Err("modify to RTS failed");
        }
        Ok(())
    }

    fn to_error(&self) -> Result<(), &'static str> {
        // SAFETY: all-zero is a valid `ib_qp_attr`.
        let mut a: sys::ib_qp_attr = unsafe { core::mem::zeroed() };
        a.qp_state = sys::ib_qp_state_IB_QPS_ERR;
        if self.modify(&mut a, sys::ib_qp_attr_mask_IB_QP_STATE) != 0 {
            return Err("modify to ERR failed");
        }
        Ok(())
    }

    /// `ib_post_send`: through the device's op, as the core's inline does.
    fn post_send(&self, wr: &sys::ib_send_wr) -> (i32, *const sys::ib_send_wr) {
        let mut bad: *const sys::ib_send_wr = core::ptr::null();
        // SAFETY: live QP; `wr` heads a list of valid requests.
        let r = unsafe {
            match (*(*self.0).device).ops.post_send {
                Some(f) => f(self.0, wr, &mut bad),
                None => -1,
            }
        };
        (r, bad)
    }

    fn post_recv(&self, wr: &sys::ib_recv_wr) -> (i32, *const sys::ib_recv_wr) {
        let mut bad: *const sys::ib_recv_wr = core::ptr::null();
        // SAFETY: as above.
        let r = unsafe {
            match (*(*self.0).device).ops.post_recv {
                Some(f) => f(self.0, wr, &mut bad),
                None => -1,
            }
        };
        (r, bad)
    }
}

impl Drop for TestQp {
    fn drop(&mut self) {
        // SAFETY: created by `new`, not used after this.
        unsafe { sys::ib_destroy_qp_user(self.0, null_mut()) };
    }
}

/// The GID index of `::ffff:127.0.0.1` on the test device (the RDMA core
/// fills the table from a work item after registration: wait for it).
fn loopback_gid(dev: &TestDev) -> Option<(u8, sys::ib_gid)> {
    let want: [u8; 16] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1];
    for _ in 0..100 {
        for idx in 0..16u8 {
            // SAFETY: all-zero is a valid `ib_gid`.
            let mut gid: sys::ib_gid = unsafe { core::mem::zeroed() };
            // SAFETY: a registered device; port 1 exists.
            let r = unsafe { sys::rdma_query_gid(dev.0, 1, i32::from(idx), &mut gid) };
            // SAFETY: `raw` covers the union.
            if r == 0 && unsafe { gid.raw } == want {
                return Some((idx, gid));
            }
        }
        fsleep(Delta::from_millis(50));
    }
    None
}

/// Polls `cq` until `n` completions arrived (at most about 5 s).
fn wait_wcs(cq: &TestCq, n: usize) -> KVec<sys::ib_wc> {
    let mut got = KVec::new();
    for _ in 0..500 {
        // SAFETY: all-zero is a valid `ib_wc`.
        let mut wc: [sys::ib_wc; 4] = unsafe { core::mem::zeroed() };
        // SAFETY: live CQ; room for 4.
        let k = unsafe { poll(cq.0, 4, wc.as_mut_ptr()) };
        for w in wc.iter().take(k.max(0) as usize) {
            if got.push(*w, GFP_KERNEL).is_err() {
                return got;
            }
        }
        if got.len() >= n {
            return got;
        }
        if k <= 0 {
            fsleep(Delta::from_millis(10));
        }
    }
    got
}

/// An SGE for `len` bytes at `addr` (a kernel virtual address, which is
/// what the DMA MR takes on rroce).
fn sge(addr: *const u8, len: usize, lkey: u32) -> sys::ib_sge {
    sys::ib_sge {
        addr: addr as u64,
        length: len as u32,
        lkey,
    }
}

fn pattern(len: usize, seed: u8) -> Result<KVec<u8>, &'static str> {
    let mut v = KVec::with_capacity(len, GFP_KERNEL).map_err(|_| "no memory")?;
    for i in 0..len {
        let _ = v.push(
            seed.wrapping_add((i as u8).wrapping_mul(7)) ^ (i >> 8) as u8,
            GFP_KERNEL,
        );
    }
    Ok(v)
}

fn zeroed(len: usize) -> Result<KVec<u8>, &'static str> {
    KVec::from_elem(0u8, len, GFP_KERNEL).map_err(|_| "no memory")
}

fn wr_id(wc: &sys::ib_wc) -> u64 {
    // SAFETY: rroce writes `wr_id` into the union.
    unsafe { wc.__bindgen_anon_1.wr_id }
}

/// Checks run by KUnit.
pub(crate) mod selftest {
    use super::*;

    /// Several kernel threads complete into one CQ while its handler
    /// drains and re-arms from inside the callback: nothing is lost or
    /// reordered per producer, callbacks never overlap or nest, and there
    /// is never more than one callback per arm (A4, A6, B1, B3).
    pub(crate) fn concurrent_producers() -> Result<(), &'static str> {
        const COUNT: u32 = 1000;
        let dev = TestDev::new()?;
        let c = Consumer::new(true);
        let cq = TestCq::new(&dev, 4096, 0, &c)?;
        if cq.capacity() < PRODUCERS as u32 * COUNT {
            return Err("CQ smaller than asked");
        }
        c.arms.fetch_add(1, Ordering::SeqCst);
        if cq.notify(NEXT_COMP) < 0 {
            return Err("arm failed");
        }
        let mut p = start(&cq, COUNT)?;
        if join(&mut p) != 0 {
            return Err("a post into a CQ with room failed");
        }
        cq.state().flush_callbacks();
        let total = PRODUCERS as u32 * COUNT;
        let polled = c.polled.load(Ordering::SeqCst);
        drop(cq);
        if polled != total {
            pr_err!("polled {polled} of {total} completions\n");
            return Err("a completion was never delivered to the armed handler");
        }
        if c.disorder.load(Ordering::SeqCst) != 0 {
            return Err("completions of one producer out of order");
        }
        if c.bad.load(Ordering::SeqCst) != 0 {
            return Err("poll failed or returned a bad status");
        }
        if c.overlap.load(Ordering::SeqCst) != 0 {
            return Err("two callbacks ran at once (or nested)");
        }
        if c.calls() == 0 || c.calls() > c.arms.load(Ordering::SeqCst) {
            return Err("more callbacks than arms");
        }
        Ok(())
    }

    /// Fire-on-arm through the device: an arm placed after a new unpolled
    /// completion fires at once; one already reported does not re-fire it;
    /// an arm with nothing new waits for the next completion (A1, A5, A7).
    pub(crate) fn fire_on_arm() -> Result<(), &'static str> {
        let dev = TestDev::new()?;
        let c = Consumer::new(false);
        let cq = TestCq::new(&dev, 64, 0, &c)?;
        let st = cq.state();
        post(st, 0, Kind::Unsolicited).map_err(|_| "post")?;
        st.flush_callbacks();
        if c.calls() != 0 {
            return Err("a callback without an arm");
        }
        if cq.notify(NEXT_COMP) < 0 {
            return Err("arm failed");
        }
        st.flush_callbacks();
        if c.calls() != 1 {
            return Err("an arm after a new unpolled completion did not fire at once");
        }
        cq.notify(NEXT_COMP);
        st.flush_callbacks();
        if c.calls() != 1 {
            return Err("an already reported completion fired a second arm");
        }
        post(st, 1, Kind::Unsolicited).map_err(|_| "post")?;
        st.flush_callbacks();
        if c.calls() != 2 {
            return Err("the pending arm did not fire on the next completion");
        }
        if cq.drain(&c) != 2 {
            return Err("poll did not return both completions");
        }
        if cq.notify(NEXT_COMP | REPORT_MISSED) != 0 {
            return Err("REPORT_MISSED_EVENTS saw completions in a drained CQ");
        }
        st.flush_callbacks();
        if c.calls() != 2 {
            return Err("an arm on a drained CQ fired");
        }
        Ok(())
    }

    /// A solicited arm ignores unsolicited successes and fires on a
    /// solicited completion; an error satisfies a solicited arm and an any
    /// arm (A2, A3, A9, E3).
    pub(crate) fn solicited_and_errors() -> Result<(), &'static str> {
        let dev = TestDev::new()?;
        let c = Consumer::new(false);
        let cq = TestCq::new(&dev, 64, 0, &c)?;
        let st = cq.state();
        cq.notify(SOLICITED);
        post(st, 0, Kind::Unsolicited).map_err(|_| "post")?;
        st.flush_callbacks();
        if c.calls() != 0 {
            return Err("a solicited arm fired on an unsolicited completion");
        }
        post(st, 1, Kind::Solicited).map_err(|_| "post")?;
        st.flush_callbacks();
        if c.calls() != 1 {
            return Err("a solicited arm did not fire on a solicited completion");
        }
        cq.drain(&c);
        // SOLICITED then NEXT_COMP merge to ANY: an unsolicited success fires.
        cq.notify(SOLICITED);
        cq.notify(NEXT_COMP);
        post(st, 2, Kind::Unsolicited).map_err(|_| "post")?;
        st.flush_callbacks();
        if c.calls() != 2 {
            return Err("SOLICITED + ANY did not merge to ANY");
        }
        cq.drain(&c);
        for (n, flags) in [(3u32, SOLICITED), (4, NEXT_COMP)] {
            cq.notify(flags);
            post(st, 3, Kind::Error).map_err(|_| "post")?;
            st.flush_callbacks();
            if c.calls() != n {
                return Err("an error completion did not satisfy the arm");
            }
            cq.drain(&c);
        }
        Ok(())
    }

    /// Overrun kills the CQ: the consumer gets `IB_EVENT_CQ_ERR`, a pending
    /// arm is satisfied once, later arms fail and nothing more is queued
    /// (A12, B4).
    pub(crate) fn overrun_is_fatal() -> Result<(), &'static str> {
        let dev = TestDev::new()?;
        let c = Consumer::new(false);
        let cq = TestCq::new(&dev, 8, 0, &c)?;
        let st = cq.state();
        let cap = cq.capacity();
        cq.notify(SOLICITED);
        for i in 0..cap {
            post(st, u64::from(i), Kind::Unsolicited).map_err(|_| "post into a CQ with room")?;
        }
        if post(st, 99, Kind::Unsolicited).is_ok() {
            return Err("a post into a full CQ succeeded");
        }
        st.flush_callbacks();
        if c.cq_err.load(Ordering::SeqCst) != 1 {
            return Err("no IB_EVENT_CQ_ERR after the overrun");
        }
        if c.calls() != 1 {
            return Err("the overrun did not satisfy the pending arm exactly once");
        }
        if cq.notify(NEXT_COMP) >= 0 {
            return Err("arming a dead CQ succeeded");
        }
        if post(st, 100, Kind::Error).is_ok() {
            return Err("a dead CQ accepted a completion");
        }
        Ok(())
    }

    /// Resizing while several kernel threads complete into the CQ and the
    /// handler drains it loses and reorders nothing (B5, B6).
    pub(crate) fn resize_under_load() -> Result<(), &'static str> {
        const COUNT: u32 = 1000;
        let dev = TestDev::new()?;
        let c = Consumer::new(true);
        let cq = TestCq::new(&dev, 4096, 0, &c)?;
        c.arms.fetch_add(1, Ordering::SeqCst);
        cq.notify(NEXT_COMP);
        let mut p = start(&cq, COUNT)?;
        let mut resized = 0;
        for k in 0..40 {
            let n = if k % 2 == 0 { 8000 } else { 3100 };
            // SAFETY: a kernel CQ.
            if unsafe { cq.state().resize(n, null_mut()) }.is_ok() {
                resized += 1;
            }
            fsleep(Delta::from_micros(200));
        }
        if join(&mut p) != 0 {
            return Err("a post failed during a resize");
        }
        cq.state().flush_callbacks();
        let total = PRODUCERS as u32 * COUNT;
        let polled = c.polled.load(Ordering::SeqCst);
        let disorder = c.disorder.load(Ordering::SeqCst);
        let overlap = c.overlap.load(Ordering::SeqCst);
        drop(cq);
        // Shrinking below the queued count fails and changes nothing (on a
        // CQ whose handler does not poll).
        let idle = Consumer::new(false);
        let cq = TestCq::new(&dev, 16, 0, &idle)?;
        post(cq.state(), 0, Kind::Unsolicited).map_err(|_| "post")?;
        post(cq.state(), 1, Kind::Unsolicited).map_err(|_| "post")?;
        // SAFETY: a kernel CQ.
        let shrink = unsafe { cq.state().resize(1, null_mut()) };
        let kept = cq.drain(&idle);
        drop(cq);
        if resized < 20 {
            return Err("fewer resizes succeeded than the growing ones");
        }
        if polled != total {
            pr_err!("polled {polled} of {total} completions across resizes\n");
            return Err("a completion was lost across a resize");
        }
        if disorder != 0 {
            return Err("a resize reordered completions");
        }
        if overlap != 0 {
            return Err("two callbacks ran at once");
        }
        if shrink.is_ok() || kept != 2 || idle.disorder.load(Ordering::SeqCst) != 0 {
            return Err("shrinking below the queued count succeeded or lost entries");
        }
        Ok(())
    }

    /// The callback runs on the CPU of the CQ's completion vector (A10).
    pub(crate) fn callback_on_vector_cpu() -> Result<(), &'static str> {
        let dev = TestDev::new()?;
        // SAFETY: a registered device.
        let vectors = unsafe { (*dev.0).num_comp_vectors } as u32;
        for vector in 0..vectors.min(4) {
            let c = Consumer::new(false);
            let cq = TestCq::new(&dev, 16, vector, &c)?;
            cq.notify(NEXT_COMP);
            post(cq.state(), 0, Kind::Unsolicited).map_err(|_| "post")?;
            cq.state().flush_callbacks();
            // SAFETY: plain function call.
            let want = unsafe { sys::rroce_helper_vector_cpu(vector) } as i32;
            let got = c.cpu.load(Ordering::SeqCst);
            drop(cq);
            if c.calls() != 1 {
                return Err("no callback");
            }
            if got != want {
                pr_err!("vector {vector}: callback on CPU {got}, want {want}\n");
                return Err("callback on another CPU than the completion vector's");
            }
        }
        Ok(())
    }

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
        const SEND_LEN: usize = 3000;
        const WRITE_LEN: usize = 4100;
        const READ_LEN: usize = 2500;
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
        let sent = wait_wcs(&cq_a, 3);
        let recvd = wait_wcs(&cq_b, 2);
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

        // ERR: posts complete flushed, in order.
        a.to_error()?;
        w_send.next = core::ptr::null_mut();
        w_send.__bindgen_anon_1.wr_id = 0xf1;
        if a.post_send(&w_send).0 != 0 {
            return Err("post_send to a QP in ERR was refused");
        }
        rw1.next = core::ptr::null_mut();
        if a.post_recv(&rw1).0 != 0 {
            return Err("post_recv to a QP in ERR was refused");
        }
        let flushed = wait_wcs(&cq_a, 2);
        if flushed.len() != 2
            || flushed
                .iter()
                .any(|w| w.status != ib_wc_status_IB_WC_WR_FLUSH_ERR)
        {
            return Err("posts to a QP in ERR did not complete flushed");
        }
        drop(a);
        drop(b);
        drop(cq_a);
        drop(cq_b);
        Ok(())
    }
}
