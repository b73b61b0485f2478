// SPDX-License-Identifier: GPL-2.0

//! The MR verbs: DMA MRs, user MRs and deregistration (`crate::mr` holds
//! the MR itself).

use kernel::{ffi::c_int, prelude::*};

use super::to_ptr;
use crate::{
    mr::{check_access, dereg, new_mr},
    rdma::{is_err_ptr, sys},
};

/// The `get_dma_mr` op.
///
/// # Safety
///
/// The [ops contract](super).
pub(super) unsafe extern "C" fn get_dma_mr(pd: *mut sys::ib_pd, access: c_int) -> *mut sys::ib_mr {
    let access = access as u32;
    if let Err(e) = check_access(access) {
        return e.to_ptr();
    }
    // SAFETY: the ops contract: a live PD of ours.
    to_ptr(unsafe {
        new_mr(
            pd,
            access,
            core::ptr::null_mut(),
            0,
            u64::MAX,
            sys::ib_mr_type_IB_MR_TYPE_DMA,
        )
    })
}

/// The `reg_user_mr` op: pins `[start, start + length)` of the caller.
///
/// # Safety
///
/// The [ops contract](super).
pub(super) unsafe extern "C" fn reg_user_mr(
    pd: *mut sys::ib_pd,
    start: u64,
    length: u64,
    iova: u64,
    access: c_int,
    dmah: *mut sys::ib_dmah,
    _udata: *mut sys::ib_udata,
) -> *mut sys::ib_mr {
    let access = access as u32;
    if !dmah.is_null() {
        return EOPNOTSUPP.to_ptr();
    }
    if let Err(e) = check_access(access) {
        return e.to_ptr();
    }
    if length == 0 || start.checked_add(length).is_none() || iova.checked_add(length).is_none() {
        return EINVAL.to_ptr();
    }
    // SAFETY: the ops contract: `pd` is a live PD of ours; `ib_umem_get_va`
    // (spelled out, as it is a static inline) validates the user range
    // itself and pins it.
    let umem = unsafe {
        sys::ib_umem_get_attr_or_va(
            (*pd).device,
            core::ptr::null(),
            0,
            start,
            length as usize,
            access as c_int,
        )
    };
    if is_err_ptr(umem) {
        return umem.cast();
    }
    // SAFETY: as above; the umem's ownership passes to the MR.
    let mr = unsafe {
        new_mr(
            pd,
            access,
            umem,
            iova,
            length,
            sys::ib_mr_type_IB_MR_TYPE_USER,
        )
    };
    if mr.is_err() {
        // SAFETY: pinned above and not handed to anyone.
        unsafe { sys::ib_umem_release(umem) };
    }
    to_ptr(mr)
}

/// The `dereg_mr` op.
///
/// # Safety
///
/// The [ops contract](super).
pub(super) unsafe extern "C" fn dereg_mr(
    ibmr: *mut sys::ib_mr,
    _udata: *mut sys::ib_udata,
) -> c_int {
    // SAFETY: the ops contract: one of our MRs, after its last use, in
    // process context.
    unsafe { dereg(ibmr) };
    0
}
