// SPDX-License-Identifier: GPL-2.0

//! Memory regions.
//!
//! A DMA MR covers all of kernel memory (kernel consumers' SGEs carry kernel
//! virtual addresses, since rroce registers with no DMA device). A user MR
//! pins the user's pages with `ib_umem_get` so the transport can reach them
//! from any context. Keys are `index << 8 | key byte`, as in rxe, with a
//! random key byte: a key freed and registered again is not guessable from
//! the old one. A user MR's rkey is its lkey; a DMA MR's rkey has another
//! key byte, so the PD's `local_dma_lkey` (known to every kernel user of
//! the PD) is no remote key. Local requests look keys up with [`lookup`],
//! remote ones with [`lookup_remote`]; the access flags are recorded here
//! and enforced by the transport.
//!
//! The MR verbs are in `crate::verbs::mr`; the memory behind an MR is
//! `crate::rdma::mem`. The only `unsafe` left here is `Send`/`Sync` for
//! `RroceMr`, whose embedded `ib_mr` holds the core's raw pointers.

use kernel::prelude::*;

use crate::{
    abi,
    dev::RroceDev,
    rdma::{
        mem::{KernelMem, Umem},
        sys,
    },
};

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

/// What an MR's addresses reach.
pub(crate) enum Memory {
    /// A DMA MR: kernel virtual addresses.
    Kernel(KernelMem),
    /// A user MR: the pinned pages of its range.
    User(Umem),
}

/// rroce's MR, allocated by rroce (the core does not allocate MRs).
///
/// # Invariants
///
/// `ibmr` is first, so the core's `*mut ib_mr` for an rroce MR is a
/// `*mut RroceMr` allocated by [`new_mr`] with `KBox`. A user MR's `mem`
/// covers `[ibmr.iova, ibmr.iova + ibmr.length)`.
#[repr(C)]
pub(crate) struct RroceMr {
    ibmr: sys::ib_mr,
    mem: Memory,
    index: u32,
    access: u32,
}

// SAFETY: the MR is immutable after creation and its memory may be copied
// to and from in any context (`Umem` and `KernelMem` are `Sync`); only the
// core's `ib_mr` holds raw pointers, which rroce reads and never follows.
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
    /// The core's part of the MR.
    pub(crate) fn ibmr(&self) -> &sys::ib_mr {
        &self.ibmr
    }

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

    /// A user MR's byte offset of `va` (checked with [`Self::check`] by the
    /// caller; the copy re-checks it against the page list).
    fn offset(&self, va: u64) -> Result<usize, AccessError> {
        let start = va.checked_sub(self.ibmr.iova).ok_or(AccessError::Bounds)?;
        usize::try_from(start).map_err(|_| AccessError::Bounds)
    }

    /// Copies `data` into the MR at `va`.
    pub(crate) fn write(&self, va: u64, data: &[u8]) -> Result<(), AccessError> {
        match &self.mem {
            Memory::Kernel(k) => k.write(va, data),
            Memory::User(u) => u.write(self.offset(va)?, data),
        }
        .map_err(|_| AccessError::Bounds)
    }

    /// Fills `buf` from the MR at `va`.
    pub(crate) fn read(&self, va: u64, buf: &mut [u8]) -> Result<(), AccessError> {
        match &self.mem {
            Memory::Kernel(k) => k.read(va, buf),
            Memory::User(u) => u.read(self.offset(va)?, buf),
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
) -> Option<&'g RroceMr> {
    lookup_by(dev, key, guard, |mr| mr.ibmr.lkey)
}

/// The MR whose remote key is `key` on `dev` (a peer's RETH or atomic
/// header), valid while `guard` is held. The caller still checks PD,
/// access and bounds ([`RroceMr::check`]).
pub(crate) fn lookup_remote<'g>(
    dev: &RroceDev,
    key: u32,
    guard: &'g kernel::sync::rcu::Guard,
) -> Option<&'g RroceMr> {
    lookup_by(dev, key, guard, |mr| mr.ibmr.rkey)
}

/// The MR at `key`'s index whose `which` key is exactly `key`.
fn lookup_by<'g>(
    dev: &RroceDev,
    key: u32,
    guard: &'g kernel::sync::rcu::Guard,
    which: impl Fn(&RroceMr) -> u32,
) -> Option<&'g RroceMr> {
    let mr = dev.mrs.get((key >> 8) as usize, guard)?;
    (which(mr) == key).then_some(mr)
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
            ibmr,
            mem,
            index,
            access,
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
    /// Frees an MR of `dev` (`dereg_mr`), once the transport can no longer
    /// reach it: a user MR's umem is released before its index is.
    /// Process context.
    pub(crate) fn dereg(mr: KBox<Self>, dev: &RroceDev) {
        // The transport may still hold it inside an RCU read-side section.
        dev.mrs.clear(mr.index as usize);
        kernel::sync::rcu::synchronize_rcu();
        let index = mr.index;
        // Releases the umem, if any.
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
