// SPDX-License-Identifier: GPL-2.0

//! The `ib_device_ops` trampolines: the functions the RDMA core calls.
//!
//! Like rdma_rxe's `rxe_verbs.c` (and Rust Binder's trampolines), this is
//! where raw pointers from the core become rroce's types, a safe method does
//! the work, and the result becomes an errno (or an `ERR_PTR`) at the edge.
//! This file holds the ops table ([`device_ops`]), the helpers every
//! trampoline shares ([`to_c`], [`to_ptr`], [`Udata`]), the query verbs and
//! the PD and ucontext verbs; the object verbs are in the sibling files.
//! The two ops that reach the device registry, `dealloc_driver` and
//! `get_netdev`, are `crate::link`'s, which adds them to the table.
//!
//! # Safety
//!
//! Every `unsafe extern "C" fn` under `verbs` is an op of rroce's
//! `ib_device_ops` and is called only by the RDMA core, with the arguments
//! that op's contract describes: live objects of an rroce device (each
//! allocated with rroce's size for its type, so the core's struct is the
//! first field of rroce's: `RroceDev`, `RroceCq`, `RroceAh`, `RroceQp`,
//! `RroceMr`), valid attribute and output pointers, and a udata (or attribute
//! bundle) that is null for kernel callers and valid for the call otherwise.
//! This is the "ops contract" their `# Safety` sections and `// SAFETY:`
//! comments refer to.

use core::mem::size_of;

use kernel::{
    ffi::{c_int, c_void},
    prelude::*,
    ModuleMetadata, //
};

use crate::{
    counters::Counter,
    dev::{limits, RroceDev, RrocePd, RroceUcontext},
    rdma::sys,
};

mod ah;
mod counters;
mod cq;
mod mmap;
mod mr;
mod qp;
mod srq;

/// `IB_MGMT_MAD_SIZE` from `rdma/ib_mad.h`: a 24-byte MAD header + 232 bytes.
const IB_MGMT_MAD_SIZE: u32 = 256;

/// Converts a verb's result into the C convention of the RDMA core: 0 or a
/// negative errno.
pub(crate) fn to_c(r: Result) -> c_int {
    match r {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// Converts a verb's result into a pointer or an `ERR_PTR`.
fn to_ptr<T>(r: Result<*mut T>) -> *mut T {
    match r {
        Ok(p) => p,
        Err(e) => e.to_ptr(),
    }
}

/// A verb's `ib_udata`: absent for kernel callers.
///
/// # Invariants
///
/// `0` is null or the valid udata of the verb call in progress, which
/// outlives this value.
#[derive(Clone, Copy)]
struct Udata(*mut sys::ib_udata);

impl Udata {
    /// # Safety
    ///
    /// `p` is null or the valid udata of the verb call in progress, and the
    /// value is used only during that call.
    unsafe fn new(p: *mut sys::ib_udata) -> Self {
        // INVARIANT: per the caller.
        Self(p)
    }

    /// The driver udata of an attribute bundle.
    ///
    /// # Safety
    ///
    /// `attrs` is null or the valid bundle of the verb call in progress,
    /// and the value is used only during that call.
    unsafe fn from_attrs(attrs: *mut sys::uverbs_attr_bundle) -> Self {
        // SAFETY: null or valid per the caller; the helper returns null or
        // the bundle's driver udata.
        unsafe { Self::new(sys::rroce_helper_attrs_udata(attrs)) }
    }

    /// A user (uverbs) call, as opposed to a kernel consumer's.
    fn is_user(self) -> bool {
        !self.0.is_null()
    }

    /// Room for the response, 0 for kernel callers.
    fn outlen(self) -> usize {
        if self.0.is_null() {
            0
        } else {
            // SAFETY: non-null, so valid (type invariant).
            unsafe { (*self.0).outlen }
        }
    }

    /// Whether the udata carries anything (rroce's query verbs take none).
    fn nonempty(self) -> bool {
        // SAFETY: checked for null, valid (type invariant).
        !self.0.is_null() && unsafe { (*self.0).inlen != 0 || (*self.0).outlen != 0 }
    }

    /// The calling process's ucontext, or null for kernel callers.
    fn ucontext(self) -> *mut sys::ib_ucontext {
        // SAFETY: null or the driver udata of this uverbs call (type
        // invariant); the helper maps null to null.
        unsafe { sys::rroce_helper_udata_ucontext(self.0) }
    }

    /// Bytes the caller passed in, 0 for kernel callers.
    fn inlen(self) -> usize {
        if self.0.is_null() {
            0
        } else {
            // SAFETY: non-null, so valid (type invariant).
            unsafe { (*self.0).inlen }
        }
    }

    /// Fills `buf` from the caller's input (`ib_copy_from_udata`). Only
    /// for user calls that passed at least `buf.len()` bytes.
    fn read(self, buf: &mut [u8]) -> Result {
        if self.0.is_null() || self.inlen() < buf.len() {
            return Err(EINVAL);
        }
        // SAFETY: the udata is valid (type invariant); the helper writes at
        // most `buf.len()` bytes into `buf`.
        let err = unsafe {
            sys::rroce_helper_copy_from_udata(buf.as_mut_ptr().cast::<c_void>(), self.0, buf.len())
        };
        if err != 0 {
            return Err(Error::from_errno(err));
        }
        Ok(())
    }

    /// Copies `resp` to the caller (`ib_copy_to_udata`). Only for user
    /// calls.
    fn respond(self, resp: &[u8]) -> Result {
        if self.0.is_null() {
            return Err(EFAULT);
        }
        // SAFETY: the udata is valid (type invariant); the helper only reads
        // `resp.len()` bytes from `resp`.
        let err = unsafe {
            sys::rroce_helper_copy_to_udata(
                self.0,
                resp.as_ptr().cast_mut().cast::<c_void>(),
                resp.len(),
            )
        };
        if err != 0 {
            return Err(Error::from_errno(err));
        }
        Ok(())
    }
}

/// The ops table handed to `ib_set_device_ops` (which copies it), without
/// `dealloc_driver` and `get_netdev` (see the module docs).
pub(crate) fn device_ops() -> sys::ib_device_ops {
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
    ops.query_device = Some(query_device);
    ops.query_port = Some(query_port);
    ops.modify_device = Some(modify_device);
    // SAFETY: a static attribute group of the C helpers, never written.
    ops.device_group = unsafe { &sys::rroce_helper_attr_group };
    ops.get_port_immutable = Some(get_port_immutable);
    ops.get_link_layer = Some(get_link_layer);
    ops.query_pkey = Some(query_pkey);
    ops.alloc_ucontext = Some(alloc_ucontext);
    ops.dealloc_ucontext = Some(dealloc_ucontext);
    ops.disassociate_ucontext = Some(disassociate_ucontext);
    ops.alloc_pd = Some(alloc_pd);
    ops.dealloc_pd = Some(dealloc_pd);
    ops.mmap = Some(mmap::mmap);
    ops.mmap_free = Some(mmap::mmap_free);
    ops.create_ah = Some(ah::create_ah);
    ops.create_user_ah = Some(ah::create_ah);
    ops.destroy_ah = Some(ah::destroy_ah);
    ops.query_ah = Some(ah::query_ah);
    ops.fill_res_qp_entry = Some(qp::fill_res_qp_entry);
    ops.get_dma_mr = Some(mr::get_dma_mr);
    ops.reg_user_mr = Some(mr::reg_user_mr);
    ops.dereg_mr = Some(mr::dereg_mr);
    ops.alloc_mr = Some(mr::alloc_mr);
    ops.map_mr_sg = Some(mr::map_mr_sg);
    ops.alloc_mw = Some(mr::alloc_mw);
    ops.dealloc_mw = Some(mr::dealloc_mw);
    ops.size_ib_mw = size_of::<crate::mw::RroceMw>();
    ops.size_ib_ah = size_of::<crate::ah::RroceAh>();
    ops.create_cq = Some(cq::create_cq);
    ops.create_user_cq = Some(cq::create_cq);
    ops.destroy_cq = Some(cq::destroy_cq);
    ops.resize_user_cq = Some(cq::resize_cq);
    ops.poll_cq = Some(cq::poll_cq);
    ops.req_notify_cq = Some(cq::req_notify_cq);
    ops.size_ib_cq = size_of::<crate::cq::RroceCq>();
    ops.alloc_hw_port_stats = Some(counters::alloc_hw_port_stats);
    ops.get_hw_stats = Some(counters::get_hw_stats);
    // QPs: user RC and UD QPs, kernel RC QPs (`post_send`/`post_recv` with
    // work requests).
    ops.create_qp = Some(qp::create_qp);
    ops.modify_qp = Some(qp::modify_qp);
    ops.query_qp = Some(qp::query_qp);
    ops.destroy_qp = Some(qp::destroy_qp);
    ops.post_send = Some(qp::post_send);
    ops.post_recv = Some(qp::post_recv);
    ops.attach_mcast = Some(qp::attach_mcast);
    ops.detach_mcast = Some(qp::detach_mcast);
    ops.create_srq = Some(srq::create_srq);
    ops.modify_srq = Some(srq::modify_srq);
    ops.query_srq = Some(srq::query_srq);
    ops.destroy_srq = Some(srq::destroy_srq);
    ops.post_srq_recv = Some(srq::post_srq_recv);
    ops.size_ib_srq = size_of::<crate::srq::RroceSrq>();
    ops.size_ib_qp = size_of::<crate::qp::RroceQp>();
    ops.size_ib_ucontext = size_of::<RroceUcontext>();
    ops.size_ib_pd = size_of::<RrocePd>();
    ops
}

/// The `query_device` op.
///
/// # Safety
///
/// The [ops contract](self).
unsafe extern "C" fn query_device(
    ibdev: *mut sys::ib_device,
    attr: *mut sys::ib_device_attr,
    udata: *mut sys::ib_udata,
) -> c_int {
    // SAFETY: the ops contract.
    if unsafe { Udata::new(udata) }.nonempty() {
        return EINVAL.to_errno();
    }
    // SAFETY: the core passes a valid, zeroed attribute struct.
    let a = unsafe { &mut *attr };
    a.fw_ver = 0;
    // One device per system image, as rxe: the image GUID is the node GUID
    // (already in network order), so IB_DEVICE_SYS_IMAGE_GUID holds.
    // SAFETY: the ops contract: a live device; the GUID is set before
    // registration and never changes.
    a.sys_image_guid = unsafe { (*ibdev).node_guid };
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
        | sys::ib_device_cap_flags_IB_DEVICE_RC_RNR_NAK_GEN
        | sys::ib_device_cap_flags_IB_DEVICE_PORT_ACTIVE_EVENT
        | sys::ib_device_cap_flags_IB_DEVICE_MEM_MGT_EXTENSIONS
        | sys::ib_device_cap_flags_IB_DEVICE_ATOMIC_WRITE
        | sys::ib_device_cap_flags_IB_DEVICE_MEM_WINDOW
        | sys::ib_device_cap_flags_IB_DEVICE_MEM_WINDOW_TYPE_2B
        | sys::ib_device_cap_flags_IB_DEVICE_SRQ_RESIZE) as u64;
    // `rdma link del` may unregister the device.
    a.kernel_cap_flags = sys::ib_kernel_cap_flags_IBK_ALLOW_USER_UNREG.into();
    // SAFETY: plain query of the kernel's configuration.
    if unsafe { sys::rroce_helper_odp_enabled() } {
        odp_caps(a);
    }
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
    a.max_srq = limits::MAX_SRQ;
    a.max_srq_wr = limits::MAX_SRQ_WR;
    a.max_srq_sge = limits::MAX_SRQ_SGE;
    a.max_ah = limits::MAX_AH;
    a.max_mw = limits::MAX_MW;
    a.max_fast_reg_page_list_len = limits::MAX_FAST_REG_PAGE_LIST_LEN;
    a.max_pkeys = limits::MAX_PKEYS;
    a.max_mcast_grp = limits::MAX_MCAST_GRP;
    a.max_mcast_qp_attach = limits::MAX_MCAST_QP_ATTACH;
    a.max_total_mcast_qp_attach = limits::MAX_TOTAL_MCAST_QP_ATTACH;
    a.local_ca_ack_delay = limits::LOCAL_CA_ACK_DELAY;
    0
}

/// On-demand paging (no implicit ODP), for what the transport does
/// through an ODP MR: RC SEND/RECV, WRITE, READ, atomics, ATOMIC WRITE,
/// SRQ receives; UD SEND/RECV and SRQ receives. User MRs may then be on
/// demand (the core refuses IB_ACCESS_ON_DEMAND without the kernel flag).
fn odp_caps(a: &mut sys::ib_device_attr) {
    let t = |bits: &[u32]| bits.iter().fold(0u32, |a, b| a | b);
    a.kernel_cap_flags |= u64::from(sys::ib_kernel_cap_flags_IBK_ON_DEMAND_PAGING);
    a.odp_caps.general_caps = sys::ib_odp_general_cap_bits_IB_ODP_SUPPORT.into();
    a.odp_caps.per_transport_caps.rc_odp_caps = t(&[
        sys::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_SEND,
        sys::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_RECV,
        sys::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_WRITE,
        sys::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_READ,
        sys::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_ATOMIC,
        sys::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_SRQ_RECV,
        sys::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_ATOMIC_WRITE,
    ]);
    a.odp_caps.per_transport_caps.ud_odp_caps = t(&[
        sys::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_SEND,
        sys::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_RECV,
        sys::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_SRQ_RECV,
    ]);
}

/// The `query_port` op.
///
/// # Safety
///
/// The [ops contract](self).
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
    a.active_mtu = dev.active_mtu();
    a.gid_tbl_len = limits::GID_TABLE_LEN;
    // IB_PORT_CM_SUP, which the uapi spells IB_UVERBS_PCF_CM_SUP.
    a.port_cap_flags = sys::ib_uverbs_query_port_cap_flags_IB_UVERBS_PCF_CM_SUP;
    a.max_msg_sz = limits::MAX_MSG_SIZE;
    a.pkey_tbl_len = limits::MAX_PKEYS;
    a.max_vl_num = 1;
    a.lid = 0;
    a.sm_lid = 0;
    // The counters the device claims (BAD_PKEY_CNTR, BAD_QKEY_CNTR): they
    // stop at their largest value, as the IBA's do.
    let sat = |c: Counter| u32::try_from(dev.counters.get(c as usize)).unwrap_or(u32::MAX);
    a.bad_pkey_cntr = sat(Counter::BadPkey);
    a.qkey_viol_cntr = sat(Counter::QkeyViolation);
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

/// The `modify_device` op: the node description (what
/// `/sys/class/infiniband/<dev>/node_desc` writes). rroce has one system
/// image GUID, its node GUID: changing it is not supported.
///
/// # Safety
///
/// The [ops contract](self).
unsafe extern "C" fn modify_device(
    ibdev: *mut sys::ib_device,
    mask: c_int,
    attr: *mut sys::ib_device_modify,
) -> c_int {
    if mask & !(sys::ib_device_modify_flags_IB_DEVICE_MODIFY_NODE_DESC as c_int) != 0 {
        return EOPNOTSUPP.to_errno();
    }
    if mask & sys::ib_device_modify_flags_IB_DEVICE_MODIFY_NODE_DESC as c_int != 0 {
        // SAFETY: the ops contract: a live device and attributes. The core
        // serializes modify_device; readers of `node_desc` (sysfs, the
        // MAD agent) read it as rxe's do, without a lock.
        unsafe { (*ibdev).node_desc = (*attr).node_desc };
    }
    0
}

/// The `get_port_immutable` op.
///
/// # Safety
///
/// The [ops contract](self).
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

/// The `get_link_layer` op.
///
/// # Safety
///
/// The [ops contract](self).
unsafe extern "C" fn get_link_layer(
    _ibdev: *mut sys::ib_device,
    _port: u32,
) -> sys::rdma_link_layer {
    sys::rdma_link_layer_IB_LINK_LAYER_ETHERNET
}

/// The `query_pkey` op.
///
/// # Safety
///
/// The [ops contract](self).
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

/// The `alloc_ucontext` op.
///
/// # Safety
///
/// The [ops contract](self).
unsafe extern "C" fn alloc_ucontext(
    _uctx: *mut sys::ib_ucontext,
    _udata: *mut sys::ib_udata,
) -> c_int {
    0
}

/// The `dealloc_ucontext` op.
///
/// # Safety
///
/// The [ops contract](self).
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
/// The [ops contract](self).
unsafe extern "C" fn disassociate_ucontext(_uctx: *mut sys::ib_ucontext) {}

/// The `alloc_pd` op.
///
/// # Safety
///
/// The [ops contract](self).
unsafe extern "C" fn alloc_pd(_pd: *mut sys::ib_pd, _udata: *mut sys::ib_udata) -> c_int {
    0
}

/// The `dealloc_pd` op.
///
/// # Safety
///
/// The [ops contract](self).
unsafe extern "C" fn dealloc_pd(_pd: *mut sys::ib_pd, _udata: *mut sys::ib_udata) -> c_int {
    0
}
