// SPDX-License-Identifier: GPL-2.0

//! Completion queues.
//!
//! A CQ is a ring of completion entries in a [`QueueBuf`] laid out as
//! rdma-core's rxe provider expects (`struct rroce_queue_buf`): the kernel
//! produces, the consumer (the user process through its mapping, or a
//! kernel ULP through `poll_cq`) consumes. Index arithmetic and the checks
//! on the consumer index read back from shared memory are the engine's
//! [`Producer`]; arming and callbacks are the engine's NDKPI state machine
//! [`CqNotify`].
//!
//! # Callbacks
//!
//! Callbacks (`ib_cq.comp_handler`, which for user CQs wakes the completion
//! channel) always run from the CQ's work item, queued on the CPU that the
//! CQ's completion vector names, and never under the CQ lock: the work item
//! is the dispatcher of the engine's protocol, so callbacks on one CQ never
//! overlap or nest, and a handler may re-arm and poll its own CQ. A
//! callback that becomes due while one runs is run by the same work item
//! after it returns. Destroying the CQ cancels the arm, and waits for a
//! running or queued callback (the work item skips the handler once the CQ
//! is destroyed).
//!
//! Locking: `CqState::inner` is an IRQ-safe spinlock (completions may be
//! posted from softirq context). Nothing is allocated, freed or called out
//! under it; resize allocates the new ring first and frees the old one
//! after unlocking.

use core::{
    cell::UnsafeCell,
    mem::{offset_of, size_of},
    pin::Pin,
    sync::atomic::Ordering,
};

use kernel::{
    ffi::{c_int, c_uint},
    new_spinlock_irq,
    prelude::*,
    sync::SpinLockIrq,
};

use crate::{
    engine::{
        notify::{Action, ArmRequest, CompletionKind, CqNotify, Fatal, NotifyError},
        ring::{offset, Layout, Producer, RingError, SharedHeader, SharedIndex},
    },
    rdma::{mmap::QueueBuf, sys},
};

/// Size of a user CQE (`struct rroce_cqe`, = `ib_uverbs_wc`).
const USER_CQE_SIZE: usize = crate::abi::CQE_SIZE;

/// Mutable CQ state, under `CqState::inner`.
///
/// # Invariants
///
/// `buf` holds at least `ring.layout().total_bytes()` bytes, with the
/// layout's `log2_elem_size` and `index_mask` in its header.
struct CqInner {
    buf: QueueBuf,
    ring: Producer,
    notify: CqNotify,
}

/// A CQ's state. Pinned: the work item is linked into workqueues.
#[pin_data(PinnedDrop)]
pub(crate) struct CqState {
    #[pin]
    inner: SpinLockIrq<CqInner>,
    /// The core's CQ, whose `comp_handler`/`cq_context` the callbacks use;
    /// alive until `destroy_cq`, which frees this state first.
    ibcq: *mut sys::ib_cq,
    /// Mapped by a user process (else polled through `poll_cq`).
    user: bool,
    /// Entry size: a user CQE or a kernel `ib_wc`.
    entry_size: usize,
    /// The completion vector whose CPU runs the callbacks.
    vector: u32,
    /// The dispatcher work item; initialized by [`CqState::new`] once
    /// pinned.
    work: UnsafeCell<sys::work_struct>,
    /// Moves the QPs attached to the CQ to the error state once it has
    /// overrun (NDKPI: "all associated queue pairs are also unusable");
    /// initialized by [`CqState::new`] once pinned.
    kill_work: UnsafeCell<sys::work_struct>,
}

// SAFETY: all mutable state is behind the spinlock; `work` is only touched
// by the workqueue code; `ibcq` is only dereferenced to read the handler,
// which the core does not change while the CQ exists.
unsafe impl Send for CqState {}
// SAFETY: as above.
unsafe impl Sync for CqState {}

/// What a completion is, for the notify machine and for `post`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A successful completion without the solicited event flag.
    Unsolicited,
    /// A successful completion with the solicited event flag.
    Solicited,
    /// An error completion.
    Error,
}

impl From<Kind> for CompletionKind {
    fn from(k: Kind) -> Self {
        match k {
            Kind::Unsolicited => CompletionKind::Unsolicited,
            Kind::Solicited => CompletionKind::Solicited,
            Kind::Error => CompletionKind::Error,
        }
    }
}

fn ring_err(e: RingError) -> Error {
    match e {
        RingError::Full => ENOSPC,
        RingError::TooSmall { .. } => EINVAL,
        RingError::TooLarge => EINVAL,
        _ => EIO,
    }
}

fn notify_err(e: NotifyError) -> Error {
    match e {
        NotifyError::Dead(_) => EIO,
        NotifyError::Canceled => ECANCELED,
        NotifyError::InvalidFlags => EINVAL,
        NotifyError::NotInCallback => EINVAL,
    }
}

/// Allocates a ring buffer for `entries` entries and writes its header.
///
/// # Safety
///
/// `uctx` is null (kernel CQ) or the live ucontext of the calling process.
unsafe fn new_ring(
    entries: u32,
    entry_size: usize,
    uctx: *mut sys::ib_ucontext,
) -> Result<(QueueBuf, Layout)> {
    let layout = Layout::new(entries, entry_size).map_err(ring_err)?;
    // SAFETY: forwarded from the caller.
    let buf = unsafe { QueueBuf::new(layout.total_bytes(), uctx)? };
    // The provider reads these from the mapped header; the kernel never
    // reads them back.
    buf.header_word(offset::LOG2_ELEM_SIZE)
        .store(layout.log2_elem_size(), Ordering::Relaxed);
    buf.header_word(offset::INDEX_MASK)
        .store(layout.index_mask(), Ordering::Relaxed);
    layout.init_indices(&buf, 0).map_err(ring_err)?;
    Ok((buf, layout))
}

impl CqState {
    /// A CQ of at least `entries` entries whose callbacks go to `ibcq`'s
    /// `comp_handler` on `vector`'s CPU.
    ///
    /// # Safety
    ///
    /// `ibcq` stays valid until the returned state is dropped; `uctx` is
    /// null for a kernel CQ or the creating process's live ucontext.
    pub(crate) unsafe fn new(
        ibcq: *mut sys::ib_cq,
        entries: u32,
        vector: u32,
        uctx: *mut sys::ib_ucontext,
    ) -> Result<Pin<KBox<CqState>>> {
        let user = !uctx.is_null();
        let entry_size = if user {
            USER_CQE_SIZE
        } else {
            size_of::<sys::ib_wc>()
        };
        // SAFETY: forwarded from the caller.
        let (buf, layout) = unsafe { new_ring(entries, entry_size, uctx)? };
        let state = KBox::pin_init(
            pin_init!(CqState {
                inner <- new_spinlock_irq!(
                    CqInner {
                        buf,
                        ring: Producer::new(layout),
                        notify: CqNotify::new(),
                    },
                    "rroce::cq"
                ),
                ibcq,
                user,
                entry_size,
                vector,
                // SAFETY: an all-zero work_struct is a valid placeholder;
                // it is initialized with INIT_WORK below before any use.
                work: UnsafeCell::new(unsafe { core::mem::zeroed() }),
                // SAFETY: as `work`.
                kill_work: UnsafeCell::new(unsafe { core::mem::zeroed() }),
            }),
            GFP_KERNEL,
        )?;
        // SAFETY: the state is pinned, so the work items keep their
        // addresses.
        unsafe {
            sys::rroce_helper_init_work(state.work.get(), Some(cq_work));
            sys::rroce_helper_init_work(state.kill_work.get(), Some(cq_kill_work));
        }
        Ok(state)
    }

    /// Whether the ring is mapped by a process (its entries are
    /// `struct rroce_cqe`); a kernel CQ holds `struct ib_wc`s.
    pub(crate) fn is_user(&self) -> bool {
        self.user
    }

    /// Capacity in entries.
    pub(crate) fn capacity(&self) -> u32 {
        self.inner.lock().ring.layout().capacity()
    }

    /// Where userspace maps the ring.
    fn mmap_info(&self) -> crate::rdma::mmap::MmapInfo {
        self.inner.lock().buf.mmap_info()
    }

    /// Appends a completion entry (a user CQE or a kernel `ib_wc`, as bytes)
    /// and runs the notify machine. On a full ring the CQ dies (NDKPI CQ
    /// overrun): arms are satisfied once, `IB_EVENT_CQ_ERR` is raised and
    /// every later post fails.
    pub(crate) fn post(&self, entry: &[u8], kind: Kind) -> Result {
        if entry.len() > self.entry_size {
            return Err(EINVAL);
        }
        let (result, action, raise_err) = {
            let mut guard = self.inner.lock();
            let inner = &mut *guard;
            inner.notify.check_postable().map_err(notify_err)?;
            match inner.ring.reserve(&inner.buf) {
                Ok(slot) => {
                    // SAFETY: the slot lies inside the buffer (type
                    // invariant of `CqInner`) and holds `elem_size >=
                    // entry_size >= entry.len()` bytes; the consumer does not
                    // read it before the release store in `commit`.
                    unsafe {
                        core::ptr::copy_nonoverlapping(
                            entry.as_ptr(),
                            inner.buf.at(slot.offset()),
                            entry.len(),
                        )
                    };
                    inner.ring.commit(slot, &inner.buf).map_err(ring_err)?;
                    let a = inner
                        .notify
                        .on_completion(kind.into())
                        .map_err(notify_err)?;
                    (Ok(()), a, false)
                }
                Err(e) => {
                    // Full (overrun) or a consumer index the process
                    // corrupted: either way the CQ cannot go on.
                    let reason = if e == RingError::Full {
                        Fatal::Overflow
                    } else {
                        Fatal::Internal
                    };
                    let f = inner.notify.fatal(reason);
                    (Err(ring_err(e)), f.action, f.raise_cq_err)
                }
            }
        };
        if raise_err {
            self.raise_cq_err();
            // The QPs are locked one by one from process context: the
            // caller may hold one of their locks.
            // SAFETY: initialized in `new`; `Drop` cancels it.
            unsafe { sys::rroce_helper_queue_work(self.kill_work.get()) };
        }
        self.dispatch(action);
        result
    }

    /// `ib_req_notify_cq`: arms the CQ. Returns the verbs return value (1
    /// when `IB_CQ_REPORT_MISSED_EVENTS` finds unpolled completions).
    pub(crate) fn arm(&self, flags: u32) -> Result<c_int> {
        let req = ArmRequest::from_ib_flags(flags).map_err(notify_err)?;
        let outcome = {
            let mut guard = self.inner.lock();
            let inner = &mut *guard;
            let unpolled = inner.ring.count(&inner.buf).map_err(ring_err)?;
            inner.notify.arm(req, unpolled).map_err(notify_err)?
        };
        self.dispatch(outcome.action());
        Ok(outcome.ib_return())
    }

    /// Waits until no callback is queued or running (a dispatcher that
    /// defers a callback runs it before it finishes).
    pub(crate) fn flush_callbacks(&self) {
        // SAFETY: `work` was initialized in `new`; not called from it.
        unsafe { sys::rroce_helper_flush_work(self.work.get()) };
    }

    /// Hands the dispatcher role to the work item on the vector's CPU.
    fn dispatch(&self, a: Action) {
        if a == Action::RunCallback {
            // SAFETY: `work` was initialized in `new`; the state outlives
            // the work item (`Drop` flushes it).
            unsafe { sys::rroce_helper_queue_work_on_vector(self.vector, self.work.get()) };
        }
    }

    /// Raises `IB_EVENT_CQ_ERR` to the CQ's consumer.
    fn raise_cq_err(&self) {
        // SAFETY: `ibcq` is valid while the state lives; the core set the
        // handler before create and does not change it.
        unsafe {
            let cq = &*self.ibcq;
            if let Some(handler) = cq.event_handler {
                let mut ev: sys::ib_event = core::mem::zeroed();
                ev.device = cq.device;
                ev.element.cq = self.ibcq;
                ev.event = sys::ib_event_type_IB_EVENT_CQ_ERR;
                handler(&mut ev, cq.cq_context);
            }
        }
    }

    /// Runs one callback and reports it finished; returns what to do next.
    fn run_callback(&self) -> Action {
        let destroyed = self.inner.lock().notify.is_destroyed();
        if !destroyed {
            // SAFETY: `ibcq` is valid while the state lives (destroy flushes
            // this work item before freeing anything).
            unsafe {
                let cq = &*self.ibcq;
                if let Some(handler) = cq.comp_handler {
                    handler(self.ibcq, cq.cq_context);
                }
            }
        }
        self.inner
            .lock()
            .notify
            .callback_finished()
            .unwrap_or(Action::Idle)
    }
}

#[pinned_drop]
impl PinnedDrop for CqState {
    fn drop(self: Pin<&mut Self>) {
        // Cancel the arm, then wait for a queued or running callback; the
        // work item skips the handler now that the CQ is destroyed.
        let _ = self.inner.lock().notify.destroy();
        // SAFETY: initialized in `new`; not called from the work items
        // themselves (the RDMA core never destroys a CQ from its own
        // handler, and no QP is attached any more).
        unsafe {
            sys::rroce_helper_flush_work(self.work.get());
            sys::rroce_helper_cancel_work_sync(self.kill_work.get());
        }
    }
}

/// After an overrun: every QP attached to the CQ goes to the error state.
///
/// # Safety
///
/// Called by the workqueue with the `kill_work` field of a live, pinned
/// `CqState` (see `CqState::new`).
unsafe extern "C" fn cq_kill_work(work: *mut sys::work_struct) {
    // SAFETY: `work` is the `kill_work` field of a pinned `CqState`, which
    // is not freed before this work item has finished (`Drop` cancels it).
    let state = unsafe {
        &*work
            .byte_sub(offset_of!(CqState, kill_work))
            .cast::<CqState>()
    };
    // SAFETY: `ibcq` is valid while the state lives; the core set its
    // device before `create_cq` (null only for the selftests' fake CQs).
    let ibdev = unsafe { (*state.ibcq).device };
    if !ibdev.is_null() {
        // SAFETY: the device of one of our CQs, which outlives it.
        let dev = unsafe { crate::device::RroceDev::from_ib(ibdev) };
        crate::qp::fail_qps_on_cq(dev, state.ibcq);
    }
}

/// The dispatcher: runs callbacks until the machine says it is done.
///
/// # Safety
///
/// Called by the workqueue with the `work` field of a live, pinned
/// `CqState` (see `CqState::new`).
unsafe extern "C" fn cq_work(work: *mut sys::work_struct) {
    // SAFETY: `work` is the `work` field of a pinned `CqState`, which is
    // not freed before this work item has finished (`Drop` flushes it).
    let state = unsafe { &*work.byte_sub(offset_of!(CqState, work)).cast::<CqState>() };
    while state.run_callback() == Action::RunCallback {}
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

impl RroceCq {
    /// # Safety
    ///
    /// `ibcq` is an rroce CQ that was created successfully and is not yet
    /// destroyed, alive for `'a`.
    pub(crate) unsafe fn state<'a>(ibcq: *mut sys::ib_cq) -> &'a CqState {
        // SAFETY: per the type invariant and the caller.
        unsafe { &*(*ibcq.cast::<RroceCq>()).state }
    }
}

/// Validates a requested CQ size.
fn check_cqe(cqe: u32) -> Result {
    if cqe == 0 || cqe > crate::device::limits::MAX_CQE {
        return Err(EINVAL);
    }
    Ok(())
}

/// Writes the mminfo response of create/resize
/// (`struct rroce_create_cq_resp` / `rroce_resize_cq_resp`).
///
/// # Safety
///
/// `udata` is a valid uverbs udata.
unsafe fn respond_mminfo(udata: *mut sys::ib_udata, mi: crate::rdma::mmap::MmapInfo) -> Result {
    let mut resp = crate::abi::MmapInfo {
        offset: mi.offset,
        size: mi.size,
        pad: 0,
    }
    .to_bytes();
    // SAFETY: `resp` is readable; `udata` is valid.
    let err =
        unsafe { sys::rroce_helper_copy_to_udata(udata, resp.as_mut_ptr().cast(), resp.len()) };
    if err != 0 {
        return Err(Error::from_errno(err));
    }
    Ok(())
}

/// # Safety
///
/// `udata` is null or valid.
unsafe fn udata_outlen(udata: *mut sys::ib_udata) -> usize {
    if udata.is_null() {
        0
    } else {
        // SAFETY: checked for null, valid per the caller.
        unsafe { (*udata).outlen }
    }
}

/// The `create_cq` / `create_user_cq` op.
///
/// # Safety
///
/// Called only by the RDMA core through rroce's `ib_device_ops`, with the
/// arguments that op's contract describes: live objects of an rroce device,
/// valid attribute and output pointers, and a udata that is null for kernel
/// callers.
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
    if attr.flags != 0 {
        return Err(EOPNOTSUPP);
    }
    check_cqe(attr.cqe)?;
    // SAFETY: `ibcq` belongs to one of our devices.
    let num_vectors = unsafe { (*(*ibcq).device).num_comp_vectors };
    if attr.comp_vector as c_int >= num_vectors {
        return Err(EINVAL);
    }
    let uctx = if udata.is_null() {
        core::ptr::null_mut()
    } else {
        // SAFETY: `udata` is non-null and valid.
        if unsafe { udata_outlen(udata) } < size_of::<crate::abi::CreateCqResp>() {
            return Err(EINVAL);
        }
        // SAFETY: the driver udata of this uverbs call.
        unsafe { sys::rroce_helper_udata_ucontext(udata) }
    };
    // SAFETY: `ibcq` outlives the state (freed in `destroy_cq` first);
    // `uctx` is null or this call's live ucontext.
    let state = unsafe { CqState::new(ibcq, attr.cqe, attr.comp_vector, uctx)? };
    if !udata.is_null() {
        // SAFETY: `udata` is valid.
        unsafe { respond_mminfo(udata, state.mmap_info())? };
    }
    let capacity = state.capacity();
    // SAFETY: the core allocated `ibcq` with our size (type invariant).
    let cq = unsafe { &mut *ibcq.cast::<RroceCq>() };
    cq.ibcq.cqe = capacity as c_int;
    // INVARIANT: leaked until `destroy_cq`, never moved (pinned).
    // SAFETY: we never move out of the box.
    cq.state = KBox::into_raw(unsafe { Pin::into_inner_unchecked(state) });
    Ok(())
}

/// The `destroy_cq` op.
///
/// # Safety
///
/// Called only by the RDMA core through rroce's `ib_device_ops`, with the
/// arguments that op's contract describes: live objects of an rroce device,
/// valid attribute and output pointers, and a udata that is null for kernel
/// callers.
pub(crate) unsafe extern "C" fn destroy_cq(
    ibcq: *mut sys::ib_cq,
    _udata: *mut sys::ib_udata,
) -> c_int {
    // SAFETY: the core passes one of our CQs, created successfully, after
    // its last use.
    let cq = unsafe { &mut *ibcq.cast::<RroceCq>() };
    if !cq.state.is_null() {
        // SAFETY: leaked in `create` (type invariant); reclaimed once. Its
        // `Drop` cancels the arm and waits for callbacks.
        drop(unsafe { KBox::from_raw(cq.state) });
        cq.state = core::ptr::null_mut();
    }
    0
}

/// The `resize_user_cq` op: grows or shrinks the ring, keeping every
/// completion not yet consumed. Shrinking below that count fails and
/// leaves the CQ unchanged.
///
/// # Safety
///
/// Called only by the RDMA core through rroce's `ib_device_ops`, with the
/// arguments that op's contract describes: live objects of an rroce device,
/// valid attribute and output pointers, and a udata that is null for kernel
/// callers.
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

impl CqState {
    /// Moves every unconsumed entry into a new ring of at least `entries`
    /// entries; on failure nothing changes.
    ///
    /// # Safety
    ///
    /// `uctx` is null for a kernel CQ, else the owning process's ucontext.
    pub(crate) unsafe fn resize(&self, entries: u32, uctx: *mut sys::ib_ucontext) -> Result<u32> {
        check_cqe(entries)?;
        {
            let mut guard = self.inner.lock();
            let inner = &mut *guard;
            inner.notify.check_postable().map_err(notify_err)?;
            if entries < inner.ring.count(&inner.buf).map_err(ring_err)? {
                return Err(EINVAL);
            }
        }
        // Allocate outside the lock.
        // SAFETY: forwarded from the caller.
        let (new_buf, new_layout) = unsafe { new_ring(entries, self.entry_size, uctx)? };
        let old = {
            let mut guard = self.inner.lock();
            let inner = &mut *guard;
            // Fails, changing nothing, if completions arrived meanwhile and
            // no longer fit.
            let plan = inner
                .ring
                .plan_resize(&inner.buf, new_layout)
                .map_err(ring_err)?;
            for i in 0..plan.count() {
                let (from, to) = plan.copy(i).ok_or(EINVAL)?;
                // SAFETY: the plan's offsets lie inside their buffers, each
                // slot holding `copy_len` bytes.
                unsafe {
                    core::ptr::copy_nonoverlapping(
                        inner.buf.at(from),
                        new_buf.at(to),
                        plan.copy_len(),
                    )
                };
            }
            new_layout
                .init_indices(&new_buf, plan.count())
                .map_err(ring_err)?;
            inner.ring = plan.into_producer();
            // INVARIANT: the new buffer matches the new producer's layout.
            core::mem::replace(&mut inner.buf, new_buf)
        };
        // The old buffer is released outside the lock.
        drop(old);
        Ok(new_layout.capacity())
    }
}

/// # Safety
///
/// As for [`resize_cq`].
unsafe fn resize(ibcq: *mut sys::ib_cq, cqe: u32, udata: *mut sys::ib_udata) -> Result {
    // SAFETY: live CQ per the caller.
    let state = unsafe { RroceCq::state(ibcq) };
    let uctx = if state.user {
        // SAFETY: `udata` is null or valid.
        if unsafe { udata_outlen(udata) } < size_of::<crate::abi::ResizeCqResp>() {
            return Err(EINVAL);
        }
        // SAFETY: the driver udata of this uverbs call.
        unsafe { sys::rroce_helper_udata_ucontext(udata) }
    } else {
        core::ptr::null_mut()
    };
    // SAFETY: `uctx` is the owner's ucontext (user CQ) or null.
    let capacity = unsafe { state.resize(cqe, uctx)? };
    if state.user {
        // SAFETY: `udata` is valid (checked above).
        unsafe { respond_mminfo(udata, state.mmap_info())? };
    }
    // SAFETY: live CQ.
    unsafe { (*ibcq).cqe = capacity as c_int };
    Ok(())
}

/// The `poll_cq` op, for kernel consumers (user CQs are polled in
/// userspace through the mapping).
///
/// # Safety
///
/// Called only by the RDMA core through rroce's `ib_device_ops`, with the
/// arguments that op's contract describes: live objects of an rroce device,
/// valid attribute and output pointers, and a udata that is null for kernel
/// callers.
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
    let guard = state.inner.lock();
    let layout = guard.ring.layout();
    let prod = guard.ring.index();
    // The kernel is this ring's consumer: the index is its own.
    let mut cons = guard.buf.consumer_index().load_acquire() & layout.index_mask();
    let mut n = 0;
    while n < num && cons != prod {
        // SAFETY: kernel CQ slots hold `ib_wc`s written by `post`; `wc` has
        // room for `num` entries.
        unsafe {
            core::ptr::copy_nonoverlapping(
                guard.buf.at(layout.slot_offset(cons)).cast::<sys::ib_wc>(),
                wc.add(n as usize),
                1,
            )
        };
        cons = layout.next(cons);
        n += 1;
    }
    guard.buf.consumer_index().store_release(cons);
    n
}

/// The `req_notify_cq` op.
///
/// # Safety
///
/// Called only by the RDMA core through rroce's `ib_device_ops`, with the
/// arguments that op's contract describes: live objects of an rroce device,
/// valid attribute and output pointers, and a udata that is null for kernel
/// callers.
pub(crate) unsafe extern "C" fn req_notify_cq(
    ibcq: *mut sys::ib_cq,
    flags: sys::ib_cq_notify_flags,
) -> c_int {
    // SAFETY: live CQ of ours.
    let state = unsafe { RroceCq::state(ibcq) };
    match state.arm(flags) {
        Ok(r) => r,
        Err(e) => e.to_errno(),
    }
}

/// Checks run by KUnit on real kernel CQ state (rings in vmalloc memory,
/// callbacks through the workqueue on the vector's CPU).
pub(crate) mod selftest {
    use super::{CqState, Kind};
    use crate::rdma::sys;
    use core::{
        ffi::c_void,
        sync::atomic::{AtomicI32, AtomicU32, Ordering},
    };
    use kernel::prelude::*;

    /// What the test handler saw.
    struct Seen {
        calls: AtomicU32,
        running: AtomicU32,
        overlap: AtomicU32,
        cpu: AtomicI32,
    }

    static SEEN: Seen = Seen {
        calls: AtomicU32::new(0),
        running: AtomicU32::new(0),
        overlap: AtomicU32::new(0),
        cpu: AtomicI32::new(-1),
    };

    /// # Safety
    ///
    /// Called as a CQ's `comp_handler` by `CqState`'s work item.
    unsafe extern "C" fn handler(_cq: *mut sys::ib_cq, _ctx: *mut c_void) {
        if SEEN.running.fetch_add(1, Ordering::SeqCst) != 0 {
            SEEN.overlap.fetch_add(1, Ordering::SeqCst);
        }
        // SAFETY: plain function call.
        let cpu = unsafe { sys::rroce_helper_smp_processor_id() };
        SEEN.cpu.store(cpu as i32, Ordering::SeqCst);
        SEEN.calls.fetch_add(1, Ordering::SeqCst);
        SEEN.running.fetch_sub(1, Ordering::SeqCst);
    }

    fn reset() {
        SEEN.calls.store(0, Ordering::SeqCst);
        SEEN.overlap.store(0, Ordering::SeqCst);
        SEEN.cpu.store(-1, Ordering::SeqCst);
    }

    /// A kernel CQ with a fake `ib_cq` whose handler is [`handler`].
    fn cq(
        entries: u32,
        vector: u32,
    ) -> Result<(KBox<sys::ib_cq>, Pin<KBox<CqState>>), &'static str> {
        // SAFETY: all-zero is a valid `ib_cq` for the fields read here.
        let mut ibcq = KBox::new(unsafe { core::mem::zeroed::<sys::ib_cq>() }, GFP_KERNEL)
            .map_err(|_| "alloc")?;
        ibcq.comp_handler = Some(handler);
        let p: *mut sys::ib_cq = &mut *ibcq;
        // SAFETY: `ibcq` outlives the state (callers drop the state first);
        // kernel CQ.
        let st = unsafe { CqState::new(p, entries, vector, core::ptr::null_mut()) }
            .map_err(|_| "CqState::new failed")?;
        Ok((ibcq, st))
    }

    /// Waits for queued callbacks to finish.
    fn settle(st: &CqState) {
        // SAFETY: the work item was initialized by `CqState::new`.
        unsafe { sys::rroce_helper_flush_work(st.work.get()) };
    }

    /// Simulates the consumer polling everything.
    fn consume_all(st: &CqState) {
        let g = st.inner.lock();
        let p = g.ring.index();
        g.buf
            .header_word(crate::engine::ring::offset::CONSUMER_INDEX)
            .store(p, Ordering::Release);
    }

    fn wc() -> [u8; 48] {
        [0u8; 48]
    }

    const NEXT_COMP: u32 = sys::ib_cq_notify_flags_IB_CQ_NEXT_COMP;
    const SOLICITED: u32 = sys::ib_cq_notify_flags_IB_CQ_SOLICITED;

    /// One callback per arm, delivered through the workqueue on the CPU of
    /// the completion vector; none without an arm.
    pub(crate) fn callback_per_arm_on_vector_cpu() -> Result<(), &'static str> {
        reset();
        // SAFETY: plain function call.
        let vector = (unsafe { sys::rroce_helper_num_possible_cpus() } - 1).min(1);
        let (_ibcq, st) = cq(16, vector)?;
        st.post(&wc(), Kind::Unsolicited).map_err(|_| "post")?;
        settle(&st);
        if SEEN.calls.load(Ordering::SeqCst) != 0 {
            return Err("callback without an arm");
        }
        // Arming with an unpolled completion newer than the last callback
        // fires at once (NDKPI fire-on-arm).
        st.arm(NEXT_COMP).map_err(|_| "arm")?;
        settle(&st);
        if SEEN.calls.load(Ordering::SeqCst) != 1 {
            return Err("arm with a new unpolled completion did not fire once");
        }
        // SAFETY: plain function call.
        let want = unsafe { sys::rroce_helper_vector_cpu(vector) } as i32;
        if SEEN.cpu.load(Ordering::SeqCst) != want {
            return Err("callback ran on another CPU than the vector's");
        }
        // Three completions after one arm: exactly one callback.
        st.arm(NEXT_COMP).map_err(|_| "arm")?;
        for _ in 0..3 {
            st.post(&wc(), Kind::Unsolicited).map_err(|_| "post")?;
        }
        settle(&st);
        if SEEN.calls.load(Ordering::SeqCst) != 2 {
            return Err("one arm gave more or less than one callback");
        }
        // Poll everything: an arm with nothing unpolled does not fire.
        consume_all(&st);
        st.arm(NEXT_COMP).map_err(|_| "arm")?;
        settle(&st);
        if SEEN.calls.load(Ordering::SeqCst) != 2 {
            return Err("an arm with an empty CQ fired");
        }
        // The pending arm fires on the next completion ...
        st.post(&wc(), Kind::Unsolicited).map_err(|_| "post")?;
        settle(&st);
        if SEEN.calls.load(Ordering::SeqCst) != 3 {
            return Err("pending arm did not fire on the next completion");
        }
        // ... and that completion, still unpolled but already reported, does
        // not satisfy a later arm.
        st.arm(NEXT_COMP).map_err(|_| "arm")?;
        settle(&st);
        if SEEN.calls.load(Ordering::SeqCst) != 3 {
            return Err("an already reported completion satisfied a new arm");
        }
        Ok(())
    }

    /// A solicited arm ignores unsolicited successes and fires on a
    /// solicited completion or an error.
    pub(crate) fn solicited_and_errors() -> Result<(), &'static str> {
        reset();
        let (_ibcq, st) = cq(16, 0)?;
        st.arm(SOLICITED).map_err(|_| "arm")?;
        st.post(&wc(), Kind::Unsolicited).map_err(|_| "post")?;
        settle(&st);
        if SEEN.calls.load(Ordering::SeqCst) != 0 {
            return Err("solicited arm fired on an unsolicited completion");
        }
        st.post(&wc(), Kind::Solicited).map_err(|_| "post")?;
        settle(&st);
        if SEEN.calls.load(Ordering::SeqCst) != 1 {
            return Err("solicited arm did not fire on a solicited completion");
        }
        st.arm(SOLICITED).map_err(|_| "arm")?;
        st.post(&wc(), Kind::Error).map_err(|_| "post")?;
        settle(&st);
        if SEEN.calls.load(Ordering::SeqCst) != 2 {
            return Err("an error did not satisfy a solicited arm");
        }
        Ok(())
    }

    /// Overrun kills the CQ: the arm fires, later posts and arms fail.
    pub(crate) fn overflow_kills() -> Result<(), &'static str> {
        reset();
        let (_ibcq, st) = cq(3, 0)?;
        st.arm(SOLICITED).map_err(|_| "arm")?;
        for _ in 0..3 {
            st.post(&wc(), Kind::Unsolicited)
                .map_err(|_| "post into a non-full CQ")?;
        }
        if st.post(&wc(), Kind::Unsolicited).is_ok() {
            return Err("post into a full CQ succeeded");
        }
        settle(&st);
        if SEEN.calls.load(Ordering::SeqCst) != 1 {
            return Err("overrun did not satisfy the pending arm");
        }
        if st.arm(NEXT_COMP).is_ok() || st.post(&wc(), Kind::Unsolicited).is_ok() {
            return Err("a dead CQ accepted an arm or a completion");
        }
        Ok(())
    }

    /// Completions and arms racing with callbacks running on the vector's
    /// CPU: no two callbacks ever overlap. (Producers on several kthreads
    /// are the conformance suite's job.)
    pub(crate) fn no_overlapping_callbacks() -> Result<(), &'static str> {
        reset();
        let (_ibcq, st) = cq(1024, 0)?;
        for round in 0..200u32 {
            st.arm(NEXT_COMP).map_err(|_| "arm")?;
            st.post(
                &wc(),
                if round % 7 == 0 {
                    Kind::Solicited
                } else {
                    Kind::Unsolicited
                },
            )
            .map_err(|_| "post")?;
            // Let the consumer keep up so the ring never fills.
            consume_all(&st);
        }
        settle(&st);
        if SEEN.overlap.load(Ordering::SeqCst) != 0 {
            return Err("two callbacks ran at once");
        }
        if SEEN.calls.load(Ordering::SeqCst) == 0 {
            return Err("no callback at all");
        }
        Ok(())
    }

    /// Resize keeps every unconsumed completion, in order, growing and
    /// shrinking; shrinking below the count fails and changes nothing.
    pub(crate) fn resize_keeps_completions() -> Result<(), &'static str> {
        let (_ibcq, st) = cq(7, 0)?;
        for v in 0..7u8 {
            let mut e = wc();
            e[0] = v;
            st.post(&e, Kind::Unsolicited).map_err(|_| "post")?;
        }
        let first = |st: &CqState, i: u32| -> u8 {
            let g = st.inner.lock();
            let l = g.ring.layout();
            // SAFETY: `slot_offset` is inside the buffer.
            unsafe { *g.buf.at(l.slot_offset(i)) }
        };
        // Consume three.
        st.inner
            .lock()
            .buf
            .header_word(crate::engine::ring::offset::CONSUMER_INDEX)
            .store(3, Ordering::Release);
        // SAFETY: kernel CQ.
        if unsafe { st.resize(3, core::ptr::null_mut()) }.is_ok() {
            return Err("shrinking below the queued count succeeded");
        }
        // SAFETY: kernel CQ.
        let cap = unsafe { st.resize(100, core::ptr::null_mut()) }.map_err(|_| "grow failed")?;
        if cap < 100 {
            return Err("grown CQ too small");
        }
        for i in 0..4u32 {
            if first(&st, i) != 3 + i as u8 {
                return Err("grow lost or reordered a completion");
            }
        }
        // SAFETY: kernel CQ.
        unsafe { st.resize(4, core::ptr::null_mut()) }.map_err(|_| "shrink to the count failed")?;
        for i in 0..4u32 {
            if first(&st, i) != 3 + i as u8 {
                return Err("shrink lost or reordered a completion");
            }
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
