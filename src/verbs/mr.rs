// SPDX-License-Identifier: GPL-2.0

//! The MR verbs: DMA MRs, user MRs and deregistration (`crate::mr` holds
//! the MR itself).

use kernel::{ffi::c_int, prelude::*};

use super::to_ptr;
use crate::{
    dev::RroceDev,
    mr::{check_access, new_mr, Memory, RroceMr},
    rdma::{
        mem::{KernelMem, Umem},
        sys,
    },
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
    // SAFETY: the ops contract: a live PD of one of our devices.
    let dev = unsafe { RroceDev::from_ib((*pd).device) };
    // SAFETY: only kernel consumers get DMA MRs (uverbs has no
    // `get_dma_mr`), on kernel PDs that no user QP shares.
    let mem = Memory::Kernel(unsafe { KernelMem::new() });
    let mr_type = sys::ib_mr_type_IB_MR_TYPE_DMA;
    to_ptr(new_mr(dev, pd, access, mem, (0, u64::MAX), mr_type))
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
    // SAFETY: the ops contract: `pd` is a live PD of one of our devices;
    // a user verb runs in process context.
    let (dev, umem) = unsafe {
        let device = (*pd).device;
        (
            RroceDev::from_ib(device),
            Umem::pin(device, start, length as usize, access),
        )
    };
    let umem = match umem {
        Ok(u) => u,
        Err(e) => return e.to_ptr(),
    };
    // On failure `new_mr` drops the umem, which releases it.
    let mr_type = sys::ib_mr_type_IB_MR_TYPE_USER;
    to_ptr(new_mr(
        dev,
        pd,
        access,
        Memory::User(umem),
        (iova, length),
        mr_type,
    ))
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
    // process context. Every MR the core hands back was made by `new_mr`
    // (`RroceMr`'s invariant), and the core calls this once; it belongs to
    // one of our devices.
    let (mr, dev) = unsafe {
        let mr = KBox::from_raw(ibmr.cast::<RroceMr>());
        let dev = RroceDev::from_ib(mr.ibmr().device);
        (mr, dev)
    };
    RroceMr::dereg(mr, dev);
    0
}
