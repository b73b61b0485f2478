// SPDX-License-Identifier: GPL-2.0

//! A QP's transmit side: running the send queue and sending what the
//! transport built.
//!
//! Packets are built under the QP lock into `QpInner::tx` (RC) or handed
//! back as datagrams (UD, each with its own address) and sent once the lock
//! is dropped, in order, by one context at a time (`flush_tx`). What cannot
//! be sent where it was built (interrupts off, or a softirq burst over its
//! budget) goes to the QP's work item; READ responses still to build go
//! there too. The QP's timer (the transport's retransmission and RNR
//! timer) runs here as well.

use core::sync::atomic::Ordering;

use kernel::{
    ffi::c_void,
    prelude::*,
    sync::{rcu, SpinLockIrqGuard},
};

use super::{QpInner, QpState};
use crate::{rdma::sys, transport};

/// Creates the QP's timer and initializes its work item.
///
/// # Safety
///
/// `raw` is a pinned `QpState` not shared yet, alive until [`stop`] has run
/// for it.
pub(super) unsafe fn start(raw: *mut QpState) -> Result {
    // SAFETY: `raw` is pinned and lives until `destroy_qp`, which frees the
    // timer first (type invariant of `QpState`).
    let timer = unsafe { sys::rroce_helper_timer_new(Some(timer_fn), raw.cast()) };
    if timer.is_null() {
        return Err(ENOMEM);
    }
    // SAFETY: not shared yet; the state is pinned, so the work item keeps
    // its address.
    unsafe {
        (*raw).fixed.timer = timer;
        sys::rroce_helper_init_work((*raw).tx_work.get(), Some(tx_work_fn));
    }
    Ok(())
}

/// Shuts down the timer and the work item of a QP being destroyed (marked
/// dead, out of the table, after an RCU grace period). Process context.
///
/// # Safety
///
/// [`start`] succeeded for `st`; called once, before `st` is freed.
pub(super) unsafe fn stop(st: &QpState) {
    // SAFETY: plain calls in process context; the timer was made for this
    // QP in `start`, the work item initialized there, both shut down once
    // (caller).
    unsafe {
        sys::rroce_helper_timer_free(st.fixed.timer);
        sys::rroce_helper_cancel_work_sync(st.tx_work.get());
    }
}

impl QpState {
    /// Runs the send queue after new WQEs were published and sends what
    /// it built: the RC requester under the lock held in `inner`, the UD
    /// sender in bounded batches of its own.
    pub(super) fn run_send_queue(
        &self,
        mut inner: SpinLockIrqGuard<'_, QpInner>,
        guard: rcu::Guard,
    ) {
        if self.is_ud() {
            drop(inner);
            drop(guard);
            self.run_ud();
        } else {
            self.ctx(&mut inner, &guard).run_requester();
            drop(inner);
            self.flush_tx();
        }
    }

    /// Runs the UD sender until the send queue is empty, a bounded batch
    /// per lock hold, sending each batch with the lock dropped.
    fn run_ud(&self) {
        loop {
            let mut out = KVec::new();
            let more = {
                let guard = rcu::read_lock();
                let mut inner = self.inner.lock();
                self.ctx(&mut inner, &guard)
                    .run_ud_sender(&mut out, UD_BATCH)
            };
            self.send_datagrams(out);
            if !more {
                return;
            }
        }
    }

    /// Sends UD datagrams built under the lock (`run_ud_sender`), each to
    /// its own address vector.
    fn send_datagrams(&self, out: KVec<transport::Datagram>) {
        if out.is_empty() {
            return;
        }
        // SAFETY: plain query of the current context.
        if unsafe { sys::rroce_helper_irqs_off() } {
            // The IP stack may not run here: the work item sends them.
            let mut inner = self.inner.lock();
            for d in out {
                // Without memory a datagram is lost, as on the wire.
                let _ = inner.ud_tx.push(d, GFP_ATOMIC);
            }
            drop(inner);
            // SAFETY: initialized at create; cancelled before the state is
            // freed.
            unsafe { sys::rroce_helper_queue_work(self.tx_work.get()) };
            return;
        }
        let counters = &self.dev().counters;
        let sport = {
            let h = self.fixed.qpn.wrapping_mul(0x9e37_79b9);
            0xc000 | ((h >> 16) as u16 & 0x3fff)
        };
        for (skb, av) in out {
            let _ = skb.send(&av, sport, counters);
        }
    }

    /// Sends the queued packets, in order: one context at a time drains
    /// the queue, others leave their packets to it.
    pub(crate) fn flush_tx(&self) {
        // With bottom halves off, a veth peer only queues what we send (up
        // to netdev_max_backlog) and a burst (a large READ's responses)
        // would be dropped: send a budget, leave the rest to the work item,
        // which sends with bottom halves on so the receiver keeps up.
        // SAFETY: plain query of the current context.
        let mut budget = if unsafe { sys::rroce_helper_irqs_off() } {
            // Nothing may be sent with interrupts off: all to the work item.
            0
        // SAFETY: as above.
        } else if unsafe { sys::rroce_helper_in_atomic_bh() } {
            TX_BUDGET_ATOMIC
        } else {
            usize::MAX
        };
        loop {
            if self.tx_busy.swap(true, Ordering::Acquire) {
                return;
            }
            let mut deferred = false;
            loop {
                let (batch, av, sport, epoch) = {
                    let mut inner = self.inner.lock();
                    if inner.t.tx.is_empty() {
                        break;
                    }
                    if budget == 0 {
                        deferred = true;
                        break;
                    }
                    (
                        core::mem::take(&mut inner.t.tx),
                        inner.t.attrs.av,
                        inner.sport,
                        inner.t.epoch,
                    )
                };
                let counters = &self.dev().counters;
                let mut rest = KVec::new();
                for skb in batch {
                    if budget == 0 {
                        // Out of memory here drops the packet; the peer's
                        // retransmission logic recovers it.
                        let _ = rest.push(skb, GFP_ATOMIC);
                        continue;
                    }
                    budget -= 1;
                    match av.as_ref() {
                        Some(av) => {
                            let _ = skb.send(av, sport, counters);
                        }
                        None => drop(skb),
                    }
                }
                if !rest.is_empty() {
                    let mut inner = self.inner.lock();
                    if inner.t.epoch != epoch {
                        // The QP was reset meanwhile: not for the new
                        // connection.
                        continue;
                    }
                    for skb in inner.t.tx.drain_all() {
                        let _ = rest.push(skb, GFP_ATOMIC);
                    }
                    inner.t.tx = rest;
                }
            }
            self.tx_busy.store(false, Ordering::Release);
            let (more_tx, more_resp) = {
                let inner = self.inner.lock();
                (!inner.t.tx.is_empty(), !inner.t.resp_q.is_empty())
            };
            // READ responses still to build: the work item does it.
            if deferred || more_resp {
                // SAFETY: initialized at create; cancelled before the state
                // is freed.
                unsafe { sys::rroce_helper_queue_work(self.tx_work.get()) };
                return;
            }
            if !more_tx {
                return;
            }
        }
    }
}

/// Datagrams the UD sender builds per hold of the QP lock.
const UD_BATCH: usize = 32;

/// Packets one softirq-context flush sends before it defers to the work item.
const TX_BUDGET_ATOMIC: usize = 64;

/// The QP's transmit work item: sends what softirq context deferred.
///
/// # Safety
///
/// Called by the workqueue with the `tx_work` field of a live, pinned
/// `QpState` (destroy cancels the work item before freeing it).
unsafe extern "C" fn tx_work_fn(work: *mut sys::work_struct) {
    // SAFETY: per the function's contract.
    let state = unsafe {
        &*work
            .byte_sub(core::mem::offset_of!(QpState, tx_work))
            .cast::<QpState>()
    };
    let dev = state.dev();
    loop {
        {
            let guard = rcu::read_lock();
            let ndev = dev.netdev(&guard);
            let mut inner = state.inner.lock();
            if ndev.is_null() || inner.dead {
                // The netdev or the QP is going away: nothing more is sent.
                drop(core::mem::take(&mut inner.t.tx));
                drop(core::mem::take(&mut inner.ud_tx));
                return;
            }
            state
                .ctx(&mut inner, &guard)
                .pump_responses(WORK_RESP_BURST);
        }
        let datagrams = core::mem::take(&mut state.inner.lock().ud_tx);
        state.send_datagrams(datagrams);
        state.flush_tx();
        let inner = state.inner.lock();
        if inner.t.resp_q.is_empty() && inner.t.tx.is_empty() && inner.ud_tx.is_empty() {
            return;
        }
    }
}

/// READ response packets the work item builds between sends.
const WORK_RESP_BURST: u32 = 256;

/// The QP timer's callback (softirq context).
///
/// # Safety
///
/// `ctx` is the `QpState` the timer was made for, alive until the timer is
/// shut down (type invariant of `QpState`).
unsafe extern "C" fn timer_fn(ctx: *mut c_void) {
    // SAFETY: per the function's contract.
    let state = unsafe { &*ctx.cast::<QpState>() };
    let guard = rcu::read_lock();
    let mut inner = state.inner.lock();
    if inner.dead {
        return;
    }
    state.ctx(&mut inner, &guard).on_timer();
    drop(inner);
    state.flush_tx();
}
