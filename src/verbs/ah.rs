// SPDX-License-Identifier: GPL-2.0

//! The AH verbs (`crate::ah` holds the AH itself).

use kernel::{ffi::c_int, prelude::*};

use super::{to_c, Udata};
use crate::{
    ah::{av_from_attr, RroceAh},
    dev::RroceDev,
    rdma::{ah_attr::AhAttr, sys},
};

/// The `create_ah` and `create_user_ah` ops.
///
/// # Safety
///
/// The [ops contract](super).
pub(super) unsafe extern "C" fn create_ah(
    ibah: *mut sys::ib_ah,
    init: *mut sys::rdma_ah_init_attr,
    udata: *mut sys::ib_udata,
) -> c_int {
    // SAFETY: the ops contract.
    let udata = unsafe { Udata::new(udata) };
    // SAFETY: the ops contract: valid attributes, an AH of our size.
    to_c(unsafe { create(ibah, init, udata) })
}

/// The `query_ah` op (kernel consumers: `rdma_query_ah`): the address
/// vector the AH was created with, as a RoCE GRH on port 1.
///
/// # Safety
///
/// The [ops contract](super): a live AH of ours, an attribute struct the
/// core zeroed.
pub(super) unsafe extern "C" fn query_ah(
    ibah: *mut sys::ib_ah,
    attr: *mut sys::rdma_ah_attr,
) -> c_int {
    // SAFETY: the ops contract: created successfully (its AV is set), and
    // `attr` is ours to fill.
    let (ah, attr) = unsafe { (&*ibah.cast::<RroceAh>(), &mut *attr) };
    super::qp::write_ah_attr(attr, Some(ah.av()), 1);
    0
}

/// # Safety
///
/// `ibah` is an AH being created on an rroce device, allocated with
/// `RroceAh`'s size; `init` is valid with referenced GID attributes.
unsafe fn create(ibah: *mut sys::ib_ah, init: *mut sys::rdma_ah_init_attr, udata: Udata) -> Result {
    // SAFETY: valid per the caller.
    let av = av_from_attr(&unsafe { AhAttr::read((*init).ah_attr) })?;
    // `struct rxe_create_ah_resp { __u32 ah_num; __u32 reserved; }`
    let respond = |num: u32| {
        if udata.outlen() < 8 {
            return Ok(());
        }
        let mut resp = [0u8; 8];
        resp[..4].copy_from_slice(&num.to_ne_bytes());
        udata.respond(&resp)
    };
    // SAFETY: per the caller: the core allocated `ibah` zeroed with our
    // size (`RroceAh`'s invariant), nothing else refers to it while it is
    // created, and it belongs to one of our devices.
    let (ah, dev) = unsafe {
        let ah = &mut *ibah.cast::<RroceAh>();
        let dev = RroceDev::from_ib(ah.device());
        (ah, dev)
    };
    // A user call runs in process context.
    ah.create(dev, av, udata.is_user(), respond)
}

/// The `destroy_ah` op.
///
/// # Safety
///
/// The [ops contract](super).
pub(super) unsafe extern "C" fn destroy_ah(ibah: *mut sys::ib_ah, flags: u32) -> c_int {
    let sleepable = flags & sys::rdma_destroy_ah_flags_RDMA_DESTROY_AH_SLEEPABLE != 0;
    let ah = ibah.cast::<RroceAh>();
    // SAFETY: the ops contract: one of our AHs, created successfully, on
    // one of our devices. UD senders may read it concurrently (shared).
    let r = unsafe { (*ah).destroy(RroceDev::from_ib((*ah).device()), sleepable) };
    if r.is_ok() {
        // SAFETY: no reader is left (`destroy` waited for a grace period
        // if it was published); the core owns the memory until we return.
        unsafe { (*ah).forget() };
    }
    to_c(r)
}
