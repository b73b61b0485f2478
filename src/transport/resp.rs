// SPDX-License-Identifier: GPL-2.0

//! The responder: checks each request's PSN (duplicates re-ACKed or
//! replayed, gaps NAKed once), its opcode sequence, keys and bounds, places
//! the data, and queues the ACKs and READ/atomic responses it owes.

use kernel::prelude::*;

use super::{odp::FAULT_AHEAD, Ctx, Lane, RecvCtx, Resp, SgeError, WriteCtx};
use crate::{
    abi,
    completion::{Completion, WcEx, WcOpcode, WcStatus},
    counters::Counter,
    cq::Kind,
    engine::{
        psn::Psn,
        rc::{
            checks,
            responder::{self, Duplicate, RdEntry, RdKind, RequestClass, UcRequest},
        },
        wire::{self, Aeth, AtomicAckEth, Headers, NakCode, OpKind, Opcode, Position, Syndrome},
    },
    mr::{self, AccessError},
    rdma::sys,
};

mod atomic;
mod queue;

#[cfg(CONFIG_KUNIT)]
pub(crate) use queue::selftest as queue_selftest;
pub(crate) use queue::RespQueue;
use queue::{ReadItem, RespItem};

/// READ response packets a QP's responder builds per turn on a receive
/// thread (or in softirq context): where it takes a READ request, and per
/// continuation pass after that (`qp::tx`, kicked to the back of the
/// thread's list each time). A READ request arriving behind other QPs'
/// streams then waits for at most a quantum per active QP before its own
/// first responses leave, not for their whole READs.
pub(crate) const RESP_QUANTUM: u32 = 16;

/// Packets the responder leaves queued for sending per QP: beyond this,
/// READ responses wait in the response queue (built by a continuation pass
/// once the QP's packets are sent) instead of piling up as skbs.
const RESP_TX_CAP: usize = 64;

impl Resp {
    /// A request was processed: `next` is the next expected PSN, the gap
    /// (if any) is closed, and a message end counts in the MSN.
    fn accept(&mut self, next: Psn, end_of_message: bool) {
        self.nak_sent = false;
        self.epsn = next.get();
        if end_of_message {
            self.msn = (self.msn + 1) & wire::QPN_MASK;
        }
    }
}

impl<'a> Ctx<'a> {
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
        let ev = &mut self.inner.resp.ev;
        ev.last_ack = psn;
        ev.at_ack = super::now_ms();
        match syndrome {
            Syndrome::Ack { .. } => super::bump(&mut ev.acks),
            Syndrome::RnrNak { .. } => super::bump(&mut ev.rnr_naks),
            Syndrome::Nak(NakCode::PsnSequenceError) => super::bump(&mut ev.seq_naks),
            Syndrome::Nak(_) => {}
        }
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

    /// The next packet of a READ's responses. Every packet checks the
    /// R_Key, PD, access and bounds of what it reads again, as the request
    /// was checked (the MR may have been deregistered, and its key reused,
    /// since): if that fails now the READ ends with a remote access error
    /// NAK (`Err`). `Ok(false)`: not built now (memory).
    fn emit_read_packet(&mut self, r: ReadItem) -> Result<bool, ()> {
        let i = r.next;
        let psn = Psn::new(r.psn).add(i).get();
        let Some((off, n)) = r.packet() else {
            self.resp_fatal(NakCode::RemoteAccessError, psn);
            return Err(());
        };
        let opcode = match (r.npkts == 1, i == 0, i.checked_add(1) == Some(r.npkts)) {
            (true, _, _) => Opcode::RcReadResponseOnly,
            (false, true, _) => Opcode::RcReadResponseFirst,
            (false, false, true) => Opcode::RcReadResponseLast,
            _ => Opcode::RcReadResponseMiddle,
        };
        let mut h = Headers::new(self.bth(opcode, psn));
        if opcode.info().has(wire::Ext::Aeth) {
            h.aeth = Some(Aeth {
                syndrome: Syndrome::Ack {
                    credits: Syndrome::CREDITS_INVALID,
                },
                msn: r.msn,
            });
        }
        let va = r.va.checked_add(u64::from(off));
        let follow = r.npkts.saturating_sub(i).saturating_sub(1);
        let built = self.queue_in_run(&h, n as usize, follow, None, |ctx, buf| {
            if buf.is_empty() {
                return Ok(());
            }
            let va = va.ok_or(SgeError::Prot)?;
            let need = sys::ib_access_flags_IB_ACCESS_REMOTE_READ;
            let mr = ctx.remote_mr(r.rkey, va, n, need).ok_or(SgeError::Prot)?;
            mr.read(va, buf).map_err(|e| match e {
                AccessError::Absent => {
                    // The rest of the READ, checked against the MR with it.
                    let rest = r.len.saturating_sub(off).clamp(n, FAULT_AHEAD.max(n));
                    SgeError::Absent(mr.fault(va, rest, false))
                }
                _ => SgeError::Prot,
            })
        });
        match built {
            Ok(b) => Ok(b),
            // ODP pages are not there: the response waits (the work item
            // faults them in and builds it).
            Err(SgeError::Absent(f)) if self.odp_absent(f) => Ok(false),
            Err(_) => {
                self.resp_fatal(NakCode::RemoteAccessError, psn);
                Err(())
            }
        }
    }

    /// Builds up to `budget` queued responses, in order, while fewer than
    /// [`RESP_TX_CAP`] of the QP's responses wait to be sent; the rest stay
    /// queued for a continuation pass (`QpState::flush_lanes`).
    pub(crate) fn pump_responses(&mut self, mut budget: u32) {
        self.inner.resp_q.set_stalled(false);
        while budget > 0 && self.inner.lane_packets(Lane::Resp) < RESP_TX_CAP {
            let Some(item) = self.inner.resp_q.front() else {
                return;
            };
            let built = match item {
                RespItem::Ack { syndrome, psn, msn } => self.emit_ack(syndrome, psn, msn),
                RespItem::AtomicAck { psn, msn, orig } => self.emit_atomic_ack(psn, msn, orig),
                RespItem::Read(r) => match self.emit_read_packet(r) {
                    Ok(b) => b,
                    // The READ failed: the QP is in the error state.
                    Err(()) => return,
                },
            };
            if !built {
                self.inner.resp_q.set_stalled(true);
                return;
            }
            budget -= 1;
            match item {
                RespItem::Read(r) if r.next.saturating_add(1) < r.npkts => {
                    self.inner.resp_q.set_front(RespItem::Read(ReadItem {
                        next: r.next + 1,
                        ..r
                    }))
                }
                _ => self.inner.resp_q.pop(),
            }
        }
    }

    fn nak(&mut self, code: NakCode, psn: u32) {
        self.send_ack(Syndrome::Nak(code), psn);
    }

    /// No receive WQE for a request that needs one: an RNR NAK naming the
    /// QP's `min_rnr_timer`.
    fn rnr_nak(&mut self, psn: u32) {
        self.dev.counters.inc(Counter::SendRnrErr);
        if self.qp.uc {
            // UC cannot ask for the message again: it is lost.
            return self.drop_message();
        }
        // The NAK sends the requester back to `psn` once its timer runs
        // out; the requests it sent behind this one are already on their
        // way and are dropped in silence, as after a sequence NAK. A
        // sequence NAK for them tells the requester of a loss that did not
        // happen: rroce's halves its window, one that goes back at once
        // cuts its RNR wait short.
        self.inner.resp.nak_sent = true;
        let timer = self.inner.attrs.min_rnr_timer;
        self.send_ack(Syndrome::RnrNak { timer }, psn);
    }

    /// A class C/D error: NAK, then the QP goes to the error state. UC
    /// has no NAKs: the message is dropped instead (as rxe), and the QP
    /// stays as it is.
    fn resp_fatal(&mut self, code: NakCode, psn: u32) {
        pr_debug!(
            "qp {}: responder error {:?} at psn {:#x}\n",
            self.qp.qpn,
            code,
            psn
        );
        if self.qp.uc {
            return self.drop_message();
        }
        match code {
            NakCode::InvalidRequest => self.dev.counters.inc(Counter::SentNakInvReq),
            NakCode::RemoteAccessError => self.dev.counters.inc(Counter::SentNakRemAccess),
            _ => {}
        }
        // Nothing queued behind an error is sent; the NAK goes now.
        self.inner.resp_q.clear();
        let msn = self.inner.resp.msn & wire::QPN_MASK;
        self.emit_ack(Syndrome::Nak(code), psn, msn);
        self.enter_error();
    }

    /// Whether a packet from `src` to `dst` (IP addresses as GIDs) came
    /// over this connected QP's path, as rxe's `check_addr`: from the
    /// AV's destination to its source GID. `None`: the QP has no path yet
    /// (before RTR) and takes no packets.
    pub(crate) fn check_path(&self, src: &[u8; 16], dst: &[u8; 16]) -> Option<bool> {
        let av = self.inner.attrs.av.as_ref()?;
        Some(checks::path_matches(src, dst, &av.dgid, &av.sgid))
    }

    /// The responder: a request packet.
    pub(crate) fn on_request(&mut self, pkt: &wire::Packet<'_>) {
        let st = self.inner.state;
        if st != sys::ib_qp_state_IB_QPS_RTR
            && st != sys::ib_qp_state_IB_QPS_RTS
            && st != sys::ib_qp_state_IB_QPS_SQD
        {
            return;
        }
        let psn = pkt.psn();
        let epsn = Psn::new(self.inner.resp.epsn);
        if self.qp.uc {
            let starts = pkt.info().position.is_start();
            match responder::uc_request(psn, epsn, self.inner.resp.uc_drop, starts) {
                UcRequest::Take => {}
                UcRequest::Resync => {
                    // The message in progress (if any) lost packets; its
                    // receive WQE stays on the ring for this one.
                    self.dev.counters.inc(Counter::OutOfSeqRequest);
                    self.abandon_message();
                    self.inner.resp.epsn = psn.get();
                }
                UcRequest::Drop => {
                    self.dev.counters.inc(Counter::OutOfSeqRequest);
                    return self.drop_message();
                }
            }
            return self.on_new_request(pkt);
        }
        match responder::classify_request(psn, epsn, self.inner.resp.nak_sent) {
            RequestClass::New => {}
            RequestClass::Duplicate => {
                self.dev.counters.inc(Counter::DupRequest);
                return self.duplicate(pkt);
            }
            RequestClass::OutOfSequence { nak } => {
                if nak {
                    self.inner.resp.nak_sent = true;
                    self.dev.counters.inc(Counter::OutOfSeqRequest);
                    self.nak(NakCode::PsnSequenceError, epsn.get());
                }
                return;
            }
        }
        self.on_new_request(pkt)
    }

    /// A UC message in progress is given up: its receive WQE waits for the
    /// next message (an RQ's is still on the ring; an SRQ's, which left
    /// its ring, is kept for it), a WRITE's data stays where it landed.
    fn abandon_message(&mut self) {
        if self.inner.resp.recv.active && self.qp.srq().is_some() {
            self.inner.resp.srq_held = true;
        }
        self.inner.resp.recv.active = false;
        self.inner.resp.write.active = false;
        self.inner.resp.uc_drop = false;
    }

    /// UC: the rest of the current message is dropped, up to the next
    /// first or only packet.
    fn drop_message(&mut self) {
        self.abandon_message();
        self.inner.resp.uc_drop = true;
    }

    /// The request at the expected PSN.
    fn on_new_request(&mut self, pkt: &wire::Packet<'_>) {
        let psn = pkt.psn();
        let info = pkt.info();
        // Opcode sequence: a message in progress continues, else a new one
        // starts.
        let (in_send, in_write) = (self.inner.resp.recv.active, self.inner.resp.write.active);
        if !responder::opcode_sequence_ok(info.kind, info.position, in_send, in_write) {
            return self.resp_fatal(NakCode::InvalidRequest, psn.get());
        }
        let mtu = self.mtu() as usize;
        if !responder::payload_len_ok(info.kind, info.position, pkt.payload().len(), mtu) {
            return self.resp_fatal(NakCode::InvalidRequest, psn.get());
        }
        let h = pkt.headers();
        if h.reth.is_some_and(|r| !responder::reth_len_ok(r.len)) {
            return self.resp_fatal(NakCode::InvalidRequest, psn.get());
        }
        match info.kind {
            OpKind::Send => self.on_send(pkt),
            OpKind::RdmaWrite => self.on_write(pkt),
            OpKind::RdmaReadRequest => self.on_read_request(pkt),
            OpKind::CompareSwap | OpKind::FetchAdd => self.on_atomic(pkt),
            OpKind::AtomicWrite => self.on_atomic_write(pkt),
            _ => self.resp_fatal(NakCode::InvalidRequest, psn.get()),
        }
    }

    /// The packet at `epsn` was processed.
    fn resp_next(&mut self, pkt: &wire::Packet<'_>, end_of_message: bool) {
        self.inner.resp.accept(pkt.psn().next(), end_of_message);
        if pkt.bth().ack_req && !self.qp.uc {
            self.send_ack(
                Syndrome::Ack {
                    credits: Syndrome::CREDITS_INVALID,
                },
                pkt.psn().get(),
            );
        }
    }

    /// Takes the next receive WQE into `rq_shadow`; `false` if none.
    pub(super) fn take_recv(&mut self) -> Result<bool, ()> {
        let e = self.qp.rq_elem;
        if self.inner.rq_shadow.len() < e {
            return Err(());
        }
        if self.inner.resp.srq_held {
            // The SRQ WQE taken for a message an ODP fault put off.
            self.inner.resp.srq_held = false;
        } else if let Some(srq) = self.qp.srq() {
            // The WQE leaves the SRQ now: this QP completes it.
            match srq.take(&mut self.inner.rq_shadow) {
                Ok(Some(limit_fired)) => {
                    if limit_fired {
                        // Raised under the QP lock, as rxe does; the
                        // handlers (uverbs' async event file, a kernel
                        // consumer's) only queue or note it.
                        srq.raise_limit();
                    }
                }
                Ok(None) => return Ok(false),
                Err(_) => return Err(()),
            }
        } else {
            let Some(rq_buf) = self.qp.rq_buf.as_ref() else {
                return Err(());
            };
            let slot = match self.inner.rq.peek(rq_buf) {
                Ok(s) => s,
                Err(crate::engine::ring::RingError::Empty) => return Ok(false),
                Err(_) => return Err(()),
            };
            // SAFETY: the slot holds `e` bytes; copied before validation.
            unsafe {
                core::ptr::copy_nonoverlapping(
                    rq_buf.at(slot.offset()),
                    self.inner.rq_shadow.as_mut_ptr(),
                    e,
                )
            };
        }
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

    /// The receive WQE just taken for a message's first packet is not used
    /// now (ODP pages were missing; the packet comes back): an RQ's stays
    /// on the ring, an SRQ's (which left its ring) is kept for it.
    pub(super) fn odp_untake(&mut self) {
        self.inner.resp.recv.active = false;
        self.inner.resp.srq_held = self.qp.srq().is_some();
    }

    /// Retires the receive WQE in `rq_shadow` with completion `c`.
    pub(super) fn complete_recv(&mut self, c: Completion, solicited: bool) {
        // An SRQ's WQE left its ring when it was taken.
        if let Some(rq_buf) = self.qp.rq_buf.as_ref() {
            if let Ok(slot) = self.inner.rq.peek(rq_buf) {
                let _ = self.inner.rq.advance(slot, rq_buf);
            }
        }
        self.inner.resp.recv.active = false;
        let kind = if c.is_error() {
            Kind::Error
        } else if solicited {
            Kind::Solicited
        } else {
            Kind::Unsolicited
        };
        self.post_cqe_kind(self.qp.recv_cq, &c, kind);
    }

    fn on_send(&mut self, pkt: &wire::Packet<'_>) {
        let info = pkt.info();
        let psn = pkt.psn().get();
        if matches!(info.position, Position::First | Position::Only) {
            match self.take_recv() {
                Ok(true) => {}
                Ok(false) => return self.rnr_nak(psn),
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
                |mr, va, rg| mr.write_scatter(va, data.range(rg).ok_or(AccessError::Bounds)?),
            )
        };
        if let Err(SgeError::Absent(f)) = scattered {
            if self.odp_absent(f) {
                // ODP pages of the receive buffer are not there: not now.
                // A message's first packet gives its receive WQE back (it
                // is taken again when the packet comes back).
                if matches!(info.position, Position::First | Position::Only) {
                    self.odp_untake();
                }
                return self.rnr_nak(psn);
            }
        }
        if let Err(e) = scattered {
            let status = e.status();
            let c = Completion {
                src_qp: self.inner.attrs.dest_qpn,
                ..Completion::new(r.wr_id, status, WcOpcode::Recv, self.qp.qpn)
            };
            self.complete_recv(c, false);
            if self.qp.uc {
                // A receive WQE completed in error: the QP goes to the
                // error state (no NAK on UC).
                return self.enter_error();
            }
            let code = if status == WcStatus::LocLenErr {
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
            let mut c = Completion {
                byte_len: self.inner.resp.recv.off,
                src_qp: self.inner.attrs.dest_qpn,
                ..Completion::new(r.wr_id, WcStatus::Success, WcOpcode::Recv, self.qp.qpn)
            };
            if let Some(imm) = h.imm_dt {
                c.ex = WcEx::Imm(imm.imm.to_be());
            }
            if let Some(ieth) = h.ieth {
                // SEND with invalidate: the named fast-registration MR on
                // this QP's PD, or type 2 window bound to this QP, becomes
                // free before the receive completes. Any other key (a user
                // or DMA MR, another PD's, a stale key byte, a window not
                // bound here) fails the receive and NAKs the request (rxe:
                // RESPST_ERR_INVALIDATE_RKEY).
                if self.invalidate_key(ieth.rkey, true).is_err() {
                    c.status = WcStatus::RemInvReqErr;
                    c.byte_len = 0;
                    self.complete_recv(c, false);
                    return self.resp_fatal(NakCode::InvalidRequest, psn);
                }
                c.ex = WcEx::Inv(ieth.rkey);
            }
            self.complete_recv(c, pkt.bth().solicited);
        }
        self.resp_next(pkt, end);
    }

    /// Looks up `rkey` for `[va, va + len)` with `need` rights on the QP
    /// and the MR.
    fn remote_mr(&self, rkey: u32, va: u64, len: u32, need: u32) -> Option<mr::MrRef<'a>> {
        if self.inner.attrs.access & need != need {
            return None;
        }
        if crate::engine::mw::is_window_key(rkey) {
            let qp = (self.qp.pd, self.qp.qpn);
            return crate::mw::resolve(self.dev, self.rcu, qp, rkey, (va, u64::from(len)), need);
        }
        let mr = mr::lookup_remote(self.dev, rkey, self.rcu)?;
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
                    if h.reth.is_some() {
                        self.inner.resp.write.active = false;
                    }
                    return self.rnr_nak(psn);
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
            let (r, f) = match self.remote_mr(
                w.rkey,
                w.va,
                n,
                sys::ib_access_flags_IB_ACCESS_REMOTE_WRITE,
            ) {
                // The rest of the WRITE (`left` counts this packet), checked
                // against the MR at its first packet.
                Some(mr) => (
                    mr.write_scatter(w.va, data),
                    Some(mr.fault(w.va, w.left.clamp(n, FAULT_AHEAD.max(n)), true)),
                ),
                None => (Err(AccessError::Key), None),
            };
            if r == Err(AccessError::Absent) && f.is_some_and(|f| self.odp_absent(f)) {
                // ODP pages are not there: the packet comes back after
                // the RNR timer; a first one starts its message again.
                if matches!(info.position, Position::First | Position::Only) {
                    self.inner.resp.write.active = false;
                }
                if end && h.imm_dt.is_some() {
                    self.odp_untake();
                }
                return self.rnr_nak(psn);
            }
            if r.is_err() {
                self.inner.resp.write.active = false;
                return self.resp_fatal(NakCode::RemoteAccessError, psn);
            }
        }
        self.inner.resp.write.va = w.va.wrapping_add(u64::from(n));
        self.inner.resp.write.left -= n;
        if end {
            self.inner.resp.write.active = false;
            if let Some(imm) = h.imm_dt {
                let wr_id = self.inner.resp.recv.wr_id;
                let c = Completion {
                    byte_len: w.total,
                    src_qp: self.inner.attrs.dest_qpn,
                    ex: WcEx::Imm(imm.imm.to_be()),
                    ..Completion::new(
                        wr_id,
                        WcStatus::Success,
                        WcOpcode::RecvRdmaWithImm,
                        self.qp.qpn,
                    )
                };
                self.complete_recv(c, pkt.bth().solicited);
            }
        }
        self.resp_next(pkt, end);
    }

    /// The QP's `max_dest_rd_atomic`: how many READ/atomic requests are
    /// remembered and may be outstanding.
    fn rd_cap(&self) -> usize {
        usize::from(self.inner.attrs.max_dest_rd_atomic)
    }

    /// A new READ/atomic request may be accepted: the QP takes them and
    /// fewer than `max_dest_rd_atomic` still have responses to build.
    fn admit_rd_atomic(&mut self) -> bool {
        let outstanding = self.inner.resp_q.outstanding();
        responder::admit_rd_atomic(self.inner.attrs.max_dest_rd_atomic, outstanding)
    }

    /// Remembers an accepted READ/atomic request for duplicates.
    fn remember(&mut self, e: RdEntry) {
        let cap = self.rd_cap();
        let slots = &mut self.inner.resp_q.rd;
        self.inner.resp.rd.remember(slots, cap, e);
    }

    /// A new READ request.
    fn on_read_request(&mut self, pkt: &wire::Packet<'_>) {
        let psn = pkt.psn();
        let Some(reth) = pkt.headers().reth else {
            return self.resp_fatal(NakCode::InvalidRequest, psn.get());
        };
        let mtu = self.mtu();
        if mtu == 0 || !self.admit_rd_atomic() {
            return self.resp_fatal(NakCode::InvalidRequest, psn.get());
        }
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
            return self.resp_fatal(NakCode::RemoteAccessError, psn.get());
        }
        self.inner.resp.accept(psn.add(npkts), true);
        self.answer_read(psn, (reth.rkey, reth.va, reth.len), npkts, mtu);
    }

    /// Remembers the READ at `psn` of `len` bytes at `va` through `rkey`
    /// (`npkts` response packets at path MTU `mtu`) for duplicates, and
    /// queues its response.
    fn answer_read(&mut self, psn: Psn, (rkey, va, len): (u32, u64, u32), npkts: u32, mtu: u32) {
        self.remember(RdEntry {
            kind: RdKind::Read,
            psn: psn.get(),
            npkts,
            rkey,
            va,
            len,
            mtu,
            orig: 0,
        });
        let item = ReadItem {
            va,
            rkey,
            len,
            psn: psn.get(),
            npkts,
            next: 0,
            msn: self.inner.resp.msn,
            mtu,
            replay: false,
        };
        // A full queue drops the responses; the requester asks again and
        // the duplicate is answered from the remembered request.
        if self.inner.resp_q.push(RespItem::Read(item)) {
            self.pump_responses(RESP_QUANTUM);
        }
    }

    /// A duplicate READ: answered only if it repeats a remembered request,
    /// from the PSN it names, with the remembered parameters (checked
    /// again per packet).
    fn replay_read(&mut self, pkt: &wire::Packet<'_>) {
        let Some(reth) = pkt.headers().reth else {
            return;
        };
        let (cap, mtu) = (self.rd_cap(), self.mtu());
        let slots = &self.inner.resp_q.rd;
        // An ATOMIC WRITE was remembered as an empty READ.
        let len = if pkt.info().kind == OpKind::AtomicWrite {
            0
        } else {
            reth.len
        };
        let req = (reth.rkey, reth.va, len);
        let Some(r) = self
            .inner
            .resp
            .rd
            .find_read(slots, cap, pkt.psn(), req, mtu)
        else {
            self.dev.counters.inc(Counter::BadDup);
            return;
        };
        let item = ReadItem {
            va: r.va,
            rkey: r.rkey,
            len: r.len,
            psn: r.psn.get(),
            npkts: r.npkts,
            next: 0,
            // Covers the messages up to the READ's: the one before it.
            msn: self.inner.resp.msn,
            mtu,
            replay: true,
        };
        // Still being answered: start again from that PSN.
        if self.inner.resp_q.restart_read(item) || self.inner.resp_q.push(RespItem::Read(item)) {
            self.pump_responses(RESP_QUANTUM);
        }
    }

    /// A request at a PSN already processed.
    fn duplicate(&mut self, pkt: &wire::Packet<'_>) {
        super::bump(&mut self.inner.resp.ev.dups);
        let epsn = Psn::new(self.inner.resp.epsn);
        match responder::duplicate_action(pkt.info().kind, pkt.bth().ack_req, epsn) {
            Duplicate::ReplayRead => self.replay_read(pkt),
            Duplicate::ReplayAtomic => self.replay_atomic(pkt),
            // Everything up to epsn - 1 was received: say so.
            Duplicate::Ack(last) => self.send_ack(
                Syndrome::Ack {
                    credits: Syndrome::CREDITS_INVALID,
                },
                last.get(),
            ),
            Duplicate::Ignore => {}
        }
    }
}
