// SPDX-License-Identifier: GPL-2.0

//! What the transport shows of a QP's state: its current PSNs to
//! `query_qp`, and its progress to `rdma -dd resource show qp` (the
//! driver-specific attributes of the QP's restrack entry): enough to tell,
//! for a QP that stopped making progress, which role waits for what.

use kernel::prelude::*;

use super::TransportState;
use crate::rdma::sys;

/// Names and values, in the order `rdma` prints them.
pub(crate) type Diag = [(&'static CStr, u32); DIAG_LEN];

/// How many values [`TransportState::diag`] reports.
pub(crate) const DIAG_LEN: usize = 50;

impl TransportState {
    /// The PSNs `query_qp` reports (as rdma_rxe and the HCAs): the next to
    /// send once the send queue runs (RTS on), the next expected once the
    /// receive side does (RTR on); before that, the ones `modify_qp` set.
    pub(crate) fn current_psns(&self) -> (u32, u32) {
        let st = self.state;
        let rts = st == sys::ib_qp_state_IB_QPS_RTS
            || st == sys::ib_qp_state_IB_QPS_SQD
            || st == sys::ib_qp_state_IB_QPS_SQE;
        let rtr = rts || st == sys::ib_qp_state_IB_QPS_RTR;
        (
            if rts { self.req.psn } else { self.attrs.sq_psn },
            if rtr {
                self.resp.epsn
            } else {
                self.attrs.rq_psn
            },
        )
    }

    /// A snapshot of the requester's, completer's and responder's progress
    /// and of what each waits for (taken under the QP lock).
    pub(crate) fn diag(&self) -> Diag {
        let r = &self.req;
        let s = &self.resp;
        [
            (c"sq_fetched", r.fetched),
            (c"sq_cur", r.cur),
            (c"psn", r.psn),
            (c"max_psn", r.max_psn),
            (c"una", r.una),
            (c"retry_left", r.retry_left.into()),
            (c"rnr_left", r.rnr_left.into()),
            (c"defers_left", r.defers_left.into()),
            (c"rnr_wait", r.rnr_wait.into()),
            (c"odp_wait", r.odp_wait.into()),
            (c"mem_wait", r.mem_wait.into()),
            (c"req_pending", r.pending.into()),
            (c"rd_retry", r.rd_retry.unwrap_or(u32::MAX)),
            (c"window", r.window.size()),
            (c"noack", r.noack),
            (c"epsn", s.epsn),
            (c"msn", s.msn),
            (c"recv_active", s.recv.active.into()),
            (c"write_active", s.write.active.into()),
            (c"resp_queued", self.resp_q.len() as u32),
            (c"tx_queued", self.tx_packets() as u32),
            (c"odp_pending", self.odp_pending().into()),
            (c"odp_failed", self.odp.failed().into()),
            // Requester events since RTS.
            (c"req_timeouts", r.ev.timeouts),
            (c"req_resent", r.ev.resent),
            (c"req_acks", r.ev.acks),
            (c"req_rnr_naks", r.ev.rnr_naks),
            (c"req_seq_naks", r.ev.seq_naks),
            (c"req_last_ack", r.ev.last_ack),
            (c"req_stale", r.ev.stale),
            (c"req_responses", r.ev.responses),
            (c"req_late", r.ev.late),
            (c"req_stale_timers", r.ev.stale_timers),
            (c"req_deferred_timers", r.ev.deferred_timers),
            (c"req_mem_waits", r.ev.mem_waits),
            (c"req_at_ack", r.ev.at_ack),
            (c"req_at_timeout", r.ev.at_timeout),
            (c"req_at_fail", r.ev.at_fail),
            (c"req_at_late", r.ev.at_late),
            (c"req_at_late_last", r.ev.at_late_last),
            // Responder events since RTR.
            (c"resp_dups", s.ev.dups),
            (c"resp_acks", s.ev.acks),
            (c"resp_rnr_naks", s.ev.rnr_naks),
            (c"resp_seq_naks", s.ev.seq_naks),
            (c"resp_last_ack", s.ev.last_ack),
            (c"resp_at_ack", s.ev.at_ack),
            // Transmit queue, and the clock the `at_` values are read on.
            (c"tx_sent", self.tx_sent),
            (c"tx_lost", self.tx_lost),
            (c"tx_at", self.tx_at),
            (c"now", super::now_ms()),
        ]
    }
}
