// SPDX-License-Identifier: GPL-2.0

//! The rroce RDMA device: `rdma link add NAME type rroce netdev DEV`.
//!
//! Each device is an `ib_device` allocated by the RDMA core with rroce's
//! state ([`RroceDev`]) around it, bound to one netdev, registered with the
//! RoCEv2 port capabilities so the core fills its GID table from the
//! netdev's IPv4 and IPv6 addresses.
//!
//! # Lifetimes
//!
//! The RDMA core owns the memory of every device: it is freed after the core
//! calls `dealloc_driver`. rroce keeps a registry of the devices it
//! registered so that module unload can unregister them; an entry is removed
//! in `dealloc_driver`, so a pointer found in the registry under its lock
//! always points at live memory. Devices are unregistered by `rdma link del`
//! (the core), by the netdev going away (our notifier queues it), by module
//! unload, or by `ib_unregister_driver(RDMA_DRIVER_RXE)` when `rdma_rxe` is
//! unloaded (see `Documentation/device.rst`).
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
//! Lock order: `DEVICES` is a leaf, IRQ-safe spinlock (`get_netdev` may be
//! called in atomic context); nothing is called into the RDMA core while
//! holding it except `ib_device_try_get()` and `dev_hold()`.

use core::{
    cell::UnsafeCell,
    mem::size_of,
    ptr::null_mut,
    sync::atomic::{AtomicPtr, AtomicU32, Ordering},
};

use kernel::{
    error::to_result,
    ffi::{c_char, c_int, c_uint, c_ulong, c_void},
    prelude::*,
    ModuleMetadata, //
};

use crate::{engine::index::IndexAllocator, rdma::sys, table::RcuTable};

/// `IB_MGMT_MAD_SIZE` from `rdma/ib_mad.h`: a 24-byte MAD header + 232 bytes.
const IB_MGMT_MAD_SIZE: u32 = 256;

/// QP numbers are allocator indices (from 1) plus the two special QPs.
const FIRST_QPN_SLOTS: usize = 3;

/// Largest number of rroce devices at once (one per netdev).
const MAX_DEVICES: usize = 64;

/// Device limits: the uapi header's `RROCE_MAX_*` (one source, see
/// `src/abi.rs`), plus what only the kernel needs.
pub(crate) mod limits {
    pub(crate) use crate::abi::{
        MAX_AH, MAX_CQ, MAX_CQE, MAX_FAST_REG_PAGE_LIST_LEN, MAX_MR, MAX_MSG_SIZE, MAX_PD, MAX_QP,
        MAX_QP_INIT_RD_ATOM, MAX_QP_RD_ATOM, MAX_QP_WR, MAX_RECV_SGE, MAX_RES_RD_ATOM,
        MAX_SEND_SGE, MAX_SGE_RD,
    };
    use kernel::ffi::c_int;

    pub(crate) const MAX_PKEYS: u16 = crate::abi::MAX_PKEYS as u16;
    pub(crate) const LOCAL_CA_ACK_DELAY: u8 = 15;
    pub(crate) const GID_TABLE_LEN: c_int = 1024;
    pub(crate) const VENDOR_ID: u32 = 0x00ff_ffff;
    pub(crate) const PAGE_SIZE_CAP: u64 = 0xffff_f000;
    /// Bitmap words of the AH and MR index allocators: 257 * 64 bits cover
    /// indices 1..=MAX_MR (index 0 is reserved).
    pub(crate) const ID_WORDS: usize = 257;
    const _: () = assert!(ID_WORDS * 64 > MAX_MR as usize && ID_WORDS * 64 > MAX_AH as usize);
    /// Bitmap words of the QP number allocator (indices 1..=MAX_QP).
    pub(crate) const QP_ID_WORDS: usize = 1025;
    const _: () = assert!(QP_ID_WORDS * 64 > MAX_QP as usize);
}

/// An rroce RDMA device.
///
/// # Invariants
///
/// `ibdev` is the first field, so a `*mut sys::ib_device` that the RDMA core
/// hands to rroce's ops (whose `ops.size` is this struct's) is also a valid
/// `*mut RroceDev`. Every other field is valid when zeroed, because the core
/// allocates the struct with `kzalloc`.
#[repr(C)]
pub(crate) struct RroceDev {
    ibdev: sys::ib_device,
    /// Active path MTU as an `enum ib_mtu`, following the netdev's MTU.
    active_mtu: AtomicU32,
    /// AH numbers (`rxe_create_ah_resp.ah_num`); written in place by
    /// `add_device` before registration.
    pub(crate) ah_ids: IndexAllocator<{ limits::ID_WORDS }>,
    /// MR indices (the upper 24 bits of lkeys and rkeys).
    pub(crate) mr_ids: IndexAllocator<{ limits::ID_WORDS }>,
    /// QP numbers, offset by the two special QPs.
    pub(crate) qp_ids: IndexAllocator<{ limits::QP_ID_WORDS }>,
    /// MRs by index, for the transport (see `crate::table`).
    pub(crate) mrs: RcuTable<crate::mr::RroceMr>,
    /// QPs by number, for the transport.
    pub(crate) qps: RcuTable<crate::qp::QpState>,
    /// User AHs by number, for UD sends (`wr.ud.ah_num`).
    pub(crate) ahs: RcuTable<crate::ah::RroceAh>,
    /// The GSI QP (number 1) exists; zeroed (false) at allocation.
    pub(crate) gsi_taken: core::sync::atomic::AtomicBool,
    /// The bound netdev while it is registered (cleared, for RCU readers,
    /// when it unregisters); the registry holds the reference.
    ndev: AtomicPtr<sys::net_device>,
    /// The netdev's namespace key for `net::put`, 0 if none was taken.
    net: usize,
    /// Packet counters (`rdma statistic`).
    pub(crate) counters: crate::counters::Counters,
}

/// The objects whose size the core must know. Each starts with the core's
/// struct, like `RroceDev`.
#[repr(C)]
struct RroceUcontext {
    ibuc: sys::ib_ucontext,
}

#[repr(C)]
struct RrocePd {
    ibpd: sys::ib_pd,
}

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

static NETDEV_NB: KernelCell<sys::notifier_block> =
    KernelCell(UnsafeCell::new(sys::notifier_block {
        notifier_call: Some(netdev_event),
        next: null_mut(),
        priority: 0,
    }));

/// One registered device and the netdev it is bound to.
///
/// # Invariants
///
/// `dev` is 0 for a free slot, else the address of an allocated rroce
/// `ib_device` (the slot is cleared in `dealloc_driver`, before the core
/// frees it). `ndev` is 0 or a netdev on which this slot holds a reference
/// (`dev_hold`), dropped when the netdev unregisters or the slot is freed.
#[derive(Clone, Copy)]
struct DeviceSlot {
    dev: usize,
    ndev: usize,
}

/// Registered devices.
struct DeviceList {
    slots: [DeviceSlot; MAX_DEVICES],
}

impl DeviceList {
    const fn new() -> Self {
        Self {
            slots: [DeviceSlot { dev: 0, ndev: 0 }; MAX_DEVICES],
        }
    }

    fn insert(&mut self, dev: *mut sys::ib_device, ndev: *mut sys::net_device) -> Result {
        let slot = self.slots.iter_mut().find(|d| d.dev == 0).ok_or(ENOSPC)?;
        *slot = DeviceSlot {
            dev: dev as usize,
            ndev: ndev as usize,
        };
        Ok(())
    }

    /// Frees the slot of `dev`, returning its netdev (whose reference the
    /// caller must drop) if it still had one.
    fn remove(&mut self, dev: *mut sys::ib_device) -> Option<*mut sys::net_device> {
        let slot = self.slots.iter_mut().find(|d| d.dev == dev as usize)?;
        let ndev = slot.ndev;
        *slot = DeviceSlot { dev: 0, ndev: 0 };
        (ndev != 0).then_some(ndev as *mut sys::net_device)
    }

    fn by_dev(&self, dev: *mut sys::ib_device) -> Option<&DeviceSlot> {
        self.slots.iter().find(|d| d.dev == dev as usize)
    }

    fn by_ndev(&mut self, ndev: *mut sys::net_device) -> Option<&mut DeviceSlot> {
        self.slots
            .iter_mut()
            .find(|d| d.dev != 0 && d.ndev == ndev as usize)
    }

    fn is_empty(&self) -> bool {
        self.slots.iter().all(|d| d.dev == 0)
    }
}

kernel::sync::global_lock! {
    // SAFETY: `Registration::new` initializes it before anything else runs.
    unsafe(uninit) static DEVICES: SpinLockIrq<DeviceList> = DeviceList::new();
}

/// The module's registration with the RDMA core and netdev notifiers.
/// Dropping it unregisters everything, devices included.
pub(crate) struct Registration;

impl Registration {
    /// Register the `rroce` link type and the netdev notifier.
    pub(crate) fn new() -> Result<Self> {
        // SAFETY: called once, from module init, before any other use.
        unsafe { DEVICES.init() };
        crate::net::init();
        crate::transport::init();
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
        // Unregister every remaining device, including one the core is
        // already unregistering from its own work queue (after a netdev
        // went away): `ib_unregister_device` serializes with that on the
        // device's unregistration lock, inside which `dealloc_driver` runs,
        // so once it returns no rroce code runs for the device any more
        // (the fence `ib_unregister_driver` gives; rroce cannot use that,
        // as it shares rdma_rxe's driver id). A device in the registry is
        // still allocated: entries are removed in `dealloc_driver`.
        let mut last = null_mut();
        loop {
            let next = {
                let list = DEVICES.lock();
                let Some(slot) = list.slots.iter().find(|d| d.dev != 0) else {
                    break;
                };
                let dev = slot.dev as *mut sys::ib_device;
                if dev == last {
                    // Unregistered, yet still here: reported below.
                    break;
                }
                // SAFETY: `dev` is live (see above) and the registry lock
                // keeps `dealloc_driver` from completing meanwhile; the
                // hold keeps its memory past that.
                unsafe { sys::rroce_helper_ib_device_hold(dev) };
                dev
            };
            // SAFETY: held above; a device being or already unregistered is
            // fine for `ib_unregister_device`, which then only waits.
            unsafe {
                sys::ib_unregister_device(next);
                sys::rroce_helper_ib_device_unhold(next);
            }
            last = next;
        }
        if !DEVICES.lock().is_empty() {
            pr_warn!("devices still registered at unload\n");
        }
    }
}

/// Converts a kernel `Result` into the C convention of the RDMA core.
fn to_c(r: Result) -> c_int {
    match r {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// `enum ib_mtu` for a netdev MTU, as the RDMA core defines it: the room
/// left after the largest RoCEv2 headers, rounded down to an IB MTU and
/// clamped to 256..=4096.
fn ib_mtu_for_netdev_mtu(mtu: u32) -> sys::ib_mtu {
    // GRH (40) + UDP (8) + BTH (12) + XRC ETH (4) + AtomicETH (28) + ICRC (4).
    const OVERHEAD: u32 = 96;
    match mtu.saturating_sub(OVERHEAD) {
        4096.. => sys::ib_mtu_IB_MTU_4096,
        2048.. => sys::ib_mtu_IB_MTU_2048,
        1024.. => sys::ib_mtu_IB_MTU_1024,
        512.. => sys::ib_mtu_IB_MTU_512,
        _ => sys::ib_mtu_IB_MTU_256,
    }
}

/// The EUI-64 node GUID derived from a MAC address, in network byte order.
fn guid_from_mac(mac: &[u8; 6]) -> u64 {
    let eui = [
        mac[0] ^ 2,
        mac[1],
        mac[2],
        0xff,
        0xfe,
        mac[3],
        mac[4],
        mac[5],
    ];
    u64::from_ne_bytes(eui)
}

impl RroceDev {
    /// # Safety
    ///
    /// `ibdev` must be an `ib_device` allocated by [`newlink`] (so embedded
    /// in a `RroceDev`) and alive for `'a`.
    pub(crate) unsafe fn from_ib<'a>(ibdev: *mut sys::ib_device) -> &'a RroceDev {
        // SAFETY: per the type invariant `ibdev` is the first field of a
        // `RroceDev`, and the caller guarantees it is alive.
        unsafe { &*ibdev.cast::<RroceDev>() }
    }

    /// The netdev, while registered; use it only inside the RCU read-side
    /// section the caller holds.
    pub(crate) fn netdev(&self, _guard: &kernel::sync::rcu::Guard) -> *mut sys::net_device {
        self.ndev.load(Ordering::Acquire)
    }

    /// The active MTU as an `enum ib_mtu`.
    pub(crate) fn active_mtu(&self) -> sys::ib_mtu {
        self.active_mtu.load(Ordering::Relaxed)
    }

    fn set_mtu(&self, netdev_mtu: u32) {
        self.active_mtu
            .store(ib_mtu_for_netdev_mtu(netdev_mtu), Ordering::Relaxed);
    }
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
            let same_net = unsafe { (*dev.cast::<RroceDev>()).net } == net;
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
        let found = !attr.is_null() && (attr as usize) < (-4095isize) as usize;
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

/// # Safety
///
/// Called by the RDMA core through rroce's `rdma_link_ops`, with the
/// arguments that contract describes.
unsafe extern "C" fn newlink(ibdev_name: *const c_char, ndev: *mut sys::net_device) -> c_int {
    // SAFETY: the RDMA core passes a valid name and a referenced netdev.
    to_c(unsafe { add_device(ibdev_name, ndev) }.map(|_| ()))
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
    // One RDMA device per netdev: rroce's own, or rdma_rxe's (which the
    // core indexes by netdev).
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
        let rdev = ibdev.cast::<RroceDev>();
        core::ptr::addr_of_mut!((*rdev).ah_ids).write(IndexAllocator::new());
        core::ptr::addr_of_mut!((*rdev).mr_ids).write(IndexAllocator::new());
        core::ptr::addr_of_mut!((*rdev).qp_ids).write(IndexAllocator::new());
        RroceDev::from_ib(ibdev).set_mtu(mtu);
        (*rdev).ndev.store(ndev, Ordering::Release);
        let ops = device_ops();
        sys::ib_set_device_ops(ibdev, &ops);
    }

    // Object tables and the namespace's UDP sockets, released in
    // `dealloc_driver` (or below on failure).
    let tables = RcuTable::new(limits::MAX_MR as usize + 1).and_then(|m| {
        Ok((
            m,
            RcuTable::new(limits::MAX_QP as usize + FIRST_QPN_SLOTS)?,
            // Every number the AH allocator can hand out has a slot.
            RcuTable::new(limits::ID_WORDS * 64 + 1)?,
        ))
    });
    // SAFETY: `ndev` is valid per the caller.
    let socks = tables
        .as_ref()
        .map_err(|e| *e)
        .and_then(|_| unsafe { crate::net::get(ndev) });
    match (tables, socks) {
        (Ok((mrs, qps, ahs)), Ok(())) => {
            let rdev = ibdev.cast::<RroceDev>();
            // SAFETY: not yet visible to anyone; the fields hold zeroed
            // (empty) tables, which need no drop.
            unsafe {
                core::ptr::addr_of_mut!((*rdev).mrs).write(mrs);
                core::ptr::addr_of_mut!((*rdev).qps).write(qps);
                core::ptr::addr_of_mut!((*rdev).ahs).write(ahs);
                (*rdev).net = crate::net::net_of(ndev);
            }
        }
        (_, Err(e)) | (Err(e), _) => {
            // SAFETY: never registered, still ours.
            unsafe { sys::ib_dealloc_device(ibdev) };
            return Err(e);
        }
    }

    // The netdev is not given to the core (`ib_device_set_netdev`), see the
    // module docs; the registry holds it, with a reference.
    // SAFETY: `ndev` is valid per the caller.
    unsafe { sys::rroce_helper_dev_hold(ndev) };
    if let Err(e) = DEVICES.lock().insert(ibdev, ndev) {
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
        // SAFETY: drops the registry's netdev reference; registration
        // failed, so we still own `ibdev`.
        unsafe {
            if let Some(n) = held {
                sys::rroce_helper_dev_put(n);
            }
            sys::ib_dealloc_device(ibdev);
        }
        return Err(Error::from_errno(err));
    }
    Ok(ibdev)
}

/// # Safety
///
/// Called by the RDMA core through rroce's `rdma_link_ops`, with the
/// arguments that contract describes.
unsafe extern "C" fn dellink(_ibdev: *mut sys::ib_device) -> c_int {
    // Nothing beyond what unregistration does; the core unregisters next.
    0
}

/// # Safety
///
/// Called only by the RDMA core through rroce's `ib_device_ops`, with the
/// arguments that op's contract describes: live objects of an rroce device,
/// valid attribute and output pointers, and a udata that is null for kernel
/// callers.
unsafe extern "C" fn dealloc_driver(ibdev: *mut sys::ib_device) {
    // The core frees the memory after this returns.
    if let Some(ndev) = DEVICES.lock().remove(ibdev) {
        // SAFETY: the registry held this reference.
        unsafe { sys::rroce_helper_dev_put(ndev) };
    }
    let rdev = ibdev.cast::<RroceDev>();
    // SAFETY: ours and no longer used by anyone: every object is gone and
    // no packet can find the device (it left the registry above). Zeroed
    // tables (a failed `add_device`) are empty and drop as no-ops.
    unsafe {
        if (*rdev).net != 0 {
            crate::net::put((*rdev).net);
            (*rdev).net = 0;
        }
        core::ptr::drop_in_place(core::ptr::addr_of_mut!((*rdev).mrs));
        core::ptr::drop_in_place(core::ptr::addr_of_mut!((*rdev).qps));
        core::ptr::drop_in_place(core::ptr::addr_of_mut!((*rdev).ahs));
    }
}

/// The `get_netdev` op: the netdev bound to port 1, referenced, or null
/// once it has unregistered.
///
/// # Safety
///
/// Called only by the RDMA core through rroce's `ib_device_ops`, with the
/// arguments that op's contract describes: live objects of an rroce device,
/// valid attribute and output pointers, and a udata that is null for kernel
/// callers.
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
            let held = DEVICES.lock().by_ndev(ndev).map(|slot| {
                slot.ndev = 0;
                ndev
            });
            // SAFETY: `ibdev` is one of ours and referenced.
            unsafe { RroceDev::from_ib(ibdev) }
                .ndev
                .store(null_mut(), Ordering::Release);
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

/// The ops table handed to `ib_set_device_ops` (which copies it).
fn device_ops() -> sys::ib_device_ops {
    let mut ops = sys::ib_device_ops {
        owner: <crate::Rroce as ModuleMetadata>::THIS_MODULE
            .as_ptr()
            .cast(),
        ..Default::default()
    };
    ops.owner = <crate::Rroce as ModuleMetadata>::THIS_MODULE
        .as_ptr()
        .cast();
    ops.driver_id = crate::abi::DRIVER_ID;
    const _: () = assert!(crate::abi::DRIVER_ID == sys::rdma_driver_id_RDMA_DRIVER_RXE);
    ops.uverbs_abi_ver = crate::abi::UVERBS_ABI_VERSION;
    // `uverbs_no_driver_id_binding` stays 0: librxe binds by driver id.
    ops.dealloc_driver = Some(dealloc_driver);
    ops.query_device = Some(query_device);
    ops.query_port = Some(query_port);
    ops.get_netdev = Some(get_netdev);
    ops.get_port_immutable = Some(get_port_immutable);
    ops.get_link_layer = Some(get_link_layer);
    ops.query_pkey = Some(query_pkey);
    ops.alloc_ucontext = Some(alloc_ucontext);
    ops.dealloc_ucontext = Some(dealloc_ucontext);
    ops.disassociate_ucontext = Some(disassociate_ucontext);
    ops.alloc_pd = Some(alloc_pd);
    ops.dealloc_pd = Some(dealloc_pd);
    ops.mmap = Some(crate::rdma::mmap::mmap);
    ops.mmap_free = Some(crate::rdma::mmap::mmap_free);
    ops.create_ah = Some(crate::ah::create_ah);
    ops.create_user_ah = Some(crate::ah::create_ah);
    ops.destroy_ah = Some(crate::ah::destroy_ah);
    ops.get_dma_mr = Some(crate::mr::get_dma_mr);
    ops.reg_user_mr = Some(crate::mr::reg_user_mr);
    ops.dereg_mr = Some(crate::mr::dereg_mr);
    ops.size_ib_ah = size_of::<crate::ah::RroceAh>();
    ops.create_cq = Some(crate::cq::create_cq);
    ops.create_user_cq = Some(crate::cq::create_cq);
    ops.destroy_cq = Some(crate::cq::destroy_cq);
    ops.resize_user_cq = Some(crate::cq::resize_cq);
    ops.poll_cq = Some(crate::cq::poll_cq);
    ops.req_notify_cq = Some(crate::cq::req_notify_cq);
    ops.size_ib_cq = size_of::<crate::cq::RroceCq>();
    ops.alloc_hw_port_stats = Some(crate::counters::alloc_hw_port_stats);
    ops.get_hw_stats = Some(crate::counters::get_hw_stats);
    // QPs: user RC and UD QPs, kernel RC QPs (`post_send`/`post_recv` with
    // work requests).
    ops.create_qp = Some(crate::verbs::qp::create_qp);
    ops.modify_qp = Some(crate::verbs::qp::modify_qp);
    ops.query_qp = Some(crate::verbs::qp::query_qp);
    ops.destroy_qp = Some(crate::verbs::qp::destroy_qp);
    ops.post_send = Some(crate::verbs::qp::post_send);
    ops.post_recv = Some(crate::verbs::qp::post_recv);
    ops.size_ib_qp = size_of::<crate::qp::RroceQp>();
    ops.size_ib_ucontext = size_of::<RroceUcontext>();
    ops.size_ib_pd = size_of::<RrocePd>();
    ops
}

/// Whether a udata carries anything (rroce's query verbs take none).
///
/// # Safety
///
/// `udata` is null or valid.
unsafe fn udata_nonempty(udata: *mut sys::ib_udata) -> bool {
    // SAFETY: checked for null; valid per the caller.
    !udata.is_null() && unsafe { (*udata).inlen != 0 || (*udata).outlen != 0 }
}

/// # Safety
///
/// Called only by the RDMA core through rroce's `ib_device_ops`, with the
/// arguments that op's contract describes: live objects of an rroce device,
/// valid attribute and output pointers, and a udata that is null for kernel
/// callers.
unsafe extern "C" fn query_device(
    _ibdev: *mut sys::ib_device,
    attr: *mut sys::ib_device_attr,
    udata: *mut sys::ib_udata,
) -> c_int {
    // SAFETY: the core passes null or a valid udata.
    if unsafe { udata_nonempty(udata) } {
        return EINVAL.to_errno();
    }
    // SAFETY: the core passes a valid, zeroed attribute struct.
    let a = unsafe { &mut *attr };
    a.fw_ver = 0;
    a.max_mr_size = crate::abi::MAX_MR_SIZE;
    a.page_size_cap = limits::PAGE_SIZE_CAP;
    a.vendor_id = limits::VENDOR_ID;
    a.vendor_part_id = 0;
    a.hw_ver = 0;
    a.max_qp = limits::MAX_QP;
    a.max_qp_wr = limits::MAX_QP_WR;
    a.device_cap_flags = (sys::ib_device_cap_flags_IB_DEVICE_BAD_PKEY_CNTR
        | sys::ib_device_cap_flags_IB_DEVICE_BAD_QKEY_CNTR
        | sys::ib_device_cap_flags_IB_DEVICE_SYS_IMAGE_GUID
        | sys::ib_device_cap_flags_IB_DEVICE_RC_RNR_NAK_GEN) as u64;
    // `rdma link del` may unregister the device.
    a.kernel_cap_flags = sys::ib_kernel_cap_flags_IBK_ALLOW_USER_UNREG.into();
    a.max_send_sge = limits::MAX_SEND_SGE;
    a.max_recv_sge = limits::MAX_RECV_SGE;
    a.max_sge_rd = limits::MAX_SGE_RD;
    a.max_cq = limits::MAX_CQ;
    a.max_cqe = limits::MAX_CQE;
    a.max_mr = limits::MAX_MR;
    a.max_pd = limits::MAX_PD;
    a.max_qp_rd_atom = limits::MAX_QP_RD_ATOM;
    a.max_res_rd_atom = limits::MAX_RES_RD_ATOM;
    a.max_qp_init_rd_atom = limits::MAX_QP_INIT_RD_ATOM;
    a.atomic_cap = sys::ib_atomic_cap_IB_ATOMIC_HCA;
    // SRQs and memory windows are not implemented yet: report none (and
    // no IB_DEVICE_SRQ_RESIZE / MEM_WINDOW), so applications do not plan
    // on them. The ABI's rxe limits (MAX_SRQ*, MAX_MW) apply once they are.
    a.max_srq = 0;
    a.max_srq_wr = 0;
    a.max_srq_sge = 0;
    a.max_ah = limits::MAX_AH;
    a.max_mw = 0;
    a.max_fast_reg_page_list_len = limits::MAX_FAST_REG_PAGE_LIST_LEN;
    a.max_pkeys = limits::MAX_PKEYS;
    a.local_ca_ack_delay = limits::LOCAL_CA_ACK_DELAY;
    0
}

/// # Safety
///
/// Called only by the RDMA core through rroce's `ib_device_ops`, with the
/// arguments that op's contract describes: live objects of an rroce device,
/// valid attribute and output pointers, and a udata that is null for kernel
/// callers.
unsafe extern "C" fn query_port(
    ibdev: *mut sys::ib_device,
    port: u32,
    attr: *mut sys::ib_port_attr,
) -> c_int {
    if port != 1 {
        return EINVAL.to_errno();
    }
    // SAFETY: the core passes one of our devices and a valid, zeroed attr.
    let (dev, a) = unsafe { (RroceDev::from_ib(ibdev), &mut *attr) };
    a.max_mtu = sys::ib_mtu_IB_MTU_4096;
    a.active_mtu = dev.active_mtu.load(Ordering::Relaxed);
    a.gid_tbl_len = limits::GID_TABLE_LEN;
    // IB_PORT_CM_SUP, which the uapi spells IB_UVERBS_PCF_CM_SUP.
    a.port_cap_flags = sys::ib_uverbs_query_port_cap_flags_IB_UVERBS_PCF_CM_SUP;
    a.max_msg_sz = limits::MAX_MSG_SIZE;
    a.pkey_tbl_len = limits::MAX_PKEYS;
    a.max_vl_num = 1;
    a.lid = 0;
    a.sm_lid = 0;
    a.state = sys::ib_port_state_IB_PORT_DOWN;
    a.phys_state = sys::ib_port_phys_state_IB_PORT_PHYS_STATE_DISABLED as u8;
    // SAFETY: `ibdev` is valid; the returned netdev (if any) is referenced.
    let ndev = unsafe { sys::ib_device_get_netdev(ibdev, 1) };
    if !ndev.is_null() {
        // SAFETY: `ndev` is referenced until the `dev_put` below.
        unsafe {
            let state = sys::rroce_helper_port_state(ndev) as sys::ib_port_state;
            a.state = state;
            a.phys_state = if state == sys::ib_port_state_IB_PORT_ACTIVE {
                sys::ib_port_phys_state_IB_PORT_PHYS_STATE_LINK_UP as u8
            } else if sys::rroce_helper_netdev_is_up(ndev) != 0 {
                sys::ib_port_phys_state_IB_PORT_PHYS_STATE_POLLING as u8
            } else {
                sys::ib_port_phys_state_IB_PORT_PHYS_STATE_DISABLED as u8
            };
            a.phys_mtu = (*ndev).mtu;
            sys::rroce_helper_dev_put(ndev);
        }
    }
    // SAFETY: `ibdev` is valid and has port 1.
    unsafe { sys::ib_get_eth_speed(ibdev, 1, &mut a.active_speed, &mut a.active_width) }
}

/// # Safety
///
/// Called only by the RDMA core through rroce's `ib_device_ops`, with the
/// arguments that op's contract describes: live objects of an rroce device,
/// valid attribute and output pointers, and a udata that is null for kernel
/// callers.
unsafe extern "C" fn get_port_immutable(
    ibdev: *mut sys::ib_device,
    port: u32,
    immutable: *mut sys::ib_port_immutable,
) -> c_int {
    let mut attr = sys::ib_port_attr::default();
    // SAFETY: forwards the core's valid arguments.
    let err = unsafe { query_port(ibdev, port, &mut attr) };
    if err != 0 {
        return err;
    }
    // SAFETY: the core passes a valid struct to fill.
    let im = unsafe { &mut *immutable };
    im.pkey_tbl_len = c_int::from(attr.pkey_tbl_len);
    im.gid_tbl_len = attr.gid_tbl_len;
    im.core_cap_flags = sys::RDMA_CORE_PORT_IBA_ROCE_UDP_ENCAP;
    im.max_mad_size = IB_MGMT_MAD_SIZE;
    0
}

/// # Safety
///
/// Called only by the RDMA core through rroce's `ib_device_ops`, with the
/// arguments that op's contract describes: live objects of an rroce device,
/// valid attribute and output pointers, and a udata that is null for kernel
/// callers.
unsafe extern "C" fn get_link_layer(
    _ibdev: *mut sys::ib_device,
    _port: u32,
) -> sys::rdma_link_layer {
    sys::rdma_link_layer_IB_LINK_LAYER_ETHERNET
}

/// # Safety
///
/// Called only by the RDMA core through rroce's `ib_device_ops`, with the
/// arguments that op's contract describes: live objects of an rroce device,
/// valid attribute and output pointers, and a udata that is null for kernel
/// callers.
unsafe extern "C" fn query_pkey(
    _ibdev: *mut sys::ib_device,
    _port: u32,
    index: u16,
    pkey: *mut u16,
) -> c_int {
    if index != 0 {
        return EINVAL.to_errno();
    }
    // SAFETY: the core passes a valid output pointer.
    unsafe { *pkey = 0xffff };
    0
}

/// # Safety
///
/// Called only by the RDMA core through rroce's `ib_device_ops`, with the
/// arguments that op's contract describes: live objects of an rroce device,
/// valid attribute and output pointers, and a udata that is null for kernel
/// callers.
unsafe extern "C" fn alloc_ucontext(
    _uctx: *mut sys::ib_ucontext,
    _udata: *mut sys::ib_udata,
) -> c_int {
    0
}

/// # Safety
///
/// Called only by the RDMA core through rroce's `ib_device_ops`, with the
/// arguments that op's contract describes: live objects of an rroce device,
/// valid attribute and output pointers, and a udata that is null for kernel
/// callers.
unsafe extern "C" fn dealloc_ucontext(_uctx: *mut sys::ib_ucontext) {}

/// The `disassociate_ucontext` op. Its presence lets the RDMA core remove a
/// device (rdma link del, netdev removal, rmmod) while processes still have
/// it open: the core destroys their objects through rroce's destroy ops and
/// fails their later calls. Nothing else is needed: no mapping of a queue
/// buffer refers to rroce's code or to memory that can be reused (see
/// `rdma::mmap`).
///
/// # Safety
///
/// Called only by the RDMA core through rroce's `ib_device_ops`, with the
/// arguments that op's contract describes: live objects of an rroce device,
/// valid attribute and output pointers, and a udata that is null for kernel
/// callers.
unsafe extern "C" fn disassociate_ucontext(_uctx: *mut sys::ib_ucontext) {}

/// # Safety
///
/// Called only by the RDMA core through rroce's `ib_device_ops`, with the
/// arguments that op's contract describes: live objects of an rroce device,
/// valid attribute and output pointers, and a udata that is null for kernel
/// callers.
unsafe extern "C" fn alloc_pd(_pd: *mut sys::ib_pd, _udata: *mut sys::ib_udata) -> c_int {
    0
}

/// # Safety
///
/// Called only by the RDMA core through rroce's `ib_device_ops`, with the
/// arguments that op's contract describes: live objects of an rroce device,
/// valid attribute and output pointers, and a udata that is null for kernel
/// callers.
unsafe extern "C" fn dealloc_pd(_pd: *mut sys::ib_pd, _udata: *mut sys::ib_udata) -> c_int {
    0
}

/// Pure helpers, tested by KUnit.
pub(crate) mod selftest {
    /// The netdev MTU → IB MTU mapping matches the RDMA core's.
    pub(crate) fn mtu_mapping() -> Result<(), &'static str> {
        use super::{ib_mtu_for_netdev_mtu as f, sys};
        let cases = [
            (1500, sys::ib_mtu_IB_MTU_1024),
            (9000, sys::ib_mtu_IB_MTU_4096),
            (4192, sys::ib_mtu_IB_MTU_4096),
            (4191, sys::ib_mtu_IB_MTU_2048),
            (1120, sys::ib_mtu_IB_MTU_1024),
            (1119, sys::ib_mtu_IB_MTU_512),
            (68, sys::ib_mtu_IB_MTU_256),
            (0, sys::ib_mtu_IB_MTU_256),
        ];
        for (mtu, want) in cases {
            if f(mtu) != want {
                return Err("netdev MTU maps to the wrong IB MTU");
            }
        }
        Ok(())
    }

    /// The node GUID is the modified EUI-64 of the MAC.
    pub(crate) fn guid_eui64() -> Result<(), &'static str> {
        let g = super::guid_from_mac(&[0x02, 0x11, 0x22, 0x33, 0x44, 0x55]);
        if g.to_ne_bytes() != [0x00, 0x11, 0x22, 0xff, 0xfe, 0x33, 0x44, 0x55] {
            return Err("EUI-64 GUID is wrong");
        }
        Ok(())
    }
}
