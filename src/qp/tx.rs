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
    // SAFETY: plain calls in process context; the timer was made for this
    // QP in `start`, the work item initialized there, both shut down once
    // (caller).
    unsafe { sys::rroce_helper_timer_free(st.fixed.timer) };
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
}

impl QpState {
    /// Runs the send queue after new WQEs were published and sends what
    /// it built: the RC requester under the lock held in `inner`, the UD
    /// sender in bounded batches of its own. Bounded work: what is left
    /// goes to the work item.
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
            let look = self.look(&inner, &Lane::ALL);
            drop(inner);
            drop(guard);
            #[cfg(CONFIG_KUNIT)]
            if self.tx_unsent.swap(false, Ordering::AcqRel) {
                return;
            }
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
            let more = {
                let guard = rcu::read_lock();
                let mut inner = self.inner.lock();
                self.ctx(&mut inner, &guard).run_ud_sender(&mut out, n)
            };
            left = left.saturating_sub(n);
            self.send_datagrams(out);
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
    fn send_skb(
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

    /// Sends the queued packets, in order: per lane (`transport::Lane`),
    /// one context at a time drains the queue, others leave their packets
    /// to it. The two lanes are independent: a request posted on one CPU
    /// leaves from there while another CPU sends the ACKs the QP's
    /// responder owes. At most a budget per call; the rest, READ responses
    /// still to build and send WQEs left unfetched go to the work item.
    pub(crate) fn flush_tx(&self) {
        self.flush_lanes(&Lane::ALL);
    }

    /// [`Self::flush_tx`] for `lanes` only (in that order): those the
    /// caller queued packets into.
    pub(crate) fn flush_lanes(&self, lanes: &[Lane]) {
        let look = self.look(&self.inner.lock(), lanes);
        self.flush_looked(lanes, look);
    }

    /// One look at `lanes` under the QP's lock (`inner`), taken by the
    /// caller where it held the lock anyway (a doorbell after building its
    /// requests, a received packet after its dispatch), or by
    /// [`Self::flush_lanes`]. A lane with nothing queued needs no pass:
    /// whoever queues into it flushes it. When no lane has anything, what
    /// is left for others is known from the same look (anything changed
    /// after it is flushed by whoever changed it, as after the look at the
    /// end of a flush). A QP's receive path flushes once per packet, most
    /// often with nothing to send: no lock of its own for that.
    pub(crate) fn look(&self, inner: &QpInner, lanes: &[Lane]) -> Look {
        let pending = lanes
            .iter()
            .filter(|&&lane| !inner.t.queue(lane).is_empty())
            .fold(0u8, |set, &lane| set | lane.bit());
        Look {
            pending,
            after: self.left_after_flush(inner),
        }
    }

    /// [`Self::flush_lanes`] once the QP's lock, under which `look` was
    /// taken, is released.
    pub(crate) fn flush_looked(&self, lanes: &[Lane], look: Look) {
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
            TX_BUDGET_PROCESS
        };
        let Look { pending, after } = look;
        if pending == 0 {
            if !self.tx_held() {
                self.leave_after_flush(after, false);
            }
            return;
        }
        let mut deferred = false;
        // What the last lane's pass read at its last look, if it did.
        let mut last = None;
        for &lane in lanes {
            if pending & lane.bit() == 0 {
                continue;
            }
            last = None;
            match self.flush_lane(lane, &mut budget) {
                Flushed::Done(after) => last = after,
                Flushed::Budget => deferred = true,
                Flushed::Stop => return,
            }
        }
        let after = match last {
            Some(after) => after,
            None => self.left_after_flush(&self.inner.lock()),
        };
        self.leave_after_flush(after, deferred);
    }

    /// What a flush leaves to others, read under the QP's lock: READ
    /// responses for a kicked pass to build, and whether the work item has
    /// anything to do (WQEs still to fetch, an ODP fault to take, memory
    /// to wait for).
    fn left_after_flush(&self, inner: &QpInner) -> AfterFlush {
        // An ODP fault to take (the transport's, or the one the last pump
        // stopped on), or memory to wait for, first.
        let wait = inner.t.odp_pending() || inner.t.resp_q.stalled();
        AfterFlush {
            responses: !inner.t.resp_q.is_empty() && !wait,
            more_work: self.fetch_left(inner) || wait,
        }
    }

    /// Hands on what a flush left (`after`, and packets `deferred` for
    /// lack of budget).
    fn leave_after_flush(&self, after: AfterFlush, deferred: bool) {
        if after.responses {
            self.continue_responses();
        }
        // Packets left for lack of budget, WQEs still to fetch, ODP pages
        // to fault in, READ responses that found no memory: the work item
        // does it.
        if deferred || after.more_work {
            // SAFETY: initialized at create; cancelled before the state is
            // freed.
            unsafe { sys::rroce_helper_queue_work(self.tx_work.get()) };
        }
    }

    /// READ responses are still to be built: a pass of [`RESP_QUANTUM`]
    /// more is kicked to the back of this CPU's receive thread's list
    /// ([`kicked`]), which kicks the next one again while any are left.
    /// Every QP streaming responses from a CPU then takes its turn with
    /// the packets received there, a quantum at a time, and a READ asked
    /// for behind them waits for one round, not for their whole READs:
    /// left to the work item, the bulk of a stream ran at normal priority
    /// while the receive threads (real-time) took each request's first
    /// responses, and the READs of a QP whose responses went that way
    /// could wait past the peer's retransmission timeout. (Without receive
    /// threads, [`Self::kick_home`] queues the work item on this CPU.)
    fn continue_responses(&self) {
        // SAFETY: plain query of the current CPU; any CPU will do.
        let cpu = unsafe { sys::rroce_helper_smp_processor_id() };
        self.kick_home(cpu);
    }

    /// [`Self::flush_tx`] for one lane: sends its queue until it is empty
    /// or `budget` runs out, unless another context is sending it.
    fn flush_lane(&self, lane: Lane, budget: &mut usize) -> Flushed {
        let busy = match lane {
            Lane::Req => &self.tx_busy,
            Lane::Resp => &self.rtx_busy,
        };
        loop {
            // Whoever holds the lane's busy flag sends for everyone, so it
            // must not be preempted while it does: a process posting from
            // its system call and then taken off the CPU would hold every
            // packet other contexts queue meanwhile (the retransmissions
            // the timer makes, the ACKs the responder owes) for as long as
            // the scheduler keeps it waiting, longer than the peer's
            // retransmission timeout on a loaded machine. Softirq context
            // is not preemptible anyway; a pass is bounded by the budget.
            // SAFETY: balanced below, nothing in between sleeps.
            unsafe { sys::rroce_helper_preempt_disable() };
            if busy.swap(true, Ordering::Acquire) {
                // SAFETY: disabled above.
                unsafe { sys::rroce_helper_preempt_enable() };
                // The holder sends what this context queued: it looks at
                // the queue again after letting go of the flag.
                return Flushed::Done(None);
            }
            let mut pass = self.gate(*budget);
            let allowed = pass;
            let mut sent = KVec::new();
            let left = self.send_queued(lane, &mut pass, &mut sent);
            let spent = allowed.saturating_sub(pass);
            *budget = budget.saturating_sub(spent);
            self.gate_spent(spent);
            busy.store(false, Ordering::Release);
            // SAFETY: disabled above.
            unsafe { sys::rroce_helper_preempt_enable() };
            if self.tx_held() {
                // What is queued waits for the gate to open.
                return Flushed::Stop;
            }
            match left {
                Left::Nothing => {}
                Left::Budget => return Flushed::Budget,
                Left::Home(cpu) => {
                    // The pass there sends both lanes.
                    self.dev()
                        .counters
                        .inc(crate::counters::Counter::TxKickedHome);
                    self.kick_home(cpu);
                    return Flushed::Stop;
                }
            }
            // Packets queued while this context sent, by contexts that
            // found the flag taken. The same look gives the sent batch's
            // vector back as the lane's spare and, if the lane is done,
            // reads what the flush leaves to others.
            let (after, unused) = {
                let mut inner = self.inner.lock();
                let unused = inner.t.give_back(lane, sent);
                let after = inner
                    .t
                    .queue(lane)
                    .is_empty()
                    .then(|| self.left_after_flush(&inner));
                (after, unused)
            };
            drop(unused);
            if after.is_some() {
                return Flushed::Done(after);
            }
        }
    }

    /// Whether the last fetch left published send WQEs for the work item
    /// (never for a kernel consumer's UD QP, whose WQEs are all built
    /// during its post).
    fn fetch_left(&self, inner: &QpInner) -> bool {
        inner.t.send_pending() && !(self.is_ud() && self.fixed.kernel)
    }

    /// Sends packets of `lane`'s queue while `budget` lasts (the caller
    /// owns the lane's busy flag and disabled preemption); requests from
    /// the CPU the QP's requests last left from while some are in flight.
    /// [`Left::Nothing`] once what it took is sent: more may have been
    /// queued meanwhile, which the caller looks for; `sent` then holds the
    /// emptied vector of the last batch, for the caller to give back
    /// (`TransportState::give_back`).
    ///
    /// A virtual link (veth, loopback) queues a packet on the backlog of
    /// the CPU that sent it; packets of one QP sent from two CPUs can
    /// reach the peer out of order, and each reordering costs a sequence
    /// NAK and a go-back-N retransmission. Once every request is
    /// acknowledged nothing of the QP's requests can still be queued
    /// anywhere, and its transmit moves to whichever CPU sends next. (Its
    /// responses and ACKs, the other lane, are not held to this: ACKs are
    /// cumulative, and a READ's responses leave from the context
    /// answering it.)
    fn send_queued(&self, lane: Lane, budget: &mut usize, sent: &mut KVec<Skb>) -> Left {
        loop {
            let (mut batch, av, sport, epoch) = {
                let mut inner = self.inner.lock();
                if inner.t.queue(lane).is_empty() {
                    return Left::Nothing;
                }
                if *budget == 0 {
                    return Left::Budget;
                }
                if lane == Lane::Req {
                    if inner.t.requests_in_flight() {
                        let home = self.tx_home.load(Ordering::Relaxed);
                        // SAFETY: plain query of the current CPU.
                        let elsewhere = unsafe { sys::rroce_helper_tx_elsewhere(home) };
                        if let Ok(cpu) = u32::try_from(elsewhere) {
                            return Left::Home(cpu);
                        }
                    }
                    inner.t.requests_taken();
                    // SAFETY: plain query; preemption is disabled (caller).
                    let cpu = unsafe { sys::rroce_helper_smp_processor_id() };
                    self.tx_home.store(cpu, Ordering::Relaxed);
                }
                let n = u32::try_from(inner.t.lane_packets(lane)).unwrap_or(u32::MAX);
                inner.t.tx_sent = inner.t.tx_sent.wrapping_add(n);
                inner.t.tx_at = crate::transport::now_ms();
                (
                    inner.t.take_lane(lane),
                    inner.t.attrs.av,
                    inner.sport,
                    inner.t.epoch,
                )
            };
            let mut rest = KVec::new();
            let mut lost = 0u32;
            let mut back = 0u32;
            for skb in batch.drain_all() {
                // A GSO run counts as the packets it carries.
                let pkts = skb.packets();
                if *budget == 0 {
                    back = back.wrapping_add(pkts);
                    // Out of memory here drops the packet; the peer's
                    // retransmission logic recovers it.
                    let _ = rest.push(skb, GFP_ATOMIC);
                    continue;
                }
                *budget = budget.saturating_sub(pkts as usize);
                let ok = match av.as_ref() {
                    Some(av) => self.send_skb(skb, av, sport, self.fixed.route),
                    None => false,
                };
                if !ok {
                    lost = lost.wrapping_add(pkts);
                }
            }
            if lost == 0 && rest.is_empty() {
                // All sent. What others queued meanwhile, the caller sends
                // after it looked again, having let go of the lane's flag
                // (it has to look then anyway).
                *sent = batch;
                return Left::Nothing;
            }
            {
                let mut inner = self.inner.lock();
                // What went back to the queue was not sent.
                inner.t.tx_sent = inner.t.tx_sent.wrapping_sub(back);
                inner.t.tx_lost = inner.t.tx_lost.wrapping_add(lost);
                if rest.is_empty() {
                    continue;
                }
                if inner.t.epoch != epoch {
                    // The QP was reset meanwhile: the rest is not for the
                    // new connection.
                    continue;
                }
                for skb in inner.t.queue_mut(lane).drain_all() {
                    let _ = rest.push(skb, GFP_ATOMIC);
                }
                *inner.t.queue_mut(lane) = rest;
            }
        }
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

/// What a look at a QP's lanes found ([`QpState::look`]): the lanes with
/// packets queued ([`Lane::bit`]) and what a flush leaves to others.
pub(crate) struct Look {
    pending: u8,
    after: AfterFlush,
}

/// What a flush leaves to others ([`QpState::left_after_flush`]).
#[derive(Clone, Copy)]
struct AfterFlush {
    /// READ responses are still to be built, by a kicked pass.
    responses: bool,
    /// The work item has something to do.
    more_work: bool,
}

/// How [`QpState::flush_lane`] left its lane.
enum Flushed {
    /// Empty, or being sent by another context; with what the flush
    /// leaves to others if the pass read it at its last look under the
    /// QP's lock (the lane found empty there).
    Done(Option<AfterFlush>),
    /// Packets are left for lack of budget: the work item sends them.
    Budget,
    /// Nothing more is sent from here: the transmit is held (KUnit) or
    /// was kicked to the CPU the QP's requests leave from.
    Stop,
}

/// What [`QpState::send_queued`] left in the queue.
enum Left {
    /// Nothing: the queue is empty.
    Nothing,
    /// Packets, for lack of budget.
    Budget,
    /// Packets, to be sent from this CPU, where the QP's last ones left.
    Home(u32),
}

/// A test's hold on a QP's transmit (KUnit builds only; elsewhere the
/// gate is always open and these compile to nothing): the QP sends as many
/// packets as the gate still lets through, then keeps what it builds
/// queued, without rescheduling itself, until the gate opens. This puts a
/// QP in the middle of a message at a point a test chooses (see
/// `reset_quiesces_qp`), whatever the scheduler does meanwhile.
impl QpState {
    /// The part of `budget` the gate lets through now.
    fn gate(&self, budget: usize) -> usize {
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
    fn gate_spent(&self, spent: usize) {
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
        if hold {
            return !self.rtx_busy.swap(true, Ordering::Acquire);
        }
        let held = self.rtx_busy.swap(false, Ordering::Release);
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

/// UD WQEs a process's doorbell retires before it leaves the rest to the
/// work item.
const UD_DOORBELL_BUDGET: usize = 128;

/// UD WQEs one pass of the work item retires.
const WORK_UD_BURST: usize = 64;

/// Packets one softirq-context flush sends before it defers to the work item.
const TX_BUDGET_ATOMIC: usize = 64;

/// Packets one process-context flush (a doorbell, a pass of the work item)
/// sends before it defers to the work item.
const TX_BUDGET_PROCESS: usize = 256;

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
    let fault = if may_sleep {
        state.inner.lock().t.odp_take()
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
    if let Some(f) = fault {
        dev.counters.inc(crate::counters::Counter::OdpFaults);
        let r = crate::mr::fault_in(dev, f);
        let guard = rcu::read_lock();
        let mut inner = state.inner.lock();
        state.ctx(&mut inner, &guard).odp_done(f, r);
    }
    let mut datagrams = KVec::new();
    let mut ud_more = false;
    {
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
    }
    state.send_datagrams(datagrams);
    state.flush_tx();
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
