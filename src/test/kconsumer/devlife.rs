// SPDX-License-Identifier: GPL-2.0

//! A device's registry entry across its unregistration: found while
//! registered, found by no lookup once `dealloc_driver` has run, and freed
//! by the reaper only after the core has left the unregistration (module
//! unload depends on it: see `crate::link`).

use super::*;

use crate::registry::{device_of_netdev, DEVICES};

/// Registers a device on `lo`, unregisters it, and follows its entry.
pub(crate) fn entry_outlives_dealloc() -> Result<(), &'static str> {
    let dev = TestDev::new()?;
    let raw = dev.0;
    // SAFETY: `init_net`'s loopback netdev lives as long as the kernel.
    let lo = unsafe { sys::rroce_helper_init_net_loopback() };
    let found = device_of_netdev(lo);
    if let Some(d) = found {
        // SAFETY: drops the reference the lookup took.
        unsafe { sys::ib_device_put(d) };
    }
    if found != Some(raw) {
        return Err("a registered device is not found by its netdev");
    }
    if DEVICES.lock().by_dev(raw).is_none() {
        return Err("a registered device has no live entry");
    }
    // Unregisters: the core calls `dealloc_driver` before this returns.
    drop(dev);
    if DEVICES.lock().by_dev(raw).is_some() {
        return Err("an unregistered device is still live in the registry");
    }
    if let Some(d) = device_of_netdev(lo) {
        // SAFETY: drops the reference the lookup took.
        unsafe { sys::ib_device_put(d) };
        return Err("an unregistered device is still found by its netdev");
    }
    // The entry (dead, or freed already) is gone once the reaper ran.
    crate::link::flush_reaper();
    if DEVICES.lock().lists(raw) {
        return Err("the reaper left an unregistered device's entry");
    }
    Ok(())
}
