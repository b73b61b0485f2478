// SPDX-License-Identifier: GPL-2.0

//! Work items embedded in rroce's pinned object state.
//!
//! A [`Work`] is a `struct work_struct` that is initialized (`INIT_WORK`)
//! in place by its pin-initializer, so it is never seen uninitialized and
//! never moves; queueing, flushing and cancelling it are then safe. The
//! work function gets the raw `work_struct` and finds its owner with
//! [`owner`] (`container_of`).

use core::{cell::UnsafeCell, marker::PhantomPinned};

use kernel::prelude::*;

use super::sys;

/// A work function as the workqueue calls it.
pub(crate) type WorkFn = unsafe extern "C" fn(*mut sys::work_struct);

/// An initialized `work_struct` at a fixed address.
///
/// # Invariants
///
/// The `work_struct` was initialized with `INIT_WORK` in place by
/// [`Work::new`] and has not moved since (`Work` is `!Unpin` and only
/// exists pinned).
#[repr(transparent)]
pub(crate) struct Work(UnsafeCell<sys::work_struct>, PhantomPinned);

// SAFETY: the `work_struct` is only touched by the workqueue code, under its
// own synchronization; Rust only takes its address.
unsafe impl Send for Work {}
// SAFETY: as above.
unsafe impl Sync for Work {}

impl Work {
    /// A work item that runs `f`.
    pub(crate) fn new(f: WorkFn) -> impl PinInit<Self> {
        // SAFETY: the closure initializes the whole slot (zeroed, which is
        // a valid `work_struct`, then `INIT_WORK`) and never fails; the
        // slot does not move afterwards (`Work: !Unpin`).
        unsafe {
            pin_init::pin_init_from_closure(move |slot: *mut Self| {
                slot.write(Work(UnsafeCell::new(core::mem::zeroed()), PhantomPinned));
                sys::rroce_helper_init_work((*slot).0.get(), Some(f));
                Ok(())
            })
        }
    }

    fn raw(&self) -> *mut sys::work_struct {
        self.0.get()
    }

    /// Queues the item on the high-priority system workqueue; false if it
    /// was already queued.
    pub(crate) fn queue(&self) -> bool {
        // SAFETY: initialized and pinned (type invariant).
        unsafe { sys::rroce_helper_queue_work(self.raw()) }
    }

    /// Queues the item on the CPU that completion vector `vector` names.
    pub(crate) fn queue_on_vector(&self, vector: u32) -> bool {
        // SAFETY: initialized and pinned (type invariant).
        unsafe { sys::rroce_helper_queue_work_on_vector(vector, self.raw()) }
    }

    /// Waits for a queued or running instance to finish. Not from the
    /// work function itself.
    pub(crate) fn flush(&self) -> bool {
        // SAFETY: initialized and pinned (type invariant).
        unsafe { sys::rroce_helper_flush_work(self.raw()) }
    }

    /// Cancels a queued instance and waits for a running one. Not from
    /// the work function itself.
    pub(crate) fn cancel_sync(&self) -> bool {
        // SAFETY: initialized and pinned (type invariant).
        unsafe { sys::rroce_helper_cancel_work_sync(self.raw()) }
    }
}

/// The `T` whose [`Work`] field at byte `offset` is `work` (the kernel's
/// `container_of`).
///
/// # Safety
///
/// `work` is the `Work` at byte `offset` (`offset_of!(T, field)`) of a `T`
/// that stays alive for `'a`.
pub(crate) unsafe fn owner<'a, T>(work: *mut sys::work_struct, offset: usize) -> &'a T {
    // SAFETY: per the caller, `work - offset` is a live `T` (`Work` is
    // `repr(transparent)` over the `work_struct`).
    unsafe { &*work.byte_sub(offset).cast::<T>() }
}
