// SPDX-License-Identifier: GPL-2.0

//! Posting work: the user QP's doorbell and a kernel consumer's work
//! requests.
//!
//! A kernel QP's rings live in kernel memory only: `post_send` and
//! `post_recv` encode each work request into the next ring slot exactly as
//! librxe would (the kernel is then both producer and consumer), so the
//! transport copies and validates kernel and user WQEs through the same
//! path. The requests arrive here already read out of the core's
//! structures (`crate::verbs::qp`) as [`SendWr`] and [`RecvWr`].

use core::mem::size_of;

use kernel::{ffi::c_int, prelude::*, sync::rcu};

use super::{QpInner, QpState};
use crate::{
    abi::Codec as _,
    engine::ring::{Producer, RingError, Slot},
    rdma::{mmap::QueueBuf, sys},
    transport,
};

/// What a send work request carries beyond the common fields, by opcode
/// (the structure its `ib_send_wr` heads).
#[derive(Clone, Copy)]
pub(crate) enum Remote {
    /// A SEND on a UD or GSI QP (`ib_ud_wr`): `ah` is the consumer's
    /// `ib_ah`, valid during the post.
    Ud {
        ah: usize,
        remote_qpn: u32,
        remote_qkey: u32,
    },
    /// RDMA WRITE and READ (`ib_rdma_wr`).
    Rdma { remote_addr: u64, rkey: u32 },
    /// Atomics (`ib_atomic_wr`).
    Atomic {
        remote_addr: u64,
        compare_add: u64,
        swap: u64,
        rkey: u32,
    },
    /// REG_MR (`ib_reg_wr`): `mr` is the consumer's `ib_mr`, live during
    /// the post (of any device: checked before it is used).
    Reg { mr: usize, key: u32, access: u32 },
    /// Nothing more (SENDs on a connected QP, LOCAL_INV, unknown opcodes).
    None,
}

/// A kernel consumer's send work request.
///
/// # Invariants
///
/// With `IB_SEND_INLINE` in `send_flags`, each SGE of `sges` names
/// `length` readable bytes at the kernel virtual address `addr`, for `'a`.
pub(crate) struct SendWr<'a> {
    pub(crate) wr_id: u64,
    pub(crate) opcode: u32,
    pub(crate) send_flags: u32,
    /// As the consumer gave it (checked here).
    pub(crate) num_sge: c_int,
    /// `ex.invalidate_rkey` / `ex.imm_data`, as raw memory.
    pub(crate) ex: u32,
    pub(crate) sges: &'a [sys::ib_sge],
    pub(crate) remote: Remote,
}

/// A kernel consumer's receive work request.
pub(crate) struct RecvWr<'a> {
    pub(crate) wr_id: u64,
    /// As the consumer gave it (checked here).
    pub(crate) num_sge: c_int,
    pub(crate) sges: &'a [sys::ib_sge],
}

/// A kernel consumer's list of work requests, taken in order: a post stops
/// at the first request it cannot take, which stays at the head.
pub(crate) trait WrList<W> {
    /// The request at the head, or `None` at the end of the list.
    fn peek(&self) -> Option<W>;
    /// Moves past the head once it was posted.
    fn advance(&mut self);
}

impl QpState {
    /// A user QP's `post_send` doorbell: the WQEs are already in the mapped
    /// send queue.
    pub(crate) fn doorbell(&self) -> Result {
        let budget = super::lanes::tx_budget();
        let guard = rcu::read_lock();
        let mut inner = self.inner.lock();
        if inner.t.state < sys::ib_qp_state_IB_QPS_RTS
            && inner.t.state != sys::ib_qp_state_IB_QPS_ERR
        {
            // Posting before RTS is an immediate error (IB; NDKPI's
            // ND_CONNECTION_INVALID): the provider has already published the
            // WQEs, so they are discarded here, never run and never
            // completed; the QP stays usable. (rdma_rxe refuses the doorbell
            // but leaves them queued, and runs them once the QP reaches RTS.)
            if let Ok(n) = inner.t.sq.available(&self.fixed.sq_buf) {
                let _ = inner.t.sq.advance_by(n, &self.fixed.sq_buf);
            }
            return Err(EINVAL);
        }
        if let Some(cpu) = self.stream_cpu(&mut inner) {
            // A stream of small messages: the transmit (and the round
            // trips that run inline after it) goes to the other CPU, which
            // keeps busy while the process posts on.
            inner.t.defer_send();
            drop(inner);
            drop(guard);
            self.dev()
                .counters
                .inc(crate::counters::Counter::TxStreamed);
            self.kick_home(cpu);
            return Ok(());
        }
        self.run_send_queue(inner, guard, budget);
        Ok(())
    }

    /// The CPU a user RC or UC QP's doorbell hands its transmit to, if
    /// this doorbell is a small stream's (`engine::handover::Doorbells`)
    /// and the module parameter `tx_stream` is on. Also writes whether the
    /// process streams at all (`QpFixed::req_streams`, when that changes),
    /// which costs every such doorbell one read of the send CQ's consumer
    /// index under the CQ's lock.
    fn stream_cpu(&self, inner: &mut QpInner) -> Option<u32> {
        if self.is_ud() || self.fixed.kernel || inner.t.state != sys::ib_qp_state_IB_QPS_RTS {
            return None;
        }
        // Only a small message's doorbell asks for a CPU.
        let cpu = if inner.t.last_small() {
            // SAFETY: plain query.
            u32::try_from(unsafe { sys::rroce_helper_tx_stream_cpu() }).ok()
        } else {
            None
        };
        // SAFETY: the QP holds a use count on its CQs (the core's), so
        // they outlive it.
        let cq = unsafe { crate::cq::RroceCq::state(self.fixed.send_cq) };
        let ring = inner.doorbells.ring(cpu.is_some(), cq.consumer_hint());
        // Any doorbell tells a stream from a round trip for the receive
        // path (`QpFixed::req_streams`): a READ's responses go to another
        // CPU in a stream only.
        crate::transport::set_hint(&self.fixed.req_streams, ring.streams);
        cpu.filter(|_| ring.small_stream)
    }

    /// Posts a kernel consumer's send work requests: each is checked,
    /// encoded into the next send ring slot as librxe would write it (so
    /// the transport copies and validates it like any other WQE), then the
    /// requester runs. On error the request not posted is `list`'s head.
    pub(crate) fn post_send_kernel<'w>(&self, list: &mut impl WrList<SendWr<'w>>) -> Result {
        let budget = super::lanes::tx_budget();
        let guard = rcu::read_lock();
        let mut inner = self.inner.lock();
        let mut err = Ok(());
        if inner.t.state < sys::ib_qp_state_IB_QPS_RTS
            && inner.t.state != sys::ib_qp_state_IB_QPS_ERR
        {
            // Posting below RTS is an immediate error; nothing is queued.
            err = Err(EINVAL);
        }
        if self.is_ud()
            && inner.t.state != sys::ib_qp_state_IB_QPS_RTS
            && inner.t.state != sys::ib_qp_state_IB_QPS_ERR
        {
            // A kernel UD WQE holds the consumer's AH, valid only during
            // this call: it must be sent (RTS) or flushed (ERR) now.
            err = Err(EINVAL);
        }
        while err.is_ok() {
            let Some(w) = list.peek() else {
                break;
            };
            err = self.write_send_wqe(&mut inner, &w);
            if err.is_ok() {
                list.advance();
            }
        }
        // What was queued before a bad request still runs.
        self.run_send_queue(inner, guard, budget);
        err
    }

    /// Posts a kernel consumer's receive work requests (kernel QPs only: a
    /// user QP's process writes its receive ring directly). On error the
    /// request not posted is `list`'s head.
    pub(crate) fn post_recv_kernel<'w>(&self, list: &mut impl WrList<RecvWr<'w>>) -> Result {
        let guard = rcu::read_lock();
        let mut inner = self.inner.lock();
        let mut err = Ok(());
        if !self.fixed.kernel || inner.t.state == sys::ib_qp_state_IB_QPS_RESET {
            err = Err(EINVAL);
        }
        while err.is_ok() {
            let Some(w) = list.peek() else {
                break;
            };
            err = self.write_recv_wqe(&mut inner, &w);
            if err.is_ok() {
                list.advance();
            }
        }
        if inner.t.state == sys::ib_qp_state_IB_QPS_ERR {
            // Receives posted to a QP in error complete flushed at once.
            self.ctx(&mut inner, &guard).flush_rq();
        }
        drop(inner);
        err
    }

    /// The WQE union of a kernel send work request, checked against the
    /// QP type.
    fn send_wr_union(&self, w: &SendWr<'_>) -> Result<crate::abi::WrUnion> {
        use crate::abi::{self as a, WrUnion};
        Ok(match w.opcode {
            sys::ib_wr_opcode_IB_WR_SEND | sys::ib_wr_opcode_IB_WR_SEND_WITH_IMM
                if self.is_ud() =>
            {
                let Remote::Ud {
                    ah,
                    remote_qpn,
                    remote_qkey,
                } = w.remote
                else {
                    return Err(EINVAL);
                };
                if ah == 0 {
                    return Err(EINVAL);
                }
                // The AH itself rides in the WQE: this ring is kernel
                // memory, and the datagram is built before `post_send`
                // returns, while the consumer holds the AH.
                let p = ah as u64;
                WrUnion::from_ud(&a::WrUd {
                    remote_qpn,
                    remote_qkey,
                    pad: [p as u32, (p >> 32) as u32, 0, 0],
                    ..Default::default()
                })
            }
            _ if self.is_ud() => return Err(EINVAL),
            sys::ib_wr_opcode_IB_WR_SEND
            | sys::ib_wr_opcode_IB_WR_SEND_WITH_IMM
            | sys::ib_wr_opcode_IB_WR_SEND_WITH_INV
            | sys::ib_wr_opcode_IB_WR_LOCAL_INV => WrUnion::default(),
            sys::ib_wr_opcode_IB_WR_REG_MR => {
                let Remote::Reg { mr, key, access } = w.remote else {
                    return Err(EINVAL);
                };
                // SAFETY: the consumer's MR, live during the post (type
                // invariant of the work request list); the device pointer
                // is the core's and never changes.
                let target = unsafe {
                    crate::mr::reg_target(self.dev.cast_mut().cast(), mr as *mut sys::ib_mr)
                };
                let (index, iova) = target.ok_or(EINVAL)?;
                transport::RegWr {
                    index,
                    key,
                    access,
                    iova,
                }
                .encode()
            }
            sys::ib_wr_opcode_IB_WR_RDMA_WRITE
            | sys::ib_wr_opcode_IB_WR_RDMA_WRITE_WITH_IMM
            | sys::ib_wr_opcode_IB_WR_RDMA_READ => {
                let Remote::Rdma { remote_addr, rkey } = w.remote else {
                    return Err(EINVAL);
                };
                WrUnion::from_rdma(&a::WrRdma {
                    remote_addr,
                    rkey,
                    reserved: 0,
                })
            }
            sys::ib_wr_opcode_IB_WR_ATOMIC_CMP_AND_SWP
            | sys::ib_wr_opcode_IB_WR_ATOMIC_FETCH_AND_ADD => {
                let Remote::Atomic {
                    remote_addr,
                    compare_add,
                    swap,
                    rkey,
                } = w.remote
                else {
                    return Err(EINVAL);
                };
                WrUnion::from_atomic(&a::WrAtomic {
                    remote_addr,
                    compare_add,
                    swap,
                    rkey,
                    reserved: 0,
                })
            }
            _ => return Err(EINVAL),
        })
    }

    /// Encodes one kernel send work request into the send ring (the caller
    /// holds the QP lock, `inner`).
    fn write_send_wqe(&self, inner: &mut QpInner, w: &SendWr<'_>) -> Result {
        use crate::abi as a;
        let flags = w.send_flags;
        let num_sge = u32::try_from(w.num_sge).map_err(|_| EINVAL)?;
        let inline = flags & a::SEND_INLINE != 0;
        let union = self.send_wr_union(w)?;
        let is_atomic = matches!(
            w.opcode,
            sys::ib_wr_opcode_IB_WR_ATOMIC_CMP_AND_SWP
                | sys::ib_wr_opcode_IB_WR_ATOMIC_FETCH_AND_ADD
        );
        if (inline && (is_atomic || w.opcode == sys::ib_wr_opcode_IB_WR_RDMA_READ))
            || (!inline && num_sge > self.fixed.sq_max_sge)
        {
            return Err(EINVAL);
        }
        let sges = w.sges;
        let total = kernel_sge_total(sges)?;
        if inline && total > self.fixed.sq_max_inline {
            return Err(EINVAL);
        }
        // SAFETY: a kernel QP's ring; the caller holds the QP lock.
        let (slot, elem) = unsafe { kernel_slot(&mut inner.sq_prod, &self.fixed.sq_buf)? };
        let wqe = a::SendWqe {
            wr: a::SendWr {
                wr_id: w.wr_id,
                reserved: 0,
                opcode: w.opcode,
                send_flags: flags,
                ex: w.ex,
                wr: union,
            },
            dma: a::DmaInfo {
                length: total,
                resid: total,
                num_sge: if inline { 0 } else { num_sge },
                ..Default::default()
            },
            ..Default::default()
        };
        wqe.encode(elem).ok_or(EINVAL)?;
        if inline {
            let mut off = a::SEND_WQE_HEADER_SIZE;
            for sge in sges.iter().filter(|s| s.length != 0) {
                let n = sge.length as usize;
                let dst = elem.get_mut(off..off + n).ok_or(EINVAL)?;
                // SAFETY: an inline SGE of a kernel consumer names `length`
                // readable bytes at the kernel virtual address `addr`
                // (type invariant of `SendWr`).
                let src = unsafe { core::slice::from_raw_parts(sge.addr as usize as *const u8, n) };
                dst.copy_from_slice(src);
                off += n;
            }
        } else {
            encode_kernel_sges(elem, a::SEND_WQE_HEADER_SIZE, sges)?;
        }
        inner
            .sq_prod
            .commit(slot, &self.fixed.sq_buf)
            .map_err(|_| EINVAL)
    }

    /// Encodes one kernel receive work request into the receive ring (the
    /// caller holds the QP lock, `inner`).
    fn write_recv_wqe(&self, inner: &mut QpInner, w: &RecvWr<'_>) -> Result {
        let rq_buf = self.fixed.rq_buf.as_ref().ok_or(EINVAL)?;
        // SAFETY: a kernel QP's ring, used under the QP lock, which the
        // caller holds.
        unsafe { write_recv(&mut inner.rq_prod, rq_buf, w, self.fixed.rq_max_sge) }
    }
}

/// Writes a kernel consumer's receive work request `w` into the next slot
/// of the receive ring (RQ or SRQ) `buf` and publishes it; `max_sge`: the
/// ring's SGE cap.
///
/// # Safety
///
/// As for [`kernel_slot`]: a kernel ring, used only under the lock the
/// caller holds.
pub(crate) unsafe fn write_recv(
    prod: &mut Producer,
    buf: &QueueBuf,
    w: &RecvWr<'_>,
    max_sge: u32,
) -> Result {
    use crate::abi as a;
    let num_sge = u32::try_from(w.num_sge).map_err(|_| EINVAL)?;
    if num_sge > max_sge {
        return Err(EINVAL);
    }
    let sges = w.sges;
    let total = kernel_sge_total(sges)?;
    // SAFETY: per the caller.
    let (slot, elem) = unsafe { kernel_slot(prod, buf)? };
    let wqe = a::RecvWqe {
        wr_id: w.wr_id,
        dma: a::DmaInfo {
            length: total,
            resid: total,
            num_sge,
            ..Default::default()
        },
        ..Default::default()
    };
    wqe.encode(elem).ok_or(EINVAL)?;
    encode_kernel_sges(elem, a::RECV_WQE_HEADER_SIZE, sges)?;
    prod.commit(slot, buf).map_err(|_| EINVAL)
}

/// The total length of a kernel work request's SGEs.
fn kernel_sge_total(sges: &[sys::ib_sge]) -> Result<u32> {
    sges.iter()
        .try_fold(0u32, |t, s| t.checked_add(s.length))
        .ok_or(EINVAL)
}

/// Writes a kernel work request's SGEs as `struct rroce_sge`s into `elem`
/// from byte `off` on.
fn encode_kernel_sges(elem: &mut [u8], mut off: usize, sges: &[sys::ib_sge]) -> Result {
    for sge in sges {
        let e = crate::abi::Sge {
            addr: sge.addr,
            length: sge.length,
            lkey: sge.lkey,
        };
        e.encode(elem.get_mut(off..).ok_or(EINVAL)?).ok_or(EINVAL)?;
        off += size_of::<crate::abi::Sge>();
    }
    Ok(())
}

/// The next free slot of a kernel QP's ring, zeroed, for `prod` to commit
/// once written (`ENOMEM` if the ring is full).
///
/// # Safety
///
/// `buf` is a kernel QP's ring, mapped nowhere else and used only under the
/// QP lock, which the caller holds for as long as it uses the slice.
// The ring buffer is raw memory behind `QueueBuf`; the slot's exclusivity
// comes from the lock, as stated above, not from the borrow.
#[allow(clippy::mut_from_ref)]
unsafe fn kernel_slot<'b>(prod: &mut Producer, buf: &'b QueueBuf) -> Result<(Slot, &'b mut [u8])> {
    let slot = prod.reserve(buf).map_err(|e| match e {
        RingError::Full => ENOMEM,
        _ => EINVAL,
    })?;
    // SAFETY: the slot lies in the buffer; nothing else reads or writes it
    // while the caller holds the lock (caller).
    let elem = unsafe { core::slice::from_raw_parts_mut(buf.at(slot.offset()), slot.len()) };
    elem.fill(0);
    Ok((slot, elem))
}
