// SPDX-License-Identifier: GPL-2.0

//! Memory regions.
//!
//! A DMA MR covers all of kernel memory (kernel consumers' SGEs carry kernel
//! virtual addresses, since rroce registers with no DMA device). A user MR
//! pins the user's pages with `ib_umem_get` so the transport can reach them
//! from any context. A fast-registration MR (`alloc_mr`, kernel consumers
//! only) reaches kernel memory through the page list `map_mr_sg` gave it,
//! while a REG_MR work request has made it valid (the rules are
//! `crate::engine::fastreg`'s). Keys are `index << 8 | key byte`, as in rxe,
//! with a random key byte: a key freed and registered again is not
//! guessable from the old one. A user MR's rkey is its lkey; a DMA MR's
//! rkey has another key byte, so the PD's `local_dma_lkey` (known to every
//! kernel user of the PD) is no remote key. Local requests look keys up
//! with [`lookup`], remote ones with [`lookup_remote`]; both give an
//! [`MrRef`], through which the transport checks and copies.
//!
//! The core and the consumer write the embedded `ib_mr` (`iova`, `length`,
//! `page_size` in `ib_map_mr_sg`, the key byte in
//! `ib_update_fast_reg_key`), so it is `Opaque` here and the transport reads
//! only rroce's own copies of what it needs.
//!
//! The MR verbs are in `crate::verbs::mr`; the memory behind an MR is
//! `crate::rdma::mem`.

use core::{
    pin::Pin,
    sync::atomic::{AtomicU32, Ordering},
};

use kernel::{new_spinlock_irq, prelude::*, sync::SpinLockIrq, types::Opaque};

use crate::{
    abi,
    dev::RroceDev,
    engine::fastreg::{self, FrError, FrState, Registration},
    rdma::{
        mem::{KernelMem, OdpError, OdpMem, Umem},
        sys,
    },
};

/// The access flags an MR may carry (`IB_ACCESS_*` that rroce implements).
const SUPPORTED_ACCESS: u32 = sys::ib_access_flags_IB_ACCESS_LOCAL_WRITE
    | sys::ib_access_flags_IB_ACCESS_REMOTE_WRITE
    | sys::ib_access_flags_IB_ACCESS_REMOTE_READ
    | sys::ib_access_flags_IB_ACCESS_REMOTE_ATOMIC
    | sys::ib_access_flags_IB_ACCESS_MW_BIND
    | sys::ib_access_flags_IB_ACCESS_ON_DEMAND
    | sys::ib_access_flags_IB_ACCESS_RELAXED_ORDERING;

// The engine's page list limit is the one the device reports.
const _: () = assert!(fastreg::MAX_PAGE_LIST == crate::dev::limits::MAX_FAST_REG_PAGE_LIST_LEN);

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

/// What an MR's addresses reach.
pub(crate) enum Memory {
    /// A DMA MR: kernel virtual addresses.
    Kernel(KernelMem),
    /// A user MR: the pinned pages of its range.
    User(Umem),
    /// A fast-registration MR: its current registration, if valid.
    Fast(Pin<KBox<FastMr>>),
    /// A user MR with on-demand paging: the process's pages as they are.
    Odp(OdpMem),
}

/// A fast-registration MR's mutable part.
struct FastState {
    /// The key of the current (or last) registration; lkey and rkey alike.
    key: u32,
    /// The access flags of the current registration.
    access: u32,
    /// Counts registrations and invalidations: an [`MrRef`] taken under
    /// one registration reaches nothing under the next.
    generation: u32,
    /// The current registration: `Some` exactly when the MR is valid,
    /// so the state cannot disagree with it.
    reg: Option<Registration>,
    /// The last `map_mr_sg`: first byte, length and page shift.
    map: Option<(u64, u64, u32)>,
    /// The mapped pages' kernel virtual addresses (what a DMA address is
    /// on rroce), each the start of a page of the mapping's page size; at
    /// most its capacity, `max_num_sg`, allocated at `alloc_mr`.
    pages: KVec<u64>,
}

impl FastState {
    /// Free or valid: valid while a registration is current.
    fn state(&self) -> FrState {
        if self.reg.is_some() {
            FrState::Valid
        } else {
            FrState::Free
        }
    }
}

/// A fast-registration MR's state, behind its lock. The lock is taken in
/// any context (the transport runs in softirq and under the QP lock) and
/// nothing else is taken under it.
#[pin_data]
pub(crate) struct FastMr {
    #[pin]
    st: SpinLockIrq<FastState>,
    /// Kernel memory, as the page list names it.
    mem: KernelMem,
}

impl FastMr {
    /// An empty fast-registration MR for up to `max_pages` pages.
    pub(crate) fn new(max_pages: u32) -> Result<Pin<KBox<Self>>> {
        let pages = KVec::with_capacity(max_pages as usize, GFP_KERNEL)?;
        KBox::pin_init(
            pin_init!(Self {
                st <- new_spinlock_irq!(
                    FastState {
                        key: 0,
                        access: 0,
                        generation: 0,
                        reg: None,
                        map: None,
                        pages,
                    },
                    "rroce::fast_mr"
                ),
                // SAFETY: `alloc_mr` is a kernel verb only (uverbs has no
                // fast registration): the pages are a kernel consumer's.
                mem: unsafe { KernelMem::new() },
            }),
            GFP_KERNEL,
        )
    }

    /// Starts a new mapping with pages of `1 << shift` bytes
    /// (`map_mr_sg`, before `ib_sg_to_pages`).
    pub(crate) fn map_begin(&self, shift: u32) {
        let mut st = self.st.lock();
        st.pages.clear();
        st.map = Some((0, 0, shift));
    }

    /// Appends a page of the mapping (`ib_sg_to_pages`' callback);
    /// `ENOMEM` past `max_num_sg` pages.
    pub(crate) fn map_page(&self, addr: u64) -> Result {
        // Never allocates: the list was sized at `alloc_mr`.
        self.st
            .lock()
            .pages
            .push_within_capacity(addr)
            .map_err(|_| ENOMEM)
    }

    /// Ends a mapping: its first byte and length as `ib_sg_to_pages` set
    /// them.
    pub(crate) fn map_end(&self, iova: u64, length: u64) {
        let mut st = self.st.lock();
        if let Some((_, _, shift)) = st.map {
            st.map = Some((iova, length, shift));
        }
    }
}

/// rroce's MR, allocated by rroce (the core does not allocate MRs).
///
/// # Invariants
///
/// `ibmr` is first, so the core's `*mut ib_mr` for an rroce MR is a
/// `*mut RroceMr` allocated by [`new_mr`] with `KBox`. `pd`, `lkey`,
/// `rkey`, `iova` and `length` are the values the MR was created with and
/// never change; a user MR's `mem` covers `[iova, iova + length)`.
#[repr(C)]
pub(crate) struct RroceMr {
    ibmr: Opaque<sys::ib_mr>,
    mem: Memory,
    index: u32,
    access: u32,
    pd: *mut sys::ib_pd,
    lkey: u32,
    rkey: u32,
    iova: u64,
    length: u64,
    /// Memory windows bound to this MR, or [`DEREGISTERING`] once
    /// `dereg_mr` found none (no window may be bound after that).
    bound_mws: AtomicU32,
    /// ODP: page faults in progress outside any RCU section, plus
    /// [`FAULTS_CLOSED`] once deregistration began (it waits for them).
    faults: AtomicU32,
}

/// `RroceMr::faults` once the MR is being deregistered.
const FAULTS_CLOSED: u32 = 1 << 31;

/// `RroceMr::bound_mws` of an MR being deregistered.
const DEREGISTERING: u32 = u32::MAX;

// SAFETY: the fixed fields never change after creation, a fast MR's state
// is behind its lock, and the memory may be copied to and from in any
// context (`Umem` and `KernelMem` are `Sync`); `ibmr` and `pd` are the
// core's, which rroce compares or reads in the verbs only.
unsafe impl Sync for RroceMr {}
// SAFETY: as above.
unsafe impl Send for RroceMr {}

/// Why a memory access through an MR was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AccessError {
    /// Unknown key, other PD, missing access right, or a fast registration
    /// that ended.
    Key,
    /// Outside the MR.
    Bounds,
    /// ODP: a page is not there right now; [`fault_in`] brings it.
    Absent,
}

impl From<OdpError> for AccessError {
    fn from(e: OdpError) -> Self {
        match e {
            OdpError::Absent => AccessError::Absent,
            OdpError::Bounds => AccessError::Bounds,
        }
    }
}

impl RroceMr {
    /// The device the core says the MR belongs to.
    ///
    /// # Safety
    ///
    /// The core handed the MR back (it set `device` after `alloc_mr`,
    /// `get_dma_mr` or `reg_user_mr` returned and never changes it).
    pub(crate) unsafe fn ib_device(&self) -> *mut sys::ib_device {
        // SAFETY: per the caller; a plain read of a field nobody writes
        // any more.
        unsafe { (*self.ibmr.get()).device }
    }

    /// The fast-registration state, if this is a fast-registration MR.
    pub(crate) fn fast(&self) -> Option<&FastMr> {
        match &self.mem {
            Memory::Fast(f) => Some(f),
            _ => None,
        }
    }

    /// A user MR's byte offset of `va` (checked with [`MrRef::check`] by
    /// the caller; the copy re-checks it against the page list).
    fn offset(&self, va: u64) -> Result<usize, AccessError> {
        let start = va.checked_sub(self.iova).ok_or(AccessError::Bounds)?;
        usize::try_from(start).map_err(|_| AccessError::Bounds)
    }
}

/// An MR found by one of its keys, valid while the RCU read-side section
/// it was found in lasts. For a fast-registration MR it stands for the
/// registration the key named: once that is invalidated (or replaced),
/// every check and copy through it fails.
#[derive(Clone, Copy)]
pub(crate) struct MrRef<'g> {
    mr: &'g RroceMr,
    generation: u32,
}

impl<'g> MrRef<'g> {
    /// Checks that `[va, va + len)` lies in the MR, on `pd`, with every
    /// `need` access flag.
    pub(crate) fn check(
        &self,
        pd: *mut sys::ib_pd,
        va: u64,
        len: u64,
        need: u32,
    ) -> Result<(), AccessError> {
        if self.mr.pd != pd {
            return Err(AccessError::Key);
        }
        if let Memory::Fast(f) = &self.mr.mem {
            let st = f.st.lock();
            let reg = self.registration(&st)?;
            if st.access & need != need {
                return Err(AccessError::Key);
            }
            return if reg.contains(va, len) {
                Ok(())
            } else {
                Err(AccessError::Bounds)
            };
        }
        if self.mr.access & need != need {
            return Err(AccessError::Key);
        }
        let end = va.checked_add(len).ok_or(AccessError::Bounds)?;
        let mr_end = self
            .mr
            .iova
            .checked_add(self.mr.length)
            .ok_or(AccessError::Bounds)?;
        if va < self.mr.iova || end > mr_end {
            return Err(AccessError::Bounds);
        }
        Ok(())
    }

    /// What binding a memory window to this MR (on `pd`) needs to know;
    /// `None` for an MR windows cannot use (DMA, fast registration).
    pub(crate) fn window_facts(&self, pd: *mut sys::ib_pd) -> Option<crate::engine::mw::MrFacts> {
        matches!(self.mr.mem, Memory::User(_) | Memory::Odp(_)).then_some(
            crate::engine::mw::MrFacts {
                same_pd: self.mr.pd == pd,
                access: self.mr.access,
                iova: self.mr.iova,
                length: self.mr.length,
                lkey: self.mr.lkey,
            },
        )
    }

    /// The pages of `[va, va + len)` of this MR, for [`fault_in`] (named
    /// by its local key: an access through a window key faults in the
    /// window's MR); `len` is cut at the MR's end.
    pub(crate) fn fault(&self, va: u64, len: u32, write: bool) -> Fault {
        let end = self.mr.iova.saturating_add(self.mr.length);
        let room = u32::try_from(end.saturating_sub(va)).unwrap_or(u32::MAX);
        Fault {
            key: self.mr.lkey,
            remote: false,
            va,
            len: len.min(room),
            write,
        }
    }

    /// Counts a window bound to the MR; `false` if it is being
    /// deregistered.
    pub(crate) fn pin_window(&self) -> bool {
        self.mr
            .bound_mws
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n != DEREGISTERING).then(|| n.saturating_add(1))
            })
            .is_ok()
    }

    /// A window bound to the MR (counted by [`Self::pin_window`]) left it.
    pub(crate) fn unpin_window(&self) {
        let _ = self
            .mr
            .bound_mws
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n != DEREGISTERING && n > 0).then(|| n - 1)
            });
    }

    /// The registration this reference stands for, if still current.
    fn registration(&self, st: &FastState) -> Result<Registration, AccessError> {
        match st.reg {
            Some(r) if st.generation == self.generation => Ok(r),
            _ => Err(AccessError::Key),
        }
    }

    /// Copies between `buf` and a fast registration at `va`, page by page,
    /// under the MR's lock (so an invalidation waits for the copy).
    fn fast_copy(
        &self,
        f: &FastMr,
        va: u64,
        buf: *mut u8,
        len: usize,
        to_mem: bool,
    ) -> Result<(), AccessError> {
        let st = f.st.lock();
        let reg = self.registration(&st)?;
        let mut done = 0usize;
        while done < len {
            let at = va.checked_add(done as u64).ok_or(AccessError::Bounds)?;
            let p = reg
                .piece(at, (len - done) as u64)
                .ok_or(AccessError::Bounds)?;
            let page = *st.pages.get(p.index as usize).ok_or(AccessError::Bounds)?;
            let addr = page.checked_add(p.offset).ok_or(AccessError::Bounds)?;
            // No truncation: a piece is at most the access's remaining
            // length, a `usize`.
            let n = p.len as usize;
            // SAFETY: `buf` has `len` bytes (caller) and `done + n <= len`.
            let part = unsafe { buf.add(done) };
            let r = if to_mem {
                // SAFETY: `part` has `n` readable bytes (above).
                let src = unsafe { core::slice::from_raw_parts(part, n) };
                f.mem.write(addr, src)
            } else {
                // SAFETY: `part` has `n` writable bytes (above), not
                // otherwise borrowed during the call.
                let dst = unsafe { core::slice::from_raw_parts_mut(part, n) };
                f.mem.read(addr, dst)
            };
            r.map_err(|_| AccessError::Bounds)?;
            done += n;
        }
        Ok(())
    }

    /// Copies `data` into the MR at `va`.
    pub(crate) fn write(&self, va: u64, data: &[u8]) -> Result<(), AccessError> {
        match &self.mr.mem {
            Memory::Kernel(k) => k.write(va, data),
            Memory::User(u) => u.write(self.mr.offset(va)?, data),
            Memory::Odp(o) => return Ok(o.write(self.mr.offset(va)?, data)?),
            Memory::Fast(f) => {
                // `fast_copy` only reads `buf` when copying to memory.
                return self.fast_copy(f, va, data.as_ptr().cast_mut(), data.len(), true);
            }
        }
        .map_err(|_| AccessError::Bounds)
    }

    /// Copies the pieces of `data` (a received payload) into the MR from
    /// `va` on.
    pub(crate) fn write_scatter(
        &self,
        va: u64,
        data: crate::engine::scatter::Scatter<'_>,
    ) -> Result<(), AccessError> {
        if let Some(d) = data.contiguous() {
            return self.write(va, d);
        }
        data.try_for_each(|off, piece| {
            let at = va.checked_add(off as u64).ok_or(AccessError::Bounds)?;
            self.write(at, piece)
        })
    }

    /// Calls `f` with each pinned page piece behind `[va, va + len)`, in
    /// order: the page, the offset in it and the bytes there, for sending
    /// them without a copy. Only a user MR's memory is pinned pages that
    /// may be shared so (a kernel consumer's may be slab memory, an ODP
    /// MR's may move): `false` for any other MR, out of bounds, or when
    /// `f` says `false`. The pages are pinned while the RCU read-side
    /// section this reference was found in lasts; whoever keeps one longer
    /// takes a reference to it.
    pub(crate) fn pages(
        &self,
        va: u64,
        len: usize,
        f: impl FnMut(*mut sys::page, u32, u32) -> bool,
    ) -> bool {
        match &self.mr.mem {
            Memory::User(u) => self
                .mr
                .offset(va)
                .is_ok_and(|off| u.for_each_page(off, len, f).is_ok()),
            _ => false,
        }
    }

    /// Fills `buf` from the MR at `va`.
    pub(crate) fn read(&self, va: u64, buf: &mut [u8]) -> Result<(), AccessError> {
        match &self.mr.mem {
            Memory::Kernel(k) => k.read(va, buf),
            Memory::User(u) => u.read(self.mr.offset(va)?, buf),
            Memory::Odp(o) => return Ok(o.read(self.mr.offset(va)?, buf)?),
            Memory::Fast(f) => return self.fast_copy(f, va, buf.as_mut_ptr(), buf.len(), false),
        }
        .map_err(|_| AccessError::Bounds)
    }
}

/// The MR whose local key is `key` on `dev` (an SGE's), valid while
/// `guard` is held.
pub(crate) fn lookup<'g>(
    dev: &RroceDev,
    key: u32,
    guard: &'g kernel::sync::rcu::Guard,
) -> Option<MrRef<'g>> {
    lookup_by(dev, key, guard, false)
}

/// The MR whose remote key is `key` on `dev` (a peer's RETH or atomic
/// header), valid while `guard` is held. The caller still checks PD,
/// access and bounds ([`MrRef::check`]).
pub(crate) fn lookup_remote<'g>(
    dev: &RroceDev,
    key: u32,
    guard: &'g kernel::sync::rcu::Guard,
) -> Option<MrRef<'g>> {
    lookup_by(dev, key, guard, true)
}

/// The MR at `key`'s index whose local (`remote`: remote) key is exactly
/// `key`; a fast-registration MR only while valid under that key.
fn lookup_by<'g>(
    dev: &RroceDev,
    key: u32,
    guard: &'g kernel::sync::rcu::Guard,
    remote: bool,
) -> Option<MrRef<'g>> {
    let mr = dev.mrs.get((key >> 8) as usize, guard)?;
    if let Memory::Fast(f) = &mr.mem {
        let st = f.st.lock();
        return (st.state() == FrState::Valid && st.key == key).then_some(MrRef {
            mr,
            generation: st.generation,
        });
    }
    let k = if remote { mr.rkey } else { mr.lkey };
    (k == key).then_some(MrRef { mr, generation: 0 })
}

/// The MR index and the current iova of `ibmr`, the MR a kernel
/// consumer's REG_MR work request names, if it is a fast-registration MR
/// of the device `ibdev`. The iova is read now, at the post: the consumer
/// may have changed it since `ib_map_mr_sg` (xprtrdma puts an RPC XID in
/// its high bits).
///
/// # Safety
///
/// `ibmr` is a live MR of any device, not written by anyone during the
/// call (the consumer posting it owns it); `ibdev` is an rroce device.
pub(crate) unsafe fn reg_target(
    ibdev: *mut sys::ib_device,
    ibmr: *mut sys::ib_mr,
) -> Option<(u32, u64)> {
    if ibmr.is_null() {
        return None;
    }
    // SAFETY: a live MR (caller); `device` is set by the core at creation.
    if unsafe { (*ibmr).device } != ibdev {
        return None;
    }
    // SAFETY: an MR of an rroce device is an `RroceMr` (type invariant),
    // live for the call.
    let mr = unsafe { &*ibmr.cast::<RroceMr>() };
    mr.fast()?;
    // SAFETY: live, and nobody writes it during the call (caller).
    let iova = unsafe { (*ibmr).iova };
    Some((mr.index, iova))
}

/// Executes a REG_MR work request of a QP on `pd`: the fast-registration
/// MR at `index` becomes valid with `key`, `access` and `iova` over its
/// last mapping.
pub(crate) fn fast_register(
    dev: &RroceDev,
    guard: &kernel::sync::rcu::Guard,
    pd: *mut sys::ib_pd,
    (index, key, access, iova): (u32, u32, u32, u64),
) -> Result<(), FrError> {
    let mr = dev
        .mrs
        .get(index as usize, guard)
        .ok_or(FrError::KeyIndex)?;
    let f = mr.fast().ok_or(FrError::NotFastReg)?;
    check_access(access).map_err(|_| FrError::Access)?;
    let mut st = f.st.lock();
    fastreg::may_register(st.state(), mr.pd == pd, st.key, key)?;
    let (map_iova, length, shift) = st.map.ok_or(FrError::Layout)?;
    let npages = u32::try_from(st.pages.len()).map_err(|_| FrError::Layout)?;
    let reg = Registration::new(map_iova, iova, length, shift, npages)?;
    st.key = key;
    st.access = access;
    st.reg = Some(reg);
    st.generation = st.generation.wrapping_add(1);
    Ok(())
}

/// Invalidates the fast-registration MR named by `key` for a QP on `pd`
/// (LOCAL_INV, or a peer's SEND with invalidate).
pub(crate) fn invalidate(
    dev: &RroceDev,
    guard: &kernel::sync::rcu::Guard,
    pd: *mut sys::ib_pd,
    key: u32,
) -> Result<(), FrError> {
    let mr = dev
        .mrs
        .get((key >> 8) as usize, guard)
        .ok_or(FrError::KeyMismatch)?;
    let Some(f) = mr.fast() else {
        return fastreg::may_invalidate(false, mr.pd == pd, 0, key);
    };
    let mut st = f.st.lock();
    fastreg::may_invalidate(true, mr.pd == pd, st.key, key)?;
    st.reg = None;
    st.generation = st.generation.wrapping_add(1);
    Ok(())
}

/// What [`fault_in`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Faulted {
    /// The pages are in: the transport's next copy finds them.
    In,
    /// They cannot be: not mapped, read-only for a write, or the key names
    /// no ODP MR any more. The next access that needs them fails instead
    /// of waiting again.
    Never,
    /// Not now (the range kept changing under the fault for the core's
    /// timeout, or memory ran short): worth another try.
    NotNow,
}

/// Faults in the pages `f` names. Process context (it sleeps).
pub(crate) fn fault_in(dev: &RroceDev, f: Fault) -> Faulted {
    let mr: &RroceMr = {
        let guard = kernel::sync::rcu::read_lock();
        let Some(m) = lookup_by(dev, f.key, &guard, f.remote) else {
            return Faulted::Never;
        };
        if !matches!(m.mr.mem, Memory::Odp(_))
            || m.mr
                .faults
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                    (n & FAULTS_CLOSED == 0).then_some(n + 1)
                })
                .is_err()
        {
            return Faulted::Never;
        }
        // SAFETY: counted in `faults` above: `dereg` waits for the count
        // to drop before it frees the MR, so it outlives the RCU section.
        unsafe { &*core::ptr::from_ref(m.mr) }
    };
    let r = match (&mr.mem, mr.offset(f.va)) {
        (Memory::Odp(o), Ok(off)) => match o.fault(off as u64, u64::from(f.len), f.write) {
            Ok(()) => Faulted::In,
            Err(e) if e == EBUSY || e == ENOMEM || e == EAGAIN => Faulted::NotNow,
            Err(e) => {
                pr_debug!("ODP fault at {:#x} (+{}): {:?}\n", f.va, f.len, e);
                Faulted::Never
            }
        },
        _ => Faulted::Never,
    };
    mr.faults.fetch_sub(1, Ordering::AcqRel);
    r
}

/// Why gathering or scattering through a WQE's SGEs failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SgeError {
    /// An SGE is unreadable, or its key, PD, range or rights are wrong.
    Prot,
    /// The SGEs hold fewer bytes than the message.
    Len,
    /// ODP: pages of an SGE's MR are not there yet.
    Absent(Fault),
}

/// ODP pages a copy needed and did not find: what [`fault_in`] brings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Fault {
    /// The MR's key: a local key, or (`remote`) a remote one.
    pub(crate) key: u32,
    pub(crate) remote: bool,
    /// The bytes.
    pub(crate) va: u64,
    pub(crate) len: u32,
    /// Needed for writing.
    pub(crate) write: bool,
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
    mut f: impl FnMut(MrRef<'_>, u64, core::ops::Range<usize>) -> Result<(), AccessError>,
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
        f(mr, va, done as usize..(done + n) as usize).map_err(|e| match e {
            AccessError::Absent => SgeError::Absent(Fault {
                key: sge.lkey,
                remote: false,
                va,
                len: n,
                write: need & sys::ib_access_flags_IB_ACCESS_LOCAL_WRITE != 0,
            }),
            _ => SgeError::Prot,
        })?;
        done += n;
        off = 0;
    }
    if done == len {
        Ok(())
    } else {
        Err(SgeError::Len)
    }
}

/// A random key byte.
fn key_byte() -> u32 {
    // SAFETY: plain call.
    unsafe { sys::rroce_helper_random_u32() & 0xff }
}

/// The (lkey, rkey) of a new MR at `index`: random key bytes; a DMA MR's
/// rkey differs from its lkey.
fn new_keys(index: u32, dma: bool) -> (u32, u32) {
    let lkey = (index << 8) | key_byte();
    if !dma {
        return (lkey, lkey);
    }
    let r = key_byte();
    let r = if r == lkey & 0xff { r ^ 0x5a } else { r };
    (lkey, (index << 8) | r)
}

/// Allocates an MR on `pd` of `dev` over `mem`; returns a pointer for the
/// core or an error (`mem` is dropped, a umem released, on error). With
/// every index of the MR table in use, fails with `ENOMEM`.
pub(crate) fn new_mr(
    dev: &RroceDev,
    pd: *mut sys::ib_pd,
    access: u32,
    mem: Memory,
    (iova, length): (u64, u64),
    mr_type: sys::ib_mr_type,
) -> Result<*mut sys::ib_mr> {
    let index = dev.mr_ids.alloc().map_err(|_| ENOMEM)?;
    if index as usize >= dev.mrs.len() {
        // The allocator's bitmap is rounded up past the table.
        let _ = dev.mr_ids.free(index);
        return Err(ENOMEM);
    }
    let (lkey, rkey) = new_keys(index, matches!(mem, Memory::Kernel(_)));
    if let Memory::Fast(f) = &mem {
        // Not published yet: the first REG_MR must name this key's index.
        f.st.lock().key = lkey;
    }
    // The rest all zero; the core fills its bookkeeping.
    let ibmr = sys::ib_mr {
        lkey,
        rkey,
        iova,
        length,
        type_: mr_type,
        pd,
        ..Default::default()
    };
    let mr = match KBox::new(
        RroceMr {
            ibmr: Opaque::new(ibmr),
            mem,
            index,
            access,
            pd,
            lkey,
            rkey,
            iova,
            length,
            bound_mws: AtomicU32::new(0),
            faults: AtomicU32::new(0),
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
    // `dereg_mr`; the fixed fields are set once, here.
    let raw = KBox::into_raw(mr);
    // Published for the transport; cleared (with a grace period) in
    // `dereg_mr` before the MR is freed.
    if dev.mrs.set(index as usize, raw).is_err() {
        // SAFETY: `raw` came from `KBox::into_raw` above and was never
        // published.
        drop(unsafe { KBox::from_raw(raw) });
        let _ = dev.mr_ids.free(index);
        return Err(ENOMEM);
    }
    Ok(raw.cast())
}

impl RroceMr {
    /// Starts deregistering: fails (`EINVAL`, as rxe and IBA 10.6.7.2.6)
    /// while a memory window is bound to the MR; once it succeeded no
    /// window can be bound to it any more.
    pub(crate) fn begin_dereg(&self) -> Result {
        self.bound_mws
            .compare_exchange(0, DEREGISTERING, Ordering::AcqRel, Ordering::Acquire)
            .map(|_| ())
            .map_err(|_| EINVAL)
    }

    /// Frees an MR of `dev` (`dereg_mr`), once the transport can no longer
    /// reach it and no page fault runs on it: a user MR's umem is released
    /// before its index is. Process context.
    pub(crate) fn dereg(mr: KBox<Self>, dev: &RroceDev) {
        // No new fault starts; one running ends within the core's HMM
        // timeout.
        mr.faults.fetch_or(FAULTS_CLOSED, Ordering::AcqRel);
        while mr.faults.load(Ordering::Acquire) != FAULTS_CLOSED {
            kernel::time::delay::fsleep(kernel::time::Delta::from_millis(1));
        }
        // The transport may still hold it inside an RCU read-side section.
        dev.mrs.clear(mr.index as usize);
        kernel::sync::rcu::synchronize_rcu();
        let index = mr.index;
        // Releases the umem or the page list, if any.
        drop(mr);
        if dev.mr_ids.free(index).is_err() {
            pr_warn!("MR index {} was not allocated\n", index);
        }
    }
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
