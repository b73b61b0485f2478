// SPDX-License-Identifier: GPL-2.0

//! The SRQ verbs (`crate::srq` holds the SRQ itself).

use core::sync::atomic::Ordering;

use kernel::{ffi::c_int, prelude::*};

use super::{qp::post_result, qp::RecvList, to_c, Udata};
use crate::qp::{write_recv, WrList};
use crate::{
    dev::{limits, RroceDev},
    rdma::{mmap::UserCtx, sys},
    srq::RroceSrq,
};

/// The `create_srq` op: a basic SRQ (no XRC or tag matching). A process
/// gets `rroce_create_srq_resp`, where to map the ring.
///
/// # Safety
///
/// The [ops contract](super).
pub(super) unsafe extern "C" fn create_srq(
    ibsrq: *mut sys::ib_srq,
    init: *mut sys::ib_srq_init_attr,
    udata: *mut sys::ib_udata,
) -> c_int {
    // SAFETY: the ops contract: a new SRQ of our device, its attributes
    // and the verb's udata, valid for the call.
    let (dev, init, udata) = unsafe {
        (
            RroceDev::from_ib((*ibsrq).device),
            &mut *init,
            Udata::new(udata),
        )
    };
    to_c(create(dev, ibsrq, init, udata))
}

fn create(
    dev: &RroceDev,
    ibsrq: *mut sys::ib_srq,
    init: &mut sys::ib_srq_init_attr,
    udata: Udata,
) -> Result {
    if init.srq_type != sys::ib_srq_type_IB_SRQT_BASIC {
        return Err(EOPNOTSUPP);
    }
    if udata.is_user() && udata.outlen() < size_of::<crate::abi::CreateSrqResp>() {
        return Err(EINVAL);
    }
    dev.srqs
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
            (n < limits::MAX_SRQ).then_some(n + 1)
        })
        .map_err(|_| ENOMEM)?;
    let r = (|| {
        // SAFETY: the ucontext of this call, live for it.
        let uctx = unsafe { UserCtx::new(udata.ucontext()) };
        // SAFETY: the core's new SRQ (ops contract); `uctx` as above.
        let mi = unsafe { RroceSrq::create(ibsrq, &mut init.attr, uctx.as_ref())? };
        if udata.is_user() {
            let resp = crate::abi::CreateSrqResp {
                mi: crate::abi::MmapInfo {
                    offset: mi.offset,
                    size: mi.size,
                    pad: 0,
                },
                // librxe reads it for XRC only, which rroce does not have.
                srq_num: 0,
                reserved: 0,
            };
            if let Err(e) = udata.respond(&resp.to_bytes()) {
                // SAFETY: created above, never used.
                unsafe { RroceSrq::destroy(ibsrq) };
                return Err(e);
            }
        }
        Ok(())
    })();
    if r.is_err() {
        dev.srqs.fetch_sub(1, Ordering::AcqRel);
    }
    r
}

/// The `modify_srq` op: resize (`IB_SRQ_MAX_WR`) and the limit
/// (`IB_SRQ_LIMIT`). librxe always passes `rroce_modify_srq_cmd`, the
/// address its new `mminfo` goes to on a resize.
///
/// # Safety
///
/// The [ops contract](super).
pub(super) unsafe extern "C" fn modify_srq(
    ibsrq: *mut sys::ib_srq,
    attr: *mut sys::ib_srq_attr,
    mask: sys::ib_srq_attr_mask,
    udata: *mut sys::ib_udata,
) -> c_int {
    // SAFETY: the ops contract: a live SRQ of ours, valid attributes.
    let (state, attr, udata) = unsafe { (RroceSrq::state(ibsrq), &*attr, Udata::new(udata)) };
    let r = (|| {
        if !udata.is_user() {
            return state.modify(attr, mask, None);
        }
        let mut cmd = [0u8; size_of::<crate::abi::ModifySrqCmd>()];
        udata.read(&mut cmd)?;
        let cmd = crate::abi::ModifySrqCmd::from_bytes(&cmd).ok_or(EINVAL)?;
        // SAFETY: the ucontext of this call, live for it.
        let uctx = unsafe { UserCtx::new(udata.ucontext()) }.ok_or(EINVAL)?;
        state.modify(attr, mask, Some((&uctx, cmd.mmap_info_addr)))
    })();
    to_c(r)
}

/// The `query_srq` op.
///
/// # Safety
///
/// The [ops contract](super).
pub(super) unsafe extern "C" fn query_srq(
    ibsrq: *mut sys::ib_srq,
    attr: *mut sys::ib_srq_attr,
) -> c_int {
    // SAFETY: the ops contract: a live SRQ of ours, an attribute struct to
    // fill.
    unsafe { RroceSrq::state(ibsrq).query(&mut *attr) };
    0
}

/// The `destroy_srq` op (the core refuses it while QPs are attached).
///
/// # Safety
///
/// The [ops contract](super).
pub(super) unsafe extern "C" fn destroy_srq(
    ibsrq: *mut sys::ib_srq,
    _udata: *mut sys::ib_udata,
) -> c_int {
    // SAFETY: the ops contract: one of our SRQs after its last use.
    unsafe {
        let dev = RroceDev::from_ib((*ibsrq).device);
        RroceSrq::destroy(ibsrq);
        dev.srqs.fetch_sub(1, Ordering::AcqRel);
    }
    0
}

/// The `post_srq_recv` op: kernel SRQs only (a process writes its mapped
/// ring; librxe never issues this command).
///
/// # Safety
///
/// The [ops contract](super): a list of valid work requests and a valid
/// output pointer.
pub(super) unsafe extern "C" fn post_srq_recv(
    ibsrq: *mut sys::ib_srq,
    wr: *const sys::ib_recv_wr,
    bad_wr: *mut *const sys::ib_recv_wr,
) -> c_int {
    // SAFETY: the ops contract: a live SRQ of ours.
    let state = unsafe { RroceSrq::state(ibsrq) };
    // INVARIANT: the core's list of valid work requests.
    let mut list = RecvList { next: wr };
    let err = state.post_kernel(|prod, buf, max_sge| {
        while let Some(w) = list.peek() {
            // SAFETY: a kernel SRQ's ring, used only under its lock, which
            // `post_kernel` holds while this runs.
            unsafe { write_recv(prod, buf, &w, max_sge)? };
            list.advance();
        }
        Ok(())
    });
    // SAFETY: `bad_wr` is the core's output pointer.
    unsafe { post_result(err, bad_wr, list.next) }
}
