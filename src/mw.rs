// SPDX-License-Identifier: GPL-2.0

//! Memory windows: the objects behind `alloc_mw`, and binding, invalidating
//! and reaching memory through them for the transport. The rules are
//! `engine::mw`'s; this file holds the state they act on.
//!
//! The core frees its `ib_mw` as soon as `dealloc_mw` returns, so the
//! window the transport finds (under RCU, in `RroceDev::mws`) is a
//! separate object, [`MwObj`], that `dealloc_mw` unpublishes and frees
//! after a grace period. A binding names its MR by local key; the MR
//! counts its bound windows and cannot be deregistered while it has any,
//! so the key keeps naming that MR while the binding lasts.

use core::pin::Pin;

use kernel::{new_spinlock_irq, prelude::*, sync::rcu, sync::SpinLockIrq, types::Opaque};

use crate::{
    abi,
    dev::RroceDev,
    engine::mw::{self, BindRequest, Binding, MwError, MwType, Window},
    mr::{self, MrRef},
    rdma::sys,
};

/// rroce's part of the core's `ib_mw` (its size is `size_ib_mw`).
///
/// # Invariants
///
/// `ibmw` is first, so the core's `*mut ib_mw` is a `*mut RroceMw`. `obj`
/// is the window published at its index from `alloc_mw` until `dealloc_mw`.
#[repr(C)]
pub(crate) struct RroceMw {
    ibmw: Opaque<sys::ib_mw>,
    obj: *mut MwObj,
}

/// A memory window as the transport sees it.
///
/// # Invariants
///
/// `pd` is the window's PD, which outlives it (the core holds a use count
/// until `dealloc_mw`); rroce only compares it.
#[pin_data]
pub(crate) struct MwObj {
    index: u32,
    pd: *mut sys::ib_pd,
    /// Taken in any context, under a QP's lock; nothing is taken under it.
    #[pin]
    st: SpinLockIrq<Window>,
}

// SAFETY: `pd` is only compared, the state is behind its lock.
unsafe impl Sync for MwObj {}
// SAFETY: as above.
unsafe impl Send for MwObj {}

/// Allocates the window `ibmw` the core made (type, PD and device set) and
/// sets its key.
///
/// # Safety
///
/// `ibmw` is the core's new window of an rroce device, `size_ib_mw` bytes,
/// not yet visible to anyone else.
pub(crate) unsafe fn alloc(ibmw: *mut sys::ib_mw) -> Result {
    // SAFETY: per the caller.
    let (device, pd, ty) = unsafe { ((*ibmw).device, (*ibmw).pd, (*ibmw).type_) };
    let ty = match ty {
        sys::ib_mw_type_IB_MW_TYPE_1 => MwType::One,
        sys::ib_mw_type_IB_MW_TYPE_2 => MwType::Two,
        _ => return Err(EINVAL),
    };
    // SAFETY: an rroce device (caller), alive while it has objects.
    let dev = unsafe { RroceDev::from_ib(device) };
    let index = dev.mw_ids.alloc().map_err(|_| ENOMEM)?;
    // SAFETY: plain call.
    let byte = unsafe { sys::rroce_helper_random_u32() } as u8;
    let Some(key) = mw::key_of(index, byte).filter(|_| (index as usize) < dev.mws.len()) else {
        let _ = dev.mw_ids.free(index);
        return Err(ENOMEM);
    };
    let obj = KBox::pin_init(
        pin_init!(MwObj {
            index,
            pd,
            st <- new_spinlock_irq!(Window::new(ty, key), "rroce::mw"),
        }),
        GFP_KERNEL,
    );
    let obj = match obj {
        Ok(o) => o,
        Err(e) => {
            let _ = dev.mw_ids.free(index);
            return Err(e);
        }
    };
    // SAFETY: the window is never moved out of its box; it is freed as a
    // `Pin<KBox>` again in `dealloc`.
    let raw = KBox::into_raw(unsafe { Pin::into_inner_unchecked(obj) });
    if dev.mws.set(index as usize, raw).is_err() {
        // SAFETY: from `into_raw` above, never published.
        drop(unsafe { KBox::from_raw(raw) });
        let _ = dev.mw_ids.free(index);
        return Err(ENOMEM);
    }
    // INVARIANT: `obj` is published at its index until `dealloc`.
    // SAFETY: per the caller, `ibmw` is an `RroceMw` of ours to fill.
    unsafe {
        let rmw = ibmw.cast::<RroceMw>();
        (*rmw).obj = raw;
        (*ibmw).rkey = key;
    }
    Ok(())
}

/// Frees window `ibmw` (`dealloc_mw`); a binding it had ends.
///
/// # Safety
///
/// `ibmw` is a window of an rroce device that [`alloc`] set up, after its
/// last use by the core; called once, in process context.
pub(crate) unsafe fn dealloc(ibmw: *mut sys::ib_mw) {
    // SAFETY: per the caller (type invariant of `RroceMw`).
    let (dev, raw) = unsafe {
        (
            RroceDev::from_ib((*ibmw).device),
            (*ibmw.cast::<RroceMw>()).obj,
        )
    };
    // SAFETY: published by `alloc` (type invariant), freed only here.
    let index = unsafe { (*raw).index };
    dev.mws.clear(index as usize);
    // No transport path can find it after the grace period.
    rcu::synchronize_rcu();
    // SAFETY: from `KBox::into_raw` in `alloc`, unreachable now.
    let obj = unsafe { KBox::from_raw(raw) };
    let ended = obj.st.lock().invalidate();
    if let Some(b) = ended {
        unpin_mr(dev, b);
    }
    drop(obj);
    if dev.mw_ids.free(index).is_err() {
        pr_warn!("MW index {} was not allocated\n", index);
    }
}

/// The window `key` names on `dev`, valid while `guard` is held.
fn find<'g>(dev: &RroceDev, key: u32, guard: &'g rcu::Guard) -> Option<&'g MwObj> {
    dev.mws.get(mw::table_index(key)? as usize, guard)
}

/// A binding ended: its MR is no longer bound.
fn unpin_mr(dev: &RroceDev, b: Binding) {
    let guard = rcu::read_lock();
    if let Some(m) = mr::lookup(dev, b.mr_lkey, &guard) {
        m.unpin_window();
    }
}

/// Executes a BIND_MW work request `wr` of QP `qpn` on `pd`.
pub(crate) fn bind(
    dev: &RroceDev,
    guard: &rcu::Guard,
    pd: *mut sys::ib_pd,
    qpn: u32,
    wr: &abi::WrMw,
) -> Result<(), MwError> {
    let w = find(dev, wr.mw_rkey, guard).ok_or(MwError::KeyMismatch)?;
    let req = BindRequest {
        mw_key: wr.mw_rkey,
        new_key: wr.rkey,
        addr: wr.addr,
        length: wr.length,
        access: wr.access,
    };
    let target: Option<MrRef<'_>> = if wr.length != 0 {
        mr::lookup(dev, wr.mr_lkey, guard)
    } else {
        None
    };
    let facts = target.and_then(|m| m.window_facts(w.pd));
    let mut st = w.st.lock();
    let b = st.check_bind(&req, w.pd == pd, facts)?;
    if b.is_some() && !target.is_some_and(|m| m.pin_window()) {
        // The MR is being deregistered.
        return Err(MwError::Type2NeedsMr);
    }
    let old = st.bind(&req, b, qpn);
    drop(st);
    if let Some(old) = old {
        unpin_mr(dev, old);
    }
    Ok(())
}

/// Invalidates the window `key` names for QP `qpn` on `pd` (LOCAL_INV;
/// `remote`: a SEND with invalidate arriving on that QP).
pub(crate) fn invalidate(
    dev: &RroceDev,
    guard: &rcu::Guard,
    pd: *mut sys::ib_pd,
    qpn: u32,
    key: u32,
    remote: bool,
) -> Result<(), MwError> {
    let w = find(dev, key, guard).ok_or(MwError::KeyMismatch)?;
    let mut st = w.st.lock();
    st.check_invalidate(key, w.pd == pd, qpn, remote)?;
    let ended = st.invalidate();
    drop(st);
    if let Some(b) = ended {
        unpin_mr(dev, b);
    }
    Ok(())
}

/// Ends the type 2 bindings to QP `qpn` of `dev`, which is being destroyed
/// (a later QP with its number must not reach them). Process context.
pub(crate) fn unbind_qp(dev: &RroceDev, qpn: u32) {
    for i in 0..dev.mws.len() {
        let ended = {
            let guard = rcu::read_lock();
            let Some(w) = dev.mws.get(i, &guard) else {
                continue;
            };
            let mut st = w.st.lock();
            if st.ty == MwType::Two && st.binding.is_some() && st.qpn == qpn {
                st.invalidate()
            } else {
                None
            }
        };
        if let Some(b) = ended {
            unpin_mr(dev, b);
        }
    }
}

/// The MR behind window key `key` for `len` bytes at `va` with the `need`
/// rights, reached by QP `qpn` on `pd`: the window grants them and the
/// range lies inside it and its MR. Valid while `guard` is held.
pub(crate) fn resolve<'g>(
    dev: &RroceDev,
    guard: &'g rcu::Guard,
    (pd, qpn): (*mut sys::ib_pd, u32),
    key: u32,
    (va, len): (u64, u64),
    need: u32,
) -> Option<MrRef<'g>> {
    let w = find(dev, key, guard)?;
    let lkey =
        w.st.lock()
            .translate(key, va, len, need, w.pd == pd, qpn)
            .ok()?;
    let m = mr::lookup(dev, lkey, guard)?;
    // The window's rights were checked; the MR's own remote rights are not
    // needed (IBA 10.6.7.2: an MR may grant remote access through windows
    // only).
    m.check(pd, va, len, 0).ok()?;
    Some(m)
}
