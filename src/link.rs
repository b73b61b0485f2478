// SPDX-License-Identifier: GPL-2.0

//! Creating, finding and removing rroce devices: `rdma link add NAME type
//! rroce netdev DEV`.
//!
//! This file holds the `rroce` link type (`rdma_link_ops`), the netdev
//! notifier, the registry of devices and the module's [`Registration`]
//! (which unregisters every device at unload). Each device is an
//! `ib_device` allocated by the RDMA core with rroce's state
//! ([`RroceDev`]) around it, bound to one netdev, registered with the
//! RoCEv2 port capabilities so the core fills its GID table from the
//! netdev's IPv4 and IPv6 addresses.
//!
//! # Lifetimes
//!
//! The RDMA core owns the memory of every device: it is freed after the core
//! calls `dealloc_driver` and every reference is dropped. rroce keeps a
//! registry of the devices it registered, each entry with a reference on
//! the device's memory, so that module unload can unregister them. Devices
//! are unregistered by `rdma link del` (the core), by the netdev going away
//! (our notifier queues it on the core's work queue), by module unload, or
//! by `ib_unregister_driver(RDMA_DRIVER_RXE)` when `rdma_rxe` is unloaded
//! (see `Documentation/device.rst`).
//!
//! Unload must not return while the core is still running one of rroce's
//! callbacks, `dealloc_driver` last of all: it may be running on the core's
//! work queue for a device whose netdev just went away. The core runs it
//! inside the device's unregistration lock, which `ib_unregister_device`
//! waits for, so the entry stays in the registry past the callback:
//! `dealloc_driver` only marks it dead, and whoever frees a dead entry
//! (unload, or the [`REAPER`] work item the callback queues) first waits
//! for the core with `ib_unregister_device`, then drops the reference.
//! Unload works through every entry, live or dead, then cancels the reaper.
//!
//! # Netdev binding and coexistence with rdma_rxe
//!
//! rroce reports the driver id `RDMA_DRIVER_RXE`, because rdma-core's rxe
//! provider (and the kernel's ioctl check of the provider's driver id)
//! requires it. rdma_rxe looks devices up by netdev with that driver id and
//! treats what it finds as its own `struct rxe_dev`; the RDMA core's netdev
//! index (`ib_device_set_netdev`) is where it looks. So rroce does not put
//! its devices there: it implements the `get_netdev` op instead, keeps the
//! netdev (with a reference) in its own registry, finds its devices by
//! netdev through that registry and raises port events itself. rdma_rxe
//! then never sees an rroce device, except in `ib_unregister_driver` on its
//! unload, which unregisters rroce's devices like any other unregistration.
//!
//! The two `ib_device_ops` that reach the registry, `dealloc_driver` and
//! `get_netdev`, are therefore here and not in `crate::verbs` (which must
//! not name this file); [`add_device`] puts them into the ops table.
//!
//! The registry itself (and its lock order) is `crate::registry`.

use core::{cell::UnsafeCell, mem::size_of, ptr::null_mut};

use kernel::{
    error::to_result,
    ffi::{c_char, c_int, c_uint, c_ulong, c_void},
    prelude::*,
};

use crate::{
    dev::{guid_from_mac, RroceDev, Tables},
    rdma::sys,
    registry::{self, device_of_netdev, DEVICES, MAX_DEVICES},
};

/// Cell for C structures the kernel links into its own lists and so must
/// live at a fixed address for the module's lifetime.
struct KernelCell<T>(UnsafeCell<T>);

// SAFETY: the contents are only touched by the kernel (under its own locks)
// after registration; Rust only takes their address.
unsafe impl<T> Sync for KernelCell<T> {}

impl<T> KernelCell<T> {
    fn get(&self) -> *mut T {
        self.0.get()
    }
}

static LINK_OPS: KernelCell<sys::rdma_link_ops> = KernelCell(UnsafeCell::new(sys::rdma_link_ops {
    list: sys::list_head {
        next: null_mut(),
        prev: null_mut(),
    },
    type_: kernel::str::as_char_ptr_in_const_context(c"rroce"),
    newlink: Some(newlink),
    dellink: Some(dellink),
}));

/// Frees dead registry entries once the core is done with their devices
/// ([`reap`]); queued by `dealloc_driver`, cancelled at unload.
static REAPER: KernelCell<sys::work_struct> = KernelCell(UnsafeCell::new(
    // SAFETY: an all-zero `work_struct` is a valid placeholder;
    // `Registration::new` initializes it (`INIT_WORK`) before any device
    // exists.
    unsafe { core::mem::MaybeUninit::zeroed().assume_init() },
));

static NETDEV_NB: KernelCell<sys::notifier_block> =
    KernelCell(UnsafeCell::new(sys::notifier_block {
        notifier_call: Some(netdev_event),
        next: null_mut(),
        priority: 0,
    }));

/// The module's registration with the RDMA core and netdev notifiers.
/// Dropping it unregisters everything, devices included.
pub(crate) struct Registration;

impl Registration {
    /// Register the `rroce` link type and the netdev notifier.
    pub(crate) fn new() -> Result<Self> {
        registry::init();
        crate::rdma::init_crc();
        crate::net::init();
        crate::transport::init();
        crate::mcast::init();
        // SAFETY: `REAPER` is static and not queued yet; `reap` is its work
        // function. `Drop` cancels it.
        unsafe { sys::rroce_helper_init_work(REAPER.get(), Some(reap)) };
        // SAFETY: `NETDEV_NB` is a static notifier block that stays
        // registered until `Drop`, which unregisters it.
        to_result(unsafe { sys::register_netdevice_notifier(NETDEV_NB.get()) })?;
        // SAFETY: `LINK_OPS` is static and unregistered in `Drop`.
        unsafe { sys::rdma_link_register(LINK_OPS.get()) };
        Ok(Registration)
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        // No new devices from here on.
        // SAFETY: registered in `new`.
        unsafe { sys::rdma_link_unregister(LINK_OPS.get()) };
        // SAFETY: registered in `new`; after this no notifier call is running.
        unsafe { sys::unregister_netdevice_notifier(NETDEV_NB.get()) };
        // Unregister every remaining device, and wait for the core to be
        // done with every device it is unregistering on its own work queue
        // (a netdev went away; unregistering the notifier above queued the
        // rest): `ib_unregister_device` serializes with that on the
        // device's unregistration lock, inside which `dealloc_driver` runs,
        // so once it returns no rroce code runs for the device any more
        // (the fence `ib_unregister_driver` gives; rroce cannot use that,
        // as it shares rdma_rxe's driver id). Such a device is still in
        // the registry, dead once its `dealloc_driver` has started (see the
        // module docs), and listed devices are allocated.
        let mut last = null_mut();
        loop {
            let (dev, dead) = {
                let mut list = DEVICES.lock();
                if let Some(dev) = list.take_dead() {
                    // The entry's reference is ours now.
                    (dev, true)
                } else {
                    let Some(dev) = list.first_live() else {
                        break;
                    };
                    if dev == last {
                        // Unregistered, yet still live: reported below.
                        break;
                    }
                    // SAFETY: listed, so allocated (type invariant of
                    // `DeviceSlot`); the hold keeps it past the reaper
                    // freeing its entry once it is dead.
                    unsafe { sys::rroce_helper_ib_device_hold(dev) };
                    (dev, false)
                }
            };
            if dead {
                // SAFETY: a dead entry just freed; its reference is ours.
                unsafe { fence_and_put(dev) };
                continue;
            }
            // SAFETY: held; a device being or already unregistered is fine
            // for `ib_unregister_device`, which then only waits. Its entry
            // is dead afterwards, freed by the next round or the reaper.
            unsafe {
                sys::ib_unregister_device(dev);
                sys::rroce_helper_ib_device_unhold(dev);
            }
            last = dev;
        }
        // A reaper still waiting for the core (for an entry it took before
        // the loop above saw it) finishes; `dealloc_driver` cannot queue it
        // again, as no device is left (unless one stayed live, reported
        // below), and a racing queueing is dropped while this waits.
        // SAFETY: initialized in `new`; not called from the work itself.
        unsafe { sys::rroce_helper_cancel_work_sync(REAPER.get()) };
        if !DEVICES.lock().is_empty() {
            pr_warn!("devices still registered at unload\n");
        }
        crate::net::exit();
        // The devices' QPs are gone, so are their groups; the table's
        // memory goes with the module.
        crate::mcast::exit();
        pr_info!("unloaded\n");
    }
}

/// # Safety
///
/// Called by the RDMA core through rroce's `rdma_link_ops`, with the
/// arguments that contract describes.
unsafe extern "C" fn newlink(ibdev_name: *const c_char, ndev: *mut sys::net_device) -> c_int {
    // SAFETY: the RDMA core passes a valid name and a referenced netdev.
    crate::verbs::to_c(unsafe { add_device(ibdev_name, ndev) }.map(|_| ()))
}

/// Creates and registers an rroce device on `ndev`; returns it (the caller
/// holds no reference: `rdma link del` or module unload removes it, or a
/// KUnit test with `ib_unregister_device`).
///
/// # Safety
///
/// `name` is a NUL-terminated string and `ndev` a referenced netdev, both
/// valid for the duration of the call.
pub(crate) unsafe fn add_device(
    name: *const c_char,
    ndev: *mut sys::net_device,
) -> Result<*mut sys::ib_device> {
    // SAFETY: `ndev` is valid per the caller.
    unsafe { check_unbound(ndev)? };
    // SAFETY: as above.
    let ibdev = unsafe { alloc_device(ndev)? };
    // SAFETY: `ibdev` was just allocated and is ours; `ndev` is valid.
    unsafe { attach(ibdev, ndev)? };
    // SAFETY: as above; `name` is valid per the caller.
    unsafe { register(ibdev, ndev, name)? };
    Ok(ibdev)
}

/// One RDMA device per netdev: fails with `EEXIST` if `ndev` has one,
/// rroce's own or rdma_rxe's (which the core indexes by netdev).
///
/// # Safety
///
/// `ndev` is a referenced netdev.
unsafe fn check_unbound(ndev: *mut sys::net_device) -> Result {
    if let Some(existing) = device_of_netdev(ndev) {
        // SAFETY: drops the reference just taken.
        unsafe { sys::ib_device_put(existing) };
        pr_err!("netdev already has an rroce device\n");
        return Err(EEXIST);
    }
    // SAFETY: `ndev` is valid per the caller.
    let existing =
        unsafe { sys::ib_device_get_by_netdev(ndev, sys::rdma_driver_id_RDMA_DRIVER_UNKNOWN) };
    if !existing.is_null() {
        // SAFETY: drops the reference just taken.
        unsafe { sys::ib_device_put(existing) };
        pr_err!("netdev already has an RDMA device of another driver\n");
        return Err(EEXIST);
    }
    Ok(())
}

/// Allocates a device for `ndev` and fills in its `ib_device` and state;
/// it is not visible to anyone yet.
///
/// # Safety
///
/// `ndev` is a referenced netdev.
unsafe fn alloc_device(ndev: *mut sys::net_device) -> Result<*mut sys::ib_device> {
    // SAFETY: allocates a zeroed `RroceDev` with an initialized `ib_device`
    // at its start; `init_net` is the namespace rdma_rxe uses too.
    let ibdev =
        unsafe { sys::_ib_alloc_device(size_of::<RroceDev>(), sys::rroce_helper_init_net()) };
    if ibdev.is_null() {
        return Err(ENOMEM);
    }
    // SAFETY: `ndev` is valid per the caller; `dev_addr` holds at least
    // ETH_ALEN bytes for an Ethernet-like device, and `addr_len` says so.
    let (mac, mtu) = unsafe {
        let mut mac = [0u8; 6];
        if (*ndev).addr_len >= 6 && !(*ndev).dev_addr.is_null() {
            core::ptr::copy_nonoverlapping((*ndev).dev_addr, mac.as_mut_ptr(), 6);
        }
        (mac, (*ndev).mtu)
    };

    // SAFETY: `ibdev` was just allocated and is not yet visible to anyone.
    unsafe {
        let d = &mut *ibdev;
        let desc = b"rroce\0";
        for (dst, src) in d.node_desc.iter_mut().zip(desc.iter()) {
            *dst = *src;
        }
        d.node_type = sys::RDMA_NODE_IB_CA as u8;
        d.phys_port_cnt = 1;
        d.num_comp_vectors = sys::rroce_helper_num_possible_cpus() as c_int;
        d.local_dma_lkey = 0;
        d.node_guid = guid_from_mac(&mac);
        d.uverbs_cmd_mask |= (1u64 << sys::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_POST_SEND)
            | (1u64 << sys::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_REQ_NOTIFY_CQ);
        d.link_ops = LINK_OPS.get();
        RroceDev::init(ibdev, ndev, mtu);
        let mut ops = crate::verbs::device_ops();
        ops.dealloc_driver = Some(dealloc_driver);
        ops.get_netdev = Some(get_netdev);
        sys::ib_set_device_ops(ibdev, &ops);
    }
    Ok(ibdev)
}

/// Gives the device its object tables and the namespace's UDP sockets,
/// released in `dealloc_driver`; on failure frees the device.
///
/// # Safety
///
/// `ibdev` comes from [`alloc_device`] and is not yet visible to anyone;
/// `ndev` is a referenced netdev.
unsafe fn attach(ibdev: *mut sys::ib_device, ndev: *mut sys::net_device) -> Result {
    let tables = Tables::new();
    // SAFETY: `ndev` is valid per the caller.
    let socks = tables
        .as_ref()
        .map_err(|e| *e)
        .and_then(|_| unsafe { crate::net::get(ndev) });
    match (tables, socks) {
        (Ok(tables), Ok(())) => {
            // SAFETY: not yet visible to anyone; the fields hold zeroed
            // (empty) tables, which need no drop.
            unsafe { RroceDev::install(ibdev, tables, crate::net::net_of(ndev)) };
            Ok(())
        }
        (_, Err(e)) | (Err(e), _) => {
            // SAFETY: never registered, still ours.
            unsafe { sys::ib_dealloc_device(ibdev) };
            Err(e)
        }
    }
}

/// Lists the device in the registry and registers it with the core; on
/// failure frees it.
///
/// # Safety
///
/// `ibdev` comes from [`attach`] and is not yet visible to anyone; `ndev`
/// is a referenced netdev and `name` a NUL-terminated string.
unsafe fn register(
    ibdev: *mut sys::ib_device,
    ndev: *mut sys::net_device,
    name: *const c_char,
) -> Result {
    // The netdev is not given to the core (`ib_device_set_netdev`), see the
    // module docs; the registry holds it, with a reference.
    // SAFETY: `ndev` is valid per the caller.
    unsafe { sys::rroce_helper_dev_hold(ndev) };
    // SAFETY: `ibdev` is allocated (by `alloc_device`) and not listed.
    let mut listed = unsafe { DEVICES.lock().insert(ibdev, ndev) };
    if listed.is_err() {
        // Entries of devices just removed may be waiting for the reaper.
        reap_dead();
        // SAFETY: as above.
        listed = unsafe { DEVICES.lock().insert(ibdev, ndev) };
    }
    // The registry lock is dropped: the unwinding below sleeps.
    if let Err(e) = listed {
        // SAFETY: drops the reference taken above; `ibdev` was never
        // registered, so we still own it.
        unsafe {
            sys::rroce_helper_dev_put(ndev);
            sys::ib_dealloc_device(ibdev);
        }
        pr_err!("too many rroce devices (at most {})\n", MAX_DEVICES);
        return Err(e);
    }
    // SAFETY: fully initialized above; a NULL DMA device means virtual DMA.
    let err = unsafe { sys::ib_register_device(ibdev, name, null_mut()) };
    if err != 0 {
        // On failure the core has not called `dealloc_driver`.
        let held = DEVICES.lock().remove(ibdev);
        registry::wait_readers();
        // SAFETY: drops the registry's netdev and device references;
        // registration failed, so we still own `ibdev`.
        unsafe {
            if let Some(n) = held {
                sys::rroce_helper_dev_put(n);
            }
            sys::rroce_helper_ib_device_unhold(ibdev);
            sys::ib_dealloc_device(ibdev);
        }
        return Err(Error::from_errno(err));
    }
    Ok(())
}

/// # Safety
///
/// Called by the RDMA core through rroce's `rdma_link_ops`, with the
/// arguments that contract describes.
unsafe extern "C" fn dellink(_ibdev: *mut sys::ib_device) -> c_int {
    // Nothing beyond what unregistration does; the core unregisters next.
    0
}

/// The `dealloc_driver` op: the device's registry entry goes dead and the
/// device releases its state; the core frees the memory once this returns
/// and the entry's reference is dropped ([`reap`]).
///
/// # Safety
///
/// Called only by the RDMA core through rroce's `ib_device_ops`, once, for
/// one of rroce's devices, after every object of it is gone.
unsafe extern "C" fn dealloc_driver(ibdev: *mut sys::ib_device) {
    let held = DEVICES.lock().mark_dead(ibdev);
    if let Some(ndev) = held {
        // SAFETY: the registry held this reference.
        unsafe { sys::rroce_helper_dev_put(ndev) };
    }
    // A packet that found the device without the lock is done with its
    // slot before the core frees the device.
    registry::wait_readers();
    // SAFETY: ours and no longer used by anyone: every object is gone and
    // no packet or lookup can find the device (its entry is dead).
    let net = unsafe { RroceDev::release(ibdev) };
    if net != 0 {
        crate::net::put(net);
    }
    // Test builds: hold the callback open (tests/vm/t41-unload.sh).
    #[cfg(CONFIG_KUNIT)]
    // SAFETY: plain call in process context (as `dealloc_driver` is).
    unsafe {
        sys::rroce_helper_test_dealloc_delay()
    };
    // SAFETY: initialized at module init; unload cancels it only after
    // every device's unregistration, this one's included, has finished.
    unsafe { sys::rroce_helper_queue_work(REAPER.get()) };
}

/// [`REAPER`]'s work function: frees every dead registry entry.
///
/// # Safety
///
/// Called by the workqueue for [`REAPER`].
unsafe extern "C" fn reap(_work: *mut sys::work_struct) {
    reap_dead();
}

/// Frees every dead registry entry, each once the core has left its
/// device's unregistration. Process context; sleeps.
fn reap_dead() {
    loop {
        // The registry lock is dropped before waiting.
        let Some(dev) = DEVICES.lock().take_dead() else {
            break;
        };
        // SAFETY: the entry's reference, now ours, keeps `dev` allocated.
        unsafe { fence_and_put(dev) };
    }
}

/// Waits for a queued or running reaper (KUnit: after an unregistration).
#[cfg(CONFIG_KUNIT)]
pub(crate) fn flush_reaper() {
    // SAFETY: initialized at module init (KUnit runs after it).
    unsafe { sys::rroce_helper_flush_work(REAPER.get()) };
}

/// Waits until the core has left `dev`'s unregistration (so its
/// `dealloc_driver` has returned), then drops a dead entry's reference.
///
/// # Safety
///
/// `dev` comes from a dead registry entry just freed, whose reference on
/// `dev` the caller now owns.
unsafe fn fence_and_put(dev: *mut sys::ib_device) {
    // SAFETY: allocated (the reference); `dealloc_driver` has started, so
    // the device is being or has been unregistered and this only waits.
    unsafe {
        sys::ib_unregister_device(dev);
        sys::rroce_helper_ib_device_unhold(dev);
    }
}

/// The `get_netdev` op: the netdev bound to port 1, referenced, or null
/// once it has unregistered.
///
/// # Safety
///
/// Called only by the RDMA core through rroce's `ib_device_ops`, for one
/// of rroce's devices.
unsafe extern "C" fn get_netdev(ibdev: *mut sys::ib_device, port: u32) -> *mut sys::net_device {
    if port != 1 {
        return null_mut();
    }
    let list = DEVICES.lock();
    match list.by_dev(ibdev) {
        Some(slot) if slot.ndev != 0 => {
            let ndev = slot.ndev as *mut sys::net_device;
            // SAFETY: the slot holds a reference, so the netdev is alive.
            unsafe { sys::rroce_helper_dev_hold(ndev) };
            ndev
        }
        _ => null_mut(),
    }
}

/// # Safety
///
/// Called by the netdev notifier chain with a `struct netdev_notifier_info`.
unsafe extern "C" fn netdev_event(
    _nb: *mut sys::notifier_block,
    event: c_ulong,
    info: *mut c_void,
) -> c_int {
    // SAFETY: netdev notifiers receive a `netdev_notifier_info`.
    let ndev = unsafe { sys::rroce_helper_notifier_info_to_dev(info) };
    let Some(ibdev) = device_of_netdev(ndev) else {
        return sys::NOTIFY_OK as c_int;
    };
    match event as c_uint {
        sys::netdev_cmd_NETDEV_UNREGISTER => {
            // The netdev goes away: forget it (so `get_netdev` returns
            // null from now on) and remove the device.
            let held = DEVICES.lock().forget_netdev(ndev);
            // SAFETY: `ibdev` is one of ours and referenced.
            unsafe { RroceDev::from_ib(ibdev) }.forget_netdev();
            // SAFETY: drops the registry's reference; `ibdev` is
            // referenced, and the unregistration is queued as RTNL is held.
            unsafe {
                if let Some(n) = held {
                    sys::rroce_helper_dev_put(n);
                }
                sys::ib_unregister_device_queued(ibdev);
            }
        }
        sys::netdev_cmd_NETDEV_CHANGEMTU => {
            // SAFETY: `ibdev` is one of ours and referenced; `ndev` is live.
            unsafe { RroceDev::from_ib(ibdev).set_mtu((*ndev).mtu) };
        }
        sys::netdev_cmd_NETDEV_UP | sys::netdev_cmd_NETDEV_DOWN | sys::netdev_cmd_NETDEV_CHANGE => {
            // The core's notifier does this only for devices it indexes by
            // netdev, which rroce's are not.
            // SAFETY: both are live and referenced.
            unsafe { sys::ib_dispatch_port_state_event(ibdev, ndev) };
        }
        _ => {}
    }
    // SAFETY: drops the reference `device_of_netdev` took.
    unsafe { sys::ib_device_put(ibdev) };
    sys::NOTIFY_OK as c_int
}
