// SPDX-License-Identifier: GPL-2.0

//! Completion queues.
//!
//! A CQ is a ring of completion entries in a [`QueueBuf`] laid out as
//! rdma-core's rxe provider expects (`struct rxe_queue_buf`): the kernel
//! produces, the consumer (the user process through its mapping, or a
//! kernel ULP through `poll_cq`) consumes. The kernel keeps its own
//! producer index, mask and element size and never reads them back from the
//! shared header; the consumer index it reads from shared memory is masked
//! before use.
//!
//! Locking: `CqState::inner` (an IRQ-safe spinlock, as completions may be
//! posted from softirq context) protects the ring's kernel side. Nothing is
//! allocated or freed under it except in `resize`, which runs in process
//! context with the new buffer allocated before the lock is taken.

use core::{
    mem::size_of,
    pin::Pin,
    sync::atomic::{AtomicU32, Ordering},
};

use kernel::{
    ffi::{c_int, c_uint},
    new_spinlock_irq,
    prelude::*,
    sync::SpinLockIrq,
};

use crate::rdma::{
    mmap::{MmapInfo, QueueBuf},
    sys,
};

/// Offsets inside the shared queue header (`struct rroce_queue_buf`).
mod layout {
    pub(super) use crate::abi::{
        QUEUE_CONSUMER_OFFSET as CONSUMER, QUEUE_DATA_OFFSET as DATA,
        QUEUE_INDEX_MASK_OFFSET as INDEX_MASK, QUEUE_LOG2_ELEM_SIZE_OFFSET as LOG2_ELEM_SIZE,
        QUEUE_PRODUCER_OFFSET as PRODUCER,
    };
}

/// Size of a user CQE (`struct rroce_cqe`, = `ib_uverbs_wc`).
const UVERBS_WC_SIZE: usize = crate::abi::CQE_SIZE;

/// The kernel side of one CQ ring.
///
/// # Invariants
///
/// `buf` holds `DATA + (mask + 1) << log2_elem` bytes; `mask + 1` is a
/// power of two; `prod <= mask`; `1 << log2_elem` is at least the size of
/// the entries stored.
struct Ring {
    buf: QueueBuf,
    log2_elem: u32,
    mask: u32,
    /// Kernel's private producer index (the shared one is a copy).
    prod: u32,
}

impl Ring {
    /// Allocates a ring with room for at least `entries` entries of
    /// `elem_size` bytes.
    ///
    /// # Safety
    ///
    /// `uctx` is null (kernel CQ) or the live ucontext of the creating
    /// process.
    unsafe fn new(entries: u32, elem_size: usize, uctx: *mut sys::ib_ucontext) -> Result<Self> {
        let slots = entries
            .checked_add(1)
            .and_then(u32::checked_next_power_of_two)
            .ok_or(EINVAL)?;
        let elem = elem_size.next_power_of_two().max(64);
        let log2_elem = elem.trailing_zeros();
        let bytes = (slots as usize)
            .checked_mul(elem)
            .and_then(|b| b.checked_add(layout::DATA))
            .ok_or(EINVAL)?;
        // SAFETY: forwarded from the caller.
        let buf = unsafe { QueueBuf::new(bytes, uctx)? };
        let ring = Ring {
            buf,
            log2_elem,
            mask: slots - 1,
            prod: 0,
        };
        // The provider reads these two from the mapped header; the kernel
        // never reads them back.
        ring.word(layout::LOG2_ELEM_SIZE)
            .store(log2_elem, Ordering::Relaxed);
        ring.word(layout::INDEX_MASK)
            .store(slots - 1, Ordering::Relaxed);
        ring.word(layout::PRODUCER).store(0, Ordering::Relaxed);
        ring.word(layout::CONSUMER).store(0, Ordering::Release);
        Ok(ring)
    }

    /// The shared 32-bit word at `off` in the header.
    fn word(&self, off: usize) -> &AtomicU32 {
        // SAFETY: `off` is one of the header offsets, all 4-byte aligned and
        // inside the page-aligned buffer; the memory lives as long as
        // `self`, and user writes to it are just other atomic stores.
        unsafe { AtomicU32::from_ptr(self.buf.as_ptr().add(off).cast()) }
    }

    /// Capacity in entries.
    fn capacity(&self) -> u32 {
        self.mask
    }

    /// The consumer index, read from (hostile) shared memory and masked.
    fn consumer(&self) -> u32 {
        self.word(layout::CONSUMER).load(Ordering::Acquire) & self.mask
    }

    /// Number of entries the consumer has not taken yet.
    fn count(&self) -> u32 {
        self.prod.wrapping_sub(self.consumer()) & self.mask
    }

    /// Address of slot `i` (masked).
    fn slot(&self, i: u32) -> *mut u8 {
        let off = layout::DATA + (((i & self.mask) as usize) << self.log2_elem);
        // SAFETY: `off` is inside the buffer by the type invariant.
        unsafe { self.buf.as_ptr().add(off) }
    }

    /// Moves every unconsumed entry of `self` to the start of the empty
    /// ring `new` (same entry type): the new producer index is the count,
    /// the consumer index 0. Fails, changing nothing, if they do not fit.
    fn migrate_into(&self, new: &mut Ring) -> Result {
        let count = self.count();
        if count > new.capacity() || new.log2_elem < self.log2_elem || new.prod != 0 {
            return Err(EINVAL);
        }
        let cons = self.consumer();
        let esize = 1usize << self.log2_elem;
        for i in 0..count {
            // SAFETY: both slots lie inside their buffers and hold at least
            // `esize` bytes (checked above).
            unsafe {
                core::ptr::copy_nonoverlapping(self.slot(cons.wrapping_add(i)), new.slot(i), esize)
            };
        }
        // INVARIANT: `count <= new.mask`.
        new.prod = count;
        new.word(layout::CONSUMER).store(0, Ordering::Relaxed);
        new.word(layout::PRODUCER).store(count, Ordering::Release);
        Ok(())
    }

    /// Appends an entry; `Err(ENOSPC)` if the ring is full.
    fn push(&mut self, entry: &[u8]) -> Result {
        if entry.len() > (1usize << self.log2_elem) {
            return Err(EINVAL);
        }
        let next = (self.prod + 1) & self.mask;
        if next == self.consumer() {
            return Err(ENOSPC);
        }
        // SAFETY: the slot holds `1 << log2_elem >= entry.len()` bytes and
        // the consumer does not read it until the release store below.
        unsafe {
            core::ptr::copy_nonoverlapping(entry.as_ptr(), self.slot(self.prod), entry.len())
        };
        // INVARIANT: `next` is masked.
        self.prod = next;
        self.word(layout::PRODUCER).store(next, Ordering::Release);
        Ok(())
    }
}

/// Mutable CQ state.
struct CqInner {
    ring: Ring,
    /// Arm requested by `req_notify_cq` (`IB_CQ_SOLICITED`/`IB_CQ_NEXT_COMP`).
    armed: u32,
}

#[pin_data]
struct CqState {
    #[pin]
    inner: SpinLockIrq<CqInner>,
    /// Whether the ring is mapped by a user process (else polled in kernel).
    user: bool,
}

/// rroce's CQ: the core allocates it (`size_ib_cq`).
///
/// # Invariants
///
/// `ibcq` is first, so the core's `*mut ib_cq` is a `*mut RroceCq`.
/// `state` is null before `create_cq` succeeds, and afterwards a pinned
/// `KBox<CqState>` leaked until `destroy_cq`.
#[repr(C)]
pub(crate) struct RroceCq {
    ibcq: sys::ib_cq,
    state: *mut CqState,
}

/// Validates a requested CQ size.
fn check_cqe(cqe: u32) -> Result {
    if cqe == 0 || cqe > crate::device::limits::MAX_CQE {
        return Err(EINVAL);
    }
    Ok(())
}

/// Writes the mminfo response of create/resize to `udata`.
///
/// # Safety
///
/// `udata` is a valid uverbs udata.
unsafe fn respond_mminfo(udata: *mut sys::ib_udata, mi: MmapInfo) -> Result {
    // `struct rroce_create_cq_resp` and `rroce_resize_cq_resp` are just the
    // mminfo.
    let mut resp = crate::abi::MmapInfo {
        offset: mi.offset,
        size: mi.size,
        pad: 0,
    }
    .to_bytes();
    // SAFETY: `resp` is 16 readable bytes; `udata` is valid.
    let err =
        unsafe { sys::rroce_helper_copy_to_udata(udata, resp.as_mut_ptr().cast(), resp.len()) };
    if err != 0 {
        return Err(Error::from_errno(err));
    }
    Ok(())
}

/// The `create_cq` / `create_user_cq` op.
pub(crate) unsafe extern "C" fn create_cq(
    ibcq: *mut sys::ib_cq,
    attr: *const sys::ib_cq_init_attr,
    attrs: *mut sys::uverbs_attr_bundle,
) -> c_int {
    // SAFETY: the core passes a CQ of our size, valid attributes, and a
    // bundle that is null for kernel callers.
    match unsafe { create(ibcq, attr, attrs) } {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// # Safety
///
/// As for [`create_cq`].
unsafe fn create(
    ibcq: *mut sys::ib_cq,
    attr: *const sys::ib_cq_init_attr,
    attrs: *mut sys::uverbs_attr_bundle,
) -> Result {
    // SAFETY: valid per the caller.
    let (attr, udata) = unsafe { (&*attr, sys::rroce_helper_attrs_udata(attrs)) };
    let user = !udata.is_null();
    if attr.flags != 0 {
        return Err(EOPNOTSUPP);
    }
    check_cqe(attr.cqe)?;
    // SAFETY: `ibcq` belongs to one of our devices.
    let num_vectors = unsafe { (*(*ibcq).device).num_comp_vectors };
    if attr.comp_vector as c_int >= num_vectors {
        return Err(EINVAL);
    }
    if user {
        // SAFETY: checked non-null.
        if (unsafe { (*udata).outlen } as usize) < 16 {
            return Err(EINVAL);
        }
    }
    let (elem, uctx) = if user {
        // SAFETY: `udata` is the valid driver udata of this uverbs call.
        (UVERBS_WC_SIZE, unsafe {
            sys::rroce_helper_udata_ucontext(udata)
        })
    } else {
        (size_of::<sys::ib_wc>(), core::ptr::null_mut())
    };
    // SAFETY: `uctx` is null or the live ucontext of this call.
    let ring = unsafe { Ring::new(attr.cqe, elem, uctx)? };
    let mi = ring.buf.mmap_info();
    let capacity = ring.capacity();
    let state = KBox::pin_init(
        pin_init!(CqState {
            inner <- new_spinlock_irq!(CqInner { ring, armed: 0 }, "rroce::cq"),
            user,
        }),
        GFP_KERNEL,
    )?;
    if user {
        // SAFETY: `udata` is valid.
        unsafe { respond_mminfo(udata, mi)? };
    }
    // SAFETY: the core allocated `ibcq` with our size (type invariant).
    let cq = unsafe { &mut *ibcq.cast::<RroceCq>() };
    cq.ibcq.cqe = capacity as c_int;
    // INVARIANT: leaked until `destroy_cq`, never moved (pinned).
    // SAFETY: the box is pinned and we never move out of it.
    cq.state = KBox::into_raw(unsafe { Pin::into_inner_unchecked(state) });
    Ok(())
}

impl RroceCq {
    /// # Safety
    ///
    /// `ibcq` is an rroce CQ that was created successfully and is not yet
    /// destroyed, alive for `'a`.
    unsafe fn state<'a>(ibcq: *mut sys::ib_cq) -> &'a CqState {
        // SAFETY: per the type invariant and the caller.
        unsafe { &*(*ibcq.cast::<RroceCq>()).state }
    }
}

/// The `destroy_cq` op.
pub(crate) unsafe extern "C" fn destroy_cq(
    ibcq: *mut sys::ib_cq,
    _udata: *mut sys::ib_udata,
) -> c_int {
    // SAFETY: the core passes one of our CQs, created successfully, after
    // its last use.
    let cq = unsafe { &mut *ibcq.cast::<RroceCq>() };
    if !cq.state.is_null() {
        // SAFETY: leaked in `create` (type invariant); reclaimed once.
        drop(unsafe { KBox::from_raw(cq.state) });
        cq.state = core::ptr::null_mut();
    }
    0
}

/// The `resize_user_cq` op: grows or shrinks the ring, keeping every
/// completion not yet consumed. Shrinking below that count fails and
/// leaves the CQ unchanged.
pub(crate) unsafe extern "C" fn resize_cq(
    ibcq: *mut sys::ib_cq,
    cqe: c_uint,
    udata: *mut sys::ib_udata,
) -> c_int {
    // SAFETY: the core passes a live CQ of ours and a valid udata or null.
    match unsafe { resize(ibcq, cqe, udata) } {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// # Safety
///
/// As for [`resize_cq`].
unsafe fn resize(ibcq: *mut sys::ib_cq, cqe: u32, udata: *mut sys::ib_udata) -> Result {
    check_cqe(cqe)?;
    // SAFETY: live CQ per the caller.
    let state = unsafe { RroceCq::state(ibcq) };
    if state.user && (udata.is_null() || (unsafe { (*udata).outlen } as usize) < 16) {
        return Err(EINVAL);
    }
    let (elem, uctx) = if state.user {
        // SAFETY: `udata` is the valid driver udata of this uverbs call.
        (UVERBS_WC_SIZE, unsafe {
            sys::rroce_helper_udata_ucontext(udata)
        })
    } else {
        (size_of::<sys::ib_wc>(), core::ptr::null_mut())
    };
    {
        let inner = state.inner.lock();
        if cqe < inner.ring.count() {
            return Err(EINVAL);
        }
    }
    // Allocate outside the lock.
    // SAFETY: `uctx` is null or this process's live ucontext.
    let mut new = unsafe { Ring::new(cqe, elem, uctx)? };
    let mi = new.buf.mmap_info();
    let capacity = new.capacity();
    let old = {
        let mut inner = state.inner.lock();
        let count = inner.ring.count();
        if count > new.capacity() {
            // Completions arrived meanwhile; nothing changed.
            return Err(EINVAL);
        }
        inner.ring.migrate_into(&mut new)?;
        core::mem::replace(&mut inner.ring, new)
    };
    // The old buffer is released outside the lock.
    drop(old);
    if state.user {
        // SAFETY: `udata` is valid (checked above).
        unsafe { respond_mminfo(udata, mi)? };
    }
    // SAFETY: live CQ.
    unsafe { (*ibcq).cqe = capacity as c_int };
    Ok(())
}

/// The `poll_cq` op, for kernel consumers (user CQs are polled in
/// userspace through the mapping).
pub(crate) unsafe extern "C" fn poll_cq(
    ibcq: *mut sys::ib_cq,
    num: c_int,
    wc: *mut sys::ib_wc,
) -> c_int {
    // SAFETY: live CQ of ours.
    let state = unsafe { RroceCq::state(ibcq) };
    if state.user || num < 0 {
        return EINVAL.to_errno();
    }
    let inner = state.inner.lock();
    let ring = &inner.ring;
    let mut cons = ring.consumer();
    let mut n = 0;
    while n < num && cons != ring.prod {
        // SAFETY: kernel CQ slots hold `ib_wc`s written by `post`; `wc` has
        // room for `num` entries.
        unsafe {
            core::ptr::copy_nonoverlapping(
                ring.slot(cons).cast::<sys::ib_wc>(),
                wc.add(n as usize),
                1,
            )
        };
        cons = (cons + 1) & ring.mask;
        n += 1;
    }
    ring.word(layout::CONSUMER).store(cons, Ordering::Release);
    n
}

/// The `req_notify_cq` op.
pub(crate) unsafe extern "C" fn req_notify_cq(
    ibcq: *mut sys::ib_cq,
    flags: sys::ib_cq_notify_flags,
) -> c_int {
    // SAFETY: live CQ of ours.
    let state = unsafe { RroceCq::state(ibcq) };
    let mut inner = state.inner.lock();
    let kind = flags & sys::ib_cq_notify_flags_IB_CQ_SOLICITED_MASK;
    if kind == 0 {
        return EINVAL.to_errno();
    }
    inner.armed |= kind;
    if flags & sys::ib_cq_notify_flags_IB_CQ_REPORT_MISSED_EVENTS != 0 && inner.ring.count() != 0 {
        return 1;
    }
    0
}

/// Checks run by KUnit.
pub(crate) mod selftest {
    use super::Ring;
    use kernel::prelude::*;

    fn entry(v: u8) -> [u8; 48] {
        [v; 48]
    }

    fn first_byte(r: &Ring, i: u32) -> u8 {
        // SAFETY: `slot` is inside the ring buffer.
        unsafe { *r.slot(i) }
    }

    /// Simulates a consumer taking `n` entries.
    fn consume(r: &Ring, n: u32) {
        let c = (r.consumer() + n) & r.mask;
        r.word(super::layout::CONSUMER)
            .store(c, core::sync::atomic::Ordering::Release);
    }

    /// Resize keeps every unconsumed completion, in order, when growing and
    /// shrinking; shrinking below the count fails and changes nothing.
    pub(crate) fn resize_keeps_completions() -> Result<(), &'static str> {
        // SAFETY: kernel-only rings (null ucontext).
        let mut r = unsafe { Ring::new(7, 48, core::ptr::null_mut()) }.map_err(|_| "alloc")?;
        if r.capacity() != 7 {
            return Err("7 entries should give capacity 7");
        }
        for v in 0..7u8 {
            r.push(&entry(v))
                .map_err(|_| "push into a non-full ring failed")?;
        }
        if r.push(&entry(9)).is_ok() {
            return Err("push into a full ring succeeded");
        }
        consume(&r, 3); // entries 3..7 remain, and the indices wrap next
        r.push(&entry(7)).map_err(|_| "push after consume failed")?;
        r.push(&entry(8)).map_err(|_| "push after consume failed")?;
        if r.count() != 6 {
            return Err("count after wrap is wrong");
        }
        // Shrink below the count: refused, the old ring untouched.
        // SAFETY: kernel-only ring.
        let mut small = unsafe { Ring::new(3, 48, core::ptr::null_mut()) }.map_err(|_| "alloc")?;
        if r.migrate_into(&mut small).is_ok() || r.count() != 6 {
            return Err("shrink below the queued count must fail and change nothing");
        }
        // Grow: everything moves, in order.
        // SAFETY: kernel-only ring.
        let mut big = unsafe { Ring::new(100, 48, core::ptr::null_mut()) }.map_err(|_| "alloc")?;
        r.migrate_into(&mut big).map_err(|_| "grow failed")?;
        if big.count() != 6 || big.consumer() != 0 {
            return Err("grown ring has the wrong indices");
        }
        for i in 0..6u32 {
            if first_byte(&big, i) != 3 + i as u8 {
                return Err("grown ring lost or reordered a completion");
            }
        }
        // Shrink to exactly the count.
        consume(&big, 2);
        // SAFETY: kernel-only ring.
        let mut fit = unsafe { Ring::new(4, 48, core::ptr::null_mut()) }.map_err(|_| "alloc")?;
        big.migrate_into(&mut fit)
            .map_err(|_| "shrink to the count failed")?;
        for i in 0..4u32 {
            if first_byte(&fit, i) != 5 + i as u8 {
                return Err("shrunk ring lost or reordered a completion");
            }
        }
        Ok(())
    }

    /// A hostile consumer index is masked, never used raw.
    pub(crate) fn hostile_consumer_index() -> Result<(), &'static str> {
        // SAFETY: kernel-only ring.
        let r = unsafe { Ring::new(15, 48, core::ptr::null_mut()) }.map_err(|_| "alloc")?;
        r.word(super::layout::CONSUMER)
            .store(0xdead_beef, core::sync::atomic::Ordering::Release);
        if r.consumer() > r.mask || r.count() > r.capacity() {
            return Err("unmasked consumer index");
        }
        Ok(())
    }

    /// CQ sizes: 0 and above the limit are refused.
    pub(crate) fn cqe_limits() -> Result<(), &'static str> {
        use super::check_cqe;
        if check_cqe(0).is_ok() || check_cqe(crate::device::limits::MAX_CQE + 1).is_ok() {
            return Err("bad CQ size accepted");
        }
        if check_cqe(1).is_err() || check_cqe(crate::device::limits::MAX_CQE).is_err() {
            return Err("good CQ size refused");
        }
        Ok(())
    }
}
