// SPDX-License-Identifier: GPL-2.0

//! The `mmap` and `mmap_free` verbs, which map and release the queue
//! buffers of `crate::rdma::mmap`.

use kernel::ffi::c_int;

use super::to_c;
use crate::rdma::{mmap, sys};

/// The device's `mmap_free` op: the last reference to an entry is gone.
///
/// # Safety
///
/// The [ops contract](super).
pub(super) unsafe extern "C" fn mmap_free(entry: *mut sys::rdma_user_mmap_entry) {
    // SAFETY: the ops contract: an entry of ours, once.
    unsafe { mmap::free_entry(entry) };
}

/// The device's `mmap` op: maps the queue buffer registered at the VMA's
/// offset.
///
/// # Safety
///
/// The [ops contract](super).
pub(super) unsafe extern "C" fn mmap(
    uctx: *mut sys::ib_ucontext,
    vma: *mut sys::vm_area_struct,
) -> c_int {
    // SAFETY: the ops contract: the caller's live ucontext and new VMA.
    to_c(unsafe { mmap::map(uctx, vma) })
}
