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

/// A kernel QP (RC unless made otherwise) created through the core,
/// destroyed on drop.
struct TestQp(*mut sys::ib_qp);

/// The affiliated events a QP's `event_handler` got.
struct QpEvents {
    /// `IB_EVENT_SQ_DRAINED` events.
    sq_drained: AtomicU32,
    /// `IB_EVENT_QP_LAST_WQE_REACHED` events.
    last_wqe: AtomicU32,
    /// Events raised in atomic context (interrupts or bottom halves off,
    /// as under the QP's lock), where the handler could not call verbs on
    /// the QP.
    atomic: AtomicU32,
}

impl QpEvents {
    const fn new() -> Self {
        Self {
            sq_drained: AtomicU32::new(0),
            last_wqe: AtomicU32::new(0),
            atomic: AtomicU32::new(0),
        }
    }

    /// Counts from zero again (the statics outlive a test run).
    fn clear(&self) {
        self.sq_drained.store(0, Ordering::SeqCst);
        self.last_wqe.store(0, Ordering::SeqCst);
        self.atomic.store(0, Ordering::SeqCst);
    }
}

/// A test QP's `event_handler`.
///
/// # Safety
///
/// `ev` is a valid event; `ctx` the `QpEvents` given at create.
unsafe extern "C" fn qp_event_handler(ev: *mut sys::ib_event, ctx: *mut c_void) {
    // SAFETY: per the function's contract; `QpEvents` is shared (atomics).
    let (ev, events) = unsafe { (&*ev, &*ctx.cast::<QpEvents>()) };
    // SAFETY: plain query of the current context.
    if unsafe { sys::rroce_helper_in_atomic_bh() } {
        events.atomic.fetch_add(1, Ordering::SeqCst);
    }
    if ev.event == sys::ib_event_type_IB_EVENT_SQ_DRAINED {
        events.sq_drained.fetch_add(1, Ordering::SeqCst);
    }
    if ev.event == sys::ib_event_type_IB_EVENT_QP_LAST_WQE_REACHED {
        events.last_wqe.fetch_add(1, Ordering::SeqCst);
    }
}

impl TestQp {
    fn new(pd: &TestPd, cq: &TestCq) -> Result<Self, &'static str> {
        Self::create(pd, cq, None, null_mut(), sys::ib_qp_type_IB_QPT_RC)
    }

    /// A QP whose affiliated events are counted in `events`.
    fn with_events(
        pd: &TestPd,
        cq: &TestCq,
        events: &'static QpEvents,
    ) -> Result<Self, &'static str> {
        Self::create(pd, cq, Some(events), null_mut(), sys::ib_qp_type_IB_QPT_RC)
    }

    /// A QP of `qp_type` whose affiliated events are counted in `events`,
    /// receiving from `srq` (null: its own receive queue).
    fn create(
        pd: &TestPd,
        cq: &TestCq,
        events: Option<&'static QpEvents>,
        srq: *mut sys::ib_srq,
        qp_type: sys::ib_qp_type,
    ) -> Result<Self, &'static str> {
        // SAFETY: all-zero is a valid `ib_qp_init_attr`.
        let mut init: sys::ib_qp_init_attr = unsafe { core::mem::zeroed() };
        if let Some(ev) = events {
            init.event_handler = Some(qp_event_handler);
            init.qp_context = core::ptr::from_ref(ev).cast_mut().cast();
        }
        init.send_cq = cq.0;
        init.recv_cq = cq.0;
        init.srq = srq;
        init.cap.max_send_wr = 16;
        init.cap.max_recv_wr = 16;
        init.cap.max_send_sge = 2;
        init.cap.max_recv_sge = 2;
        init.cap.max_inline_data = 64;
        init.sq_sig_type = sys::ib_sig_type_IB_SIGNAL_REQ_WR;
        init.qp_type = qp_type;
        // SAFETY: a live kernel PD; valid attributes.
        let qp = unsafe { sys::ib_create_qp_kernel(pd.0, &mut init, c"rroce_kunit".as_char_ptr()) };
        if bad_ptr(qp) {
            pr_err!("ib_create_qp: {}\n", qp as isize);
            return Err("ib_create_qp of a kernel QP failed");
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
    /// `sgid`), path MTU 1024, retransmission timeout 14 (67 ms).
    fn connect(&self, dest: u32, gid: &sys::ib_gid, sgid: u8) -> Result<(), &'static str> {
        self.connect_with(dest, gid, sgid, 14)
    }

    /// [`Self::connect`] with the retransmission timeout `timeout` (0: no
    /// timer, the QP never retransmits on its own).
    fn connect_with(
        &self,
        dest: u32,
        gid: &sys::ib_gid,
        sgid: u8,
        timeout: u8,
    ) -> Result<(), &'static str> {
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
        a.timeout = timeout;
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

/// A signaled send work request (`opcode`) of the one SGE `s`. The work
/// request points at `s`, which must outlive its posting.
fn send_wr(wr_id: u64, opcode: u32, s: &sys::ib_sge) -> sys::ib_send_wr {
    // SAFETY: all-zero is a valid `ib_send_wr`.
    let mut w: sys::ib_send_wr = unsafe { core::mem::zeroed() };
    w.__bindgen_anon_1.wr_id = wr_id;
    w.opcode = opcode;
    w.send_flags = sys::ib_send_flags_IB_SEND_SIGNALED;
    w.sg_list = core::ptr::from_ref(s).cast_mut();
    w.num_sge = 1;
    w
}

/// A receive work request of the one SGE `r`, which must outlive its
/// posting.
fn recv_wr(wr_id: u64, r: &sys::ib_sge) -> sys::ib_recv_wr {
    // SAFETY: all-zero is a valid `ib_recv_wr`.
    let mut w: sys::ib_recv_wr = unsafe { core::mem::zeroed() };
    w.__bindgen_anon_1.wr_id = wr_id;
    w.sg_list = core::ptr::from_ref(r).cast_mut();
    w.num_sge = 1;
    w
}

/// A signaled RDMA READ or WRITE (`opcode`) of the one SGE `s` at
/// `remote` under `rkey`. The work request points at `s`, which must
/// outlive its posting.
fn rdma_wr(wr_id: u64, opcode: u32, s: &sys::ib_sge, remote: u64, rkey: u32) -> sys::ib_rdma_wr {
    // SAFETY: all-zero is a valid `ib_rdma_wr`.
    let mut w: sys::ib_rdma_wr = unsafe { core::mem::zeroed() };
    w.wr = send_wr(wr_id, opcode, s);
    w.remote_addr = remote;
    w.rkey = rkey;
    w
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

mod cq;
mod devlife;
mod fastreg;
mod peer;
mod qplife;
mod rc;
mod ud;
mod wire;

/// The cases `crate::test::kunit` runs (suite `rroce_conformance`).
pub(crate) mod selftest {
    pub(crate) use super::cq::{
        callback_on_vector_cpu, concurrent_producers, fire_on_arm, overrun_is_fatal,
        resize_under_load, solicited_and_errors,
    };
    pub(crate) use super::devlife::entry_outlives_dealloc;
    pub(crate) use super::qplife::{
        last_wqe_event_outside_lock, qp_table_full, query_ah_returns_its_address,
        query_fills_every_field, rejected_modify_changes_nothing, requester_streams_hint,
        requester_waits_hint, reset_quiesces_qp,
    };
    pub(crate) use super::rc::{idle_qp_retries_after_no_memory, kernel_rc_qps};
    pub(crate) use super::ud::{ud_doorbell_failure_raises_last_wqe, ud_post_racing_sqd_sends};
}

/// The cases `crate::test::kunit` runs (suite `rroce_peer`).
pub(crate) mod peer_selftest {
    pub(crate) use super::peer::{
        dma_lkey_not_a_remote_key, dma_mr_bad_address, many_mrs, mr_keys_unpredictable,
        mr_table_full, send_with_invalidate_refused,
    };
    pub(crate) use super::wire::{
        ack_ends_rnr_wait, home_follows_an_idle_qps_poster, partly_sent_bad_wqe_resent,
        receive_leaves_requests_to_their_post, request_passes_held_responses,
        rnr_nak_silences_the_rest, sqd_applies_new_timeout, sqd_finishes_then_resumes,
        uc_counts_no_ack_requests,
    };
}

/// The cases `crate::test::kunit` runs (suite `rroce_frwr`).
pub(crate) mod frwr_selftest {
    pub(crate) use super::fastreg::{
        frwr_remote_invalidate, frwr_rules, frwr_write_read_local_inv,
    };
}
