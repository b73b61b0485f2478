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
//! (`QpInner::sq_shadow`), a receive WQE into `QpInner::rq_shadow`.
//!
//! Requester: WQEs are fetched in order, segmented at the path MTU, given
//! PSNs and sent while the window (`WINDOW` packets, halved after each loss
//! and grown back by one per acknowledgement) and the READ/atomic limit
//! allow; a fenced WQE waits for earlier READs and atomics.
//! Completer: ACKs, NAKs and READ/atomic responses retire WQEs strictly in
//! posting order; a timeout or a PSN sequence NAK goes back to the oldest
//! unacknowledged PSN (go-back-N); an RNR NAK waits the timer it names.
//! Responder: PSNs are checked (duplicates re-ACKed or replayed, gaps
//! NAKed once), keys and bounds checked against the MR and PD, data
//! scattered into the receive WQE's SGEs or the MR.

use kernel::{prelude::*, sync::rcu};

use crate::{
    abi,
    counters::Counter,
    cq::{Kind, RroceCq},
    dev::RroceDev,
    engine::{
        psn::{Psn, PsnClass},
        wire::{
            self, Aeth, AtomicAckEth, AtomicEth, Bth, Headers, Ieth, ImmDt, NakCode, OpKind,
            Opcode, Position, Reth, Syndrome,
        },
    },
    mr::{self, AccessError},
    net,
    qp::{QpInner, QpState},
    rdma::sys,
};

/// Most packets in flight (sent, not acknowledged) per QP.
const WINDOW: u32 = 128;
/// The smallest the window shrinks to after losses.
const MIN_WINDOW: u32 = 8;
/// The requester asks for an ACK at least every this many packets.
const ACK_EVERY: u32 = 16;
/// `IB_SEND_FENCE`, `IB_SEND_SIGNALED`, `IB_SEND_SOLICITED`, `IB_SEND_INLINE`.
const SEND_FENCE: u32 = 1;
const SEND_SIGNALED: u32 = 2;
const SEND_SOLICITED: u32 = 4;
const SEND_INLINE: u32 = 8;
const SEND_IP_CSUM: u32 = 16;
/// `IB_WC_WITH_IMM`, `IB_WC_WITH_INVALIDATE` in the user CQE encoding.
const WC_WITH_IMM: u32 = 2;
const WC_WITH_INV: u32 = 8;

/// Completion status values (`enum ib_wc_status`).
mod wc {
    use crate::rdma::sys;
    pub(super) const SUCCESS: u32 = sys::ib_wc_status_IB_WC_SUCCESS;
    pub(super) const LOC_LEN_ERR: u32 = sys::ib_wc_status_IB_WC_LOC_LEN_ERR;
    pub(super) const LOC_QP_OP_ERR: u32 = sys::ib_wc_status_IB_WC_LOC_QP_OP_ERR;
    pub(super) const LOC_PROT_ERR: u32 = sys::ib_wc_status_IB_WC_LOC_PROT_ERR;
    pub(super) const WR_FLUSH_ERR: u32 = sys::ib_wc_status_IB_WC_WR_FLUSH_ERR;
    pub(super) const BAD_RESP_ERR: u32 = sys::ib_wc_status_IB_WC_BAD_RESP_ERR;
    pub(super) const REM_INV_REQ_ERR: u32 = sys::ib_wc_status_IB_WC_REM_INV_REQ_ERR;
    pub(super) const REM_ACCESS_ERR: u32 = sys::ib_wc_status_IB_WC_REM_ACCESS_ERR;
    pub(super) const REM_OP_ERR: u32 = sys::ib_wc_status_IB_WC_REM_OP_ERR;
    pub(super) const RETRY_EXC_ERR: u32 = sys::ib_wc_status_IB_WC_RETRY_EXC_ERR;
    pub(super) const RNR_RETRY_EXC_ERR: u32 = sys::ib_wc_status_IB_WC_RNR_RETRY_EXC_ERR;
}

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
    /// Non-zero: the WQE was invalid; it completes with this status.
    invalid: u32,
    first_psn: u32,
    npkts: u32,
    /// READ response packets received so far.
    rd_pkts: u32,
    done: bool,
}

impl SendOp {
    fn is_read_or_atomic(&self) -> bool {
        matches!(
            self.opcode,
            abi::WR_RDMA_READ | abi::WR_ATOMIC_CMP_AND_SWP | abi::WR_ATOMIC_FETCH_AND_ADD
        )
    }

    fn last_psn(&self) -> Psn {
        Psn::new(self.first_psn).add(self.npkts.max(1) - 1)
    }

    fn wc_opcode(&self) -> u32 {
        match self.opcode {
            abi::WR_RDMA_WRITE | abi::WR_RDMA_WRITE_WITH_IMM => sys::ib_wc_opcode_IB_WC_RDMA_WRITE,
            abi::WR_RDMA_READ => sys::ib_wc_opcode_IB_WC_RDMA_READ,
            abi::WR_ATOMIC_CMP_AND_SWP => sys::ib_wc_opcode_IB_WC_COMP_SWAP,
            abi::WR_ATOMIC_FETCH_AND_ADD => sys::ib_wc_opcode_IB_WC_FETCH_ADD,
            _ => sys::ib_wc_opcode_IB_WC_SEND,
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
    retry_left: u8,
    rnr_left: u8,
    /// Waiting out an RNR NAK's timer.
    rnr_wait: bool,
    /// A missing READ response at this PSN was already asked for again:
    /// later out-of-order responses (still in flight from before) must not
    /// each start another retry (as rxe's `started_retry`).
    rd_retry: Option<u32>,
    /// Packets sent since the last ACK request.
    noack: u32,
    /// Reduction of the send window after losses (0: the full `WINDOW`).
    /// Go-back-N resends everything after a lost packet, so on a lossy
    /// path a smaller window wastes less; it grows back with progress.
    shrink: u32,
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
    /// A PSN sequence NAK was sent for the current gap.
    nak_sent: bool,
    recv: RecvCtx,
    write: WriteCtx,
    /// Results of recent atomics by PSN, for replays.
    atomics: [(u32, u64, bool); 8],
    /// The network type of the datagram being completed (an
    /// `enum rdma_network_type`), for a kernel completion.
    ud_net: u8,
    atomic_next: usize,
}

/// A response still to build.
#[derive(Clone, Copy)]
enum RespItem {
    Read {
        va: u64,
        rkey: u32,
        len: u32,
        psn: u32,
        npkts: u32,
        next: u32,
        msn: u32,
    },
    Ack {
        syndrome: Syndrome,
        psn: u32,
        msn: u32,
    },
    AtomicAck {
        psn: u32,
        msn: u32,
        orig: u64,
    },
}

/// Responses queued behind a READ (more than `max_dest_rd_atomic`, 128,
/// READs plus the ACKs between them).
const RESP_QUEUE: usize = 160;

/// READ response packets built per call in softirq context.
const RESP_BURST: u32 = 64;

/// A fixed ring of [`RespItem`]s: the responses not yet built, in PSN
/// order. READ responses are built a burst at a time (a large READ must not
/// become thousands of packets at once), and an ACK or atomic ACK for a
/// later request waits behind them. Heap-allocated: it is too large for a
/// kernel stack.
pub(crate) struct RespQueue {
    items: KVec<Option<RespItem>>,
    head: usize,
    len: usize,
}

impl RespQueue {
    /// An empty queue of [`RESP_QUEUE`] entries.
    pub(crate) fn new() -> Result<Self> {
        let mut items = KVec::with_capacity(RESP_QUEUE, GFP_KERNEL)?;
        for _ in 0..RESP_QUEUE {
            items.push(None, GFP_KERNEL)?;
        }
        Ok(Self {
            items,
            head: 0,
            len: 0,
        })
    }

    /// Drops every queued response.
    pub(crate) fn clear(&mut self) {
        for i in self.items.iter_mut() {
            *i = None;
        }
        self.head = 0;
        self.len = 0;
    }

    fn slot(&mut self, i: usize) -> Option<&mut Option<RespItem>> {
        let cap = self.items.len();
        self.items.get_mut(i % cap.max(1))
    }

    fn push(&mut self, item: RespItem) -> bool {
        // A new ACK replaces an ACK at the tail: ACKs are cumulative.
        if let (RespItem::Ack { .. }, Some(last)) = (item, self.len.checked_sub(1)) {
            let i = self.head + last;
            if let Some(slot @ Some(RespItem::Ack { .. })) = self.slot(i) {
                *slot = Some(item);
                return true;
            }
        }
        if self.len >= self.items.len() {
            return false;
        }
        let i = self.head + self.len;
        match self.slot(i) {
            Some(slot) => *slot = Some(item),
            None => return false,
        }
        self.len += 1;
        true
    }

    fn front(&self) -> Option<RespItem> {
        if self.len == 0 {
            None
        } else {
            self.items.get(self.head).copied().flatten()
        }
    }

    fn set_front(&mut self, item: RespItem) {
        if self.len != 0 {
            let h = self.head;
            if let Some(slot) = self.slot(h) {
                *slot = Some(item);
            }
        }
    }

    fn pop(&mut self) {
        if self.len != 0 {
            let h = self.head;
            if let Some(slot) = self.slot(h) {
                *slot = None;
            }
            self.head = (self.head + 1) % self.items.len().max(1);
            self.len -= 1;
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }
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

/// One RC QP's transport, entered with the QP lock held.
pub(crate) struct Ctx<'a> {
    pub(crate) qp: &'a QpState,
    pub(crate) inner: &'a mut QpInner,
    pub(crate) dev: &'a RroceDev,
    pub(crate) ndev: *mut sys::net_device,
    pub(crate) rcu: &'a rcu::Guard,
}

/// Result of gathering or scattering through SGEs.
enum SgeError {
    Prot,
    Len,
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
        if self.ndev.is_null() {
            return Ok(false);
        }
        let Some(total) = wire::packet_len(h.bth.opcode, payload_len) else {
            return Ok(false);
        };
        let ipv6 = matches!(
            self.inner.attrs.av.map(|a| a.network),
            Some(crate::ah::NetworkType::Ipv6)
        );
        let Some(mut skb) = net::alloc(self.ndev, ipv6, total) else {
            return Ok(false);
        };
        let buf = skb.buf();
        let Ok(hdr) = wire::build_headers(h, payload_len, buf) else {
            return Ok(false);
        };
        let Some(payload) = buf.get_mut(hdr..hdr + payload_len) else {
            return Ok(false);
        };
        fill(self, payload)?;
        if let Some(rest) = buf.get_mut(hdr + payload_len..) {
            rest.fill(0);
        }
        if self.inner.tx.push(skb, GFP_ATOMIC).is_err() {
            return Ok(false);
        }
        Ok(true)
    }

    fn send_ack(&mut self, syndrome: Syndrome, psn: u32) {
        let msn = self.inner.resp.msn & wire::QPN_MASK;
        if self.inner.resp_q.is_empty() {
            self.emit_ack(syndrome, psn, msn);
        } else {
            // Behind pending READ responses; dropped if the queue is full
            // (the requester's timer recovers).
            let _ = self.inner.resp_q.push(RespItem::Ack { syndrome, psn, msn });
        }
    }

    fn emit_ack(&mut self, syndrome: Syndrome, psn: u32, msn: u32) -> bool {
        let mut h = Headers::new(self.bth(Opcode::RcAck, psn));
        h.aeth = Some(Aeth { syndrome, msn });
        matches!(self.queue(&h, 0, |_, _| Ok(())), Ok(true))
    }

    fn emit_atomic_ack(&mut self, psn: u32, msn: u32, orig: u64) -> bool {
        let mut h = Headers::new(self.bth(Opcode::RcAtomicAck, psn));
        h.aeth = Some(Aeth {
            syndrome: Syndrome::Ack {
                credits: Syndrome::CREDITS_INVALID,
            },
            msn,
        });
        h.atomic_ack_eth = Some(AtomicAckEth { orig });
        matches!(self.queue(&h, 0, |_, _| Ok(())), Ok(true))
    }

    /// Packet `i` of a READ's responses; `false` if it could not be built
    /// now (memory).
    fn emit_read_packet(&mut self, item: RespItem) -> bool {
        let RespItem::Read {
            va,
            rkey,
            len,
            psn,
            npkts,
            next: i,
            msn,
        } = item
        else {
            return true;
        };
        let mtu = self.mtu();
        let off = i * mtu;
        let n = (len - off.min(len)).min(mtu);
        let opcode = match (npkts == 1, i == 0, i + 1 == npkts) {
            (true, _, _) => Opcode::RcReadResponseOnly,
            (false, true, _) => Opcode::RcReadResponseFirst,
            (false, false, true) => Opcode::RcReadResponseLast,
            _ => Opcode::RcReadResponseMiddle,
        };
        let mut h = Headers::new(self.bth(opcode, Psn::new(psn).add(i).get()));
        if opcode.info().has(wire::Ext::Aeth) {
            h.aeth = Some(Aeth {
                syndrome: Syndrome::Ack {
                    credits: Syndrome::CREDITS_INVALID,
                },
                msn,
            });
        }
        let va = va.wrapping_add(u64::from(off));
        let r = self.queue(&h, n as usize, |ctx, buf| {
            if buf.is_empty() {
                return Ok(());
            }
            // Looked up again: the MR may have gone since the request was
            // accepted; then the rest of this READ is not sent.
            let mr = mr::lookup(ctx.dev, rkey, ctx.rcu).ok_or(SgeError::Prot)?;
            mr.read(va, buf).map_err(|_| SgeError::Prot)
        });
        // Unreadable now (`Err`): give up on this READ.
        r.unwrap_or(true)
    }

    /// Builds up to `budget` queued responses, in order.
    pub(crate) fn pump_responses(&mut self, mut budget: u32) {
        while budget > 0 {
            let Some(item) = self.inner.resp_q.front() else {
                return;
            };
            let built = match item {
                RespItem::Ack { syndrome, psn, msn } => self.emit_ack(syndrome, psn, msn),
                RespItem::AtomicAck { psn, msn, orig } => self.emit_atomic_ack(psn, msn, orig),
                RespItem::Read { .. } => self.emit_read_packet(item),
            };
            if !built {
                return;
            }
            budget -= 1;
            match item {
                RespItem::Read {
                    va,
                    rkey,
                    len,
                    psn,
                    npkts,
                    next,
                    msn,
                } if next + 1 < npkts => self.inner.resp_q.set_front(RespItem::Read {
                    va,
                    rkey,
                    len,
                    psn,
                    npkts,
                    next: next + 1,
                    msn,
                }),
                _ => self.inner.resp_q.pop(),
            }
        }
    }

    // ---- SGEs ----------------------------------------------------------

    /// Walks `num_sge` SGEs in `elem`, calling `f` for each piece of the
    /// message bytes `[off, off + len)` with (MR, va, range in the caller's
    /// buffer).
    fn walk_sges(
        &self,
        elem: &[u8],
        sge_at: fn(&[u8], usize) -> Option<abi::Sge>,
        num_sge: u32,
        (mut off, len): (u32, u32),
        need: u32,
        mut f: impl FnMut(&mr::RroceMr, u64, core::ops::Range<usize>) -> Result<(), AccessError>,
    ) -> Result<(), SgeError> {
        let mut done = 0u32;
        for i in 0..num_sge as usize {
            if done == len {
                break;
            }
            let sge = sge_at(elem, i).ok_or(SgeError::Prot)?;
            if off >= sge.length {
                off -= sge.length;
                continue;
            }
            let n = (sge.length - off).min(len - done);
            let mr = mr::lookup(self.dev, sge.lkey, self.rcu).ok_or(SgeError::Prot)?;
            let va = sge.addr.checked_add(u64::from(off)).ok_or(SgeError::Prot)?;
            mr.check(self.qp.pd, va, u64::from(n), need)
                .map_err(|_| SgeError::Prot)?;
            f(mr, va, done as usize..(done + n) as usize).map_err(|_| SgeError::Prot)?;
            done += n;
            off = 0;
        }
        if done == len {
            Ok(())
        } else {
            Err(SgeError::Len)
        }
    }

    // ---- requester -----------------------------------------------------

    fn op_index(&self, k: u32) -> usize {
        ((self.inner.sq.index().wrapping_add(k)) & self.inner.sq.layout().index_mask()) as usize
    }

    fn shadow(&self, k: u32) -> &[u8] {
        let e = self.qp.sq_elem;
        let i = self.op_index(k) * e;
        self.inner.sq_shadow.get(i..i + e).unwrap_or(&[])
    }

    /// Copies and validates newly posted WQEs.
    fn fetch(&mut self) {
        if self.copy_new_wqes().is_err() {
            // A corrupt producer index: the QP cannot go on.
            self.enter_error();
        }
    }

    /// Copies every WQE published since the last call into its shadow
    /// slot and validates it; fails on a producer index the process
    /// corrupted.
    fn copy_new_wqes(&mut self) -> Result<(), crate::engine::ring::RingError> {
        let avail = self.inner.sq.available(&self.qp.sq_buf)?;
        while self.inner.req.fetched < avail {
            let k = self.inner.req.fetched;
            let Ok(slot) = self.inner.sq.peek_nth(&self.qp.sq_buf, k) else {
                break;
            };
            let e = self.qp.sq_elem;
            let dst = slot.index() as usize * e;
            let Some(shadow) = self.inner.sq_shadow.get_mut(dst..dst + e) else {
                break;
            };
            // SAFETY: the slot lies in the ring buffer and holds `e` bytes
            // (its layout); the process may scribble on it meanwhile, which
            // only changes what we copy, validated below.
            unsafe {
                core::ptr::copy_nonoverlapping(
                    self.qp.sq_buf.at(slot.offset()),
                    shadow.as_mut_ptr(),
                    e,
                )
            };
            let op = self.validate(k);
            self.set_op(k, op);
            self.inner.req.fetched += 1;
        }
        Ok(())
    }

    fn validate(&self, k: u32) -> SendOp {
        let elem = self.shadow(k);
        let mut op = SendOp::default();
        let Some(w) = abi::SendWqe::from_bytes(elem) else {
            op.invalid = wc::LOC_QP_OP_ERR;
            return op;
        };
        op.wr_id = w.wr.wr_id;
        op.opcode = w.wr.opcode;
        op.flags = w.wr.send_flags;
        op.ex = w.wr.ex;
        if op.flags & !KNOWN_SEND_FLAGS != 0 {
            // A flag rroce does not know (NDKPI: invalid flags). The
            // provider posts without checking, so the request is refused
            // here: it completes in error and is never sent.
            op.invalid = wc::LOC_QP_OP_ERR;
            return op;
        }
        let supported = matches!(
            op.opcode,
            abi::WR_SEND
                | abi::WR_SEND_WITH_IMM
                | abi::WR_SEND_WITH_INV
                | abi::WR_RDMA_WRITE
                | abi::WR_RDMA_WRITE_WITH_IMM
                | abi::WR_RDMA_READ
                | abi::WR_ATOMIC_CMP_AND_SWP
                | abi::WR_ATOMIC_FETCH_AND_ADD
        );
        if !supported {
            op.invalid = wc::LOC_QP_OP_ERR;
            return op;
        }
        match op.opcode {
            abi::WR_RDMA_WRITE | abi::WR_RDMA_WRITE_WITH_IMM | abi::WR_RDMA_READ => {
                let r = w.wr.wr.rdma();
                op.remote_addr = r.remote_addr;
                op.rkey = r.rkey;
            }
            abi::WR_ATOMIC_CMP_AND_SWP | abi::WR_ATOMIC_FETCH_AND_ADD => {
                let a = w.wr.wr.atomic();
                op.remote_addr = a.remote_addr;
                op.rkey = a.rkey;
                op.compare_add = a.compare_add;
                op.swap = a.swap;
            }
            _ => {}
        }
        op.inline = op.flags & SEND_INLINE != 0;
        if op.inline {
            if op.opcode == abi::WR_RDMA_READ || op.is_read_or_atomic() {
                op.invalid = wc::LOC_QP_OP_ERR;
                return op;
            }
            if w.dma.length > self.qp.sq_max_inline {
                op.invalid = wc::LOC_LEN_ERR;
                return op;
            }
            op.len = w.dma.length;
        } else {
            if w.dma.num_sge > self.qp.sq_max_sge {
                op.invalid = wc::LOC_QP_OP_ERR;
                return op;
            }
            op.num_sge = w.dma.num_sge;
            let mut total: u64 = 0;
            for i in 0..op.num_sge as usize {
                match abi::SendWqe::sge(elem, i) {
                    Some(s) => total += u64::from(s.length),
                    None => {
                        op.invalid = wc::LOC_QP_OP_ERR;
                        return op;
                    }
                }
            }
            if total > u64::from(abi::MAX_MSG_SIZE) {
                op.invalid = wc::LOC_LEN_ERR;
                return op;
            }
            op.len = total as u32;
        }
        if op.is_read_or_atomic() && op.opcode != abi::WR_RDMA_READ && op.len < 8 {
            op.invalid = wc::LOC_LEN_ERR;
        }
        op
    }

    fn mtu(&self) -> u32 {
        self.inner.mtu
    }

    /// How many WQEs (from the consumer index) have had packets sent.
    fn started(&self) -> u32 {
        let r = &self.inner.req;
        (r.max_cur + u32::from(r.max_cur_off > 0)).min(r.fetched)
    }

    fn outstanding_rd(&self) -> u32 {
        let mut n = 0;
        for k in 0..self.started() {
            let op = self.op(k);
            if op.is_read_or_atomic() && !op.done {
                n += 1;
            }
        }
        n
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

    /// Fetches new WQEs and sends what the window allows.
    pub(crate) fn run_requester(&mut self) {
        if self.inner.state == sys::ib_qp_state_IB_QPS_ERR {
            self.fetch();
            self.flush_sq();
            return;
        }
        if self.inner.state != sys::ib_qp_state_IB_QPS_RTS {
            return;
        }
        self.fetch();
        let was_idle = self.inner.req.una == self.inner.req.max_psn;
        while !self.inner.req.rnr_wait && self.inner.req.cur < self.inner.req.fetched {
            let k = self.inner.req.cur;
            let mut op = self.op(k);
            if op.invalid != 0 {
                // Completes (with its error) once everything before it has.
                break;
            }
            let inflight = Psn::new(self.inner.req.psn).distance_from(Psn::new(self.inner.req.una));
            if inflight >= self.window() {
                break;
            }
            if self.inner.req.cur_off == 0 {
                if op.flags & SEND_FENCE != 0 && self.outstanding_rd() > 0 {
                    break;
                }
                if op.is_read_or_atomic()
                    && self.outstanding_rd() >= u32::from(self.inner.attrs.max_rd_atomic).max(1)
                {
                    break;
                }
                let first = Psn::new(self.inner.req.psn);
                op.first_psn = first.get();
                op.npkts = match op.opcode {
                    abi::WR_RDMA_READ => op.len.div_ceil(self.mtu()).max(1),
                    abi::WR_ATOMIC_CMP_AND_SWP | abi::WR_ATOMIC_FETCH_AND_ADD => 1,
                    _ => op.len.div_ceil(self.mtu()).max(1),
                };
                op.rd_pkts = 0;
                self.set_op(k, op);
            }
            match self.send_next_packet(k, op) {
                Ok(true) => {}
                Ok(false) => break,
                Err(status) => {
                    // A local protection or length error: this WQE completes
                    // in error after everything before it.
                    op.invalid = status;
                    self.set_op(k, op);
                    break;
                }
            }
        }
        if was_idle && self.inner.req.una != self.inner.req.max_psn {
            self.arm_retry_timer();
        }
        // Nothing in flight: an invalid WQE at the head completes now.
        self.complete_ready();
    }

    /// Sends the next packet of WQE `k`. `Ok(false)`: could not (memory).
    fn send_next_packet(&mut self, k: u32, op: SendOp) -> Result<bool, u32> {
        let mtu = self.mtu();
        let off = self.inner.req.cur_off;
        let psn = self.inner.req.psn;
        let first = off == 0;
        match op.opcode {
            abi::WR_RDMA_READ => {
                let mut h = Headers::new(self.bth(Opcode::RcReadRequest, psn));
                h.bth.ack_req = true;
                h.reth = Some(Reth {
                    va: op.remote_addr.wrapping_add(u64::from(off)),
                    rkey: op.rkey,
                    len: op.len - off,
                });
                if !matches!(self.queue(&h, 0, |_, _| Ok(())), Ok(true)) {
                    return Ok(false);
                }
                let pkts_left = op.npkts - off / mtu;
                self.advance(pkts_left, true);
                return Ok(true);
            }
            abi::WR_ATOMIC_CMP_AND_SWP | abi::WR_ATOMIC_FETCH_AND_ADD => {
                let opcode = if op.opcode == abi::WR_ATOMIC_CMP_AND_SWP {
                    Opcode::RcCompareSwap
                } else {
                    Opcode::RcFetchAdd
                };
                let mut h = Headers::new(self.bth(opcode, psn));
                h.bth.ack_req = true;
                h.atomic_eth = Some(AtomicEth {
                    va: op.remote_addr,
                    rkey: op.rkey,
                    swap_add: if op.opcode == abi::WR_ATOMIC_CMP_AND_SWP {
                        op.swap
                    } else {
                        op.compare_add
                    },
                    compare: op.compare_add,
                });
                if !matches!(self.queue(&h, 0, |_, _| Ok(())), Ok(true)) {
                    return Ok(false);
                }
                self.advance(1, true);
                return Ok(true);
            }
            _ => {}
        }
        let n = (op.len - off).min(mtu);
        let last = off + n >= op.len;
        let is_write = matches!(op.opcode, abi::WR_RDMA_WRITE | abi::WR_RDMA_WRITE_WITH_IMM);
        let opcode = match (is_write, first, last, op.opcode) {
            (false, true, true, abi::WR_SEND_WITH_IMM) => Opcode::RcSendOnlyImm,
            (false, true, true, abi::WR_SEND_WITH_INV) => Opcode::RcSendOnlyInv,
            (false, true, true, _) => Opcode::RcSendOnly,
            (false, true, false, _) => Opcode::RcSendFirst,
            (false, false, false, _) => Opcode::RcSendMiddle,
            (false, false, true, abi::WR_SEND_WITH_IMM) => Opcode::RcSendLastImm,
            (false, false, true, abi::WR_SEND_WITH_INV) => Opcode::RcSendLastInv,
            (false, false, true, _) => Opcode::RcSendLast,
            (true, true, true, abi::WR_RDMA_WRITE_WITH_IMM) => Opcode::RcWriteOnlyImm,
            (true, true, true, _) => Opcode::RcWriteOnly,
            (true, true, false, _) => Opcode::RcWriteFirst,
            (true, false, false, _) => Opcode::RcWriteMiddle,
            (true, false, true, abi::WR_RDMA_WRITE_WITH_IMM) => Opcode::RcWriteLastImm,
            (true, false, true, _) => Opcode::RcWriteLast,
        };
        let mut h = Headers::new(self.bth(opcode, psn));
        let info = opcode.info();
        if info.has(wire::Ext::Reth) {
            h.reth = Some(Reth {
                va: op.remote_addr,
                rkey: op.rkey,
                len: op.len,
            });
        }
        if info.has(wire::Ext::ImmDt) {
            h.imm_dt = Some(ImmDt {
                imm: u32::from_be(op.ex),
            });
        }
        if info.has(wire::Ext::Ieth) {
            h.ieth = Some(Ieth { rkey: op.ex });
        }
        if last {
            h.bth.solicited = op.flags & SEND_SOLICITED != 0;
        }
        self.inner.req.noack += 1;
        // A shrunken window must not stall waiting for an ACK nobody asked
        // for: ask at least twice per window.
        if last || self.inner.req.noack >= ACK_EVERY.min(self.window() / 2) {
            h.bth.ack_req = true;
        }
        let elem_k = k;
        let r = self.queue(&h, n as usize, |ctx, buf| {
            let elem = ctx.shadow(elem_k);
            if op.inline {
                let src = abi::SendWqe::payload(elem, op.len as usize).ok_or(SgeError::Len)?;
                buf.copy_from_slice(
                    src.get(off as usize..(off + n) as usize)
                        .ok_or(SgeError::Len)?,
                );
                Ok(())
            } else {
                ctx.walk_sges(
                    elem,
                    abi::SendWqe::sge,
                    op.num_sge,
                    (off, n),
                    0,
                    |mr, va, r| mr.read(va, buf.get_mut(r).ok_or(AccessError::Bounds)?),
                )
            }
        });
        match r {
            Ok(true) => {
                if h.bth.ack_req {
                    self.inner.req.noack = 0;
                }
                self.inner.req.cur_off += n;
                self.advance(1, last);
                Ok(true)
            }
            Ok(false) => Ok(false),
            Err(SgeError::Prot) => Err(wc::LOC_PROT_ERR),
            Err(SgeError::Len) => Err(wc::LOC_LEN_ERR),
        }
    }

    /// Moves the send PSN by `npkts`; `done` ends the current WQE.
    fn advance(&mut self, npkts: u32, done: bool) {
        let r = &mut self.inner.req;
        r.psn = Psn::new(r.psn).add(npkts).get();
        if done {
            r.cur += 1;
            r.cur_off = 0;
        }
        if Psn::new(r.psn).diff(Psn::new(r.max_psn)) >= 0 {
            r.max_psn = r.psn;
            r.max_cur = r.cur;
            r.max_cur_off = r.cur_off;
        }
    }

    fn arm_retry_timer(&self) {
        if let Some(us) = timeout_us(self.inner.attrs.timeout) {
            // SAFETY: the timer lives as long as the QP.
            unsafe { sys::rroce_helper_timer_arm_us(self.qp.timer, us as kernel::ffi::c_ulong) };
        }
    }

    /// Packets that may be unacknowledged at once.
    fn window(&self) -> u32 {
        WINDOW - self.inner.req.shrink.min(WINDOW - MIN_WINDOW)
    }

    /// A loss (sequence NAK or timeout): halve the window.
    fn window_loss(&mut self) {
        let w = self.window();
        self.inner.req.shrink = WINDOW - (w / 2).max(MIN_WINDOW);
    }

    /// Forward progress (`una` moved): the retry budgets start over and
    /// the window grows back by one packet.
    fn progress(&mut self) {
        self.inner.req.retry_left = self.inner.attrs.retry_cnt;
        self.inner.req.rnr_left = self.inner.attrs.rnr_retry;
        self.inner.req.shrink = self.inner.req.shrink.saturating_sub(1);
    }

    /// Asks again for the READ/atomic response at `missing`, once until it
    /// arrives (the timer covers a lost retry).
    fn retry_read(&mut self, missing: Psn) {
        if self.inner.req.rd_retry == Some(missing.get()) {
            return;
        }
        self.inner.req.rd_retry = Some(missing.get());
        self.rewind(missing);
    }

    /// Goes back (or forward, up to what was sent) to `psn`: the WQE
    /// holding it is resent from that packet.
    fn rewind(&mut self, psn: Psn) {
        if psn.get() == self.inner.req.max_psn {
            let r = &mut self.inner.req;
            r.psn = r.max_psn;
            r.cur = r.max_cur;
            r.cur_off = r.max_cur_off;
            return;
        }
        let (cur, cur_off) = (self.inner.req.max_cur, self.inner.req.max_cur_off);
        for k in 0..self.inner.req.fetched {
            let mut op = self.op(k);
            if k > cur || (k == cur && cur_off == 0) {
                break;
            }
            if op.done {
                continue;
            }
            let first = Psn::new(op.first_psn);
            let idx = psn.distance_from(first);
            if idx < op.npkts.max(1) {
                self.inner.req.cur = k;
                self.inner.req.cur_off = idx * self.mtu();
                self.inner.req.psn = psn.get();
                self.inner.req.noack = 0;
                if op.opcode == abi::WR_RDMA_READ {
                    op.rd_pkts = idx;
                    self.set_op(k, op);
                }
                self.dev.counters.inc(Counter::Retransmits);
                return;
            }
        }
    }

    /// Retires completed WQEs at the head, in order, posting their CQEs.
    fn complete_ready(&mut self) {
        loop {
            if self.inner.req.fetched == 0 {
                return;
            }
            let op = self.op(0);
            if op.invalid != 0
                && self.inner.req.cur == 0
                && self.inner.req.una == self.inner.req.max_psn
            {
                self.complete_head(op.invalid);
                self.enter_error();
                return;
            }
            if !op.done {
                return;
            }
            self.complete_head(wc::SUCCESS);
        }
    }

    /// Retires WQE 0 with `status`.
    fn complete_head(&mut self, status: u32) {
        let op = self.op(0);
        let signaled = self.qp.sig_all || op.flags & SEND_SIGNALED != 0;
        if signaled || status != wc::SUCCESS {
            let cqe = abi::Cqe {
                wr_id: op.wr_id,
                status,
                opcode: op.wc_opcode(),
                byte_len: op.len,
                qp_num: self.qp.qpn,
                ..Default::default()
            };
            self.post_cqe(self.qp.send_cq, &cqe);
        }
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
    }

    fn post_cqe(&self, cq: *mut sys::ib_cq, cqe: &abi::Cqe) {
        let kind = if cqe.status != wc::SUCCESS {
            Kind::Error
        } else {
            Kind::Unsolicited
        };
        self.post_cqe_kind(cq, cqe, kind);
    }

    fn post_cqe_kind(&self, cq: *mut sys::ib_cq, cqe: &abi::Cqe, kind: Kind) {
        // SAFETY: the QP holds a use count on its CQs (the core's), so they
        // outlive it.
        let cq = unsafe { RroceCq::state(cq) };
        // An overflow kills the CQ and raises its error event.
        if cq.is_user() {
            let _ = cq.post(&cqe.to_bytes(), kind);
        } else {
            let wc = self.kernel_wc(cqe);
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

    /// A completion as a kernel consumer polls it: `struct ib_wc`, with
    /// the QP pointer and the kernel's flag encoding.
    fn kernel_wc(&self, cqe: &abi::Cqe) -> sys::ib_wc {
        // SAFETY: all-zero is a valid `ib_wc`.
        let mut wc: sys::ib_wc = unsafe { core::mem::zeroed() };
        wc.__bindgen_anon_1.wr_id = cqe.wr_id;
        wc.status = cqe.status;
        wc.opcode = cqe.opcode;
        wc.byte_len = cqe.byte_len;
        wc.qp = self.qp.ibqp;
        wc.ex.invalidate_rkey = cqe.ex;
        wc.src_qp = cqe.src_qp;
        let mut flags = 0;
        if cqe.wc_flags & abi::WC_WITH_IMM != 0 {
            flags |= sys::ib_wc_flags_IB_WC_WITH_IMM;
        }
        if cqe.wc_flags & abi::WC_WITH_INV != 0 {
            flags |= sys::ib_wc_flags_IB_WC_WITH_INVALIDATE;
        }
        if cqe.wc_flags & abi::WC_GRH != 0 {
            flags |= sys::ib_wc_flags_IB_WC_GRH;
        }
        wc.wc_flags = flags as i32;
        wc.port_num = u32::from(cqe.port_num);
        if cqe.wc_flags & abi::WC_GRH != 0 {
            // A datagram: the MAD layer and the CM read the GRH area by it.
            wc.network_hdr_type = self.inner.resp.ud_net;
            wc.wc_flags |= sys::ib_wc_flags_IB_WC_WITH_NETWORK_HDR_TYPE as i32;
        }
        wc
    }

    /// Marks WQEs acknowledged up to and including `psn` (SEND/WRITE; a
    /// READ or atomic acknowledged implicitly before its response means the
    /// response was lost: go back to it).
    fn ack_through(&mut self, psn: Psn) {
        // The acknowledgement cannot move `una` past READ/atomic responses
        // that have not arrived.
        let mut next = psn.next();
        for k in 0..self.started() {
            let mut op = self.op(k);
            if op.done {
                continue;
            }
            if op.is_read_or_atomic() {
                let missing = Psn::new(op.first_psn).add(op.rd_pkts);
                if missing.diff(psn) <= 0 {
                    next = missing;
                    if op.last_psn().diff(psn) <= 0 {
                        self.retry_read(missing);
                    }
                }
                break;
            }
            if op.last_psn().diff(psn) > 0 {
                break;
            }
            op.done = true;
            self.set_op(k, op);
        }
        if next.diff(Psn::new(self.inner.req.una)) > 0
            && Psn::new(self.inner.req.max_psn).diff(next) >= 0
        {
            self.inner.req.una = next.get();
            self.progress();
        }
    }

    /// Completes WQE 0 and moves the QP to the error state (which flushes
    /// everything else).
    fn fail_head(&mut self, status: u32) {
        pr_debug!(
            "qp {}: request failed with status {} (una {:#x}, psn {:#x})\n",
            self.qp.qpn,
            status,
            self.inner.req.una,
            self.inner.req.psn
        );
        if self.inner.req.fetched > 0 {
            self.complete_head(status);
        }
        self.enter_error();
    }

    /// The completer: an ACK, NAK, READ response or atomic ACK.
    pub(crate) fn on_response(&mut self, pkt: &wire::Packet<'_>) {
        if self.inner.state != sys::ib_qp_state_IB_QPS_RTS
            && self.inner.state != sys::ib_qp_state_IB_QPS_SQD
        {
            return;
        }
        let psn = pkt.psn();
        let info = pkt.info();
        // Only responses to what was sent count. An ACK or NAK may cover
        // packets sent before a rewind for retransmission (up to `max_psn`);
        // READ and atomic responses count only up to the resend point, so
        // responses still in flight from before a rewind start no retry.
        let limit = if info.kind == OpKind::Acknowledge {
            self.inner.req.max_psn
        } else {
            self.inner.req.psn
        };
        if psn.diff(Psn::new(self.inner.req.una)) < 0 || psn.diff(Psn::new(limit)) >= 0 {
            return;
        }
        match info.kind {
            OpKind::Acknowledge => {
                let Some(aeth) = pkt.headers().aeth else {
                    return;
                };
                match aeth.syndrome {
                    Syndrome::Ack { .. } => self.ack_through(psn),
                    Syndrome::RnrNak { timer } => {
                        self.dev.counters.inc(Counter::RcvdRnrErr);
                        if psn.get() != self.inner.req.una {
                            self.ack_through(psn.prev());
                        }
                        self.complete_ready();
                        if self.inner.req.rnr_left == 0 {
                            self.fail_head(wc::RNR_RETRY_EXC_ERR);
                            return;
                        }
                        if self.inner.req.rnr_left != 7 {
                            self.inner.req.rnr_left -= 1;
                        }
                        let una = Psn::new(self.inner.req.una);
                        self.rewind(una);
                        self.inner.req.rnr_wait = true;
                        // SAFETY: the timer lives as long as the QP.
                        unsafe {
                            sys::rroce_helper_timer_arm_us(
                                self.qp.timer,
                                wire::rnr_timer_usecs(timer) as kernel::ffi::c_ulong,
                            )
                        };
                        return;
                    }
                    Syndrome::Nak(code) => {
                        if psn.get() != self.inner.req.una {
                            self.ack_through(psn.prev());
                        }
                        self.complete_ready();
                        match code {
                            NakCode::PsnSequenceError => {
                                // Go back to the oldest unacknowledged
                                // packet: the NAKed one, or a READ
                                // response missing before it.
                                if self.inner.req.rd_retry.is_none() {
                                    let una = Psn::new(self.inner.req.una);
                                    self.window_loss();
                                    self.rewind(una);
                                }
                            }
                            NakCode::InvalidRequest => return self.fail_head(wc::REM_INV_REQ_ERR),
                            NakCode::RemoteAccessError => {
                                return self.fail_head(wc::REM_ACCESS_ERR)
                            }
                            NakCode::RemoteOperationalError => {
                                return self.fail_head(wc::REM_OP_ERR)
                            }
                            NakCode::InvalidRdRequest => return self.fail_head(wc::BAD_RESP_ERR),
                        }
                    }
                }
            }
            OpKind::RdmaReadResponse => self.on_read_response(pkt),
            OpKind::AtomicAcknowledge => self.on_atomic_ack(pkt),
            _ => return,
        }
        // Acknowledged beyond the resend point: skip what arrived.
        if Psn::new(self.inner.req.una).diff(Psn::new(self.inner.req.psn)) > 0 {
            let una = Psn::new(self.inner.req.una);
            self.rewind(una);
        }
        self.complete_ready();
        if self.inner.req.una == self.inner.req.max_psn {
            // SAFETY: the timer lives as long as the QP.
            unsafe { sys::rroce_helper_timer_cancel(self.qp.timer) };
        } else if !self.inner.req.rnr_wait {
            self.arm_retry_timer();
        }
        self.run_requester();
    }

    /// The READ or atomic WQE whose response PSNs include `psn`, after
    /// implicitly acknowledging every SEND/WRITE before it.
    fn response_target(&mut self, psn: Psn) -> Option<(u32, SendOp)> {
        for k in 0..self.started() {
            let mut op = self.op(k);
            if op.done {
                continue;
            }
            if !op.is_read_or_atomic() {
                if op.last_psn().diff(psn) < 0 {
                    op.done = true;
                    self.set_op(k, op);
                    continue;
                }
                return None;
            }
            let idx = psn.distance_from(Psn::new(op.first_psn));
            return (idx < op.npkts.max(1)).then_some((k, op));
        }
        None
    }

    fn on_read_response(&mut self, pkt: &wire::Packet<'_>) {
        let psn = pkt.psn();
        let Some((k, mut op)) = self.response_target(psn) else {
            return;
        };
        if op.opcode != abi::WR_RDMA_READ {
            return self.fail_head(wc::BAD_RESP_ERR);
        }
        let idx = psn.distance_from(Psn::new(op.first_psn));
        if idx != op.rd_pkts {
            // Out of order: go back to the first missing response.
            self.retry_read(Psn::new(op.first_psn).add(op.rd_pkts));
            return;
        }
        let mtu = self.mtu();
        let off = idx * mtu;
        let data = pkt.payload();
        let expect = (op.len - off.min(op.len)).min(mtu) as usize;
        let pos = pkt.info().position;
        let last = idx + 1 == op.npkts;
        // A READ resumed after a loss is a new response message starting
        // at the resumption PSN, so First/Only may appear at any index.
        let pos_ok = match pos {
            Position::Only | Position::Last => last,
            Position::First | Position::Middle => !last,
        };
        if !pos_ok || data.len() != expect {
            return self.fail_head(wc::BAD_RESP_ERR);
        }
        let elem_k = k;
        let elem = self.shadow(elem_k);
        let r = self.walk_sges(
            elem,
            abi::SendWqe::sge,
            op.num_sge,
            (off, data.len() as u32),
            sys::ib_access_flags_IB_ACCESS_LOCAL_WRITE,
            |mr, va, r| mr.write(va, data.get(r).ok_or(AccessError::Bounds)?),
        );
        if r.is_err() {
            if k == 0 {
                return self.fail_head(wc::LOC_PROT_ERR);
            }
            op.invalid = wc::LOC_PROT_ERR;
            self.set_op(k, op);
            return;
        }
        op.rd_pkts += 1;
        if self.inner.req.rd_retry == Some(psn.get()) {
            self.inner.req.rd_retry = None;
        }
        if last {
            op.done = true;
            self.set_op(k, op);
            self.ack_through_done(psn);
        } else {
            self.set_op(k, op);
            self.inner.req.una = psn.next().get();
            self.progress();
        }
    }

    /// After a READ/atomic response completes its WQE at `psn`.
    fn ack_through_done(&mut self, psn: Psn) {
        let next = psn.next();
        if next.diff(Psn::new(self.inner.req.una)) > 0 {
            self.inner.req.una = next.get();
        }
        self.progress();
    }

    fn on_atomic_ack(&mut self, pkt: &wire::Packet<'_>) {
        let psn = pkt.psn();
        let Some((k, mut op)) = self.response_target(psn) else {
            return;
        };
        let Some(ack) = pkt.headers().atomic_ack_eth else {
            return;
        };
        if op.opcode == abi::WR_RDMA_READ || op.first_psn != psn.get() {
            return self.fail_head(wc::BAD_RESP_ERR);
        }
        let orig = ack.orig.to_ne_bytes();
        let elem = self.shadow(k);
        let r = self.walk_sges(
            elem,
            abi::SendWqe::sge,
            op.num_sge,
            (0, 8),
            sys::ib_access_flags_IB_ACCESS_LOCAL_WRITE,
            |mr, va, r| mr.write(va, orig.get(r).ok_or(AccessError::Bounds)?),
        );
        if r.is_err() {
            return self.fail_head(wc::LOC_PROT_ERR);
        }
        if self.inner.req.rd_retry == Some(psn.get()) {
            self.inner.req.rd_retry = None;
        }
        op.done = true;
        self.set_op(k, op);
        self.ack_through_done(psn);
    }

    /// The QP's timer: retransmission timeout, or the end of an RNR wait.
    pub(crate) fn on_timer(&mut self) {
        if self.inner.state != sys::ib_qp_state_IB_QPS_RTS {
            return;
        }
        if self.inner.req.rnr_wait {
            self.inner.req.rnr_wait = false;
        } else {
            if self.inner.req.una == self.inner.req.max_psn {
                return;
            }
            if self.inner.req.retry_left == 0 {
                self.fail_head(wc::RETRY_EXC_ERR);
                return;
            }
            self.inner.req.retry_left -= 1;
            self.inner.req.rd_retry = None;
            self.window_loss();
            let una = Psn::new(self.inner.req.una);
            self.rewind(una);
        }
        self.arm_retry_timer();
        self.run_requester();
    }

    // ---- errors --------------------------------------------------------

    /// Moves the QP to the error state and flushes both queues.
    pub(crate) fn enter_error(&mut self) {
        self.inner.state = sys::ib_qp_state_IB_QPS_ERR;
        self.inner.resp_q.clear();
        // SAFETY: the timer lives as long as the QP.
        unsafe { sys::rroce_helper_timer_cancel(self.qp.timer) };
        self.inner.req.rnr_wait = false;
        self.flush_sq();
        self.flush_rq();
    }

    /// Completes every fetched WQE with `IB_WC_WR_FLUSH_ERR`.
    fn flush_sq(&mut self) {
        // Already failing: a bad index only ends the copying.
        let _ = self.copy_new_wqes();
        while self.inner.req.fetched > 0 {
            self.complete_head(wc::WR_FLUSH_ERR);
        }
        let r = &mut self.inner.req;
        r.una = r.psn;
        r.max_psn = r.psn;
        r.cur = 0;
        r.cur_off = 0;
        r.max_cur = 0;
        r.max_cur_off = 0;
    }

    /// Completes every posted receive WQE with `IB_WC_WR_FLUSH_ERR`.
    pub(crate) fn flush_rq(&mut self) {
        self.inner.resp.recv.active = false;
        let Some(rq_buf) = self.qp.rq_buf.as_ref() else {
            return;
        };
        while let Ok(slot) = self.inner.rq.peek(rq_buf) {
            let e = self.qp.rq_elem;
            let mut tmp = [0u8; abi::RECV_WQE_HEADER_SIZE];
            // SAFETY: the slot holds `e >= RECV_WQE_HEADER_SIZE` bytes.
            unsafe {
                core::ptr::copy_nonoverlapping(
                    rq_buf.at(slot.offset()),
                    tmp.as_mut_ptr(),
                    tmp.len().min(e),
                )
            };
            let wr_id = abi::RecvWqe::from_bytes(&tmp).map(|w| w.wr_id).unwrap_or(0);
            let cqe = abi::Cqe {
                wr_id,
                status: wc::WR_FLUSH_ERR,
                opcode: sys::ib_wc_opcode_IB_WC_RECV,
                qp_num: self.qp.qpn,
                ..Default::default()
            };
            self.post_cqe(self.qp.recv_cq, &cqe);
            if self.inner.rq.advance(slot, rq_buf).is_err() {
                break;
            }
        }
    }

    // ---- responder -----------------------------------------------------

    fn nak(&mut self, code: NakCode, psn: u32) {
        self.send_ack(Syndrome::Nak(code), psn);
    }

    /// A class C/D error: NAK, then the QP goes to the error state.
    fn resp_fatal(&mut self, code: NakCode, psn: u32) {
        pr_debug!(
            "qp {}: responder error {:?} at psn {:#x}\n",
            self.qp.qpn,
            code,
            psn
        );
        // Nothing queued behind an error is sent; the NAK goes now.
        self.inner.resp_q.clear();
        let msn = self.inner.resp.msn & wire::QPN_MASK;
        self.emit_ack(Syndrome::Nak(code), psn, msn);
        self.enter_error();
    }

    /// The responder: a request packet.
    pub(crate) fn on_request(&mut self, pkt: &wire::Packet<'_>, src_qpn_hint: u32) {
        let _ = src_qpn_hint;
        let st = self.inner.state;
        if st != sys::ib_qp_state_IB_QPS_RTR
            && st != sys::ib_qp_state_IB_QPS_RTS
            && st != sys::ib_qp_state_IB_QPS_SQD
        {
            return;
        }
        let psn = pkt.psn();
        let epsn = Psn::new(self.inner.resp.epsn);
        match psn.classify(epsn) {
            PsnClass::Expected => {}
            PsnClass::Duplicate => {
                self.dev.counters.inc(Counter::DupRequest);
                return self.duplicate(pkt);
            }
            PsnClass::Ahead => {
                if !self.inner.resp.nak_sent {
                    self.inner.resp.nak_sent = true;
                    self.dev.counters.inc(Counter::OutOfSeqRequest);
                    self.nak(NakCode::PsnSequenceError, epsn.get());
                }
                return;
            }
        }
        let info = pkt.info();
        let opcode = pkt.opcode();
        // Opcode sequence: a message in progress continues, else a new one
        // starts.
        let in_send = self.inner.resp.recv.active;
        let in_write = self.inner.resp.write.active;
        let starts = matches!(info.position, Position::First | Position::Only);
        let seq_ok = match info.kind {
            OpKind::Send => (in_send && !starts) || (!in_send && !in_write && starts),
            OpKind::RdmaWrite => (in_write && !starts) || (!in_send && !in_write && starts),
            _ => !in_send && !in_write,
        };
        if !seq_ok {
            return self.resp_fatal(NakCode::InvalidRequest, psn.get());
        }
        if let Some(mtu_err) = self.check_payload_mtu(pkt) {
            return self.resp_fatal(mtu_err, psn.get());
        }
        let _ = opcode;
        match info.kind {
            OpKind::Send => self.on_send(pkt),
            OpKind::RdmaWrite => self.on_write(pkt),
            OpKind::RdmaReadRequest => self.on_read_request(pkt, false),
            OpKind::CompareSwap | OpKind::FetchAdd => self.on_atomic(pkt, false),
            _ => self.resp_fatal(NakCode::InvalidRequest, psn.get()),
        }
    }

    fn check_payload_mtu(&self, pkt: &wire::Packet<'_>) -> Option<NakCode> {
        let mtu = self.mtu() as usize;
        let len = pkt.payload().len();
        let ok = match pkt.info().kind {
            OpKind::Send | OpKind::RdmaWrite => match pkt.info().position {
                Position::First | Position::Middle => len == mtu,
                Position::Last => len != 0 && len <= mtu,
                Position::Only => len <= mtu,
            },
            _ => true,
        };
        (!ok).then_some(NakCode::InvalidRequest)
    }

    /// The packet at `epsn` was processed.
    fn resp_next(&mut self, pkt: &wire::Packet<'_>, end_of_message: bool) {
        self.inner.resp.nak_sent = false;
        self.inner.resp.epsn = pkt.psn().next().get();
        if end_of_message {
            self.inner.resp.msn = (self.inner.resp.msn + 1) & wire::QPN_MASK;
        }
        if pkt.bth().ack_req {
            self.send_ack(
                Syndrome::Ack {
                    credits: Syndrome::CREDITS_INVALID,
                },
                pkt.psn().get(),
            );
        }
    }

    /// Takes the next receive WQE into `rq_shadow`; `false` if none.
    fn take_recv(&mut self) -> Result<bool, ()> {
        let Some(rq_buf) = self.qp.rq_buf.as_ref() else {
            return Err(());
        };
        let slot = match self.inner.rq.peek(rq_buf) {
            Ok(s) => s,
            Err(crate::engine::ring::RingError::Empty) => return Ok(false),
            Err(_) => return Err(()),
        };
        let e = self.qp.rq_elem;
        if self.inner.rq_shadow.len() < e {
            return Err(());
        }
        // SAFETY: the slot holds `e` bytes; copied before validation.
        unsafe {
            core::ptr::copy_nonoverlapping(
                rq_buf.at(slot.offset()),
                self.inner.rq_shadow.as_mut_ptr(),
                e,
            )
        };
        let elem = &self.inner.rq_shadow[..e];
        let w = abi::RecvWqe::from_bytes(elem).ok_or(())?;
        let mut r = RecvCtx {
            active: true,
            wr_id: w.wr_id,
            num_sge: w.dma.num_sge,
            len: 0,
            off: 0,
        };
        if r.num_sge > self.qp.rq_max_sge {
            r.num_sge = 0;
            r.len = 0;
            // Reported as a length error when data arrives.
        } else {
            let mut total: u64 = 0;
            for i in 0..r.num_sge as usize {
                total += u64::from(abi::RecvWqe::sge(elem, i).map(|s| s.length).unwrap_or(0));
            }
            r.len = total.min(u64::from(u32::MAX)) as u32;
        }
        self.inner.resp.recv = r;
        Ok(true)
    }

    /// Retires the receive WQE in `rq_shadow` with a CQE.
    fn complete_recv(&mut self, cqe: abi::Cqe, solicited: bool) {
        let Some(rq_buf) = self.qp.rq_buf.as_ref() else {
            return;
        };
        if let Ok(slot) = self.inner.rq.peek(rq_buf) {
            let _ = self.inner.rq.advance(slot, rq_buf);
        }
        self.inner.resp.recv.active = false;
        let kind = if cqe.status != wc::SUCCESS {
            Kind::Error
        } else if solicited {
            Kind::Solicited
        } else {
            Kind::Unsolicited
        };
        self.post_cqe_kind(self.qp.recv_cq, &cqe, kind);
    }

    fn on_send(&mut self, pkt: &wire::Packet<'_>) {
        let info = pkt.info();
        let psn = pkt.psn().get();
        if matches!(info.position, Position::First | Position::Only) {
            match self.take_recv() {
                Ok(true) => {}
                Ok(false) => {
                    self.dev.counters.inc(Counter::SendRnrErr);
                    let timer = self.inner.attrs.min_rnr_timer;
                    self.send_ack(Syndrome::RnrNak { timer }, psn);
                    return;
                }
                Err(()) => return self.resp_fatal(NakCode::RemoteOperationalError, psn),
            }
        }
        let data = pkt.payload();
        let r = self.inner.resp.recv;
        let fits = u64::from(r.off) + data.len() as u64 <= u64::from(r.len);
        let scattered = if !fits {
            Err(SgeError::Len)
        } else {
            let elem = self.inner.rq_shadow.get(..self.qp.rq_elem).unwrap_or(&[]);
            self.walk_sges(
                elem,
                abi::RecvWqe::sge,
                r.num_sge,
                (r.off, data.len() as u32),
                sys::ib_access_flags_IB_ACCESS_LOCAL_WRITE,
                |mr, va, rg| mr.write(va, data.get(rg).ok_or(AccessError::Bounds)?),
            )
        };
        if let Err(e) = scattered {
            let status = match e {
                SgeError::Len => wc::LOC_LEN_ERR,
                SgeError::Prot => wc::LOC_PROT_ERR,
            };
            let cqe = abi::Cqe {
                wr_id: r.wr_id,
                status,
                opcode: sys::ib_wc_opcode_IB_WC_RECV,
                qp_num: self.qp.qpn,
                src_qp: self.inner.attrs.dest_qpn,
                ..Default::default()
            };
            self.complete_recv(cqe, false);
            let code = if status == wc::LOC_LEN_ERR {
                NakCode::InvalidRequest
            } else {
                NakCode::RemoteOperationalError
            };
            return self.resp_fatal(code, psn);
        }
        self.inner.resp.recv.off += data.len() as u32;
        let end = matches!(info.position, Position::Last | Position::Only);
        if end {
            let h = pkt.headers();
            let mut cqe = abi::Cqe {
                wr_id: r.wr_id,
                status: wc::SUCCESS,
                opcode: sys::ib_wc_opcode_IB_WC_RECV,
                byte_len: self.inner.resp.recv.off,
                qp_num: self.qp.qpn,
                src_qp: self.inner.attrs.dest_qpn,
                ..Default::default()
            };
            if let Some(imm) = h.imm_dt {
                cqe.ex = imm.imm.to_be();
                cqe.wc_flags |= WC_WITH_IMM;
            }
            if let Some(ieth) = h.ieth {
                cqe.ex = ieth.rkey;
                cqe.wc_flags |= WC_WITH_INV;
            }
            self.complete_recv(cqe, pkt.bth().solicited);
        }
        self.resp_next(pkt, end);
    }

    /// Looks up `rkey` for `[va, va + len)` with `need` rights on the QP
    /// and the MR.
    fn remote_mr(&self, rkey: u32, va: u64, len: u32, need: u32) -> Option<&mr::RroceMr> {
        if self.inner.attrs.access & need != need {
            return None;
        }
        let mr = mr::lookup(self.dev, rkey, self.rcu)?;
        mr.check(self.qp.pd, va, u64::from(len), need).ok()?;
        Some(mr)
    }

    fn on_write(&mut self, pkt: &wire::Packet<'_>) {
        let info = pkt.info();
        let psn = pkt.psn().get();
        let h = pkt.headers();
        if let Some(reth) = h.reth {
            self.inner.resp.write = WriteCtx {
                active: true,
                rkey: reth.rkey,
                va: reth.va,
                left: reth.len,
                total: reth.len,
            };
            if reth.len > 0
                && self
                    .remote_mr(
                        reth.rkey,
                        reth.va,
                        reth.len,
                        sys::ib_access_flags_IB_ACCESS_REMOTE_WRITE,
                    )
                    .is_none()
            {
                self.inner.resp.write.active = false;
                return self.resp_fatal(NakCode::RemoteAccessError, psn);
            }
        }
        let end = matches!(info.position, Position::Last | Position::Only);
        // WRITE with immediate consumes a receive WQE: check before
        // placing the data, so an RNR NAK leaves nothing half done.
        if end && h.imm_dt.is_some() {
            match self.take_recv() {
                Ok(true) => {}
                Ok(false) => {
                    self.dev.counters.inc(Counter::SendRnrErr);
                    if let Some(reth) = h.reth {
                        let _ = reth;
                        self.inner.resp.write.active = false;
                    }
                    let timer = self.inner.attrs.min_rnr_timer;
                    self.send_ack(Syndrome::RnrNak { timer }, psn);
                    return;
                }
                Err(()) => return self.resp_fatal(NakCode::RemoteOperationalError, psn),
            }
        }
        let data = pkt.payload();
        let w = self.inner.resp.write;
        let n = data.len() as u32;
        if n > w.left || (end && n != w.left) {
            self.inner.resp.write.active = false;
            return self.resp_fatal(NakCode::InvalidRequest, psn);
        }
        if n > 0 {
            let ok = match self.remote_mr(
                w.rkey,
                w.va,
                n,
                sys::ib_access_flags_IB_ACCESS_REMOTE_WRITE,
            ) {
                Some(mr) => mr.write(w.va, data).is_ok(),
                None => false,
            };
            if !ok {
                self.inner.resp.write.active = false;
                return self.resp_fatal(NakCode::RemoteAccessError, psn);
            }
        }
        self.inner.resp.write.va = w.va.wrapping_add(u64::from(n));
        self.inner.resp.write.left -= n;
        if end {
            self.inner.resp.write.active = false;
            if let Some(imm) = h.imm_dt {
                let cqe = abi::Cqe {
                    wr_id: self.inner.resp.recv.wr_id,
                    status: wc::SUCCESS,
                    opcode: sys::ib_wc_opcode_IB_WC_RECV_RDMA_WITH_IMM,
                    byte_len: w.total,
                    qp_num: self.qp.qpn,
                    src_qp: self.inner.attrs.dest_qpn,
                    ex: imm.imm.to_be(),
                    wc_flags: WC_WITH_IMM,
                    ..Default::default()
                };
                self.complete_recv(cqe, pkt.bth().solicited);
            }
        }
        self.resp_next(pkt, end);
    }

    /// A READ request (new, or a duplicate to replay).
    fn on_read_request(&mut self, pkt: &wire::Packet<'_>, replay: bool) {
        let psn = pkt.psn();
        let Some(reth) = pkt.headers().reth else {
            return self.resp_fatal(NakCode::InvalidRequest, psn.get());
        };
        let mtu = self.mtu();
        let npkts = reth.len.div_ceil(mtu).max(1);
        if reth.len > 0
            && self
                .remote_mr(
                    reth.rkey,
                    reth.va,
                    reth.len,
                    sys::ib_access_flags_IB_ACCESS_REMOTE_READ,
                )
                .is_none()
        {
            if replay {
                return;
            }
            return self.resp_fatal(NakCode::RemoteAccessError, psn.get());
        }
        if !replay {
            self.inner.resp.nak_sent = false;
            self.inner.resp.epsn = psn.add(npkts).get();
            self.inner.resp.msn = (self.inner.resp.msn + 1) & wire::QPN_MASK;
        }
        let item = RespItem::Read {
            va: reth.va,
            rkey: reth.rkey,
            len: reth.len,
            psn: psn.get(),
            npkts,
            next: 0,
            msn: self.inner.resp.msn,
        };
        // A full queue drops the request; the requester asks again.
        if self.inner.resp_q.push(item) {
            self.pump_responses(RESP_BURST);
        }
    }

    fn on_atomic(&mut self, pkt: &wire::Packet<'_>, replay: bool) {
        let psn = pkt.psn();
        let Some(a) = pkt.headers().atomic_eth else {
            return self.resp_fatal(NakCode::InvalidRequest, psn.get());
        };
        let orig = if replay {
            match self
                .inner
                .resp
                .atomics
                .iter()
                .find(|(p, _, valid)| *valid && *p == psn.get())
            {
                Some((_, v, _)) => *v,
                None => return,
            }
        } else {
            if a.va % 8 != 0 {
                return self.resp_fatal(NakCode::InvalidRequest, psn.get());
            }
            let Some(mr) = self.remote_mr(
                a.rkey,
                a.va,
                8,
                sys::ib_access_flags_IB_ACCESS_REMOTE_ATOMIC,
            ) else {
                return self.resp_fatal(NakCode::RemoteAccessError, psn.get());
            };
            let guard = ATOMIC_LOCK.lock();
            let mut cur = [0u8; 8];
            if mr.read(a.va, &mut cur).is_err() {
                drop(guard);
                return self.resp_fatal(NakCode::RemoteAccessError, psn.get());
            }
            let old = u64::from_ne_bytes(cur);
            let new = if pkt.info().kind == OpKind::CompareSwap {
                if old == a.compare {
                    a.swap_add
                } else {
                    old
                }
            } else {
                old.wrapping_add(a.swap_add)
            };
            let _ = mr.write(a.va, &new.to_ne_bytes());
            drop(guard);
            let slot = self.inner.resp.atomic_next % self.inner.resp.atomics.len();
            self.inner.resp.atomics[slot] = (psn.get(), old, true);
            self.inner.resp.atomic_next = slot + 1;
            self.inner.resp.nak_sent = false;
            self.inner.resp.epsn = psn.next().get();
            self.inner.resp.msn = (self.inner.resp.msn + 1) & wire::QPN_MASK;
            old
        };
        let msn = self.inner.resp.msn;
        if self.inner.resp_q.is_empty() {
            self.emit_atomic_ack(psn.get(), msn, orig);
        } else {
            let _ = self.inner.resp_q.push(RespItem::AtomicAck {
                psn: psn.get(),
                msn,
                orig,
            });
        }
    }

    /// A request at a PSN already processed.
    fn duplicate(&mut self, pkt: &wire::Packet<'_>) {
        match pkt.info().kind {
            OpKind::RdmaReadRequest => self.on_read_request(pkt, true),
            OpKind::CompareSwap | OpKind::FetchAdd => self.on_atomic(pkt, true),
            _ => {
                // Everything up to epsn - 1 was received: say so.
                if pkt.bth().ack_req {
                    let last = Psn::new(self.inner.resp.epsn).prev().get();
                    self.send_ack(
                        Syndrome::Ack {
                            credits: Syndrome::CREDITS_INVALID,
                        },
                        last,
                    );
                }
            }
        }
    }

    /// Sets up the requester at RTS and the responder at RTR.
    pub(crate) fn on_state_change(&mut self, old: sys::ib_qp_state, new: sys::ib_qp_state) {
        if new == sys::ib_qp_state_IB_QPS_RTR && old != new {
            self.inner.resp = Resp {
                epsn: self.inner.attrs.rq_psn,
                ..Resp::default()
            };
        }
        if new == sys::ib_qp_state_IB_QPS_RTS && old == sys::ib_qp_state_IB_QPS_RTR {
            let psn = self.inner.attrs.sq_psn;
            self.inner.req = Req {
                psn,
                una: psn,
                max_psn: psn,
                ..Req::default()
            };
            self.inner.req.retry_left = self.inner.attrs.retry_cnt;
            self.inner.req.rnr_left = self.inner.attrs.rnr_retry;
        }
        if new == sys::ib_qp_state_IB_QPS_ERR && old != new {
            self.enter_error();
        }
    }
}

/// The send flags rroce accepts: `IB_SEND_FENCE`, `IB_SEND_SIGNALED`,
/// `IB_SEND_SOLICITED`, `IB_SEND_INLINE` and `IB_SEND_IP_CSUM` (meaningless
/// on RC, ignored as rdma_rxe does).
const KNOWN_SEND_FLAGS: u32 =
    SEND_FENCE | SEND_SIGNALED | SEND_SOLICITED | SEND_INLINE | SEND_IP_CSUM;

// ---- UD ----------------------------------------------------------------

/// A datagram built under the QP lock, sent after it is dropped.
pub(crate) type Datagram = (net::Skb, crate::ah::AddressVector);

impl Ctx<'_> {
    /// The UD requester: every fetched WQE becomes one datagram to the AH
    /// it names and completes once built (UD has no acknowledgements). The
    /// datagrams go to `out`, to be sent once the QP lock is dropped; at
    /// most `budget` per call (the lock keeps interrupts off). Returns
    /// whether WQEs are left.
    pub(crate) fn run_ud_sender(&mut self, out: &mut KVec<Datagram>, budget: usize) -> bool {
        if self.inner.state == sys::ib_qp_state_IB_QPS_ERR {
            self.fetch();
            self.flush_sq();
            return false;
        }
        if self.inner.state != sys::ib_qp_state_IB_QPS_RTS {
            return false;
        }
        self.fetch();
        while self.inner.req.fetched > 0 {
            if out.len() >= budget {
                return true;
            }
            let op = self.op(0);
            let status = if op.invalid != 0 {
                op.invalid
            } else {
                match self.build_datagram(&op) {
                    Ok(d) => {
                        if out.push(d, GFP_ATOMIC).is_err() {
                            // Dropped like a datagram lost on the wire.
                            self.dev.counters.inc(Counter::NoRoute);
                        }
                        wc::SUCCESS
                    }
                    Err(s) => s,
                }
            };
            // A failed datagram completes in error and the QP goes on: the
            // MAD layer cannot bring its GSI QP back from the error state
            // (it recovers only from SQE, which rroce does not model).
            self.complete_head(status);
        }
        false
    }

    /// The datagram of WQE 0, or the completion status that refuses it.
    fn build_datagram(&mut self, op: &SendOp) -> Result<Datagram, u32> {
        let opcode = match op.opcode {
            abi::WR_SEND => Opcode::UdSendOnly,
            abi::WR_SEND_WITH_IMM => Opcode::UdSendOnlyImm,
            _ => return Err(wc::LOC_QP_OP_ERR),
        };
        // One packet per datagram.
        if op.len > self.mtu() {
            return Err(wc::LOC_LEN_ERR);
        }
        let ud = abi::SendWqe::from_bytes(self.shadow(0))
            .ok_or(wc::LOC_QP_OP_ERR)?
            .wr
            .wr
            .ud();
        let av = if self.qp.kernel {
            let p = (u64::from(ud.pad[1]) << 32 | u64::from(ud.pad[0])) as usize;
            // SAFETY: a kernel QP's WQE carries the live AH its consumer
            // posted (`QpState::write_send_wqe`), built before `post_send`
            // returns.
            unsafe { crate::ah::RroceAh::kernel_av(p as *mut sys::ib_ah, self.qp.pd) }
        } else {
            crate::ah::RroceAh::user_av(self.dev, ud.ah_num, self.qp.pd, self.rcu)
        }
        .ok_or(wc::LOC_QP_OP_ERR)?;
        // The high bit of the WR's Q_Key means "the QP's Q_Key".
        let qkey = if ud.remote_qkey & 0x8000_0000 != 0 {
            self.inner.attrs.qkey
        } else {
            ud.remote_qkey
        };
        let psn = self.inner.req.psn;
        self.inner.req.psn = Psn::new(psn).next().get();
        let mut h = Headers::new(Bth::new(
            opcode,
            wire::DEFAULT_PKEY,
            ud.remote_qpn & wire::QPN_MASK,
            Psn::new(psn),
        ));
        h.bth.solicited = op.flags & SEND_SOLICITED != 0;
        h.deth = Some(wire::Deth {
            qkey,
            src_qpn: self.qp.qpn,
        });
        if opcode == Opcode::UdSendOnlyImm {
            h.imm_dt = Some(ImmDt {
                imm: u32::from_be(op.ex),
            });
        }
        let len = op.len as usize;
        let total = wire::packet_len(opcode, len).ok_or(wc::LOC_LEN_ERR)?;
        let ipv6 = av.network == crate::ah::NetworkType::Ipv6;
        // Without memory the datagram is lost, as on the wire.
        let mut skb = net::alloc(self.ndev, ipv6, total).ok_or(wc::SUCCESS)?;
        let buf = skb.buf();
        let hdr = wire::build_headers(&h, len, buf).map_err(|_| wc::LOC_QP_OP_ERR)?;
        let (payload, rest) = buf
            .get_mut(hdr..)
            .ok_or(wc::LOC_LEN_ERR)?
            .split_at_mut_checked(len)
            .ok_or(wc::LOC_LEN_ERR)?;
        rest.fill(0);
        let elem = self.shadow(0);
        if op.inline {
            let src = abi::SendWqe::payload(elem, len).ok_or(wc::LOC_LEN_ERR)?;
            payload.copy_from_slice(src);
        } else {
            self.walk_sges(
                elem,
                abi::SendWqe::sge,
                op.num_sge,
                (0, op.len),
                0,
                |mr, va, r| mr.read(va, payload.get_mut(r).ok_or(AccessError::Bounds)?),
            )
            .map_err(|e| match e {
                SgeError::Prot => wc::LOC_PROT_ERR,
                SgeError::Len => wc::LOC_LEN_ERR,
            })?;
        }
        Ok((skb, av))
    }

    /// A datagram for this UD QP (`l3`: its IP header). The Q_Key must
    /// match (the GSI QP's is well known); the next receive WQE gets the
    /// 40-byte network header area, then the payload. Without a receive
    /// WQE, or with a bad Q_Key, the datagram is counted and dropped.
    pub(crate) fn on_datagram(&mut self, pkt: &wire::Packet<'_>, l3: &[u8]) {
        let st = self.inner.state;
        if st != sys::ib_qp_state_IB_QPS_RTR && st != sys::ib_qp_state_IB_QPS_RTS {
            self.dev.counters.inc(Counter::NoQp);
            return;
        }
        let Some(deth) = pkt.headers().deth else {
            self.dev.counters.inc(Counter::Malformed);
            return;
        };
        if deth.qkey != self.inner.attrs.qkey {
            self.dev.counters.inc(Counter::QkeyViolation);
            return;
        }
        // The GRH area: an IPv6 header as is, an IPv4 header in its last
        // 20 bytes (as rdma_rxe and hardware RoCEv2 devices lay it out).
        let mut grh = [0u8; 40];
        match l3.len() {
            40 => {
                grh.copy_from_slice(l3);
                self.inner.resp.ud_net = sys::rdma_network_type_RDMA_NETWORK_IPV6 as u8;
            }
            20 => {
                grh[20..].copy_from_slice(l3);
                self.inner.resp.ud_net = sys::rdma_network_type_RDMA_NETWORK_IPV4 as u8;
            }
            _ => {
                self.dev.counters.inc(Counter::Malformed);
                return;
            }
        }
        match self.take_recv() {
            Ok(true) => {}
            Ok(false) => {
                self.dev.counters.inc(Counter::UdNoRecv);
                return;
            }
            Err(()) => return,
        }
        let data = pkt.payload();
        let r = self.inner.resp.recv;
        let total = grh.len() + data.len();
        let elem = self.inner.rq_shadow.get(..self.qp.rq_elem).unwrap_or(&[]);
        let scattered = if total as u64 > u64::from(r.len) {
            Err(SgeError::Len)
        } else {
            self.walk_sges(
                elem,
                abi::RecvWqe::sge,
                r.num_sge,
                (0, total as u32),
                sys::ib_access_flags_IB_ACCESS_LOCAL_WRITE,
                |mr, va, rg| {
                    // `rg` indexes the GRH area followed by the payload.
                    let g = grh.len();
                    let (a, b) = (rg.start, rg.end);
                    if b <= g {
                        mr.write(va, grh.get(a..b).ok_or(AccessError::Bounds)?)
                    } else if a >= g {
                        mr.write(va, data.get(a - g..b - g).ok_or(AccessError::Bounds)?)
                    } else {
                        mr.write(va, &grh[a..])?;
                        mr.write(
                            va + (g - a) as u64,
                            data.get(..b - g).ok_or(AccessError::Bounds)?,
                        )
                    }
                },
            )
        };
        let mut cqe = abi::Cqe {
            wr_id: r.wr_id,
            status: wc::SUCCESS,
            opcode: sys::ib_wc_opcode_IB_WC_RECV,
            byte_len: total as u32,
            qp_num: self.qp.qpn,
            src_qp: deth.src_qpn & wire::QPN_MASK,
            wc_flags: abi::WC_GRH,
            port_num: 1,
            ..Default::default()
        };
        if let Err(e) = scattered {
            cqe.status = match e {
                SgeError::Len => wc::LOC_LEN_ERR,
                SgeError::Prot => wc::LOC_PROT_ERR,
            };
            cqe.byte_len = 0;
        } else if let Some(imm) = pkt.headers().imm_dt {
            cqe.ex = imm.imm.to_be();
            cqe.wc_flags |= WC_WITH_IMM;
        }
        self.complete_recv(cqe, pkt.bth().solicited);
    }
}
