// SPDX-License-Identifier: GPL-2.0

//! UD: the datagram sender (one packet per WQE, completed once built) and
//! the receive side of datagrams (Q_Key check, GRH area, scatter).

use kernel::prelude::*;

use super::{Ctx, SendOp, SgeError, SEND_SOLICITED};
use crate::{
    abi,
    completion::{Completion, WcEx, WcOpcode, WcStatus},
    counters::Counter,
    engine::{
        psn::Psn,
        wire::{self, Bth, Headers, ImmDt, Opcode},
    },
    mr::AccessError,
    net::skb::{self, Skb},
    rdma::sys,
};

/// A datagram built under the QP lock, sent after it is dropped.
pub(crate) type Datagram = (Skb, crate::ah::AddressVector);

impl Ctx<'_> {
    /// The UD requester: every fetched WQE becomes one datagram to the AH
    /// it names and completes once built (UD has no acknowledgements). The
    /// datagrams go to `out`, to be sent once the QP lock is dropped. At
    /// most `budget` WQEs are retired per call (the lock keeps interrupts
    /// off). Returns whether WQEs are left: fetched, or published and not
    /// fetched yet.
    pub(crate) fn run_ud_sender(&mut self, out: &mut KVec<Datagram>, budget: usize) -> bool {
        if self.inner.state == sys::ib_qp_state_IB_QPS_ERR {
            self.fetch();
            self.flush_sq();
            return false;
        }
        // A kernel consumer's UD WQEs are all sent in SQD too: its posts
        // are refused outside RTS, and each sends every WQE it wrote
        // before it returns, so those in the ring belong to a post still
        // running, begun before the move to SQD, whose AH is valid only
        // until that post returns (left for RTS, a WQE would send through
        // an AH the consumer may have destroyed).
        let sends = self.inner.state == sys::ib_qp_state_IB_QPS_RTS
            || (self.qp.kernel && self.inner.state == sys::ib_qp_state_IB_QPS_SQD);
        if !sends {
            // Nothing is fetched below RTS: the work item has nothing
            // to come back for.
            self.inner.req.pending = false;
            return false;
        }
        self.fetch();
        let mut left = budget;
        while self.inner.req.fetched > 0 {
            if left == 0 || self.inner.req.odp_wait {
                return true;
            }
            left -= 1;
            let op = self.op(0);
            let status = if let Some(invalid) = op.invalid {
                invalid
            } else {
                match self.build_datagram(&op) {
                    Ok(d) => {
                        if out.push(d, GFP_ATOMIC).is_err() {
                            // Dropped like a datagram lost on the wire.
                            self.dev.counters.inc(Counter::NoRoute);
                        }
                        WcStatus::Success
                    }
                    Err(_) if self.inner.req.odp_wait => {
                        // Waits (not completed) for its ODP pages.
                        return true;
                    }
                    Err(s) => s,
                }
            };
            // A failed datagram completes in error and the QP goes on: the
            // MAD layer cannot bring its GSI QP back from the error state
            // (it recovers only from SQE, which rroce does not model).
            self.complete_head(status);
        }
        self.inner.req.pending
    }

    /// The datagram of WQE 0, or the completion status that refuses it.
    fn build_datagram(&mut self, op: &SendOp) -> Result<Datagram, WcStatus> {
        let opcode = match op.opcode {
            abi::WR_SEND => Opcode::UdSendOnly,
            abi::WR_SEND_WITH_IMM => Opcode::UdSendOnlyImm,
            _ => return Err(WcStatus::LocQpOpErr),
        };
        // One packet per datagram.
        if op.len > self.mtu() {
            return Err(WcStatus::LocLenErr);
        }
        let ud = abi::SendWqe::from_bytes(self.shadow(0))
            .ok_or(WcStatus::LocQpOpErr)?
            .wr
            .wr
            .ud();
        let av = if self.qp.kernel {
            let p = (u64::from(ud.pad[1]) << 32 | u64::from(ud.pad[0])) as usize;
            // SAFETY: a kernel QP's WQE carries the live AH its consumer
            // posted (`QpState::write_send_wqe`), built before `post_send`
            // returns.
            unsafe { crate::ah::RroceAh::kernel_av(p as *mut sys::ib_ah, self.qp.pd) }
        } else {
            crate::ah::RroceAh::user_av(self.dev, ud.ah_num, self.qp.pd, self.rcu)
        }
        .ok_or(WcStatus::LocQpOpErr)?;
        // The high bit of the WR's Q_Key means "the QP's Q_Key".
        let qkey = if ud.remote_qkey & 0x8000_0000 != 0 {
            self.inner.attrs.qkey
        } else {
            ud.remote_qkey
        };
        let psn = self.inner.req.psn;
        self.inner.req.psn = Psn::new(psn).next().get();
        let mut h = Headers::new(Bth::new(
            opcode,
            wire::DEFAULT_PKEY,
            ud.remote_qpn & wire::QPN_MASK,
            Psn::new(psn),
        ));
        h.bth.solicited = op.flags & SEND_SOLICITED != 0;
        h.deth = Some(wire::Deth {
            qkey,
            src_qpn: self.qp.qpn,
        });
        if opcode == Opcode::UdSendOnlyImm {
            h.imm_dt = Some(ImmDt {
                imm: u32::from_be(op.ex),
            });
        }
        let len = op.len as usize;
        let total = wire::packet_len(opcode, len).ok_or(WcStatus::LocLenErr)?;
        let ipv6 = av.network == crate::ah::NetworkType::Ipv6;
        if self.ndev.is_null() {
            // The netdev is unregistering (the device goes next): as
            // rdma_rxe when it finds no netdev to build a packet on.
            return Err(WcStatus::LocQpOpErr);
        }
        // Without memory the datagram is lost, as on the wire.
        let mut skb = skb::alloc(self.ndev, ipv6, total).ok_or(WcStatus::Success)?;
        let buf = skb.buf();
        let hdr = wire::build_headers(&h, len, buf).map_err(|_| WcStatus::LocQpOpErr)?;
        let (payload, rest) = buf
            .get_mut(hdr..)
            .ok_or(WcStatus::LocLenErr)?
            .split_at_mut_checked(len)
            .ok_or(WcStatus::LocLenErr)?;
        rest.fill(0);
        let elem = self.shadow(0);
        if op.inline {
            let src = abi::SendWqe::payload(elem, len).ok_or(WcStatus::LocLenErr)?;
            payload.copy_from_slice(src);
        } else {
            let r = self.walk_sges(
                elem,
                abi::SendWqe::sge,
                op.num_sge,
                (0, op.len),
                0,
                |mr, va, r| mr.read(va, payload.get_mut(r).ok_or(AccessError::Bounds)?),
            );
            match r {
                Ok(()) => {}
                // ODP pages are not there: the WQE waits for them (the
                // caller sees `odp_wait`).
                Err(SgeError::Absent(f)) if self.odp_wait_requester(f) => {
                    return Err(WcStatus::Success)
                }
                Err(e) => return Err(e.status()),
            }
        }
        Ok((skb, av))
    }

    /// A datagram for this UD QP (`l3`: its IP header). The Q_Key must
    /// match (the GSI QP's is well known); the next receive WQE gets the
    /// 40-byte network header area, then the payload. Without a receive
    /// WQE, or with a bad Q_Key, the datagram is counted and dropped.
    pub(crate) fn on_datagram(&mut self, pkt: &wire::Packet<'_>, l3: &[u8]) {
        let st = self.inner.state;
        // SQD drains the send queue only: datagrams are still received.
        if st != sys::ib_qp_state_IB_QPS_RTR
            && st != sys::ib_qp_state_IB_QPS_RTS
            && st != sys::ib_qp_state_IB_QPS_SQD
        {
            self.dev.counters.inc(Counter::NoQp);
            return;
        }
        let Some(deth) = pkt.headers().deth else {
            self.dev.counters.inc(Counter::Malformed);
            return;
        };
        if deth.qkey != self.inner.attrs.qkey {
            self.dev.counters.inc(Counter::QkeyViolation);
            return;
        }
        // The GRH area: an IPv6 header as is, an IPv4 header in its last
        // 20 bytes (as rdma_rxe and hardware RoCEv2 devices lay it out).
        let mut grh = [0u8; 40];
        let net = match l3.len() {
            40 => {
                grh.copy_from_slice(l3);
                sys::rdma_network_type_RDMA_NETWORK_IPV6 as u8
            }
            20 => {
                grh[20..].copy_from_slice(l3);
                sys::rdma_network_type_RDMA_NETWORK_IPV4 as u8
            }
            _ => {
                self.dev.counters.inc(Counter::Malformed);
                return;
            }
        };
        match self.take_recv() {
            Ok(true) => {}
            Ok(false) => {
                self.dev.counters.inc(Counter::UdNoRecv);
                return;
            }
            Err(()) => return,
        }
        let data = pkt.payload();
        let r = self.inner.resp.recv;
        let total = grh.len() + data.len();
        let elem = self.inner.rq_shadow.get(..self.qp.rq_elem).unwrap_or(&[]);
        let scattered = if total as u64 > u64::from(r.len) {
            Err(SgeError::Len)
        } else {
            self.walk_sges(
                elem,
                abi::RecvWqe::sge,
                r.num_sge,
                (0, total as u32),
                sys::ib_access_flags_IB_ACCESS_LOCAL_WRITE,
                |mr, va, rg| {
                    // `rg` indexes the GRH area followed by the payload.
                    let g = grh.len();
                    let (a, b) = (rg.start, rg.end);
                    if b <= g {
                        mr.write(va, grh.get(a..b).ok_or(AccessError::Bounds)?)
                    } else if a >= g {
                        mr.write_scatter(va, data.range(a - g..b - g).ok_or(AccessError::Bounds)?)
                    } else {
                        mr.write(va, grh.get(a..).ok_or(AccessError::Bounds)?)?;
                        mr.write_scatter(
                            va + (g - a) as u64,
                            data.take(b - g).ok_or(AccessError::Bounds)?,
                        )
                    }
                },
            )
        };
        let mut c = Completion {
            byte_len: total as u32,
            src_qp: deth.src_qpn & wire::QPN_MASK,
            grh: Some(net),
            port_num: 1,
            ..Completion::new(r.wr_id, WcStatus::Success, WcOpcode::Recv, self.qp.qpn)
        };
        if let Err(SgeError::Absent(f)) = scattered {
            if self.odp_absent(f) {
                // ODP pages of the receive buffer are not there: the
                // datagram is dropped (as on a lossy wire) and the receive
                // WQE (still on the RQ, or kept from the SRQ) takes a later
                // one once they are.
                self.odp_untake();
                self.dev.counters.inc(Counter::UdNoRecv);
                return;
            }
        }
        if let Err(e) = scattered {
            c.status = e.status();
            c.byte_len = 0;
        } else if let Some(imm) = pkt.headers().imm_dt {
            c.ex = WcEx::Imm(imm.imm.to_be());
        }
        self.complete_recv(c, pkt.bth().solicited);
    }
}
