// SPDX-License-Identifier: GPL-2.0

//! The responder's atomics: CmpSwap and FetchAdd (answered by an atomic
//! ACK, remembered for duplicates) and ATOMIC WRITE (answered, and
//! remembered, as an empty READ).

use super::RespItem;
use crate::{
    counters::Counter,
    engine::{
        rc::responder::{RdEntry, RdKind},
        wire::{self, NakCode, OpKind},
    },
    mr::AccessError,
    rdma::sys,
    transport::{Ctx, ATOMIC_LOCK},
};

impl Ctx<'_> {
    /// A new atomic request.
    pub(super) fn on_atomic(&mut self, pkt: &wire::Packet<'_>) {
        let psn = pkt.psn();
        let Some(a) = pkt.headers().atomic_eth else {
            return self.resp_fatal(NakCode::InvalidRequest, psn.get());
        };
        if a.va % 8 != 0 || !self.admit_rd_atomic() {
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
        if let Err(e) = mr.read(a.va, &mut cur) {
            drop(guard);
            if e == AccessError::Absent && self.odp_absent(mr.fault(a.va, 8, true)) {
                return self.rnr_nak(psn.get());
            }
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
        let written = mr.write(a.va, &new.to_ne_bytes());
        drop(guard);
        if let Err(e) = written {
            // (Read and written under one lock: a page absent for writing
            // after the read was readable means it is read-only, or went.)
            if e == AccessError::Absent && self.odp_absent(mr.fault(a.va, 8, true)) {
                return self.rnr_nak(psn.get());
            }
            return self.resp_fatal(NakCode::RemoteAccessError, psn.get());
        }
        let mtu = self.mtu();
        self.remember(RdEntry {
            kind: RdKind::Atomic,
            psn: psn.get(),
            npkts: 1,
            rkey: a.rkey,
            va: a.va,
            len: 8,
            mtu,
            orig: old,
        });
        self.inner.resp.accept(psn.next(), true);
        self.queue_atomic_ack(psn.get(), old);
    }

    /// A new ATOMIC WRITE (IBA 1.5 9.4.6): one naturally aligned 64-bit
    /// word written as a whole, answered (like a READ, and as rxe) by an
    /// empty READ RESPONSE ONLY. It is remembered as a zero-length READ,
    /// so a duplicate gets that response again and is never written twice.
    pub(super) fn on_atomic_write(&mut self, pkt: &wire::Packet<'_>) {
        let psn = pkt.psn();
        // The opcode table admits exactly 8 bytes of payload.
        let (Some(reth), Some(word)) = (pkt.headers().reth, pkt.payload().to_array::<8>()) else {
            return self.resp_fatal(NakCode::InvalidRequest, psn.get());
        };
        let mtu = self.mtu();
        if reth.len != 8 || reth.va % 8 != 0 || mtu == 0 || !self.admit_rd_atomic() {
            return self.resp_fatal(NakCode::InvalidRequest, psn.get());
        }
        let Some(mr) = self.remote_mr(
            reth.rkey,
            reth.va,
            8,
            sys::ib_access_flags_IB_ACCESS_REMOTE_WRITE,
        ) else {
            return self.resp_fatal(NakCode::RemoteAccessError, psn.get());
        };
        // Under the atomics' lock: an atomic on the same word never sees
        // half of it.
        let guard = ATOMIC_LOCK.lock();
        let written = mr.write(reth.va, &word);
        drop(guard);
        if let Err(e) = written {
            if e == AccessError::Absent && self.odp_absent(mr.fault(reth.va, 8, true)) {
                return self.rnr_nak(psn.get());
            }
            return self.resp_fatal(NakCode::RemoteAccessError, psn.get());
        }
        self.inner.resp.accept(psn.next(), true);
        self.answer_read(psn, (reth.rkey, reth.va, 0), 1, mtu);
    }

    /// A duplicate atomic: its remembered original value is sent again;
    /// one that repeats no remembered atomic is dropped (never executed
    /// again).
    pub(super) fn replay_atomic(&mut self, pkt: &wire::Packet<'_>) {
        let Some(a) = pkt.headers().atomic_eth else {
            return;
        };
        let cap = self.rd_cap();
        let slots = &self.inner.resp_q.rd;
        let Some(orig) = self
            .inner
            .resp
            .rd
            .find_atomic(slots, cap, pkt.psn(), a.rkey, a.va)
        else {
            self.dev.counters.inc(Counter::BadDup);
            return;
        };
        self.queue_atomic_ack(pkt.psn().get(), orig);
    }

    /// The atomic ACK at `psn` returning `orig`: now, or behind queued
    /// responses.
    fn queue_atomic_ack(&mut self, psn: u32, orig: u64) {
        let msn = self.inner.resp.msn;
        if self.inner.resp_q.is_empty() {
            self.emit_atomic_ack(psn, msn, orig);
        } else {
            let _ = self
                .inner
                .resp_q
                .push(RespItem::AtomicAck { psn, msn, orig });
        }
    }
}
