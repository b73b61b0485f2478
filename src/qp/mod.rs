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
//! the lock and sent after it is dropped, in order per lane (`flush_tx`:
//! requests and responses are sent independently).
//!
//! The transport owns the types of what it works on
//! (`crate::transport::QpFixed`, `TransportState`, `QpAttrs`); the QP
//! object embeds them (`QpState::fixed`, `QpInner::t`) and lends them to
//! the transport as a `Ctx`, so calls point one way: QP to transport.
//!
//! The `ib_device_ops` entry points are in `crate::verbs::qp`; they turn
//! the core's raw pointers into the types used here. `post.rs` encodes a
//! kernel consumer's work requests, `tx.rs` runs the send queue and sends
//! what the transport built; received packets come through `crate::recv`.

mod lanes;
mod modify;
mod post;
mod tx;

pub(crate) use tx::kicked;

use core::{
    cell::UnsafeCell,
    mem::size_of,
    pin::Pin,
    sync::atomic::{AtomicBool, AtomicU32, Ordering},
};

use kernel::{
    new_spinlock_irq,
    prelude::*,
    sync::{rcu, SpinLockIrq},
};

use crate::{
    dev::{limits, RroceDev},
    engine::{
        handover::{Doorbells, RoleState},
        ring::{offset, Consumer, Layout, Producer},
        wire::Transport,
    },
    rdma::{mmap::QueueBuf, sys},
    transport::{self, Ctx, Lane, QpAttrs, QpFixed, Req, Resp, RespQueue, SendOp, TransportState},
};

pub(crate) use modify::check_modify;
pub(crate) use post::{write_recv, RecvWr, Remote, SendWr, WrList};

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

/// What the QP lock protects.
pub(crate) struct QpInner {
    /// The transport's part: the IB state, the attributes, the ring
    /// consumers, the requester and responder, the packets to send.
    pub(crate) t: TransportState,
    /// Caps reported at create (the rounded-up ones).
    cap: sys::ib_qp_cap,
    /// Producer side of both rings, used by kernel QPs (`post_send` and
    /// `post_recv` with work requests); a user QP's process produces.
    sq_prod: Producer,
    rq_prod: Producer,
    /// Datagrams (each with its own address) left to the work item by a
    /// poster that had interrupts off.
    ud_tx: KVec<transport::Datagram>,
    /// UDP source port (from the QP numbers, for ECMP entropy).
    sport: u16,
    /// Set by `destroy_qp`: the transport no longer touches the QP.
    dead: bool,
    /// A user QP's doorbells, told apart (`engine::handover::Doorbells`):
    /// a small stream's, and whether the process streams at all
    /// (`QpFixed::req_streams`).
    doorbells: Doorbells,
}

/// A QP's state: the transport's parts (`fixed`, and `inner.t` under the
/// lock) and what only the QP object uses.
///
/// # Invariants
///
/// `dev` is the QP's device, which outlives it (the RDMA core holds a use
/// count on it). `fixed.timer` is null or a timer whose callback receives
/// this state, shut down before the state is freed.
#[pin_data]
pub(crate) struct QpState {
    #[pin]
    pub(crate) inner: SpinLockIrq<QpInner>,
    qp_type: sys::ib_qp_type,
    dev: *const RroceDev,
    /// What the transport reads and nobody changes after create.
    pub(crate) fixed: QpFixed,
    /// Who sends the packets of `TransportState::tx` (requests), one
    /// context at a time, and that sender's spare vector
    /// (`lanes::LaneSender`).
    tx_lane: lanes::LaneSender,
    /// The same for `TransportState::rtx` (responses).
    rtx_lane: lanes::LaneSender,
    /// The CPU the QP's requests last left from (`u32::MAX`: none yet);
    /// they keep leaving from it while some are in flight
    /// (`tx::QpState::send_queued`).
    tx_home: AtomicU32,
    /// The CPU whose receive thread `tx_node` was last queued to.
    tx_kick_cpu: AtomicU32,
    /// Links the QP into a receive thread's list of transmits to run
    /// (`tx::QpState::kick_home`) while `tx_kicked` is set.
    tx_node: UnsafeCell<sys::llist_node>,
    /// `tx_node` is on a receive thread's list.
    tx_kicked: AtomicBool,
    /// The QP was ever kicked to a receive thread (destroy waits for the
    /// threads only then).
    tx_kicks: AtomicBool,
    /// Per receive role (`engine::handover::Role`), its received packets
    /// handed to a receive thread and not yet processed (`crate::recv`).
    pub(crate) rx: [RoleState; 2],
    /// Packets the QP may still send (`u32::MAX`: no limit); a test holds
    /// a QP's transmit with it, mid-message (`QpState::hold_tx_after`).
    #[cfg(CONFIG_KUNIT)]
    pub(crate) tx_gate: AtomicU32,
    /// The next post builds its requests and returns without sending
    /// them (`QpState::leave_unsent`).
    #[cfg(CONFIG_KUNIT)]
    tx_unsent: AtomicBool,
    /// What the next UD post does between writing its WQEs and sending
    /// them (`QpState::sqd_in_ud_post`, `QpState::corrupt_in_ud_post`):
    /// 0 nothing, [`tx::UD_POST_SQD`], [`tx::UD_POST_CORRUPT`].
    #[cfg(CONFIG_KUNIT)]
    ud_post_hook: AtomicU32,
    /// Sends what softirq context left in `TransportState::tx`
    /// (initialized once the state is pinned, cancelled before it is
    /// freed).
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
/// `ibqp` is first, so the core's `*mut ib_qp` is a `*mut RroceQp`; the
/// core allocated it for one of rroce's devices (`ibqp.device`).
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

/// Checks what a process asks for before anything is allocated: the GSI
/// QP belongs to the kernel's MAD layer, and librxe passes no command data
/// and expects `rroce_create_qp_resp` (`inlen`, `outlen` of its udata).
pub(crate) fn check_user_create(
    init: &sys::ib_qp_init_attr,
    inlen: usize,
    outlen: usize,
) -> Result {
    if init.qp_type == sys::ib_qp_type_IB_QPT_GSI {
        return Err(EINVAL);
    }
    if inlen != 0 || outlen < size_of::<crate::abi::CreateQpResp>() {
        return Err(EINVAL);
    }
    Ok(())
}

/// Checks the create attributes (the caps are rroce's limits).
fn check_init(init: &sys::ib_qp_init_attr) -> Result {
    match init.qp_type {
        sys::ib_qp_type_IB_QPT_RC
        | sys::ib_qp_type_IB_QPT_UC
        | sys::ib_qp_type_IB_QPT_UD
        | sys::ib_qp_type_IB_QPT_GSI => {}
        _ => return Err(EOPNOTSUPP),
    }
    if init.create_flags != 0 || !init.xrcd.is_null() {
        return Err(EOPNOTSUPP);
    }
    if !init.srq.is_null() && init.qp_type == sys::ib_qp_type_IB_QPT_GSI {
        return Err(EINVAL);
    }
    if init.send_cq.is_null() || init.recv_cq.is_null() {
        return Err(EINVAL);
    }
    let c = &init.cap;
    if c.max_send_wr == 0
        || c.max_send_wr > limits::MAX_QP_WR
        || (init.srq.is_null() && c.max_recv_wr > limits::MAX_QP_WR)
        || c.max_send_sge > limits::MAX_SEND_SGE
        || (init.srq.is_null() && c.max_recv_sge > limits::MAX_RECV_SGE)
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

/// The rings of a new QP, and the kernel copies the transport keeps of
/// their elements.
struct Rings {
    sq_buf: QueueBuf,
    sq: Consumer,
    sq_layout: Layout,
    /// None for a QP on an SRQ (it takes its receive WQEs from there).
    rq_buf: Option<QueueBuf>,
    rq: Consumer,
    rq_layout: Layout,
    max_sge: u32,
    max_inline: u32,
    rq_max_sge: u32,
    ops: KVVec<SendOp>,
    sq_shadow: KVVec<u8>,
    rq_shadow: KVVec<u8>,
    resp_q: RespQueue,
}

impl Rings {
    /// Allocates the rings for the (checked) caps `cap`: no receive ring
    /// on an SRQ (`srq`), whose WQEs the QP copies instead.
    ///
    /// # Safety
    ///
    /// `uctx` is null (a kernel QP) or the live ucontext of the creating
    /// process.
    unsafe fn new(
        cap: &sys::ib_qp_cap,
        uctx: *mut sys::ib_ucontext,
        srq: Option<&crate::srq::SrqState>,
    ) -> Result<Self> {
        let (sq_elem, max_sge, max_inline) = send_geometry(cap.max_send_sge, cap.max_inline_data);
        // SAFETY: `uctx` is this process's live ucontext (caller).
        let (sq_buf, sq, sq_layout) = unsafe { new_ring(cap.max_send_wr, sq_elem, uctx)? };
        let (rq_buf, rq, rq_layout, rq_max_sge) = match srq {
            Some(s) => {
                // No ring: a placeholder consumer nobody uses, and the
                // SRQ's WQE geometry for the shadow.
                let l = Layout::new(1, s.elem()).map_err(|_| EINVAL)?;
                (None, Consumer::new(l), l, s.max_sge())
            }
            None => {
                let recv_wr = cap.max_recv_wr.max(1);
                let rq_elem = recv_geometry(cap.max_recv_sge);
                // SAFETY: as above.
                let (buf, rq, layout) = unsafe { new_ring(recv_wr, rq_elem, uctx)? };
                (Some(buf), rq, layout, cap.max_recv_sge.max(1))
            }
        };
        // Layouts may round the element size up; the shadows follow them.
        let sq_elem = sq_layout.elem_size();
        let rq_elem = rq_layout.elem_size();
        let slots = sq_layout.index_mask() as usize + 1;
        // Sized by the caller's caps: charged to its memory cgroup.
        let mut ops = KVVec::with_capacity(slots, GFP_KERNEL_ACCOUNT)?;
        for _ in 0..slots {
            ops.push(SendOp::default(), GFP_KERNEL_ACCOUNT)?;
        }
        let sq_bytes = slots.checked_mul(sq_elem).ok_or(EINVAL)?;
        let sq_shadow = KVVec::from_elem(0u8, sq_bytes, GFP_KERNEL_ACCOUNT)?;
        let rq_shadow = KVVec::from_elem(0u8, rq_elem, GFP_KERNEL_ACCOUNT)?;
        let resp_q = RespQueue::new()?;
        Ok(Rings {
            sq_buf,
            sq,
            sq_layout,
            rq_buf,
            rq,
            rq_layout,
            max_sge,
            max_inline,
            rq_max_sge,
            ops,
            sq_shadow,
            rq_shadow,
            resp_q,
        })
    }

    /// The caps these rings really give (no receive caps on an SRQ).
    fn cap(&self) -> sys::ib_qp_cap {
        let on_srq = self.rq_buf.is_none();
        sys::ib_qp_cap {
            max_send_wr: self.sq_layout.capacity(),
            max_recv_wr: if on_srq { 0 } else { self.rq_layout.capacity() },
            max_send_sge: self.max_sge,
            max_recv_sge: if on_srq { 0 } else { self.rq_max_sge },
            max_inline_data: self.max_inline,
            max_rdma_ctxs: 0,
        }
    }

    /// Where the process maps the rings.
    fn resp(&self) -> crate::abi::CreateQpResp {
        crate::abi::CreateQpResp {
            rq_mi: self
                .rq_buf
                .as_ref()
                .map_or_else(Default::default, |b| to_abi(b.mmap_info())),
            sq_mi: to_abi(self.sq_buf.mmap_info()),
        }
    }
}

fn to_abi(mi: crate::rdma::mmap::MmapInfo) -> crate::abi::MmapInfo {
    crate::abi::MmapInfo {
        offset: mi.offset,
        size: mi.size,
        pad: 0,
    }
}

/// Takes a QP number: 1 for the GSI QP (one per device, its one port),
/// else one from the device's allocator.
fn alloc_qpn(dev: &RroceDev, gsi: bool) -> Result<u32> {
    if gsi {
        if dev.gsi_taken.swap(true, Ordering::AcqRel) {
            return Err(EBUSY);
        }
        Ok(1)
    } else {
        // The allocator's bitmap ends past the QP table (a whole last
        // word): an index whose number would have no slot, where packets
        // could never find the QP, is parked (left taken for the device's
        // life) the first time it comes out, and another one is taken.
        let past_table = limits::QP_ID_WORDS * 64 - limits::MAX_QP as usize;
        for _ in 0..=past_table {
            let index = dev.qp_ids.alloc().map_err(|_| ENOMEM)?;
            let qpn = index.checked_add(FIRST_QPN).ok_or(ENOMEM)?;
            if (qpn as usize) < dev.qps.len() {
                return Ok(qpn);
            }
        }
        Err(ENOMEM)
    }
}

/// Gives back a QP number taken by [`alloc_qpn`].
fn release_qpn(dev: &RroceDev, qpn: u32) -> Result {
    if qpn == 1 {
        dev.gsi_taken.store(false, Ordering::Release);
        Ok(())
    } else {
        dev.qp_ids.free(qpn - FIRST_QPN).map_err(|_| EINVAL)
    }
}

/// The state of a new QP in RESET, with the rings `r` (not yet started:
/// no timer, the work item not initialized).
fn new_state(
    init: &sys::ib_qp_init_attr,
    r: Rings,
    qpn: u32,
    dev: &RroceDev,
    qp: &mut RroceQp,
    kernel: bool,
) -> impl PinInit<QpState> {
    let cap = r.cap();
    let (sq_elem, rq_elem) = (r.sq_layout.elem_size(), r.rq_layout.elem_size());
    let (qp_type, send_cq, recv_cq) = (init.qp_type, init.send_cq, init.recv_cq);
    let srq: *const crate::srq::SrqState = if init.srq.is_null() {
        core::ptr::null()
    } else {
        // SAFETY: an SRQ the core passes is a live SRQ of ours (as in
        // `RroceQp::create`).
        unsafe { crate::srq::RroceSrq::state(init.srq) }
    };
    let sig_all = init.sq_sig_type == sys::ib_sig_type_IB_SIGNAL_ALL_WR;
    let dev = core::ptr::from_ref(dev);
    let pd = qp.ibqp.pd;
    let ibqp = core::ptr::from_mut(&mut qp.ibqp);
    pin_init!(QpState {
        inner <- new_spinlock_irq!(
            QpInner {
                t: TransportState {
                    state: sys::ib_qp_state_IB_QPS_RESET,
                    attrs: QpAttrs::default(),
                    sq: r.sq,
                    rq: r.rq,
                    req: Req::default(),
                    resp: Resp::default(),
                    resp_q: r.resp_q,
                    ops: r.ops,
                    sq_shadow: r.sq_shadow,
                    rq_shadow: r.rq_shadow,
                    tx: KVec::new(),
                    rtx: KVec::new(),
                    req_built: 0,
                    mtu: transport::mtu_bytes(sys::ib_mtu_IB_MTU_256),
                    epoch: 0,
                    odp: Default::default(),
                    tx_sent: 0,
                    tx_lost: 0,
                    tx_at: 0,
                },
                cap,
                sq_prod: Producer::new(r.sq_layout),
                rq_prod: Producer::new(r.rq_layout),
                ud_tx: KVec::new(),
                sport: 0,
                dead: false,
                doorbells: Doorbells::default(),
            },
            "rroce::qp"
        ),
        qp_type,
        dev,
        // INVARIANT: the PD, CQs and `ib_qp` the core gave this QP, which
        // it keeps alive; no timer yet.
        fixed: QpFixed {
            qpn,
            pd,
            send_cq,
            recv_cq,
            sig_all,
            ibqp,
            kernel,
            uc: *qp_type == sys::ib_qp_type_IB_QPT_UC,
            ud: *qp_type == sys::ib_qp_type_IB_QPT_UD || *qp_type == sys::ib_qp_type_IB_QPT_GSI,
            srq,
            sq_buf: r.sq_buf,
            rq_buf: r.rq_buf,
            sq_elem,
            rq_elem,
            sq_max_sge: r.max_sge,
            sq_max_inline: r.max_inline,
            rq_max_sge: r.rq_max_sge,
            timer: core::ptr::null_mut(),
            route: core::ptr::null_mut(),
            req_waits: AtomicBool::new(false),
            req_streams: AtomicBool::new(false),
        },
        tx_lane: lanes::LaneSender::new(),
        rtx_lane: lanes::LaneSender::new(),
        tx_home: AtomicU32::new(u32::MAX),
        tx_kick_cpu: AtomicU32::new(u32::MAX),
        tx_node: UnsafeCell::new(sys::llist_node {
            next: core::ptr::null_mut(),
        }),
        tx_kicked: AtomicBool::new(false),
        tx_kicks: AtomicBool::new(false),
        rx: [RoleState::new(), RoleState::new()],
        #[cfg(CONFIG_KUNIT)]
        tx_gate: AtomicU32::new(u32::MAX),
        #[cfg(CONFIG_KUNIT)]
        tx_unsent: AtomicBool::new(false),
        #[cfg(CONFIG_KUNIT)]
        ud_post_hook: AtomicU32::new(0),
        // SAFETY: an all-zero work_struct is a valid placeholder until
        // `INIT_WORK` in `tx::start`.
        tx_work: UnsafeCell::new(unsafe { core::mem::zeroed() }),
    })
}

impl RroceQp {
    /// Creates the QP (RC, UD or GSI) for `init`, whose caps are set to the
    /// ones really granted. A user QP (`user` holds the process's ucontext
    /// and where its `rroce_create_qp_resp` goes) gets rings it can map.
    ///
    /// # Safety
    ///
    /// `self` was allocated by the RDMA core (`size_ib_qp`) for one of
    /// rroce's devices, with its PD set; `uctx` in `user` is the live
    /// ucontext of the creating process.
    pub(crate) unsafe fn create(
        &mut self,
        init: &mut sys::ib_qp_init_attr,
        user: Option<(*mut sys::ib_ucontext, impl FnOnce(&mut [u8]) -> Result)>,
    ) -> Result {
        check_init(init)?;
        let kernel = user.is_none();
        let uctx = user.as_ref().map_or(core::ptr::null_mut(), |u| u.0);
        // SAFETY: an SRQ the core passes is a live SRQ of the QP's device
        // (the core holds a use count on it for the QP's life).
        let srq = (!init.srq.is_null()).then(|| unsafe { crate::srq::RroceSrq::state(init.srq) });
        // SAFETY: `uctx` is null or live (caller).
        let rings = unsafe { Rings::new(&init.cap, uctx, srq)? };
        let cap = rings.cap();
        let resp = rings.resp();
        // SAFETY: the QP belongs to one of our devices (caller).
        let dev = unsafe { RroceDev::from_ib(self.ibqp.device) };
        let qpn = alloc_qpn(dev, init.qp_type == sys::ib_qp_type_IB_QPT_GSI)?;
        let state = match KBox::pin_init(new_state(init, rings, qpn, dev, self, kernel), GFP_KERNEL)
        {
            Ok(s) => s,
            Err(e) => {
                let _ = release_qpn(dev, qpn);
                return Err(e);
            }
        };
        if let Some((_, respond)) = user {
            let mut bytes = resp.to_bytes();
            if let Err(e) = respond(&mut bytes[..]) {
                let _ = release_qpn(dev, qpn);
                return Err(e);
            }
        }
        // SAFETY: we never move out of the box (pinned); it is leaked until
        // `destroy_qp`.
        let raw = KBox::into_raw(unsafe { Pin::into_inner_unchecked(state) });
        // SAFETY: `raw` is pinned, not shared yet, and lives until
        // `destroy_qp`.
        if let Err(e) = unsafe { tx::start(raw) } {
            // SAFETY: not published anywhere yet.
            drop(unsafe { KBox::from_raw(raw) });
            let _ = release_qpn(dev, qpn);
            return Err(e);
        }
        // The caps really granted go back to the caller (rdma_rw's contexts
        // are the core's business).
        init.cap = sys::ib_qp_cap {
            max_rdma_ctxs: init.cap.max_rdma_ctxs,
            ..cap
        };
        // Packets can find the QP from now on (`alloc_qpn` gave a number
        // with a table slot; a failure here would be a bug, undone whole).
        if dev.qps.set(qpn as usize, raw).is_err() {
            // SAFETY: started above and never published: its timer and
            // work item are shut down once, then it is freed.
            unsafe {
                tx::stop(&*raw);
                drop(KBox::from_raw(raw));
            }
            let _ = release_qpn(dev, qpn);
            return Err(ENOMEM);
        }
        self.ibqp.qp_num = qpn;
        // INVARIANT: leaked until `destroy_qp`; never moved (pinned).
        self.state = raw;
        Ok(())
    }

    /// The QP's state.
    ///
    /// # Safety
    ///
    /// `ibqp` is an rroce QP created successfully and not destroyed, alive
    /// for `'a`.
    pub(crate) unsafe fn state<'a>(ibqp: *mut sys::ib_qp) -> &'a QpState {
        // SAFETY: per the type invariant and the caller.
        unsafe { &*(*ibqp.cast::<RroceQp>()).state }
    }

    /// Destroys the QP's state (nothing if it was never created): no
    /// packet, doorbell or timer touches the QP afterwards. Process
    /// context, after the QP's last use by the core.
    pub(crate) fn destroy(&mut self) {
        if self.state.is_null() {
            return;
        }
        // SAFETY: the core allocated the QP for one of our devices, which
        // outlives it (type invariant).
        let dev = unsafe { RroceDev::from_ib(self.ibqp.device) };
        // SAFETY: non-null, so leaked by `create` and live until freed
        // below (type invariant).
        let st = unsafe { &*self.state };
        // The table entry goes, readers inside RCU sections finish, the
        // timer is shut down.
        st.inner.lock().dead = true;
        // Off every multicast group (uverbs detaches what the process
        // attached first; a kernel consumer may not have).
        crate::mcast::detach_all(dev, self.ibqp.qp_num);
        // Type 2 windows bound to it are unbound: a later QP with its
        // number must not reach them.
        crate::mw::unbind_qp(dev, self.ibqp.qp_num);
        dev.qps.clear(self.ibqp.qp_num as usize);
        // SAFETY: process context; nothing can reach the QP through the
        // table any more.
        unsafe { sys::rroce_helper_synchronize_rcu() };
        // Packets handed to a receive thread (`crate::net`'s queues) were
        // counted and queued inside the receive path's RCU section that
        // found the QP, which has ended, so the counts only fall now; a
        // thread's last touch of the QP for a packet is that count's
        // decrement. Once they are zero (or the threads have processed
        // everything queued before now), no packet names the QP.
        if !st.drain_handed() {
            // A count without a packet: the QP is freed regardless (no
            // packet names it), but the accounting is wrong.
            pr_err!("QP {}: handed packet count leaked\n", self.ibqp.qp_num);
        }
        // SAFETY: created with a timer and work item (`tx::start`); this is
        // the one destroy.
        unsafe { tx::stop(st) };
        if release_qpn(dev, self.ibqp.qp_num).is_err() {
            pr_warn!("QP {} was not allocated\n", self.ibqp.qp_num);
        }
        // SAFETY: leaked in `create` (type invariant); reclaimed once, after
        // its last user.
        drop(unsafe { KBox::from_raw(self.state) });
        self.state = core::ptr::null_mut();
    }
}

impl QpState {
    /// Waits, if any of the QP's received packets wait in a receive
    /// thread's queue, until the threads have processed everything queued
    /// before now; `false` if a count still says a packet waits after that.
    /// Process context.
    pub(crate) fn drain_handed(&self) -> bool {
        let waiting = || self.rx.iter().any(|r| r.waiting().count > 0);
        if !waiting() {
            return true;
        }
        // SAFETY: process context (the caller's contract).
        unsafe { sys::rroce_helper_rxq_flush() };
        !waiting()
    }

    /// A datagram QP: UD, or the GSI QP (UD to the MAD layer's peers).
    pub(crate) fn is_ud(&self) -> bool {
        self.qp_type == sys::ib_qp_type_IB_QPT_UD || self.qp_type == sys::ib_qp_type_IB_QPT_GSI
    }

    /// The transport service whose opcodes the QP takes: RC, UC, or UD
    /// (UD and GSI QPs).
    pub(crate) fn service(&self) -> Transport {
        match self.qp_type {
            sys::ib_qp_type_IB_QPT_RC => Transport::Rc,
            sys::ib_qp_type_IB_QPT_UC => Transport::Uc,
            _ => Transport::Ud,
        }
    }

    /// The QP's device.
    fn dev(&self) -> &RroceDev {
        // SAFETY: the device outlives its QPs (type invariant).
        unsafe { &*self.dev }
    }

    /// The transport of this QP, entered with its lock held (`inner`)
    /// inside the RCU read-side section `guard`.
    fn ctx<'a>(&'a self, inner: &'a mut QpInner, guard: &'a rcu::Guard) -> Ctx<'a> {
        let dev = self.dev();
        Ctx::new(&self.fixed, &mut inner.t, dev, dev.netdev(guard), guard)
    }

    /// Runs `f` on the QP's transport under its lock, unless the QP is
    /// being destroyed, then sends what the transport built (a received
    /// packet's dispatch, `crate::recv`).
    ///
    /// Only the lanes it built packets into: a request waiting in the
    /// request lane was built by another context (a doorbell, the timer, a
    /// transmit pass), which sends it itself. Sending it from here, with
    /// requests in flight from another CPU, would kick the transmit to
    /// that CPU's receive thread (`Left::Home`) to send what the context
    /// there is about to send anyway: in a ping-pong, nearly every
    /// request.
    pub(crate) fn deliver(&self, guard: &rcu::Guard, f: impl FnOnce(&mut Ctx<'_>)) {
        let budget = lanes::tx_budget();
        let mut inner = self.inner.lock();
        let built = inner.t.req_built;
        if !inner.dead {
            f(&mut self.ctx(&mut inner, guard));
        }
        let lanes: &[Lane] = if inner.t.req_built != built {
            &Lane::ALL
        } else {
            &[Lane::Resp]
        };
        let look = self.look(&mut inner, lanes, budget);
        drop(inner);
        self.flush_looked(lanes, look);
    }
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
        if state.fixed.send_cq != ibcq && state.fixed.recv_cq != ibcq {
            continue;
        }
        let mut inner = state.inner.lock();
        if !inner.dead && inner.t.state != sys::ib_qp_state_IB_QPS_ERR {
            pr_debug!(
                "qp {}: its CQ overran, moving to the error state\n",
                state.fixed.qpn
            );
            state.ctx(&mut inner, &guard).enter_error();
        }
        drop(inner);
        state.flush_tx();
    }
}

/// Checks run by KUnit.
#[cfg(CONFIG_KUNIT)]
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
        if super::modify::check_qp_access(rw | sys::ib_access_flags_IB_ACCESS_REMOTE_READ).is_err()
            || super::modify::check_qp_access(sys::ib_access_flags_IB_ACCESS_MW_BIND).is_ok()
        {
            return Err("QP access flag rules are wrong");
        }
        Ok(())
    }
}
