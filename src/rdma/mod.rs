// SPDX-License-Identifier: GPL-2.0

//! Glue to the kernel's RDMA core: raw bindings and the small safe
//! abstractions rroce builds on them.

pub(crate) mod ah_attr;
pub(crate) mod ibcq;
pub(crate) mod mem;
pub(crate) mod mmap;
pub(crate) mod rcu_table;
pub(crate) mod sys;
pub(crate) mod work;

/// The kernel's `IS_ERR()`: whether a pointer the kernel returned encodes
/// an errno (the last page of the address space).
pub(crate) fn is_err_ptr<T>(p: *const T) -> bool {
    (p as usize) >= (-4095isize) as usize
}

/// Raises `event` on SRQ `srq` to its consumer's `event_handler`, if any
/// (for a user SRQ the core's, which queues it on the async event file).
pub(crate) fn raise_srq_event(srq: *mut sys::ib_srq, event: sys::ib_event_type) {
    // SAFETY: `srq` is a live SRQ of ours (callers hold its state); its
    // handler and context are fixed by the core before the SRQ is used,
    // and an all-zero `ib_event` is valid before its fields are set.
    unsafe {
        if let Some(handler) = (*srq).event_handler {
            let mut ev: sys::ib_event = core::mem::zeroed();
            ev.device = (*srq).device;
            ev.element.srq = srq;
            ev.event = event;
            handler(&mut ev, (*srq).srq_context);
        }
    }
}

/// Raises `event` on QP `qp` to its `event_handler` (the core's, which for
/// `IB_EVENT_QP_LAST_WQE_REACHED` also ends `ib_drain_qp`'s wait).
pub(crate) fn raise_qp_event(qp: *mut sys::ib_qp, event: sys::ib_event_type) {
    // SAFETY: `qp` is a live QP of ours (callers hold its state); as for
    // an SRQ above.
    unsafe {
        if let Some(handler) = (*qp).event_handler {
            let mut ev: sys::ib_event = core::mem::zeroed();
            ev.device = (*qp).device;
            ev.element.qp = qp;
            ev.event = event;
            handler(&mut ev, (*qp).qp_context);
        }
    }
}
