// SPDX-License-Identifier: GPL-2.0

//! A QP's two transmit lanes (`transport::Lane`: requests, and the
//! responses and ACKs its responder owes), sent in order per lane by one
//! context at a time (`engine::lane::Election`): the elected sender sends
//! what is queued there for everyone, others leave their packets to it
//! and the sender, told when it leaves that it was found sending, takes
//! them. The look at the lanes, and the first lane's batch, are taken in
//! the hold of the QP's lock the caller built its packets under; a sender
//! nobody found takes the lock no more: a doorbell that sends one request,
//! and a responder that answers a READ in its dispatch, hold it once.

use core::{cell::UnsafeCell, sync::atomic::Ordering};

use kernel::prelude::*;

use super::{QpInner, QpState};
use crate::{ah::AddressVector, engine::lane::Election, net::skb::Skb, rdma::sys, transport::Lane};

/// Who sends one of a QP's lanes: the [`Election`] of one context at a
/// time, and the elected sender's spare vector. The sender leaves the
/// spare in the queue's place when it takes the queue, and keeps the
/// emptied batch as the next spare, so that queueing and sending a packet
/// allocate and free no vector, and handing the vector back takes no
/// lock.
pub(crate) struct LaneSender {
    election: Election,
    spare: UnsafeCell<KVec<Skb>>,
}

// SAFETY: `spare` is touched only by the context `election` elected,
// between its `enter` and its `leave` (sequentially consistent, so one
// sender's accesses happen before the next one's), and a `KVec<Skb>` may
// move between CPUs.
unsafe impl Sync for LaneSender {}

impl LaneSender {
    /// Nobody sending, no spare.
    pub(crate) const fn new() -> Self {
        Self {
            election: Election::with(
                core::sync::atomic::AtomicBool::new(false),
                core::sync::atomic::AtomicBool::new(false),
            ),
            spare: UnsafeCell::new(KVec::new()),
        }
    }

    /// Stands in for a sender (a test): `true` if elected.
    #[cfg(CONFIG_KUNIT)]
    pub(super) fn hold(&self) -> bool {
        self.election.enter()
    }

    /// Lets go of what [`Self::hold`] took; whether it was held. The
    /// caller flushes the lane next, whoever found it held.
    #[cfg(CONFIG_KUNIT)]
    pub(super) fn release(&self) -> bool {
        let held = self.election.busy();
        let _ = self.election.leave();
        held
    }

    /// Takes the spare vector.
    ///
    /// # Safety
    ///
    /// The caller is the lane's elected sender.
    unsafe fn take_spare(&self) -> KVec<Skb> {
        // SAFETY: only the elected sender touches it (caller).
        core::mem::take(unsafe { &mut *self.spare.get() })
    }

    /// Keeps `sent`, a batch sent and emptied, as the spare if there is
    /// none and it is not a burst's (over [`SPARE_MAX`]); else frees it
    /// (no lock is held).
    ///
    /// # Safety
    ///
    /// The caller is the lane's elected sender.
    unsafe fn keep_spare(&self, mut sent: KVec<Skb>) {
        // SAFETY: only the elected sender touches it (caller).
        let spare = unsafe { &mut *self.spare.get() };
        if sent.is_empty() && sent.capacity() <= SPARE_MAX && spare.capacity() == 0 {
            core::mem::swap(spare, &mut sent);
        }
        drop(sent);
    }
}

impl QpState {
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
        let budget = tx_budget();
        let look = self.look(&mut self.inner.lock(), lanes, budget);
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
    ///
    /// The first lane with packets is taken in the same hold when nobody
    /// is sending it (this context is elected its sender), as the pass
    /// would take it under a hold of its own.
    /// `budget` is [`tx_budget`] of the caller's context, read before the
    /// lock was taken. The returned [`Look`] must go to
    /// [`Self::flush_looked`].
    pub(crate) fn look(&self, inner: &mut QpInner, lanes: &[Lane], budget: usize) -> Look {
        let pending = lanes
            .iter()
            .filter(|&&lane| !inner.t.queue(lane).is_empty())
            .fold(0u8, |set, &lane| set | lane.bit());
        let taken = lanes
            .iter()
            .find(|&&lane| pending & lane.bit() != 0)
            .and_then(|&lane| self.take_first(inner, lane, budget));
        Look {
            pending,
            budget,
            after: self.left_after_flush(inner),
            taken,
        }
    }

    /// Makes this context `lane`'s sender and takes its queue for
    /// [`Self::look`], if nobody is sending it and the pass would take the
    /// queue now (not for a gated transmit, nor for requests to be sent
    /// from another CPU: the pass decides those as before). With the batch
    /// this context is the sender and preemption is disabled, as in
    /// [`Self::flush_lane`].
    fn take_first(&self, inner: &mut QpInner, lane: Lane, budget: usize) -> Option<Batch> {
        if budget == 0 || self.gate(budget) != budget || self.tx_held() {
            return None;
        }
        let sender = self.lane_sender(lane);
        // SAFETY: balanced in `flush_lane` (the batch's pass) or below.
        unsafe { sys::rroce_helper_preempt_disable() };
        if !sender.election.enter() {
            // SAFETY: disabled above.
            unsafe { sys::rroce_helper_preempt_enable() };
            return None;
        }
        match self.take_batch(inner, lane, budget) {
            Ok(batch) => Some(batch),
            Err(_) => {
                // The lane is still pending: the flush's pass for it runs
                // the election again and decides (a kick to the requests'
                // CPU). What a context that found this one elected queued
                // is that pass's to take, or, if another context is
                // elected by then, that sender's, which learns of it.
                let _ = sender.election.leave();
                // SAFETY: disabled above.
                unsafe { sys::rroce_helper_preempt_enable() };
                None
            }
        }
    }

    /// Who sends `lane`.
    pub(super) fn lane_sender(&self, lane: Lane) -> &LaneSender {
        match lane {
            Lane::Req => &self.tx_lane,
            Lane::Resp => &self.rtx_lane,
        }
    }

    /// [`Self::flush_lanes`] once the QP's lock, under which `look` was
    /// taken, is released.
    pub(crate) fn flush_looked(&self, lanes: &[Lane], look: Look) {
        // With bottom halves off, a veth peer only queues what we send (up
        // to netdev_max_backlog) and a burst (a large READ's responses)
        // would be dropped: the budget ([`tx_budget`]) sends a part and
        // leaves the rest to the work item, which sends with bottom halves
        // on so the receiver keeps up.
        let Look {
            pending,
            mut budget,
            after,
            mut taken,
        } = look;
        if pending == 0 {
            if !self.tx_held() {
                self.leave_after_flush(after, false);
            }
            return;
        }
        let mut deferred = false;
        for &lane in lanes {
            if pending & lane.bit() == 0 {
                continue;
            }
            let batch = taken.take_if(|b| b.lane == lane);
            match self.flush_lane(lane, &mut budget, batch) {
                Flushed::Done => {}
                Flushed::Budget => deferred = true,
                Flushed::Stop => return,
            }
        }
        // What the look read is still what this context leaves to others:
        // sending changes none of it, and whoever changed it since sends
        // and hands on for itself.
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
            more_work: self.fetch_left(inner) || wait || inner.t.event_due(),
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

    /// READ responses are still to be built: a pass of
    /// [`RESP_QUANTUM`](crate::transport::RESP_QUANTUM) more is kicked to
    /// the back of this CPU's receive thread's list
    /// ([`kicked`](super::tx::kicked)), which kicks the next one again
    /// while any are left.
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
    /// or `budget` runs out, unless another context is sending it. With
    /// `taken` (from [`Self::look`]) this context is the lane's sender
    /// already, with preemption disabled and the first batch in hand.
    fn flush_lane(&self, lane: Lane, budget: &mut usize, mut taken: Option<Batch>) -> Flushed {
        let sender = self.lane_sender(lane);
        loop {
            // The lane's sender sends for everyone, so it must not be
            // preempted while it does: a process posting from its system
            // call and then taken off the CPU would hold every packet
            // other contexts queue meanwhile (the retransmissions the
            // timer makes, the ACKs the responder owes) for as long as the
            // scheduler keeps it waiting, longer than the peer's
            // retransmission timeout on a loaded machine. Softirq context
            // is not preemptible anyway; a pass is bounded by the budget.
            let first = taken.take();
            if first.is_none() {
                // SAFETY: balanced below, nothing in between sleeps.
                unsafe { sys::rroce_helper_preempt_disable() };
                if !sender.election.enter() {
                    // SAFETY: disabled above.
                    unsafe { sys::rroce_helper_preempt_enable() };
                    // The sender there sends what this context queued: it
                    // learns that it was found when it leaves.
                    return Flushed::Done;
                }
            }
            let mut pass = self.gate(*budget);
            let allowed = pass;
            let mut sent = KVec::new();
            let all_sent = match first {
                Some(batch) => self.send_batch(batch, &mut pass, &mut sent),
                None => false,
            };
            let left = if all_sent {
                Left::Nothing
            } else {
                self.send_queued(lane, &mut pass, &mut sent)
            };
            let spent = allowed.saturating_sub(pass);
            *budget = budget.saturating_sub(spent);
            self.gate_spent(spent);
            // SAFETY: this context is the lane's sender until it leaves.
            unsafe { sender.keep_spare(sent) };
            let found = sender.election.leave();
            // SAFETY: disabled above, or by `take_first` for the batch
            // taken in the caller's look.
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
            if !found {
                // Nobody queued into the lane while this context sent
                // (else it would have found this one sending): done,
                // without taking the QP's lock again.
                return Flushed::Done;
            }
            // Packets queued while this context sent, by contexts that
            // found it sending: elected again, it takes them.
        }
    }

    /// Whether the last fetch left published send WQEs for the work item
    /// (never for a kernel consumer's UD QP, whose WQEs are all built
    /// during its post).
    pub(super) fn fetch_left(&self, inner: &QpInner) -> bool {
        inner.t.send_pending() && !(self.is_ud() && self.fixed.kernel)
    }

    /// Sends packets of `lane`'s queue while `budget` lasts (the caller
    /// is the lane's sender and disabled preemption); requests from the
    /// CPU the QP's requests last left from while some are in flight.
    /// [`Left::Nothing`] once what it took is sent (more queued meanwhile
    /// by contexts that found the caller sending is the caller's to take
    /// when it leaves); `sent` then holds the emptied vector of the last
    /// batch, for the caller to keep as the lane's spare.
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
            let batch = match self.take_batch(&mut self.inner.lock(), lane, *budget) {
                Ok(batch) => batch,
                Err(left) => return left,
            };
            if self.send_batch(batch, budget, sent) {
                return Left::Nothing;
            }
        }
    }

    /// Takes `lane`'s queue to be sent under the QP's lock (`inner`), with
    /// what sending it needs, unless it is empty, `budget` is spent, or
    /// requests in flight left from another CPU ([`Self::send_queued`]).
    /// The caller is the lane's sender and disabled preemption.
    fn take_batch(&self, inner: &mut QpInner, lane: Lane, budget: usize) -> Result<Batch, Left> {
        if inner.t.queue(lane).is_empty() {
            return Err(Left::Nothing);
        }
        if budget == 0 {
            return Err(Left::Budget);
        }
        if lane == Lane::Req {
            if inner.t.requests_in_flight() {
                let home = self.tx_home.load(Ordering::Relaxed);
                // SAFETY: plain query of the current CPU.
                let elsewhere = unsafe { sys::rroce_helper_tx_elsewhere(home) };
                if let Ok(cpu) = u32::try_from(elsewhere) {
                    return Err(Left::Home(cpu));
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
        Ok(Batch {
            lane,
            // SAFETY: the caller is the lane's sender.
            skbs: inner
                .t
                .take_lane(lane, unsafe { self.lane_sender(lane).take_spare() }),
            av: inner.t.attrs.av,
            sport: inner.sport,
            epoch: inner.t.epoch,
        })
    }

    /// Sends `batch` while `budget` lasts, with the QP's lock released.
    /// `true` once all of it is sent: `sent` then holds its emptied
    /// vector. Otherwise what the budget did not cover is back at the head
    /// of the lane's queue (unless the QP was reset meanwhile) and the
    /// packets the link refused are counted as lost.
    fn send_batch(&self, batch: Batch, budget: &mut usize, sent: &mut KVec<Skb>) -> bool {
        let Batch {
            lane,
            skbs: mut batch,
            av,
            sport,
            epoch,
        } = batch;
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
            // after it looked again, having let go of the lane's flag (it
            // has to look then anyway).
            *sent = batch;
            return true;
        }
        let mut inner = self.inner.lock();
        // What went back to the queue was not sent.
        inner.t.tx_sent = inner.t.tx_sent.wrapping_sub(back);
        inner.t.tx_lost = inner.t.tx_lost.wrapping_add(lost);
        if !rest.is_empty() && inner.t.epoch == epoch {
            // (After a reset the rest is not for the new connection: it
            // is freed below, once the lock is released.)
            for skb in inner.t.queue_mut(lane).drain_all() {
                let _ = rest.push(skb, GFP_ATOMIC);
            }
            core::mem::swap(inner.t.queue_mut(lane), &mut rest);
        }
        drop(inner);
        drop(rest);
        false
    }
}

/// A lane's packets taken to be sent ([`QpState::take_batch`]), with what
/// sending them needs, read in the same hold of the QP's lock.
pub(crate) struct Batch {
    lane: Lane,
    skbs: KVec<Skb>,
    av: Option<AddressVector>,
    sport: u16,
    epoch: u32,
}

/// What a look at a QP's lanes found ([`QpState::look`]): the lanes with
/// packets queued ([`Lane::bit`]) and what a flush leaves to others.
#[must_use = "a taken lane is sent, its flag released, by flush_looked"]
pub(crate) struct Look {
    pending: u8,
    /// [`tx_budget`] of the context that looked.
    budget: usize,
    after: AfterFlush,
    /// The first pending lane, taken in the look's hold.
    taken: Option<Batch>,
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
    /// Sent, or being sent by another context.
    Done,
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

/// The packets a flush from the current context may send: none with
/// interrupts off (the IP stack may not run: all to the work item), a
/// softirq's share with bottom halves off, more in process context. Read
/// before the QP's lock is taken, which masks interrupts.
pub(crate) fn tx_budget() -> usize {
    // SAFETY: plain queries of the current context.
    if unsafe { sys::rroce_helper_irqs_off() } {
        0
    // SAFETY: as above.
    } else if unsafe { sys::rroce_helper_in_atomic_bh() } {
        TX_BUDGET_ATOMIC
    } else {
        TX_BUDGET_PROCESS
    }
}

/// Packets one softirq-context flush sends before it defers to the work item.
const TX_BUDGET_ATOMIC: usize = 64;

/// Packets one process-context flush (a doorbell, a pass of the work item)
/// sends before it defers to the work item.
const TX_BUDGET_PROCESS: usize = 256;

/// The most packets a lane's spare vector is kept for (a 1 MiB READ's
/// responses at MTU 1024 are 1024: a burst's vector is freed).
const SPARE_MAX: usize = 64;
