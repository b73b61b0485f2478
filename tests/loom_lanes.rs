// SPDX-License-Identifier: GPL-2.0

//! Loom model of a transmit lane's sender election
//! (`engine::lane::Election`), as `qp/lanes.rs` uses it.
//!
//! Run with `scripts/loom.sh` (`RUSTFLAGS="--cfg loom" cargo test --release
//! --test loom_lanes`). Contexts queue packets under a mutex standing in
//! for the QP's lock, then flush: enter; if elected, take the queue under
//! the lock, "send" it (append to the wire), leave, and enter again and
//! take again while leave says someone found it sending. Checked over every
//! interleaving (up to the preemption bound):
//!
//! - never two senders at once (a ghost counter);
//! - nothing stranded: once every context has returned, the queue is empty
//!   and the wire holds every packet exactly once;
//! - each context's packets leave in the order it queued them.

#![cfg(loom)]

use std::sync::atomic::{AtomicUsize, Ordering as StdOrdering};
use std::time::Instant;

use loom::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use loom::sync::{Arc, Mutex};
use loom::thread;

use rroce_engine::engine::lane::{Election, Flag};

/// Runs `f` under loom with a bounded preemption count, at most `cap`
/// (the three-context model takes 23 s at 4 and over 200 s at 5).
fn model<F>(name: &str, cap: usize, f: F)
where
    F: Fn() + Sync + Send + 'static,
{
    static RUNS: AtomicUsize = AtomicUsize::new(0);
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(b.preemption_bound.unwrap_or(3).min(cap));
    let bound = b.preemption_bound;
    RUNS.store(0, StdOrdering::SeqCst);
    let t0 = Instant::now();
    b.check(move || {
        RUNS.fetch_add(1, StdOrdering::SeqCst);
        f();
    });
    eprintln!(
        "loom {name}: {} executions, preemption bound {bound:?}, {:.1}s",
        RUNS.load(StdOrdering::SeqCst),
        t0.elapsed().as_secs_f64()
    );
}

/// A flag over loom's atomics and fences.
struct LoomFlag(AtomicBool);

impl Flag for LoomFlag {
    fn swap(&self, v: bool, order: Ordering) -> bool {
        self.0.swap(v, order)
    }

    fn store(&self, v: bool, order: Ordering) {
        self.0.store(v, order)
    }

    fn load(&self, order: Ordering) -> bool {
        self.0.load(order)
    }

    fn fence() {
        loom::sync::atomic::fence(Ordering::SeqCst)
    }
}

struct Lane {
    election: Election<LoomFlag>,
    /// The lane's queue, under the QP's lock.
    queue: Mutex<Vec<u32>>,
    /// What was sent, in wire order.
    wire: Mutex<Vec<u32>>,
    /// Ghost: contexts sending right now.
    senders: AtomicU32,
}

impl Lane {
    fn new() -> Arc<Self> {
        Arc::new(Self {
            election: Election::with(
                LoomFlag(AtomicBool::new(false)),
                LoomFlag(AtomicBool::new(false)),
            ),
            queue: Mutex::new(Vec::new()),
            wire: Mutex::new(Vec::new()),
            senders: AtomicU32::new(0),
        })
    }

    /// `qp/lanes.rs`' flush of one lane.
    fn flush(&self) {
        if !self.election.enter() {
            return;
        }
        loop {
            assert_eq!(
                self.senders.fetch_add(1, Ordering::SeqCst),
                0,
                "two senders"
            );
            let batch = std::mem::take(&mut *self.queue.lock().unwrap());
            self.wire.lock().unwrap().extend(batch);
            self.senders.fetch_sub(1, Ordering::SeqCst);
            if !self.election.leave() {
                return;
            }
            if !self.election.enter() {
                return;
            }
        }
    }

    fn queue_and_flush(&self, pkts: &[u32]) {
        for &p in pkts {
            self.queue.lock().unwrap().push(p);
            self.flush();
        }
    }
}

fn check_sent(lane: &Lane, all: &[&[u32]]) {
    assert!(
        lane.queue.lock().unwrap().is_empty(),
        "a packet was stranded"
    );
    let wire = lane.wire.lock().unwrap().clone();
    let total: usize = all.iter().map(|p| p.len()).sum();
    assert_eq!(wire.len(), total, "a packet was lost or sent twice");
    for pkts in all {
        let mine: Vec<u32> = wire.iter().copied().filter(|p| pkts.contains(p)).collect();
        assert_eq!(&mine[..], *pkts, "a context's packets left out of order");
    }
}

/// Two contexts queue and flush a packet each, a third two: nothing is
/// stranded, nothing sent twice, never two senders.
#[test]
fn lane_three_contexts() {
    model("lane_three_contexts", 4, || {
        let lane = Lane::new();
        const A: &[u32] = &[1];
        const B: &[u32] = &[2];
        const C: &[u32] = &[3, 4];
        let a = {
            let lane = lane.clone();
            thread::spawn(move || lane.queue_and_flush(A))
        };
        let b = {
            let lane = lane.clone();
            thread::spawn(move || lane.queue_and_flush(B))
        };
        lane.queue_and_flush(C);
        a.join().unwrap();
        b.join().unwrap();
        check_sent(&lane, &[A, B, C]);
    });
}

/// Two contexts, each queueing and flushing twice.
#[test]
fn lane_two_contexts_twice() {
    model("lane_two_contexts_twice", 5, || {
        let lane = Lane::new();
        const A: &[u32] = &[1, 2];
        const B: &[u32] = &[3, 4];
        let a = {
            let lane = lane.clone();
            thread::spawn(move || lane.queue_and_flush(A))
        };
        lane.queue_and_flush(B);
        a.join().unwrap();
        check_sent(&lane, &[A, B]);
    });
}
