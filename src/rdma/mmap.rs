// SPDX-License-Identifier: GPL-2.0

//! Queue buffers shared with userspace.
//!
//! A [`QueueBuf`] is zeroed, page-aligned `vmalloc_user` memory holding one
//! ring (CQ, SQ, RQ or SRQ). For a user object it is also offered for
//! `mmap` through an `rdma_user_mmap_entry`: the create verb returns the
//! entry's offset and size (the rxe `mminfo`), the provider maps the uverbs
//! file at that offset, and [`map`] (behind the device's `mmap` op) maps the
//! pages.
//!
//! # Lifetime
//!
//! The owning object holds the entry's only lasting reference; destroying
//! the object removes the entry (`rdma_user_mmap_entry_remove`: its offset
//! can no longer be mapped) and the last put calls the device's `mmap_free`
//! op, [`free_entry`], which `vfree`s the buffer. Pages a process still maps
//! are not freed with it: `remap_vmalloc_range` inserts them with
//! `vm_insert_page`, which takes a page reference that only the unmap
//! drops. So a process that keeps a ring mapped after destroying its CQ (or
//! after the device was disassociated under it) maps valid, if unused,
//! memory, and never memory that was reused.
//!
//! The VMA keeps the RDMA core's own `vm_ops` (set before the device's
//! `mmap` op is called, and inert for a VMA without private data), so no
//! mapping refers to rroce's code: the module can be unloaded while a
//! process still maps a ring (see `disassociate_ucontext`).

use core::{
    mem::MaybeUninit,
    ptr::{null_mut, NonNull},
    sync::atomic::AtomicU32,
};

use kernel::prelude::*;

use super::sys;
use crate::engine::ring::{offset, SharedHeader};

/// Page size of the architecture (x86-64).
const PAGE_SIZE: usize = 4096;

/// What the RDMA core tracks for one mappable buffer.
///
/// # Invariants
///
/// `entry` is the first field, so the `rdma_user_mmap_entry` pointers the
/// core hands to [`free_entry`] and that [`map`] gets back are pointers to
/// a `MmapEntry` allocated by [`QueueBuf::new`]. `buf` is `vmalloc_user`
/// memory of `size` bytes, owned by this entry.
#[repr(C)]
struct MmapEntry {
    entry: sys::rdma_user_mmap_entry,
    buf: *mut u8,
    size: usize,
}

/// A ring buffer in kernel memory, possibly mapped by a user process.
///
/// # Invariants
///
/// `ptr` points at `size` bytes of zero-initialized `vmalloc_user` memory
/// that stays valid while `self` lives. If `entry` is non-null the memory
/// belongs to that entry (see the module docs) and `self` holds the entry's
/// initial reference; otherwise `self` owns the memory.
pub(crate) struct QueueBuf {
    ptr: NonNull<u8>,
    size: usize,
    entry: *mut MmapEntry,
}

// SAFETY: the buffer is plain memory; concurrent access to its contents is
// governed by the ring protocol, not by this handle.
unsafe impl Send for QueueBuf {}
// SAFETY: as above; `&QueueBuf` only exposes the address and size.
unsafe impl Sync for QueueBuf {}

/// The ucontext of the process creating an object, for the duration of
/// the verb (`'a`).
///
/// # Invariants
///
/// `ptr` is a live `ib_ucontext` for `'a`.
pub(crate) struct UserCtx<'a> {
    ptr: NonNull<sys::ib_ucontext>,
    _life: core::marker::PhantomData<&'a sys::ib_ucontext>,
}

impl UserCtx<'_> {
    /// The ucontext `uctx`, or `None` for a kernel caller (null).
    ///
    /// # Safety
    ///
    /// `uctx` is null or a live ucontext for the returned lifetime.
    pub(crate) unsafe fn new(uctx: *mut sys::ib_ucontext) -> Option<Self> {
        // INVARIANT: live per the caller.
        NonNull::new(uctx).map(|ptr| Self {
            ptr,
            _life: core::marker::PhantomData,
        })
    }
}

/// Where userspace finds a buffer: the rxe `mminfo`.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct MmapInfo {
    /// Offset to pass to `mmap` on the uverbs file.
    pub(crate) offset: u64,
    /// Size of the mapping in bytes (page-aligned).
    pub(crate) size: u32,
}

impl QueueBuf {
    /// Allocates `len` bytes (rounded up to pages), mappable by the process
    /// owning `uctx` if it is non-null.
    ///
    /// # Safety
    ///
    /// `uctx` is null or the live ucontext of the object being created.
    pub(crate) unsafe fn new(len: usize, uctx: *mut sys::ib_ucontext) -> Result<Self> {
        let size = len
            .checked_next_multiple_of(PAGE_SIZE)
            .filter(|s| *s != 0 && *s <= u32::MAX as usize)
            .ok_or(EINVAL)?;
        // SAFETY: plain allocation.
        let raw =
            unsafe { sys::rroce_helper_vmalloc_user(size as kernel::ffi::c_ulong) }.cast::<u8>();
        let ptr = NonNull::new(raw).ok_or(ENOMEM)?;
        if uctx.is_null() {
            // INVARIANT: kernel-only buffer, owned by `self`.
            return Ok(QueueBuf {
                ptr,
                size,
                entry: null_mut(),
            });
        }
        let boxed = match KBox::new(
            MmapEntry {
                // SAFETY: an all-zero `rdma_user_mmap_entry` is what the core
                // expects before `rdma_user_mmap_entry_insert`.
                entry: unsafe { core::mem::zeroed() },
                buf: raw,
                size,
            },
            GFP_KERNEL,
        ) {
            Ok(b) => b,
            Err(e) => {
                // SAFETY: allocated above, not shared.
                unsafe { sys::rroce_helper_vfree(raw.cast()) };
                return Err(e.into());
            }
        };
        let entry = KBox::into_raw(boxed);
        // SAFETY: `uctx` is live per the caller; `entry` is a valid, zeroed
        // entry whose first field is the core's struct.
        let err = unsafe { sys::rdma_user_mmap_entry_insert(uctx, entry.cast(), size) };
        if err != 0 {
            // SAFETY: not inserted, so still exclusively ours.
            unsafe {
                sys::rroce_helper_vfree(raw.cast());
                drop(KBox::from_raw(entry));
            }
            return Err(Error::from_errno(err));
        }
        // INVARIANT: the entry owns the memory; we hold its first reference.
        Ok(QueueBuf { ptr, size, entry })
    }

    /// [`Self::new`] with the ucontext as a [`UserCtx`] (`None`: a
    /// kernel-only buffer).
    pub(crate) fn alloc(len: usize, uctx: Option<&UserCtx<'_>>) -> Result<Self> {
        let uctx = uctx.map_or(null_mut(), |u| u.ptr.as_ptr());
        // SAFETY: null or live for the call (`UserCtx`'s invariant).
        unsafe { Self::new(len, uctx) }
    }

    /// The `mminfo` userspace needs to map the buffer (zero for kernel-only
    /// buffers).
    pub(crate) fn mmap_info(&self) -> MmapInfo {
        if self.entry.is_null() {
            return MmapInfo::default();
        }
        // SAFETY: the entry is alive while we hold its reference.
        let offset = unsafe { sys::rroce_helper_mmap_offset(self.entry.cast()) };
        MmapInfo {
            offset,
            size: self.size as u32,
        }
    }
}

impl QueueBuf {
    /// The shared 32-bit header word at byte `off` (one of the
    /// [`offset`] constants).
    pub(crate) fn header_word(&self, off: usize) -> &AtomicU32 {
        debug_assert!(off.is_multiple_of(4) && off < offset::DATA);
        // SAFETY: `off` is a 4-byte aligned offset inside the header of the
        // page-aligned buffer, which lives as long as `self`. The process may
        // store to it concurrently, which is just another atomic access.
        unsafe { AtomicU32::from_ptr(self.ptr.as_ptr().add(off).cast()) }
    }

    /// Address of byte `off` of the buffer.
    ///
    /// # Safety
    ///
    /// `off` plus the length the caller accesses is within the buffer.
    pub(crate) unsafe fn at(&self, off: usize) -> *mut u8 {
        // SAFETY: in bounds per the caller.
        unsafe { self.ptr.as_ptr().add(off) }
    }
}

/// A copy reached outside a [`QueueBuf`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct OutOfBounds;

impl QueueBuf {
    /// Checks that `[off, off + len)` lies inside the buffer.
    fn check(&self, off: usize, len: usize) -> Result<(), OutOfBounds> {
        match off.checked_add(len) {
            Some(end) if end <= self.size => Ok(()),
            _ => Err(OutOfBounds),
        }
    }

    /// Copies `data` into the buffer at byte `off`. The process mapping the
    /// buffer may access the bytes concurrently; the ring protocol says
    /// when it may read them.
    pub(crate) fn write_at(&self, off: usize, data: &[u8]) -> Result<(), OutOfBounds> {
        self.check(off, data.len())?;
        // SAFETY: in bounds (checked); `data` cannot overlap the buffer,
        // which no Rust reference covers.
        unsafe { core::ptr::copy_nonoverlapping(data.as_ptr(), self.at(off), data.len()) };
        Ok(())
    }

    /// Copies `len` bytes at `from` in `src` to `to` in this buffer.
    pub(crate) fn copy_from(
        &self,
        to: usize,
        src: &QueueBuf,
        from: usize,
        len: usize,
    ) -> Result<(), OutOfBounds> {
        self.check(to, len)?;
        src.check(from, len)?;
        if core::ptr::eq(self, src) {
            return Err(OutOfBounds);
        }
        // SAFETY: both ranges in bounds (checked), in two distinct buffers
        // (each owns its memory, type invariant).
        unsafe { core::ptr::copy_nonoverlapping(src.at(from), self.at(to), len) };
        Ok(())
    }

    /// Fills `out` with the bytes at `off`; what they mean as a `T` is the
    /// caller's to know.
    pub(crate) fn read_at<T>(
        &self,
        off: usize,
        out: &mut MaybeUninit<T>,
    ) -> Result<(), OutOfBounds> {
        let len = core::mem::size_of::<T>();
        self.check(off, len)?;
        // SAFETY: in bounds (checked); `out` has `size_of::<T>()` bytes and
        // any bytes are valid for a `MaybeUninit`.
        unsafe { core::ptr::copy_nonoverlapping(self.at(off), out.as_mut_ptr().cast::<u8>(), len) };
        Ok(())
    }
}

/// The ring protocol's view of the buffer's header.
impl SharedHeader for QueueBuf {
    type Index = AtomicU32;

    fn producer_index(&self) -> &AtomicU32 {
        self.header_word(offset::PRODUCER_INDEX)
    }

    fn consumer_index(&self) -> &AtomicU32 {
        self.header_word(offset::CONSUMER_INDEX)
    }
}

impl Drop for QueueBuf {
    fn drop(&mut self) {
        if self.entry.is_null() {
            // SAFETY: kernel-only buffer owned by `self` (type invariant).
            unsafe { sys::rroce_helper_vfree(self.ptr.as_ptr().cast()) };
        } else {
            // Drops our reference and makes the offset unmappable; the pages
            // are freed in `mmap_free` once no VMA maps them.
            // SAFETY: we hold the entry's initial reference.
            unsafe { sys::rdma_user_mmap_entry_remove(self.entry.cast()) };
        }
    }
}

/// The device's `mmap_free` op: the last reference to an entry is gone.
///
/// # Safety
///
/// `entry` is an entry of an rroce ucontext whose last reference is gone;
/// called once (by the RDMA core).
pub(crate) unsafe fn free_entry(entry: *mut sys::rdma_user_mmap_entry) {
    // SAFETY: every entry rroce inserts is a `MmapEntry` allocated with
    // `KBox` (type invariant); the caller passes it exactly once.
    let e = unsafe { KBox::from_raw(entry.cast::<MmapEntry>()) };
    // SAFETY: the entry owned the memory and nothing maps it any more.
    unsafe { sys::rroce_helper_vfree(e.buf.cast()) };
}

/// The device's `mmap` op: maps the queue buffer registered at the VMA's
/// offset.
///
/// # Safety
///
/// `uctx` is the caller's live ucontext (of an rroce device) and `vma` the
/// new VMA the core is setting up.
pub(crate) unsafe fn map(uctx: *mut sys::ib_ucontext, vma: *mut sys::vm_area_struct) -> Result {
    // SAFETY: per the caller.
    let entry = unsafe { sys::rdma_user_mmap_entry_get(uctx, vma) };
    if entry.is_null() {
        return Err(EINVAL);
    }
    // SAFETY: entries of this ucontext are `MmapEntry`s (type invariant),
    // alive while we hold the reference `_get` took.
    let e = unsafe { &*entry.cast::<MmapEntry>() };
    // SAFETY: `vma` is valid.
    let len = unsafe { sys::rroce_helper_vma_len(vma) } as usize;
    let err = if len > e.size {
        EINVAL.to_errno()
    } else {
        // SAFETY: `e.buf` is `vmalloc_user` memory of `e.size >= len` bytes.
        unsafe { sys::rroce_helper_remap_vmalloc(vma, e.buf.cast()) }
    };
    // The mapped pages hold their own references (see the module docs);
    // the entry reference was only needed while mapping.
    // SAFETY: drops the reference taken above.
    unsafe { sys::rdma_user_mmap_entry_put(entry) };
    if err != 0 {
        return Err(Error::from_errno(err));
    }
    Ok(())
}
