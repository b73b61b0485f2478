// SPDX-License-Identifier: GPL-2.0

//! The receive path, one stage (as rdma_rxe's `rxe_recv.c`): from a packet
//! the UDP tunnel received (`crate::net`) to the transport.
//!
//! In order: the IP header ([`ip_info`]); the device, by the receiving
//! netdev or, for a looped-back packet, by the destination GID
//! ([`lookup_device`]); the UDP length and the ICRC ([`roce_payload`]); the
//! base transport header ([`hdr_check`]: parse, a transport rroce offers);
//! the QP ([`lookup_qp`], [`check_type_state`]); then [`dispatch`] to the
//! transport's requester, responder or UD receiver under the QP lock.
//! Every packet dropped on the way is counted on the device (except before
//! a device is known).

use kernel::{prelude::*, sync::rcu};

use crate::{
    counters::Counter,
    dev::RroceDev,
    engine::{
        icrc::{self, ICRC_LEN},
        wire::{self, Direction, Transport},
    },
    net::skb::Received,
    qp::QpState,
    rdma::sys,
};

/// A reference on an rroce device found for a received packet, dropped
/// with `ib_device_put`.
///
/// # Invariants
///
/// `0` is an rroce device's `ib_device` on which this value holds a
/// reference.
struct DevRef(*mut sys::ib_device);

impl DevRef {
    /// The device.
    fn dev(&self) -> &RroceDev {
        // SAFETY: an rroce device, referenced while `self` lives (type
        // invariant).
        unsafe { RroceDev::from_ib(self.0) }
    }
}

impl Drop for DevRef {
    fn drop(&mut self) {
        // SAFETY: drops the reference this value holds (type invariant).
        unsafe { sys::ib_device_put(self.0) };
    }
}

/// A packet from the tunnel (softirq context): finds its device, checks it
/// and hands it to the transport.
pub(crate) fn receive(rx: &Received<'_>) {
    let pkt = rx.bytes();
    let Some((ip_len, dst)) = ip_info(pkt) else {
        return;
    };
    let Some(dev_ref) = lookup_device(rx, &dst) else {
        return;
    };
    let dev = dev_ref.dev();
    dev.counters.inc(Counter::RcvdPkts);
    match roce_payload(pkt, ip_len) {
        Ok(roce) => deliver(dev, roce, &pkt[..ip_len]),
        Err(c) => dev.counters.inc(c),
    }
}

/// The rroce device a packet to `dst` arrived for: the one bound to the
/// receiving netdev or, since a packet to a local address arrives on `lo`,
/// the one in the netdev's namespace that owns the destination GID.
fn lookup_device(rx: &Received<'_>, dst: &[u8; 16]) -> Option<DevRef> {
    let ibdev = crate::registry::device_of_netdev(rx.netdev())
        .or_else(|| crate::registry::device_of_gid(rx.net(), dst))?;
    // INVARIANT: `device_of_*` return an rroce device with a reference the
    // caller drops.
    Some(DevRef(ibdev))
}

/// A RoCEv2 packet (BTH through ICRC, ICRC already checked) received by
/// `dev` with the IP header `l3`: checks its headers, finds its QP and
/// hands it to the transport.
fn deliver(dev: &RroceDev, roce: &[u8], l3: &[u8]) {
    let Some((pkt, ud)) = hdr_check(dev, roce) else {
        return;
    };
    let guard = rcu::read_lock();
    let Some(qp) = lookup_qp(dev, &pkt, ud, &guard) else {
        return;
    };
    // Source address (against the QP's address vector) and key (P_Key,
    // Q_Key) checks, as rxe's `check_addr` and `check_keys`, belong here.
    dispatch(qp, &pkt, ud, l3, &guard);
}

/// Parses the packet and checks its transport is one rroce offers: RC or
/// UD (`Some(.., true)` for UD). UC and XRC are not offered.
fn hdr_check<'p>(dev: &RroceDev, roce: &'p [u8]) -> Option<(wire::Packet<'p>, bool)> {
    let Ok(pkt) = wire::parse(roce, None) else {
        dev.counters.inc(Counter::Malformed);
        return None;
    };
    let ud = match pkt.info().transport {
        Transport::Rc => false,
        Transport::Ud => true,
        _ => {
            dev.counters.inc(Counter::NoQp);
            return None;
        }
    };
    Some((pkt, ud))
}

/// The destination QP of `pkt`, if it exists and takes packets of its
/// transport (`ud`).
fn lookup_qp<'g>(
    dev: &'g RroceDev,
    pkt: &wire::Packet<'_>,
    ud: bool,
    guard: &'g rcu::Guard,
) -> Option<&'g QpState> {
    let qpn = pkt.bth().dest_qpn;
    let Some(qp) = dev
        .qps
        .get(qpn as usize, guard)
        .filter(|qp| check_type_state(qp, ud))
    else {
        dev.counters.inc(Counter::NoQp);
        return None;
    };
    Some(qp)
}

/// Whether the QP takes packets of the transport `ud`: datagrams for UD
/// and GSI QPs, RC packets for RC QPs. (The QP's state is the transport's
/// business, checked under the QP lock; a QP being destroyed takes none,
/// see `QpState::deliver`.)
fn check_type_state(qp: &QpState, ud: bool) -> bool {
    qp.is_ud() == ud
}

/// Hands the packet to the transport under the QP lock: a UD request to
/// the UD receiver, an RC request to the responder, an RC response to the
/// completer; anything else is dropped. Then sends what they built.
fn dispatch(qp: &QpState, pkt: &wire::Packet<'_>, ud: bool, l3: &[u8], guard: &rcu::Guard) {
    let direction = pkt.info().direction;
    qp.deliver(guard, |ctx| match (ud, direction) {
        (true, Direction::Request) => ctx.on_datagram(pkt, l3),
        (true, _) => {}
        (false, Direction::Request) => ctx.on_request(pkt),
        (false, Direction::Response) => ctx.on_response(pkt),
        (false, Direction::Notification) => {}
    });
}

/// The RoCEv2 packet (BTH through ICRC) after the IP and UDP headers, with
/// its ICRC checked.
fn roce_payload(pkt: &[u8], ip_len: usize) -> Result<&[u8], Counter> {
    // The UDP length bounds the RoCE packet (the skb may carry padding).
    let udp = pkt.get(ip_len..ip_len + 8).ok_or(Counter::Malformed)?;
    let udp_len = usize::from(u16::from_be_bytes([udp[4], udp[5]]));
    if udp_len < 8 + ICRC_LEN {
        return Err(Counter::Malformed);
    }
    let pkt = pkt.get(..ip_len + udp_len).ok_or(Counter::Malformed)?;
    icrc::verify(pkt).map_err(|_| Counter::BadIcrc)?;
    Ok(&pkt[ip_len + 8..])
}

/// The IP header length and the destination address as a GID (IPv4-mapped
/// for IPv4), or `None` for anything but a plain IPv4/IPv6 header.
fn ip_info(pkt: &[u8]) -> Option<(usize, [u8; 16])> {
    let v = pkt.first()? >> 4;
    let mut dst = [0u8; 16];
    match v {
        4 => {
            let ihl = usize::from(pkt.first()? & 0x0f) * 4;
            if ihl != 20 || pkt.len() < 20 {
                return None;
            }
            dst[10] = 0xff;
            dst[11] = 0xff;
            dst[12..].copy_from_slice(pkt.get(16..20)?);
            Some((20, dst))
        }
        6 => {
            if pkt.len() < 40 || *pkt.get(6)? != 17 {
                return None;
            }
            dst.copy_from_slice(pkt.get(24..40)?);
            Some((40, dst))
        }
        _ => None,
    }
}
