// SPDX-License-Identifier: GPL-2.0

//! The receive path, one stage (as rdma_rxe's `rxe_recv.c`): from a packet
//! the UDP tunnel received (`crate::net`) to the transport.
//!
//! In order: the IP header ([`ip_info`]); the device, by the receiving
//! netdev (or the one under a VLAN device) or, for a packet to a local
//! address (which arrives on a loopback netdev), by the destination GID
//! once its ICRC checked ([`lookup_device`]); the UDP length and the ICRC
//! ([`ip_packet`], [`icrc_holds`]); the base transport header ([`hdr_check`]); the QP
//! ([`lookup_qp`]), the opcode for its type and the P_Key
//! ([`check_type_keys`]); then [`dispatch`], under the QP lock: a
//! connected QP's path addresses (`check_addr`), then the transport's
//! requester, responder or UD receiver (which checks the Q_Key). Every
//! packet dropped on the way is counted on the device (except before a
//! device is known).
//!
//! The QP is found on the parsed headers before the ICRC is checked (as
//! rdma_rxe does), without counting anything ([`target`]); [`place`] then
//! decides whether the packet is processed here, in the softirq, or by
//! another CPU's receive thread (`engine::handover`). Here, the checks
//! above run in their order, each failure counted. On a thread, [`receive`]
//! returns the packet as a [`HandOver`], which `crate::net` queues; the
//! thread brings it back to [`receive_handed`], which checks the ICRC
//! there (the pass over every byte goes with the packet) and dispatches
//! it. Either way a packet is acted upon only once its ICRC held, and
//! counted as it was before the hand-over existed.

use core::{mem::ManuallyDrop, sync::atomic::Ordering};

use kernel::{prelude::*, sync::rcu};

use crate::{
    counters::Counter,
    dev::RroceDev,
    engine::{
        handover::{self, Arrival, Cpus, Place, Role},
        icrc::{self, ICRC_LEN},
        rc::checks,
        scatter::Scatter,
        wire::{self, Direction, OpKind},
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

/// What the receive path made of a packet.
pub(crate) enum Verdict<'g> {
    /// For no rroce device: the caller drops it.
    NotOurs,
    /// A device took it: used, or dropped and counted on the device.
    Taken,
    /// To be dispatched by a receive thread: the caller queues it there.
    HandOver(HandOver<'g>),
}

/// A packet's device and QP, found inside the RCU read-side section `'g`,
/// on their way to a receive thread with the packet.
///
/// # Invariants
///
/// `qp` counts this packet among those of `role` waiting on a thread
/// (`QpState::rx`); dropping the value, or the [`Handed`] that
/// `into_raw` and `Handed::from_raw` make of it, uncounts it.
pub(crate) struct HandOver<'g> {
    dev: DevRef,
    qp: &'g QpState,
    role: Role,
    cpu: u32,
}

impl HandOver<'_> {
    /// The CPU whose receive thread is to dispatch the packet.
    pub(crate) fn cpu(&self) -> u32 {
        self.cpu
    }

    /// The device reference, the QP and the role as raw values, for a
    /// queue that keeps them with the packet; `Handed::from_raw` takes
    /// them back. The QP stays live while its role counts the packet:
    /// `RroceQp::destroy` flushes the receive threads when a count is
    /// not zero once the QP has left its table.
    pub(crate) fn into_raw(self) -> (*mut sys::ib_device, *const QpState, u32) {
        let me = ManuallyDrop::new(self);
        // The reference and the count go along with the raw values.
        (me.dev.0, me.qp, me.role.index() as u32)
    }
}

impl Drop for HandOver<'_> {
    fn drop(&mut self) {
        self.qp.rx[self.role.index()].done();
    }
}

/// A [`HandOver`] given back by a receive thread, or by a queue that could
/// not take it.
///
/// # Invariants
///
/// As [`HandOver`]'s, and `qp` is live while this value lives: the
/// receive threads, which hold it, are flushed before a QP is freed.
pub(crate) struct Handed {
    dev: DevRef,
    qp: *const QpState,
    role: Role,
}

impl Handed {
    /// Takes back what [`HandOver::into_raw`] returned.
    ///
    /// # Safety
    ///
    /// The values come from one `into_raw`, taken back once, before the
    /// receive threads are flushed.
    pub(crate) unsafe fn from_raw(dev: *mut sys::ib_device, qp: *const QpState, role: u32) -> Self {
        // INVARIANT: the reference, the QP and its count of `into_raw`.
        Handed {
            dev: DevRef(dev),
            qp,
            role: Role::from_index(role),
        }
    }

    /// The QP.
    fn qp(&self) -> &QpState {
        // SAFETY: live while `self` is (type invariant).
        unsafe { &*self.qp }
    }

    /// Counts `c` on the packet's device.
    pub(crate) fn count(&self, c: Counter) {
        self.dev.dev().counters.inc(c);
    }
}

impl Drop for Handed {
    fn drop(&mut self) {
        // Before the device reference goes (the fields drop after this);
        // the last touch of the QP for this packet (`RroceQp::destroy`).
        self.qp().rx[self.role.index()].done();
    }
}

/// What a receive thread calls for a QP whose transmit was kicked to its
/// CPU: the QP's own pass (`crate::qp`), run there as the packets handed
/// over are.
pub(crate) use crate::qp::kicked as transmit_kicked;

/// A packet from the tunnel (softirq context, inside the RCU read-side
/// section `guard`): finds its device, checks it and hands it to the
/// transport, here or (see [`Verdict`]) on a receive thread.
pub(crate) fn receive<'g>(rx: &Received<'_>, guard: &'g rcu::Guard) -> Verdict<'g> {
    let pkt = rx.packet();
    let Some(ip) = ip_info(pkt.head()) else {
        return Verdict::NotOurs;
    };
    let Some((dev_ref, checked)) = lookup_device(rx, pkt, &ip) else {
        return Verdict::NotOurs;
    };
    let dev = dev_ref.dev();
    dev.counters.inc(Counter::RcvdPkts);
    if pkt.contiguous().is_none() {
        dev.counters.inc(Counter::RcvdPaged);
    }
    let (roce, unchecked) = match checked {
        Some(roce) => (roce, None),
        None => match ip_packet(pkt, ip.len).and_then(|p| Ok((roce_of(p, ip.len)?, p))) {
            Ok((roce, p)) => (roce, Some(p)),
            Err(c) => {
                dev.counters.inc(c);
                return Verdict::Taken;
            }
        },
    };
    deliver(dev_ref, roce, unchecked, &ip, guard)
}

/// A packet a receive thread took over (softirq-like context: bottom
/// halves disabled), `pkt` from its IP header on, as [`receive`] read it:
/// its ICRC is checked, then it is dispatched to the QP found for it.
/// `true`: used, or dropped and counted (the caller consumes it).
pub(crate) fn receive_handed(pkt: Scatter<'_>, h: Handed) -> bool {
    let guard = rcu::read_lock();
    // The headers [`receive`] checked: only their places are found again.
    let Some(ip) = ip_info(pkt.head()) else {
        return false;
    };
    let Ok(ip_pkt) = ip_packet(pkt, ip.len) else {
        return false;
    };
    let dev = h.dev.dev();
    if !icrc_holds(dev, Some(ip_pkt)) {
        return true;
    }
    let Ok(roce) = roce_of(ip_pkt, ip.len) else {
        return false;
    };
    let Ok(p) = parse(roce) else {
        return false;
    };
    h.count(Counter::RcvdHanded);
    dispatch(dev, h.qp(), &p, &ip, &guard);
    true
}

/// A packet handed over that its receive thread's full queue refused,
/// `pkt` from its IP header on: dropped, counted as a bad ICRC if it is
/// one (as it would have been anywhere), else as refused.
pub(crate) fn refuse(pkt: Scatter<'_>, h: Handed) {
    let Some(ip) = ip_info(pkt.head()) else {
        return;
    };
    let Ok(ip_pkt) = ip_packet(pkt, ip.len) else {
        return;
    };
    if icrc_holds(h.dev.dev(), Some(ip_pkt)) {
        h.count(Counter::RcvdHandoverFull);
    }
}

/// Whether the ICRC of `ip_pkt` (the IP packet through its ICRC; `None`:
/// already checked) holds; a packet whose does not is counted.
fn icrc_holds(dev: &RroceDev, ip_pkt: Option<Scatter<'_>>) -> bool {
    let Some(p) = ip_pkt else {
        return true;
    };
    if icrc::verify_scatter_using(p, crate::rdma::icrc_crc32()).is_err() {
        dev.counters.inc(Counter::BadIcrc);
        return false;
    }
    true
}

/// The RoCE packet `roce` parsed; one in one piece (what veth delivers)
/// takes the slice parser directly.
fn parse<'p>(roce: Scatter<'p>) -> Result<wire::Packet<'p>, wire::ParseError> {
    match roce.contiguous() {
        Some(bytes) => wire::parse(bytes, None),
        None => wire::parse_scatter(roce, None),
    }
}

/// The DMA length a READ request asks for, while the module parameter
/// `rx_handover_reads` weighs READ requests by it
/// ([`handover::weight`]); `None` for any other packet.
fn read_len(pkt: &wire::Packet<'_>) -> Option<u32> {
    if pkt.info().kind != OpKind::RdmaReadRequest {
        return None;
    }
    // SAFETY: plain read of a module parameter.
    if !unsafe { sys::rroce_helper_rx_handover_reads() } {
        return None;
    }
    pkt.headers().reth.map(|r| r.len)
}

/// Where a packet of `role`, weighing `len` ([`handover::weight`]), for
/// `qp` is dispatched: [`handover::place`], counted on the QP's role when
/// on a thread.
fn place(qp: &QpState, role: Role, len: usize) -> Place {
    let Some(state) = qp.rx.get(role.index()) else {
        return Place::Here;
    };
    // Only a response asks what its requester is doing.
    let resp = role == Role::Responses;
    let requester_waits = resp && qp.fixed.req_waits.load(Ordering::Relaxed);
    let requester_streams = resp && qp.fixed.req_streams.load(Ordering::Relaxed);
    state.place(|waiting| {
        let arrival = Arrival {
            role,
            len,
            waiting,
            requester_waits,
            requester_streams,
        };
        handover::place(&arrival, || {
            let (mut here, mut other, mut takes) = (0u32, -1i32, false);
            // SAFETY: softirq context (the tunnel's receive callback).
            unsafe { sys::rroce_helper_rxq_where(&mut here, &mut other, &mut takes) };
            Cpus {
                other: u32::try_from(other).ok(),
                here_takes_requests: takes,
            }
        })
    })
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
    let ip_pkt = ip_packet(pkt, ip.len).ok()?;
    icrc::verify_scatter_using(ip_pkt, crate::rdma::icrc_crc32()).ok()?;
    let roce = roce_of(ip_pkt, ip.len).ok()?;
    let ibdev = crate::registry::device_of_gid(rx.net(), &ip.dst)?;
    // INVARIANT: as above.
    Some((DevRef(ibdev), Some(roce)))
}

/// A RoCEv2 packet (BTH through ICRC) received by `dev` with the IP
/// header `ip`, the IP packet `unchecked` still to have its ICRC checked
/// (`None`: checked): checks its headers, finds its QP and hands it to the
/// transport, here or on a receive thread.
///
/// As rdma_rxe does, the headers are parsed and the QP found before the
/// ICRC is checked, so that the check (a pass over every byte) runs where
/// the packet is processed. Nothing is counted or acted upon before the
/// ICRC held, though: a packet that would not go to a thread takes the
/// checks in their order (ICRC, headers, QP, type and keys), each failure
/// counted as before.
fn deliver<'g>(
    dev_ref: DevRef,
    roce: Scatter<'_>,
    unchecked: Option<Scatter<'_>>,
    ip: &IpInfo<'_>,
    guard: &'g rcu::Guard,
) -> Verdict<'g> {
    let dev = dev_ref.dev();
    let parsed = parse(roce);
    if let Ok(pkt) = &parsed {
        if let Some((qp, role)) = target(dev, pkt, guard) {
            let weight = handover::weight(roce.len(), read_len(pkt));
            if let Place::Thread(cpu) = place(qp, role, weight) {
                // INVARIANT: `place` counted it on the QP's role.
                return Verdict::HandOver(HandOver {
                    dev: dev_ref,
                    qp,
                    role,
                    cpu,
                });
            }
            if icrc_holds(dev, unchecked) {
                dispatch(dev, qp, pkt, ip, guard);
            }
            return Verdict::Taken;
        }
    }
    // The checks in their order, each failure counted.
    if !icrc_holds(dev, unchecked) {
        return Verdict::Taken;
    }
    let Ok(pkt) = parsed else {
        dev.counters.inc(Counter::Malformed);
        return Verdict::Taken;
    };
    if checks::is_notification(pkt.info().transport) {
        // A CNP: nothing rroce acts on.
        return Verdict::Taken;
    }
    if pkt.bth().dest_qpn == crate::mcast::MCAST_QPN {
        deliver_multicast(dev, &pkt, ip, guard);
        return Verdict::Taken;
    }
    let Some(qp) = lookup_qp(dev, &pkt, guard) else {
        return Verdict::Taken;
    };
    if let Err(c) = check_type_keys(qp, &pkt) {
        dev.counters.inc(c);
        return Verdict::Taken;
    }
    dispatch(dev, qp, &pkt, ip, guard);
    Verdict::Taken
}

/// The QP and role a parsed packet goes to when every check before the
/// transport passes (nothing counted): not a CNP, not multicast, a QP of
/// the device that takes the opcode, the port's P_Key, a request or a
/// response. `None` otherwise.
fn target<'g>(
    dev: &RroceDev,
    pkt: &wire::Packet<'_>,
    guard: &'g rcu::Guard,
) -> Option<(&'g QpState, Role)> {
    if checks::is_notification(pkt.info().transport) {
        return None;
    }
    let qpn = pkt.bth().dest_qpn;
    if qpn == crate::mcast::MCAST_QPN {
        return None;
    }
    let qp = dev.qps.get(qpn as usize, guard)?;
    check_type_keys(qp, pkt).ok()?;
    let role = match pkt.info().direction {
        Direction::Request => Role::Requests,
        Direction::Response => Role::Responses,
        Direction::Notification => return None,
    };
    Some((qp, role))
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
    dev: &RroceDev,
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

/// The RoCEv2 packet (BTH through ICRC) in the IP packet `ip_pkt` (from
/// [`ip_packet`]), after its IP and UDP headers.
fn roce_of(ip_pkt: Scatter<'_>, ip_len: usize) -> Result<Scatter<'_>, Counter> {
    ip_pkt.skip(ip_len + 8).ok_or(Counter::Malformed)
}

/// The IP packet from its header through the ICRC: the UDP length bounds
/// the RoCE packet (the skb may carry padding).
fn ip_packet(pkt: Scatter<'_>, ip_len: usize) -> Result<Scatter<'_>, Counter> {
    let udp = pkt
        .head()
        .get(ip_len..ip_len + 8)
        .ok_or(Counter::Malformed)?;
    let udp_len = usize::from(u16::from_be_bytes([udp[4], udp[5]]));
    if udp_len < 8 + ICRC_LEN {
        return Err(Counter::Malformed);
    }
    pkt.take(ip_len + udp_len).ok_or(Counter::Malformed)
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
