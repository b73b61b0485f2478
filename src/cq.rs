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
//! The CQ verbs (`create_cq`, `poll_cq`, ...) that turn the RDMA core's
//! calls into these methods are in `crate::verbs::cq`. After an overrun the
//! CQ fails its QPs through the [`OverrunHook`] its creator gave it, so
//! this file never names the QP code.
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
//!
//! # Unsafe code
//!
//! Ring memory is reached only through `QueueBuf`'s checked copies and the
//! ucontext only through `UserCtx` (both `crate::rdma::mmap`). What is left
//! here: the two work item functions, which the workqueue calls with a
//! pointer into a `CqState`, and `RroceCq`'s casts from the core's `ib_cq`,
//! which the transport uses too; the KUnit checks build fake CQs.

use core::{
    mem::{offset_of, size_of, MaybeUninit},
    pin::Pin,
    sync::atomic::Ordering,
};

use kernel::{ffi::c_int, new_spinlock_irq, prelude::*, sync::SpinLockIrq};

use crate::{
    dev::RroceDev,
    engine::{
        notify::{Action, ArmRequest, CompletionKind, CqNotify, Fatal, NotifyError},
        ring::{offset, Layout, Producer, RingError, SharedHeader, SharedIndex},
    },
    rdma::{
        ibcq::IbCq,
        mmap::{MmapInfo, QueueBuf, UserCtx},
        sys,
        work::{self, Work},
    },
};

/// What a CQ does to the QPs attached to it once it has overrun: the QP
/// side's `fail_qps_on_cq`, handed in by the CQ's creator so that the CQ
/// never names the QP code.
pub(crate) type OverrunHook = fn(&RroceDev, *mut sys::ib_cq);

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
    ibcq: IbCq,
    /// Mapped by a user process (else polled through `poll_cq`).
    user: bool,
    /// Entry size: a user CQE or a kernel `ib_wc`.
    entry_size: usize,
    /// The completion vector whose CPU runs the callbacks.
    vector: u32,
    /// Applied by `kill_work` to the CQ's QPs after an overrun.
    on_overrun: OverrunHook,
    /// The dispatcher work item.
    #[pin]
    work: Work,
    /// Moves the QPs attached to the CQ to the error state once it has
    /// overrun (NDKPI: "all associated queue pairs are also unusable").
    #[pin]
    kill_work: Work,
}

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

/// Allocates a ring buffer for `entries` entries and writes its header;
/// mappable by the process of `uctx` (`None`: a kernel CQ).
fn new_ring(
    entries: u32,
    entry_size: usize,
    uctx: Option<&UserCtx<'_>>,
) -> Result<(QueueBuf, Layout)> {
    let layout = Layout::new(entries, entry_size).map_err(ring_err)?;
    let buf = QueueBuf::alloc(layout.total_bytes(), uctx)?;
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
    /// `comp_handler` on `vector`'s CPU, and which applies `on_overrun` to
    /// its QPs when it overruns; mapped by the process of `uctx` (`None`: a
    /// kernel CQ).
    pub(crate) fn new(
        ibcq: IbCq,
        entries: u32,
        vector: u32,
        uctx: Option<&UserCtx<'_>>,
        on_overrun: OverrunHook,
    ) -> Result<Pin<KBox<CqState>>> {
        let user = uctx.is_some();
        let entry_size = if user {
            USER_CQE_SIZE
        } else {
            size_of::<sys::ib_wc>()
        };
        let (buf, layout) = new_ring(entries, entry_size, uctx)?;
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
                on_overrun,
                work <- Work::new(cq_work),
                kill_work <- Work::new(cq_kill_work),
            }),
            GFP_KERNEL,
        )?;
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
    pub(crate) fn mmap_info(&self) -> MmapInfo {
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
                    // The slot lies inside the buffer (type invariant of
                    // `CqInner`) and holds `elem_size >= entry_size >=
                    // entry.len()` bytes; the consumer does not read it
                    // before the release store in `commit`.
                    inner
                        .buf
                        .write_at(slot.offset(), entry)
                        .map_err(|_| EINVAL)?;
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
            // caller may hold one of their locks. `Drop` cancels it.
            self.kill_work.queue();
        }
        self.dispatch(action);
        result
    }

    /// The consumer index as the consumer last wrote it: for a process's
    /// CQ a value read from its memory, good only as a hint.
    pub(crate) fn consumer_hint(&self) -> u32 {
        let guard = self.inner.lock();
        guard.buf.consumer_index().load_acquire()
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
    /// defers a callback runs it before it finishes). Tests use it.
    #[cfg(CONFIG_KUNIT)]
    pub(crate) fn flush_callbacks(&self) {
        self.work.flush();
    }

    /// Hands the dispatcher role to the work item on the vector's CPU.
    fn dispatch(&self, a: Action) {
        if a == Action::RunCallback {
            // The state outlives the work item (`Drop` flushes it).
            self.work.queue_on_vector(self.vector);
        }
    }

    /// Raises `IB_EVENT_CQ_ERR` to the CQ's consumer.
    fn raise_cq_err(&self) {
        self.ibcq.raise_cq_err();
    }

    /// Runs one callback and reports it finished; returns what to do next.
    fn run_callback(&self) -> Action {
        let destroyed = self.inner.lock().notify.is_destroyed();
        if !destroyed {
            // `ibcq` is valid while the state lives (destroy flushes this
            // work item before freeing anything).
            self.ibcq.complete();
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
        // Not called from the work items themselves (the RDMA core never
        // destroys a CQ from its own handler, and no QP is attached any
        // more).
        self.work.flush();
        self.kill_work.cancel_sync();
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
    let state: &CqState = unsafe { work::owner(work, offset_of!(CqState, kill_work)) };
    // The core set the device before `create_cq` (null only for the
    // selftests' fake CQs).
    let ibdev = state.ibcq.device();
    if !ibdev.is_null() {
        // SAFETY: the device of one of our CQs, which outlives it.
        let dev = unsafe { RroceDev::from_ib(ibdev) };
        (state.on_overrun)(dev, state.ibcq.as_ptr());
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
    let state: &CqState = unsafe { work::owner(work, offset_of!(CqState, work)) };
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

    /// Completes `create_cq`: the CQ takes `state` and reports its
    /// capacity.
    ///
    /// # Safety
    ///
    /// `ibcq` is an rroce CQ being created (allocated by the core with
    /// `RroceCq`'s size, no state yet), and `state` was made for it.
    pub(crate) unsafe fn install(ibcq: *mut sys::ib_cq, state: Pin<KBox<CqState>>) {
        let capacity = state.capacity();
        // SAFETY: the core allocated `ibcq` with our size (type invariant).
        let cq = unsafe { &mut *ibcq.cast::<RroceCq>() };
        cq.ibcq.cqe = capacity as c_int;
        // INVARIANT: leaked until `destroy_cq`, never moved (pinned).
        // SAFETY: we never move out of the box.
        cq.state = KBox::into_raw(unsafe { Pin::into_inner_unchecked(state) });
    }

    /// `destroy_cq`: frees the state (its `Drop` cancels the arm and waits
    /// for callbacks).
    ///
    /// # Safety
    ///
    /// `ibcq` is an rroce CQ after its last use.
    pub(crate) unsafe fn destroy(ibcq: *mut sys::ib_cq) {
        // SAFETY: per the caller.
        let cq = unsafe { &mut *ibcq.cast::<RroceCq>() };
        if !cq.state.is_null() {
            // SAFETY: leaked in `install` (type invariant); reclaimed once.
            drop(unsafe { KBox::from_raw(cq.state) });
            cq.state = core::ptr::null_mut();
        }
    }
}

/// Validates a requested CQ size.
pub(crate) fn check_cqe(cqe: u32) -> Result {
    if cqe == 0 || cqe > crate::dev::limits::MAX_CQE {
        return Err(EINVAL);
    }
    Ok(())
}

impl CqState {
    /// Moves every unconsumed entry into a new ring of at least `entries`
    /// entries, mapped by the process of `uctx` (`None` for a kernel CQ, else
    /// the owning process's); on failure nothing changes.
    pub(crate) fn resize(&self, entries: u32, uctx: Option<&UserCtx<'_>>) -> Result<u32> {
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
        let (new_buf, new_layout) = new_ring(entries, self.entry_size, uctx)?;
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
                // The plan's offsets lie inside their buffers, each slot
                // holding `copy_len` bytes.
                new_buf
                    .copy_from(to, &inner.buf, from, plan.copy_len())
                    .map_err(|_| EINVAL)?;
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

impl CqState {
    /// `poll_cq` for kernel consumers (user CQs are polled in userspace
    /// through the mapping): moves up to `out.len()` entries out of the
    /// ring, returns how many.
    pub(crate) fn poll(&self, out: &mut [MaybeUninit<sys::ib_wc>]) -> Result<usize> {
        if self.user {
            return Err(EINVAL);
        }
        let guard = self.inner.lock();
        let layout = guard.ring.layout();
        let prod = guard.ring.index();
        // The kernel is this ring's consumer: the index is its own.
        let mut cons = guard.buf.consumer_index().load_acquire() & layout.index_mask();
        let mut n = 0;
        while n < out.len() && cons != prod {
            // Kernel CQ slots hold `ib_wc`s written by `post`.
            guard
                .buf
                .read_at(layout.slot_offset(cons), &mut out[n])
                .map_err(|_| EINVAL)?;
            cons = layout.next(cons);
            n += 1;
        }
        guard.buf.consumer_index().store_release(cons);
        Ok(n)
    }
}

/// Checks run by KUnit on real kernel CQ state (rings in vmalloc memory,
/// callbacks through the workqueue on the vector's CPU).
#[cfg(CONFIG_KUNIT)]
pub(crate) mod selftest {
    use super::{CqState, Kind};
    use crate::rdma::{ibcq::IbCq, sys};
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
        // SAFETY: `ibcq` outlives the state (callers drop the state first).
        let ibcq_ref = unsafe { IbCq::new(p) };
        let st = CqState::new(ibcq_ref, entries, vector, None, no_qps)
            .map_err(|_| "CqState::new failed")?;
        Ok((ibcq, st))
    }

    /// The overrun hook of the fake CQs, which have no device (and so no
    /// QPs): never called.
    fn no_qps(_dev: &crate::dev::RroceDev, _ibcq: *mut sys::ib_cq) {}

    /// Waits for queued callbacks to finish.
    fn settle(st: &CqState) {
        st.work.flush();
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
        if st.resize(3, None).is_ok() {
            return Err("shrinking below the queued count succeeded");
        }
        let cap = st.resize(100, None).map_err(|_| "grow failed")?;
        if cap < 100 {
            return Err("grown CQ too small");
        }
        for i in 0..4u32 {
            if first(&st, i) != 3 + i as u8 {
                return Err("grow lost or reordered a completion");
            }
        }
        st.resize(4, None)
            .map_err(|_| "shrink to the count failed")?;
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
        if check_cqe(0).is_ok() || check_cqe(crate::dev::limits::MAX_CQE + 1).is_ok() {
            return Err("bad CQ size accepted");
        }
        if check_cqe(1).is_err() || check_cqe(crate::dev::limits::MAX_CQE).is_err() {
            return Err("good CQ size refused");
        }
        Ok(())
    }
}
