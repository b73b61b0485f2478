// SPDX-License-Identifier: GPL-2.0

//! Shared receive queues: the ring several QPs take receive WQEs from.
//!
//! A user SRQ's ring is mapped into its process, which produces into it
//! (`ibv_post_srq_recv` never enters the kernel); a kernel SRQ's ring is
//! written by `post_srq_recv`. The responder of a QP attached to the SRQ
//! takes the oldest WQE as a message starts: the WQE is copied into the
//! QP's shadow and leaves the ring at once (the QP completes it later), so
//! the consumer index moves as WQEs are taken, not as they complete.
//!
//! Locking: `SrqState::inner` is an IRQ-safe spinlock taken under a QP's
//! lock (the responder) or alone (the verbs); nothing is taken under it. A
//! resize allocates the new ring first and frees the old one after
//! unlocking, as a CQ's, all under `SrqState::resize` (a mutex: the
//! allocation and the write to the process sleep), so resizes of one SRQ
//! run one at a time. The limit event (`IB_EVENT_SRQ_LIMIT_REACHED`)
//! is raised by the responder after the SRQ lock is dropped, under the QP
//! lock, as rdma_rxe raises it under its own.

use core::pin::Pin;

use kernel::{
    new_mutex, new_spinlock_irq,
    prelude::*,
    sync::{Mutex, SpinLockIrq},
    types::Opaque,
    uaccess::{UserPtr, UserSlice},
};

use crate::{
    dev::limits,
    engine::{
        ring::{offset, Consumer, Layout, Producer, RingError},
        srq::{self, Limit},
    },
    rdma::{
        mmap::{QueueBuf, UserCtx},
        sys,
    },
};

/// rroce's part of the core's `ib_srq` (its size is `size_ib_srq`).
///
/// # Invariants
///
/// `ibsrq` is first, so the core's `*mut ib_srq` is a `*mut RroceSrq`.
/// `state` is null until `create_srq` succeeds, then the leaked state until
/// `destroy_srq`.
#[repr(C)]
pub(crate) struct RroceSrq {
    ibsrq: Opaque<sys::ib_srq>,
    state: *mut SrqState,
}

/// What the SRQ lock protects.
struct SrqInner {
    buf: QueueBuf,
    /// The kernel's consumer end (the responders).
    cons: Consumer,
    /// A kernel SRQ's producer end (`post_srq_recv`).
    prod: Producer,
    limit: Limit,
}

/// An SRQ.
///
/// # Invariants
///
/// `ibsrq` is the core's SRQ, which outlives this state (freed after
/// `destroy_srq`, which frees this first). `elem` is the ring's element
/// size and `max_sge` the SGE cap WQEs were checked against at create.
#[pin_data]
pub(crate) struct SrqState {
    ibsrq: *mut sys::ib_srq,
    user: bool,
    elem: usize,
    max_sge: u32,
    /// Held across a resize (allocation, telling the process, the swap):
    /// two `modify_srq` calls at once resize one after the other, so the
    /// ring the process was told of last is the one in use.
    #[pin]
    resize: Mutex<()>,
    #[pin]
    inner: SpinLockIrq<SrqInner>,
}

// SAFETY: `ibsrq` is only used to raise events (the core's handler and
// context, fixed before the SRQ is used); the ring is behind the lock.
unsafe impl Sync for SrqState {}
// SAFETY: as above.
unsafe impl Send for SrqState {}

/// The receive WQE size for `max_sge` SGEs (as a QP's RQ).
fn elem_size(max_sge: u32) -> usize {
    size_of::<crate::abi::RecvWqe>() + max_sge as usize * size_of::<crate::abi::Sge>()
}

/// A new ring for `max_wr` WQEs of `elem` bytes, mappable by `uctx`'s
/// process if any, with both indices at `count` (0 for a new SRQ).
fn new_ring(max_wr: u32, elem: usize, uctx: Option<&UserCtx<'_>>) -> Result<(QueueBuf, Layout)> {
    let layout = Layout::new(max_wr, elem).map_err(|_| EINVAL)?;
    let buf = QueueBuf::alloc(layout.total_bytes(), uctx)?;
    buf.header_word(offset::LOG2_ELEM_SIZE).store(
        layout.log2_elem_size(),
        core::sync::atomic::Ordering::Relaxed,
    );
    buf.header_word(offset::INDEX_MASK)
        .store(layout.index_mask(), core::sync::atomic::Ordering::Relaxed);
    layout.init_indices(&buf, 0).map_err(|_| EINVAL)?;
    Ok((buf, layout))
}

fn srq_err(_: srq::SrqError) -> Error {
    EINVAL
}

impl RroceSrq {
    /// The SRQ's state.
    ///
    /// # Safety
    ///
    /// `ibsrq` is an rroce SRQ created successfully and not destroyed,
    /// alive for `'a`.
    pub(crate) unsafe fn state<'a>(ibsrq: *mut sys::ib_srq) -> &'a SrqState {
        // SAFETY: per the type invariant and the caller.
        unsafe { &*(*ibsrq.cast::<RroceSrq>()).state }
    }

    /// Creates the SRQ for `attr` (its `max_wr` and `max_sge` set to what
    /// was granted); a user SRQ's ring is mappable by `uctx`'s process.
    /// Returns where the process maps it.
    ///
    /// # Safety
    ///
    /// `ibsrq` is the core's new SRQ of an rroce device, not yet used;
    /// `uctx` as for [`UserCtx::new`].
    pub(crate) unsafe fn create(
        ibsrq: *mut sys::ib_srq,
        attr: &mut sys::ib_srq_attr,
        uctx: Option<&UserCtx<'_>>,
    ) -> Result<crate::rdma::mmap::MmapInfo> {
        let (wr, sge) = srq::check_create(
            (attr.max_wr, attr.max_sge),
            (limits::MAX_SRQ_WR, limits::MAX_SRQ_SGE),
        )
        .map_err(srq_err)?;
        if attr.srq_limit > wr {
            return Err(EINVAL);
        }
        let (buf, layout) = new_ring(wr, elem_size(sge), uctx)?;
        let mi = buf.mmap_info();
        let limit = Limit::new(attr.srq_limit);
        let state = KBox::pin_init(
            pin_init!(SrqState {
                ibsrq,
                user: uctx.is_some(),
                elem: layout.elem_size(),
                max_sge: sge,
                resize <- new_mutex!((), "rroce::srq::resize"),
                inner <- new_spinlock_irq!(
                    SrqInner {
                        buf,
                        cons: Consumer::new(layout),
                        prod: Producer::new(layout),
                        // Armed at create when asked, as rxe.
                        limit,
                    },
                    "rroce::srq"
                ),
            }),
            GFP_KERNEL,
        )?;
        attr.max_wr = layout.capacity();
        attr.max_sge = sge;
        // SAFETY: never moved out of its box (pinned); leaked until
        // `destroy`.
        let raw = KBox::into_raw(unsafe { Pin::into_inner_unchecked(state) });
        // INVARIANT: set once, freed in `destroy`.
        // SAFETY: `ibsrq` is an `RroceSrq` (type invariant), ours to fill.
        unsafe { (*ibsrq.cast::<RroceSrq>()).state = raw };
        Ok(mi)
    }

    /// Frees the SRQ's state (`destroy_srq`; the core made sure no QP is
    /// attached any more).
    ///
    /// # Safety
    ///
    /// `ibsrq` is an rroce SRQ after its last use; called once.
    pub(crate) unsafe fn destroy(ibsrq: *mut sys::ib_srq) {
        // SAFETY: per the caller and the type invariant.
        let raw = unsafe { (*ibsrq.cast::<RroceSrq>()).state };
        if !raw.is_null() {
            // SAFETY: leaked by `create`, unreachable now.
            drop(unsafe { KBox::from_raw(raw) });
        }
    }
}

impl SrqState {
    /// The ring's element size (a QP attached takes WQEs of this size).
    pub(crate) fn elem(&self) -> usize {
        self.elem
    }

    /// The SGE cap of its WQEs.
    pub(crate) fn max_sge(&self) -> u32 {
        self.max_sge
    }

    /// Takes the oldest WQE into `dst` (at least [`Self::elem`] bytes):
    /// `Ok(None)` if the ring is empty, else whether the limit fired (the
    /// caller raises the event once it dropped its locks). `Err`: a ring
    /// the process corrupted.
    pub(crate) fn take(&self, dst: &mut [u8]) -> Result<Option<bool>, RingError> {
        let dst = dst.get_mut(..self.elem).ok_or(RingError::TooLarge)?;
        let mut g = self.inner.lock();
        let inner = &mut *g;
        let slot = match inner.cons.peek(&inner.buf) {
            Ok(s) => s,
            Err(RingError::Empty) => return Ok(None),
            Err(e) => return Err(e),
        };
        if slot.len() < self.elem {
            return Err(RingError::TooLarge);
        }
        // Copied once, then validated by the caller from the copy.
        // SAFETY: the slot holds `elem` bytes of the ring (checked above);
        // `dst` is ours and as long.
        unsafe {
            core::ptr::copy_nonoverlapping(inner.buf.at(slot.offset()), dst.as_mut_ptr(), self.elem)
        };
        inner.cons.advance(slot, &inner.buf)?;
        let left = inner.cons.available(&inner.buf).unwrap_or(0);
        Ok(Some(inner.limit.after_take(left)))
    }

    /// Raises `IB_EVENT_SRQ_LIMIT_REACHED` to the consumer's handler.
    pub(crate) fn raise_limit(&self) {
        crate::rdma::raise_srq_event(self.ibsrq, sys::ib_event_type_IB_EVENT_SRQ_LIMIT_REACHED);
    }

    /// `modify_srq`: resizes (a user SRQ's new `mminfo` goes to the
    /// process at `mmap_info_addr`) and/or sets the limit.
    pub(crate) fn modify(
        &self,
        attr: &sys::ib_srq_attr,
        mask: u32,
        user: Option<(&UserCtx<'_>, u64)>,
    ) -> Result {
        // Dropped at the end, after the old ring (never under `inner`).
        let _resizing = self.resize.lock();
        let (capacity, armed) = {
            let g = self.inner.lock();
            (g.cons.layout().capacity(), g.limit.get())
        };
        let m = srq::check_modify(
            mask,
            (attr.max_wr, attr.srq_limit),
            (capacity, armed),
            limits::MAX_SRQ_WR,
        )
        .map_err(srq_err)?;
        if let Some(wr) = m.resize {
            if self.user != user.is_some() {
                return Err(EINVAL);
            }
            // Allocate, and tell the process, outside the lock; nothing
            // changes if either fails.
            let (new_buf, layout) = new_ring(wr, self.elem, user.map(|u| u.0))?;
            if let Some((_, addr)) = user {
                let mi = crate::abi::MmapInfo {
                    offset: new_buf.mmap_info().offset,
                    size: new_buf.mmap_info().size,
                    pad: 0,
                };
                let addr = usize::try_from(addr).map_err(|_| EFAULT)?;
                let bytes = mi.to_bytes();
                UserSlice::new(UserPtr::from_addr(addr), bytes.len())
                    .writer()
                    .write_slice(&bytes)?;
            }
            let old = {
                let mut g = self.inner.lock();
                let inner = &mut *g;
                // The kernel end that knows the queued count: the
                // consumer (the process, or `post_srq_recv`, produces).
                let plan = inner
                    .cons
                    .plan_resize(&inner.buf, layout)
                    .map_err(|_| EINVAL)?;
                for i in 0..plan.count() {
                    let (from, to) = plan.copy(i).ok_or(EINVAL)?;
                    new_buf
                        .copy_from(to, &inner.buf, from, plan.copy_len())
                        .map_err(|_| EINVAL)?;
                }
                layout
                    .init_indices(&new_buf, plan.count())
                    .map_err(|_| EINVAL)?;
                // The plan is a copy: both ends start from it.
                inner.cons = plan.into_consumer();
                inner.prod = plan.into_producer();
                core::mem::replace(&mut inner.buf, new_buf)
            };
            // The old ring is freed (and unmapped by the core once the
            // process lets go of it) outside the lock.
            drop(old);
        }
        if let Some(l) = m.limit {
            self.inner.lock().limit = Limit::new(l);
        }
        Ok(())
    }

    /// `query_srq`: capacity, SGE cap and the limit (0 once it fired).
    pub(crate) fn query(&self, attr: &mut sys::ib_srq_attr) {
        let g = self.inner.lock();
        attr.max_wr = g.cons.layout().capacity();
        attr.max_sge = self.max_sge;
        attr.srq_limit = g.limit.get();
    }

    /// `post_srq_recv` for a kernel SRQ: `write` puts the work requests
    /// into the ring (its producer end, the ring, the SGE cap), under the
    /// SRQ lock.
    pub(crate) fn post_kernel(
        &self,
        write: impl FnOnce(&mut Producer, &QueueBuf, u32) -> Result,
    ) -> Result {
        if self.user {
            return Err(EINVAL);
        }
        let mut g = self.inner.lock();
        let inner = &mut *g;
        write(&mut inner.prod, &inner.buf, self.max_sge)
    }
}
