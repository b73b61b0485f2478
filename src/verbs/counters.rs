// SPDX-License-Identifier: GPL-2.0

//! The hw_counters verbs behind `rdma statistic` (`crate::counters` holds
//! the counters).

use kernel::{ffi::c_int, prelude::*};

use crate::{
    counters::{descriptors, COUNT},
    dev::RroceDev,
    rdma::sys,
};

/// The `alloc_hw_port_stats` op.
///
/// # Safety
///
/// The [ops contract](super).
pub(super) unsafe extern "C" fn alloc_hw_port_stats(
    _ibdev: *mut sys::ib_device,
    _port: u32,
) -> *mut sys::rdma_hw_stats {
    // SAFETY: the descriptions are static and hold `COUNT` entries.
    unsafe {
        sys::rdma_alloc_hw_stats_struct(
            descriptors().as_ptr(),
            COUNT as c_int,
            sys::RDMA_HW_STATS_DEFAULT_LIFESPAN as kernel::ffi::c_ulong,
        )
    }
}

/// The `get_hw_stats` op: fills every counter, returns how many.
///
/// # Safety
///
/// The [ops contract](super), with a stats struct from
/// [`alloc_hw_port_stats`].
pub(super) unsafe extern "C" fn get_hw_stats(
    ibdev: *mut sys::ib_device,
    stats: *mut sys::rdma_hw_stats,
    port: u32,
    _index: c_int,
) -> c_int {
    if port == 0 || stats.is_null() {
        return EINVAL.to_errno();
    }
    // SAFETY: the ops contract: one of our devices, alive for the call.
    let dev = unsafe { RroceDev::from_ib(ibdev) };
    // SAFETY: the struct was allocated for `COUNT` values.
    let values = unsafe { (*stats).value.as_mut_slice(COUNT) };
    dev.counters.read_into(values);
    COUNT as c_int
}
