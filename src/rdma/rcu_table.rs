// SPDX-License-Identifier: GPL-2.0

//! Object tables read under RCU.
//!
//! The transport finds QPs by number and MRs by key from softirq context.
//! A table is a fixed array of pointers: writers (object create and
//! destroy, which run in process context) publish and clear entries; a
//! reader loads an entry inside an RCU read-side critical section and may
//! use the object until the section ends, because destroy clears the entry
//! and waits for a grace period before freeing.

use core::{
    ptr::null_mut,
    sync::atomic::{AtomicPtr, Ordering},
};

use kernel::{prelude::*, sync::rcu};

/// A table of `T` pointers indexed by a small integer.
///
/// # Invariants
///
/// `slots` is null (not allocated, length 0) or the buffer of a `KVVec`
/// of `len` entries with capacity `cap`. A non-null entry points at a live
/// `T`, which stays live for one RCU grace period after the entry is
/// cleared.
pub(crate) struct RcuTable<T> {
    slots: *mut AtomicPtr<T>,
    len: usize,
    cap: usize,
}

// SAFETY: the entries are atomics; the objects are shared across contexts
// by design (`T: Sync`).
unsafe impl<T: Sync> Sync for RcuTable<T> {}
// SAFETY: as above.
unsafe impl<T: Sync> Send for RcuTable<T> {}

impl<T> RcuTable<T> {
    /// An empty table of `len` entries.
    pub(crate) fn new(len: usize) -> Result<Self> {
        let mut v = KVVec::with_capacity(len, GFP_KERNEL)?;
        for _ in 0..len {
            v.push(AtomicPtr::new(null_mut()), GFP_KERNEL)?;
        }
        let (slots, len, cap) = v.into_raw_parts();
        // INVARIANT: the buffer of a `KVVec` of null entries.
        Ok(Self { slots, len, cap })
    }

    fn slot(&self, i: usize) -> Option<&AtomicPtr<T>> {
        if i >= self.len {
            return None;
        }
        // SAFETY: in bounds of the buffer (type invariant).
        Some(unsafe { &*self.slots.add(i) })
    }

    /// Publishes `obj` at `i`.
    pub(crate) fn set(&self, i: usize, obj: *const T) -> Result {
        self.slot(i)
            .ok_or(EINVAL)?
            .store(obj.cast_mut(), Ordering::Release);
        Ok(())
    }

    /// Clears entry `i`; the caller waits for a grace period
    /// (`synchronize_rcu`) before freeing what it pointed at.
    pub(crate) fn clear(&self, i: usize) {
        if let Some(s) = self.slot(i) {
            s.store(null_mut(), Ordering::Release);
        }
    }

    /// Number of entries.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The object at `i`, valid while `_guard` is held.
    pub(crate) fn get<'g>(&self, i: usize, _guard: &'g rcu::Guard) -> Option<&'g T> {
        let p = self.slot(i)?.load(Ordering::Acquire);
        // SAFETY: a non-null entry is live until a grace period after it
        // is cleared, which cannot end while `_guard` is held.
        unsafe { p.as_ref() }
    }
}

impl<T> Drop for RcuTable<T> {
    fn drop(&mut self) {
        if !self.slots.is_null() {
            // SAFETY: from `into_raw_parts` in `new` (type invariant).
            drop(unsafe { KVVec::from_raw_parts(self.slots, self.len, self.cap) });
        }
    }
}
