// SPDX-License-Identifier: GPL-2.0

//! Queue pairs: objects, rings and the IB state machine.
//!
//! A user QP owns a send queue and (without an SRQ) a receive queue, each a
//! [`QueueBuf`] ring in the layout rdma-core's rxe provider writes
//! (`struct rroce_send_wqe` / `rroce_recv_wqe` elements) and mapped into the
//! process; the kernel is the consumer of both, through the engine's
//! [`Consumer`], which validates every producer index read from the shared
//! header. State transitions are checked with the RDMA core's
//! `ib_modify_qp_is_ok` (the IBTA table), attribute values against rroce's
//! limits.
//!
//! The RC transport (`crate::transport`) runs under the QP lock from the
//! send-queue doorbell, from received packets and from the QP's timer.
//! A UD QP's doorbell sends each WQE as one datagram; received datagrams
//! fill its receive WQEs (see the UD part of `crate::transport`).
//!
//! Kernel consumers get RC, UD and GSI QPs whose rings live in kernel
//! memory only: `post_send`/`post_recv` encode each work request into the
//! next ring slot exactly as librxe would (the kernel is then both producer
//! and consumer), so the transport copies and validates kernel and user
//! WQEs through the same path. Their SGEs may use the PD's DMA MR (kernel
//! virtual addresses). The GSI QP is QP 1, one per device, created by the
//! MAD layer; the RDMA CM exchanges its MADs over it.
//!
//! Locking: `QpState::inner` (IRQ-safe spinlock) protects the state, the
//! attributes, the ring indices and the transport; the ring buffers are
//! only allocated at create and freed at destroy. Packets are built under
//! the lock and sent after it is dropped, in order (`flush_tx`).

use core::{
    cell::UnsafeCell,
    mem::size_of,
    pin::Pin,
    sync::atomic::{AtomicBool, Ordering},
};

use kernel::{
    ffi::{c_int, c_void},
    new_spinlock_irq,
    prelude::*,
    sync::{rcu, SpinLockIrq, SpinLockIrqGuard},
};

use crate::{
    abi::Codec as _,
    ah::{av_from_attr, AddressVector},
    counters::Counter,
    dev::{limits, RroceDev},
    engine::{
        ring::{offset, Consumer, Layout, Producer, RingError, Slot},
        wire::{self, Direction, Transport},
    },
    net::Skb,
    rdma::{mmap::QueueBuf, sys},
    transport::{self, Ctx, Req, Resp, RespQueue, SendOp},
};

/// A ring buffer of at least `max_wr` elements of `elem` bytes, with its
/// consumer.
///
/// # Safety
///
/// `uctx` is null (a kernel QP) or the live ucontext of the creating
/// process.
unsafe fn new_ring(
    max_wr: u32,
    elem: usize,
    uctx: *mut sys::ib_ucontext,
) -> Result<(QueueBuf, Consumer, Layout)> {
    let layout = Layout::new(max_wr, elem).map_err(|_| EINVAL)?;
    // SAFETY: forwarded from the caller.
    let buf = unsafe { QueueBuf::new(layout.total_bytes(), uctx)? };
    buf.header_word(offset::LOG2_ELEM_SIZE)
        .store(layout.log2_elem_size(), Ordering::Relaxed);
    buf.header_word(offset::INDEX_MASK)
        .store(layout.index_mask(), Ordering::Relaxed);
    layout.init_indices(&buf, 0).map_err(|_| EINVAL)?;
    Ok((buf, Consumer::new(layout), layout))
}

/// The attributes `modify_qp` sets, as validated copies.
#[derive(Clone, Copy, Default)]
pub(crate) struct QpAttrs {
    pub(crate) path_mtu: sys::ib_mtu,
    pub(crate) qkey: u32,
    pub(crate) rq_psn: u32,
    pub(crate) sq_psn: u32,
    pub(crate) dest_qpn: u32,
    pub(crate) access: u32,
    pub(crate) pkey_index: u16,
    pub(crate) port: u32,
    pub(crate) max_rd_atomic: u8,
    pub(crate) max_dest_rd_atomic: u8,
    pub(crate) min_rnr_timer: u8,
    pub(crate) timeout: u8,
    pub(crate) retry_cnt: u8,
    pub(crate) rnr_retry: u8,
    pub(crate) av: Option<AddressVector>,
}

/// What the QP lock protects.
pub(crate) struct QpInner {
    pub(crate) state: sys::ib_qp_state,
    pub(crate) attrs: QpAttrs,
    /// Caps reported at create (the rounded-up ones).
    cap: sys::ib_qp_cap,
    /// Consumer side of the send and receive rings.
    pub(crate) sq: Consumer,
    pub(crate) rq: Consumer,
    /// Producer side of both rings, used by kernel QPs (`post_send` and
    /// `post_recv` with work requests); a user QP's process produces.
    sq_prod: Producer,
    rq_prod: Producer,
    pub(crate) req: Req,
    pub(crate) resp: Resp,
    /// Responses not yet built (see `RespQueue`).
    pub(crate) resp_q: RespQueue,
    /// Validated send WQEs, one per ring slot.
    pub(crate) ops: KVVec<SendOp>,
    /// Kernel copies of the send ring's slots (`sq_elem` bytes each).
    pub(crate) sq_shadow: KVVec<u8>,
    /// Kernel copy of the receive WQE being filled.
    pub(crate) rq_shadow: KVVec<u8>,
    /// Packets to send once the lock is dropped.
    pub(crate) tx: KVec<Skb>,
    /// Datagrams (each with its own address) left to the work item by a
    /// poster that had interrupts off.
    ud_tx: KVec<transport::Datagram>,
    /// Path MTU in bytes (RTR onwards).
    pub(crate) mtu: u32,
    /// UDP source port (from the QP numbers, for ECMP entropy).
    sport: u16,
    /// Set by `destroy_qp`: the transport no longer touches the QP.
    dead: bool,
}

/// A QP's state, shared with the transport.
///
/// # Invariants
///
/// `dev`, `pd`, `send_cq` and `recv_cq` are the QP's device, PD and CQs,
/// which outlive it (the RDMA core holds use counts on them). `timer` is
/// null or a timer whose callback receives this state, shut down before
/// the state is freed.
#[pin_data]
pub(crate) struct QpState {
    #[pin]
    pub(crate) inner: SpinLockIrq<QpInner>,
    qp_type: sys::ib_qp_type,
    pub(crate) qpn: u32,
    dev: *const RroceDev,
    pub(crate) pd: *mut sys::ib_pd,
    pub(crate) send_cq: *mut sys::ib_cq,
    pub(crate) recv_cq: *mut sys::ib_cq,
    pub(crate) sig_all: bool,
    /// The core's QP (for kernel completions' `ib_wc::qp`).
    pub(crate) ibqp: *mut sys::ib_qp,
    /// A kernel consumer's QP: its rings are not mapped anywhere, work
    /// requests come through `post_send`/`post_recv`, and its SGEs may use
    /// the PD's DMA MR.
    pub(crate) kernel: bool,
    pub(crate) sq_buf: QueueBuf,
    pub(crate) rq_buf: Option<QueueBuf>,
    pub(crate) sq_elem: usize,
    pub(crate) rq_elem: usize,
    pub(crate) sq_max_sge: u32,
    pub(crate) sq_max_inline: u32,
    pub(crate) rq_max_sge: u32,
    pub(crate) timer: *mut sys::rroce_timer,
    /// Someone is sending the packets in `QpInner::tx`.
    tx_busy: AtomicBool,
    /// Sends what softirq context left in `QpInner::tx` (initialized once
    /// the state is pinned, cancelled before it is freed).
    tx_work: UnsafeCell<sys::work_struct>,
}

// SAFETY: the raw pointers name objects that outlive the QP and are safe to
// use from any context (type invariant); everything mutable is behind the
// lock or atomic.
unsafe impl Sync for QpState {}
// SAFETY: as above.
unsafe impl Send for QpState {}

/// rroce's QP: the core allocates it (`size_ib_qp`).
///
/// # Invariants
///
/// `ibqp` is first, so the core's `*mut ib_qp` is a `*mut RroceQp`.
/// `state` is null until `create_qp` succeeds, then a pinned
/// `KBox<QpState>` leaked until `destroy_qp`. `qpn_index` is the QP
/// number's allocator index once created.
#[repr(C)]
pub(crate) struct RroceQp {
    ibqp: sys::ib_qp,
    state: *mut QpState,
}

/// QP numbers 0 and 1 are the special QPs; user QPs get 2 and up.
const FIRST_QPN: u32 = 2;

fn mask_has(mask: u32, bit: u32) -> bool {
    mask & bit != 0
}

/// QP access flags: which remote operations the responder allows. Unlike
/// MR access, remote write needs no local write here.
fn check_qp_access(access: u32) -> Result {
    let allowed = sys::ib_access_flags_IB_ACCESS_LOCAL_WRITE
        | sys::ib_access_flags_IB_ACCESS_REMOTE_WRITE
        | sys::ib_access_flags_IB_ACCESS_REMOTE_READ
        | sys::ib_access_flags_IB_ACCESS_REMOTE_ATOMIC;
    if access & !allowed != 0 {
        return Err(EINVAL);
    }
    Ok(())
}

/// Checks the create attributes (the caps are rroce's limits).
fn check_init(init: &sys::ib_qp_init_attr) -> Result {
    match init.qp_type {
        sys::ib_qp_type_IB_QPT_RC | sys::ib_qp_type_IB_QPT_UD | sys::ib_qp_type_IB_QPT_GSI => {}
        _ => return Err(EOPNOTSUPP),
    }
    if init.create_flags != 0 || !init.srq.is_null() || !init.xrcd.is_null() {
        return Err(EOPNOTSUPP);
    }
    if init.send_cq.is_null() || init.recv_cq.is_null() {
        return Err(EINVAL);
    }
    let c = &init.cap;
    if c.max_send_wr == 0
        || c.max_send_wr > limits::MAX_QP_WR
        || c.max_recv_wr > limits::MAX_QP_WR
        || c.max_send_sge > limits::MAX_SEND_SGE
        || c.max_recv_sge > limits::MAX_RECV_SGE
        || c.max_inline_data > crate::abi::MAX_INLINE_DATA
    {
        return Err(EINVAL);
    }
    Ok(())
}

/// The send WQE size and the caps it really gives: the SGE/inline area is
/// `max(sge * 16, inline)` bytes after the 208-byte header, and both caps
/// grow to fill it (librxe validates posts against the returned caps).
fn send_geometry(max_send_sge: u32, max_inline: u32) -> (usize, u32, u32) {
    let sge = size_of::<crate::abi::Sge>();
    let area = (max_send_sge as usize * sge).max(max_inline as usize);
    let max_sge = (area / sge) as u32;
    (
        size_of::<crate::abi::SendWqe>() + area,
        max_sge,
        area as u32,
    )
}

/// The receive WQE size for `max_recv_sge` SGEs.
fn recv_geometry(max_recv_sge: u32) -> usize {
    size_of::<crate::abi::RecvWqe>() + max_recv_sge.max(1) as usize * size_of::<crate::abi::Sge>()
}

/// The `create_qp` op (user RC and UD QPs).
///
/// # Safety
///
/// Called only by the RDMA core through rroce's `ib_device_ops`, with the
/// arguments that op's contract describes: live objects of an rroce device,
/// valid attribute and output pointers, and a udata that is null for kernel
/// callers.
pub(crate) unsafe extern "C" fn create_qp(
    ibqp: *mut sys::ib_qp,
    init: *mut sys::ib_qp_init_attr,
    udata: *mut sys::ib_udata,
) -> c_int {
    // SAFETY: the core passes a QP of our size, valid attributes and a
    // udata that is null for kernel callers.
    match unsafe { create(ibqp, init, udata) } {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// # Safety
///
/// As for [`create_qp`].
unsafe fn create(
    ibqp: *mut sys::ib_qp,
    init: *mut sys::ib_qp_init_attr,
    udata: *mut sys::ib_udata,
) -> Result {
    // SAFETY: valid per the caller.
    let init = unsafe { &mut *init };
    let kernel = udata.is_null();
    let uctx = if kernel {
        core::ptr::null_mut()
    } else {
        // The GSI QP belongs to the kernel's MAD layer.
        if init.qp_type == sys::ib_qp_type_IB_QPT_GSI {
            return Err(EINVAL);
        }
        // SAFETY: non-null, valid per the caller.
        let (inlen, outlen) = unsafe { ((*udata).inlen, (*udata).outlen) };
        // librxe passes no command data and expects `rroce_create_qp_resp`.
        if inlen != 0 || outlen < size_of::<crate::abi::CreateQpResp>() {
            return Err(EINVAL);
        }
        // SAFETY: the driver udata of this uverbs call.
        unsafe { sys::rroce_helper_udata_ucontext(udata) }
    };
    check_init(init)?;
    let (sq_elem, max_sge, max_inline) =
        send_geometry(init.cap.max_send_sge, init.cap.max_inline_data);
    // SAFETY: `uctx` is this process's live ucontext.
    let (sq_buf, sq, sq_layout) = unsafe { new_ring(init.cap.max_send_wr, sq_elem, uctx)? };
    let recv_wr = init.cap.max_recv_wr.max(1);
    let rq_max_sge = init.cap.max_recv_sge.max(1);
    let rq_elem = recv_geometry(init.cap.max_recv_sge);
    // SAFETY: as above.
    let (rq_buf, rq, rq_layout) = unsafe { new_ring(recv_wr, rq_elem, uctx)? };
    // Layouts may round the element size up; the shadows follow them.
    let sq_elem = sq_layout.elem_size();
    let rq_elem = rq_layout.elem_size();
    let slots = sq_layout.index_mask() as usize + 1;
    let mut ops = KVVec::with_capacity(slots, GFP_KERNEL)?;
    for _ in 0..slots {
        ops.push(SendOp::default(), GFP_KERNEL)?;
    }
    let sq_shadow = KVVec::from_elem(0u8, slots * sq_elem, GFP_KERNEL)?;
    let rq_shadow = KVVec::from_elem(0u8, rq_elem, GFP_KERNEL)?;
    let resp_q = RespQueue::new()?;

    // SAFETY: `ibqp` belongs to one of our devices.
    let dev = unsafe { RroceDev::from_ib((*ibqp).device) };
    let gsi = init.qp_type == sys::ib_qp_type_IB_QPT_GSI;
    let qpn = if gsi {
        // QP1, one per device (its one port).
        if dev.gsi_taken.swap(true, Ordering::AcqRel) {
            return Err(EBUSY);
        }
        1
    } else {
        dev.qp_ids.alloc().map_err(|_| ENOMEM)? + FIRST_QPN
    };
    let release = |dev: &RroceDev| {
        if gsi {
            dev.gsi_taken.store(false, Ordering::Release);
        } else {
            let _ = dev.qp_ids.free(qpn - FIRST_QPN);
        }
    };
    let cap = sys::ib_qp_cap {
        max_send_wr: sq_layout.capacity(),
        max_recv_wr: rq_layout.capacity(),
        max_send_sge: max_sge,
        max_recv_sge: rq_max_sge,
        max_inline_data: max_inline,
        max_rdma_ctxs: 0,
    };
    let resp = crate::abi::CreateQpResp {
        rq_mi: to_abi(rq_buf.mmap_info()),
        sq_mi: to_abi(sq_buf.mmap_info()),
    };
    let qp_type = init.qp_type;
    let (send_cq, recv_cq) = (init.send_cq, init.recv_cq);
    let sig_all = init.sq_sig_type == sys::ib_sig_type_IB_SIGNAL_ALL_WR;
    let state = match KBox::pin_init(
        pin_init!(QpState {
            inner <- new_spinlock_irq!(
                QpInner {
                    state: sys::ib_qp_state_IB_QPS_RESET,
                    attrs: QpAttrs::default(),
                    cap,
                    sq,
                    rq,
                    sq_prod: Producer::new(sq_layout),
                    rq_prod: Producer::new(rq_layout),
                    req: Req::default(),
                    resp: Resp::default(),
                    resp_q,
                    ops,
                    sq_shadow,
                    rq_shadow,
                    tx: KVec::new(),
                    ud_tx: KVec::new(),
                    mtu: 256,
                    sport: 0,
                    dead: false,
                },
                "rroce::qp"
            ),
            qp_type,
            qpn,
            dev: core::ptr::from_ref(dev),
            // SAFETY: `ibqp` is valid; the core set its PD.
            pd: unsafe { (*ibqp).pd },
            send_cq,
            recv_cq,
            sig_all,
            ibqp,
            kernel,
            sq_buf,
            rq_buf: Some(rq_buf),
            sq_elem,
            rq_elem,
            sq_max_sge: max_sge,
            sq_max_inline: max_inline,
            rq_max_sge,
            timer: core::ptr::null_mut(),
            tx_busy: AtomicBool::new(false),
            // SAFETY: an all-zero work_struct is a valid placeholder until
            // `INIT_WORK` below.
            tx_work: UnsafeCell::new(unsafe { core::mem::zeroed() }),
        }),
        GFP_KERNEL,
    ) {
        Ok(s) => s,
        Err(e) => {
            release(dev);
            return Err(e);
        }
    };
    if !kernel {
        let mut bytes = resp.to_bytes();
        // SAFETY: `bytes` is readable; `udata` is valid.
        let err = unsafe {
            sys::rroce_helper_copy_to_udata(udata, bytes.as_mut_ptr().cast(), bytes.len())
        };
        if err != 0 {
            release(dev);
            return Err(Error::from_errno(err));
        }
    }
    // SAFETY: we never move out of the box (pinned); it is leaked until
    // `destroy_qp`.
    let raw = KBox::into_raw(unsafe { Pin::into_inner_unchecked(state) });
    // SAFETY: `raw` is pinned and lives until `destroy_qp`, which frees the
    // timer first (type invariant of `QpState`).
    let timer = unsafe { sys::rroce_helper_timer_new(Some(timer_fn), raw.cast()) };
    if timer.is_null() {
        // SAFETY: not published anywhere yet.
        drop(unsafe { KBox::from_raw(raw) });
        release(dev);
        return Err(ENOMEM);
    }
    // SAFETY: not shared yet; the state is pinned, so the work item keeps
    // its address.
    unsafe {
        (*raw).timer = timer;
        sys::rroce_helper_init_work((*raw).tx_work.get(), Some(tx_work_fn));
    }
    // The caps really granted go back to the caller (rdma_rw's contexts
    // are the core's business).
    init.cap = sys::ib_qp_cap {
        max_rdma_ctxs: init.cap.max_rdma_ctxs,
        ..cap
    };
    // SAFETY: the core allocated `ibqp` with our size (type invariant).
    let qp = unsafe { &mut *ibqp.cast::<RroceQp>() };
    qp.ibqp.qp_num = qpn;
    // INVARIANT: leaked until `destroy_qp`; never moved (pinned).
    qp.state = raw;
    // Packets can find the QP from now on.
    let _ = dev.qps.set(qpn as usize, raw);
    Ok(())
}

fn to_abi(mi: crate::rdma::mmap::MmapInfo) -> crate::abi::MmapInfo {
    crate::abi::MmapInfo {
        offset: mi.offset,
        size: mi.size,
        pad: 0,
    }
}

impl RroceQp {
    /// # Safety
    ///
    /// `ibqp` is an rroce QP created successfully and not destroyed, alive
    /// for `'a`.
    unsafe fn state<'a>(ibqp: *mut sys::ib_qp) -> &'a QpState {
        // SAFETY: per the type invariant and the caller.
        unsafe { &*(*ibqp.cast::<RroceQp>()).state }
    }
}

/// The `modify_qp` op.
///
/// # Safety
///
/// Called only by the RDMA core through rroce's `ib_device_ops`, with the
/// arguments that op's contract describes: live objects of an rroce device,
/// valid attribute and output pointers, and a udata that is null for kernel
/// callers.
pub(crate) unsafe extern "C" fn modify_qp(
    ibqp: *mut sys::ib_qp,
    attr: *mut sys::ib_qp_attr,
    mask: c_int,
    _udata: *mut sys::ib_udata,
) -> c_int {
    // SAFETY: the core passes a live QP of ours and valid attributes.
    match unsafe { modify(ibqp, &*attr, mask as u32) } {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// # Safety
///
/// `ibqp` is a live rroce QP.
unsafe fn modify(ibqp: *mut sys::ib_qp, attr: &sys::ib_qp_attr, mask: u32) -> Result {
    // SAFETY: live QP per the caller.
    let state = unsafe { RroceQp::state(ibqp) };
    // Validate what does not need the lock, copying the AV out.
    if mask_has(mask, sys::ib_qp_attr_mask_IB_QP_PATH_MTU)
        && !(sys::ib_mtu_IB_MTU_256..=sys::ib_mtu_IB_MTU_4096).contains(&attr.path_mtu)
    {
        return Err(EINVAL);
    }
    if mask_has(mask, sys::ib_qp_attr_mask_IB_QP_MAX_QP_RD_ATOMIC)
        && u32::from(attr.max_rd_atomic) > limits::MAX_QP_INIT_RD_ATOM
    {
        return Err(EINVAL);
    }
    if mask_has(mask, sys::ib_qp_attr_mask_IB_QP_MAX_DEST_RD_ATOMIC)
        && u32::from(attr.max_dest_rd_atomic) > limits::MAX_QP_RD_ATOM
    {
        return Err(EINVAL);
    }
    if mask_has(mask, sys::ib_qp_attr_mask_IB_QP_PORT) && attr.port_num != 1 {
        return Err(EINVAL);
    }
    if mask_has(mask, sys::ib_qp_attr_mask_IB_QP_PKEY_INDEX) && attr.pkey_index != 0 {
        return Err(EINVAL);
    }
    if mask_has(mask, sys::ib_qp_attr_mask_IB_QP_ACCESS_FLAGS) {
        check_qp_access(attr.qp_access_flags as u32)?;
    }
    if (mask_has(mask, sys::ib_qp_attr_mask_IB_QP_RETRY_CNT) && attr.retry_cnt > 7)
        || (mask_has(mask, sys::ib_qp_attr_mask_IB_QP_RNR_RETRY) && attr.rnr_retry > 7)
        || (mask_has(mask, sys::ib_qp_attr_mask_IB_QP_TIMEOUT) && attr.timeout > 31)
        || (mask_has(mask, sys::ib_qp_attr_mask_IB_QP_MIN_RNR_TIMER) && attr.min_rnr_timer > 31)
    {
        return Err(EINVAL);
    }
    let av = if mask_has(mask, sys::ib_qp_attr_mask_IB_QP_AV) {
        // SAFETY: the core resolved the AV's source GID entry, which stays
        // referenced for the call.
        Some(unsafe { av_from_attr(&attr.ah_attr)? })
    } else {
        None
    };

    let mut inner = state.inner.lock();
    if inner.dead {
        return Err(EINVAL);
    }
    let cur = if mask_has(mask, sys::ib_qp_attr_mask_IB_QP_CUR_STATE) {
        attr.cur_qp_state
    } else {
        inner.state
    };
    let new = if mask_has(mask, sys::ib_qp_attr_mask_IB_QP_STATE) {
        attr.qp_state
    } else {
        cur
    };
    // SAFETY: pure function of its arguments.
    if !unsafe { sys::ib_modify_qp_is_ok(cur, new, state.qp_type, mask) } {
        return Err(EINVAL);
    }
    let a = &mut inner.attrs;
    let set = |bit| mask_has(mask, bit);
    if set(sys::ib_qp_attr_mask_IB_QP_PATH_MTU) {
        a.path_mtu = attr.path_mtu;
    }
    if set(sys::ib_qp_attr_mask_IB_QP_QKEY) {
        a.qkey = attr.qkey;
    }
    if set(sys::ib_qp_attr_mask_IB_QP_RQ_PSN) {
        a.rq_psn = attr.rq_psn & 0x00ff_ffff;
    }
    if set(sys::ib_qp_attr_mask_IB_QP_SQ_PSN) {
        a.sq_psn = attr.sq_psn & 0x00ff_ffff;
    }
    if set(sys::ib_qp_attr_mask_IB_QP_DEST_QPN) {
        a.dest_qpn = attr.dest_qp_num & 0x00ff_ffff;
    }
    if set(sys::ib_qp_attr_mask_IB_QP_ACCESS_FLAGS) {
        a.access = attr.qp_access_flags as u32;
    }
    if set(sys::ib_qp_attr_mask_IB_QP_PKEY_INDEX) {
        a.pkey_index = attr.pkey_index;
    }
    if set(sys::ib_qp_attr_mask_IB_QP_PORT) {
        a.port = attr.port_num;
    }
    if set(sys::ib_qp_attr_mask_IB_QP_MAX_QP_RD_ATOMIC) {
        a.max_rd_atomic = attr.max_rd_atomic;
    }
    if set(sys::ib_qp_attr_mask_IB_QP_MAX_DEST_RD_ATOMIC) {
        a.max_dest_rd_atomic = attr.max_dest_rd_atomic;
    }
    if set(sys::ib_qp_attr_mask_IB_QP_MIN_RNR_TIMER) {
        a.min_rnr_timer = attr.min_rnr_timer;
    }
    if set(sys::ib_qp_attr_mask_IB_QP_TIMEOUT) {
        a.timeout = attr.timeout;
    }
    if set(sys::ib_qp_attr_mask_IB_QP_RETRY_CNT) {
        a.retry_cnt = attr.retry_cnt;
    }
    if set(sys::ib_qp_attr_mask_IB_QP_RNR_RETRY) {
        a.rnr_retry = attr.rnr_retry;
    }
    if av.is_some() {
        a.av = av;
    }
    let old = inner.state;
    if new == sys::ib_qp_state_IB_QPS_RTR && old != new {
        if state.qp_type == sys::ib_qp_type_IB_QPT_RC && inner.attrs.av.is_none() {
            return Err(EINVAL);
        }
        // SAFETY: the device outlives its QPs (type invariant).
        let dev_mtu = unsafe { &*state.dev }.active_mtu();
        // A UD QP has no path MTU: its datagrams may fill the port's.
        let path_mtu = if state.is_ud() {
            dev_mtu
        } else {
            inner.attrs.path_mtu
        };
        inner.mtu = transport::mtu_bytes(path_mtu.min(dev_mtu).max(sys::ib_mtu_IB_MTU_256));
        let h = (state.qpn ^ inner.attrs.dest_qpn).wrapping_mul(0x9e37_79b9);
        inner.sport = 0xc000 | ((h >> 16) as u16 & 0x3fff);
    }
    inner.state = new;
    let guard = rcu::read_lock();
    state.ctx(&mut inner, &guard).on_state_change(old, new);
    drop(inner);
    state.flush_tx();
    Ok(())
}

/// The `query_qp` op.
///
/// # Safety
///
/// Called only by the RDMA core through rroce's `ib_device_ops`, with the
/// arguments that op's contract describes: live objects of an rroce device,
/// valid attribute and output pointers, and a udata that is null for kernel
/// callers.
pub(crate) unsafe extern "C" fn query_qp(
    ibqp: *mut sys::ib_qp,
    attr: *mut sys::ib_qp_attr,
    _mask: c_int,
    init: *mut sys::ib_qp_init_attr,
) -> c_int {
    // SAFETY: the core passes a live QP of ours and structs to fill.
    let (state, attr, init) = unsafe { (RroceQp::state(ibqp), &mut *attr, &mut *init) };
    let inner = state.inner.lock();
    let a = &inner.attrs;
    attr.qp_state = inner.state;
    attr.cur_qp_state = inner.state;
    attr.path_mtu = a.path_mtu;
    attr.qkey = a.qkey;
    attr.rq_psn = a.rq_psn;
    attr.sq_psn = a.sq_psn;
    attr.dest_qp_num = a.dest_qpn;
    attr.qp_access_flags = a.access as c_int;
    attr.pkey_index = a.pkey_index;
    attr.port_num = a.port;
    attr.max_rd_atomic = a.max_rd_atomic;
    attr.max_dest_rd_atomic = a.max_dest_rd_atomic;
    attr.min_rnr_timer = a.min_rnr_timer;
    attr.timeout = a.timeout;
    attr.retry_cnt = a.retry_cnt;
    attr.rnr_retry = a.rnr_retry;
    attr.cap = inner.cap;
    init.cap = inner.cap;
    init.qp_type = state.qp_type;
    init.sq_sig_type = sys::ib_sig_type_IB_SIGNAL_REQ_WR;
    0
}

/// The `destroy_qp` op.
///
/// # Safety
///
/// Called only by the RDMA core through rroce's `ib_device_ops`, with the
/// arguments that op's contract describes: live objects of an rroce device,
/// valid attribute and output pointers, and a udata that is null for kernel
/// callers.
pub(crate) unsafe extern "C" fn destroy_qp(
    ibqp: *mut sys::ib_qp,
    _udata: *mut sys::ib_udata,
) -> c_int {
    // SAFETY: the core passes one of our QPs, created successfully, after
    // its last use.
    let qp = unsafe { &mut *ibqp.cast::<RroceQp>() };
    if !qp.state.is_null() {
        // SAFETY: the QP belongs to one of our devices.
        let dev = unsafe { RroceDev::from_ib(qp.ibqp.device) };
        // SAFETY: live until freed below.
        let st = unsafe { &*qp.state };
        // No packet, doorbell or timer touches the QP after this: the
        // table entry goes, readers inside RCU sections finish, the timer
        // is shut down.
        st.inner.lock().dead = true;
        dev.qps.clear(qp.ibqp.qp_num as usize);
        // SAFETY: plain calls in process context; the timer was made for
        // this QP in `create`.
        unsafe {
            sys::rroce_helper_synchronize_rcu();
            sys::rroce_helper_timer_free(st.timer);
            sys::rroce_helper_cancel_work_sync(st.tx_work.get());
        }
        if qp.ibqp.qp_num == 1 {
            dev.gsi_taken.store(false, Ordering::Release);
        } else if dev.qp_ids.free(qp.ibqp.qp_num - FIRST_QPN).is_err() {
            pr_warn!("QP {} was not allocated\n", qp.ibqp.qp_num);
        }
        // SAFETY: leaked in `create` (type invariant); reclaimed once, after
        // its last user.
        drop(unsafe { KBox::from_raw(qp.state) });
        qp.state = core::ptr::null_mut();
    }
    0
}

/// The `post_send` op. For user QPs (a null `wr` list) it is librxe's
/// doorbell: WQEs are already in the mapped send queue.
///
/// # Safety
///
/// Called only by the RDMA core through rroce's `ib_device_ops`, with the
/// arguments that op's contract describes: live objects of an rroce device,
/// valid attribute and output pointers, and a udata that is null for kernel
/// callers.
pub(crate) unsafe extern "C" fn post_send(
    ibqp: *mut sys::ib_qp,
    wr: *const sys::ib_send_wr,
    bad_wr: *mut *const sys::ib_send_wr,
) -> c_int {
    // SAFETY: the core passes a live QP of ours.
    let state = unsafe { RroceQp::state(ibqp) };
    if !wr.is_null() || state.kernel {
        if !state.kernel {
            // A user QP's work requests are in its mapped ring.
            // SAFETY: `bad_wr` is the core's output pointer.
            return unsafe { post_result(Err(EINVAL), bad_wr, wr) };
        }
        // SAFETY: a kernel consumer's list of valid work requests.
        return unsafe { state.post_send_kernel(wr, bad_wr) };
    }
    let guard = rcu::read_lock();
    let mut inner = state.inner.lock();
    if inner.state < sys::ib_qp_state_IB_QPS_RTS && inner.state != sys::ib_qp_state_IB_QPS_ERR {
        // Posting before RTS is an immediate error (IB; NDKPI's
        // ND_CONNECTION_INVALID): the provider has already published the
        // WQEs, so they are discarded here, never run and never
        // completed; the QP stays usable. (rdma_rxe refuses the doorbell
        // but leaves them queued, and runs them once the QP reaches RTS.)
        if let Ok(n) = inner.sq.available(&state.sq_buf) {
            let _ = inner.sq.advance_by(n, &state.sq_buf);
        }
        return EINVAL.to_errno();
    }
    state.run_send_queue(inner, guard);
    0
}

/// The `post_recv` op: kernel QPs only (a user QP's process writes its
/// receive ring directly).
///
/// # Safety
///
/// Called only by the RDMA core through rroce's `ib_device_ops`, with the
/// arguments that op's contract describes: a live QP of an rroce device, a
/// list of valid work requests and a valid output pointer.
pub(crate) unsafe extern "C" fn post_recv(
    ibqp: *mut sys::ib_qp,
    wr: *const sys::ib_recv_wr,
    bad_wr: *mut *const sys::ib_recv_wr,
) -> c_int {
    // SAFETY: the core passes a live QP of ours.
    let state = unsafe { RroceQp::state(ibqp) };
    let guard = rcu::read_lock();
    let mut inner = state.inner.lock();
    let mut next = wr;
    let mut err = Ok(());
    if !state.kernel || inner.state == sys::ib_qp_state_IB_QPS_RESET {
        err = Err(EINVAL);
    }
    while err.is_ok() && !next.is_null() {
        // SAFETY: a kernel consumer's list of valid work requests.
        let w = unsafe { &*next };
        // SAFETY: as above, its SGE list too.
        err = unsafe { state.write_recv_wqe(&mut inner, w) };
        if err.is_ok() {
            next = w.next;
        }
    }
    if inner.state == sys::ib_qp_state_IB_QPS_ERR {
        // Receives posted to a QP in error complete flushed at once.
        state.ctx(&mut inner, &guard).flush_rq();
    }
    drop(inner);
    // SAFETY: `bad_wr` is the core's output pointer.
    unsafe { post_result(err, bad_wr, next) }
}

/// What a post returns: 0, or the errno with `*bad_wr` naming the first
/// request not posted.
///
/// # Safety
///
/// `bad_wr` is null or valid for writes.
unsafe fn post_result<T>(err: Result, bad_wr: *mut *const T, next: *const T) -> c_int {
    match err {
        Ok(()) => 0,
        Err(e) => {
            if !bad_wr.is_null() {
                // SAFETY: per the caller.
                unsafe { *bad_wr = next };
            }
            e.to_errno()
        }
    }
}

/// The total length of a kernel work request's SGEs.
fn kernel_sge_total(sges: &[sys::ib_sge]) -> Result<u32> {
    sges.iter()
        .try_fold(0u32, |t, s| t.checked_add(s.length))
        .ok_or(EINVAL)
}

/// Writes a kernel work request's SGEs as `struct rroce_sge`s into `elem`
/// from byte `off` on.
fn encode_kernel_sges(elem: &mut [u8], mut off: usize, sges: &[sys::ib_sge]) -> Result {
    for sge in sges {
        let e = crate::abi::Sge {
            addr: sge.addr,
            length: sge.length,
            lkey: sge.lkey,
        };
        e.encode(elem.get_mut(off..).ok_or(EINVAL)?).ok_or(EINVAL)?;
        off += size_of::<crate::abi::Sge>();
    }
    Ok(())
}

/// The next free slot of a kernel QP's ring, zeroed, for `prod` to commit
/// once written (`ENOMEM` if the ring is full).
///
/// # Safety
///
/// `buf` is a kernel QP's ring, mapped nowhere else and used only under the
/// QP lock, which the caller holds for as long as it uses the slice.
// The ring buffer is raw memory behind `QueueBuf`; the slot's exclusivity
// comes from the lock, as stated above, not from the borrow.
#[allow(clippy::mut_from_ref)]
unsafe fn kernel_slot<'b>(prod: &mut Producer, buf: &'b QueueBuf) -> Result<(Slot, &'b mut [u8])> {
    let slot = prod.reserve(buf).map_err(|e| match e {
        RingError::Full => ENOMEM,
        _ => EINVAL,
    })?;
    // SAFETY: the slot lies in the buffer; nothing else reads or writes it
    // while the caller holds the lock (caller).
    let elem = unsafe { core::slice::from_raw_parts_mut(buf.at(slot.offset()), slot.len()) };
    elem.fill(0);
    Ok((slot, elem))
}

/// The SGEs of a kernel work request.
///
/// # Safety
///
/// `sg_list` points to `num` valid SGEs (or `num` is 0).
unsafe fn kernel_sges<'a>(sg_list: *const sys::ib_sge, num: u32) -> &'a [sys::ib_sge] {
    if num == 0 || sg_list.is_null() {
        return &[];
    }
    // SAFETY: per the caller.
    unsafe { core::slice::from_raw_parts(sg_list, num as usize) }
}

impl QpState {
    /// A datagram QP: UD, or the GSI QP (UD to the MAD layer's peers).
    pub(crate) fn is_ud(&self) -> bool {
        self.qp_type == sys::ib_qp_type_IB_QPT_UD || self.qp_type == sys::ib_qp_type_IB_QPT_GSI
    }

    /// Posts a kernel consumer's send work requests: each is checked,
    /// encoded into the next send ring slot as librxe would write it (so
    /// the transport copies and validates it like any other WQE), then the
    /// requester runs.
    ///
    /// # Safety
    ///
    /// `wr` is null or the head of a list of valid work requests, each the
    /// `wr` member of the structure its opcode implies (`ib_rdma_wr`,
    /// `ib_atomic_wr`); `bad_wr` is null or valid for writes.
    unsafe fn post_send_kernel(
        &self,
        wr: *const sys::ib_send_wr,
        bad_wr: *mut *const sys::ib_send_wr,
    ) -> c_int {
        let guard = rcu::read_lock();
        let mut inner = self.inner.lock();
        let mut next = wr;
        let mut err = Ok(());
        if inner.state < sys::ib_qp_state_IB_QPS_RTS && inner.state != sys::ib_qp_state_IB_QPS_ERR {
            // Posting below RTS is an immediate error; nothing is queued.
            err = Err(EINVAL);
        }
        if self.is_ud()
            && inner.state != sys::ib_qp_state_IB_QPS_RTS
            && inner.state != sys::ib_qp_state_IB_QPS_ERR
        {
            // A kernel UD WQE holds the consumer's AH, valid only during
            // this call: it must be sent (RTS) or flushed (ERR) now.
            err = Err(EINVAL);
        }
        while err.is_ok() && !next.is_null() {
            // SAFETY: per the caller.
            err = unsafe { self.write_send_wqe(&mut inner, next) };
            if err.is_ok() {
                // SAFETY: per the caller.
                next = unsafe { (*next).next };
            }
        }
        // What was queued before a bad request still runs.
        self.run_send_queue(inner, guard);
        // SAFETY: `bad_wr` is null or valid (caller).
        unsafe { post_result(err, bad_wr, next) }
    }

    /// Runs the send queue after new WQEs were published and sends what
    /// it built: the RC requester under the lock held in `inner`, the UD
    /// sender in bounded batches of its own.
    fn run_send_queue(&self, mut inner: SpinLockIrqGuard<'_, QpInner>, guard: rcu::Guard) {
        if self.is_ud() {
            drop(inner);
            drop(guard);
            self.run_ud();
        } else {
            self.ctx(&mut inner, &guard).run_requester();
            drop(inner);
            self.flush_tx();
        }
    }

    /// Encodes one kernel send work request into the send ring.
    ///
    /// # Safety
    ///
    /// As for [`Self::post_send_kernel`], for the single request `wr`.
    unsafe fn write_send_wqe(&self, inner: &mut QpInner, wr: *const sys::ib_send_wr) -> Result {
        use crate::abi::{self as a, WrUnion};
        // SAFETY: a valid work request per the caller.
        let w = unsafe { &*wr };
        let flags = w.send_flags as u32;
        let num_sge = u32::try_from(w.num_sge).map_err(|_| EINVAL)?;
        let inline = flags & a::SEND_INLINE != 0;
        let union = match w.opcode {
            sys::ib_wr_opcode_IB_WR_SEND | sys::ib_wr_opcode_IB_WR_SEND_WITH_IMM
                if self.is_ud() =>
            {
                // SAFETY: on a UD or GSI QP a SEND is the head of an
                // `ib_ud_wr` (the caller's contract).
                let u = unsafe { &*wr.cast::<sys::ib_ud_wr>() };
                if u.ah.is_null() {
                    return Err(EINVAL);
                }
                // The AH itself rides in the WQE: this ring is kernel
                // memory, and the datagram is built before `post_send`
                // returns, while the consumer holds the AH.
                let p = u.ah as usize as u64;
                WrUnion::from_ud(&a::WrUd {
                    remote_qpn: u.remote_qpn,
                    remote_qkey: u.remote_qkey,
                    pad: [p as u32, (p >> 32) as u32, 0, 0],
                    ..Default::default()
                })
            }
            _ if self.is_ud() => return Err(EINVAL),
            sys::ib_wr_opcode_IB_WR_SEND
            | sys::ib_wr_opcode_IB_WR_SEND_WITH_IMM
            | sys::ib_wr_opcode_IB_WR_SEND_WITH_INV => WrUnion::default(),
            sys::ib_wr_opcode_IB_WR_RDMA_WRITE
            | sys::ib_wr_opcode_IB_WR_RDMA_WRITE_WITH_IMM
            | sys::ib_wr_opcode_IB_WR_RDMA_READ => {
                // SAFETY: for these opcodes `wr` is the head of an
                // `ib_rdma_wr` (the caller's contract).
                let r = unsafe { &*wr.cast::<sys::ib_rdma_wr>() };
                WrUnion::from_rdma(&a::WrRdma {
                    remote_addr: r.remote_addr,
                    rkey: r.rkey,
                    reserved: 0,
                })
            }
            sys::ib_wr_opcode_IB_WR_ATOMIC_CMP_AND_SWP
            | sys::ib_wr_opcode_IB_WR_ATOMIC_FETCH_AND_ADD => {
                // SAFETY: for these opcodes `wr` is the head of an
                // `ib_atomic_wr`.
                let r = unsafe { &*wr.cast::<sys::ib_atomic_wr>() };
                WrUnion::from_atomic(&a::WrAtomic {
                    remote_addr: r.remote_addr,
                    compare_add: r.compare_add,
                    swap: r.swap,
                    rkey: r.rkey,
                    reserved: 0,
                })
            }
            _ => return Err(EINVAL),
        };
        let is_atomic = matches!(
            w.opcode,
            sys::ib_wr_opcode_IB_WR_ATOMIC_CMP_AND_SWP
                | sys::ib_wr_opcode_IB_WR_ATOMIC_FETCH_AND_ADD
        );
        if (inline && (is_atomic || w.opcode == sys::ib_wr_opcode_IB_WR_RDMA_READ))
            || (!inline && num_sge > self.sq_max_sge)
        {
            return Err(EINVAL);
        }
        // SAFETY: the request's `num_sge` SGEs (caller).
        let sges = unsafe { kernel_sges(w.sg_list, num_sge) };
        let total = kernel_sge_total(sges)?;
        if inline && total > self.sq_max_inline {
            return Err(EINVAL);
        }
        // SAFETY: a kernel QP's ring; the caller holds the QP lock.
        let (slot, elem) = unsafe { kernel_slot(&mut inner.sq_prod, &self.sq_buf)? };
        let wqe = a::SendWqe {
            wr: a::SendWr {
                // SAFETY: both union members are plain 64-bit values.
                wr_id: unsafe { w.__bindgen_anon_1.wr_id },
                reserved: 0,
                opcode: w.opcode,
                send_flags: flags,
                // SAFETY: both members are 32-bit plain values; the raw
                // memory value is what the WQE carries.
                ex: unsafe { w.ex.invalidate_rkey },
                wr: union,
            },
            dma: a::DmaInfo {
                length: total,
                resid: total,
                num_sge: if inline { 0 } else { num_sge },
                ..Default::default()
            },
            ..Default::default()
        };
        wqe.encode(elem).ok_or(EINVAL)?;
        if inline {
            let mut off = a::SEND_WQE_HEADER_SIZE;
            for sge in sges.iter().filter(|s| s.length != 0) {
                let n = sge.length as usize;
                let dst = elem.get_mut(off..off + n).ok_or(EINVAL)?;
                // SAFETY: a kernel consumer's inline SGE names `length`
                // readable bytes at the kernel virtual address `addr`.
                let src = unsafe { core::slice::from_raw_parts(sge.addr as usize as *const u8, n) };
                dst.copy_from_slice(src);
                off += n;
            }
        } else {
            encode_kernel_sges(elem, a::SEND_WQE_HEADER_SIZE, sges)?;
        }
        inner.sq_prod.commit(slot, &self.sq_buf).map_err(|_| EINVAL)
    }

    /// Encodes one kernel receive work request into the receive ring.
    ///
    /// # Safety
    ///
    /// `w.sg_list` points to `w.num_sge` valid SGEs (a kernel consumer's
    /// request).
    unsafe fn write_recv_wqe(&self, inner: &mut QpInner, w: &sys::ib_recv_wr) -> Result {
        use crate::abi as a;
        let rq_buf = self.rq_buf.as_ref().ok_or(EINVAL)?;
        let num_sge = u32::try_from(w.num_sge).map_err(|_| EINVAL)?;
        if num_sge > self.rq_max_sge {
            return Err(EINVAL);
        }
        // SAFETY: per the function's contract.
        let sges = unsafe { kernel_sges(w.sg_list, num_sge) };
        let total = kernel_sge_total(sges)?;
        // SAFETY: a kernel QP's ring; the caller holds the QP lock.
        let (slot, elem) = unsafe { kernel_slot(&mut inner.rq_prod, rq_buf)? };
        let wqe = a::RecvWqe {
            // SAFETY: both union members are plain 64-bit values.
            wr_id: unsafe { w.__bindgen_anon_1.wr_id },
            dma: a::DmaInfo {
                length: total,
                resid: total,
                num_sge,
                ..Default::default()
            },
            ..Default::default()
        };
        wqe.encode(elem).ok_or(EINVAL)?;
        encode_kernel_sges(elem, a::RECV_WQE_HEADER_SIZE, sges)?;
        inner.rq_prod.commit(slot, rq_buf).map_err(|_| EINVAL)
    }
}

impl QpState {
    /// The transport of this QP, entered with its lock held (`inner`)
    /// inside the RCU read-side section `guard`.
    fn ctx<'a>(&'a self, inner: &'a mut QpInner, guard: &'a rcu::Guard) -> Ctx<'a> {
        // SAFETY: the device outlives its QPs (type invariant).
        let dev = unsafe { &*self.dev };
        Ctx {
            qp: self,
            inner,
            dev,
            ndev: dev.netdev(guard),
            rcu: guard,
        }
    }

    /// Sends the queued packets, in order: one context at a time drains
    /// the queue, others leave their packets to it.
    /// Runs the UD sender until the send queue is empty, a bounded batch
    /// per lock hold, sending each batch with the lock dropped.
    fn run_ud(&self) {
        loop {
            let mut out = KVec::new();
            let more = {
                let guard = rcu::read_lock();
                let mut inner = self.inner.lock();
                self.ctx(&mut inner, &guard)
                    .run_ud_sender(&mut out, UD_BATCH)
            };
            self.send_datagrams(out);
            if !more {
                return;
            }
        }
    }

    /// Sends UD datagrams built under the lock (`run_ud_sender`), each to
    /// its own address vector.
    fn send_datagrams(&self, out: KVec<transport::Datagram>) {
        if out.is_empty() {
            return;
        }
        // SAFETY: plain query of the current context.
        if unsafe { sys::rroce_helper_irqs_off() } {
            // The IP stack may not run here: the work item sends them.
            let mut inner = self.inner.lock();
            for d in out {
                // Without memory a datagram is lost, as on the wire.
                let _ = inner.ud_tx.push(d, GFP_ATOMIC);
            }
            drop(inner);
            // SAFETY: initialized at create; cancelled before the state is
            // freed.
            unsafe { sys::rroce_helper_queue_work(self.tx_work.get()) };
            return;
        }
        // SAFETY: the device outlives its QPs (type invariant).
        let counters = unsafe { &(*self.dev).counters };
        let sport = {
            let h = self.qpn.wrapping_mul(0x9e37_79b9);
            0xc000 | ((h >> 16) as u16 & 0x3fff)
        };
        for (skb, av) in out {
            let _ = skb.send(&av, sport, counters);
        }
    }

    pub(crate) fn flush_tx(&self) {
        // With bottom halves off, a veth peer only queues what we send (up
        // to netdev_max_backlog) and a burst (a large READ's responses)
        // would be dropped: send a budget, leave the rest to the work item,
        // which sends with bottom halves on so the receiver keeps up.
        // SAFETY: plain query of the current context.
        let mut budget = if unsafe { sys::rroce_helper_irqs_off() } {
            // Nothing may be sent with interrupts off: all to the work item.
            0
        // SAFETY: as above.
        } else if unsafe { sys::rroce_helper_in_atomic_bh() } {
            TX_BUDGET_ATOMIC
        } else {
            usize::MAX
        };
        loop {
            if self.tx_busy.swap(true, Ordering::Acquire) {
                return;
            }
            let mut deferred = false;
            loop {
                let (batch, av, sport) = {
                    let mut inner = self.inner.lock();
                    if inner.tx.is_empty() {
                        break;
                    }
                    if budget == 0 {
                        deferred = true;
                        break;
                    }
                    (core::mem::take(&mut inner.tx), inner.attrs.av, inner.sport)
                };
                // SAFETY: the device outlives its QPs (type invariant).
                let counters = unsafe { &(*self.dev).counters };
                let mut rest = KVec::new();
                for skb in batch {
                    if budget == 0 {
                        // Out of memory here drops the packet; the peer's
                        // retransmission logic recovers it.
                        let _ = rest.push(skb, GFP_ATOMIC);
                        continue;
                    }
                    budget -= 1;
                    match av.as_ref() {
                        Some(av) => {
                            let _ = skb.send(av, sport, counters);
                        }
                        None => drop(skb),
                    }
                }
                if !rest.is_empty() {
                    let mut inner = self.inner.lock();
                    for skb in inner.tx.drain_all() {
                        let _ = rest.push(skb, GFP_ATOMIC);
                    }
                    inner.tx = rest;
                }
            }
            self.tx_busy.store(false, Ordering::Release);
            let (more_tx, more_resp) = {
                let inner = self.inner.lock();
                (!inner.tx.is_empty(), !inner.resp_q.is_empty())
            };
            // READ responses still to build: the work item does it.
            if deferred || more_resp {
                // SAFETY: initialized at create; cancelled before the state
                // is freed.
                unsafe { sys::rroce_helper_queue_work(self.tx_work.get()) };
                return;
            }
            if !more_tx {
                return;
            }
        }
    }
}

/// Datagrams the UD sender builds per hold of the QP lock.
const UD_BATCH: usize = 32;

/// Packets one softirq-context flush sends before it defers to the work item.
const TX_BUDGET_ATOMIC: usize = 64;

/// The QP's transmit work item: sends what softirq context deferred.
///
/// # Safety
///
/// Called by the workqueue with the `tx_work` field of a live, pinned
/// `QpState` (destroy cancels the work item before freeing it).
unsafe extern "C" fn tx_work_fn(work: *mut sys::work_struct) {
    // SAFETY: per the function's contract.
    let state = unsafe {
        &*work
            .byte_sub(core::mem::offset_of!(QpState, tx_work))
            .cast::<QpState>()
    };
    // SAFETY: the device outlives its QPs (type invariant).
    let dev = unsafe { &*state.dev };
    loop {
        {
            let guard = rcu::read_lock();
            let ndev = dev.netdev(&guard);
            let mut inner = state.inner.lock();
            if ndev.is_null() || inner.dead {
                // The netdev or the QP is going away: nothing more is sent.
                drop(core::mem::take(&mut inner.tx));
                drop(core::mem::take(&mut inner.ud_tx));
                return;
            }
            state
                .ctx(&mut inner, &guard)
                .pump_responses(WORK_RESP_BURST);
        }
        let datagrams = core::mem::take(&mut state.inner.lock().ud_tx);
        state.send_datagrams(datagrams);
        state.flush_tx();
        let inner = state.inner.lock();
        if inner.resp_q.is_empty() && inner.tx.is_empty() && inner.ud_tx.is_empty() {
            return;
        }
    }
}

/// READ response packets the work item builds between sends.
const WORK_RESP_BURST: u32 = 256;

/// The QP timer's callback (softirq context).
///
/// # Safety
///
/// `ctx` is the `QpState` the timer was made for, alive until the timer is
/// shut down (type invariant of `QpState`).
unsafe extern "C" fn timer_fn(ctx: *mut c_void) {
    // SAFETY: per the function's contract.
    let state = unsafe { &*ctx.cast::<QpState>() };
    let guard = rcu::read_lock();
    let mut inner = state.inner.lock();
    if inner.dead {
        return;
    }
    state.ctx(&mut inner, &guard).on_timer();
    drop(inner);
    state.flush_tx();
}

/// A RoCEv2 packet (BTH through ICRC, ICRC already checked) received by
/// `dev` from `src` (softirq context).
pub(crate) fn receive(dev: &RroceDev, roce: &[u8], l3: &[u8]) {
    let Ok(pkt) = wire::parse(roce, None) else {
        dev.counters.inc(Counter::Malformed);
        return;
    };
    let info = pkt.info();
    let ud = match info.transport {
        Transport::Rc => false,
        Transport::Ud => true,
        _ => {
            // UC and XRC are not offered.
            dev.counters.inc(Counter::NoQp);
            return;
        }
    };
    let guard = rcu::read_lock();
    let qpn = pkt.bth().dest_qpn;
    let Some(state) = dev
        .qps
        .get(qpn as usize, &guard)
        .filter(|s| s.is_ud() == ud)
    else {
        dev.counters.inc(Counter::NoQp);
        return;
    };
    let mut inner = state.inner.lock();
    if !inner.dead {
        let mut ctx = state.ctx(&mut inner, &guard);
        match (ud, info.direction) {
            (true, Direction::Request) => ctx.on_datagram(&pkt, l3),
            (true, _) => {}
            (false, Direction::Request) => ctx.on_request(&pkt, 0),
            (false, Direction::Response) => ctx.on_response(&pkt),
            (false, Direction::Notification) => {}
        }
    }
    drop(inner);
    state.flush_tx();
}

/// Moves every QP of `dev` that completes into `ibcq` to the error state:
/// the CQ overran and is dead, so (NDKPI) its queue pairs are unusable too.
/// Their flushed requests still complete into their other CQ, if alive.
/// Process context, no QP lock held.
pub(crate) fn fail_qps_on_cq(dev: &RroceDev, ibcq: *mut sys::ib_cq) {
    let guard = rcu::read_lock();
    for qpn in 0..dev.qps.len() {
        let Some(state) = dev.qps.get(qpn, &guard) else {
            continue;
        };
        if state.send_cq != ibcq && state.recv_cq != ibcq {
            continue;
        }
        let mut inner = state.inner.lock();
        if !inner.dead && inner.state != sys::ib_qp_state_IB_QPS_ERR {
            pr_debug!(
                "qp {}: its CQ overran, moving to the error state\n",
                state.qpn
            );
            state.ctx(&mut inner, &guard).enter_error();
        }
        drop(inner);
        state.flush_tx();
    }
}

/// Checks run by KUnit.
pub(crate) mod selftest {
    /// WQE geometry grows the caps to fill the element, as librxe expects.
    pub(crate) fn wqe_geometry() -> Result<(), &'static str> {
        let (size, sge, inline) = super::send_geometry(4, 0);
        if size != 208 + 64 || sge != 4 || inline != 64 {
            return Err("send WQE geometry for 4 SGEs is wrong");
        }
        let (size, sge, inline) = super::send_geometry(1, 220);
        if size != 208 + 220 || sge != 13 || inline != 220 {
            return Err("inline data must widen the SGE cap");
        }
        if super::recv_geometry(2) != 40 + 32 || super::recv_geometry(0) != 40 + 16 {
            return Err("receive WQE geometry is wrong");
        }
        use crate::rdma::sys;
        let rw = sys::ib_access_flags_IB_ACCESS_REMOTE_WRITE;
        if super::check_qp_access(rw | sys::ib_access_flags_IB_ACCESS_REMOTE_READ).is_err()
            || super::check_qp_access(sys::ib_access_flags_IB_ACCESS_MW_BIND).is_ok()
        {
            return Err("QP access flag rules are wrong");
        }
        Ok(())
    }
}
