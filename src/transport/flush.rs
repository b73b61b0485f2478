// SPDX-License-Identifier: GPL-2.0

//! The error state and QP state changes: entering the error state flushes
//! both queues with `IB_WC_WR_FLUSH_ERR`; RTR and RTS reset the responder
//! and the requester.

use core::sync::atomic::Ordering;

use super::{post_cqe_to, state::Unsent, Ctx, Req, Resp};
use crate::{
    abi,
    completion::{Completion, WcOpcode, WcStatus},
    cq::Kind,
    rdma::sys,
};

/// The affiliated events the transport left for the QP's work item to
/// raise (`TransportState::take_events`).
pub(crate) struct DueEvents {
    /// `IB_EVENT_SQ_DRAINED`.
    pub(crate) sq_drained: bool,
    /// `IB_EVENT_QP_LAST_WQE_REACHED`.
    pub(crate) last_wqe: bool,
}

impl Ctx<'_> {
    /// Moves the QP to the error state and flushes both queues.
    pub(crate) fn enter_error(&mut self) {
        self.inner.state = sys::ib_qp_state_IB_QPS_ERR;
        self.inner.resp_q.clear();
        // SAFETY: the timer lives as long as the QP.
        unsafe { sys::rroce_helper_timer_cancel(self.qp.timer) };
        self.inner.req.rnr_wait = false;
        self.inner.req.mem_wait = false;
        self.inner.req.draining = false;
        self.inner.req.drained_event = false;
        self.qp.req_waits.store(false, Ordering::Relaxed);
        self.qp.req_streams.store(false, Ordering::Relaxed);
        self.flush_sq();
        self.flush_rq();
        if self.qp.srq().is_some() && !self.inner.resp.last_wqe {
            // No WQE of the SRQ will reach this QP any more: ib_drain_qp
            // waits for this (IBA 11.6.3.1), once per entry to ERR. The
            // QP's work item raises it, outside the QP's lock.
            self.inner.resp.last_wqe = true;
            self.inner.resp.last_wqe_event = true;
        }
    }

    /// Completes every published send WQE with `IB_WC_WR_FLUSH_ERR`: the
    /// fetched ones, then those published when the flush began (one
    /// snapshot of the producer index: a process that keeps publishing
    /// cannot keep the flush going, with interrupts off).
    pub(super) fn flush_sq(&mut self) {
        while self.inner.req.fetched > 0 {
            self.complete_head(WcStatus::WrFlushErr);
        }
        let qp = self.qp;
        // A corrupt producer index: what it claims is not flushed.
        let _ = self.inner.sq.drain(&qp.sq_buf, |slot| {
            let mut tmp = [0u8; abi::SEND_WQE_HEADER_SIZE];
            // SAFETY: the slot holds `sq_elem >= SEND_WQE_HEADER_SIZE`
            // bytes of the ring buffer; the process may scribble on them,
            // which only changes the `wr_id` reported.
            unsafe {
                core::ptr::copy_nonoverlapping(
                    qp.sq_buf.at(slot.offset()),
                    tmp.as_mut_ptr(),
                    tmp.len().min(qp.sq_elem),
                )
            };
            let wr_id = abi::SendWqe::from_bytes(&tmp).map_or(0, |w| w.wr.wr_id);
            let c = Completion::new(wr_id, WcStatus::WrFlushErr, WcOpcode::Send, qp.qpn);
            post_cqe_to(qp, qp.send_cq, &c, Kind::Error);
            true
        });
        let r = &mut self.inner.req;
        r.set_psns(r.psn);
        r.cur = 0;
        r.cur_off = 0;
        r.max_cur = 0;
        r.max_cur_off = 0;
        r.pending = false;
    }

    /// Completes every receive WQE published when the flush began with
    /// `IB_WC_WR_FLUSH_ERR` (one snapshot of the producer index, as
    /// [`Self::flush_sq`]).
    pub(crate) fn flush_rq(&mut self) {
        let qp = self.qp;
        if qp.srq().is_some() {
            // The SRQ is shared: nothing there is this QP's but the WQE it
            // took for a message in progress, which it completes.
            if self.inner.resp.recv.active || self.inner.resp.srq_held {
                self.inner.resp.srq_held = false;
                let wr_id = self.inner.resp.recv.wr_id;
                let c = Completion::new(wr_id, WcStatus::WrFlushErr, WcOpcode::Recv, qp.qpn);
                post_cqe_to(qp, qp.recv_cq, &c, Kind::Error);
            }
            self.inner.resp.recv.active = false;
            return;
        }
        self.inner.resp.recv.active = false;
        let Some(rq_buf) = qp.rq_buf.as_ref() else {
            return;
        };
        let _ = self.inner.rq.drain(rq_buf, |slot| {
            let mut tmp = [0u8; abi::RECV_WQE_HEADER_SIZE];
            // SAFETY: the slot holds `rq_elem >= RECV_WQE_HEADER_SIZE`
            // bytes of the ring buffer.
            unsafe {
                core::ptr::copy_nonoverlapping(
                    rq_buf.at(slot.offset()),
                    tmp.as_mut_ptr(),
                    tmp.len().min(qp.rq_elem),
                )
            };
            let wr_id = abi::RecvWqe::from_bytes(&tmp).map_or(0, |w| w.wr_id);
            let c = Completion::new(wr_id, WcStatus::WrFlushErr, WcOpcode::Recv, qp.qpn);
            post_cqe_to(qp, qp.recv_cq, &c, Kind::Error);
            true
        });
    }

    /// Sets up the requester at RTS and the responder at RTR; RESET
    /// returns the packets it took from the queues, to be freed once the
    /// caller has let go of the QP's lock.
    pub(crate) fn on_state_change(
        &mut self,
        old: sys::ib_qp_state,
        new: sys::ib_qp_state,
        mask: u32,
    ) -> Unsent {
        if new == sys::ib_qp_state_IB_QPS_RTR && old != new {
            self.inner.resp = Resp {
                epsn: self.inner.attrs.rq_psn,
                ..Resp::default()
            };
        }
        if new == sys::ib_qp_state_IB_QPS_RTS && old == sys::ib_qp_state_IB_QPS_RTR {
            let mut req = Req::default();
            req.set_psns(self.inner.attrs.sq_psn);
            self.inner.req = req;
            self.restart_budgets();
        }
        if new == sys::ib_qp_state_IB_QPS_SQD && old == sys::ib_qp_state_IB_QPS_RTS {
            self.inner.req.draining = true;
            self.check_sq_drained();
        }
        if old == sys::ib_qp_state_IB_QPS_SQD && new == old {
            self.retime(mask);
        }
        if old == sys::ib_qp_state_IB_QPS_SQD && new != old {
            // An event not raised yet goes with SQD: a handler would find
            // the QP out of it.
            self.inner.req.draining = false;
            self.inner.req.drained_event = false;
            // The WQEs posted while draining run now: none was fetched,
            // and the flush after `modify_qp` hands a pending send queue
            // to the QP's work item.
            self.inner.req.pending = new == sys::ib_qp_state_IB_QPS_RTS;
        }
        if new == sys::ib_qp_state_IB_QPS_ERR && old != new {
            self.enter_error();
        }
        if new == sys::ib_qp_state_IB_QPS_RESET {
            return self.reset();
        }
        Unsent::none()
    }
}

impl Ctx<'_> {
    /// RESET quiesces the QP, as `rxe_qp_reset` does: the timer stops,
    /// queued READ/atomic responses and packets not yet sent are dropped
    /// (nothing built for the old connection goes out, to its address or
    /// a new one), and the requester and responder start over: PSNs, MSN,
    /// the window, outstanding READs, the RNR wait, the message in progress
    /// and the atomic replay cache. The attributes stay (a later INIT and
    /// RTR set what they need); the MTU is fixed again at RTR. A packet
    /// batch another context is sending right now is on the wire already;
    /// what it would have put back is dropped (`TransportState::epoch`).
    /// The packets taken from the queues are returned, for the caller to
    /// free after the QP's lock.
    pub(crate) fn reset(&mut self) -> Unsent {
        // SAFETY: the timer lives as long as the QP; a callback already
        // waiting for the lock finds the QP below RTS and does nothing.
        unsafe { sys::rroce_helper_timer_cancel(self.qp.timer) };
        self.qp.req_waits.store(false, Ordering::Relaxed);
        self.qp.req_streams.store(false, Ordering::Relaxed);
        if self.qp.srq().is_some() {
            // A WQE taken from the SRQ for a message in progress is this
            // QP's to complete: flushed, not lost.
            self.flush_rq();
        }
        self.inner.resp_q.clear();
        let unsent = self.inner.take_queued();
        self.inner.epoch = self.inner.epoch.wrapping_add(1);
        self.inner.req = Req::default();
        self.inner.resp = Resp::default();
        // A failed fault, a response to ask for again, pages "not now":
        // nothing of the old connection's waits for ODP pages is left.
        self.inner.odp = super::OdpWait::default();
        self.inner.mtu = super::mtu_bytes(sys::ib_mtu_IB_MTU_256);
        unsent
    }
}
