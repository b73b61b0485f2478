// SPDX-License-Identifier: GPL-2.0

//! Memory regions.
//!
//! A DMA MR covers all of kernel memory (kernel consumers' SGEs carry kernel
//! virtual addresses, since rroce registers with no DMA device). A user MR
//! pins the user's pages with `ib_umem_get` so the transport can reach them
//! from any context. Keys are `index << 8 | key byte`, as in rxe; the
//! access flags are recorded here and enforced by the transport.
//!
//! The MR verbs are in `crate::verbs::mr`.

use core::sync::atomic::{AtomicU32, Ordering};

use kernel::prelude::*;

use crate::{abi, dev::RroceDev, rdma::sys};

/// The access flags an MR may carry (`IB_ACCESS_*` that rroce implements).
const SUPPORTED_ACCESS: u32 = sys::ib_access_flags_IB_ACCESS_LOCAL_WRITE
    | sys::ib_access_flags_IB_ACCESS_REMOTE_WRITE
    | sys::ib_access_flags_IB_ACCESS_REMOTE_READ
    | sys::ib_access_flags_IB_ACCESS_REMOTE_ATOMIC
    | sys::ib_access_flags_IB_ACCESS_MW_BIND
    | sys::ib_access_flags_IB_ACCESS_RELAXED_ORDERING;

/// Validates MR access flags: no unknown bits, and remote write or atomic
/// access only together with local write (IBTA o10-36.2.1).
pub(crate) fn check_access(access: u32) -> Result {
    if access & !SUPPORTED_ACCESS != 0 {
        return Err(EINVAL);
    }
    let remote_modify =
        sys::ib_access_flags_IB_ACCESS_REMOTE_WRITE | sys::ib_access_flags_IB_ACCESS_REMOTE_ATOMIC;
    if access & remote_modify != 0 && access & sys::ib_access_flags_IB_ACCESS_LOCAL_WRITE == 0 {
        return Err(EINVAL);
    }
    Ok(())
}

/// rroce's MR, allocated by rroce (the core does not allocate MRs).
///
/// # Invariants
///
/// `ibmr` is first, so the core's `*mut ib_mr` for an rroce MR is a
/// `*mut RroceMr` allocated by [`new_mr`] with `KBox`. `umem` is null for a
/// DMA MR, else a pinned umem owned by this MR.
/// `pages` lists the umem's pages in order (empty for a DMA MR);
/// `page_off` is the offset of `iova` in the first page.
#[repr(C)]
pub(crate) struct RroceMr {
    ibmr: sys::ib_mr,
    umem: *mut sys::ib_umem,
    index: u32,
    access: u32,
    pages: KVVec<*mut sys::page>,
    page_off: usize,
}

// SAFETY: the MR is immutable after creation; its pages are pinned and may
// be copied to and from in any context.
unsafe impl Sync for RroceMr {}
// SAFETY: as above.
unsafe impl Send for RroceMr {}

/// Why a memory access through an MR was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AccessError {
    /// Unknown key, other PD, or missing access right.
    Key,
    /// Outside the MR.
    Bounds,
}

impl RroceMr {
    /// Checks that `[va, va + len)` lies in the MR, on `pd`, with every
    /// `need` access flag.
    pub(crate) fn check(
        &self,
        pd: *mut sys::ib_pd,
        va: u64,
        len: u64,
        need: u32,
    ) -> Result<(), AccessError> {
        if self.ibmr.pd != pd || self.access & need != need {
            return Err(AccessError::Key);
        }
        let end = va.checked_add(len).ok_or(AccessError::Bounds)?;
        let mr_end = self
            .ibmr
            .iova
            .checked_add(self.ibmr.length)
            .ok_or(AccessError::Bounds)?;
        if va < self.ibmr.iova || end > mr_end {
            return Err(AccessError::Bounds);
        }
        Ok(())
    }

    /// Copies between `buf` and the MR at `va` (checked with [`Self::check`]
    /// by the caller; re-checked against the page list here).
    fn copy(&self, va: u64, buf: *mut u8, len: usize, to_mr: bool) -> Result<(), AccessError> {
        if self.umem.is_null() {
            // A DMA MR: `va` is a kernel virtual address (rroce registers
            // its devices without a DMA device, so the core's DMA mapping
            // of a kernel buffer is its virtual address). Only kernel
            // consumers get DMA MRs, on kernel PDs that no user QP shares
            // (`check` matched the PD); remote access to one exists only
            // with the unsafe global rkey the consumer asked for.
            let p = usize::try_from(va).map_err(|_| AccessError::Bounds)? as *mut u8;
            // SAFETY: the kernel consumer owning the MR vouches for
            // `[va, va + len)`; `buf` has `len` bytes (caller).
            unsafe {
                if to_mr {
                    core::ptr::copy(buf, p, len);
                } else {
                    core::ptr::copy(p, buf, len);
                }
            }
            return Ok(());
        }
        let start = va.checked_sub(self.ibmr.iova).ok_or(AccessError::Bounds)?;
        let mut pos = usize::try_from(start).map_err(|_| AccessError::Bounds)? + self.page_off;
        let mut done = 0usize;
        const PAGE: usize = kernel::page::PAGE_SIZE;
        while done < len {
            let page = *self.pages.get(pos / PAGE).ok_or(AccessError::Bounds)?;
            let off = pos % PAGE;
            let n = (PAGE - off).min(len - done);
            // SAFETY: `page` is pinned by the MR's umem; `off + n` stays in
            // the page; `buf + done` has `n` bytes (caller).
            unsafe {
                sys::rroce_helper_page_copy(page, off as u32, buf.add(done).cast(), n as u32, to_mr)
            };
            done += n;
            pos += n;
        }
        Ok(())
    }

    /// Copies `data` into the MR at `va`.
    pub(crate) fn write(&self, va: u64, data: &[u8]) -> Result<(), AccessError> {
        self.copy(va, data.as_ptr().cast_mut(), data.len(), true)
    }

    /// Fills `buf` from the MR at `va`.
    pub(crate) fn read(&self, va: u64, buf: &mut [u8]) -> Result<(), AccessError> {
        self.copy(va, buf.as_mut_ptr(), buf.len(), false)
    }
}

/// The MR with `key` on `dev`, valid while `guard` is held.
pub(crate) fn lookup<'g>(
    dev: &RroceDev,
    key: u32,
    guard: &'g kernel::sync::rcu::Guard,
) -> Option<&'g RroceMr> {
    let mr = dev.mrs.get((key >> 8) as usize, guard)?;
    (mr.ibmr.lkey == key).then_some(mr)
}

/// Why gathering or scattering through a WQE's SGEs failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SgeError {
    /// An SGE is unreadable, or its key, PD, range or rights are wrong.
    Prot,
    /// The SGEs hold fewer bytes than the message.
    Len,
}

/// The scatter/gather list of a WQE, in a kernel copy of the WQE.
#[derive(Clone, Copy)]
pub(crate) struct SgeList<'a> {
    /// The WQE.
    pub(crate) elem: &'a [u8],
    /// Decodes SGE `i` of a WQE (`abi::SendWqe::sge`, `abi::RecvWqe::sge`).
    pub(crate) sge_at: fn(&[u8], usize) -> Option<abi::Sge>,
    /// SGEs the WQE says it has.
    pub(crate) num_sge: u32,
}

/// Walks `sges`, calling `f` for each piece of the message bytes
/// `[off, off + len)` with (MR, va, range in the caller's buffer), after
/// checking the piece against its MR: on `pd`, in bounds, with the `need`
/// access rights. The MRs are those of `dev`, valid while `guard` is held.
pub(crate) fn walk_sges(
    dev: &RroceDev,
    guard: &kernel::sync::rcu::Guard,
    pd: *mut sys::ib_pd,
    sges: SgeList<'_>,
    (mut off, len): (u32, u32),
    need: u32,
    mut f: impl FnMut(&RroceMr, u64, core::ops::Range<usize>) -> Result<(), AccessError>,
) -> Result<(), SgeError> {
    let mut done = 0u32;
    for i in 0..sges.num_sge as usize {
        if done == len {
            break;
        }
        let sge = (sges.sge_at)(sges.elem, i).ok_or(SgeError::Prot)?;
        if off >= sge.length {
            off -= sge.length;
            continue;
        }
        let n = (sge.length - off).min(len - done);
        let mr = lookup(dev, sge.lkey, guard).ok_or(SgeError::Prot)?;
        let va = sge.addr.checked_add(u64::from(off)).ok_or(SgeError::Prot)?;
        mr.check(pd, va, u64::from(n), need)
            .map_err(|_| SgeError::Prot)?;
        f(mr, va, done as usize..(done + n) as usize).map_err(|_| SgeError::Prot)?;
        done += n;
        off = 0;
    }
    if done == len {
        Ok(())
    } else {
        Err(SgeError::Len)
    }
}

static KEY_SALT: AtomicU32 = AtomicU32::new(0);

/// Allocates an MR on `pd`; returns a pointer for the core or an error.
///
/// # Safety
///
/// `pd` is a live PD of an rroce device; `umem` is null or a pinned umem
/// whose ownership passes to the MR.
pub(crate) unsafe fn new_mr(
    pd: *mut sys::ib_pd,
    access: u32,
    umem: *mut sys::ib_umem,
    iova: u64,
    length: u64,
    mr_type: sys::ib_mr_type,
) -> Result<*mut sys::ib_mr> {
    // SAFETY: `pd` is live and belongs to one of our devices.
    let dev = unsafe { RroceDev::from_ib((*pd).device) };
    let index = dev.mr_ids.alloc().map_err(|_| ENOMEM)?;
    // A key byte that changes between registrations of the same index.
    let key = (index << 8) | (KEY_SALT.fetch_add(1, Ordering::Relaxed) & 0xff);
    // SAFETY: an all-zero `ib_mr` is valid; the core fills its bookkeeping.
    let mut ibmr: sys::ib_mr = unsafe { core::mem::zeroed() };
    ibmr.lkey = key;
    ibmr.rkey = key;
    ibmr.iova = iova;
    ibmr.length = length;
    ibmr.type_ = mr_type;
    ibmr.pd = pd;
    let mut pages = KVVec::new();
    let mut page_off = 0;
    if !umem.is_null() {
        // SAFETY: `umem` is pinned and ours.
        let n = unsafe { sys::rroce_helper_umem_num_pages(umem) } as usize;
        // SAFETY: as above.
        page_off = unsafe { sys::rroce_helper_umem_offset(umem) } as usize;
        let filled = pages.reserve(n, GFP_KERNEL).map(|()| {
            // SAFETY: room for `n` pointers; the helper writes at most
            // `n` and returns how many.
            unsafe {
                let got = sys::rroce_helper_umem_pages(
                    umem,
                    pages.as_mut_ptr(),
                    n as kernel::ffi::c_ulong,
                ) as usize;
                pages.inc_len(got.min(n));
            }
        });
        if filled.is_err() {
            let _ = dev.mr_ids.free(index);
            return Err(ENOMEM);
        }
    }
    let mr = match KBox::new(
        RroceMr {
            ibmr,
            umem,
            index,
            access,
            pages,
            page_off,
        },
        GFP_KERNEL,
    ) {
        Ok(b) => b,
        Err(e) => {
            // The index was never published.
            let _ = dev.mr_ids.free(index);
            return Err(e.into());
        }
    };
    // INVARIANT: `ibmr` is first and the box is leaked to the core until
    // `dereg_mr`.
    let raw = KBox::into_raw(mr);
    // Published for the transport; cleared (with a grace period) in
    // `dereg_mr` before the MR is freed.
    let _ = dev.mrs.set(index as usize, raw);
    Ok(raw.cast())
}

/// Frees an MR (`dereg_mr`), once the transport can no longer reach it.
///
/// # Safety
///
/// `ibmr` is an rroce MR, after the core's last use of it; process context.
pub(crate) unsafe fn dereg(ibmr: *mut sys::ib_mr) {
    // SAFETY: every MR the core hands back was made by `new_mr` (type
    // invariant); the core calls this once, after its last use.
    let mr = unsafe { KBox::from_raw(ibmr.cast::<RroceMr>()) };
    // SAFETY: the MR belongs to one of our devices.
    let dev = unsafe { RroceDev::from_ib(mr.ibmr.device) };
    // The transport may still hold it inside an RCU read-side section.
    dev.mrs.clear(mr.index as usize);
    kernel::sync::rcu::synchronize_rcu();
    if !mr.umem.is_null() {
        // SAFETY: owned by the MR (type invariant).
        unsafe { sys::ib_umem_release(mr.umem) };
    }
    if dev.mr_ids.free(mr.index).is_err() {
        pr_warn!("MR index {} was not allocated\n", mr.index);
    }
    let _ = mr.access;
}

/// Checks of the pure parts, run by KUnit.
#[cfg(CONFIG_KUNIT)]
pub(crate) mod selftest {
    use super::{check_access, sys};

    /// Access flag validation follows the IBTA rule and rejects unknown bits.
    pub(crate) fn access_rules() -> Result<(), &'static str> {
        let lw = sys::ib_access_flags_IB_ACCESS_LOCAL_WRITE;
        let rw = sys::ib_access_flags_IB_ACCESS_REMOTE_WRITE;
        let rr = sys::ib_access_flags_IB_ACCESS_REMOTE_READ;
        let ra = sys::ib_access_flags_IB_ACCESS_REMOTE_ATOMIC;
        let ok = [0, lw, rr, lw | rw, lw | ra, lw | rw | rr | ra];
        let bad = [rw, ra, rw | rr, 1 << 30];
        if ok.iter().any(|a| check_access(*a).is_err()) {
            return Err("valid access flags rejected");
        }
        if bad.iter().any(|a| check_access(*a).is_ok()) {
            return Err("invalid access flags accepted");
        }
        Ok(())
    }
}
