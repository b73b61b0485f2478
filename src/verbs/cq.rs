// SPDX-License-Identifier: GPL-2.0

//! The CQ verbs: create, destroy, resize, poll and arm (`crate::cq` holds
//! the CQ itself).

use core::mem::{size_of, MaybeUninit};

use kernel::{
    ffi::{c_int, c_uint},
    prelude::*,
};

use super::{to_c, Udata};
use crate::{
    cq::{check_cqe, CqState, RroceCq},
    rdma::{
        ibcq::IbCq,
        mmap::{MmapInfo, UserCtx},
        sys,
    },
};

/// Writes the mminfo response of create/resize
/// (`struct rroce_create_cq_resp` / `rroce_resize_cq_resp`).
fn respond_mminfo(udata: Udata, mi: MmapInfo) -> Result {
    let resp = crate::abi::MmapInfo {
        offset: mi.offset,
        size: mi.size,
        pad: 0,
    }
    .to_bytes();
    udata.respond(&resp)
}

/// The `create_cq` / `create_user_cq` op.
///
/// # Safety
///
/// The [ops contract](super).
pub(super) unsafe extern "C" fn create_cq(
    ibcq: *mut sys::ib_cq,
    attr: *const sys::ib_cq_init_attr,
    attrs: *mut sys::uverbs_attr_bundle,
) -> c_int {
    // SAFETY: the ops contract.
    let (attr, udata) = unsafe { (&*attr, Udata::from_attrs(attrs)) };
    // SAFETY: the ops contract: a CQ of our size on one of our devices.
    to_c(unsafe { create(ibcq, attr, udata) })
}

/// # Safety
///
/// `ibcq` is a CQ being created on an rroce device, allocated with
/// `RroceCq`'s size.
unsafe fn create(ibcq: *mut sys::ib_cq, attr: &sys::ib_cq_init_attr, udata: Udata) -> Result {
    if attr.flags != 0 {
        return Err(EOPNOTSUPP);
    }
    check_cqe(attr.cqe)?;
    // SAFETY: `ibcq` belongs to one of our devices.
    let num_vectors = unsafe { (*(*ibcq).device).num_comp_vectors };
    if attr.comp_vector as c_int >= num_vectors {
        return Err(EINVAL);
    }
    if udata.is_user() && udata.outlen() < size_of::<crate::abi::CreateCqResp>() {
        return Err(EINVAL);
    }
    // SAFETY: `ibcq` outlives the state (freed in `destroy_cq` first); the
    // ucontext is null or this call's live ucontext.
    let (ibcq_ref, uctx) = unsafe { (IbCq::new(ibcq), UserCtx::new(udata.ucontext())) };
    let state = CqState::new(
        ibcq_ref,
        attr.cqe,
        attr.comp_vector,
        uctx.as_ref(),
        crate::qp::fail_qps_on_cq,
    )?;
    if udata.is_user() {
        respond_mminfo(udata, state.mmap_info())?;
    }
    // SAFETY: being created, with our size, and `state` was made for it.
    unsafe { RroceCq::install(ibcq, state) };
    Ok(())
}

/// The `destroy_cq` op.
///
/// # Safety
///
/// The [ops contract](super).
pub(super) unsafe extern "C" fn destroy_cq(
    ibcq: *mut sys::ib_cq,
    _udata: *mut sys::ib_udata,
) -> c_int {
    // SAFETY: the ops contract: one of our CQs, after its last use.
    unsafe { RroceCq::destroy(ibcq) };
    0
}

/// The `resize_user_cq` op: grows or shrinks the ring, keeping every
/// completion not yet consumed. Shrinking below that count fails and
/// leaves the CQ unchanged.
///
/// # Safety
///
/// The [ops contract](super).
pub(super) unsafe extern "C" fn resize_cq(
    ibcq: *mut sys::ib_cq,
    cqe: c_uint,
    udata: *mut sys::ib_udata,
) -> c_int {
    // SAFETY: the ops contract.
    let (state, udata) = unsafe { (RroceCq::state(ibcq), Udata::new(udata)) };
    let r = resize(state, cqe, udata).map(|capacity| {
        // SAFETY: the ops contract: a live CQ.
        unsafe { (*ibcq).cqe = capacity as c_int };
    });
    to_c(r)
}

/// Resizes `state`, answering a user caller with the new mminfo.
fn resize(state: &CqState, cqe: u32, udata: Udata) -> Result<u32> {
    let uctx = if state.is_user() {
        if udata.outlen() < size_of::<crate::abi::ResizeCqResp>() {
            return Err(EINVAL);
        }
        // SAFETY: the ucontext of this call, live for it: the owner's.
        unsafe { UserCtx::new(udata.ucontext()) }
    } else {
        None
    };
    let capacity = state.resize(cqe, uctx.as_ref())?;
    if state.is_user() {
        respond_mminfo(udata, state.mmap_info())?;
    }
    Ok(capacity)
}

/// The `poll_cq` op, for kernel consumers (user CQs are polled in
/// userspace through the mapping).
///
/// # Safety
///
/// The [ops contract](super): `wc` has room for `num` entries.
pub(super) unsafe extern "C" fn poll_cq(
    ibcq: *mut sys::ib_cq,
    num: c_int,
    wc: *mut sys::ib_wc,
) -> c_int {
    // SAFETY: the ops contract.
    let state = unsafe { RroceCq::state(ibcq) };
    let Ok(num) = usize::try_from(num) else {
        return EINVAL.to_errno();
    };
    let out: &mut [MaybeUninit<sys::ib_wc>] = if num == 0 {
        &mut []
    } else {
        // SAFETY: the ops contract: room for `num` entries, ours to write
        // during the call.
        unsafe { core::slice::from_raw_parts_mut(wc.cast(), num) }
    };
    match state.poll(out) {
        Ok(n) => n as c_int,
        Err(e) => e.to_errno(),
    }
}

/// The `req_notify_cq` op.
///
/// # Safety
///
/// The [ops contract](super).
pub(super) unsafe extern "C" fn req_notify_cq(
    ibcq: *mut sys::ib_cq,
    flags: sys::ib_cq_notify_flags,
) -> c_int {
    // SAFETY: the ops contract.
    let state = unsafe { RroceCq::state(ibcq) };
    match state.arm(flags) {
        Ok(r) => r,
        Err(e) => e.to_errno(),
    }
}
