// SPDX-License-Identifier: GPL-2.0

//! The requester: copies and validates send WQEs, segments them at the path
//! MTU, gives them PSNs and sends what the window and the READ/atomic limit
//! allow; `rewind` moves it back for go-back-N retransmission.

use core::sync::atomic::Ordering;

use kernel::prelude::*;

use super::{
    timeout_us, Ctx, Lane, RegWr, Req, SendOp, SgeError, FETCH_BUDGET, SEND_FENCE, SEND_INLINE,
    SEND_IP_CSUM, SEND_SIGNALED, SEND_SOLICITED, WR_REG_MR,
};
use crate::{
    abi,
    completion::WcStatus,
    counters::Counter,
    engine::{
        psn::Psn,
        rc::{
            completer::{rewind_target, Rewind, SentWqe, MEM_RETRY_US},
            requester, window,
        },
        wire::{self, AtomicEth, Headers, Ieth, ImmDt, Opcode, Reth},
    },
    mr::AccessError,
    rdma::sys,
};

/// The send flags rroce accepts: `IB_SEND_FENCE`, `IB_SEND_SIGNALED`,
/// `IB_SEND_SOLICITED`, `IB_SEND_INLINE` and `IB_SEND_IP_CSUM` (meaningless
/// on RC, ignored as rdma_rxe does).
const KNOWN_SEND_FLAGS: u32 =
    SEND_FENCE | SEND_SIGNALED | SEND_SOLICITED | SEND_INLINE | SEND_IP_CSUM;

impl Req {
    /// Every PSN position at `psn`: nothing built, taken to be sent, heard
    /// of or sent twice beyond it (a QP entering RTS, a flushed send
    /// queue).
    pub(super) fn set_psns(&mut self, psn: u32) {
        self.psn = psn;
        self.una = psn;
        self.max_psn = psn;
        self.sent_psn = psn;
        self.max_first = psn;
        self.sent_first = psn;
        self.heard = psn;
        self.resent_until = psn;
    }

    /// Moves the send PSN by `npkts`; `done` ends the current WQE.
    fn advance(&mut self, npkts: u32, done: bool) {
        if Psn::new(self.psn).diff(Psn::new(self.max_psn)) < 0 {
            self.ev.resent = self.ev.resent.wrapping_add(npkts);
        }
        let first = self.psn;
        self.psn = Psn::new(self.psn).add(npkts).get();
        if done {
            self.cur += 1;
            self.cur_off = 0;
        }
        if Psn::new(self.psn).diff(Psn::new(self.max_psn)) >= 0 {
            if npkts > 0 {
                self.max_first = first;
            }
            self.max_psn = self.psn;
            self.max_cur = self.cur;
            self.max_cur_off = self.cur_off;
        }
    }
}

impl Ctx<'_> {
    /// Copies and validates newly posted WQEs.
    pub(super) fn fetch(&mut self) {
        if self.copy_new_wqes().is_err() {
            // A corrupt producer index: the QP cannot go on.
            self.enter_error();
        }
    }

    /// Copies the WQEs published since the last call into their shadow
    /// slots and validates them, at most [`FETCH_BUDGET`] (the copy runs
    /// with interrupts off; `Req::pending` says more are left); fails on
    /// a producer index the process corrupted.
    pub(super) fn copy_new_wqes(&mut self) -> Result<(), crate::engine::ring::RingError> {
        let avail = self.inner.sq.available(&self.qp.sq_buf)?;
        let end = avail.min(self.inner.req.fetched.saturating_add(FETCH_BUDGET));
        // A requester stopped for ODP pages stays pending: the work item
        // runs it again once they are in. A pass in between (a doorbell,
        // the completion of an earlier message) must not take that away,
        // or the stopped WQE waits for ever when nothing is in flight to
        // time out.
        self.inner.req.pending = end < avail || self.inner.req.odp_wait;
        while self.inner.req.fetched < end {
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
            self.inner.req.last_small = (op.len as usize) < crate::engine::handover::MIN_HANDED_LEN;
            self.set_op(k, op);
            self.inner.req.fetched += 1;
        }
        Ok(())
    }

    fn validate(&self, k: u32) -> SendOp {
        let elem = self.shadow(k);
        let mut op = SendOp::default();
        let Some(w) = abi::SendWqe::from_bytes(elem) else {
            op.invalid = Some(WcStatus::LocQpOpErr);
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
            op.invalid = Some(WcStatus::LocQpOpErr);
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
                | abi::WR_ATOMIC_WRITE
                | abi::WR_LOCAL_INV
                | abi::WR_BIND_MW
        ) || (op.opcode == WR_REG_MR && self.qp.kernel);
        // UC carries SENDs and WRITEs only (IBA 9.8.3).
        let uc_ok = !self.qp.uc
            || op.is_local()
            || matches!(
                op.opcode,
                abi::WR_SEND
                    | abi::WR_SEND_WITH_IMM
                    | abi::WR_RDMA_WRITE
                    | abi::WR_RDMA_WRITE_WITH_IMM
            );
        if !supported || !uc_ok {
            op.invalid = Some(WcStatus::LocQpOpErr);
            return op;
        }
        if op.is_local() {
            // No data, no packets: LOCAL_INV names its key in `ex`, REG_MR
            // carries its registration (a kernel ring: written by
            // `post_send`, not by a process).
            if op.opcode == WR_REG_MR {
                op.reg = RegWr::decode(&w.wr.wr);
            }
            if op.opcode == abi::WR_BIND_MW {
                op.bind = w.wr.wr.mw();
            }
            if op.flags & SEND_INLINE != 0 {
                op.invalid = Some(WcStatus::LocQpOpErr);
            }
            return op;
        }
        match op.opcode {
            abi::WR_RDMA_WRITE | abi::WR_RDMA_WRITE_WITH_IMM | abi::WR_RDMA_READ => {
                let r = w.wr.wr.rdma();
                op.remote_addr = r.remote_addr;
                op.rkey = r.rkey;
            }
            abi::WR_ATOMIC_WRITE => return atomic_write_op(op, elem, w.wr.wr.rdma()),
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
                op.invalid = Some(WcStatus::LocQpOpErr);
                return op;
            }
            if w.dma.length > self.qp.sq_max_inline {
                op.invalid = Some(WcStatus::LocLenErr);
                return op;
            }
            op.len = w.dma.length;
        } else {
            if w.dma.num_sge > self.qp.sq_max_sge {
                op.invalid = Some(WcStatus::LocQpOpErr);
                return op;
            }
            op.num_sge = w.dma.num_sge;
            let mut total: u64 = 0;
            for i in 0..op.num_sge as usize {
                match abi::SendWqe::sge(elem, i) {
                    Some(s) => total += u64::from(s.length),
                    None => {
                        op.invalid = Some(WcStatus::LocQpOpErr);
                        return op;
                    }
                }
            }
            if total > u64::from(abi::MAX_MSG_SIZE) {
                op.invalid = Some(WcStatus::LocLenErr);
                return op;
            }
            op.len = total as u32;
        }
        if op.is_read_or_atomic() && op.opcode != abi::WR_RDMA_READ && op.len < 8 {
            op.invalid = Some(WcStatus::LocLenErr);
        }
        op
    }

    /// How many WQEs (from the consumer index) have had packets sent.
    pub(super) fn started(&self) -> u32 {
        let r = &self.inner.req;
        (r.max_cur + u32::from(r.max_cur_off > 0)).min(r.fetched)
    }

    /// READ and atomic requests sent before the send position (`cur`,
    /// `cur_off`) still owed a response: what counts against
    /// `max_rd_atomic` (a READ in parts, `engine::rc::requester`, counts
    /// each part). WQEs from the send position on are not counted: after a
    /// rewind they are asked for again, and counting them would make a
    /// retried READ wait for its own response.
    fn outstanding_rd(&self) -> u32 {
        let r = &self.inner.req;
        let mtu = self.mtu().max(1);
        let mut n: u32 = 0;
        for k in 0..r.cur.saturating_add(1).min(r.fetched) {
            let op = self.op(k);
            if !op.is_read_or_atomic() || op.done {
                continue;
            }
            let owed = if op.opcode != abi::WR_RDMA_READ {
                u32::from(k < r.cur)
            } else {
                let sent = if k < r.cur { op.npkts } else { r.cur_off / mtu };
                requester::requests_outstanding(op.npkts, op.rd_pkts, sent)
            };
            n = n.saturating_add(owed);
        }
        n
    }

    /// Whether every WQE before `k` has completed.
    fn all_done_before(&self, k: u32) -> bool {
        (0..k).all(|j| self.op(j).done)
    }

    /// Executes local operation `op` (LOCAL_INV, REG_MR or BIND_MW) on the
    /// QP's PD; a refused one completes with `IB_WC_LOC_QP_OP_ERR` (a bind:
    /// `IB_WC_MW_BIND_ERR`), as in rxe.
    fn local_op(&self, op: &SendOp) -> Result<(), WcStatus> {
        let refused = |e: &dyn core::fmt::Debug| {
            pr_debug!(
                "qp {}: local operation {:#x} refused: {:?}\n",
                self.qp.qpn,
                op.opcode,
                e
            );
        };
        match op.opcode {
            WR_REG_MR => {
                let g = op.reg;
                crate::mr::fast_register(
                    self.dev,
                    self.rcu,
                    self.qp.pd,
                    (g.index, g.key, g.access, g.iova),
                )
                .map_err(|e| refused(&e))
            }
            abi::WR_BIND_MW => {
                let (pd, qpn) = (self.qp.pd, self.qp.qpn);
                return crate::mw::bind(self.dev, self.rcu, pd, qpn, &op.bind).map_err(|e| {
                    refused(&e);
                    WcStatus::MwBindErr
                });
            }
            _ => self.invalidate_key(op.ex, false),
        }
        .map_err(|()| WcStatus::LocQpOpErr)
    }

    /// What a requester pass starts with in the QP's state: in ERR it
    /// flushes, below RTS it does nothing, in RTS it fetches new WQEs, in
    /// SQD it goes on with those it has. `None`: the pass is over;
    /// else whether the QP is in SQD.
    fn begin_pass(&mut self) -> Option<bool> {
        match self.inner.state {
            sys::ib_qp_state_IB_QPS_ERR => {
                // `enter_error` cleared the hint; nothing sets it in ERR.
                self.fetch();
                self.flush_sq();
                None
            }
            sys::ib_qp_state_IB_QPS_RTS => {
                self.fetch();
                Some(false)
            }
            sys::ib_qp_state_IB_QPS_SQD => {
                // Draining: what was fetched is finished, nothing new is
                // fetched; the return to RTS runs the send queue again.
                // (A WQE waiting for ODP pages stays pending, as in
                // `fetch`.)
                self.inner.req.pending = self.inner.req.odp_wait;
                Some(true)
            }
            _ => {
                // Nothing is fetched below RTS: the work item has nothing
                // to come back for.
                self.inner.req.pending = false;
                self.qp.req_waits.store(false, Ordering::Relaxed);
                self.qp.req_streams.store(false, Ordering::Relaxed);
                None
            }
        }
    }

    /// Fetches new WQEs and sends what the window allows.
    pub(crate) fn run_requester(&mut self) {
        let Some(sqd) = self.begin_pass() else {
            return;
        };
        // Whether the pass stops at the window or the READ/atomic limit.
        let mut waits = false;
        // Whether it stops because a packet could not be allocated; and
        // whether an earlier pass did (this pass is the retry).
        let mut no_mem = false;
        let had_mem_wait = core::mem::take(&mut self.inner.req.mem_wait);
        let was_idle = self.inner.req.una == self.inner.req.max_psn;
        // SAFETY: plain read of a module parameter.
        self.inner.req.ack_at_tail = !self.qp.uc && unsafe { sys::rroce_helper_tx_ack_at_tail() };
        self.inner.req.pass_unasked = false;
        while !self.inner.req.rnr_wait
            && !self.inner.req.odp_wait
            && self.inner.req.cur < self.inner.req.fetched
        {
            let k = self.inner.req.cur;
            let mut op = self.op(k);
            let r = &self.inner.req;
            if op.invalid.is_some() && Psn::new(r.psn).diff(Psn::new(r.max_psn)) >= 0 {
                // Completes (with its error) once everything before it,
                // and what of it was sent, is acknowledged. Behind
                // `max_psn` (a loss) what of it was sent is resent, up to
                // the packet that failed. (A WQE that failed before
                // sending anything is met only at `max_psn`; a READ the
                // completer failed after it was sent can have later WQEs
                // sent behind it, which a rewind resends too.)
                break;
            }
            if sqd && !requester::sqd_sends(Psn::new(r.psn), Psn::new(r.max_psn), r.cur_off) {
                // Draining: a WQE not begun (a local one too) waits.
                break;
            }
            if op.is_local() {
                // A fenced local operation waits for every earlier WQE to
                // complete (as rxe's fence); an unfenced one runs now, in
                // order. One executed before a rewind is not run again.
                if !op.done {
                    if op.flags & SEND_FENCE != 0 && !self.all_done_before(k) {
                        waits = true;
                        break;
                    }
                    if let Err(status) = self.local_op(&op) {
                        op.invalid = Some(status);
                        self.set_op(k, op);
                        break;
                    }
                    op.done = true;
                    op.first_psn = self.inner.req.psn;
                    op.npkts = 0;
                    self.set_op(k, op);
                }
                self.inner.req.advance(0, true);
                continue;
            }
            let (psn, una) = (Psn::new(self.inner.req.psn), Psn::new(self.inner.req.una));
            if !self.inner.req.window.may_send(psn, una) {
                waits = true;
                break;
            }
            // Every READ request (each part of a READ) and atomic counts
            // against `max_rd_atomic`; a fenced WQE waits for all of them.
            // (One walk of the WQEs for both.)
            let fenced = self.inner.req.cur_off == 0 && op.flags & SEND_FENCE != 0;
            let rd = if op.is_read_or_atomic() || fenced {
                self.outstanding_rd()
            } else {
                0
            };
            if op.is_read_or_atomic() && rd >= u32::from(self.inner.attrs.max_rd_atomic).max(1) {
                waits = true;
                break;
            }
            if fenced && rd > 0 {
                waits = true;
                break;
            }
            if self.inner.req.cur_off == 0 {
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
                Ok(false) => {
                    // Memory, unless the WQE waits for its ODP pages.
                    no_mem = !self.inner.req.odp_wait;
                    break;
                }
                Err(status) => {
                    // A local protection or length error: this WQE completes
                    // in error after everything before it.
                    op.invalid = Some(status);
                    self.set_op(k, op);
                    break;
                }
            }
        }
        super::state::set_hint(&self.qp.req_waits, waits);
        self.ask_at_tail();
        if was_idle && self.inner.req.una != self.inner.req.max_psn {
            self.arm_retry_timer();
        }
        self.after_mem_wait(no_mem, had_mem_wait);
        // Nothing in flight: an invalid WQE at the head completes now.
        self.complete_ready();
        if sqd {
            self.check_sq_drained();
        }
    }

    /// In SQD: once nothing begun is left to send or to be acknowledged
    /// (`engine::rc::requester::sq_drained`), the send queue has drained:
    /// `query_qp` says so, and `IB_EVENT_SQ_DRAINED` is due if the move
    /// to SQD asked for it (once per entry to SQD; the flush that follows
    /// under every caller hands it to the work item). A datagram QP has
    /// nothing in flight: it drains on entry.
    pub(super) fn check_sq_drained(&mut self) {
        let r = &self.inner.req;
        if !r.draining || self.inner.state != sys::ib_qp_state_IB_QPS_SQD {
            return;
        }
        if !self.qp.ud
            && !requester::sq_drained(
                Psn::new(r.una),
                Psn::new(r.psn),
                Psn::new(r.max_psn),
                r.cur_off,
            )
        {
            return;
        }
        self.inner.req.draining = false;
        self.inner.req.drained_event = self.inner.attrs.sqd_notify;
    }

    /// A pass that stopped for lack of memory (`no_mem`) with nothing in
    /// flight waits for its timer, armed for [`MEM_RETRY_US`]:
    /// nothing else would run it again, as no ACK and no retransmission
    /// timeout is to come. With packets in flight it waits for their ACK
    /// (which runs the requester) or their timeout, as any pass does: the
    /// short timer would push the timeout off for as long as memory
    /// stays short. A pass after such a wait (`had`) that did not stop
    /// the same way leaves no short expiry behind to be taken for a
    /// timeout: the timer runs for what is in flight, or not at all.
    fn after_mem_wait(&mut self, no_mem: bool, had: bool) {
        let idle = self.inner.req.una == self.inner.req.max_psn;
        if no_mem && idle {
            self.inner.req.mem_wait = true;
            super::bump(&mut self.inner.req.ev.mem_waits);
            // SAFETY: the timer lives as long as the QP.
            unsafe {
                sys::rroce_helper_timer_arm_us(self.qp.timer, MEM_RETRY_US as kernel::ffi::c_ulong)
            };
        } else if had {
            if !idle && timeout_us(self.inner.attrs.timeout).is_some() {
                self.arm_retry_timer();
            } else {
                // Idle (a wait was set only then, so no RNR wait runs on
                // this timer), or nothing in flight is ever timed out.
                // SAFETY: the timer lives as long as the QP.
                unsafe { sys::rroce_helper_timer_cancel(self.qp.timer) };
            }
        }
    }

    /// Ends a pass that queued data packets without an ACK request since
    /// its last one by setting AckReq on its last queued request packet
    /// (`engine::rc::window::ask_at_tail`). Nothing takes packets from the
    /// request lane while the pass holds the QP's lock, so that packet is
    /// the pass's last, and its ICRC is written only when it is sent.
    fn ask_at_tail(&mut self) {
        let r = &mut self.inner.req;
        if !window::ask_at_tail(r.ack_at_tail, r.pass_unasked) {
            return;
        }
        r.pass_unasked = false;
        let marked = self
            .inner
            .queue_mut(Lane::Req)
            .last_mut()
            .and_then(|skb| skb.last_packet_mut())
            .is_some_and(wire::set_ack_req);
        if marked {
            self.inner.req.noack = 0;
        }
    }

    /// Sends the next packet of WQE `k`. `Ok(false)`: could not (memory).
    fn send_next_packet(&mut self, k: u32, op: SendOp) -> Result<bool, WcStatus> {
        let mtu = self.mtu();
        let off = self.inner.req.cur_off;
        let psn = self.inner.req.psn;
        let first = off == 0;
        match op.opcode {
            abi::WR_RDMA_READ => return Ok(self.send_read_request(&op, off, psn)),
            abi::WR_ATOMIC_CMP_AND_SWP | abi::WR_ATOMIC_FETCH_AND_ADD => {
                return Ok(self.send_atomic(&op, psn))
            }
            _ => {}
        }
        // `off < op.len` while the MTU that cut the WQE holds, as it does
        // until RESET; saturating all the same (an overflow is an oops).
        let n = op.len.saturating_sub(off).min(mtu);
        let last = off.saturating_add(n) >= op.len;
        let mut opcode = data_opcode(op.opcode, first, last);
        if self.qp.uc {
            // The UC opcode of a SEND or WRITE packet is its RC opcode in
            // the UC range (0x20 up).
            opcode = Opcode::from_u8(opcode.code() | 0x20).unwrap_or(opcode);
        }
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
        // This packet counted, if it goes out (one not built is not).
        let noack = self.inner.req.noack.saturating_add(1);
        let r = &self.inner.req;
        if !self.qp.uc && r.window.ack_req_in_pass(last, noack, r.ack_at_tail) {
            h.bth.ack_req = true;
        }
        let elem_k = k;
        // The packets of this message after this one (a GSO run may carry
        // them with it).
        let follow = op
            .len
            .saturating_sub(off)
            .saturating_sub(n)
            .div_ceil(mtu.max(1));
        // An RC request's payload from user MRs goes out without a copy
        // (see `ZcPayload`).
        let zc = if op.inline || self.qp.uc {
            None
        } else {
            self.zc_payload(self.shadow(elem_k), abi::SendWqe::sge, op.num_sge, (off, n))
        };
        let r = self.queue_in_run(&h, n as usize, follow, zc.as_ref(), |ctx, buf| {
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
                // UC asks for no ACK and waits for none: nothing to count.
                self.inner.req.noack = if h.bth.ack_req || self.qp.uc {
                    0
                } else {
                    noack
                };
                self.inner.req.pass_unasked = !h.bth.ack_req && !self.qp.uc;
                self.inner.req.cur_off += n;
                self.inner.req.advance(1, last);
                if self.qp.uc {
                    // Nothing is acknowledged: a packet sent is done with,
                    // and a WQE completes once its last packet is queued.
                    self.ack_through(Psn::new(psn));
                }
                Ok(true)
            }
            Ok(false) => Ok(false),
            // ODP pages of an SGE are not there: the WQE waits for them.
            Err(SgeError::Absent(f)) if self.odp_wait_requester(f) => Ok(false),
            Err(e) => Err(e.status()),
        }
    }

    /// Sends the READ request for the rest of READ WQE `op` (from byte
    /// `off`); `false` if it could not be built (memory).
    fn send_read_request(&mut self, op: &SendOp, off: u32, psn: u32) -> bool {
        let mtu = self.mtu().max(1);
        let idx = off / mtu;
        // The part `idx` is in, from `idx` on (`engine::rc::requester`).
        // (The MTU may have changed since the WQE was cut: at least one
        // packet, the rest of the WQE.)
        let n = requester::part_pkts(op.npkts, idx).max(1);
        let done = idx.saturating_add(n) >= op.npkts;
        let left = op.len.saturating_sub(off);
        let len = if done {
            left
        } else {
            left.min(n.saturating_mul(mtu))
        };
        let mut h = Headers::new(self.bth(Opcode::RcReadRequest, psn));
        h.bth.ack_req = true;
        h.reth = Some(Reth {
            va: op.remote_addr.wrapping_add(u64::from(off)),
            rkey: op.rkey,
            len,
        });
        if !matches!(self.queue(&h, 0, |_, _| Ok(())), Ok(true)) {
            return false;
        }
        // It asks: its responses acknowledge every request before it.
        self.inner.req.pass_unasked = false;
        if !done {
            self.inner.req.cur_off = off.saturating_add(len);
        }
        // Done or not, the request covers `n` PSNs: a last part is the
        // rest of the WQE (`part_pkts`), past it one.
        self.inner.req.advance(n, done);
        true
    }

    /// Sends atomic WQE `op`; `false` if it could not be built (memory).
    fn send_atomic(&mut self, op: &SendOp, psn: u32) -> bool {
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
            return false;
        }
        self.inner.req.pass_unasked = false;
        self.inner.req.advance(1, true);
        true
    }

    pub(super) fn arm_retry_timer(&self) {
        if let Some(us) = timeout_us(self.inner.attrs.timeout) {
            // SAFETY: the timer lives as long as the QP.
            unsafe { sys::rroce_helper_timer_arm_us(self.qp.timer, us as kernel::ffi::c_ulong) };
        }
    }

    /// Goes back (or forward, up to what was sent) to `psn`: the WQE
    /// holding it is resent from that packet.
    pub(super) fn rewind(&mut self, psn: Psn) {
        let r = &self.inner.req;
        let sent = (0..r.fetched).map(|k| {
            let op = self.op(k);
            SentWqe {
                first_psn: Psn::new(op.first_psn),
                npkts: op.npkts,
                done: op.done,
            }
        });
        let target = rewind_target(psn, Psn::new(r.max_psn), r.max_cur, r.max_cur_off, sent);
        match target {
            Rewind::ToMax => {
                let r = &mut self.inner.req;
                r.psn = r.max_psn;
                r.cur = r.max_cur;
                r.cur_off = r.max_cur_off;
            }
            Rewind::At { k, idx } => {
                self.inner.req.cur = k;
                self.inner.req.cur_off = idx.saturating_mul(self.mtu());
                self.inner.req.psn = psn.get();
                self.inner.req.noack = 0;
                // Requests up to `max_psn` may now be on their way twice,
                // the copy sent before and the one sent again:
                // `engine::rc::requester::requests_in_flight`.
                self.inner.req.resent_until = self.inner.req.max_psn;
                let mut op = self.op(k);
                if op.opcode == abi::WR_RDMA_READ {
                    op.rd_pkts = idx;
                    self.set_op(k, op);
                }
                self.dev.counters.inc(Counter::Retransmits);
            }
            Rewind::Nowhere => {}
        }
    }
}

/// The payload of an ATOMIC WRITE: one naturally aligned 64-bit word.
const ATOMIC_WRITE_LEN: u32 = 8;

/// Completes the validation of ATOMIC WRITE `op` (send queue element
/// `elem`, remote address and key `r`). The provider puts the 8 bytes to
/// write where inline data goes (`dma.atomic_wr`); they are taken from
/// there, whatever the length, SGE count and inline flag say.
fn atomic_write_op(mut op: SendOp, elem: &[u8], r: abi::WrRdma) -> SendOp {
    op.remote_addr = r.remote_addr;
    op.rkey = r.rkey;
    if abi::SendWqe::payload(elem, ATOMIC_WRITE_LEN as usize).is_none() {
        op.invalid = Some(WcStatus::LocLenErr);
    }
    op.inline = true;
    op.len = ATOMIC_WRITE_LEN;
    op
}

/// The opcode of a SEND, WRITE or ATOMIC WRITE packet of WR opcode `wr`:
/// the first and/or last of its message.
fn data_opcode(wr: u32, first: bool, last: bool) -> Opcode {
    if wr == abi::WR_ATOMIC_WRITE {
        return Opcode::RcAtomicWrite;
    }
    let is_write = matches!(wr, abi::WR_RDMA_WRITE | abi::WR_RDMA_WRITE_WITH_IMM);
    match (is_write, first, last, wr) {
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
    }
}
