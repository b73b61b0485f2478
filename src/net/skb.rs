// SPDX-License-Identifier: GPL-2.0

//! Socket buffers: an owned skb, allocated for a RoCEv2 packet and sent
//! after the route lookup with its ICRC written.

use core::ptr::{null_mut, NonNull};

use kernel::prelude::*;

use crate::{
    ah::{AddressVector, NetworkType},
    counters::{Counter, Counters},
    engine::icrc,
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
    /// Takes ownership of `skb`, a received packet.
    ///
    /// # Safety
    ///
    /// Nobody else owns `skb` (the stack handed it over).
    pub(super) unsafe fn from_received(skb: NonNull<sys::sk_buff>) -> Self {
        // INVARIANT: owned per the caller; no packet bytes borrowed.
        Skb(skb, null_mut(), 0)
    }

    /// Frees a received packet that was used: `consume_skb`, which the
    /// kernel's drop accounting does not count as a drop.
    pub(super) fn consume(self) {
        let skb = self.0.as_ptr();
        core::mem::forget(self);
        // SAFETY: owned (type invariant); `self` is forgotten, so freed once.
        unsafe { sys::rroce_helper_consume_skb(skb) };
    }

    /// The skb, still owned by `self`.
    pub(super) fn as_ptr(&self) -> *mut sys::sk_buff {
        self.0.as_ptr()
    }

    /// The packet bytes (BTH through ICRC) of a new skb from [`alloc`].
    pub(crate) fn buf(&mut self) -> &mut [u8] {
        if self.1.is_null() {
            return &mut [];
        }
        // SAFETY: `2` bytes at `1` are ours (type invariant), borrowed
        // mutably through `self`.
        unsafe { core::slice::from_raw_parts_mut(self.1, self.2) }
    }

    /// Routes the packet out of `ndev`, pushes the UDP and IP headers,
    /// writes the ICRC and sends it. `ndev` is the device's netdev, read
    /// inside the RCU read-side section `_rcu` the caller holds across
    /// the call; a null `ndev` (the netdev is unregistering) drops the
    /// packet.
    ///
    /// A queued skb names no netdev (see [`alloc`]): only here, with the
    /// netdev known live for the call, does `skb->dev` point at it.
    ///
    /// `route` is null or a QP's route cache, valid for the call, whose
    /// entries are routes to `av` (reset whenever the QP's path changes).
    pub(crate) fn send(
        self,
        ndev: *mut sys::net_device,
        _rcu: &kernel::sync::rcu::Guard,
        av: &AddressVector,
        sport: u16,
        route: *mut sys::rroce_route,
        counters: &Counters,
    ) -> Result {
        if ndev.is_null() {
            counters.inc(Counter::NoRoute);
            return Err(ENODEV);
        }
        let ipv6 = av.network == NetworkType::Ipv6;
        let mut l3: *mut u8 = null_mut();
        let mut l3_len: u32 = 0;
        // SAFETY: we own the skb; `ndev` was read from the device inside
        // the RCU read-side section the caller holds, and an unregistering
        // netdev is freed only after a grace period that follows its
        // clearing (NETDEV_UNREGISTER, then `synchronize_net`), so it is
        // live for this call; the GIDs are 16 bytes; `route` is null or a
        // live cache of routes to `av` (caller); interrupts are on (the
        // callers defer sends made with them off).
        let err = unsafe {
            sys::rroce_helper_tx_prepare(
                self.0.as_ptr(),
                ndev,
                ipv6,
                av.sgid.as_ptr(),
                av.dgid.as_ptr(),
                sport,
                av.traffic_class,
                if av.hop_limit == 0 { 64 } else { av.hop_limit },
                route,
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
        if icrc::generate_using(pkt, crate::rdma::icrc_crc32()).is_err() {
            return Err(EINVAL);
        }
        let skb = self.0.as_ptr();
        core::mem::forget(self);
        counters.inc(Counter::SentPkts);
        // SAFETY: consumes the skb, whatever the result; its netdev is
        // live (above).
        let _ = unsafe { sys::rroce_helper_tx_send(skb) };
        Ok(())
    }
}

/// Allocates an skb for a RoCEv2 packet of `len` bytes (BTH through ICRC),
/// with headroom for `ndev`; the caller fills `data`. `None` without
/// memory, or for a null `ndev` (the netdev is unregistering).
///
/// The skb does not name the netdev (`skb->dev` stays null, and no
/// reference is held): it may wait on the QP past the netdev's removal,
/// and [`Skb::send`] sets it from the netdev live then.
pub(crate) fn alloc(ndev: *mut sys::net_device, ipv6: bool, len: usize) -> Option<Skb> {
    if ndev.is_null() {
        return None;
    }
    let len32 = u32::try_from(len).ok()?;
    let mut data: *mut u8 = null_mut();
    // SAFETY: `ndev` is non-null, and live: the callers read it from the
    // device inside the RCU read-side section they still hold.
    let skb = unsafe { sys::rroce_helper_tx_alloc(ndev, ipv6, len32, &mut data) };
    let skb = NonNull::new(skb)?;
    // INVARIANT: the helper put `len` bytes at `data`, owned with the skb.
    Some(Skb(skb, data, len))
}

/// A received packet, from its IP header to its tail, and the netdev it
/// arrived on, for as long as the tunnel's receive callback runs.
///
/// # Invariants
///
/// `ndev` is the live netdev the packet arrived on (softirq context, for
/// `'a`).
pub(crate) struct Received<'a> {
    pkt: &'a [u8],
    ndev: *mut sys::net_device,
}

impl<'a> Received<'a> {
    /// The packet `pkt` that arrived on `ndev`.
    ///
    /// # Safety
    ///
    /// `ndev` is the live netdev the packet arrived on, for `'a`.
    pub(super) unsafe fn new(pkt: &'a [u8], ndev: *mut sys::net_device) -> Self {
        // INVARIANT: per the caller.
        Received { pkt, ndev }
    }

    /// The linear packet from the IP header to the tail (which may hold
    /// padding after the UDP payload).
    pub(crate) fn bytes(&self) -> &'a [u8] {
        self.pkt
    }

    /// The receiving netdev.
    pub(crate) fn netdev(&self) -> *mut sys::net_device {
        self.ndev
    }

    /// The receiving netdev's namespace key (see [`net_of`]).
    pub(crate) fn net(&self) -> usize {
        // SAFETY: the receiving netdev is live (type invariant).
        unsafe { net_of(self.ndev) }
    }
}

/// The namespace key `net::sock::put` takes for `ndev`.
///
/// # Safety
///
/// `ndev` is a live netdev.
pub(crate) unsafe fn net_of(ndev: *mut sys::net_device) -> usize {
    // SAFETY: live per the caller.
    unsafe { sys::rroce_helper_dev_net(ndev) as usize }
}
