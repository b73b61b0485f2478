// SPDX-License-Identifier: GPL-2.0

//! The RC transport: requester, completer and responder.
//!
//! All three run under the QP's lock, from three kinds of context: the
//! send-queue doorbell (process context), received packets (softirq) and the
//! QP's timer (softirq). Packets they build are queued on the QP and sent
//! by `QpState::flush_tx` after the lock is dropped, in queue order.
//!
//! Everything read from the process's rings is copied into kernel memory
//! before it is validated and used: a send WQE into the QP's shadow slot
//! (`TransportState::sq_shadow`), a receive WQE into
//! `TransportState::rq_shadow`.
//!
//! Requester: WQEs are fetched in order, segmented at the path MTU, given
//! PSNs and sent while the window (`engine::rc::window`: 128 packets,
//! halved after each loss and grown back by one per acknowledgement) and
//! the READ/atomic limit allow; a fenced WQE waits for earlier READs and atomics.
//! Completer: ACKs, NAKs and READ/atomic responses retire WQEs strictly in
//! posting order; a timeout or a PSN sequence NAK goes back to the oldest
//! unacknowledged PSN (go-back-N); an RNR NAK waits the timer it names.
//! Responder: PSNs are checked (duplicates re-ACKed or replayed, gaps
//! NAKed once), keys and bounds checked against the MR and PD, data
//! scattered into the receive WQE's SGEs or the MR.
//!
//! One file per role: `req` (requester), `comp` (completer), `resp`
//! (responder), `ud` (datagrams), `flush` (error state and state changes);
//! `state` holds the part of a QP the transport owns (the QP object in
//! `crate::qp` embeds it; the transport never names the QP object); this
//! file holds the per-role state, packet building and CQE posting they
//! share.

use kernel::{prelude::*, sync::rcu};

use crate::{
    abi,
    completion::{Completion, WcOpcode, WcStatus},
    counters::Counter,
    cq::{Kind, RroceCq},
    dev::RroceDev,
    engine::{
        icrc,
        psn::Psn,
        rc::{responder::RdTable, window::Window},
        wire::{self, Bth, Headers, Opcode},
    },
    mr::{self, AccessError, SgeError, SgeList},
    net::skb,
    rdma::sys,
};

mod comp;
mod diag;
mod flush;
mod odp;
mod req;
mod resp;
mod state;
mod ud;

pub(crate) use diag::Diag;
pub(crate) use flush::DueEvents;
pub(crate) use odp::OdpWait;
#[cfg(CONFIG_KUNIT)]
pub(crate) use resp::queue_selftest;
pub(crate) use resp::RespQueue;
pub(crate) use resp::RESP_QUANTUM;
pub(crate) use state::{set_hint, Lane, QpAttrs, QpFixed, TransportState};
pub(crate) use ud::Datagram;

/// `IB_SEND_FENCE`, `IB_SEND_SIGNALED`, `IB_SEND_SOLICITED`, `IB_SEND_INLINE`.
const SEND_FENCE: u32 = 1;
const SEND_SIGNALED: u32 = 2;
const SEND_SOLICITED: u32 = 4;
const SEND_INLINE: u32 = 8;
const SEND_IP_CSUM: u32 = 16;
kernel::sync::global_lock! {
    // SAFETY: `init` runs in module init before any QP exists.
    unsafe(uninit) static ATOMIC_LOCK: SpinLockIrq<()> = ();
}

/// Initializes the transport's globals (module init).
pub(crate) fn init() {
    // SAFETY: called once, first.
    unsafe { ATOMIC_LOCK.init() };
}

/// A send WQE, validated, in kernel memory. Its SGEs or inline data stay in
/// the QP's shadow copy of the slot.
#[derive(Clone, Copy, Default)]
pub(crate) struct SendOp {
    wr_id: u64,
    opcode: u32,
    flags: u32,
    len: u32,
    remote_addr: u64,
    rkey: u32,
    /// Immediate data or invalidate key, as the raw wire-order word.
    ex: u32,
    compare_add: u64,
    swap: u64,
    num_sge: u32,
    inline: bool,
    /// The WQE was invalid; it completes with this status.
    invalid: Option<WcStatus>,
    first_psn: u32,
    npkts: u32,
    /// READ response packets received so far.
    rd_pkts: u32,
    done: bool,
    /// REG_MR: the registration to make.
    reg: RegWr,
    /// BIND_MW: the binding to make.
    bind: abi::WrMw,
}

impl SendOp {
    /// A READ, an atomic or an ATOMIC WRITE: answered by a response (an
    /// ATOMIC WRITE by an empty READ response, IBA 1.5 9.4.6), counted
    /// against `max_rd_atomic`, and done only when its response arrives.
    fn is_read_or_atomic(&self) -> bool {
        matches!(
            self.opcode,
            abi::WR_RDMA_READ
                | abi::WR_ATOMIC_CMP_AND_SWP
                | abi::WR_ATOMIC_FETCH_AND_ADD
                | abi::WR_ATOMIC_WRITE
        )
    }

    /// A local operation (LOCAL_INV, REG_MR, BIND_MW): executed by the requester
    /// in order, no packet sent.
    fn is_local(&self) -> bool {
        matches!(self.opcode, abi::WR_LOCAL_INV | WR_REG_MR | abi::WR_BIND_MW)
    }

    fn last_psn(&self) -> Psn {
        Psn::new(self.first_psn).add(self.npkts.max(1) - 1)
    }

    fn wc_opcode(&self) -> WcOpcode {
        match self.opcode {
            abi::WR_RDMA_WRITE | abi::WR_RDMA_WRITE_WITH_IMM => WcOpcode::RdmaWrite,
            abi::WR_RDMA_READ => WcOpcode::RdmaRead,
            abi::WR_ATOMIC_CMP_AND_SWP => WcOpcode::CompSwap,
            abi::WR_ATOMIC_FETCH_AND_ADD => WcOpcode::FetchAdd,
            abi::WR_LOCAL_INV => WcOpcode::LocalInv,
            WR_REG_MR => WcOpcode::RegMr,
            abi::WR_ATOMIC_WRITE => WcOpcode::AtomicWrite,
            abi::WR_BIND_MW => WcOpcode::BindMw,
            _ => WcOpcode::Send,
        }
    }
}

impl Ctx<'_> {
    /// Invalidates the fast-registration MR or the memory window `key`
    /// names, for this QP: LOCAL_INV, or (`remote`) a SEND with invalidate
    /// that arrived on it.
    fn invalidate_key(&self, key: u32, remote: bool) -> Result<(), ()> {
        let (pd, qpn) = (self.qp.pd, self.qp.qpn);
        if crate::engine::mw::is_window_key(key) {
            crate::mw::invalidate(self.dev, self.rcu, pd, qpn, key, remote).map_err(|e| {
                pr_debug!("qp {}: invalidate of window {:#x}: {:?}\n", qpn, key, e);
            })
        } else {
            crate::mr::invalidate(self.dev, self.rcu, pd, key).map_err(|e| {
                pr_debug!("qp {}: invalidate of MR {:#x}: {:?}\n", qpn, key, e);
            })
        }
    }
}

/// The kernel's `IB_WR_REG_MR` opcode: no user ABI value (uverbs has no
/// fast registration), accepted from kernel QPs only.
pub(crate) const WR_REG_MR: u32 = sys::ib_wr_opcode_IB_WR_REG_MR;

/// The `wr` union of a REG_MR WQE. Only kernel QPs' rings (kernel memory,
/// written by `post_send`) carry it: the requester takes REG_MR from
/// kernel QPs only, so its layout is rroce's own, not the user ABI's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct RegWr {
    /// The fast-registration MR's index.
    pub(crate) index: u32,
    /// Its new key (same index, the consumer's key byte).
    pub(crate) key: u32,
    /// `IB_ACCESS_*` of the registration.
    pub(crate) access: u32,
    /// The registration's first byte, as the MR's iova was at the post.
    pub(crate) iova: u64,
}

impl RegWr {
    /// Byte layout in the union: index, key, access, 4 bytes of padding,
    /// iova; native endian.
    pub(crate) fn encode(&self) -> abi::WrUnion {
        let mut u = abi::WrUnion::default();
        u.raw[0..4].copy_from_slice(&self.index.to_ne_bytes());
        u.raw[4..8].copy_from_slice(&self.key.to_ne_bytes());
        u.raw[8..12].copy_from_slice(&self.access.to_ne_bytes());
        u.raw[16..24].copy_from_slice(&self.iova.to_ne_bytes());
        u
    }

    /// The inverse of [`Self::encode`].
    pub(crate) fn decode(u: &abi::WrUnion) -> Self {
        let w = |r: &[u8]| u32::from_ne_bytes([r[0], r[1], r[2], r[3]]);
        let mut iova = [0u8; 8];
        iova.copy_from_slice(&u.raw[16..24]);
        Self {
            index: w(&u.raw[0..4]),
            key: w(&u.raw[4..8]),
            access: w(&u.raw[8..12]),
            iova: u64::from_ne_bytes(iova),
        }
    }
}

/// Requester and completer state.
#[derive(Default)]
pub(crate) struct Req {
    /// WQEs copied from the ring, counted from the consumer index.
    fetched: u32,
    /// WQEs fully transmitted, counted from the consumer index.
    cur: u32,
    /// Bytes of WQE `cur` already transmitted (READ: requested).
    cur_off: u32,
    /// Next PSN to send.
    psn: u32,
    /// One past the highest PSN sent, and the (`cur`, `cur_off`) that go
    /// with it: what a rewind for retransmission may fast-forward to again.
    max_psn: u32,
    max_cur: u32,
    max_cur_off: u32,
    /// Oldest unacknowledged PSN.
    una: u32,
    /// One past the highest PSN taken from the request lane to be sent
    /// ([`TransportState::requests_taken`]): the requests that may be on
    /// their way to the peer are those from `una` up to it.
    sent_psn: u32,
    /// The first PSN of the newest request packet built (the one ending
    /// at `max_psn`), and of the newest taken to be sent.
    max_first: u32,
    sent_first: u32,
    /// Every request below this PSN is known to have reached the
    /// responder (`engine::rc::requester::requests_in_flight`).
    heard: u32,
    /// `max_psn` at the last rewind for retransmission: requests below it
    /// may have two copies on the way, so until `una` reaches it what was
    /// heard proves nothing (`requests_in_flight`).
    resent_until: u32,
    retry_left: u8,
    rnr_left: u8,
    /// Timer expiries that responses waiting on a receive thread may
    /// still defer (`engine::rc::completer::MAX_DEFERS`).
    defers_left: u8,
    /// Waiting out an RNR NAK's timer.
    rnr_wait: bool,
    /// Waiting for ODP pages a WQE's SGEs need (`transport::odp`).
    odp_wait: bool,
    /// The last pass stopped because a packet could not be allocated; the
    /// timer runs it again (`engine::rc::completer::MEM_RETRY_US`).
    mem_wait: bool,
    /// In SQD, the send queue has not drained yet (`query_qp`'s
    /// `sq_draining`); set on entry from RTS.
    draining: bool,
    /// It drained and `IB_EVENT_SQ_DRAINED` was asked for: the QP's work
    /// item raises it, outside the QP's lock and outside any verb's call
    /// chain (the consumer's handler may query or modify the QP).
    drained_event: bool,
    /// A missing READ response at this PSN was already asked for again:
    /// later out-of-order responses (still in flight from before) must not
    /// each start another retry (as rxe's `started_retry`).
    rd_retry: Option<u32>,
    /// RC request packets sent since the last ACK request (UC asks for
    /// none and keeps 0).
    noack: u32,
    /// This pass asks for one ACK at its tail (module parameter
    /// `tx_ack_at_tail`, read once per pass), and a data packet it queued
    /// since its last request went without one
    /// (`engine::rc::window::ask_at_tail`).
    ack_at_tail: bool,
    pass_unasked: bool,
    /// The send window: shrunk after losses, grown back with progress.
    window: Window,
    /// The last fetch left published WQEs for a later pass
    /// ([`FETCH_BUDGET`]): the QP's work item runs the send queue again.
    pending: bool,
    /// The last WQE fetched was shorter than `engine::handover`'s
    /// `MIN_HANDED_LEN` (a doorbell's stream test).
    last_small: bool,
    /// What happened to this connection's requester (diagnostics).
    ev: ReqEvents,
}

/// Requester events since RTS, for `rdma -dd resource show qp`: enough to
/// tell, for a QP that ran out of retries, whether the peer answered.
/// Counters wrap.
#[derive(Default)]
pub(crate) struct ReqEvents {
    /// Retransmission timeouts (retries charged).
    timeouts: u32,
    /// PSNs sent again after a rewind (a READ request counts the PSNs of
    /// the responses it asks for again).
    resent: u32,
    /// ACKs, RNR NAKs and PSN sequence NAKs taken.
    acks: u32,
    rnr_naks: u32,
    seq_naks: u32,
    /// The PSN of the last ACK or NAK taken.
    last_ack: u32,
    /// Responses dropped as answering nothing outstanding or sent before
    /// a rewind.
    stale: u32,
    /// Response packets that reached the completer (any state), and of
    /// those, taken outside RTS and SQD (dropped).
    responses: u32,
    late: u32,
    /// Timer expiries found stale (the timer was armed again while they
    /// waited for the QP lock) and ignored.
    stale_timers: u32,
    /// Timer expiries not charged as timeouts because the QP's responses
    /// waited, received, on a receive thread.
    deferred_timers: u32,
    /// Passes that stopped for lack of memory for a packet.
    mem_waits: u32,
    /// When (the tick in ms) the last ACK or NAK was taken, the last
    /// retransmission timeout charged, and a late response came first and
    /// last (only then: the completer's hot path reads no clock).
    at_ack: u32,
    at_timeout: u32,
    at_late: u32,
    at_late_last: u32,
    /// When the head WQE failed (the QP went to ERR).
    at_fail: u32,
}

/// Responder events since RTR (see [`ReqEvents`]).
#[derive(Default)]
pub(crate) struct RespEvents {
    /// Duplicate requests, and the ACKs, RNR NAKs and PSN sequence NAKs
    /// sent.
    dups: u32,
    acks: u32,
    rnr_naks: u32,
    seq_naks: u32,
    /// The PSN of the last ACK or NAK sent, and when (the tick in ms).
    last_ack: u32,
    at_ack: u32,
}

/// The tick in milliseconds, for the events' timestamps.
pub(crate) fn now_ms() -> u32 {
    // SAFETY: reads the tick count.
    unsafe { crate::rdma::sys::rroce_helper_jiffies_ms() }
}

/// Counts one event.
fn bump(n: &mut u32) {
    *n = n.wrapping_add(1);
}

/// Send WQEs copied from the ring per fetch: the copy runs under the QP
/// lock, with interrupts off, and the process may keep its ring full.
pub(crate) const FETCH_BUDGET: u32 = 64;

impl TransportState {
    /// Whether published send WQEs were left for a later pass: the QP's
    /// work item must run the send queue again.
    pub(crate) fn send_pending(&self) -> bool {
        self.req.pending
    }

    /// In SQD, whether the send queue is still draining.
    pub(crate) fn sq_draining(&self) -> bool {
        self.req.draining
    }

    /// Whether an affiliated event waits for the work item.
    pub(crate) fn event_due(&self) -> bool {
        self.req.drained_event || self.resp.last_wqe_event
    }

    /// Takes the affiliated events waiting for the work item.
    pub(crate) fn take_events(&mut self) -> DueEvents {
        DueEvents {
            sq_drained: core::mem::take(&mut self.req.drained_event),
            last_wqe: core::mem::take(&mut self.resp.last_wqe_event),
        }
    }

    /// Whether the last send WQE fetched was a small message's.
    pub(crate) fn last_small(&self) -> bool {
        self.req.last_small
    }

    /// Leaves the published send WQEs to the next pass of the transmit
    /// (a doorbell that hands its transmit to another CPU).
    pub(crate) fn defer_send(&mut self) {
        self.req.pending = true;
    }
}

/// The receive WQE a multi-packet SEND is filling.
#[derive(Clone, Copy, Default)]
struct RecvCtx {
    active: bool,
    wr_id: u64,
    num_sge: u32,
    len: u32,
    off: u32,
}

/// The RDMA WRITE a multi-packet message is filling.
#[derive(Clone, Copy, Default)]
struct WriteCtx {
    active: bool,
    rkey: u32,
    va: u64,
    left: u32,
    total: u32,
}

/// Responder state.
#[derive(Default)]
pub(crate) struct Resp {
    /// Expected PSN.
    epsn: u32,
    msn: u32,
    /// A sequence or RNR NAK was sent for the expected PSN and no request
    /// at that PSN came since: later ones are dropped without another.
    nak_sent: bool,
    /// UC: a packet of the current message was lost; the rest of it is
    /// dropped until a first or only packet starts the next.
    uc_drop: bool,
    /// On an SRQ: `IB_EVENT_QP_LAST_WQE_REACHED` is due or was raised for
    /// this entry to the error state.
    last_wqe: bool,
    /// That event waits for the QP's work item, which raises it outside
    /// the QP's lock and any verb's call chain (RESET drops it with the
    /// rest of the responder).
    last_wqe_event: bool,
    /// On an SRQ: `rq_shadow` holds a WQE taken from it for a message put
    /// off by an ODP fault (`resp::odp_untake`).
    srq_held: bool,
    recv: RecvCtx,
    write: WriteCtx,
    /// The READ/atomic requests remembered for duplicates (their slots are
    /// in `TransportState::resp_q`).
    rd: RdTable,
    /// What happened to this connection's responder (diagnostics).
    ev: RespEvents,
}

/// Bytes of an `enum ib_mtu`.
pub(crate) fn mtu_bytes(mtu: sys::ib_mtu) -> u32 {
    match mtu {
        sys::ib_mtu_IB_MTU_256 => 256,
        sys::ib_mtu_IB_MTU_512 => 512,
        sys::ib_mtu_IB_MTU_1024 => 1024,
        sys::ib_mtu_IB_MTU_2048 => 2048,
        _ => 4096,
    }
}

/// Retransmission timeout of the `timeout` attribute, in microseconds
/// (4.096 us * 2^timeout), or `None` for 0 (infinite).
fn timeout_us(timeout: u8) -> Option<u64> {
    (timeout != 0).then(|| (4096u64 << timeout.min(31)) / 1000)
}

/// One QP's transport, entered with the QP lock held: what the QP fixed
/// at create, and the transport's part of what the lock protects.
pub(crate) struct Ctx<'a> {
    qp: &'a QpFixed,
    inner: &'a mut TransportState,
    dev: &'a RroceDev,
    ndev: *mut sys::net_device,
    rcu: &'a rcu::Guard,
}

/// The most page pieces a packet's payload goes out in without a copy, each
/// a page fragment: with its trailer's, well below the kernel's
/// `MAX_SKB_FRAGS` (17 or more).
const ZC_PIECES: usize = 8;

/// The least payload a packet sends without a copy, a page's worth: below
/// it the page references (taken by the sender, dropped by the receiver,
/// on two CPUs) and the fragments the receiver reads cost more than the
/// copy they save (payloads of 1 KiB measured 0.78-0.99x under TCG,
/// `Documentation/benchmark.rst`).
const ZC_MIN: usize = 4096;

/// A packet's payload as bytes of pinned pages of user MRs, to go out as
/// page fragments instead of a copy ([`Ctx::zc_payload`]), valid while the
/// RCU read-side section `'g` it was found in lasts: the MRs' pages stay
/// pinned until a grace period after they leave the device's table.
///
/// A user MR's pages are the process's, who may write them after posting
/// (breaking the rule not to touch a buffer before its completion): the
/// ICRC, computed when the packet leaves, then no longer matches and the
/// packet is dropped, as a packet corrupted on the wire is, and sent again.
/// So only RC requests go out this way: a responder's READ responses read
/// memory its owner may change at any time, and UC and UD complete
/// without waiting for the peer to have received the packet.
///
/// # Invariants
///
/// `pieces[..n]` are live pages' bytes, `len` of them in all.
pub(super) struct ZcPayload<'g> {
    pieces: [skb::PagePiece; ZC_PIECES],
    n: usize,
    len: usize,
    _rcu: core::marker::PhantomData<&'g rcu::Guard>,
}

impl ZcPayload<'_> {
    fn new() -> Self {
        ZcPayload {
            pieces: [skb::PagePiece {
                page: core::ptr::null_mut(),
                off: 0,
                len: 0,
            }; ZC_PIECES],
            n: 0,
            len: 0,
            _rcu: core::marker::PhantomData,
        }
    }

    /// Adds `len` bytes of `page` from `off`; `false` if full.
    fn push(&mut self, page: *mut sys::page, off: u32, len: u32) -> bool {
        let Some(p) = self.pieces.get_mut(self.n) else {
            return false;
        };
        if page.is_null() || len == 0 {
            return false;
        }
        // INVARIANT: a pinned page of a user MR (`MrRef::pages`).
        *p = skb::PagePiece { page, off, len };
        self.n += 1;
        self.len = self.len.saturating_add(len as usize);
        true
    }

    fn pieces(&self) -> &[skb::PagePiece] {
        self.pieces.get(..self.n).unwrap_or(&[])
    }
}

impl<'a> Ctx<'a> {
    /// The `len` bytes at `off` of the payload that `num_sge` SGEs in
    /// `elem` gather, as the pinned pages of user MRs they lie in, if they
    /// may go out without a copy ([`ZcPayload`]): the netdev takes page
    /// fragments and the module parameter `tx_zerocopy` is on, the packet
    /// carries at least [`ZC_MIN`] bytes, every SGE's part is in a user MR
    /// with its access checked, and in at most [`ZC_PIECES`] pieces.
    /// `None` otherwise (the copy then finds any error).
    fn zc_payload(
        &self,
        elem: &[u8],
        sge_at: fn(&[u8], usize) -> Option<abi::Sge>,
        num_sge: u32,
        (off, len): (u32, u32),
    ) -> Option<ZcPayload<'a>> {
        if (len as usize) < ZC_MIN || self.ndev.is_null() {
            return None;
        }
        // SAFETY: `ndev` is live: read from the device inside the RCU
        // read-side section the context holds.
        if !unsafe { sys::rroce_helper_tx_zerocopy(self.ndev) } {
            return None;
        }
        let mut z = ZcPayload::new();
        let walked = self.walk_sges(elem, sge_at, num_sge, (off, len), 0, |mr, va, r| {
            // The parts come in order, each after the one before.
            if r.start != z.len || !mr.pages(va, r.len(), |page, o, n| z.push(page, o, n)) {
                return Err(AccessError::Bounds);
            }
            Ok(())
        });
        (walked.is_ok() && z.len == len as usize).then_some(z)
    }
}

impl<'a> Ctx<'a> {
    /// The transport of the QP whose fixed part is `qp` and whose locked
    /// part is `inner`, on `dev` (whose netdev is `ndev`, null if none),
    /// inside the RCU read-side section `rcu`.
    pub(crate) fn new(
        qp: &'a QpFixed,
        inner: &'a mut TransportState,
        dev: &'a RroceDev,
        ndev: *mut sys::net_device,
        rcu: &'a rcu::Guard,
    ) -> Self {
        Ctx {
            qp,
            inner,
            dev,
            ndev,
            rcu,
        }
    }
}

impl SgeError {
    /// The local completion status of the failure.
    fn status(self) -> WcStatus {
        match self {
            // (An absent ODP page is waited for, not a status: callers
            // handle it first.)
            SgeError::Prot | SgeError::Absent(_) => WcStatus::LocProtErr,
            SgeError::Len => WcStatus::LocLenErr,
        }
    }
}

impl Ctx<'_> {
    // ---- packets -------------------------------------------------------

    fn bth(&self, opcode: Opcode, psn: u32) -> Bth {
        Bth::new(
            opcode,
            wire::DEFAULT_PKEY,
            self.inner.attrs.dest_qpn,
            Psn::new(psn),
        )
    }

    /// Builds a packet of `h` with `payload_len` bytes that `fill` writes,
    /// and queues it. `false` if it could not be built (no memory, no
    /// netdev, or `fill` failed); `fill`'s error is returned separately.
    fn queue(
        &mut self,
        h: &Headers,
        payload_len: usize,
        fill: impl FnOnce(&mut Self, &mut [u8]) -> Result<(), SgeError>,
    ) -> Result<bool, SgeError> {
        self.queue_in_run(h, payload_len, 0, None, fill)
    }

    /// [`Self::queue`] for a packet of a message the caller queues `follow`
    /// more packets of right after this one. The packet joins the GSO run
    /// at the tail of its lane's queue if it fits there (see [`Skb::append`]);
    /// otherwise a full-size packet with only a BTH, out of a netdev that
    /// takes UDP GSO, starts a run for itself and the packets that follow
    /// (those of a stream's middle, and its last one, share its size or
    /// are shorter).
    ///
    /// With `zc` the payload goes out as those pages (see [`ZcPayload`])
    /// and `fill` is not called.
    fn queue_in_run(
        &mut self,
        h: &Headers,
        payload_len: usize,
        follow: u32,
        zc: Option<&ZcPayload<'_>>,
        fill: impl FnOnce(&mut Self, &mut [u8]) -> Result<(), SgeError>,
    ) -> Result<bool, SgeError> {
        if self.ndev.is_null() {
            return Ok(false);
        }
        let Some(total) = wire::packet_len(h.bth.opcode, payload_len) else {
            return Ok(false);
        };
        // The bytes in the skb's linear data: all, or the headers.
        let lin = if zc.is_some() {
            h.bth.opcode.info().hdr_len
        } else {
            total
        };
        let lane = Lane::of(h.bth.opcode);
        let joins = self
            .inner
            .queue_mut(lane)
            .last_mut()
            .is_some_and(|l| l.can_append(total));
        let mut skb = match joins.then(|| self.inner.queue_mut(lane).pop()).flatten() {
            Some(run) => run,
            None => {
                let ipv6 = matches!(
                    self.inner.attrs.av.map(|a| a.network),
                    Some(crate::ah::NetworkType::Ipv6)
                );
                let full = payload_len == self.mtu() as usize
                    && total == wire::BTH_LEN + payload_len + icrc::ICRC_LEN;
                let room = if follow > 0 && full {
                    // SAFETY: `ndev` is live: read from the device inside
                    // the RCU read-side section the context holds.
                    let max = unsafe { skb::gso_max(self.ndev) };
                    max / total
                } else {
                    0
                };
                let pkts = (follow as usize).saturating_add(1).min(room);
                let run = skb::alloc_gso(self.ndev, ipv6, total, lin, pkts);
                let one = || {
                    if lin < total {
                        skb::alloc_headers(self.ndev, ipv6, lin)
                    } else {
                        skb::alloc(self.ndev, ipv6, total)
                    }
                };
                match run.or_else(one) {
                    Some(s) => s,
                    None => return Ok(false),
                }
            }
        };
        let built = Self::write_packet(self, &mut skb, h, payload_len, (total, lin), zc, fill);
        if matches!(built, Ok(true)) {
            skb.commit(total);
        }
        // A run goes back to the queue with whatever it held before; a new
        // skb only if the packet was built. The vector has room for what
        // was popped from it.
        if (matches!(built, Ok(true)) || joins) && skb.packets() > 0 {
            if self.inner.queue_mut(lane).push(skb, GFP_ATOMIC).is_err() {
                return Ok(false);
            }
        }
        if lane == Lane::Req && matches!(built, Ok(true)) {
            self.inner.req_built = self.inner.req_built.wrapping_add(1);
        }
        built
    }

    /// Writes the packet of `h` into `skb` (its next GSO slot or its only
    /// packet), `total` bytes of which `lin` in its linear data: headers,
    /// the payload `fill` writes, zeroed pad and ICRC; or, with `zc`, the
    /// headers there and the rest as page fragments.
    fn write_packet(
        &mut self,
        skb: &mut skb::Skb,
        h: &Headers,
        payload_len: usize,
        (total, lin): (usize, usize),
        zc: Option<&ZcPayload<'_>>,
        fill: impl FnOnce(&mut Self, &mut [u8]) -> Result<(), SgeError>,
    ) -> Result<bool, SgeError> {
        let buf = if skb.is_run() {
            skb.append(self.ndev, total, lin).unwrap_or_default()
        } else {
            skb.buf()
        };
        if buf.len() != lin {
            return Ok(false);
        }
        let Ok(hdr) = wire::build_headers(h, payload_len, buf) else {
            return Ok(false);
        };
        if let Some(z) = zc {
            let Some(tail) = total
                .checked_sub(lin)
                .and_then(|n| n.checked_sub(payload_len))
            else {
                return Ok(false);
            };
            if hdr != lin || z.len != payload_len {
                return Ok(false);
            }
            // SAFETY: pages of user MRs found inside the RCU read-side
            // section `'a`, which this context holds: pinned until it ends
            // (an MR's pages are unpinned a grace period after it leaves
            // the table, `RroceMr::dereg`).
            let attached = unsafe { skb.attach(z.pieces(), tail) };
            if attached {
                self.dev.counters.inc(Counter::SentZerocopy);
            }
            return Ok(attached);
        }
        let Some(payload) = buf.get_mut(hdr..hdr + payload_len) else {
            return Ok(false);
        };
        fill(self, payload)?;
        if let Some(rest) = buf.get_mut(hdr + payload_len..) {
            rest.fill(0);
        }
        Ok(true)
    }

    // ---- SGEs ----------------------------------------------------------

    /// Walks `num_sge` SGEs in `elem` on the QP's PD ([`mr::walk_sges`]).
    fn walk_sges(
        &self,
        elem: &[u8],
        sge_at: fn(&[u8], usize) -> Option<abi::Sge>,
        num_sge: u32,
        range: (u32, u32),
        need: u32,
        f: impl FnMut(mr::MrRef<'_>, u64, core::ops::Range<usize>) -> Result<(), AccessError>,
    ) -> Result<(), SgeError> {
        let sges = SgeList {
            elem,
            sge_at,
            num_sge,
        };
        mr::walk_sges(self.dev, self.rcu, self.qp.pd, sges, range, need, f)
    }

    fn op_index(&self, k: u32) -> usize {
        ((self.inner.sq.index().wrapping_add(k)) & self.inner.sq.layout().index_mask()) as usize
    }

    fn shadow(&self, k: u32) -> &[u8] {
        let e = self.qp.sq_elem;
        let i = self.op_index(k) * e;
        self.inner.sq_shadow.get(i..i + e).unwrap_or(&[])
    }

    fn mtu(&self) -> u32 {
        self.inner.mtu
    }

    fn op(&self, k: u32) -> SendOp {
        self.inner
            .ops
            .get(self.op_index(k))
            .copied()
            .unwrap_or_default()
    }

    fn set_op(&mut self, k: u32, op: SendOp) {
        let i = self.op_index(k);
        if let Some(o) = self.inner.ops.get_mut(i) {
            *o = op;
        }
    }

    /// Retires WQE 0 with `status`.
    fn complete_head(&mut self, status: WcStatus) {
        let op = self.op(0);
        // The slot is freed before the completion is posted, as rxe does:
        // a process that sees the completion may post again at once, and
        // with a full queue (perftest's latency tests run one deep) it
        // would otherwise find no room and fail the post.
        let r = &mut self.inner.req;
        if self.inner.sq.advance_by(1, &self.qp.sq_buf).is_ok() {
            r.fetched -= 1;
            r.cur = r.cur.saturating_sub(1);
            r.max_cur = r.max_cur.saturating_sub(1);
        } else {
            r.fetched = 0;
            r.cur = 0;
            r.max_cur = 0;
        }
        let signaled = self.qp.sig_all || op.flags & SEND_SIGNALED != 0;
        if signaled || status != WcStatus::Success {
            let c = Completion {
                byte_len: op.len,
                ..Completion::new(op.wr_id, status, op.wc_opcode(), self.qp.qpn)
            };
            self.post_cqe(self.qp.send_cq, &c);
        }
    }

    fn post_cqe(&self, cq: *mut sys::ib_cq, c: &Completion) {
        let kind = if c.is_error() {
            Kind::Error
        } else {
            Kind::Unsolicited
        };
        self.post_cqe_kind(cq, c, kind);
    }

    /// Posts `c` to `cq` in the CQ's own format ([`post_cqe_to`]).
    fn post_cqe_kind(&self, cq: *mut sys::ib_cq, c: &Completion, kind: Kind) {
        post_cqe_to(self.qp, cq, c, kind);
    }
}

/// Posts `c` for the QP `qp` to `cq`, one of its CQs, in the CQ's own
/// format: a user CQE, or a kernel `ib_wc`.
fn post_cqe_to(qp: &QpFixed, cq: *mut sys::ib_cq, c: &Completion, kind: Kind) {
    // SAFETY: the QP holds a use count on its CQs (the core's), so they
    // outlive it.
    let cq = unsafe { RroceCq::state(cq) };
    // An overflow kills the CQ and raises its error event.
    if cq.is_user() {
        let _ = cq.post(&c.to_cqe().to_bytes(), kind);
    } else {
        let wc = c.to_ib_wc(qp.ibqp);
        // SAFETY: `wc` is plain data of `size_of::<ib_wc>()` bytes,
        // zero-initialised before its fields were set.
        let bytes = unsafe {
            core::slice::from_raw_parts(
                core::ptr::from_ref(&wc).cast::<u8>(),
                size_of::<sys::ib_wc>(),
            )
        };
        let _ = cq.post(bytes, kind);
    }
}
