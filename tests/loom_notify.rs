// SPDX-License-Identifier: GPL-2.0

//! Loom models of the CQ notify state machine with its dispatcher protocol,
//! and of the shared-ring index protocol.
//!
//! Run with `scripts/loom.sh` (`RUSTFLAGS="--cfg loom" cargo test --release
//! --test loom_notify`). Each model explores every interleaving of its
//! threads up to the preemption bound (`LOOM_MAX_PREEMPTIONS`; the script
//! defaults to 5, a bare `cargo test` run to 3).
//!
//! The notify models run the real [`CqNotify`] under a `loom::sync::Mutex`
//! standing in for the CQ spinlock, with producer threads posting
//! completions, a consumer thread that polls ("GetResults returns 0") and
//! then arms ("Notify") in two separate critical sections, and the callback,
//! which may poll and re-arm. Ghost state next to the machine checks:
//!
//! - never two callbacks at once (an atomic in-callback flag);
//! - never a callback trigger without an outstanding arm request;
//! - every trigger is followed by a callback (deferred ones included);
//! - no lost wake-up: at quiescence, an outstanding arm never coexists with
//!   an unpolled completion that satisfies it and was never reported; and
//!   every completion still in the CQ that satisfies the consumer's arm and
//!   arrived after the consumer's poll saw a trigger at or after
//!   `min(its arrival, the consumer's arm)`;
//! - after overflow the CQ is dead; after destroy returns no callback starts.

#![cfg(loom)]

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering as StdOrdering};
use std::time::Instant;

use loom::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use loom::sync::{Arc, Mutex};
use loom::thread;

use rroce_engine::engine::notify::{
    Action, ArmOutcome, ArmRequest, ArmType, CompletionKind, CqNotify, NotifyError,
};
use rroce_engine::engine::ring::{
    layout_for, Consumer, IndexPair, Producer, RingError, SharedIndex,
};

/// Runs `f` under loom with a bounded preemption count, and reports the
/// number of explored executions and the time taken.
fn model<F>(name: &str, f: F)
where
    F: Fn() + Sync + Send + 'static,
{
    static RUNS: AtomicUsize = AtomicUsize::new(0);
    let mut b = loom::model::Builder::new();
    if b.preemption_bound.is_none() {
        b.preemption_bound = Some(3);
    }
    let bound = b.preemption_bound;
    RUNS.store(0, StdOrdering::SeqCst);
    let t0 = Instant::now();
    b.check(move || {
        RUNS.fetch_add(1, StdOrdering::SeqCst);
        f();
    });
    println!(
        "loom model {name}: {} executions, preemption bound {:?}, {:.2?}",
        RUNS.load(StdOrdering::SeqCst),
        bound,
        t0.elapsed()
    );
}

/// One model's configuration.
#[derive(Clone, Copy)]
struct Variant {
    /// Kinds posted by the two producer threads.
    posts: [CompletionKind; 2],
    /// The consumer's arm type.
    consumer_arm: ArmType,
    /// The callback drains the CQ before re-arming.
    cb_poll: bool,
    /// The callback re-arms with this type.
    cb_rearm: Option<ArmType>,
    /// CQ capacity (overflow beyond it).
    capacity: usize,
    /// How many poll-then-arm rounds the consumer makes.
    rounds: u32,
}

/// A completion in the modelled CQ.
struct Entry {
    kind: CompletionKind,
    /// Logical time it was posted.
    at: u64,
    /// A callback trigger happened after it was posted.
    reported: bool,
}

/// State guarded by the CQ lock: the machine plus ghost bookkeeping.
struct Locked {
    st: CqNotify,
    cq: VecDeque<Entry>,
    /// Logical clock, advanced in every critical section.
    clock: u64,
    /// An arm request was made and not consumed by a trigger yet.
    ghost_armed: bool,
    /// Triggers not yet followed by a RunCallback decision.
    uncovered: u32,
    /// Time of the last trigger.
    last_trigger: Option<u64>,
    /// Time of the consumer's (last) poll and successful arm.
    consumer_poll: Option<u64>,
    consumer_arm: Option<u64>,
    /// An overflow happened.
    overflowed: bool,
    /// Arms refused because the CQ was dead.
    refused_dead: u32,
}

/// The modelled CQ.
struct Cq {
    lock: Mutex<Locked>,
    /// Set while a callback runs.
    in_cb: AtomicBool,
    /// Callbacks run.
    callbacks: AtomicU32,
    /// The destroyer finished waiting.
    destroyed: AtomicBool,
    /// Set by the dispatcher that got `WakeDestroyer`.
    destroy_wake: AtomicBool,
    variant: Variant,
}

impl Locked {
    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    /// A trigger: the machine consumed the arm.
    fn trigger(&mut self, now: u64) {
        assert!(self.ghost_armed, "callback triggered without an arm");
        self.ghost_armed = false;
        self.uncovered += 1;
        self.last_trigger = Some(now);
        for e in self.cq.iter_mut() {
            e.reported = true;
        }
    }

    /// Bookkeeping for an action the caller is about to dispatch.
    fn dispatching(&mut self, a: Action) {
        if a == Action::RunCallback {
            // A callback starts after every trigger so far.
            self.uncovered = 0;
        }
    }

    /// Arms the machine and records the ghost effects.
    fn arm(&mut self, t: ArmType) -> Result<ArmOutcome, NotifyError> {
        let now = self.tick();
        let unpolled = self.cq.len() as u32;
        let merged = self.st.armed().map_or(t, |a| a.merge(t));
        let r = self.st.arm(ArmRequest::nd(t), unpolled);
        match r {
            Ok(o) => {
                self.ghost_armed = true;
                let fired = matches!(o, ArmOutcome::RunCallback | ArmOutcome::Deferred);
                // Fire on arm exactly when an unpolled completion that no
                // callback reported yet satisfies the merged arm.
                let due = self
                    .cq
                    .iter()
                    .any(|e| !e.reported && merged.satisfied_by(e.kind));
                assert_eq!(fired, due, "fire-on-arm rule violated");
                if fired {
                    self.trigger(now);
                }
                self.dispatching(o.action());
            }
            Err(NotifyError::Dead(_)) => self.refused_dead += 1,
            Err(NotifyError::Canceled) => {}
            Err(e) => panic!("arm failed: {e:?}"),
        }
        r
    }
}

impl Cq {
    fn new(variant: Variant) -> Arc<Cq> {
        Arc::new(Cq {
            lock: Mutex::new(Locked {
                st: CqNotify::new(),
                cq: VecDeque::new(),
                clock: 0,
                ghost_armed: false,
                uncovered: 0,
                last_trigger: None,
                consumer_poll: None,
                consumer_arm: None,
                overflowed: false,
                refused_dead: 0,
            }),
            in_cb: AtomicBool::new(false),
            callbacks: AtomicU32::new(0),
            destroyed: AtomicBool::new(false),
            destroy_wake: AtomicBool::new(false),
            variant,
        })
    }

    /// The dispatcher loop: run callbacks outside the lock until idle.
    fn dispatch(&self, mut a: Action) {
        while a == Action::RunCallback {
            self.callback();
            let mut g = self.lock.lock().unwrap();
            g.tick();
            a = g.st.callback_finished().expect("dispatcher protocol");
            g.dispatching(a);
        }
        if a == Action::WakeDestroyer {
            self.destroy_wake.store(true, Ordering::SeqCst);
        }
    }

    /// The CQ callback: may poll and re-arm its own CQ (no deadlock, since
    /// it runs outside the lock).
    fn callback(&self) {
        assert!(
            !self.in_cb.swap(true, Ordering::SeqCst),
            "two callbacks at once"
        );
        assert!(
            !self.destroyed.load(Ordering::SeqCst),
            "callback after destroy returned"
        );
        self.callbacks.fetch_add(1, Ordering::SeqCst);
        if let Some(t) = self.variant.cb_rearm {
            let mut g = self.lock.lock().unwrap();
            if self.variant.cb_poll {
                g.tick();
                g.cq.clear();
            }
            if let Ok(o) = g.arm(t) {
                assert_ne!(o, ArmOutcome::RunCallback, "nested callback");
            }
        }
        self.in_cb.store(false, Ordering::SeqCst);
    }

    /// A producer posts one completion (or overflows the CQ).
    fn post(&self, kind: CompletionKind) {
        let a = {
            let mut g = self.lock.lock().unwrap();
            let now = g.tick();
            if g.st.check_postable().is_err() {
                return;
            }
            let was_armed = g.st.armed().is_some();
            let a = if g.cq.len() == self.variant.capacity {
                let f = g.st.overflow();
                assert!(f.raise_cq_err, "first overflow not reported");
                g.overflowed = true;
                f.action
            } else {
                g.cq.push_back(Entry {
                    kind,
                    at: now,
                    reported: false,
                });
                g.st.on_completion(kind).expect("live CQ")
            };
            if was_armed && g.st.armed().is_none() {
                g.trigger(now);
            }
            g.dispatching(a);
            a
        };
        self.dispatch(a);
    }

    /// The consumer: GetResults drains the CQ, then Notify arms it, in two
    /// critical sections (the classic race window between them).
    fn consume(&self) {
        for _ in 0..self.variant.rounds {
            self.poll_then_arm();
        }
    }

    /// One GetResults-then-Notify round.
    fn poll_then_arm(&self) {
        {
            let mut g = self.lock.lock().unwrap();
            let now = g.tick();
            g.cq.clear();
            g.consumer_poll = Some(now);
        }
        let a = {
            let mut g = self.lock.lock().unwrap();
            match g.arm(self.variant.consumer_arm) {
                Ok(o) => {
                    g.consumer_arm = Some(g.clock);
                    o.action()
                }
                Err(_) => Action::Idle,
            }
        };
        self.dispatch(a);
    }

    /// Checks run once every thread has finished.
    fn check_quiescent(&self) {
        let g = self.lock.lock().unwrap();
        assert!(!g.st.in_callback(), "dispatcher never released");
        assert!(!g.st.callback_deferred(), "deferred callback never ran");
        assert_eq!(g.uncovered, 0, "a trigger was never followed by a callback");
        assert!(!self.in_cb.load(Ordering::SeqCst));
        // No lost wake-up, machine-level.
        if let Some(a) = g.st.armed() {
            assert!(
                !g.cq.iter().any(|e| !e.reported && a.satisfied_by(e.kind)),
                "lost wake-up: armed with an unreported completion in the CQ"
            );
        }
        // No lost wake-up, consumer-level.
        if let (Some(p), Some(a)) = (g.consumer_poll, g.consumer_arm) {
            for e in g.cq.iter() {
                if e.at > p && self.variant.consumer_arm.satisfied_by(e.kind) {
                    let need = e.at.min(a);
                    assert!(
                        g.last_trigger.is_some_and(|t| t >= need),
                        "lost wake-up: completion after the consumer's poll never notified"
                    );
                }
            }
        }
        if g.overflowed {
            assert!(g.st.fatal_reason().is_some() && g.st.armed().is_none());
        }
        let cbs = self.callbacks.load(Ordering::SeqCst);
        assert!(
            cbs > 0 || g.last_trigger.is_none(),
            "trigger without callback"
        );
    }
}

/// Two producers, one consumer; the callback per the variant.
fn run_variant(v: Variant) {
    let cq = Cq::new(v);
    let mut hs = Vec::new();
    for kind in v.posts {
        let cq = cq.clone();
        hs.push(thread::spawn(move || cq.post(kind)));
    }
    {
        let cq = cq.clone();
        hs.push(thread::spawn(move || cq.consume()));
    }
    for h in hs {
        h.join().unwrap();
    }
    cq.check_quiescent();
}

use CompletionKind::{Error, Solicited as Sol, Unsolicited as Uns};

/// GetResults-returns-0-then-Notify race with ANY arms; the callback does
/// not re-arm.
#[test]
fn notify_race_any() {
    model("notify_race_any", || {
        run_variant(Variant {
            posts: [Uns, Uns],
            consumer_arm: ArmType::Any,
            cb_poll: false,
            cb_rearm: None,
            capacity: 8,
            rounds: 1,
        })
    });
}

/// SOLICITED arm, an unsolicited and an error completion; the callback
/// re-arms SOLICITED without polling (reported completions must not fire
/// it again; the error must fire whichever arm is outstanding).
#[test]
fn notify_solicited_and_error_rearm() {
    model("notify_solicited_and_error_rearm", || {
        run_variant(Variant {
            posts: [Uns, Error],
            consumer_arm: ArmType::Solicited,
            cb_poll: false,
            cb_rearm: Some(ArmType::Solicited),
            capacity: 8,
            rounds: 1,
        })
    });
}

/// The callback polls and re-arms ANY (deferral when a completion lands
/// while it runs).
#[test]
fn notify_callback_polls_and_rearms() {
    model("notify_callback_polls_and_rearms", || {
        run_variant(Variant {
            posts: [Uns, Sol],
            consumer_arm: ArmType::Any,
            cb_poll: true,
            cb_rearm: Some(ArmType::Any),
            capacity: 8,
            rounds: 1,
        })
    });
}

/// The consumer makes two poll-then-arm rounds with SOLICITED arms while
/// the callback re-arms ANY without polling: merged arms, re-arming over
/// reported completions, and arms racing the callback.
#[test]
fn notify_two_rounds_merge() {
    model("notify_two_rounds_merge", || {
        run_variant(Variant {
            posts: [Uns, Sol],
            consumer_arm: ArmType::Solicited,
            cb_poll: false,
            cb_rearm: Some(ArmType::Any),
            capacity: 8,
            rounds: 2,
        })
    });
}

/// An ERRORS arm on a one-entry CQ: the second unpolled completion
/// overflows it, which must wake the ERRORS arm and kill the CQ.
#[test]
fn notify_overflow_wakes_errors_arm() {
    model("notify_overflow_wakes_errors_arm", || {
        run_variant(Variant {
            posts: [Uns, Uns],
            consumer_arm: ArmType::Errors,
            cb_poll: false,
            cb_rearm: Some(ArmType::Errors),
            capacity: 1,
            rounds: 1,
        })
    });
}

/// Destroy races with a completion and the consumer's arm: the pending arm
/// is canceled, a running callback is waited for, and no callback starts
/// after destroy returned.
#[test]
fn notify_destroy_waits_for_callback() {
    model("notify_destroy_waits_for_callback", || {
        let cq = Cq::new(Variant {
            posts: [Uns, Uns],
            consumer_arm: ArmType::Any,
            cb_poll: false,
            cb_rearm: Some(ArmType::Any),
            capacity: 8,
            rounds: 1,
        });
        let p = {
            let cq = cq.clone();
            thread::spawn(move || cq.post(Uns))
        };
        let c = {
            let cq = cq.clone();
            thread::spawn(move || cq.consume())
        };
        // The destroyer (this thread).
        let d = {
            let mut g = cq.lock.lock().unwrap();
            g.tick();
            g.st.destroy()
        };
        if d.wait_for_callback {
            while !cq.destroy_wake.load(Ordering::SeqCst) {
                thread::yield_now();
            }
        }
        cq.destroyed.store(true, Ordering::SeqCst);
        p.join().unwrap();
        c.join().unwrap();
        let g = cq.lock.lock().unwrap();
        assert!(g.st.is_destroyed() && g.st.armed().is_none());
        assert!(!g.st.in_callback() && !g.st.callback_deferred());
    });
}

/// A shared index over loom's atomics, with the same orderings as the
/// `core::sync::atomic::AtomicU32` implementation the kernel uses.
#[derive(Default)]
struct LoomIndex(AtomicU32);

impl SharedIndex for LoomIndex {
    fn load_acquire(&self) -> u32 {
        self.0.load(Ordering::Acquire)
    }

    fn store_release(&self, value: u32) {
        self.0.store(value, Ordering::Release)
    }
}

/// The shared buffer: header words plus loom-tracked element cells, so a
/// missing acquire/release edge shows up as a data race.
struct Shared {
    hdr: IndexPair<LoomIndex>,
    slots: Vec<loom::cell::UnsafeCell<u32>>,
}

/// Single producer, single consumer through a 2-slot ring (capacity 1),
/// three values: every value arrives once, in order, with no data race on
/// the slots, across wrap-around and the full/empty boundaries.
#[test]
fn ring_spsc_publish() {
    model("ring_spsc_publish", || {
        let layout = layout_for(1, 4).unwrap();
        assert_eq!((layout.slots(), layout.capacity()), (2, 1));
        let shared = Arc::new(Shared {
            hdr: IndexPair::default(),
            slots: (0..layout.slots())
                .map(|_| loom::cell::UnsafeCell::new(0))
                .collect(),
        });
        const N: u32 = 3;
        let prod = {
            let shared = shared.clone();
            thread::spawn(move || {
                let mut p = Producer::new(layout);
                let mut v = 1;
                while v <= N {
                    match p.reserve(&shared.hdr) {
                        Ok(slot) => {
                            assert_eq!(slot.offset(), layout.slot_offset(slot.index()));
                            let cell = &shared.slots[slot.index() as usize];
                            // SAFETY: the producer owns a reserved slot until
                            // it commits; loom flags any overlapping access.
                            cell.with_mut(|ptr| unsafe { *ptr = v });
                            p.commit(slot, &shared.hdr).unwrap();
                            v += 1;
                        }
                        Err(RingError::Full) => thread::yield_now(),
                        Err(e) => panic!("producer: {e:?}"),
                    }
                }
            })
        };
        let mut c = Consumer::new(layout);
        let mut want = 1;
        while want <= N {
            match c.peek(&shared.hdr) {
                Ok(slot) => {
                    let cell = &shared.slots[slot.index() as usize];
                    // SAFETY: a published slot is not written again until
                    // the consumer advances past it; loom checks this.
                    let got = cell.with(|ptr| unsafe { *ptr });
                    assert_eq!(got, want, "lost or reordered element");
                    c.advance(slot, &shared.hdr).unwrap();
                    want += 1;
                }
                Err(RingError::Empty) => thread::yield_now(),
                Err(e) => panic!("consumer: {e:?}"),
            }
        }
        prod.join().unwrap();
        assert_eq!(c.available(&shared.hdr), Ok(0));
    });
}
