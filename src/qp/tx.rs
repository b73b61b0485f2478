// SPDX-License-Identifier: GPL-2.0

//! A QP's transmit side: running the send queue and sending what the
//! transport built.
//!
//! Packets are built under the QP lock into the transport's two lanes
//! (RC: `TransportState::tx` for requests, `rtx` for responses) or handed
//! back as datagrams (UD, each with its own address) and sent once the lock
//! is dropped, in order per lane, by one context at a time per lane
//! (`flush_tx`). What cannot be sent where it was built (interrupts off,
//! or a softirq burst over its budget) goes to the QP's work item; READ
//! responses still to build go there too. The QP's timer (the transport's
//! retransmission and RNR timer) runs here as well.

use core::sync::atomic::Ordering;

use kernel::{
    ffi::c_void,
    prelude::*,
    sync::{rcu, SpinLockIrqGuard},
};

use super::{QpInner, QpState};
use crate::{
    ah::AddressVector,
    engine::handover::Role,
    net::skb::Skb,
    rdma::sys,
    transport::{self, Lane, RESP_QUANTUM},
};

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
    // A connected QP routes every packet to one peer: the lookup is cached
    // (without memory, every packet is looked up).
    // SAFETY: `raw` is live and not shared yet (caller).
    let route = if unsafe { (*raw).is_ud() } {
        core::ptr::null_mut()
    } else {
        // SAFETY: plain allocation in process context.
        unsafe { sys::rroce_helper_route_cache_new() }
    };
    // SAFETY: not shared yet; the state is pinned, so the work item keeps
    // its address.
    unsafe {
        (*raw).fixed.timer = timer;
        (*raw).fixed.route = route;
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
    // Shut down, not freed yet: a pass still running (the work item
    // faulting ODP pages in, a kicked pass) may arm it before it sees the
    // QP dead, which does nothing from now on. Freed below, once nothing
    // runs for the QP any more.
    // SAFETY: plain calls in process context; the timer was made for this
    // QP in `start`, the work item initialized there, both shut down once
    // (caller).
    unsafe { sys::rroce_helper_timer_shutdown(st.fixed.timer) };
    // The QP is dead (a pass starting now sends nothing and kicks or
    // queues nothing): wait for a kicked pass that may have started
    // before, then for the work item (which such a pass may have queued),
    // then for a kick the work item may have made meanwhile. `tx_kicks`
    // is read again after the work item is cancelled: a kick it made
    // after the first read may already be running on a thread, with
    // `tx_kicked` cleared.
    if st.tx_kicks.load(Ordering::Acquire) {
        // SAFETY: process context.
        unsafe { sys::rroce_helper_rxq_flush() };
    }
    // SAFETY: as above; initialized in `start`.
    unsafe { sys::rroce_helper_cancel_work_sync(st.tx_work.get()) };
    if st.tx_kicks.load(Ordering::Acquire) {
        // SAFETY: process context.
        unsafe { sys::rroce_helper_rxq_flush() };
    }
    // Nothing sends any more (the work item is cancelled, the QP is out of
    // the table after a grace period); null is a no-op.
    // SAFETY: made in `start`, freed once (caller).
    unsafe { sys::rroce_helper_route_cache_free(st.fixed.route) };
    // Nothing arms the timer any more (as above; its callback finished at
    // the shutdown); null is a no-op.
    // SAFETY: made in `start`, shut down above, freed once (caller).
    unsafe { sys::rroce_helper_timer_free(st.fixed.timer) };
}

impl QpState {
    /// Raises the affiliated events the transport left due
    /// (`IB_EVENT_SQ_DRAINED`, `IB_EVENT_QP_LAST_WQE_REACHED`), from the
    /// work item: outside the QP's lock and outside any verb's call chain,
    /// so the consumer's handler may query or modify the QP (not destroy
    /// it: destroy waits for this work item).
    fn raise_due_events(&self) {
        let due = {
            let mut inner = self.inner.lock();
            if inner.dead {
                return;
            }
            inner.t.take_events()
        };
        if due.sq_drained {
            crate::rdma::raise_qp_event(self.fixed.ibqp, sys::ib_event_type_IB_EVENT_SQ_DRAINED);
        }
        if due.last_wqe {
            crate::rdma::raise_qp_event(
                self.fixed.ibqp,
                sys::ib_event_type_IB_EVENT_QP_LAST_WQE_REACHED,
            );
        }
    }

    /// Runs the send queue after new WQEs were published and sends what
    /// it built: the RC requester under the lock held in `inner`, the UD
    /// sender in bounded batches of its own. Bounded work: what is left
    /// goes to the work item.
    ///
    /// `budget` is [`tx_budget`] of the caller's context, read before it
    /// took the lock.
    pub(super) fn run_send_queue(
        &self,
        mut inner: SpinLockIrqGuard<'_, QpInner>,
        guard: rcu::Guard,
        budget: usize,
    ) {
        if self.is_ud() {
            drop(inner);
            drop(guard);
            #[cfg(CONFIG_KUNIT)]
            match self.ud_post_hook.swap(0, Ordering::AcqRel) {
                UD_POST_SQD => self.move_to_sqd(),
                UD_POST_CORRUPT => self.corrupt_sq_producer(),
                _ => {}
            }
            self.run_ud();
        } else {
            self.ctx(&mut inner, &guard).run_requester();
            #[cfg(CONFIG_KUNIT)]
            if self.tx_unsent.swap(false, Ordering::AcqRel) {
                drop(inner);
                drop(guard);
                return;
            }
            let look = self.look(&mut inner, &Lane::ALL, budget);
            drop(inner);
            drop(guard);
            self.flush_looked(&Lane::ALL, look);
        }
    }

    /// Runs the UD sender, a batch per lock hold, sending each batch with
    /// the lock dropped. A process's doorbell retires at most
    /// [`UD_DOORBELL_BUDGET`] WQEs (the process may keep publishing) and
    /// leaves the rest to the work item; a kernel consumer's WQEs all go
    /// now (each carries the consumer's AH, valid only during its post;
    /// the consumer bounds what it posts).
    fn run_ud(&self) {
        let mut left = if self.fixed.kernel {
            usize::MAX
        } else {
            UD_DOORBELL_BUDGET
        };
        loop {
            let mut out = KVec::new();
            let n = UD_BATCH.min(left);
            let (more, event) = {
                let guard = rcu::read_lock();
                let mut inner = self.inner.lock();
                let more = self.ctx(&mut inner, &guard).run_ud_sender(&mut out, n);
                // The sender may have failed the QP (a corrupt producer
                // index): an event it left due is the work item's to raise.
                (more, inner.t.event_due())
            };
            left = left.saturating_sub(n);
            self.send_datagrams(out);
            if event {
                // SAFETY: initialized at create; cancelled before the state
                // is freed.
                unsafe { sys::rroce_helper_queue_work(self.tx_work.get()) };
            }
            if !more {
                return;
            }
            if left == 0 || self.inner.lock().t.odp_pending() {
                // SAFETY: initialized at create; cancelled before the state
                // is freed.
                unsafe { sys::rroce_helper_queue_work(self.tx_work.get()) };
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
        let sport = {
            let h = self.fixed.qpn.wrapping_mul(0x9e37_79b9);
            0xc000 | ((h >> 16) as u16 & 0x3fff)
        };
        for (skb, av) in out {
            self.send_skb(skb, &av, sport, core::ptr::null_mut());
        }
    }

    /// Sends one packet out of the device's netdev, looked up inside the
    /// RCU read-side section the send runs in: a netdev unregistering
    /// meanwhile is either seen gone (the packet is dropped) or stays
    /// live until the send returns. `route` is null or the QP's route
    /// cache, for packets to its path.
    pub(super) fn send_skb(
        &self,
        skb: Skb,
        av: &AddressVector,
        sport: u16,
        route: *mut sys::rroce_route,
    ) -> bool {
        let dev = self.dev();
        let guard = rcu::read_lock();
        skb.send(dev.netdev(&guard), &guard, av, sport, route, &dev.counters)
            .is_ok()
    }
}

impl QpState {
    /// Runs the transmit on `cpu`, where the QP's packets last left: on
    /// that CPU's receive thread, which runs at real-time priority as the
    /// softirq it stands in for would (a work item could wait there for
    /// as long as the thread is busy receiving, past the peer's
    /// retransmission timeout), else on its work item.
    pub(super) fn kick_home(&self, cpu: u32) {
        if self.tx_kicked.swap(true, Ordering::AcqRel) {
            // Queued on some thread already: that pass sends, or kicks
            // again from the wrong CPU.
            return;
        }
        self.tx_kicks.store(true, Ordering::Release);
        self.tx_kick_cpu.store(cpu, Ordering::Relaxed);
        // SAFETY: the node is off every list (`tx_kicked` was false); the
        // state stays alive until the threads ran every kick ([`stop`]).
        if unsafe { sys::rroce_helper_rxq_kick(cpu, self.tx_node.get()) } {
            return;
        }
        self.tx_kicked.store(false, Ordering::Release);
        // SAFETY: initialized at create; cancelled before the state is
        // freed. A work item already pending elsewhere comes back here.
        unsafe { sys::rroce_helper_queue_work_on(cpu, self.tx_work.get()) };
    }
}

/// A test's hold on a QP's transmit (KUnit builds only; elsewhere the
/// gate is always open and these compile to nothing): the QP sends as many
/// packets as the gate still lets through, then keeps what it builds
/// queued, without rescheduling itself, until the gate opens. This puts a
/// QP in the middle of a message at a point a test chooses (see
/// `reset_quiesces_qp`), whatever the scheduler does meanwhile.
impl QpState {
    /// The part of `budget` the gate lets through now.
    pub(super) fn gate(&self, budget: usize) -> usize {
        #[cfg(CONFIG_KUNIT)]
        {
            let g = self.tx_gate.load(Ordering::Acquire);
            if g != u32::MAX {
                return budget.min(g as usize);
            }
        }
        budget
    }

    /// `spent` packets went through the gate (by a lane's sender).
    pub(super) fn gate_spent(&self, spent: usize) {
        #[cfg(CONFIG_KUNIT)]
        {
            let spent = u32::try_from(spent).unwrap_or(u32::MAX);
            let _ = self
                .tx_gate
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |g| {
                    (g != u32::MAX).then(|| g.saturating_sub(spent))
                });
        }
        #[cfg(not(CONFIG_KUNIT))]
        let _ = spent;
    }

    /// The gate is shut: nothing more is sent until it opens.
    pub(crate) fn tx_held(&self) -> bool {
        #[cfg(CONFIG_KUNIT)]
        {
            self.tx_gate.load(Ordering::Acquire) == 0
        }
        #[cfg(not(CONFIG_KUNIT))]
        {
            false
        }
    }

    /// Lets the QP send `n` more packets, then holds its transmit.
    #[cfg(CONFIG_KUNIT)]
    pub(crate) fn hold_tx_after(&self, n: u32) {
        self.tx_gate.store(n.min(u32::MAX - 1), Ordering::Release);
    }

    /// Stands in for another context sending the QP's responses (`true`:
    /// takes the response lane's busy flag, `false` if it was taken
    /// already; `false`: gives it back, then flushes what waited, and
    /// says whether it was held).
    #[cfg(CONFIG_KUNIT)]
    pub(crate) fn hold_responses(&self, hold: bool) -> bool {
        let lane = self.lane_sender(Lane::Resp);
        if hold {
            return lane.hold();
        }
        let held = lane.release();
        self.flush_tx();
        held
    }

    /// Makes the next post build its requests and return without sending
    /// them, as a doorbell does when another CPU's context runs between
    /// the two; the test sends them later with [`Self::flush_tx`].
    #[cfg(CONFIG_KUNIT)]
    pub(crate) fn leave_unsent(&self) {
        self.tx_unsent.store(true, Ordering::Release);
    }

    /// Makes the next UD post move the QP to SQD after it wrote its WQEs
    /// and before it sends them, as a `modify_qp` on another CPU may.
    #[cfg(CONFIG_KUNIT)]
    pub(crate) fn sqd_in_ud_post(&self) {
        self.ud_post_hook.store(UD_POST_SQD, Ordering::Release);
    }

    /// Makes the next UD post corrupt the send queue's producer index
    /// after it wrote its WQEs and before it sends them, as a process may
    /// between its doorbells.
    #[cfg(CONFIG_KUNIT)]
    pub(crate) fn corrupt_in_ud_post(&self) {
        self.ud_post_hook.store(UD_POST_CORRUPT, Ordering::Release);
    }

    /// Writes a producer index with bits above the ring's mask into the
    /// send queue's header ([`Self::corrupt_in_ud_post`]).
    #[cfg(CONFIG_KUNIT)]
    fn corrupt_sq_producer(&self) {
        use crate::engine::ring::{SharedHeader, SharedIndex};
        let _inner = self.inner.lock();
        self.fixed.sq_buf.producer_index().store_release(u32::MAX);
    }

    /// `ib_modify_qp` to SQD, from inside a post ([`Self::sqd_in_ud_post`]).
    #[cfg(CONFIG_KUNIT)]
    fn move_to_sqd(&self) {
        // SAFETY: all-zero is a valid `ib_qp_attr`.
        let mut a: sys::ib_qp_attr = unsafe { core::mem::zeroed() };
        a.qp_state = sys::ib_qp_state_IB_QPS_SQD;
        // SAFETY: the QP is live (its post is running); process context,
        // no lock of the QP held.
        let r = unsafe {
            sys::ib_modify_qp(
                self.fixed.ibqp,
                &mut a,
                sys::ib_qp_attr_mask_IB_QP_STATE as i32,
            )
        };
        if r != 0 {
            pr_err!("qp {}: modify to SQD in a post: {r}\n", self.fixed.qpn);
        }
    }

    /// The CPU the QP's requests last left from, and how many times its
    /// device's QPs found their requests' CPU elsewhere so far.
    #[cfg(CONFIG_KUNIT)]
    pub(crate) fn home_and_kicks(&self) -> (u32, u64) {
        let kicks = crate::counters::Counter::TxKickedHome as usize;
        (
            self.tx_home.load(Ordering::Relaxed),
            self.dev().counters.get(kicks),
        )
    }

    /// The requester's hint to the receive hand-over: its last pass
    /// stopped with work only an acknowledgement lets go
    /// (`QpFixed::req_waits`).
    #[cfg(CONFIG_KUNIT)]
    pub(crate) fn requester_waits(&self) -> bool {
        self.fixed.req_waits.load(Ordering::Relaxed)
    }

    /// The packets waiting in both of the QP's lanes.
    #[cfg(CONFIG_KUNIT)]
    pub(crate) fn packets_waiting(&self) -> usize {
        self.inner.lock().t.tx_packets()
    }

    /// The request packets waiting in the QP's request lane.
    #[cfg(CONFIG_KUNIT)]
    pub(crate) fn requests_waiting(&self) -> usize {
        self.inner.lock().t.lane_packets(Lane::Req)
    }

    /// Opens the gate and sends what waited for it.
    #[cfg(CONFIG_KUNIT)]
    pub(crate) fn open_tx(&self) {
        self.tx_gate.store(u32::MAX, Ordering::Release);
        self.flush_tx();
        // SAFETY: initialized at create; cancelled before the state is
        // freed.
        unsafe { sys::rroce_helper_queue_work(self.tx_work.get()) };
    }
}

/// Datagrams the UD sender builds per hold of the QP lock.
const UD_BATCH: usize = 32;

/// `QpState::ud_post_hook`: move the QP to SQD.
#[cfg(CONFIG_KUNIT)]
pub(super) const UD_POST_SQD: u32 = 1;

/// `QpState::ud_post_hook`: corrupt the send queue's producer index.
#[cfg(CONFIG_KUNIT)]
pub(super) const UD_POST_CORRUPT: u32 = 2;

/// UD WQEs a process's doorbell retires before it leaves the rest to the
/// work item.
const UD_DOORBELL_BUDGET: usize = 128;

/// UD WQEs one pass of the work item retires.
const WORK_UD_BURST: usize = 64;

/// The QP's transmit work item: one bounded pass over what is left (READ
/// responses to build, send WQEs to fetch, datagrams and packets to send);
/// it queues itself again while more remains, so the workqueue schedules
/// between passes.
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
    tx_pass(state, true);
    state.raise_due_events();
}

/// A receive thread's call for a QP whose transmit was kicked to its CPU
/// (`QpState::kick_home`): one pass, as the work item's.
///
/// # Safety
///
/// Called by a receive thread, in process context, with the `tx_node`
/// field of a live, pinned `QpState` it was kicked with (destroy waits for
/// the threads before freeing the state, [`stop`]).
pub(crate) unsafe extern "C" fn kicked(node: *mut sys::llist_node) {
    // SAFETY: per the function's contract.
    let state = unsafe {
        &*node
            .byte_sub(core::mem::offset_of!(QpState, tx_node))
            .cast::<QpState>()
    };
    // Read before the node can be queued again (which rewrites it).
    let aimed = state.tx_kick_cpu.load(Ordering::Relaxed);
    // Kicks from now on queue the node again (it is off the list).
    state.tx_kicked.store(false, Ordering::Release);
    // SAFETY: plain query of the current CPU (the thread is bound to it).
    let cpu = unsafe { sys::rroce_helper_smp_processor_id() };
    if cpu != aimed {
        // A thread whose CPU went offline runs elsewhere: kicking back to
        // the CPU it was made for would loop, so the pass sends from here.
        // Otherwise the home stays as it is: if the QP's packets left from
        // another CPU since the kick (nothing of its requests was in
        // flight then), this pass's must follow them there, and it kicks
        // them on. Taking the home here sent requests from two CPUs at
        // once.
        state.tx_home.store(cpu, Ordering::Relaxed);
    }
    tx_pass(state, false);
}

/// One bounded pass of the transmit (the work item's, or a kicked one).
/// Only the work item (`may_sleep`) faults ODP pages in: a receive
/// thread leaves that to it rather than stall the packets queued to it.
fn tx_pass(state: &QpState, may_sleep: bool) {
    let dev = state.dev();
    // ODP pages the transport waits for: faulted in first (this sleeps),
    // then everything below runs again.
    // With the connection it was for (`epoch`, moved on by RESET).
    let fault = if may_sleep {
        let mut inner = state.inner.lock();
        let epoch = inner.t.epoch;
        inner.t.odp_take().map(|f| (f, epoch))
    } else {
        let inner = state.inner.lock();
        let fault_pending = !inner.dead && inner.t.odp_pending();
        drop(inner);
        if fault_pending {
            // SAFETY: initialized at create; cancelled before the state
            // is freed (a pass that saw the QP alive started before
            // `destroy` marked it dead, and [`stop`] waits for it before
            // cancelling the work item).
            unsafe { sys::rroce_helper_queue_work(state.tx_work.get()) };
        }
        None
    };
    if let Some((f, epoch)) = fault {
        dev.counters.inc(crate::counters::Counter::OdpFaults);
        let r = crate::mr::fault_in(dev, f);
        let guard = rcu::read_lock();
        let mut inner = state.inner.lock();
        if inner.dead {
            // Destroyed while the pages came in: nothing resumes.
            return;
        }
        // Reset while they came in: the fault was the old connection's,
        // and its outcome (a failure, another try) is not the new one's.
        if inner.t.epoch == epoch {
            state.ctx(&mut inner, &guard).odp_done(f, r);
        }
    }
    let mut datagrams = KVec::new();
    let mut ud_more = false;
    let budget = super::lanes::tx_budget();
    let look = {
        let guard = rcu::read_lock();
        let ndev = dev.netdev(&guard);
        let mut inner = state.inner.lock();
        if ndev.is_null() || inner.dead {
            // The netdev or the QP is going away: nothing more is sent
            // (freed once the lock is released).
            let unsent = inner.t.take_queued();
            let datagrams = core::mem::take(&mut inner.ud_tx);
            drop(inner);
            drop((unsent, datagrams));
            return;
        }
        let pending = inner.t.send_pending();
        let mut ctx = state.ctx(&mut inner, &guard);
        ctx.pump_responses(if may_sleep {
            WORK_RESP_BURST
        } else {
            RESP_QUANTUM
        });
        if state.is_ud() {
            // A kernel consumer's WQEs were all built during its post.
            if !state.fixed.kernel {
                ud_more = ctx.run_ud_sender(&mut datagrams, WORK_UD_BURST);
            }
        } else if pending {
            ctx.run_requester();
        }
        for d in inner.ud_tx.drain_all() {
            // Without memory a datagram is lost, as on the wire.
            let _ = datagrams.push(d, GFP_ATOMIC);
        }
        state.look(&mut inner, &Lane::ALL, budget)
    };
    state.send_datagrams(datagrams);
    state.flush_looked(&Lane::ALL, look);
    // READ responses still to build were kicked on by the flush.
    let more = {
        let inner = state.inner.lock();
        ud_more
            || inner.t.odp_pending()
            || !inner.t.tx_empty()
            || !inner.ud_tx.is_empty()
            || state.fetch_left(&inner)
    };
    if more && !state.tx_held() {
        // SAFETY: `state` is live (contract); destroy cancels the work
        // item before freeing it.
        unsafe { sys::rroce_helper_queue_work(state.tx_work.get()) };
    }
}

/// READ response packets the work item builds per pass (it runs for ODP
/// faults; a kicked pass builds [`RESP_QUANTUM`]).
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
    let queued = state
        .rx
        .get(Role::Responses.index())
        .is_some_and(|r| r.waiting().count > 0);
    state.ctx(&mut inner, &guard).on_timer(queued);
    drop(inner);
    state.flush_tx();
}
