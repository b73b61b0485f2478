// SPDX-License-Identifier: GPL-2.0

//! The QP verbs: `create_qp`, `modify_qp`, `query_qp`, `destroy_qp`,
//! `post_send` and `post_recv`.
//!
//! Each turns the core's raw pointers into references and safe types (a
//! kernel consumer's work request lists into [`SendWr`]/[`RecvWr`] lists),
//! calls the QP's methods (`crate::qp`) and turns the result into an errno.

use kernel::{ffi::c_int, prelude::*};

use crate::{
    ah::{av_from_attr, AddressVector},
    dev::RroceDev,
    qp::{self, RecvWr, Remote, RroceQp, SendWr, WrList},
    rdma::{ah_attr::AhAttr, sys},
};

/// A kernel QP's creation response: none (the type of the absent one).
type NoResponse = fn(&mut [u8]) -> Result;

/// 0 or the negative errno of `r`.
fn errno(r: Result) -> c_int {
    match r {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// The `create_qp` op (user RC and UD QPs, kernel RC, UD and GSI QPs).
///
/// # Safety
///
/// Called only by the RDMA core through rroce's `ib_device_ops`, with the
/// arguments that op's contract describes: live objects of an rroce device,
/// valid attribute and output pointers, and a udata that is null for kernel
/// callers.
pub(crate) unsafe extern "C" fn create_qp(
    ibqp: *mut sys::ib_qp,
    init: *mut sys::ib_qp_init_attr,
    udata: *mut sys::ib_udata,
) -> c_int {
    // SAFETY: the core passes a QP of our size (`size_ib_qp`) and valid
    // attributes.
    let (qp, init) = unsafe { (&mut *ibqp.cast::<RroceQp>(), &mut *init) };
    if udata.is_null() {
        let user: Option<(*mut sys::ib_ucontext, NoResponse)> = None;
        // SAFETY: a QP of one of our devices, its PD set by the core; no
        // ucontext.
        return errno(unsafe { qp.create(init, user) });
    }
    // SAFETY: non-null, the driver udata of this uverbs call.
    let (inlen, outlen) = unsafe { ((*udata).inlen, (*udata).outlen) };
    if let Err(e) = qp::check_user_create(init, inlen, outlen) {
        return e.to_errno();
    }
    // SAFETY: as above.
    let uctx = unsafe { sys::rroce_helper_udata_ucontext(udata) };
    let respond = |bytes: &mut [u8]| {
        // SAFETY: `bytes` is readable; `udata` is valid for the call.
        let err = unsafe {
            sys::rroce_helper_copy_to_udata(udata, bytes.as_mut_ptr().cast(), bytes.len())
        };
        if err != 0 {
            return Err(Error::from_errno(err));
        }
        Ok(())
    };
    // SAFETY: a QP of one of our devices, its PD set by the core; `uctx` is
    // the calling process's live ucontext.
    errno(unsafe { qp.create(init, Some((uctx, respond))) })
}

/// The `modify_qp` op.
///
/// # Safety
///
/// Called only by the RDMA core through rroce's `ib_device_ops`, with the
/// arguments that op's contract describes: live objects of an rroce device,
/// valid attribute and output pointers, and a udata that is null for kernel
/// callers.
pub(crate) unsafe extern "C" fn modify_qp(
    ibqp: *mut sys::ib_qp,
    attr: *mut sys::ib_qp_attr,
    mask: c_int,
    _udata: *mut sys::ib_udata,
) -> c_int {
    // SAFETY: the core passes a live QP of ours and valid attributes.
    let (state, attr) = unsafe { (RroceQp::state(ibqp), &*attr) };
    let mask = mask as u32;
    // Validate what does not need the lock, copying the AV out.
    if let Err(e) = qp::check_modify(attr, mask) {
        return e.to_errno();
    }
    let av = if mask & sys::ib_qp_attr_mask_IB_QP_AV != 0 {
        // SAFETY: the core resolved the AV's source GID entry, which stays
        // referenced for the call.
        match av_from_attr(&unsafe { AhAttr::read(&attr.ah_attr) }) {
            Ok(av) => Some(av),
            Err(e) => return e.to_errno(),
        }
    } else {
        None
    };
    errno(state.modify(attr, mask, av))
}

/// The `query_qp` op.
///
/// # Safety
///
/// Called only by the RDMA core through rroce's `ib_device_ops`, with the
/// arguments that op's contract describes: live objects of an rroce device,
/// valid attribute and output pointers, and a udata that is null for kernel
/// callers.
pub(crate) unsafe extern "C" fn query_qp(
    ibqp: *mut sys::ib_qp,
    attr: *mut sys::ib_qp_attr,
    _mask: c_int,
    init: *mut sys::ib_qp_init_attr,
) -> c_int {
    // SAFETY: the core passes a live QP of ours and structs to fill (its
    // own `kmalloc`ed, uninitialized memory: every byte is written here,
    // padding included, before anything is read).
    let (state, attr, init) = unsafe {
        core::ptr::write_bytes(attr, 0, 1);
        core::ptr::write_bytes(init, 0, 1);
        (RroceQp::state(ibqp), &mut *attr, &mut *init)
    };
    let av = state.query(attr, init);
    write_ah_attr(&mut attr.ah_attr, av.as_ref(), attr.port_num);
    // The alternate path: none (as rdma_rxe reports an unset one; its
    // port, like `alt_port_num`, is 0).
    write_ah_attr(&mut attr.alt_ah_attr, None, 0);
    // SAFETY: the core's QP, live for the call.
    let q = unsafe { &*ibqp };
    init.event_handler = q.event_handler;
    init.qp_context = q.qp_context;
    init.srq = q.srq;
    0
}

/// The `fill_res_qp_entry` op: the transport's progress and waits as
/// driver attributes of the QP's restrack entry (`rdma -dd resource show
/// qp`).
///
/// # Safety
///
/// Called only by the RDMA core's netlink dump with a message being built
/// and a live QP of an rroce device.
pub(crate) unsafe extern "C" fn fill_res_qp_entry(
    msg: *mut sys::sk_buff,
    ibqp: *mut sys::ib_qp,
) -> c_int {
    // SAFETY: the core passes a live QP of ours.
    let diag = unsafe { RroceQp::state(ibqp) }.diag();
    let names = diag.map(|(name, _)| name.as_char_ptr());
    let values = diag.map(|(_, v)| v);
    // SAFETY: `msg` is the core's message under construction; `names` holds
    // `values.len()` NUL-terminated static strings.
    unsafe { sys::rroce_helper_put_driver_u32s(msg, names.as_ptr(), values.as_ptr(), values.len()) }
}

/// Writes the address vector `av` (none: zeroes) into the zeroed `out`, as
/// `rdma_ah_set_*` would: a RoCE GRH on `port`. The source GID entry
/// (`grh.sgid_attr`) stays null: it is the core's to take and release.
pub(super) fn write_ah_attr(out: &mut sys::rdma_ah_attr, av: Option<&AddressVector>, port: u32) {
    out.type_ = sys::rdma_ah_attr_type_RDMA_AH_ATTR_TYPE_ROCE;
    out.ah_flags = sys::ib_ah_flags_IB_AH_GRH as u8;
    out.port_num = port;
    let Some(av) = av else {
        return;
    };
    out.sl = av.sl;
    out.grh.dgid.raw = av.dgid;
    out.grh.flow_label = av.flow_label;
    out.grh.sgid_index = av.sgid_index;
    out.grh.hop_limit = av.hop_limit;
    out.grh.traffic_class = av.traffic_class;
    out.__bindgen_anon_1.roce.dmac = av.dmac;
}

/// The `destroy_qp` op.
///
/// # Safety
///
/// Called only by the RDMA core through rroce's `ib_device_ops`, with the
/// arguments that op's contract describes: live objects of an rroce device,
/// valid attribute and output pointers, and a udata that is null for kernel
/// callers.
pub(crate) unsafe extern "C" fn destroy_qp(
    ibqp: *mut sys::ib_qp,
    _udata: *mut sys::ib_udata,
) -> c_int {
    // SAFETY: the core passes one of our QPs, created successfully, after
    // its last use.
    let qp = unsafe { &mut *ibqp.cast::<RroceQp>() };
    qp.destroy();
    0
}

/// The `attach_mcast` op: a UD QP joins multicast group `gid` (the LID is
/// meaningless on RoCE).
///
/// # Safety
///
/// The [ops contract](super): a live QP of ours, a valid GID.
pub(crate) unsafe extern "C" fn attach_mcast(
    ibqp: *mut sys::ib_qp,
    gid: *mut sys::ib_gid,
    _lid: u16,
) -> c_int {
    // SAFETY: the ops contract.
    let (ty, gid, dev, qpn) = unsafe {
        (
            (*ibqp).qp_type,
            (*gid).raw,
            RroceDev::from_ib((*ibqp).device),
            (*ibqp).qp_num,
        )
    };
    if ty != sys::ib_qp_type_IB_QPT_UD {
        return EINVAL.to_errno();
    }
    errno(crate::mcast::attach(dev, &gid, qpn))
}

/// The `detach_mcast` op.
///
/// # Safety
///
/// The [ops contract](super): a live QP of ours, a valid GID.
pub(crate) unsafe extern "C" fn detach_mcast(
    ibqp: *mut sys::ib_qp,
    gid: *mut sys::ib_gid,
    _lid: u16,
) -> c_int {
    // SAFETY: the ops contract.
    let (gid, dev, qpn) = unsafe {
        (
            (*gid).raw,
            RroceDev::from_ib((*ibqp).device),
            (*ibqp).qp_num,
        )
    };
    errno(crate::mcast::detach(dev, &gid, qpn))
}

/// The `post_send` op. For user QPs (a null `wr` list) it is librxe's
/// doorbell: WQEs are already in the mapped send queue.
///
/// # Safety
///
/// Called only by the RDMA core through rroce's `ib_device_ops`, with the
/// arguments that op's contract describes: live objects of an rroce device,
/// valid attribute and output pointers, and a udata that is null for kernel
/// callers.
pub(crate) unsafe extern "C" fn post_send(
    ibqp: *mut sys::ib_qp,
    wr: *const sys::ib_send_wr,
    bad_wr: *mut *const sys::ib_send_wr,
) -> c_int {
    // SAFETY: the core passes a live QP of ours.
    let state = unsafe { RroceQp::state(ibqp) };
    if !wr.is_null() || state.fixed.kernel {
        if !state.fixed.kernel {
            // A user QP's work requests are in its mapped ring.
            // SAFETY: `bad_wr` is the core's output pointer.
            return unsafe { post_result(Err(EINVAL), bad_wr, wr) };
        }
        // INVARIANT: a kernel consumer's list of valid work requests, each
        // the `wr` member of the structure its opcode implies.
        let mut list = SendList {
            next: wr,
            ud: state.is_ud(),
        };
        let err = state.post_send_kernel(&mut list);
        // SAFETY: `bad_wr` is the core's output pointer.
        return unsafe { post_result(err, bad_wr, list.next) };
    }
    errno(state.doorbell())
}

/// The `post_recv` op: kernel QPs only. A user QP's process writes its
/// receive ring directly; its `post_recv` command is refused with EINVAL
/// and does nothing, in every state, a QP in ERR included (no flush
/// either: rdma_rxe's provider never issues this command).
///
/// # Safety
///
/// Called only by the RDMA core through rroce's `ib_device_ops`, with the
/// arguments that op's contract describes: a live QP of an rroce device, a
/// list of valid work requests and a valid output pointer.
pub(crate) unsafe extern "C" fn post_recv(
    ibqp: *mut sys::ib_qp,
    wr: *const sys::ib_recv_wr,
    bad_wr: *mut *const sys::ib_recv_wr,
) -> c_int {
    // SAFETY: the core passes a live QP of ours.
    let state = unsafe { RroceQp::state(ibqp) };
    if !state.fixed.kernel {
        // SAFETY: `bad_wr` is the core's output pointer.
        return unsafe { post_result(Err(EINVAL), bad_wr, wr) };
    }
    // INVARIANT: a kernel consumer's list of valid work requests.
    let mut list = RecvList { next: wr };
    let err = state.post_recv_kernel(&mut list);
    // SAFETY: `bad_wr` is the core's output pointer.
    unsafe { post_result(err, bad_wr, list.next) }
}

/// What a post returns: 0, or the errno with `*bad_wr` naming the first
/// request not posted.
///
/// # Safety
///
/// `bad_wr` is null or valid for writes.
pub(super) unsafe fn post_result<T>(err: Result, bad_wr: *mut *const T, next: *const T) -> c_int {
    match err {
        Ok(()) => 0,
        Err(e) => {
            if !bad_wr.is_null() {
                // SAFETY: per the caller.
                unsafe { *bad_wr = next };
            }
            e.to_errno()
        }
    }
}

/// The SGEs of a kernel work request (none for a negative count).
///
/// # Safety
///
/// `sg_list` points to `num` valid SGEs that outlive `'a` (or `num` is not
/// positive).
unsafe fn kernel_sges<'a>(sg_list: *const sys::ib_sge, num: c_int) -> &'a [sys::ib_sge] {
    let Ok(num) = usize::try_from(num) else {
        return &[];
    };
    if num == 0 || sg_list.is_null() {
        return &[];
    }
    // SAFETY: per the caller.
    unsafe { core::slice::from_raw_parts(sg_list, num) }
}

/// A kernel consumer's `ib_send_wr` list, from its head `next`.
///
/// # Invariants
///
/// `next` is null or the head of a list of valid work requests, each the
/// `wr` member of the structure its opcode implies (`ib_ud_wr` for a SEND
/// on a datagram QP (`ud`), `ib_rdma_wr`, `ib_atomic_wr`, `ib_reg_wr` with
/// a live MR), with valid SGE
/// lists, inline ones naming readable kernel memory, all valid for the
/// post.
struct SendList {
    next: *const sys::ib_send_wr,
    ud: bool,
}

impl<'a> WrList<SendWr<'a>> for SendList {
    fn peek(&self) -> Option<SendWr<'a>> {
        if self.next.is_null() {
            return None;
        }
        let wr = self.next;
        // SAFETY: a valid work request (type invariant).
        let w = unsafe { &*wr };
        let remote = match w.opcode {
            sys::ib_wr_opcode_IB_WR_SEND | sys::ib_wr_opcode_IB_WR_SEND_WITH_IMM if self.ud => {
                // SAFETY: on a UD or GSI QP a SEND is the head of an
                // `ib_ud_wr` (type invariant).
                let u = unsafe { &*wr.cast::<sys::ib_ud_wr>() };
                Remote::Ud {
                    ah: u.ah as usize,
                    remote_qpn: u.remote_qpn,
                    remote_qkey: u.remote_qkey,
                }
            }
            sys::ib_wr_opcode_IB_WR_RDMA_WRITE
            | sys::ib_wr_opcode_IB_WR_RDMA_WRITE_WITH_IMM
            | sys::ib_wr_opcode_IB_WR_RDMA_READ
                if !self.ud =>
            {
                // SAFETY: for these opcodes `wr` is the head of an
                // `ib_rdma_wr` (type invariant).
                let r = unsafe { &*wr.cast::<sys::ib_rdma_wr>() };
                Remote::Rdma {
                    remote_addr: r.remote_addr,
                    rkey: r.rkey,
                }
            }
            sys::ib_wr_opcode_IB_WR_ATOMIC_CMP_AND_SWP
            | sys::ib_wr_opcode_IB_WR_ATOMIC_FETCH_AND_ADD
                if !self.ud =>
            {
                // SAFETY: for these opcodes `wr` is the head of an
                // `ib_atomic_wr` (type invariant).
                let r = unsafe { &*wr.cast::<sys::ib_atomic_wr>() };
                Remote::Atomic {
                    remote_addr: r.remote_addr,
                    compare_add: r.compare_add,
                    swap: r.swap,
                    rkey: r.rkey,
                }
            }
            sys::ib_wr_opcode_IB_WR_REG_MR if !self.ud => {
                // SAFETY: for REG_MR `wr` is the head of an `ib_reg_wr`
                // (type invariant), whose MR is live during the post.
                let r = unsafe { &*wr.cast::<sys::ib_reg_wr>() };
                Remote::Reg {
                    mr: r.mr as usize,
                    key: r.key,
                    access: r.access as u32,
                }
            }
            _ => Remote::None,
        };
        // INVARIANT: inline SGEs name readable kernel memory (type
        // invariant of `SendList`).
        Some(SendWr {
            // SAFETY: both union members are plain 64-bit values.
            wr_id: unsafe { w.__bindgen_anon_1.wr_id },
            opcode: w.opcode,
            send_flags: w.send_flags as u32,
            num_sge: w.num_sge,
            // SAFETY: both members are 32-bit plain values; the raw memory
            // value is what the WQE carries.
            ex: unsafe { w.ex.invalidate_rkey },
            // SAFETY: the request's `num_sge` SGEs (type invariant).
            sges: unsafe { kernel_sges(w.sg_list, w.num_sge) },
            remote,
        })
    }

    fn advance(&mut self) {
        if !self.next.is_null() {
            // SAFETY: a valid work request (type invariant); the rest of
            // the list keeps the invariant.
            self.next = unsafe { (*self.next).next };
        }
    }
}

/// A kernel consumer's `ib_recv_wr` list, from its head `next`.
///
/// # Invariants
///
/// `next` is null or the head of a list of valid work requests with valid
/// SGE lists, valid for the post.
pub(super) struct RecvList {
    pub(super) next: *const sys::ib_recv_wr,
}

impl<'a> WrList<RecvWr<'a>> for RecvList {
    fn peek(&self) -> Option<RecvWr<'a>> {
        if self.next.is_null() {
            return None;
        }
        // SAFETY: a valid work request (type invariant).
        let w = unsafe { &*self.next };
        Some(RecvWr {
            // SAFETY: both union members are plain 64-bit values.
            wr_id: unsafe { w.__bindgen_anon_1.wr_id },
            num_sge: w.num_sge,
            // SAFETY: the request's `num_sge` SGEs (type invariant).
            sges: unsafe { kernel_sges(w.sg_list, w.num_sge) },
        })
    }

    fn advance(&mut self) {
        if !self.next.is_null() {
            // SAFETY: a valid work request (type invariant); the rest of
            // the list keeps the invariant.
            self.next = unsafe { (*self.next).next };
        }
    }
}
