// SPDX-License-Identifier: GPL-2.0

//! Packet allocations made to fail, in KUnit builds: a test arms a count,
//! and that many of the next transmit allocations (any QP's) find no
//! memory, as an atomic allocation under pressure does.

use core::sync::atomic::{AtomicU32, Ordering};

/// Allocations still to fail.
static LEFT: AtomicU32 = AtomicU32::new(0);

/// Fails the next `n` allocations (replacing any count left).
pub(crate) fn arm(n: u32) {
    LEFT.store(n, Ordering::Relaxed);
}

/// How many armed failures have not happened yet.
pub(crate) fn left() -> u32 {
    LEFT.load(Ordering::Relaxed)
}

/// Whether this allocation fails (taking one from the count).
pub(super) fn take() -> bool {
    LEFT.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
        .is_ok()
}
