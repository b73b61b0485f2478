// SPDX-License-Identifier: GPL-2.0

//! The rroce device's state: [`RroceDev`] around the core's `ib_device`,
//! its limits and its object tables.
//!
//! The RDMA core allocates every device (`_ib_alloc_device` with rroce's
//! size, zeroed) and frees it after `dealloc_driver`; `crate::link` creates,
//! registers and finds devices, the verbs (`crate::verbs`) reach them from
//! the core's objects with [`RroceDev::from_ib`].
//!
//! The `unsafe` left here is that cast from the core's `ib_device` (and the
//! writes to the device `init`, `install` and `release` make while the core
//! holds it for rroce alone): `RroceDev` is the device, so only it can say
//! how its memory is laid out.

use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, Ordering};

use kernel::prelude::*;

use crate::{
    engine::index::IndexAllocator,
    rdma::{rcu_table::RcuTable, sys},
};

/// QP numbers are allocator indices (from 1) plus the two special QPs.
const FIRST_QPN_SLOTS: usize = 3;

/// Device limits: the uapi header's `RROCE_MAX_*` (one source, see
/// `src/abi.rs`), plus what only the kernel needs.
pub(crate) mod limits {
    pub(crate) use crate::abi::{
        MAX_AH, MAX_CQ, MAX_CQE, MAX_FAST_REG_PAGE_LIST_LEN, MAX_MCAST_GRP, MAX_MCAST_QP_ATTACH,
        MAX_MR, MAX_MSG_SIZE, MAX_MW, MAX_PD, MAX_QP, MAX_QP_INIT_RD_ATOM, MAX_QP_RD_ATOM,
        MAX_QP_WR, MAX_RECV_SGE, MAX_RES_RD_ATOM, MAX_SEND_SGE, MAX_SGE_RD, MAX_SRQ, MAX_SRQ_SGE,
        MAX_SRQ_WR, MAX_TOTAL_MCAST_QP_ATTACH,
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
    const _: () = assert!(
        ID_WORDS * 64 > MAX_MR as usize
            && ID_WORDS * 64 > MAX_AH as usize
            && ID_WORDS * 64 > MAX_MW as usize
    );
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
    /// [`RroceDev::init`] before registration.
    pub(crate) ah_ids: IndexAllocator<{ limits::ID_WORDS }>,
    /// MR indices (the upper 24 bits of lkeys and rkeys).
    pub(crate) mr_ids: IndexAllocator<{ limits::ID_WORDS }>,
    /// Memory window table indices (window keys, see `engine::mw`).
    pub(crate) mw_ids: IndexAllocator<{ limits::ID_WORDS }>,
    /// QP numbers, offset by the two special QPs. Its last bitmap word
    /// reaches past `qps`: `crate::qp` never hands out those numbers.
    pub(crate) qp_ids: IndexAllocator<{ limits::QP_ID_WORDS }>,
    /// MRs by index, for the transport (see `crate::rdma::rcu_table`).
    pub(crate) mrs: RcuTable<crate::mr::RroceMr>,
    /// QPs by number, for the transport.
    pub(crate) qps: RcuTable<crate::qp::QpState>,
    /// Memory windows by table index, for the transport.
    pub(crate) mws: RcuTable<crate::mw::MwObj>,
    /// User AHs by number, for UD sends (`wr.ud.ah_num`).
    pub(crate) ahs: RcuTable<crate::ah::RroceAh>,
    /// SRQs in existence (at most `limits::MAX_SRQ`); zeroed at allocation.
    pub(crate) srqs: AtomicU32,
    /// The GSI QP (number 1) exists; zeroed (false) at allocation.
    pub(crate) gsi_taken: AtomicBool,
    /// The bound netdev while it is registered (cleared, for RCU readers,
    /// when it unregisters); the registry holds the reference.
    ndev: AtomicPtr<sys::net_device>,
    /// The netdev's namespace key for `net::put`, 0 if none was taken.
    net: usize,
    /// Packet counters (`rdma statistic`).
    pub(crate) counters: crate::counters::Counters,
}

/// The object tables of a device, made before it is registered.
pub(crate) struct Tables {
    mrs: RcuTable<crate::mr::RroceMr>,
    qps: RcuTable<crate::qp::QpState>,
    ahs: RcuTable<crate::ah::RroceAh>,
    mws: RcuTable<crate::mw::MwObj>,
}

impl Tables {
    /// Empty tables sized for the device limits.
    pub(crate) fn new() -> Result<Self> {
        Ok(Self {
            // Every index the MR allocator can hand out has a slot: it
            // spreads successive indices over its words, so a table cut at
            // MAX_MR refused about every 257th MR once ~515 existed.
            mrs: RcuTable::new(limits::ID_WORDS * 64)?,
            qps: RcuTable::new(limits::MAX_QP as usize + FIRST_QPN_SLOTS)?,
            // Every number the AH allocator can hand out has a slot.
            ahs: RcuTable::new(limits::ID_WORDS * 64 + 1)?,
            // Every index the window allocator can hand out has a slot.
            mws: RcuTable::new(limits::ID_WORDS * 64)?,
        })
    }
}

/// A user context: the core's struct only (its size is `size_ib_ucontext`).
#[repr(C)]
pub(crate) struct RroceUcontext {
    ibuc: sys::ib_ucontext,
}

/// A protection domain: the core's struct only (its size is `size_ib_pd`).
#[repr(C)]
pub(crate) struct RrocePd {
    ibpd: sys::ib_pd,
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
pub(crate) fn guid_from_mac(mac: &[u8; 6]) -> u64 {
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
    /// `ibdev` must be an `ib_device` allocated by `crate::link::add_device`
    /// (so embedded in a `RroceDev`) and alive for `'a`.
    pub(crate) unsafe fn from_ib<'a>(ibdev: *mut sys::ib_device) -> &'a RroceDev {
        // SAFETY: per the type invariant `ibdev` is the first field of a
        // `RroceDev`, and the caller guarantees it is alive.
        unsafe { &*ibdev.cast::<RroceDev>() }
    }

    /// Fills in a freshly allocated device: its allocators, MTU and netdev.
    ///
    /// # Safety
    ///
    /// `ibdev` was just allocated with `RroceDev`'s size (zeroed) and is not
    /// yet visible to anyone.
    pub(crate) unsafe fn init(ibdev: *mut sys::ib_device, ndev: *mut sys::net_device, mtu: u32) {
        let rdev = ibdev.cast::<RroceDev>();
        // SAFETY: exclusively ours per the caller; the allocators are
        // written in place (they are large).
        unsafe {
            core::ptr::addr_of_mut!((*rdev).ah_ids).write(IndexAllocator::new());
            core::ptr::addr_of_mut!((*rdev).mr_ids).write(IndexAllocator::new());
            core::ptr::addr_of_mut!((*rdev).mw_ids).write(IndexAllocator::new());
            core::ptr::addr_of_mut!((*rdev).qp_ids).write(IndexAllocator::new());
            Self::from_ib(ibdev).set_mtu(mtu);
            (*rdev).ndev.store(ndev, Ordering::Release);
        }
    }

    /// Installs the object tables and the namespace key taken with
    /// `net::get`, both released by [`RroceDev::release`].
    ///
    /// # Safety
    ///
    /// As for [`RroceDev::init`]; the tables are still the zeroed (empty)
    /// ones, which need no drop.
    pub(crate) unsafe fn install(ibdev: *mut sys::ib_device, tables: Tables, net: usize) {
        let rdev = ibdev.cast::<RroceDev>();
        // SAFETY: exclusively ours per the caller.
        unsafe {
            core::ptr::addr_of_mut!((*rdev).mrs).write(tables.mrs);
            core::ptr::addr_of_mut!((*rdev).qps).write(tables.qps);
            core::ptr::addr_of_mut!((*rdev).ahs).write(tables.ahs);
            core::ptr::addr_of_mut!((*rdev).mws).write(tables.mws);
            (*rdev).net = net;
        }
    }

    /// Releases what [`RroceDev::install`] installed (`dealloc_driver`),
    /// returning the namespace key for the caller to give back to
    /// `net::put` (0 if none was taken).
    ///
    /// # Safety
    ///
    /// `ibdev` is an rroce device no longer used by anyone: every object is
    /// gone and no packet can find it. Called once; the core frees the
    /// memory afterwards. Zeroed tables (a failed `add_device`) are empty
    /// and drop as no-ops.
    #[must_use]
    pub(crate) unsafe fn release(ibdev: *mut sys::ib_device) -> usize {
        let rdev = ibdev.cast::<RroceDev>();
        // SAFETY: exclusively ours per the caller.
        unsafe {
            let net = core::mem::replace(&mut (*rdev).net, 0);
            core::ptr::drop_in_place(core::ptr::addr_of_mut!((*rdev).mrs));
            core::ptr::drop_in_place(core::ptr::addr_of_mut!((*rdev).qps));
            core::ptr::drop_in_place(core::ptr::addr_of_mut!((*rdev).ahs));
            core::ptr::drop_in_place(core::ptr::addr_of_mut!((*rdev).mws));
            net
        }
    }

    /// The netdev, while registered; use it only inside the RCU read-side
    /// section the caller holds.
    pub(crate) fn netdev(&self, _guard: &kernel::sync::rcu::Guard) -> *mut sys::net_device {
        self.ndev.load(Ordering::Acquire)
    }

    /// Forgets the netdev, which is unregistering (RCU readers see null
    /// from now on).
    pub(crate) fn forget_netdev(&self) {
        self.ndev.store(core::ptr::null_mut(), Ordering::Release);
    }

    /// The netdev's namespace key (a `net::net_of` key), 0 if none; fixed
    /// once the device is registered.
    pub(crate) fn net(&self) -> usize {
        self.net
    }

    /// The active MTU as an `enum ib_mtu`.
    pub(crate) fn active_mtu(&self) -> sys::ib_mtu {
        self.active_mtu.load(Ordering::Relaxed)
    }

    /// Follows a new netdev MTU.
    pub(crate) fn set_mtu(&self, netdev_mtu: u32) {
        self.active_mtu
            .store(ib_mtu_for_netdev_mtu(netdev_mtu), Ordering::Relaxed);
    }
}

/// Pure helpers, tested by KUnit.
#[cfg(CONFIG_KUNIT)]
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
