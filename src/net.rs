// SPDX-License-Identifier: GPL-2.0

//! RoCEv2 encapsulation: UDP tunnel sockets, received and sent packets.
//!
//! Every network namespace with an rroce device has a UDP tunnel socket on
//! port 4791 for IPv4 and one for IPv6 (created with the namespace's first
//! device, released with its last). Only one socket per namespace can own
//! the port: a namespace where rdma_rxe already listens gets a clear error
//! at `rdma link add` (see `Documentation/device.rst`).
//!
//! Received packets arrive in softirq context through the tunnel's
//! `encap_rcv`; they are linearized, ICRC-checked and handed to the QP
//! (`crate::qp::receive`). Outgoing packets are built by the transport into
//! an skb that has room for the IP and UDP headers, which the C helper
//! pushes after the route lookup (as rdma_rxe's `prepare4/6`); the ICRC is
//! computed over the final packet here, then `ip_local_out` sends it.

use core::ptr::{null_mut, NonNull};

use kernel::{ffi::c_int, prelude::*};

use crate::{
    ah::{AddressVector, NetworkType},
    counters::{Counter, Counters},
    dev::RroceDev,
    engine::{icrc, icrc::ICRC_LEN},
    rdma::sys,
};

/// An skb owned by rroce; freed on drop unless sent.
///
/// # Invariants
///
/// `0` points at an skb nobody else owns; `1` is null or points at `2`
/// bytes of its linear data, owned with it.
pub(crate) struct Skb(NonNull<sys::sk_buff>, *mut u8, usize);

// SAFETY: an owned skb may be sent and freed from any context.
unsafe impl Send for Skb {}

impl Drop for Skb {
    fn drop(&mut self) {
        // SAFETY: owned (type invariant).
        unsafe { sys::rroce_helper_kfree_skb(self.0.as_ptr()) };
    }
}

impl Skb {
    /// The packet bytes (BTH through ICRC) of a new skb from [`alloc`].
    pub(crate) fn buf(&mut self) -> &mut [u8] {
        if self.1.is_null() {
            return &mut [];
        }
        // SAFETY: `2` bytes at `1` are ours (type invariant), borrowed
        // mutably through `self`.
        unsafe { core::slice::from_raw_parts_mut(self.1, self.2) }
    }

    /// Routes the packet, pushes the UDP and IP headers, writes the ICRC
    /// and sends it.
    pub(crate) fn send(self, av: &AddressVector, sport: u16, counters: &Counters) -> Result {
        let ipv6 = av.network == NetworkType::Ipv6;
        let mut l3: *mut u8 = null_mut();
        let mut l3_len: u32 = 0;
        // SAFETY: we own the skb; the GIDs are 16 bytes.
        let err = unsafe {
            sys::rroce_helper_tx_prepare(
                self.0.as_ptr(),
                ipv6,
                av.sgid.as_ptr(),
                av.dgid.as_ptr(),
                sport,
                av.traffic_class,
                if av.hop_limit == 0 { 64 } else { av.hop_limit },
                &mut l3,
                &mut l3_len,
            )
        };
        if err != 0 {
            counters.inc(Counter::NoRoute);
            return Err(Error::from_errno(err));
        }
        // SAFETY: the helper returned the skb's linear network header
        // through its tail, which we own.
        let pkt = unsafe { core::slice::from_raw_parts_mut(l3, l3_len as usize) };
        if icrc::generate(pkt).is_err() {
            return Err(EINVAL);
        }
        let skb = self.0.as_ptr();
        core::mem::forget(self);
        counters.inc(Counter::SentPkts);
        // SAFETY: consumes the skb, whatever the result.
        let _ = unsafe { sys::rroce_helper_tx_send(skb) };
        Ok(())
    }
}

/// Allocates an skb for a RoCEv2 packet of `len` bytes (BTH through ICRC)
/// on `ndev`; the caller fills `data`.
pub(crate) fn alloc(ndev: *mut sys::net_device, ipv6: bool, len: usize) -> Option<Skb> {
    let len32 = u32::try_from(len).ok()?;
    let mut data: *mut u8 = null_mut();
    // SAFETY: `ndev` is live (the callers hold the RCU read lock and found
    // it in the device).
    let skb = unsafe { sys::rroce_helper_tx_alloc(ndev, ipv6, len32, &mut data) };
    let skb = NonNull::new(skb)?;
    // INVARIANT: the helper put `len` bytes at `data`, owned with the skb.
    Some(Skb(skb, data, len))
}

/// The UDP sockets of one network namespace.
///
/// # Invariants
///
/// `users == 0` for a free slot; otherwise `net` is the namespace of
/// `users` live rroce devices and the sockets are ours.
#[derive(Clone, Copy)]
struct NetSocks {
    net: usize,
    sock4: usize,
    sock6: usize,
    users: u32,
}

const MAX_NETS: usize = 64;

struct SockTable {
    slots: [NetSocks; MAX_NETS],
}

kernel::sync::global_lock! {
    // SAFETY: `init` runs in module init before any device exists.
    unsafe(uninit) static SOCKS: Mutex<SockTable> = SockTable {
        slots: [NetSocks { net: 0, sock4: 0, sock6: 0, users: 0 }; MAX_NETS],
    };
}

/// Initializes the socket table (module init).
pub(crate) fn init() {
    // SAFETY: called once, first.
    unsafe { SOCKS.init() };
}

/// The tunnel's receive callback.
///
/// # Safety
///
/// Called by the UDP stack in softirq context with an skb we now own, whose
/// data starts at the UDP header.
unsafe extern "C" fn encap_rcv(_sk: *mut sys::sock, skb: *mut sys::sk_buff) -> c_int {
    let Some(skb) = NonNull::new(skb) else {
        return 0;
    };
    // INVARIANT: the stack passed us the skb.
    let skb = Skb(skb, null_mut(), 0);
    receive(skb);
    0
}

fn receive(skb: Skb) {
    let mut ndev = null_mut();
    let mut l3: *mut u8 = null_mut();
    let mut l3_len: u32 = 0;
    // SAFETY: we own the skb.
    if unsafe { sys::rroce_helper_rx_skb(skb.0.as_ptr(), &mut ndev, &mut l3, &mut l3_len) } != 0 {
        return;
    }
    // SAFETY: the linear packet from the network header to the tail,
    // owned with the skb, which outlives this borrow.
    let pkt = unsafe { core::slice::from_raw_parts(l3, l3_len as usize) };
    let Some((ip_len, dst)) = ip_info(pkt) else {
        return;
    };
    // A packet to a local address arrives on `lo`: find the device by the
    // destination GID then.
    let ibdev = crate::link::device_of_netdev(ndev).or_else(|| {
        // SAFETY: the receiving netdev is live in softirq context.
        let net = unsafe { net_of(ndev) };
        crate::link::device_of_gid(net, &dst)
    });
    let Some(ibdev) = ibdev else {
        return;
    };
    // SAFETY: referenced above, until the `ib_device_put` below.
    let dev = unsafe { RroceDev::from_ib(ibdev) };
    dev.counters.inc(Counter::RcvdPkts);
    match roce_payload(pkt, ip_len) {
        Ok(roce) => crate::qp::receive(dev, roce, &pkt[..ip_len]),
        Err(c) => dev.counters.inc(c),
    }
    // SAFETY: drops the reference `device_of_*` took.
    unsafe { sys::ib_device_put(ibdev) };
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

/// Takes a reference on the sockets of `ndev`'s namespace, creating them
/// for its first device.
///
/// # Safety
///
/// `ndev` is a live netdev.
pub(crate) unsafe fn get(ndev: *mut sys::net_device) -> Result {
    // SAFETY: live per the caller.
    let net = unsafe { sys::rroce_helper_dev_net(ndev) } as usize;
    let mut t = SOCKS.lock();
    if let Some(s) = t.slots.iter_mut().find(|s| s.users != 0 && s.net == net) {
        s.users += 1;
        return Ok(());
    }
    let slot = t.slots.iter_mut().find(|s| s.users == 0).ok_or(ENOSPC)?;
    let mut err: c_int = 0;
    // SAFETY: `net` is live (the netdev holds it); `encap_rcv` is static.
    let sock4 = unsafe {
        sys::rroce_helper_udp_sock(net as *mut sys::net, false, Some(encap_rcv), &mut err)
    };
    if sock4.is_null() {
        pr_err!(
            "cannot bind UDP port 4791 in this network namespace ({}): is rdma_rxe using it?\n",
            err
        );
        return Err(Error::from_errno(err));
    }
    // SAFETY: as above.
    let sock6 = unsafe {
        sys::rroce_helper_udp_sock(net as *mut sys::net, true, Some(encap_rcv), &mut err)
    };
    if sock6.is_null() {
        pr_err!(
            "cannot bind UDP/IPv6 port 4791 in this network namespace ({})\n",
            err
        );
        // SAFETY: created above, unused.
        unsafe { sys::rroce_helper_udp_sock_release(sock4) };
        return Err(Error::from_errno(err));
    }
    // INVARIANT: a fresh slot with one user and our sockets.
    *slot = NetSocks {
        net,
        sock4: sock4 as usize,
        sock6: sock6 as usize,
        users: 1,
    };
    Ok(())
}

/// Drops a reference taken by [`get`] for a device on a netdev of `net`.
pub(crate) fn put(net: usize) {
    let mut t = SOCKS.lock();
    let Some(s) = t.slots.iter_mut().find(|s| s.users != 0 && s.net == net) else {
        return;
    };
    s.users -= 1;
    if s.users == 0 {
        let (s4, s6) = (s.sock4, s.sock6);
        *s = NetSocks {
            net: 0,
            sock4: 0,
            sock6: 0,
            users: 0,
        };
        // SAFETY: ours (type invariant), no longer listed.
        unsafe {
            sys::rroce_helper_udp_sock_release(s6 as *mut sys::sock);
            sys::rroce_helper_udp_sock_release(s4 as *mut sys::sock);
            // Receive callbacks still running finish before the module can
            // go away.
            sys::rroce_helper_synchronize_rcu();
        }
    }
}

/// The namespace key [`put`] takes for `ndev`.
///
/// # Safety
///
/// `ndev` is a live netdev.
pub(crate) unsafe fn net_of(ndev: *mut sys::net_device) -> usize {
    // SAFETY: live per the caller.
    unsafe { sys::rroce_helper_dev_net(ndev) as usize }
}
