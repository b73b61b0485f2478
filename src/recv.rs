// SPDX-License-Identifier: GPL-2.0

//! The receive path, one stage (as rdma_rxe's `rxe_recv.c`): from a packet
//! the UDP tunnel received (`crate::net`) to the transport.
//!
//! In order: the IP header ([`ip_info`]); the device, by the receiving
//! netdev (or the one under a VLAN device) or, for a packet to a local
//! address (which arrives on a loopback netdev), by the destination GID
//! once its ICRC checked ([`lookup_device`]); the UDP length and the ICRC
//! ([`roce_payload`]); the base transport header ([`hdr_check`]); the QP
//! ([`lookup_qp`]), the opcode for its type and the P_Key
//! ([`check_type_keys`]); then [`dispatch`], under the QP lock: a
//! connected QP's path addresses (`check_addr`), then the transport's
//! requester, responder or UD receiver (which checks the Q_Key). Every
//! packet dropped on the way is counted on the device (except before a
//! device is known).

use kernel::{prelude::*, sync::rcu};

use crate::{
    counters::Counter,
    dev::RroceDev,
    engine::{
        icrc::{self, ICRC_LEN},
        rc::checks,
        scatter::Scatter,
        wire::{self, Direction},
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
/// and hands it to the transport. `true` once a device took it (it was
/// used, or dropped and counted on the device).
pub(crate) fn receive(rx: &Received<'_>) -> bool {
    let pkt = rx.packet();
    let Some(ip) = ip_info(pkt.head()) else {
        return false;
    };
    let Some((dev_ref, checked)) = lookup_device(rx, pkt, &ip) else {
        return false;
    };
    let dev = dev_ref.dev();
    dev.counters.inc(Counter::RcvdPkts);
    if pkt.contiguous().is_none() {
        dev.counters.inc(Counter::RcvdPaged);
    }
    let roce = match checked {
        Some(roce) => roce,
        None => match roce_payload(pkt, ip.len) {
            Ok(roce) => roce,
            Err(c) => {
                dev.counters.inc(c);
                return true;
            }
        },
    };
    deliver(dev, roce, &ip);
    true
}

/// The rroce device a packet arrived for: the one bound to the receiving
/// netdev, or to the real device under a receiving VLAN device. A packet
/// to a local address arrives on a loopback netdev: its device is the one
/// in the netdev's namespace that owns the destination GID, looked for
/// only once the packet's ICRC checked (then returned too). Never a device
/// of another netdev: a packet is not taken on any interface but its
/// device's.
fn lookup_device<'p>(
    rx: &Received<'_>,
    pkt: Scatter<'p>,
    ip: &IpInfo<'_>,
) -> Option<(DevRef, Option<Scatter<'p>>)> {
    let ndev = rx.netdev();
    let by_ndev = crate::registry::rx_device_of_netdev(ndev).or_else(|| {
        // SAFETY: the receiving netdev is live while the packet is handled.
        let real = unsafe { sys::rroce_helper_vlan_real_dev(ndev) };
        (!real.is_null())
            .then(|| crate::registry::rx_device_of_netdev(real))
            .flatten()
    });
    if let Some(ibdev) = by_ndev {
        // INVARIANT: `device_of_netdev` returns an rroce device with a
        // reference the caller drops.
        return Some((DevRef(ibdev), None));
    }
    // SAFETY: as above.
    if !unsafe { sys::rroce_helper_netdev_is_loopback(ndev) } {
        return None;
    }
    let roce = roce_payload(pkt, ip.len).ok()?;
    let ibdev = crate::registry::device_of_gid(rx.net(), &ip.dst)?;
    // INVARIANT: as above.
    Some((DevRef(ibdev), Some(roce)))
}

/// A RoCEv2 packet (BTH through ICRC, ICRC already checked) received by
/// `dev` with the IP header `ip`: checks its headers, finds its QP and
/// hands it to the transport.
fn deliver(dev: &RroceDev, roce: Scatter<'_>, ip: &IpInfo<'_>) {
    // A packet in one piece (what veth delivers) takes the slice parser
    // directly.
    let parsed = match roce.contiguous() {
        Some(bytes) => wire::parse(bytes, None),
        None => wire::parse_scatter(roce, None),
    };
    let Ok(pkt) = parsed else {
        dev.counters.inc(Counter::Malformed);
        return;
    };
    if checks::is_notification(pkt.info().transport) {
        // A CNP: nothing rroce acts on.
        return;
    }
    let guard = rcu::read_lock();
    if pkt.bth().dest_qpn == crate::mcast::MCAST_QPN {
        return deliver_multicast(dev, &pkt, ip, &guard);
    }
    let Some(qp) = lookup_qp(dev, &pkt, &guard) else {
        return;
    };
    if let Err(c) = check_type_keys(qp, &pkt) {
        dev.counters.inc(c);
        return;
    }
    dispatch(dev, qp, &pkt, ip, &guard);
}

/// A datagram sent to a multicast group (to QP 0xffffff at a multicast
/// address): every UD QP of `dev` attached to the group gets it, each
/// checked as a datagram to that QP would be.
fn deliver_multicast(dev: &RroceDev, pkt: &wire::Packet<'_>, ip: &IpInfo<'_>, guard: &rcu::Guard) {
    let found = crate::mcast::for_each_member(dev, &ip.dst, |qpn| {
        let Some(qp) = dev.qps.get(qpn as usize, guard) else {
            return;
        };
        if let Err(c) = check_type_keys(qp, pkt) {
            dev.counters.inc(c);
            return;
        }
        dispatch(dev, qp, pkt, ip, guard);
    });
    if !found {
        dev.counters.inc(Counter::NoQp);
    }
}

/// The destination QP of `pkt`, if it exists.
fn lookup_qp<'g>(
    dev: &'g RroceDev,
    pkt: &wire::Packet<'_>,
    guard: &'g rcu::Guard,
) -> Option<&'g QpState> {
    let qpn = pkt.bth().dest_qpn;
    let Some(qp) = dev.qps.get(qpn as usize, guard) else {
        dev.counters.inc(Counter::NoQp);
        return None;
    };
    Some(qp)
}

/// The default P_Key of the port (rroce's only P_Key table entry).
const PORT_PKEY: u16 = wire::DEFAULT_PKEY;

/// rxe's `check_type_state` and `check_keys` (the P_Key part; the UD
/// receiver checks the Q_Key): the opcode is one the QP's type takes
/// (datagrams for UD and GSI QPs, RC packets for RC QPs; rroce offers no
/// UC), and the BTH P_Key matches the port's. (The QP's state is the
/// transport's business, checked under the QP lock; a QP being destroyed
/// takes none, see `QpState::deliver`.)
fn check_type_keys(qp: &QpState, pkt: &wire::Packet<'_>) -> Result<(), Counter> {
    if !checks::opcode_fits_qp(pkt.info().transport, qp.service()) {
        return Err(Counter::BadOpcode);
    }
    if !checks::pkey_matches(pkt.bth().pkey, PORT_PKEY) {
        return Err(Counter::BadPkey);
    }
    Ok(())
}

/// Hands the packet to the transport under the QP lock: a UD request to
/// the UD receiver; for an RC QP, once the packet's addresses are the
/// QP's path (rxe's `check_addr`), a request to the responder and a
/// response to the completer. Then sends what they built.
fn dispatch(
    dev: &RroceDev,
    qp: &QpState,
    pkt: &wire::Packet<'_>,
    ip: &IpInfo<'_>,
    guard: &rcu::Guard,
) {
    let direction = pkt.info().direction;
    let ud = qp.is_ud();
    let l3 = ip.header;
    qp.deliver(guard, |ctx| {
        if ud {
            if direction == Direction::Request {
                ctx.on_datagram(pkt, l3);
            }
            return;
        }
        match ctx.check_path(&ip.src, &ip.dst) {
            Some(true) => {}
            Some(false) => return dev.counters.inc(Counter::BadAddr),
            // No path yet: the QP takes no packets.
            None => return,
        }
        match direction {
            Direction::Request => ctx.on_request(pkt),
            Direction::Response => ctx.on_response(pkt),
            Direction::Notification => {}
        }
    });
}

/// The RoCEv2 packet (BTH through ICRC) after the IP and UDP headers, with
/// its ICRC checked.
fn roce_payload(pkt: Scatter<'_>, ip_len: usize) -> Result<Scatter<'_>, Counter> {
    // The UDP length bounds the RoCE packet (the skb may carry padding).
    let udp = pkt
        .head()
        .get(ip_len..ip_len + 8)
        .ok_or(Counter::Malformed)?;
    let udp_len = usize::from(u16::from_be_bytes([udp[4], udp[5]]));
    if udp_len < 8 + ICRC_LEN {
        return Err(Counter::Malformed);
    }
    let pkt = pkt.take(ip_len + udp_len).ok_or(Counter::Malformed)?;
    icrc::verify_scatter_using(pkt, crate::rdma::icrc_crc32()).map_err(|_| Counter::BadIcrc)?;
    pkt.skip(ip_len + 8).ok_or(Counter::Malformed)
}

/// What the receive path reads of a packet's IP header.
struct IpInfo<'p> {
    /// The header's length.
    len: usize,
    /// The header itself.
    header: &'p [u8],
    /// Source and destination addresses as GIDs (IPv4-mapped for IPv4).
    src: [u8; 16],
    dst: [u8; 16],
}

/// The IP header of `pkt`, or `None` for anything but a plain IPv4 header
/// or an IPv6 header followed by UDP.
fn ip_info(pkt: &[u8]) -> Option<IpInfo<'_>> {
    let v = pkt.first()? >> 4;
    let (mut src, mut dst) = ([0u8; 16], [0u8; 16]);
    let len = match v {
        4 => {
            let ihl = usize::from(pkt.first()? & 0x0f) * 4;
            if ihl != 20 || pkt.len() < 20 {
                return None;
            }
            for (g, at) in [(&mut src, 12), (&mut dst, 16)] {
                g[10] = 0xff;
                g[11] = 0xff;
                g[12..].copy_from_slice(pkt.get(at..at + 4)?);
            }
            20
        }
        6 => {
            if pkt.len() < 40 || *pkt.get(6)? != 17 {
                return None;
            }
            src.copy_from_slice(pkt.get(8..24)?);
            dst.copy_from_slice(pkt.get(24..40)?);
            40
        }
        _ => return None,
    };
    Some(IpInfo {
        len,
        header: pkt.get(..len)?,
        src,
        dst,
    })
}
