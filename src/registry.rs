// SPDX-License-Identifier: GPL-2.0

//! The registry of the devices rroce registered: which `ib_device` is bound
//! to which netdev. `crate::link` adds and removes entries (link ops,
//! netdev notifier, `dealloc_driver`, module unload); the receive path
//! (`crate::recv`) finds a packet's device here, so the lookup sits below
//! both and neither names the other.
//!
//! Lock order: `DEVICES` is a leaf, IRQ-safe spinlock (`get_netdev` may be
//! called in atomic context); nothing is called into the RDMA core while
//! holding it except `ib_device_try_get()`, `get_device()` and `dev_hold()`.
//!
//! A device stays listed from registration until the core is done with it,
//! not only until its `dealloc_driver` runs: that callback marks its slot
//! dead, and whoever frees a dead slot first waits for the core to leave
//! the device's unregistration (module unload, or `crate::link`'s reaper),
//! so unload cannot miss a callback still running (see `crate::link`).
//!
//! The receive path takes no lock: every change to a slot's pair is
//! mirrored, under `DEVICES`, into [`RX`], which a packet's lookup
//! ([`rx_device_of_netdev`]) reads inside an RCU read-side section; a
//! device leaves `RX` and a grace period passes before its memory can be
//! freed ([`wait_readers`], called by `dealloc_driver`).

use core::{
    ptr::null_mut,
    sync::atomic::{AtomicUsize, Ordering},
};

use kernel::prelude::*;

use crate::{dev::RroceDev, rdma::sys};

/// Largest number of rroce devices at once (one per netdev).
pub(crate) const MAX_DEVICES: usize = 64;

/// One registered device and the netdev it is bound to.
///
/// # Invariants
///
/// `dev` is 0 for a free slot, else the address of an rroce `ib_device` on
/// which the slot holds a reference (`get_device`, taken by
/// [`DeviceList::insert`], dropped by whoever frees the slot), so its
/// memory stays allocated while listed. `dead` says its `dealloc_driver`
/// has started: its rroce state is released or being released, and it is
/// found by nothing but [`DeviceList::take_dead`]. `ndev` is 0 (always, for
/// a dead slot) or a netdev on which this slot holds a reference
/// (`dev_hold`), dropped when the netdev unregisters or the device dies.
#[derive(Clone, Copy)]
pub(crate) struct DeviceSlot {
    pub(crate) dev: usize,
    pub(crate) ndev: usize,
    pub(crate) dead: bool,
}

impl DeviceSlot {
    const FREE: Self = Self {
        dev: 0,
        ndev: 0,
        dead: false,
    };

    /// A registered device whose rroce state is in place.
    fn live(&self) -> bool {
        self.dev != 0 && !self.dead
    }
}

/// Registered devices.
pub(crate) struct DeviceList {
    pub(crate) slots: [DeviceSlot; MAX_DEVICES],
}

impl DeviceList {
    const fn new() -> Self {
        Self {
            slots: [DeviceSlot::FREE; MAX_DEVICES],
        }
    }

    /// Lists `dev`, bound to `ndev` (whose reference the caller hands
    /// over), taking a reference on `dev`'s memory for the slot.
    ///
    /// # Safety
    ///
    /// `dev` is an allocated rroce `ib_device`, not listed yet.
    pub(crate) unsafe fn insert(
        &mut self,
        dev: *mut sys::ib_device,
        ndev: *mut sys::net_device,
    ) -> Result {
        let (i, slot) = self
            .slots
            .iter_mut()
            .enumerate()
            .find(|(_, d)| d.dev == 0)
            .ok_or(ENOSPC)?;
        // SAFETY: `dev` is allocated per the caller.
        unsafe { sys::rroce_helper_ib_device_hold(dev) };
        // INVARIANT: the slot holds the reference just taken.
        *slot = DeviceSlot {
            dev: dev as usize,
            ndev: ndev as usize,
            dead: false,
        };
        RX.publish(i, *slot);
        Ok(())
    }

    /// Frees the slot of `dev` (its registration failed, so the core never
    /// called into it), returning its netdev (whose reference the caller
    /// must drop) if it still had one. The caller also owns the slot's
    /// reference on `dev` and drops it with `rroce_helper_ib_device_unhold`.
    pub(crate) fn remove(&mut self, dev: *mut sys::ib_device) -> Option<*mut sys::net_device> {
        let (i, slot) = self
            .slots
            .iter_mut()
            .enumerate()
            .find(|(_, d)| d.dev == dev as usize)?;
        let ndev = slot.ndev;
        *slot = DeviceSlot::FREE;
        RX.publish(i, *slot);
        (ndev != 0).then_some(ndev as *mut sys::net_device)
    }

    /// Marks `dev`'s slot dead (its `dealloc_driver` runs), returning its
    /// netdev (whose reference the caller must drop) if it still had one.
    /// The slot stays listed until [`DeviceList::take_dead`].
    pub(crate) fn mark_dead(&mut self, dev: *mut sys::ib_device) -> Option<*mut sys::net_device> {
        let (i, slot) = self
            .slots
            .iter_mut()
            .enumerate()
            .find(|(_, d)| d.live() && d.dev == dev as usize)?;
        let ndev = slot.ndev;
        slot.ndev = 0;
        slot.dead = true;
        RX.publish(i, *slot);
        (ndev != 0).then_some(ndev as *mut sys::net_device)
    }

    /// Frees a dead slot and returns its device, whose reference the caller
    /// now owns: it must wait for the core to finish the device's
    /// unregistration (`ib_unregister_device`, which then only waits) and
    /// drop the reference with `rroce_helper_ib_device_unhold`.
    pub(crate) fn take_dead(&mut self) -> Option<*mut sys::ib_device> {
        let slot = self.slots.iter_mut().find(|d| d.dev != 0 && d.dead)?;
        let dev = slot.dev as *mut sys::ib_device;
        // Dead slots are not mirrored in `RX` (see `RxSlots::publish`).
        *slot = DeviceSlot::FREE;
        Some(dev)
    }

    /// Unbinds the netdev `ndev` (unregistering) from its device's slot,
    /// returning it if a slot had it (the caller drops the slot's
    /// reference).
    pub(crate) fn forget_netdev(
        &mut self,
        ndev: *mut sys::net_device,
    ) -> Option<*mut sys::net_device> {
        let (i, slot) = self
            .slots
            .iter_mut()
            .enumerate()
            .find(|(_, d)| d.live() && d.ndev == ndev as usize)?;
        slot.ndev = 0;
        RX.publish(i, *slot);
        Some(ndev)
    }

    /// The live slot of `dev`.
    pub(crate) fn by_dev(&self, dev: *mut sys::ib_device) -> Option<&DeviceSlot> {
        self.slots
            .iter()
            .find(|d| d.live() && d.dev == dev as usize)
    }

    /// The live slot bound to `ndev`.
    pub(crate) fn by_ndev(&self, ndev: *mut sys::net_device) -> Option<&DeviceSlot> {
        self.slots
            .iter()
            .find(|d| d.live() && d.ndev == ndev as usize)
    }

    /// The first live device (module unload works through them).
    pub(crate) fn first_live(&self) -> Option<*mut sys::ib_device> {
        let slot = self.slots.iter().find(|d| d.live())?;
        Some(slot.dev as *mut sys::ib_device)
    }

    /// Whether `dev` has an entry, live or dead.
    #[cfg(CONFIG_KUNIT)]
    pub(crate) fn lists(&self, dev: *mut sys::ib_device) -> bool {
        self.slots.iter().any(|d| d.dev == dev as usize)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.slots.iter().all(|d| d.dev == 0)
    }
}

/// The slots as the receive path reads them: each a copy of the
/// `DeviceList` slot at the same index, written under `DEVICES`, read
/// without it.
///
/// # Invariants
///
/// `dev[i]` is 0 or an rroce `ib_device` whose memory stays allocated for
/// an RCU grace period after `dev[i]` stops naming it (`dealloc_driver`
/// waits for one, [`wait_readers`], before the core frees the device).
/// `ndev[i]` is only compared, never dereferenced.
struct RxSlots {
    dev: [AtomicUsize; MAX_DEVICES],
    ndev: [AtomicUsize; MAX_DEVICES],
}

static RX: RxSlots = RxSlots {
    dev: [const { AtomicUsize::new(0) }; MAX_DEVICES],
    ndev: [const { AtomicUsize::new(0) }; MAX_DEVICES],
};

impl RxSlots {
    /// Mirrors slot `i` (the caller holds `DEVICES`), a dead slot as a
    /// free one. A reader that sees the new netdev also sees the new
    /// device; one that sees a cleared netdev skips the slot.
    fn publish(&self, i: usize, slot: DeviceSlot) {
        let (Some(dev), Some(ndev)) = (self.dev.get(i), self.ndev.get(i)) else {
            return;
        };
        let slot = if slot.dead { DeviceSlot::FREE } else { slot };
        ndev.store(0, Ordering::Release);
        // INVARIANT: a device leaving the slot (freed or dead) is freed
        // only after `wait_readers` (called by `dealloc_driver` and by a
        // failed registration).
        dev.store(slot.dev, Ordering::Release);
        ndev.store(slot.ndev, Ordering::Release);
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

/// Finds rroce's device bound to `ndev` for a received packet, without a
/// lock, with a reference the caller must drop with `ib_device_put`.
pub(crate) fn rx_device_of_netdev(ndev: *mut sys::net_device) -> Option<*mut sys::ib_device> {
    if ndev.is_null() {
        return None;
    }
    let _guard = kernel::sync::rcu::read_lock();
    for (n, d) in RX.ndev.iter().zip(RX.dev.iter()) {
        if n.load(Ordering::Acquire) != ndev as usize {
            continue;
        }
        let dev = d.load(Ordering::Acquire) as *mut sys::ib_device;
        if dev.is_null() {
            continue;
        }
        // SAFETY: `dev` was listed inside this RCU read-side section, so
        // its memory is not freed before the section ends (type invariant
        // of `RxSlots`); a device being released fails the try.
        return (unsafe { sys::rroce_helper_ib_device_try_get(dev) } != 0).then_some(dev);
    }
    None
}

/// Waits until no receive-path lookup can still be using a device that
/// has left the registry (an RCU grace period). Process context.
pub(crate) fn wait_readers() {
    // SAFETY: plain call in process context.
    unsafe { sys::rroce_helper_synchronize_rcu() };
}

/// Finds rroce's device bound to `ndev`, with a reference the caller must
/// drop with `ib_device_put`.
pub(crate) fn device_of_netdev(ndev: *mut sys::net_device) -> Option<*mut sys::ib_device> {
    let list = DEVICES.lock();
    let dev = list.by_ndev(ndev)?.dev as *mut sys::ib_device;
    // SAFETY: `dev` is allocated while in the registry (type invariant of
    // `DeviceSlot`); a device being unregistered fails the try.
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
        for slot in list.slots.iter().filter(|d| d.live()) {
            let dev = slot.dev as *mut sys::ib_device;
            // SAFETY: allocated while listed; live, and the lock keeps
            // `dealloc_driver` from marking it dead meanwhile, so its state
            // is in place. `net` is read-only after registration.
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
