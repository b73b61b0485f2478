// SPDX-License-Identifier: GPL-2.0

//! `modify_qp` and `query_qp`: the IB state machine and the attributes.
//!
//! A modification is checked whole before anything of it is applied: the
//! values (`check_modify`, without the lock), the current state the caller
//! claims (`IB_QP_CUR_STATE`, which must be the QP's), the transition and
//! its attribute mask (`ib_modify_qp_is_ok`), and what RTR needs (an
//! address vector on RC), all against a copy of the attributes. Only then
//! are the attributes, the MTU and the state written, so a refused
//! `modify_qp` leaves the QP exactly as it was.
//!
//! RESET quiesces the QP as `rxe_qp_reset` does: the transport drops its
//! queued responses and packets, stops its timer and starts its requester
//! and responder over (`crate::transport`'s `reset`); here the datagrams
//! left to the work item go, the receive threads finish the packets
//! handed to them for the QP (`QpState::drain_handed`: they are dropped),
//! and both rings start over at index 0 (what was posted is discarded,
//! never completed).

use kernel::{prelude::*, sync::rcu};

use super::{QpInner, QpState};
use crate::{
    ah::AddressVector,
    dev::limits,
    engine::handover::Doorbells,
    rdma::sys,
    transport::{self, QpAttrs},
};

pub(super) fn mask_has(mask: u32, bit: u32) -> bool {
    mask & bit != 0
}

/// QP access flags: which remote operations the responder allows. Unlike
/// MR access, remote write needs no local write here. `IB_ACCESS_ON_DEMAND`
/// is accepted and means nothing for a QP (rdma-core's ODP tests pass it,
/// and rdma_rxe takes it).
pub(super) fn check_qp_access(access: u32) -> Result {
    let allowed = sys::ib_access_flags_IB_ACCESS_LOCAL_WRITE
        | sys::ib_access_flags_IB_ACCESS_REMOTE_WRITE
        | sys::ib_access_flags_IB_ACCESS_REMOTE_READ
        | sys::ib_access_flags_IB_ACCESS_REMOTE_ATOMIC
        | sys::ib_access_flags_IB_ACCESS_ON_DEMAND;
    if access & !allowed != 0 {
        return Err(EINVAL);
    }
    Ok(())
}

/// Checks the attributes of a `modify_qp` that do not need the QP lock
/// (the address vector is converted by the caller).
pub(crate) fn check_modify(attr: &sys::ib_qp_attr, mask: u32) -> Result {
    if mask_has(mask, sys::ib_qp_attr_mask_IB_QP_PATH_MTU)
        && !(sys::ib_mtu_IB_MTU_256..=sys::ib_mtu_IB_MTU_4096).contains(&attr.path_mtu)
    {
        return Err(EINVAL);
    }
    if mask_has(mask, sys::ib_qp_attr_mask_IB_QP_MAX_QP_RD_ATOMIC)
        && u32::from(attr.max_rd_atomic) > limits::MAX_QP_INIT_RD_ATOM
    {
        return Err(EINVAL);
    }
    if mask_has(mask, sys::ib_qp_attr_mask_IB_QP_MAX_DEST_RD_ATOMIC)
        && u32::from(attr.max_dest_rd_atomic) > limits::MAX_QP_RD_ATOM
    {
        return Err(EINVAL);
    }
    if mask_has(mask, sys::ib_qp_attr_mask_IB_QP_PORT) && attr.port_num != 1 {
        return Err(EINVAL);
    }
    if mask_has(mask, sys::ib_qp_attr_mask_IB_QP_PKEY_INDEX) && attr.pkey_index != 0 {
        return Err(EINVAL);
    }
    if mask_has(mask, sys::ib_qp_attr_mask_IB_QP_ACCESS_FLAGS) {
        check_qp_access(attr.qp_access_flags as u32)?;
    }
    if (mask_has(mask, sys::ib_qp_attr_mask_IB_QP_RETRY_CNT) && attr.retry_cnt > 7)
        || (mask_has(mask, sys::ib_qp_attr_mask_IB_QP_RNR_RETRY) && attr.rnr_retry > 7)
        || (mask_has(mask, sys::ib_qp_attr_mask_IB_QP_TIMEOUT) && attr.timeout > 31)
        || (mask_has(mask, sys::ib_qp_attr_mask_IB_QP_MIN_RNR_TIMER) && attr.min_rnr_timer > 31)
    {
        return Err(EINVAL);
    }
    Ok(())
}

/// Whether a caller claiming the QP is in `claimed` (`IB_QP_CUR_STATE`)
/// is right about a QP in `actual`. rroce never enters SQE: a send error
/// on a datagram QP leaves it in RTS, so the MAD layer's "SQE to RTS"
/// recovery names RTS.
fn claim_holds(claimed: sys::ib_qp_state, actual: sys::ib_qp_state) -> bool {
    claimed == actual
        || (claimed == sys::ib_qp_state_IB_QPS_SQE && actual == sys::ib_qp_state_IB_QPS_RTS)
}

impl QpAttrs {
    /// Copies the attributes `mask` names from `attr` (checked by
    /// [`check_modify`]); `av` is the converted address vector, if given.
    fn apply(&mut self, attr: &sys::ib_qp_attr, mask: u32, av: Option<AddressVector>) {
        let set = |bit| mask_has(mask, bit);
        if set(sys::ib_qp_attr_mask_IB_QP_PATH_MTU) {
            self.path_mtu = attr.path_mtu;
        }
        if set(sys::ib_qp_attr_mask_IB_QP_QKEY) {
            self.qkey = attr.qkey;
        }
        if set(sys::ib_qp_attr_mask_IB_QP_RQ_PSN) {
            self.rq_psn = attr.rq_psn & 0x00ff_ffff;
        }
        if set(sys::ib_qp_attr_mask_IB_QP_SQ_PSN) {
            self.sq_psn = attr.sq_psn & 0x00ff_ffff;
        }
        if set(sys::ib_qp_attr_mask_IB_QP_DEST_QPN) {
            self.dest_qpn = attr.dest_qp_num & 0x00ff_ffff;
        }
        if set(sys::ib_qp_attr_mask_IB_QP_ACCESS_FLAGS) {
            self.access = attr.qp_access_flags as u32;
        }
        if set(sys::ib_qp_attr_mask_IB_QP_PKEY_INDEX) {
            self.pkey_index = attr.pkey_index;
        }
        if set(sys::ib_qp_attr_mask_IB_QP_PORT) {
            self.port = attr.port_num;
        }
        if set(sys::ib_qp_attr_mask_IB_QP_MAX_QP_RD_ATOMIC) {
            self.max_rd_atomic = attr.max_rd_atomic;
        }
        if set(sys::ib_qp_attr_mask_IB_QP_MAX_DEST_RD_ATOMIC) {
            self.max_dest_rd_atomic = attr.max_dest_rd_atomic;
        }
        if set(sys::ib_qp_attr_mask_IB_QP_MIN_RNR_TIMER) {
            self.min_rnr_timer = attr.min_rnr_timer;
        }
        if set(sys::ib_qp_attr_mask_IB_QP_TIMEOUT) {
            self.timeout = attr.timeout;
        }
        if set(sys::ib_qp_attr_mask_IB_QP_RETRY_CNT) {
            self.retry_cnt = attr.retry_cnt;
        }
        if set(sys::ib_qp_attr_mask_IB_QP_RNR_RETRY) {
            self.rnr_retry = attr.rnr_retry;
        }
        if av.is_some() {
            self.av = av;
        }
    }
}

/// What a QP entering RTR sends with: its path MTU in bytes and its UDP
/// source port.
struct RtrParams {
    mtu: u32,
    sport: u16,
}

impl QpState {
    /// The `modify_qp` verb, after [`check_modify`]: moves the QP through
    /// the IBTA state table (`ib_modify_qp_is_ok`) and sets the attributes
    /// `mask` names; `av` is the converted address vector, if given.
    /// Everything is checked before anything is applied.
    pub(crate) fn modify(
        &self,
        attr: &sys::ib_qp_attr,
        mask: u32,
        av: Option<AddressVector>,
    ) -> Result {
        let mut inner = self.inner.lock();
        if inner.dead {
            return Err(EINVAL);
        }
        let old = inner.t.state;
        let cur = if mask_has(mask, sys::ib_qp_attr_mask_IB_QP_CUR_STATE) {
            if !claim_holds(attr.cur_qp_state, old) {
                return Err(EINVAL);
            }
            attr.cur_qp_state
        } else {
            old
        };
        let new = if mask_has(mask, sys::ib_qp_attr_mask_IB_QP_STATE) {
            attr.qp_state
        } else {
            cur
        };
        // SAFETY: pure function of its arguments.
        if !unsafe { sys::ib_modify_qp_is_ok(cur, new, self.qp_type, mask) } {
            return Err(EINVAL);
        }
        let mut attrs = inner.t.attrs;
        let new_path = av.is_some();
        attrs.apply(attr, mask, av);
        if old == sys::ib_qp_state_IB_QPS_RTS && new == sys::ib_qp_state_IB_QPS_SQD {
            // Each move to SQD says whether its drain raises an event.
            attrs.sqd_notify = mask_has(mask, sys::ib_qp_attr_mask_IB_QP_EN_SQD_ASYNC_NOTIFY)
                && attr.en_sqd_async_notify != 0;
        }
        let rtr = if new == sys::ib_qp_state_IB_QPS_RTR && old != new {
            Some(self.rtr_params(&attrs)?)
        } else {
            None
        };
        // Checked: from here on nothing fails.
        inner.t.attrs = attrs;
        if new_path || new == sys::ib_qp_state_IB_QPS_RESET {
            // Routes cached for the old path are not used again.
            // SAFETY: null (a no-op) or this QP's route cache, live while
            // the QP is (type invariant of `QpFixed`).
            unsafe { sys::rroce_helper_route_cache_reset(self.fixed.route) };
        }
        if let Some(p) = rtr {
            inner.t.mtu = p.mtu;
            inner.sport = p.sport;
        }
        inner.t.state = new;
        let guard = rcu::read_lock();
        let unsent = self.ctx(&mut inner, &guard).on_state_change(old, new, mask);
        drop(guard);
        let datagrams = if new == sys::ib_qp_state_IB_QPS_RESET {
            reset_rings(&mut inner, &self.fixed)
        } else {
            KVec::new()
        };
        drop(inner);
        drop((unsent, datagrams));
        if new == sys::ib_qp_state_IB_QPS_RESET {
            // Packets received before RESET and handed to a receive thread
            // are processed (dropped: the QP is in RESET) before it
            // returns, so none lands in the connection brought up next.
            // One a receive callback is still handing over at this moment
            // is like one still on the wire.
            let _ = self.drain_handed();
        }
        self.flush_tx();
        Ok(())
    }

    /// What a QP entering RTR with `attrs` sends with; a connected (RC or
    /// UC) QP needs an address vector.
    fn rtr_params(&self, attrs: &QpAttrs) -> Result<RtrParams> {
        if !self.is_ud() && attrs.av.is_none() {
            return Err(EINVAL);
        }
        let dev_mtu = self.dev().active_mtu();
        // A UD QP has no path MTU: its datagrams may fill the port's.
        let path_mtu = if self.is_ud() {
            dev_mtu
        } else {
            attrs.path_mtu
        };
        let mtu = transport::mtu_bytes(path_mtu.min(dev_mtu).max(sys::ib_mtu_IB_MTU_256));
        let h = (self.fixed.qpn ^ attrs.dest_qpn).wrapping_mul(0x9e37_79b9);
        Ok(RtrParams {
            mtu,
            sport: 0xc000 | ((h >> 16) as u16 & 0x3fff),
        })
    }

    /// The transport's progress and waits, for the QP's restrack entry.
    pub(crate) fn diag(&self) -> crate::transport::Diag {
        self.inner.lock().t.diag()
    }

    /// The `query_qp` verb: fills `attr` and `init`, both zeroed by the
    /// caller, except the address vector, which it returns (with the port
    /// it is on) for the caller to write into `attr.ah_attr`.
    pub(crate) fn query(
        &self,
        attr: &mut sys::ib_qp_attr,
        init: &mut sys::ib_qp_init_attr,
    ) -> Option<AddressVector> {
        let inner = self.inner.lock();
        let a = &inner.t.attrs;
        attr.qp_state = inner.t.state;
        attr.cur_qp_state = inner.t.state;
        attr.en_sqd_async_notify = a.sqd_notify.into();
        attr.sq_draining = inner.t.sq_draining().into();
        attr.path_mtu = a.path_mtu;
        // No alternate path: always migrated.
        attr.path_mig_state = sys::ib_mig_state_IB_MIG_MIGRATED;
        attr.qkey = a.qkey;
        (attr.sq_psn, attr.rq_psn) = inner.t.current_psns();
        attr.dest_qp_num = a.dest_qpn;
        attr.qp_access_flags = a.access as kernel::ffi::c_int;
        attr.cap = inner.cap;
        attr.pkey_index = a.pkey_index;
        attr.max_rd_atomic = a.max_rd_atomic;
        attr.max_dest_rd_atomic = a.max_dest_rd_atomic;
        attr.min_rnr_timer = a.min_rnr_timer;
        attr.port_num = a.port;
        attr.timeout = a.timeout;
        attr.retry_cnt = a.retry_cnt;
        attr.rnr_retry = a.rnr_retry;
        init.send_cq = self.fixed.send_cq;
        init.recv_cq = self.fixed.recv_cq;
        init.cap = inner.cap;
        init.sq_sig_type = if self.fixed.sig_all {
            sys::ib_sig_type_IB_SIGNAL_ALL_WR
        } else {
            sys::ib_sig_type_IB_SIGNAL_REQ_WR
        };
        init.qp_type = self.qp_type;
        init.port_num = 1;
        a.av
    }
}

/// Both rings of a QP entering RESET start over at index 0, empty: what
/// was posted is discarded without completions. The shared headers are
/// rewritten (a process producing into them carries on from there). The
/// UD datagrams still waiting to be sent are returned, for the caller to
/// free once the QP's lock is released.
#[must_use = "dropped only once the QP's lock is released"]
fn reset_rings(inner: &mut QpInner, fixed: &transport::QpFixed) -> KVec<transport::Datagram> {
    let datagrams = core::mem::take(&mut inner.ud_tx);
    // The QP's next life starts with no doorbell seen (ERR leads back to
    // RTS only through here): a consumer index that happens to equal the
    // old life's last must not make its first doorbell a stream's.
    inner.doorbells = Doorbells::default();
    let sq = inner.t.sq.layout();
    // Index 0 fits every ring.
    let _ = sq.init_indices(&fixed.sq_buf, 0);
    inner.t.sq = crate::engine::ring::Consumer::new(sq);
    inner.sq_prod = crate::engine::ring::Producer::new(sq);
    if let Some(rq_buf) = fixed.rq_buf.as_ref() {
        let rq = inner.t.rq.layout();
        let _ = rq.init_indices(rq_buf, 0);
        inner.t.rq = crate::engine::ring::Consumer::new(rq);
        inner.rq_prod = crate::engine::ring::Producer::new(rq);
    }
    datagrams
}

/// What KUnit looks at.
#[cfg(CONFIG_KUNIT)]
impl QpState {
    /// Leaves ODP state behind, as a QP that waited for pages does.
    pub(crate) fn leave_odp_behind(&self) {
        self.inner.lock().t.odp.leave_behind();
    }

    /// What RESET left behind, if anything (see
    /// `TransportState::leftover`); the rings start over too.
    pub(crate) fn not_quiesced(&self) -> Option<&'static str> {
        let inner = self.inner.lock();
        if !inner.ud_tx.is_empty() {
            return Some("datagrams are still queued to send");
        }
        if let Some(what) = inner.t.leftover() {
            return Some(what);
        }
        let indices = [
            inner.t.sq.index(),
            inner.t.rq.index(),
            inner.sq_prod.index(),
            inner.rq_prod.index(),
        ];
        if indices.iter().any(|&i| i != 0) {
            return Some("the ring indices did not start over");
        }
        None
    }

    /// The QP is answering a READ.
    pub(crate) fn responding(&self) -> bool {
        self.inner.lock().t.responding()
    }
}
