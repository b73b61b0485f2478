// SPDX-License-Identifier: GPL-2.0

//! Who sends a transmit lane's packets: one context at a time.
//!
//! A QP's packets are queued into a lane under the QP's lock by whichever
//! context built them, and sent with the lock released (the IP stack may
//! not run with interrupts off). One context at a time sends a lane, so the
//! lane's wire order is its queue order. A context that has queued packets
//! [`Election::enter`]s: it either becomes the lane's sender, and takes the
//! queue under the lock, or finds another sender there and leaves its
//! packets to it. A sender that has sent what it took [`Election::leave`]s,
//! and learns in the same step whether a context found it there meanwhile:
//! only then can packets be waiting that nobody else will send, and only
//! then does it take the lock to look at the queue again.
//!
//! The protocol: a context raises `missed`, then a sequentially consistent
//! fence, then tries `busy` (acquire); the sender clears `missed` once it
//! holds `busy`, before it takes the queue under the lock; it lets go of
//! `busy` (release), then a fence, then reads `missed`. A context whose try
//! fails read `busy` as set before the sender's release, so its fence comes
//! before the sender's in the fences' single order, and the sender's read
//! after its fence sees the raise, or a later clear: that one by a sender
//! whose take of the queue, under the lock, comes after the context queued
//! its packets (were it before, the clear would come before the raise), so
//! that sender sends them. `tests/loom_lanes.rs` checks this with every
//! interleaving of three contexts (loom models fences, not sequentially
//! consistent loads and stores, which is one more reason for the fences).

use core::sync::atomic::{fence, AtomicBool, Ordering};

/// A flag of the [`Election`], with the orderings the election asks for.
///
/// Implemented by `core::sync::atomic::AtomicBool` (host and kernel) and
/// by a wrapper around loom's in the model tests.
pub trait Flag {
    /// Stores `v` as one read-modify-write, returning the value before.
    fn swap(&self, v: bool, order: Ordering) -> bool;
    /// Stores `v`.
    fn store(&self, v: bool, order: Ordering);
    /// Loads the value.
    fn load(&self, order: Ordering) -> bool;
    /// A sequentially consistent fence, of the flag's memory model.
    fn fence();
}

impl Flag for AtomicBool {
    fn swap(&self, v: bool, order: Ordering) -> bool {
        AtomicBool::swap(self, v, order)
    }

    fn store(&self, v: bool, order: Ordering) {
        AtomicBool::store(self, v, order)
    }

    fn load(&self, order: Ordering) -> bool {
        AtomicBool::load(self, order)
    }

    fn fence() {
        fence(Ordering::SeqCst)
    }
}

/// One lane's sender election (see the module documentation).
#[derive(Default)]
pub struct Election<F = AtomicBool> {
    /// A context is sending the lane.
    busy: F,
    /// A context may have queued packets the sender has not taken.
    missed: F,
}

impl<F: Flag> Election<F> {
    /// Makes an election from its two flags, both `false`.
    pub const fn with(busy: F, missed: F) -> Self {
        Self { busy, missed }
    }

    /// A context that queued packets asks to send the lane. `true`: it is
    /// the sender, and takes the queue (under the QP's lock) after this
    /// returns; `false`: the sender there sends them.
    pub fn enter(&self) -> bool {
        self.missed.store(true, Ordering::Relaxed);
        F::fence();
        // Acquire: what the last sender did (its spare vector) is seen.
        if self.busy.swap(true, Ordering::AcqRel) {
            return false;
        }
        // Before the take, whose lock orders it before the raise of any
        // context that queues after the take.
        self.missed.store(false, Ordering::Relaxed);
        true
    }

    /// The sender lets go. `true`: a context found it sending since it
    /// entered, and packets may wait that nobody sends: the caller looks
    /// at the queue again (entering again first).
    pub fn leave(&self) -> bool {
        // A swap, not a store: `busy` only ever changes by read-modify-
        // write (the same instruction as a store and fence on x86; and
        // loom, which checks this, lets a plain store come between another
        // context's swap's read and write, tokio-rs/loom#254).
        let _ = self.busy.swap(false, Ordering::Release);
        F::fence();
        self.missed.load(Ordering::Relaxed)
    }

    /// Whether a context is sending the lane (a snapshot, for tests).
    pub fn busy(&self) -> bool {
        self.busy.load(Ordering::Acquire)
    }
}

/// Checks run by KUnit.
#[cfg(any(test, CONFIG_KUNIT))]
pub mod selftest {
    use super::Election;
    use core::sync::atomic::AtomicBool;

    /// Alone, a context enters, sends, and leaves with nothing to look at.
    pub fn alone() -> Result<(), &'static str> {
        let e = Election::<AtomicBool>::default();
        if !e.enter() || !e.busy() {
            return Err("an idle lane was not entered");
        }
        if e.leave() || e.busy() {
            return Err("a lone sender was told to look again");
        }
        Ok(())
    }

    /// A context that finds the sender there is refused, and the sender is
    /// told to look again; once it has, the next leave is quiet.
    pub fn found_sending() -> Result<(), &'static str> {
        let e = Election::<AtomicBool>::default();
        if !e.enter() {
            return Err("an idle lane was not entered");
        }
        if e.enter() {
            return Err("two senders at once");
        }
        if !e.leave() {
            return Err("the sender was not told of the context that found it");
        }
        if !e.enter() {
            return Err("the sender could not enter again");
        }
        if e.leave() {
            return Err("a second leave was told to look again");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn selftests() {
        super::selftest::alone().unwrap();
        super::selftest::found_sending().unwrap();
    }
}
