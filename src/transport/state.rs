// SPDX-License-Identifier: GPL-2.0

//! The part of a QP the transport owns: the attributes `modify_qp` sets,
//! what the QP fixes at create ([`QpFixed`]) and the lock-protected state
//! the requester, completer and responder work on ([`TransportState`]).
//!
//! `crate::qp` embeds both in its QP object (`QpState::fixed`, the lock's
//! `QpInner::t`) and hands them to the transport as a `Ctx`; the transport
//! itself never names the QP object, so calls point one way, from the QP
//! to the transport.
//!
//! What each role uses (besides `attrs`, `state` and `qpn`):
//!
//! - requester (`req.rs`): the send ring (`sq`, `sq_buf`, `sq_elem`, the
//!   SGE and inline caps), `ops`, `sq_shadow`, `req`, the timer;
//! - completer (`comp.rs`): `req` and the timer, retiring WQEs into
//!   `send_cq` through the shared CQE posting;
//! - responder (`resp.rs`): the receive ring (`rq`, `rq_buf`, `rq_elem`,
//!   `rq_max_sge`), `rq_shadow`, `resp`, `resp_q`, `pd`, `recv_cq`;
//! - UD (`ud.rs`): `rq_shadow`, `rq_elem`, `pd`, `kernel`;
//! - error state (`flush.rs`): both rings' completions, `req`, `resp`,
//!   `resp_q`, the timer.

use core::sync::atomic::{AtomicBool, Ordering};

use kernel::prelude::*;

use super::{Req, Resp, RespQueue, SendOp};
use crate::{
    ah::AddressVector,
    engine::{psn::Psn, rc::requester, ring::Consumer},
    net::skb::Skb,
    rdma::{mmap::QueueBuf, sys},
};

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
    /// Raise `IB_EVENT_SQ_DRAINED` once the send queue drains in SQD
    /// (`IB_QP_EN_SQD_ASYNC_NOTIFY`).
    pub(crate) sqd_notify: bool,
    pub(crate) av: Option<AddressVector>,
}

/// What the transport reads of a QP and nobody changes after create
/// (`timer`: after the QP is started, before it is published), but for
/// two atomic hints (`req_waits`, `req_streams`), written under the QP
/// lock.
///
/// # Invariants
///
/// `pd`, `send_cq` and `recv_cq` are the QP's PD and CQs, `srq` null or
/// its SRQ's state, and `ibqp` the core's QP, all of which outlive this
/// value (the RDMA core holds use counts on them). `timer` is null or a
/// timer whose callback receives the QP, shut down before the QP is freed.
/// `route` is null or a route cache of this QP's, freed with it.
pub(crate) struct QpFixed {
    pub(crate) qpn: u32,
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
    /// A UC QP: nothing is acknowledged or resent; a message the
    /// responder cannot take whole is dropped.
    pub(crate) uc: bool,
    /// A UD (or GSI) QP: datagrams, nothing in flight.
    pub(crate) ud: bool,
    /// The SRQ the QP takes its receive WQEs from, or null (it has an RQ).
    pub(crate) srq: *const crate::srq::SrqState,
    pub(crate) sq_buf: QueueBuf,
    pub(crate) rq_buf: Option<QueueBuf>,
    pub(crate) sq_elem: usize,
    pub(crate) rq_elem: usize,
    pub(crate) sq_max_sge: u32,
    pub(crate) sq_max_inline: u32,
    pub(crate) rq_max_sge: u32,
    pub(crate) timer: *mut sys::rroce_timer,
    /// A connected QP's cached route to its peer (null for UD, which
    /// sends to a new address each datagram, or without memory).
    pub(crate) route: *mut sys::rroce_route,
    /// The requester's last pass stopped with work left that only an
    /// acknowledgement lets go: its send window or its READ/atomic limit
    /// was full (`engine::handover::Arrival::requester_waits`). Written
    /// under the QP lock, read without it by the receive path: a hint.
    pub(crate) req_waits: AtomicBool,
    /// The QP's process rang its last doorbell without polling a
    /// completion since the one before (`engine::handover::Ring::streams`,
    /// whatever the messages' size): a stream, not a round trip
    /// (`engine::handover::Arrival::requester_streams`). Written by user
    /// RC/UC doorbells and cleared by the transport (ERR, RESET, below
    /// RTS), under the QP lock; a hint, as `req_waits`.
    pub(crate) req_streams: AtomicBool,
}

impl QpFixed {
    /// The SRQ the QP takes its receive WQEs from, if any.
    pub(crate) fn srq(&self) -> Option<&crate::srq::SrqState> {
        // SAFETY: null or the QP's SRQ, which outlives it (type invariant).
        unsafe { self.srq.as_ref() }
    }
}

/// Sets `hint` (`QpFixed::req_waits` or `req_streams`) to `value` from a
/// hot path: stored only when it changes, since the receive path on the
/// other CPU reads both hints' cache line for every response, and a store
/// of the same value would still take that line away from it. The cold
/// clears (ERR, RESET, below RTS) store unconditionally.
pub(crate) fn set_hint(hint: &AtomicBool, value: bool) {
    if hint.load(Ordering::Relaxed) != value {
        hint.store(value, Ordering::Relaxed);
    }
}

/// The transport's part of what the QP lock protects.
pub(crate) struct TransportState {
    /// The IB state (`modify_qp`, or the transport entering ERR).
    pub(crate) state: sys::ib_qp_state,
    pub(crate) attrs: QpAttrs,
    /// Consumer side of the send and receive rings.
    pub(crate) sq: Consumer,
    pub(crate) rq: Consumer,
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
    /// Requests to send once the lock is dropped ([`Lane::Req`]).
    pub(crate) tx: KVec<Skb>,
    /// Responses to send once the lock is dropped ([`Lane::Resp`]).
    pub(crate) rtx: KVec<Skb>,
    /// Request packets built into `tx` so far (wrapping): a context that
    /// built none need not send that lane, whoever built them does
    /// (`QpState::deliver`).
    pub(crate) req_built: u32,
    /// Path MTU in bytes (RTR onwards).
    pub(crate) mtu: u32,
    /// Bumped by RESET: packets taken out of `tx` or `rtx` before it are
    /// not put back after it.
    pub(crate) epoch: u32,
    /// ODP pages the transport is waiting for (see `transport::odp`).
    pub(crate) odp: super::OdpWait,
    /// Packets taken from `tx` and `rtx` to be sent, and of those, dropped
    /// before the IP stack (no route, no address vector); diagnostics,
    /// wrapping.
    pub(crate) tx_sent: u32,
    pub(crate) tx_lost: u32,
    /// When (the tick in ms) packets were last taken to be sent.
    pub(crate) tx_at: u32,
}

/// Which of a QP's two transmit queues a packet goes to. The requester's
/// packets (requests) and the responder's (ACKs, NAKs, READ and atomic
/// responses) travel in opposite directions, each in its own PSN order,
/// and neither needs the other's order kept: each lane has its own
/// queue and its own sender, so one context's ACK does not hold another's
/// request behind it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Lane {
    /// Requests: `TransportState::tx`.
    Req,
    /// Responses: `TransportState::rtx`.
    Resp,
}

impl Lane {
    /// Both lanes, in the order a flush sends them: responses first (an
    /// ACK or a READ response is what the peer waits for).
    pub(crate) const ALL: [Lane; 2] = [Lane::Resp, Lane::Req];

    /// A bit of its own for each lane, for a set of lanes in a `u8`.
    pub(crate) const fn bit(self) -> u8 {
        match self {
            Lane::Req => 1,
            Lane::Resp => 2,
        }
    }

    /// The lane of a packet with `opcode`.
    pub(crate) fn of(opcode: crate::engine::wire::Opcode) -> Self {
        match opcode.info().direction {
            crate::engine::wire::Direction::Response => Lane::Resp,
            _ => Lane::Req,
        }
    }
}

/// Packets taken from a QP's queues that will not be sent: freed when
/// this is dropped, which its holder does after releasing the QP's lock
/// (freeing a packet can run its destructor and the network stack's
/// release paths, work that has no business under a spinlock taken with
/// interrupts off).
#[must_use = "dropped only once the QP's lock is released"]
pub(crate) struct Unsent {
    _req: KVec<Skb>,
    _resp: KVec<Skb>,
}

impl Unsent {
    /// Nothing.
    pub(crate) const fn none() -> Self {
        Unsent {
            _req: KVec::new(),
            _resp: KVec::new(),
        }
    }
}

impl TransportState {
    /// The packets waiting in both queues (a GSO run holds several).
    pub(crate) fn tx_packets(&self) -> usize {
        self.lane_packets(Lane::Req)
            .saturating_add(self.lane_packets(Lane::Resp))
    }

    /// The packets waiting in `lane`'s queue.
    pub(crate) fn lane_packets(&self, lane: Lane) -> usize {
        self.queue(lane).iter().map(|s| s.packets() as usize).sum()
    }

    /// `lane`'s queue.
    pub(crate) fn queue(&self, lane: Lane) -> &KVec<Skb> {
        match lane {
            Lane::Req => &self.tx,
            Lane::Resp => &self.rtx,
        }
    }

    /// `lane`'s queue, to change.
    pub(crate) fn queue_mut(&mut self, lane: Lane) -> &mut KVec<Skb> {
        match lane {
            Lane::Req => &mut self.tx,
            Lane::Resp => &mut self.rtx,
        }
    }

    /// Takes `lane`'s queue to be sent, leaving `spare` (an empty vector,
    /// with memory once a sender kept one: `qp::lanes`) in its place.
    pub(crate) fn take_lane(&mut self, lane: Lane, spare: KVec<Skb>) -> KVec<Skb> {
        core::mem::replace(self.queue_mut(lane), spare)
    }

    /// Takes what waits in both queues (RESET, or a QP or netdev going
    /// away): nothing of it is sent; the caller frees it once it has let
    /// go of the QP's lock.
    pub(crate) fn take_queued(&mut self) -> Unsent {
        Unsent {
            _req: core::mem::take(&mut self.tx),
            _resp: core::mem::take(&mut self.rtx),
        }
    }

    /// Nothing waits in either queue.
    pub(crate) fn tx_empty(&self) -> bool {
        self.tx.is_empty() && self.rtx.is_empty()
    }

    /// Requests were sent and not all acknowledged: some may still be on
    /// their way to the peer. Never for UC, whose requests count as
    /// acknowledged once built (`una` runs ahead of `sent_psn`).
    pub(crate) fn requests_in_flight(&self) -> bool {
        let r = &self.req;
        requester::requests_in_flight(
            Psn::new(r.una),
            Psn::new(r.sent_psn),
            Psn::new(r.sent_first),
            Psn::new(r.heard),
            Psn::new(r.resent_until),
        )
    }

    /// Every request built so far is being taken from the request lane
    /// to be sent (or was sent before).
    pub(crate) fn requests_taken(&mut self) {
        self.req.sent_psn = self.req.max_psn;
        self.req.sent_first = self.req.max_first;
    }
}

/// What KUnit looks at.
#[cfg(CONFIG_KUNIT)]
impl TransportState {
    /// What is left of the QP's traffic, if anything: after RESET nothing
    /// may be queued and the requester and responder start over.
    pub(crate) fn leftover(&self) -> Option<&'static str> {
        if !self.resp_q.is_empty() {
            return Some("READ/atomic responses are still queued");
        }
        if !self.tx_empty() {
            return Some("packets are still queued to send");
        }
        let r = &self.req;
        if r.fetched != 0 || r.psn != 0 || r.una != 0 || r.max_psn != 0 || r.rnr_wait || r.mem_wait
        {
            return Some("the requester kept its PSNs or WQEs");
        }
        let s = &self.resp;
        if s.epsn != 0 || s.msn != 0 || s.nak_sent || s.recv.active || s.write.active {
            return Some("the responder kept its PSN, MSN or message in progress");
        }
        if !self.odp.is_clear() {
            return Some("an ODP wait or failed fault is left");
        }
        None
    }

    /// READ responses are queued (a READ is being answered).
    pub(crate) fn responding(&self) -> bool {
        !self.resp_q.is_empty()
    }
}
