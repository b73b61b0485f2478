// SPDX-License-Identifier: GPL-2.0

//! Socket buffers: an owned skb, allocated for a RoCEv2 packet (or a UDP
//! GSO run of them) and sent after the route lookup with its ICRC written.

use core::ptr::{null_mut, NonNull};

use kernel::prelude::*;

use crate::{
    ah::{AddressVector, NetworkType},
    counters::{Counter, Counters},
    engine::{gso, icrc},
    rdma::sys,
};

/// An skb owned by rroce; freed on drop unless sent.
///
/// A new one holds one RoCEv2 packet ([`alloc`]) or, out of a netdev that
/// takes UDP GSO, a run of packets of one size (the last may be shorter)
/// that the IP stack carries as one ([`alloc_gso`], [`Skb::append`]).
///
/// # Invariants
///
/// `skb` points at an skb nobody else owns; `data` is null (a received
/// packet) or points at `cap` bytes of its linear data, owned with it.
/// `gso.used <= cap`; for a single packet (`gso.seg == 0`) `used == cap`.
pub(crate) struct Skb {
    skb: NonNull<sys::sk_buff>,
    data: *mut u8,
    cap: usize,
    gso: Run,
}

/// The packets a new skb holds.
#[derive(Clone, Copy)]
struct Run {
    /// The segment size of a GSO run; 0 for a single packet.
    seg: usize,
    /// Bytes holding packets, from the start of the data.
    used: usize,
    /// Packets held.
    pkts: u32,
}

impl Run {
    /// Whether another packet may join a GSO run: every packet in it is a
    /// full segment (a shorter one ends the run).
    fn open(&self) -> bool {
        self.used.checked_rem(self.seg) == Some(0)
    }
}

// SAFETY: an owned skb may be sent and freed from any context.
unsafe impl Send for Skb {}

impl Drop for Skb {
    fn drop(&mut self) {
        // SAFETY: owned (type invariant).
        unsafe { sys::rroce_helper_kfree_skb(self.skb.as_ptr()) };
    }
}

/// The most packets one GSO run carries.
pub(crate) const GSO_MAX_PKTS: usize = 32;
/// The most bytes of packets one GSO run carries: with the headers and the
/// skb's shared info, its data stays within 16 KiB (an order-2 allocation;
/// 15 packets at MTU 1024, 3 at MTU 4096).
pub(crate) const GSO_MAX_BYTES: usize = 15 * 1040;

impl Skb {
    /// Takes ownership of `skb`, a received packet.
    ///
    /// # Safety
    ///
    /// Nobody else owns `skb` (the stack handed it over).
    pub(super) unsafe fn from_received(skb: NonNull<sys::sk_buff>) -> Self {
        // INVARIANT: owned per the caller; no packet bytes borrowed.
        Skb {
            skb,
            data: null_mut(),
            cap: 0,
            gso: Run {
                seg: 0,
                used: 0,
                pkts: 1,
            },
        }
    }

    /// Frees a received packet that was used: `consume_skb`, which the
    /// kernel's drop accounting does not count as a drop.
    pub(super) fn consume(self) {
        let skb = self.skb.as_ptr();
        core::mem::forget(self);
        // SAFETY: owned (type invariant); `self` is forgotten, so freed once.
        unsafe { sys::rroce_helper_consume_skb(skb) };
    }

    /// The skb, still owned by `self`.
    pub(super) fn as_ptr(&self) -> *mut sys::sk_buff {
        self.skb.as_ptr()
    }

    /// The RoCEv2 packets it holds.
    pub(crate) fn packets(&self) -> u32 {
        self.gso.pkts
    }

    /// Whether it is a GSO run (from [`alloc_gso`]).
    pub(crate) fn is_run(&self) -> bool {
        self.gso.seg != 0
    }

    /// The packet bytes (BTH through ICRC) of a new single-packet skb from
    /// [`alloc`]; empty for a GSO run (see [`Skb::append`]).
    pub(crate) fn buf(&mut self) -> &mut [u8] {
        if self.data.is_null() || self.gso.seg != 0 {
            return &mut [];
        }
        // SAFETY: `cap` bytes at `data` are ours (type invariant),
        // borrowed mutably through `self`.
        unsafe { core::slice::from_raw_parts_mut(self.data, self.cap) }
    }

    /// Room for one more packet of `len` bytes at the end of a GSO run:
    /// `None` unless the run is open, `len` fits its segment size and the
    /// skb has room. Nothing joins before [`Skb::commit`].
    pub(crate) fn append(&mut self, len: usize) -> Option<&mut [u8]> {
        let g = self.gso;
        if self.data.is_null() || !g.open() || len > g.seg || len == 0 {
            return None;
        }
        let end = g.used.checked_add(len)?;
        if end > self.cap {
            return None;
        }
        // SAFETY: `used..end` is within the `cap` bytes at `data` that are
        // ours (type invariant), borrowed mutably through `self`.
        Some(unsafe { core::slice::from_raw_parts_mut(self.data.add(g.used), len) })
    }

    /// The packet written into [`Skb::append`]'s `len` bytes joins the run;
    /// one shorter than the segment size ends it.
    pub(crate) fn commit(&mut self, len: usize) {
        let g = &mut self.gso;
        match g.used.checked_add(len) {
            Some(end) if g.open() && len <= g.seg && end <= self.cap => {
                g.used = end;
                g.pkts = g.pkts.saturating_add(1);
            }
            _ => {}
        }
    }

    /// Routes the packet out of `ndev`, pushes the UDP and IP headers,
    /// writes the ICRC and sends it. `ndev` is the device's netdev, read
    /// inside the RCU read-side section `_rcu` the caller holds across
    /// the call; a null `ndev` (the netdev is unregistering) drops the
    /// packet. A GSO run of more than one packet leaves as one UDP GSO
    /// packet, each segment's ICRC computed for the headers the
    /// segmentation gives it ([`gso`]).
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
        let g = self.gso;
        if g.pkts == 0 {
            return Err(EINVAL);
        }
        if g.seg != 0 {
            let used = u32::try_from(g.used).map_err(|_| EINVAL)?;
            // SAFETY: we own the skb; `used` is at most its data length.
            unsafe { sys::rroce_helper_skb_trim(self.skb.as_ptr(), used) };
        }
        let segs = if g.seg != 0 && g.pkts > 1 { g.pkts } else { 1 };
        let seg = u32::try_from(g.seg).map_err(|_| EINVAL)?;
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
                self.skb.as_ptr(),
                ndev,
                ipv6,
                av.sgid.as_ptr(),
                av.dgid.as_ptr(),
                sport,
                av.traffic_class,
                if av.hop_limit == 0 { 64 } else { av.hop_limit },
                route,
                seg,
                segs,
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
        let f = crate::rdma::icrc_crc32();
        if segs > 1 {
            write_segment_icrcs(pkt, g.seg, segs, f)?;
        } else if icrc::generate_using(pkt, f).is_err() {
            return Err(EINVAL);
        }
        let skb = self.skb.as_ptr();
        core::mem::forget(self);
        counters.add(Counter::SentPkts, u64::from(segs));
        // SAFETY: consumes the skb, whatever the result; its netdev is
        // live (above).
        let _ = unsafe { sys::rroce_helper_tx_send(skb) };
        Ok(())
    }
}

/// Writes the ICRC of each of the `segs` segments of `seg` bytes of the
/// GSO packet `pkt` (IP header through the last segment).
fn write_segment_icrcs(pkt: &mut [u8], seg: usize, segs: u32, f: icrc::Crc32Fn) -> Result {
    let hl = gso::headers_len(pkt).map_err(|_| EINVAL)?;
    let (hdr, body) = pkt.split_at_mut(hl);
    let payload = body.len();
    for i in 0..segs {
        let idx = usize::try_from(i).map_err(|_| EINVAL)?;
        let r = gso::segment_range(payload, seg, idx).ok_or(EINVAL)?;
        let mut h = [0u8; gso::MAX_HEADERS];
        let id = u16::try_from(i).map_err(|_| EINVAL)?;
        let n = gso::segment_headers(hdr, id, r.len(), &mut h).map_err(|_| EINVAL)?;
        let s = body.get_mut(r).ok_or(EINVAL)?;
        let hs = h.get(..n).ok_or(EINVAL)?;
        gso::generate_icrc(hs, s, f).map_err(|_| EINVAL)?;
    }
    Ok(())
}

/// Allocates an skb for a RoCEv2 packet of `len` bytes (BTH through ICRC),
/// with headroom for `ndev`; the caller fills `data`. `None` without
/// memory, or for a null `ndev` (the netdev is unregistering).
///
/// The skb does not name the netdev (`skb->dev` stays null, and no
/// reference is held): it may wait on the QP past the netdev's removal,
/// and [`Skb::send`] sets it from the netdev live then.
pub(crate) fn alloc(ndev: *mut sys::net_device, ipv6: bool, len: usize) -> Option<Skb> {
    let (skb, data) = alloc_raw(ndev, ipv6, len)?;
    // INVARIANT: the helper put `len` bytes at `data`, owned with the skb;
    // a single packet uses them all.
    Some(Skb {
        skb,
        data,
        cap: len,
        gso: Run {
            seg: 0,
            used: len,
            pkts: 1,
        },
    })
}

/// Allocates an empty GSO run for up to `pkts` packets of `seg` bytes
/// (see [`alloc`]; [`Skb::append`] adds them), or `None` (no memory, a null
/// `ndev`, or fewer than two packets).
pub(crate) fn alloc_gso(
    ndev: *mut sys::net_device,
    ipv6: bool,
    seg: usize,
    pkts: usize,
) -> Option<Skb> {
    let pkts = pkts.min(GSO_MAX_PKTS).min(GSO_MAX_BYTES.checked_div(seg)?);
    if pkts < 2 {
        return None;
    }
    let cap = seg.checked_mul(pkts)?;
    let (skb, data) = alloc_raw(ndev, ipv6, cap)?;
    // INVARIANT: `cap` bytes at `data`, owned with the skb, none used yet.
    Some(Skb {
        skb,
        data,
        cap,
        gso: Run {
            seg,
            used: 0,
            pkts: 0,
        },
    })
}

/// An skb with `len` bytes of data for `ndev` (see [`alloc`]).
fn alloc_raw(
    ndev: *mut sys::net_device,
    ipv6: bool,
    len: usize,
) -> Option<(NonNull<sys::sk_buff>, *mut u8)> {
    if ndev.is_null() {
        return None;
    }
    let len32 = u32::try_from(len).ok()?;
    let mut data: *mut u8 = null_mut();
    // SAFETY: `ndev` is non-null, and live: the callers read it from the
    // device inside the RCU read-side section they still hold.
    let skb = unsafe { sys::rroce_helper_tx_alloc(ndev, ipv6, len32, &mut data) };
    Some((NonNull::new(skb)?, data))
}

/// The most bytes of RoCEv2 packets one UDP GSO packet out of `ndev` may
/// carry (0: the netdev takes no UDP GSO, or `ndev` is null).
///
/// # Safety
///
/// `ndev` is null or a live netdev.
pub(crate) unsafe fn gso_max(ndev: *mut sys::net_device) -> usize {
    if ndev.is_null() {
        return 0;
    }
    // SAFETY: live per the caller.
    unsafe { sys::rroce_helper_netdev_gso_max(ndev) as usize }
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
