// SPDX-License-Identifier: GPL-2.0

//! The RDMA core's side of a CQ: the consumer's handlers in `struct ib_cq`.

use super::sys;

/// The core's `ib_cq` of one of rroce's CQs, through which the CQ state
/// calls its consumer.
///
/// # Invariants
///
/// `0` points at an `ib_cq` that stays valid while this value exists, and
/// whose `comp_handler`, `event_handler`, `cq_context` and `device` the
/// core does not change meanwhile.
pub(crate) struct IbCq(*mut sys::ib_cq);

// SAFETY: only the fields the core fixes at creation are read, from any
// context; the handlers are the consumer's, callable from process context.
unsafe impl Send for IbCq {}
// SAFETY: as above.
unsafe impl Sync for IbCq {}

impl IbCq {
    /// # Safety
    ///
    /// `ibcq` stays valid, with its handlers and device unchanged, for as
    /// long as the returned value exists.
    pub(crate) unsafe fn new(ibcq: *mut sys::ib_cq) -> Self {
        // INVARIANT: per the caller.
        Self(ibcq)
    }

    /// The raw pointer, to name the CQ to the core or to compare.
    pub(crate) fn as_ptr(&self) -> *mut sys::ib_cq {
        self.0
    }

    /// The CQ's device (null only for the selftests' fake CQs).
    pub(crate) fn device(&self) -> *mut sys::ib_device {
        // SAFETY: valid (type invariant).
        unsafe { (*self.0).device }
    }

    /// Calls the consumer's `comp_handler`, if it has one.
    pub(crate) fn complete(&self) {
        // SAFETY: valid, handler fixed (type invariant); the handler is
        // called with its own CQ and context, as the core would.
        unsafe {
            let cq = &*self.0;
            if let Some(handler) = cq.comp_handler {
                handler(self.0, cq.cq_context);
            }
        }
    }

    /// Raises `IB_EVENT_CQ_ERR` to the consumer's `event_handler`, if it
    /// has one.
    pub(crate) fn raise_cq_err(&self) {
        // SAFETY: valid, handler fixed (type invariant); an all-zero
        // `ib_event` is valid and its fields for a CQ event are set.
        unsafe {
            let cq = &*self.0;
            if let Some(handler) = cq.event_handler {
                let mut ev: sys::ib_event = core::mem::zeroed();
                ev.device = cq.device;
                ev.element.cq = self.0;
                ev.event = sys::ib_event_type_IB_EVENT_CQ_ERR;
                handler(&mut ev, cq.cq_context);
            }
        }
    }
}
