// SPDX-License-Identifier: GPL-2.0

//! The registry of the devices rroce registered: which `ib_device` is bound
//! to which netdev. `crate::link` adds and removes entries (link ops,
//! netdev notifier, `dealloc_driver`, module unload); the receive path
//! (`crate::recv`) finds a packet's device here, so the lookup sits below
//! both and neither names the other.
//!
//! Lock order: `DEVICES` is a leaf, IRQ-safe spinlock (`get_netdev` may be
//! called in atomic context); nothing is called into the RDMA core while
//! holding it except `ib_device_try_get()` and `dev_hold()`.

use core::ptr::null_mut;

use kernel::prelude::*;

use crate::{dev::RroceDev, rdma::sys};

/// Largest number of rroce devices at once (one per netdev).
pub(crate) const MAX_DEVICES: usize = 64;

/// One registered device and the netdev it is bound to.
///
/// # Invariants
///
/// `dev` is 0 for a free slot, else the address of an allocated rroce
/// `ib_device` (the slot is cleared in `dealloc_driver`, before the core
/// frees it). `ndev` is 0 or a netdev on which this slot holds a reference
/// (`dev_hold`), dropped when the netdev unregisters or the slot is freed.
#[derive(Clone, Copy)]
pub(crate) struct DeviceSlot {
    pub(crate) dev: usize,
    pub(crate) ndev: usize,
}

/// Registered devices.
pub(crate) struct DeviceList {
    pub(crate) slots: [DeviceSlot; MAX_DEVICES],
}

impl DeviceList {
    const fn new() -> Self {
        Self {
            slots: [DeviceSlot { dev: 0, ndev: 0 }; MAX_DEVICES],
        }
    }

    pub(crate) fn insert(
        &mut self,
        dev: *mut sys::ib_device,
        ndev: *mut sys::net_device,
    ) -> Result {
        let slot = self.slots.iter_mut().find(|d| d.dev == 0).ok_or(ENOSPC)?;
        *slot = DeviceSlot {
            dev: dev as usize,
            ndev: ndev as usize,
        };
        Ok(())
    }

    /// Frees the slot of `dev`, returning its netdev (whose reference the
    /// caller must drop) if it still had one.
    pub(crate) fn remove(&mut self, dev: *mut sys::ib_device) -> Option<*mut sys::net_device> {
        let slot = self.slots.iter_mut().find(|d| d.dev == dev as usize)?;
        let ndev = slot.ndev;
        *slot = DeviceSlot { dev: 0, ndev: 0 };
        (ndev != 0).then_some(ndev as *mut sys::net_device)
    }

    pub(crate) fn by_dev(&self, dev: *mut sys::ib_device) -> Option<&DeviceSlot> {
        self.slots.iter().find(|d| d.dev == dev as usize)
    }

    pub(crate) fn by_ndev(&mut self, ndev: *mut sys::net_device) -> Option<&mut DeviceSlot> {
        self.slots
            .iter_mut()
            .find(|d| d.dev != 0 && d.ndev == ndev as usize)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.slots.iter().all(|d| d.dev == 0)
    }
}

kernel::sync::global_lock! {
    // SAFETY: `link::Registration::new` initializes it (`init`) before
    // anything else runs.
    pub(crate) unsafe(uninit) static DEVICES: SpinLockIrq<DeviceList> = DeviceList::new();
}

/// Sets the registry up; called once from module init, before any other use.
pub(crate) fn init() {
    // SAFETY: called once, from module init, before any other use.
    unsafe { DEVICES.init() };
}

/// Finds rroce's device bound to `ndev`, with a reference the caller must
/// drop with `ib_device_put`.
pub(crate) fn device_of_netdev(ndev: *mut sys::net_device) -> Option<*mut sys::ib_device> {
    let mut list = DEVICES.lock();
    let dev = list.by_ndev(ndev)?.dev as *mut sys::ib_device;
    // SAFETY: `dev` is allocated while in the registry (type invariant of
    // `DeviceSlot`), and the lock keeps `dealloc_driver` from finishing.
    (unsafe { sys::rroce_helper_ib_device_try_get(dev) } != 0).then_some(dev)
}

/// Finds rroce's device in namespace `net` (a `net::net_of` key) that owns
/// `gid`, with a reference the caller must drop with `ib_device_put`: the
/// receiver of a packet the IP stack looped back (its netdev is `lo`).
pub(crate) fn device_of_gid(net: usize, gid: &[u8; 16]) -> Option<*mut sys::ib_device> {
    let mut found = [null_mut::<sys::ib_device>(); MAX_DEVICES];
    let mut n = 0;
    {
        let list = DEVICES.lock();
        for slot in list.slots.iter().filter(|d| d.dev != 0) {
            let dev = slot.dev as *mut sys::ib_device;
            // SAFETY: allocated while listed; the lock keeps
            // `dealloc_driver` from finishing. `net` is read-only after
            // registration.
            let same_net = unsafe { RroceDev::from_ib(dev) }.net() == net;
            // SAFETY: as above.
            if same_net && unsafe { sys::rroce_helper_ib_device_try_get(dev) } != 0 {
                found[n] = dev;
                n += 1;
            }
        }
    }
    let mut hit = None;
    for &dev in &found[..n] {
        let g = sys::ib_gid { raw: *gid };
        // SAFETY: `dev` is referenced; `g` is valid for the call.
        let attr = unsafe {
            sys::rdma_find_gid(
                dev,
                &g,
                sys::ib_gid_type_IB_GID_TYPE_ROCE_UDP_ENCAP,
                null_mut(),
            )
        };
        let found = !attr.is_null() && !crate::rdma::is_err_ptr(attr);
        if found {
            // SAFETY: a referenced GID attribute from `rdma_find_gid`.
            unsafe { sys::rdma_put_gid_attr(attr) };
        }
        if found && hit.is_none() {
            hit = Some(dev);
        } else {
            // SAFETY: drops the reference taken above.
            unsafe { sys::ib_device_put(dev) };
        }
    }
    hit
}
