// SPDX-License-Identifier: GPL-2.0

//! The completer: ACKs, NAKs, READ responses and atomic ACKs retire send
//! WQEs in posting order; a timeout or a PSN sequence NAK goes back to the
//! oldest unacknowledged PSN, an RNR NAK waits the timer it names.

use kernel::prelude::*;

use super::{Ctx, SendOp, SgeError};
use crate::{
    abi,
    completion::WcStatus,
    counters::Counter,
    engine::{
        psn::Psn,
        rc::{
            checks,
            completer::{
                self, response_in_range, response_limit, skip_ahead, AckClass, RemoteError,
                TimerAction, TimerState, MAX_DEFERS,
            },
            requester,
        },
        wire::{self, OpKind, Position, Syndrome},
    },
    mr::AccessError,
    rdma::sys,
};

impl Ctx<'_> {
    /// Forward progress (`una` moved): the retry budgets start over and
    /// the window grows back by one packet. An RNR wait ends: the peer
    /// took the packet it had refused (a copy sent before the NAK came),
    /// so there is nothing to wait for, and the caller's ACK handling may
    /// cancel the timer whose expiry alone would end the wait.
    fn progress(&mut self) {
        self.inner.req.rnr_wait = false;
        self.restart_budgets();
        self.inner.req.window.on_progress();
    }

    /// The retry, RNR retry and deferral budgets start over: at forward
    /// progress, and when the QP enters RTS.
    pub(super) fn restart_budgets(&mut self) {
        self.inner.req.retry_left = self.inner.attrs.retry_cnt;
        self.inner.req.rnr_left = self.inner.attrs.rnr_retry;
        self.inner.req.defers_left = MAX_DEFERS;
    }

    /// SQD -> SQD with a new timeout or retry count (where they may
    /// change): the budgets start over from the new counts, as rdma_rxe's
    /// modify does, and the timer runs for what is in flight with the new
    /// timeout (or stops, at 0) rather than wait for a packet sent, which
    /// a draining QP may never send. A running RNR, memory or ODP wait
    /// keeps its own expiry.
    pub(super) fn retime(&mut self, mask: u32) {
        let budgets = sys::ib_qp_attr_mask_IB_QP_TIMEOUT
            | sys::ib_qp_attr_mask_IB_QP_RETRY_CNT
            | sys::ib_qp_attr_mask_IB_QP_RNR_RETRY;
        if mask & budgets == 0 {
            return;
        }
        self.restart_budgets();
        let r = &self.inner.req;
        if mask & sys::ib_qp_attr_mask_IB_QP_TIMEOUT == 0
            || r.una == r.max_psn
            || r.rnr_wait
            || r.mem_wait
            || r.odp_wait
        {
            return;
        }
        if super::timeout_us(self.inner.attrs.timeout).is_some() {
            self.arm_retry_timer();
        } else {
            // SAFETY: the timer lives as long as the QP.
            unsafe { sys::rroce_helper_timer_cancel(self.qp.timer) };
        }
    }

    /// Asks again for the READ/atomic response at `missing`, once until it
    /// arrives (the timer covers a lost retry).
    fn retry_read(&mut self, missing: Psn) {
        if let Some(to) = completer::read_retry(missing, self.inner.req.rd_retry) {
            self.inner.req.rd_retry = Some(to.get());
            self.rewind(to);
        }
    }

    /// Retires completed WQEs at the head, in order, posting their CQEs.
    pub(super) fn complete_ready(&mut self) {
        loop {
            if self.inner.req.fetched == 0 {
                return;
            }
            let op = self.op(0);
            if let Some(status) = op.invalid {
                let r = &self.inner.req;
                if self.inner.state == sys::ib_qp_state_IB_QPS_SQD
                    && !requester::sqd_sends(Psn::new(r.psn), Psn::new(r.max_psn), r.cur_off)
                {
                    // Not begun: a draining send queue leaves it for RTS.
                    return;
                }
                if self.inner.req.cur == 0 && self.inner.req.una == self.inner.req.max_psn {
                    self.complete_head(status);
                    self.enter_error();
                    return;
                }
            }
            if !op.done {
                return;
            }
            self.complete_head(WcStatus::Success);
        }
    }

    /// Marks WQEs acknowledged up to and including `psn` (SEND/WRITE; a
    /// READ or atomic acknowledged implicitly before its response means the
    /// response was lost: go back to it).
    pub(super) fn ack_through(&mut self, psn: Psn) {
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
    fn fail_head(&mut self, status: WcStatus) {
        self.inner.req.ev.at_fail = super::now_ms();
        pr_debug!(
            "qp {}: request failed with status {} (una {:#x}, psn {:#x})\n",
            self.qp.qpn,
            status.raw(),
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
        super::bump(&mut self.inner.req.ev.responses);
        if self.inner.state != sys::ib_qp_state_IB_QPS_RTS
            && self.inner.state != sys::ib_qp_state_IB_QPS_SQD
        {
            let ev = &mut self.inner.req.ev;
            super::bump(&mut ev.late);
            ev.at_late_last = super::now_ms();
            if ev.at_late == 0 {
                ev.at_late = ev.at_late_last;
            }
            return;
        }
        let psn = pkt.psn();
        let info = pkt.info();
        // A response when nothing is outstanding, or beyond anything sent,
        // answers no request: dropped and counted.
        let r = &self.inner.req;
        if !checks::response_expected(psn, Psn::new(r.una), Psn::new(r.max_psn)) {
            self.dev.counters.inc(Counter::UnexpectedResp);
            super::bump(&mut self.inner.req.ev.stale);
            return;
        }
        // Only responses to what was sent count. An ACK or NAK may cover
        // packets sent before a rewind for retransmission (up to `max_psn`);
        // READ and atomic responses count only up to the resend point, so
        // responses still in flight from before a rewind start no retry.
        let r = &self.inner.req;
        let limit = response_limit(
            info.kind == OpKind::Acknowledge,
            Psn::new(r.psn),
            Psn::new(r.max_psn),
        );
        if !response_in_range(psn, Psn::new(r.una), limit) {
            super::bump(&mut self.inner.req.ev.stale);
            return;
        }
        // What this response says reached the responder: up to its PSN
        // (below it for a sequence NAK).
        let aeth = pkt.headers().aeth;
        let below = match (info.kind, aeth) {
            (OpKind::Acknowledge, Some(a)) if matches!(a.syndrome, Syndrome::Nak(_)) => psn,
            _ => psn.next(),
        };
        let r = &mut self.inner.req;
        r.heard = requester::heard_after(Psn::new(r.heard), below).get();
        // Once acknowledged, a rewind's bound follows `una`, so that it
        // stays within half the PSN space of it.
        r.resent_until = requester::heard_after(Psn::new(r.resent_until), Psn::new(r.una)).get();
        match info.kind {
            OpKind::Acknowledge => {
                let Some(aeth) = aeth else {
                    return;
                };
                if !self.on_ack(psn, aeth.syndrome) {
                    return;
                }
            }
            OpKind::RdmaReadResponse => self.on_read_response(pkt),
            OpKind::AtomicAcknowledge => self.on_atomic_ack(pkt),
            _ => return,
        }
        // Acknowledged beyond the resend point: skip what arrived.
        if let Some(una) = skip_ahead(Psn::new(self.inner.req.una), Psn::new(self.inner.req.psn)) {
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

    /// An ACK or NAK at `psn` (in range). `false`: the completer stops
    /// here (an RNR wait began, or the QP failed).
    fn on_ack(&mut self, psn: Psn, syndrome: Syndrome) -> bool {
        let class = completer::classify_ack(syndrome);
        let ev = &mut self.inner.req.ev;
        ev.last_ack = psn.get();
        ev.at_ack = super::now_ms();
        match class {
            AckClass::Ack => super::bump(&mut ev.acks),
            AckClass::RnrNak { .. } => super::bump(&mut ev.rnr_naks),
            AckClass::SequenceNak => super::bump(&mut ev.seq_naks),
            AckClass::Fatal(_) => {}
        }
        if class == AckClass::Ack {
            self.ack_through(psn);
            return true;
        }
        if matches!(class, AckClass::RnrNak { .. }) {
            self.dev.counters.inc(Counter::RcvdRnrErr);
        }
        // A NAK acknowledges everything before it.
        if let Some(through) = completer::nak_acks_through(psn, Psn::new(self.inner.req.una)) {
            self.ack_through(through);
        }
        self.complete_ready();
        match class {
            AckClass::Ack => true,
            AckClass::RnrNak { timer } => {
                self.on_rnr_nak(timer);
                false
            }
            AckClass::SequenceNak => {
                // Go back to the oldest unacknowledged packet: the NAKed
                // one, or a READ response missing before it.
                let una = Psn::new(self.inner.req.una);
                if let Some(to) = completer::rewind_on_sequence_nak(una, self.inner.req.rd_retry) {
                    self.inner.req.window.on_loss();
                    self.rewind(to);
                }
                true
            }
            AckClass::Fatal(e) => {
                self.fail_head(match e {
                    RemoteError::InvalidRequest => WcStatus::RemInvReqErr,
                    RemoteError::Access => WcStatus::RemAccessErr,
                    RemoteError::Operational => WcStatus::RemOpErr,
                    RemoteError::InvalidRdRequest => WcStatus::BadRespErr,
                });
                false
            }
        }
    }

    /// An RNR NAK: fail if the RNR retry budget is spent, else go back to
    /// the oldest unacknowledged PSN once the NAK's timer expires.
    fn on_rnr_nak(&mut self, timer: u8) {
        let Some(left) = completer::rnr_retry(self.inner.req.rnr_left) else {
            return self.fail_head(WcStatus::RnrRetryExcErr);
        };
        self.inner.req.rnr_left = left;
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
            // Not the PSN of a READ or atomic outstanding.
            self.dev.counters.inc(Counter::UnexpectedResp);
            return;
        };
        if op.opcode == abi::WR_ATOMIC_WRITE {
            // Its response is an empty READ RESPONSE ONLY.
            if pkt.info().position != Position::Only || !pkt.payload().is_empty() {
                return self.fail_head(WcStatus::BadRespErr);
            }
            op.rd_pkts = 1;
            op.done = true;
            self.set_op(k, op);
            return self.ack_through_done(psn);
        }
        if op.opcode != abi::WR_RDMA_READ {
            return self.fail_head(WcStatus::BadRespErr);
        }
        let idx = psn.distance_from(Psn::new(op.first_psn));
        if idx != op.rd_pkts {
            // Out of order: go back to the first missing response.
            self.retry_read(Psn::new(op.first_psn).add(op.rd_pkts));
            return;
        }
        let mtu = self.mtu();
        // (The MTU may have changed since the WQE was cut: no overflow.)
        let Some(off) = idx.checked_mul(mtu) else {
            return self.fail_head(WcStatus::BadRespErr);
        };
        let data = pkt.payload();
        let expect = (op.len - off.min(op.len)).min(mtu) as usize;
        let pos = pkt.info().position;
        let last = idx + 1 == op.npkts;
        // Each part of the READ is a response message of its own
        // (`engine::rc::requester`), and a READ resumed after a loss is one
        // starting at the resumption PSN: First/Only may appear at any
        // index, Last/Only exactly where a part ends.
        let part_end = requester::ends_part(op.npkts, idx);
        let pos_ok = match pos {
            Position::Only | Position::Last => part_end,
            Position::First | Position::Middle => !part_end,
        };
        if !pos_ok || data.len() != expect {
            return self.fail_head(WcStatus::BadRespErr);
        }
        let elem_k = k;
        let elem = self.shadow(elem_k);
        let r = self.walk_sges(
            elem,
            abi::SendWqe::sge,
            op.num_sge,
            (off, data.len() as u32),
            sys::ib_access_flags_IB_ACCESS_LOCAL_WRITE,
            |mr, va, r| mr.write_scatter(va, data.range(r).ok_or(AccessError::Bounds)?),
        );
        if let Err(SgeError::Absent(f)) = r {
            if self.odp_absent_response(f) {
                // ODP pages of the READ's buffer are not there: dropped,
                // asked for again once they are in (`transport::odp`).
                return;
            }
        }
        if r.is_err() {
            if k == 0 {
                return self.fail_head(WcStatus::LocProtErr);
            }
            op.invalid = Some(WcStatus::LocProtErr);
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
            // Not the PSN of a READ or atomic outstanding.
            self.dev.counters.inc(Counter::UnexpectedResp);
            return;
        };
        let Some(ack) = pkt.headers().atomic_ack_eth else {
            return;
        };
        if op.opcode == abi::WR_RDMA_READ || op.first_psn != psn.get() {
            return self.fail_head(WcStatus::BadRespErr);
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
        if let Err(SgeError::Absent(f)) = r {
            if self.odp_absent_response(f) {
                // As for a READ response: asked for again later.
                return;
            }
        }
        if r.is_err() {
            return self.fail_head(WcStatus::LocProtErr);
        }
        if self.inner.req.rd_retry == Some(psn.get()) {
            self.inner.req.rd_retry = None;
        }
        op.done = true;
        self.set_op(k, op);
        self.ack_through_done(psn);
    }

    /// The QP's timer: retransmission timeout, or the end of an RNR wait
    /// or of a wait for memory.
    /// `responses_queued`: packets of the QP's responses role wait on a
    /// receive thread (`crate::recv`), not yet processed.
    pub(crate) fn on_timer(&mut self, responses_queued: bool) {
        // A QP draining its send queue (SQD) still retransmits what it
        // sent and waits out RNR NAKs: the drain ends only when all of it
        // is acknowledged.
        if self.inner.state != sys::ib_qp_state_IB_QPS_RTS
            && self.inner.state != sys::ib_qp_state_IB_QPS_SQD
        {
            return;
        }
        // SAFETY: the timer lives as long as the QP.
        if unsafe { sys::rroce_helper_timer_pending(self.qp.timer) } {
            // This expiry waited for the QP lock while a response re-armed
            // the timer (progress, an RNR NAK): it is stale, and charging
            // a retry for it would count a timeout that did not happen.
            super::bump(&mut self.inner.req.ev.stale_timers);
            return;
        }
        let r = &self.inner.req;
        let t = TimerState {
            rnr_wait: r.rnr_wait,
            odp_wait: r.odp_wait,
            mem_wait: r.mem_wait,
            idle: r.una == r.max_psn,
            retry_left: r.retry_left,
            responses_queued,
            defers_left: r.defers_left,
        };
        match completer::on_timer(t) {
            TimerAction::EndRnrWait => self.inner.req.rnr_wait = false,
            TimerAction::EndMemWait => self.inner.req.mem_wait = false,
            TimerAction::OdpWait => return self.arm_retry_timer(),
            TimerAction::Defer { defers_left } => {
                super::bump(&mut self.inner.req.ev.deferred_timers);
                self.inner.req.defers_left = defers_left;
                return self.arm_retry_timer();
            }
            TimerAction::Idle => return,
            TimerAction::RetryExceeded => return self.fail_head(WcStatus::RetryExcErr),
            TimerAction::Retransmit { retry_left } => {
                super::bump(&mut self.inner.req.ev.timeouts);
                self.inner.req.ev.at_timeout = super::now_ms();
                self.inner.req.retry_left = retry_left;
                self.inner.req.rd_retry = None;
                self.inner.req.window.on_loss();
                let una = Psn::new(self.inner.req.una);
                self.rewind(una);
            }
        }
        self.arm_retry_timer();
        self.run_requester();
    }
}
