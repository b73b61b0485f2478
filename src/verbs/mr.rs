// SPDX-License-Identifier: GPL-2.0

//! The MR verbs: DMA MRs, user MRs, fast-registration MRs and their
//! mapping, and deregistration (`crate::mr` holds the MR itself).

use kernel::{
    ffi::{c_int, c_uint},
    prelude::*,
};

use super::to_ptr;
use crate::{
    dev::RroceDev,
    engine::fastreg,
    mr::{check_access, new_mr, FastMr, Memory, RroceMr},
    rdma::{
        mem::{KernelMem, OdpMem, Umem},
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
    let Ok(len) = usize::try_from(length) else {
        return EINVAL.to_ptr();
    };
    // SAFETY: the ops contract: `pd` is a live PD of one of our devices;
    // a user verb runs in process context (the caller's memory).
    let (dev, mem) = unsafe {
        let device = (*pd).device;
        let mem = if access & sys::ib_access_flags_IB_ACCESS_ON_DEMAND != 0 {
            // Not pinned: faulted in as the transport needs it.
            OdpMem::get(device, start, len, access).map(Memory::Odp)
        } else {
            Umem::pin(device, start, len, access).map(Memory::User)
        };
        (RroceDev::from_ib(device), mem)
    };
    let mem = match mem {
        Ok(m) => m,
        Err(e) => return e.to_ptr(),
    };
    // On failure `new_mr` drops the memory, which releases it.
    let mr_type = sys::ib_mr_type_IB_MR_TYPE_USER;
    to_ptr(new_mr(dev, pd, access, mem, (iova, length), mr_type))
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
    // SAFETY: the ops contract: one of our MRs (an `RroceMr`, its
    // invariant), live until this returns success.
    if let Err(e) = unsafe { &*ibmr.cast::<RroceMr>() }.begin_dereg() {
        // A memory window is bound to it: the MR stays.
        return e.to_errno();
    }
    // SAFETY: the ops contract: one of our MRs, after its last use, in
    // process context. Every MR the core hands back was made by `new_mr`
    // (`RroceMr`'s invariant), and the core calls this once it succeeds;
    // it belongs to one of our devices.
    let (mr, dev) = unsafe {
        let mr = KBox::from_raw(ibmr.cast::<RroceMr>());
        let dev = RroceDev::from_ib(mr.ib_device());
        (mr, dev)
    };
    RroceMr::dereg(mr, dev);
    0
}

/// The `alloc_mr` op: an empty fast-registration MR for up to `max_num_sg`
/// pages (kernel consumers only; uverbs has no such verb).
///
/// # Safety
///
/// The [ops contract](super).
pub(super) unsafe extern "C" fn alloc_mr(
    pd: *mut sys::ib_pd,
    mr_type: sys::ib_mr_type,
    max_num_sg: u32,
) -> *mut sys::ib_mr {
    if mr_type != sys::ib_mr_type_IB_MR_TYPE_MEM_REG {
        return EINVAL.to_ptr();
    }
    if max_num_sg == 0 || max_num_sg > fastreg::MAX_PAGE_LIST {
        return EINVAL.to_ptr();
    }
    // SAFETY: the ops contract: a live PD of one of our devices.
    let dev = unsafe { RroceDev::from_ib((*pd).device) };
    let fast = match FastMr::new(max_num_sg) {
        Ok(f) => f,
        Err(e) => return e.to_ptr(),
    };
    // No access until REG_MR gives it some.
    to_ptr(new_mr(dev, pd, 0, Memory::Fast(fast), (0, 0), mr_type))
}

/// The `map_mr_sg` op: the pages of `sg` become the MR's page list, in
/// pages of the `page_size` `ib_map_mr_sg` set; returns how many entries
/// of `sg` were mapped (or an errno).
///
/// # Safety
///
/// The [ops contract](super); `sg` has `sg_nents` DMA-mapped entries and
/// `sg_offset` is null or valid (`ib_map_mr_sg`'s contract).
pub(super) unsafe extern "C" fn map_mr_sg(
    ibmr: *mut sys::ib_mr,
    sg: *mut sys::scatterlist,
    sg_nents: c_int,
    sg_offset: *mut c_uint,
) -> c_int {
    // SAFETY: the ops contract: one of our MRs (`RroceMr`'s invariant),
    // alive for the call.
    let mr = unsafe { &*ibmr.cast::<RroceMr>() };
    let Some(fast) = mr.fast() else {
        return EINVAL.to_errno();
    };
    // SAFETY: `ib_map_mr_sg` set `page_size` just before calling us, in
    // this thread; nobody else writes it.
    let page_size = unsafe { (*ibmr).page_size };
    let Some(shift) = fastreg::page_shift(page_size) else {
        return EINVAL.to_errno();
    };
    fast.map_begin(shift);
    // SAFETY: the arguments are the caller's (see `# Safety`);
    // `set_page` is called back in this thread for this MR.
    let n = unsafe { sys::ib_sg_to_pages(ibmr, sg, sg_nents, sg_offset, Some(set_page)) };
    // SAFETY: `ib_sg_to_pages` set `iova` and `length`, in this thread.
    let (iova, length) = unsafe { ((*ibmr).iova, (*ibmr).length) };
    fast.map_end(iova, length);
    n
}

/// `ib_sg_to_pages`' callback: one more page of the mapping at the
/// (virtual) DMA address `addr`.
///
/// # Safety
///
/// Called by `ib_sg_to_pages` from [`map_mr_sg`] with its MR.
unsafe extern "C" fn set_page(ibmr: *mut sys::ib_mr, addr: u64) -> c_int {
    // SAFETY: per the caller, one of our MRs, alive for the call.
    let mr = unsafe { &*ibmr.cast::<RroceMr>() };
    match mr.fast() {
        Some(f) => super::to_c(f.map_page(addr)),
        None => EINVAL.to_errno(),
    }
}

/// The `alloc_mw` op: a type 1 or type 2 memory window on the PD the core
/// set in `ibmw`.
///
/// # Safety
///
/// The [ops contract](super).
pub(super) unsafe extern "C" fn alloc_mw(
    ibmw: *mut sys::ib_mw,
    _udata: *mut sys::ib_udata,
) -> c_int {
    // SAFETY: the ops contract: the core's new window of our device
    // (`size_ib_mw` bytes), not yet visible to anyone.
    super::to_c(unsafe { crate::mw::alloc(ibmw) })
}

/// The `dealloc_mw` op.
///
/// # Safety
///
/// The [ops contract](super).
pub(super) unsafe extern "C" fn dealloc_mw(ibmw: *mut sys::ib_mw) -> c_int {
    // SAFETY: the ops contract: a window `alloc_mw` set up, after its last
    // use, once, in process context.
    unsafe { crate::mw::dealloc(ibmw) };
    0
}
