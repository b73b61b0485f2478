// SPDX-License-Identifier: GPL-2.0

//! The memory behind an MR, as safe types: [`Umem`], a user range pinned
//! with `ib_umem_get` and released on drop, and [`KernelMem`], all of
//! kernel memory as a kernel consumer's DMA MR exposes it. Both copy to
//! and from byte slices; `crate::mr` checks keys, rights and bounds first.

use kernel::{error::to_result, ffi::c_int, prelude::*};

use super::{is_err_ptr, sys};

/// A copy reached past the end of the memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct OutOfBounds;

/// A pinned user memory range (`struct ib_umem`), with its pages listed.
///
/// # Invariants
///
/// `umem` is a pinned umem owned by this value (released on drop);
/// `pages` lists its pages in order and `page_off` is the offset of the
/// range's start in the first page.
pub(crate) struct Umem {
    umem: core::ptr::NonNull<sys::ib_umem>,
    pages: KVVec<*mut sys::page>,
    page_off: usize,
}

// SAFETY: the umem is owned and its pages are pinned: they may be copied
// to and from in any context, from any CPU.
unsafe impl Send for Umem {}
// SAFETY: as above; copies take `&self` and touch only the pinned pages.
unsafe impl Sync for Umem {}

impl Umem {
    /// Pins `[start, start + length)` of the calling process with `access`
    /// (`ib_umem_get`) and lists its pages.
    ///
    /// # Safety
    ///
    /// `device` is a live RDMA device; process context.
    pub(crate) unsafe fn pin(
        device: *mut sys::ib_device,
        start: u64,
        length: usize,
        access: u32,
    ) -> Result<Self> {
        // SAFETY: `device` is live (caller); `ib_umem_get_va` (spelled out,
        // as it is a static inline) validates the user range itself and
        // pins it.
        let umem = unsafe {
            sys::ib_umem_get_attr_or_va(
                device,
                core::ptr::null(),
                0,
                start,
                length,
                access as c_int,
            )
        };
        if is_err_ptr(umem) {
            return Err(Error::from_errno(umem as isize as c_int));
        }
        let umem = core::ptr::NonNull::new(umem).ok_or(EINVAL)?;
        // INVARIANT: pinned above and owned here; released by `Drop` from
        // now on, also if listing the pages fails.
        let mut this = Self {
            umem,
            pages: KVVec::new(),
            page_off: 0,
        };
        // SAFETY: `umem` is pinned and ours.
        let n = unsafe { sys::rroce_helper_umem_num_pages(umem.as_ptr()) } as usize;
        // SAFETY: as above.
        this.page_off = unsafe { sys::rroce_helper_umem_offset(umem.as_ptr()) } as usize;
        this.pages.reserve(n, GFP_KERNEL).map_err(|_| ENOMEM)?;
        // SAFETY: room for `n` pointers; the helper writes at most `n` and
        // returns how many.
        unsafe {
            let got = sys::rroce_helper_umem_pages(
                umem.as_ptr(),
                this.pages.as_mut_ptr(),
                n as kernel::ffi::c_ulong,
            ) as usize;
            this.pages.inc_len(got.min(n));
        }
        Ok(this)
    }

    /// Copies between `buf` and the range at byte `start`; stops with
    /// [`OutOfBounds`] at the first page past the range.
    fn copy(
        &self,
        start: usize,
        buf: *mut u8,
        len: usize,
        to_mem: bool,
    ) -> Result<(), OutOfBounds> {
        let mut done = 0usize;
        self.for_each_page(start, len, |page, off, n| {
            // SAFETY: `page` is pinned by the umem (type invariant); `off +
            // n` stays in the page; `buf + done` has `n` bytes (caller:
            // the pieces add up to `len`).
            unsafe { sys::rroce_helper_page_copy(page, off, buf.add(done).cast(), n, to_mem) };
            done += n as usize;
            true
        })
    }

    /// Calls `f` with the page, the offset in it and the length of each
    /// page's part of the `len` bytes at byte `start`, in order; stops with
    /// [`OutOfBounds`] at the first page past the range or when `f` says
    /// `false`. The pages stay pinned as long as `self` lives.
    pub(crate) fn for_each_page(
        &self,
        start: usize,
        len: usize,
        mut f: impl FnMut(*mut sys::page, u32, u32) -> bool,
    ) -> Result<(), OutOfBounds> {
        let mut pos = start.checked_add(self.page_off).ok_or(OutOfBounds)?;
        let mut done = 0usize;
        const PAGE: usize = kernel::page::PAGE_SIZE;
        while done < len {
            let page = *self.pages.get(pos / PAGE).ok_or(OutOfBounds)?;
            let off = pos % PAGE;
            let n = (PAGE - off).min(len - done);
            // No truncation: both are below `PAGE_SIZE`.
            if !f(page, off as u32, n as u32) {
                return Err(OutOfBounds);
            }
            done += n;
            pos += n;
        }
        Ok(())
    }

    /// Copies `data` into the range at byte `start`.
    pub(crate) fn write(&self, start: usize, data: &[u8]) -> Result<(), OutOfBounds> {
        // `copy` only reads `buf` when copying into the pages.
        self.copy(start, data.as_ptr().cast_mut(), data.len(), true)
    }

    /// Fills `buf` from the range at byte `start`.
    pub(crate) fn read(&self, start: usize, buf: &mut [u8]) -> Result<(), OutOfBounds> {
        self.copy(start, buf.as_mut_ptr(), buf.len(), false)
    }
}

impl Drop for Umem {
    fn drop(&mut self) {
        // SAFETY: pinned and owned by `self` (type invariant), released once.
        unsafe { sys::ib_umem_release(self.umem.as_ptr()) };
    }
}

/// All of kernel memory, addressed by kernel virtual address, as a kernel
/// consumer's DMA MR exposes it (rroce registers its devices without a DMA
/// device, so the core's DMA mapping of a kernel buffer is its virtual
/// address).
///
/// # Invariants
///
/// Only made for an MR of a kernel consumer (DMA or fast registration), on
/// a kernel PD that no user QP shares; that consumer vouches for every
/// range it posts in SGEs, maps onto a fast-registration MR, or hands out
/// with the global rkey it asked for.
pub(crate) struct KernelMem(());

impl KernelMem {
    /// The memory of a kernel consumer's DMA or fast-registration MR.
    ///
    /// # Safety
    ///
    /// Only for an MR of a kernel consumer (`get_dma_mr`, `alloc_mr`),
    /// whose PD no user QP shares.
    pub(crate) unsafe fn new() -> Self {
        // INVARIANT: per the caller.
        Self(())
    }

    /// Copies between `buf` and kernel memory at `va`. The consumer
    /// vouches for its ranges, but a peer names `va` too (through the
    /// PD's global rkey): an address that is not mapped kernel memory is
    /// refused, never faulted on.
    fn copy(&self, va: u64, buf: *mut u8, len: usize, to_mem: bool) -> Result<(), OutOfBounds> {
        let addr = kernel::ffi::c_ulong::try_from(va).map_err(|_| OutOfBounds)?;
        // SAFETY: `buf` has `len` bytes (caller); the kernel address is
        // accessed without faulting (`copy_{to,from}_kernel_nofault`), and
        // the consumer owning the MR vouches for what it names (type
        // invariant).
        let r = unsafe { sys::rroce_helper_copy_kernel_nofault(buf.cast(), addr, len, to_mem) };
        if r != 0 {
            return Err(OutOfBounds);
        }
        Ok(())
    }

    /// Copies `data` to kernel memory at `va`.
    pub(crate) fn write(&self, va: u64, data: &[u8]) -> Result<(), OutOfBounds> {
        // `copy` only reads `buf` when copying to memory.
        self.copy(va, data.as_ptr().cast_mut(), data.len(), true)
    }

    /// Fills `buf` from kernel memory at `va`.
    pub(crate) fn read(&self, va: u64, buf: &mut [u8]) -> Result<(), OutOfBounds> {
        self.copy(va, buf.as_mut_ptr(), buf.len(), false)
    }
}

/// Why a copy to or from ODP memory did not happen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OdpError {
    /// A page is not mapped (for writing) right now: fault it in
    /// ([`OdpMem::fault`]) and try again.
    Absent,
    /// Outside the range.
    Bounds,
}

/// A user memory range registered for on-demand paging (`ib_umem_odp`):
/// its pages are the process's, faulted in on demand and taken away by
/// the kernel at any time (the helper's MMU interval notifier).
///
/// # Invariants
///
/// `odp` was made by `rroce_helper_odp_get` for the range starting at user
/// address `start` and is released once, on drop.
pub(crate) struct OdpMem {
    odp: core::ptr::NonNull<sys::rroce_odp>,
    start: u64,
}

// SAFETY: the helper's copies and faults synchronize with its notifier
// (its own lock and the core's umem mutex); the handle is just an address.
unsafe impl Send for OdpMem {}
// SAFETY: as above.
unsafe impl Sync for OdpMem {}

impl OdpMem {
    /// Registers `[start, start + length)` of the calling process for
    /// on-demand paging with `access`, publishing the pages already there.
    ///
    /// # Safety
    ///
    /// `device` is a live RDMA device; process context (the calling
    /// process's memory is registered).
    pub(crate) unsafe fn get(
        device: *mut sys::ib_device,
        start: u64,
        length: usize,
        access: u32,
    ) -> Result<Self> {
        let start_ul = kernel::ffi::c_ulong::try_from(start).map_err(|_| EINVAL)?;
        // SAFETY: per the caller.
        let odp = unsafe { sys::rroce_helper_odp_get(device, start_ul, length, access as c_int) };
        if is_err_ptr(odp) {
            return Err(Error::from_errno(odp as isize as c_int));
        }
        let odp = core::ptr::NonNull::new(odp).ok_or(ENOMEM)?;
        // INVARIANT: made here for `start`, released on drop.
        Ok(Self { odp, start })
    }

    /// Copies between `buf` and the range at byte `off`, if its pages are
    /// there; any context.
    fn copy(&self, off: usize, buf: *mut u8, len: usize, to_mem: bool) -> Result<(), OdpError> {
        let addr = self.start.checked_add(off as u64).ok_or(OdpError::Bounds)?;
        // SAFETY: live (type invariant); `buf` has `len` bytes (callers).
        let r =
            unsafe { sys::rroce_helper_odp_copy(self.odp.as_ptr(), addr, buf.cast(), len, to_mem) };
        match r {
            0 => Ok(()),
            r if r == EAGAIN.to_errno() => Err(OdpError::Absent),
            _ => Err(OdpError::Bounds),
        }
    }

    /// Copies `data` into the range at byte `off`.
    pub(crate) fn write(&self, off: usize, data: &[u8]) -> Result<(), OdpError> {
        // `copy` only reads `data` when copying into the memory.
        self.copy(off, data.as_ptr().cast_mut(), data.len(), true)
    }

    /// Fills `buf` from the range at byte `off`.
    pub(crate) fn read(&self, off: usize, buf: &mut [u8]) -> Result<(), OdpError> {
        self.copy(off, buf.as_mut_ptr(), buf.len(), false)
    }

    /// Faults `[off, off + len)` in (for writing with `write`) and
    /// publishes it for copies. Process context: it sleeps.
    pub(crate) fn fault(&self, off: u64, len: u64, write: bool) -> Result {
        let addr = self.start.checked_add(off).ok_or(EINVAL)?;
        // SAFETY: live (type invariant); process context (caller).
        to_result(unsafe { sys::rroce_helper_odp_fault(self.odp.as_ptr(), addr, len, write) })
    }
}

impl Drop for OdpMem {
    fn drop(&mut self) {
        // SAFETY: made by the helper (type invariant), released once.
        unsafe { sys::rroce_helper_odp_release(self.odp.as_ptr()) };
    }
}
