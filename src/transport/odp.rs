// SPDX-License-Identifier: GPL-2.0

//! On-demand paging: what the transport does when a copy through an ODP
//! MR finds a page that is not there.
//!
//! The transport copies with the QP lock held, often in softirq context,
//! and a page fault sleeps: it never faults. It records the pages it
//! needs (one request per QP, the latest) and goes on as the role allows:
//! the requester stops at that WQE until they are in; the responder sends
//! an RNR NAK (the requester comes back after the RNR timer, as with an
//! ODP-capable HCA), or leaves a READ response unbuilt; the completer
//! drops the response and asks for it again once the pages are in; a
//! datagram is dropped. The QP's work item, in process context, faults the pages in
//! (`mr::fault_in`) and runs the QP again. Pages that cannot be faulted
//! in (the range is not mapped, or read-only for a write) fail the next
//! access that needs them like any protection error.

use super::{Ctx, TransportState};
use crate::{
    engine::psn::Psn,
    mr::{Fault, Faulted},
    rdma::sys,
};

/// What the QP waits for.
#[derive(Default)]
pub(crate) struct OdpWait {
    /// Pages to fault in.
    pending: Option<Fault>,
    /// Pages that could not be faulted in.
    failed: Option<Fault>,
    /// The completer dropped a response for want of the pages: the
    /// requester asks again once they are in.
    resend: bool,
    /// Faults of `pending` that could not be served now, in a row.
    not_now: u8,
}

/// How much of the rest of a message a responder's fault brings in at
/// once (an RDMA WRITE's or READ's remaining bytes, capped here): one RNR
/// NAK or one wait per MiB rather than one per page, as an ODP HCA faults
/// in the range the RETH names.
pub(super) const FAULT_AHEAD: u32 = 1 << 20;

/// Faults that find the pages "not now" (`mr::Faulted::NotNow`) in a row
/// before the access fails as if they could never be faulted in: the core
/// already waited up to a second inside each.
const NOT_NOW_TRIES: u8 = 8;

impl Ctx<'_> {
    /// A copy needed pages `f` that are not there: `true` if the QP waits
    /// for them (the work item faults them in); `false` if faulting them in
    /// failed already, and the access fails.
    pub(super) fn odp_absent(&mut self, f: Fault) -> bool {
        if self.inner.odp.failed == Some(f) {
            self.inner.odp.failed = None;
            return false;
        }
        self.inner.odp.pending = Some(f);
        true
    }

    /// The completer cannot place a response for want of pages `f`: it
    /// drops it, and the requester resends from the oldest unacknowledged
    /// PSN once they are in (no timeout, no retry charged).
    pub(super) fn odp_absent_response(&mut self, f: Fault) -> bool {
        if !self.odp_absent(f) {
            return false;
        }
        self.inner.odp.resend = true;
        true
    }

    /// The fault for `f` ended: the requester goes on (and asks again for
    /// a response the completer dropped), or, if the pages could not be
    /// brought now, `f` waits for another try.
    pub(crate) fn odp_done(&mut self, f: Fault, r: Faulted) {
        let ok = match r {
            Faulted::In => true,
            Faulted::NotNow if self.inner.odp.not_now < NOT_NOW_TRIES => {
                self.inner.odp.not_now += 1;
                if self.inner.odp.pending.is_none() {
                    self.inner.odp.pending = Some(f);
                }
                return;
            }
            Faulted::NotNow | Faulted::Never => false,
        };
        self.inner.odp.not_now = 0;
        if !ok {
            self.inner.odp.failed = Some(f);
        }
        if core::mem::take(&mut self.inner.req.odp_wait)
            && self.inner.req.una != self.inner.req.max_psn
        {
            // The requester sends again: the peer gets a whole timeout
            // from now for what is in flight (the wait was not its delay).
            self.arm_retry_timer();
        }
        if core::mem::take(&mut self.inner.odp.resend)
            && (self.inner.state == sys::ib_qp_state_IB_QPS_RTS
                || self.inner.state == sys::ib_qp_state_IB_QPS_SQD)
        {
            let una = Psn::new(self.inner.req.una);
            self.rewind(una);
            self.inner.req.pending = true;
        }
    }

    /// The requester stops at the current WQE until `f` is in (see
    /// [`Self::odp_absent`]).
    pub(super) fn odp_wait_requester(&mut self, f: Fault) -> bool {
        if !self.odp_absent(f) {
            return false;
        }
        self.inner.req.odp_wait = true;
        self.inner.req.pending = true;
        true
    }
}

impl OdpWait {
    /// Whether a fault failed and the access that needs it has not yet
    /// seen it.
    pub(crate) fn failed(&self) -> bool {
        self.failed.is_some()
    }
}

impl TransportState {
    /// Pages to fault in, if any (the work item).
    pub(crate) fn odp_take(&mut self) -> Option<Fault> {
        self.odp.pending.take()
    }

    /// Whether pages wait to be faulted in.
    pub(crate) fn odp_pending(&self) -> bool {
        self.odp.pending.is_some()
    }
}

/// What KUnit looks at.
#[cfg(CONFIG_KUNIT)]
impl OdpWait {
    /// Leaves what a fault that failed, a dropped response and a page
    /// "not now" leave (nothing for the work item to fault in).
    pub(crate) fn leave_behind(&mut self) {
        self.failed = Some(Fault {
            key: 0,
            remote: false,
            va: 0,
            len: 1,
            write: false,
        });
        self.resend = true;
        self.not_now = 1;
    }

    /// Whether nothing of an earlier wait is left.
    pub(crate) fn is_clear(&self) -> bool {
        self.pending.is_none() && self.failed.is_none() && !self.resend && self.not_now == 0
    }
}
