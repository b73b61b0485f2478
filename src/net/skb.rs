// SPDX-License-Identifier: GPL-2.0

//! Socket buffers: an owned skb, allocated for a RoCEv2 packet (or a UDP
//! GSO run of them) and sent after the route lookup with its ICRC written.

use core::ptr::{null_mut, NonNull};

use kernel::prelude::*;

use crate::{
    ah::{AddressVector, NetworkType},
    counters::{Counter, Counters},
    engine::{
        gso, icrc,
        scatter::{Scatter, MAX_PIECES},
        wire,
    },
    rdma::sys,
};

/// An skb owned by rroce; freed on drop unless sent.
///
/// A new one holds one RoCEv2 packet ([`alloc`]) or, out of a netdev that
/// takes UDP GSO, a run of packets of one size (the last may be shorter)
/// that the IP stack carries as one ([`alloc_gso`], [`Skb::append`]): the
/// first packet in the skb's own data, each other one an skb of its frag
/// list, so that cutting the run into packets again copies no payload.
///
/// A packet's bytes lie in its skb's linear data, or, sent without a copy,
/// its headers there and the rest in page fragments: its payload in pages
/// of an MR, then its pad and ICRC in a fragment of its own
/// ([`Skb::attach`]).
///
/// # Invariants
///
/// `skb` points at an skb nobody else owns; `data` is null (a received
/// packet) or points at `cap` bytes of its linear data, owned with it.
/// `pending` is null or an skb nobody else owns either, with `pending_lin`
/// bytes of linear data at `pending_data`, of a packet of `pending_len`
/// bytes. `run.tail` is null or the last skb of `skb`'s frag list, with
/// `run.tail_len` bytes of linear data at `run.tail_data`. `frags` counts
/// the bytes of page fragments given to the packet being built (the pending
/// one, or the skb's own first one), and `incomplete` says an
/// [`Skb::attach`] to it failed; `paged` says whether any packet of it
/// was given page fragments (if not, none has any). A packet held (a run's committed ones, a
/// single one unless `incomplete`) that has page fragments ends with one of
/// its own of at least an ICRC's length, from [`Skb::attach`].
pub(crate) struct Skb {
    skb: NonNull<sys::sk_buff>,
    data: *mut u8,
    cap: usize,
    run: Run,
    pending: *mut sys::sk_buff,
    pending_data: *mut u8,
    pending_len: usize,
    pending_lin: usize,
    frags: usize,
    incomplete: bool,
    paged: bool,
}

/// Bytes of a page that a packet carries as a page fragment
/// ([`Skb::attach`]).
#[derive(Clone, Copy)]
pub(crate) struct PagePiece {
    pub(crate) page: *mut sys::page,
    pub(crate) off: u32,
    pub(crate) len: u32,
}

/// The packets a new skb holds.
#[derive(Clone, Copy)]
struct Run {
    /// The segment size of a GSO run (its first packet's length); 0 for a
    /// single packet.
    seg: usize,
    /// Packets held.
    pkts: u32,
    /// The most packets the run may hold.
    max: u32,
    /// Whether another packet may join: every packet so far is a full
    /// segment (a shorter one ends the run).
    open: bool,
    /// Whether its packets go over IPv6.
    ipv6: bool,
    /// The last skb of the frag list (null: none yet), and its packet.
    tail: *mut sys::sk_buff,
    tail_data: *mut u8,
    tail_len: usize,
}

// SAFETY: an owned skb may be sent and freed from any context.
unsafe impl Send for Skb {}

/// Packets freed with interrupts off by one task, counted in KUnit builds:
/// a QP's packets are freed after its lock is let go (see
/// `transport::state::Unsent`), and a test holds its own calls to that.
#[cfg(CONFIG_KUNIT)]
pub(crate) mod freed_irqs_off {
    use crate::rdma::sys;
    use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
    use kernel::task::Task;

    /// The task whose frees count (0: none).
    static TASK: AtomicUsize = AtomicUsize::new(0);
    /// Its packets freed with interrupts off since [`watch`].
    static COUNT: AtomicU64 = AtomicU64::new(0);

    /// Counts the calling task's frees with interrupts off from now on,
    /// from zero.
    pub(crate) fn watch() {
        COUNT.store(0, Ordering::Relaxed);
        TASK.store(Task::current_raw() as usize, Ordering::Release);
    }

    /// Stops counting; returns the count.
    pub(crate) fn unwatch() -> u64 {
        TASK.store(0, Ordering::Release);
        COUNT.load(Ordering::Relaxed)
    }

    /// A packet is being freed.
    pub(super) fn note() {
        let t = TASK.load(Ordering::Acquire);
        // SAFETY: plain query of the current context.
        if t != 0 && t == Task::current_raw() as usize && unsafe { sys::rroce_helper_irqs_off() } {
            COUNT.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Packet allocations made to fail, in KUnit builds (see the module).
#[cfg(CONFIG_KUNIT)]
pub(crate) mod fail_alloc;

impl Drop for Skb {
    fn drop(&mut self) {
        #[cfg(CONFIG_KUNIT)]
        freed_irqs_off::note();
        self.free_pending();
        // SAFETY: owned (type invariant); its frag list goes with it.
        unsafe { sys::rroce_helper_kfree_skb(self.skb.as_ptr()) };
    }
}

/// The most packets one GSO run carries.
const GSO_MAX_PKTS: usize = 32;

/// The most page fragments of a received packet read in place (one piece
/// is its linear part); an skb with more is linearized.
const MAX_FRAGS: usize = MAX_PIECES - 1;

impl Skb {
    /// An owned skb holding `cap` bytes at `data`, as `run` says.
    fn new(skb: NonNull<sys::sk_buff>, data: *mut u8, cap: usize, run: Run) -> Self {
        Skb {
            skb,
            data,
            cap,
            run,
            pending: null_mut(),
            pending_data: null_mut(),
            pending_len: 0,
            pending_lin: 0,
            frags: 0,
            incomplete: false,
            paged: false,
        }
    }

    /// Frees the packet appended but not committed, if any.
    fn free_pending(&mut self) {
        if !self.pending.is_null() {
            // SAFETY: owned, not chained (type invariant); cleared, so
            // freed once.
            unsafe { sys::rroce_helper_kfree_skb(self.pending) };
            self.pending = null_mut();
            self.pending_data = null_mut();
            self.frags = 0;
            self.incomplete = false;
        }
    }

    /// Takes ownership of `skb`, a received packet.
    ///
    /// # Safety
    ///
    /// Nobody else owns `skb` (the stack handed it over).
    pub(super) unsafe fn from_received(skb: NonNull<sys::sk_buff>) -> Self {
        // INVARIANT: owned per the caller; no packet bytes borrowed.
        Skb::new(skb, null_mut(), 0, Run::single(false))
    }

    /// Frees a received packet that was used: `consume_skb`, which the
    /// kernel's drop accounting does not count as a drop.
    pub(super) fn consume(self) {
        let skb = self.skb.as_ptr();
        core::mem::forget(self);
        // SAFETY: owned (type invariant); `self` is forgotten, so freed
        // once (a received packet has no pending one).
        unsafe { sys::rroce_helper_consume_skb(skb) };
    }

    /// Calls `f` with a received packet (data at its UDP header) from its
    /// network header to its end, read where the skb holds it, and the
    /// netdev it arrived on: its linear part, into which every RoCE header
    /// is pulled first, then each page fragment (see
    /// `rroce_helper_rx_skb()`). `None` (and `f` not called) without
    /// memory or for fragments the host cannot read.
    pub(super) fn with_received<R>(
        &self,
        f: impl FnOnce(Scatter<'_>, *mut sys::net_device) -> R,
    ) -> Option<R> {
        let mut ndev = null_mut();
        let mut l3: *mut u8 = null_mut();
        let mut l3_len: u32 = 0;
        // Every RoCE header, after the UDP header, in the first piece.
        let pull = (icrc::UDP_HDR_LEN + wire::MAX_HDR_LEN) as u32;
        // SAFETY: we own the skb (type invariant).
        let frags = unsafe {
            sys::rroce_helper_rx_skb(
                self.as_ptr(),
                pull,
                MAX_FRAGS as u32,
                &mut ndev,
                &mut l3,
                &mut l3_len,
            )
        };
        let frags = usize::try_from(frags).ok()?;
        // SAFETY: the skb's linear part from the network header to the
        // tail, owned with the skb, which outlives this borrow.
        let first = unsafe { core::slice::from_raw_parts(l3, l3_len as usize) };
        if frags == 0 {
            // A linear packet (what veth delivers): no pieces to gather.
            return Some(f(Scatter::from_slice(first), ndev));
        }
        self.with_frags(first, frags, ndev, f)
    }

    /// [`Skb::with_received`] for a packet a receive thread took over:
    /// the same bytes, read the same way, without the netdev (a queued
    /// packet names none, see `rroce_helper_rxq_queue()`).
    pub(super) fn with_handed<R>(&self, f: impl FnOnce(Scatter<'_>) -> R) -> Option<R> {
        self.with_received(|pkt, _| f(pkt))
    }

    /// [`Skb::with_received`] for a packet with `n` page fragments after
    /// its linear part `first` (kept out of line: its arrays are not
    /// set up for linear packets).
    #[inline(never)]
    fn with_frags<R>(
        &self,
        first: &[u8],
        n: usize,
        ndev: *mut sys::net_device,
        f: impl FnOnce(Scatter<'_>, *mut sys::net_device) -> R,
    ) -> Option<R> {
        let n = n.min(MAX_FRAGS);
        let mut raw = [sys::rroce_piece {
            data: null_mut(),
            len: 0,
        }; MAX_FRAGS];
        // SAFETY: we own the skb (type invariant), which has `n` page
        // fragments (`rroce_helper_rx_skb()` said so, at most
        // `MAX_FRAGS`); `raw` has room for them.
        unsafe { sys::rroce_helper_rx_frags(self.as_ptr(), raw.as_mut_ptr(), n as u32) };
        let mut rest: [&[u8]; MAX_FRAGS] = [&[]; MAX_FRAGS];
        for (p, r) in rest.iter_mut().zip(raw.iter()).take(n) {
            if r.data.is_null() {
                continue;
            }
            // SAFETY: a page fragment of the skb, mapped, readable while
            // we own the skb, which outlives this borrow.
            *p = unsafe { core::slice::from_raw_parts(r.data, r.len as usize) };
        }
        let s = Scatter::new(first, rest.get(..n)?)?;
        Some(f(s, ndev))
    }

    /// The skb, still owned by `self`.
    pub(super) fn as_ptr(&self) -> *mut sys::sk_buff {
        self.skb.as_ptr()
    }

    /// The RoCEv2 packets it holds.
    pub(crate) fn packets(&self) -> u32 {
        self.run.pkts
    }

    /// Whether it is a GSO run (from [`alloc_gso`]).
    pub(crate) fn is_run(&self) -> bool {
        self.run.seg != 0
    }

    /// The packet bytes (BTH through ICRC) of a new single-packet skb from
    /// [`alloc`]; empty for a GSO run (see [`Skb::append`]).
    pub(crate) fn buf(&mut self) -> &mut [u8] {
        if self.data.is_null() || self.run.seg != 0 {
            return &mut [];
        }
        // SAFETY: `cap` bytes at `data` are ours (type invariant),
        // borrowed mutably through `self`.
        unsafe { core::slice::from_raw_parts_mut(self.data, self.cap) }
    }

    /// The bytes in the skb's linear data (BTH on: all of it, or the
    /// headers of one sent without a copy) of the last packet it holds, to
    /// be changed before [`Skb::send`] writes the ICRC; `None` for a
    /// received packet or an empty run.
    pub(crate) fn last_packet_mut(&mut self) -> Option<&mut [u8]> {
        if self.data.is_null() || self.run.pkts == 0 {
            return None;
        }
        let (at, len) = if self.run.seg == 0 || self.run.pkts == 1 {
            (self.data, self.cap)
        } else {
            (self.run.tail_data, self.run.tail_len)
        };
        if at.is_null() {
            return None;
        }
        // SAFETY: a single packet's or a run's first packet's `cap` bytes
        // at `data`, or its frag list's last skb's `tail_len` bytes at
        // `tail_data`: ours (type invariant), borrowed mutably through
        // `self`.
        Some(unsafe { core::slice::from_raw_parts_mut(at, len) })
    }

    /// Whether one more packet of `len` bytes may join this GSO run: it is
    /// open and not full, and `len` is its segment size (or, past the
    /// first packet, shorter).
    pub(crate) fn can_append(&self, len: usize) -> bool {
        let r = &self.run;
        r.seg != 0
            && r.open
            && r.pkts < r.max
            && len != 0
            && (len == r.seg || (r.pkts > 0 && len < r.seg))
    }

    /// Room for one more packet of `len` bytes at the end of a GSO run
    /// ([`Skb::can_append`]), `lin` of them in linear data (all, or the
    /// headers of a packet whose other bytes [`Skb::attach`] gives it): the
    /// run's own data for its first packet
    /// (which has room for `lin` bytes exactly, see [`alloc_gso`]), a new
    /// skb from `ndev` for the others; `None` if it may not join or without
    /// memory. Nothing joins before [`Skb::commit`].
    ///
    /// `ndev` is null or the live netdev the run was allocated for (as
    /// [`alloc`]).
    pub(crate) fn append(
        &mut self,
        ndev: *mut sys::net_device,
        len: usize,
        lin: usize,
    ) -> Option<&mut [u8]> {
        if !self.can_append(len) || self.data.is_null() || lin > len {
            return None;
        }
        if self.run.pkts == 0 {
            if lin != self.cap {
                return None;
            }
            self.frags = 0;
            self.incomplete = false;
            // SAFETY: `cap` bytes at `data` are ours (type invariant),
            // borrowed mutably through `self`.
            return Some(unsafe { core::slice::from_raw_parts_mut(self.data, lin) });
        }
        self.free_pending();
        let room = if lin < len { wire::MAX_HDR_LEN } else { 0 };
        let (skb, data) = alloc_raw(ndev, self.run.ipv6, lin, room)?;
        // INVARIANT: a new skb of ours with `lin` bytes at `data`, no page
        // fragments yet.
        self.pending = skb.as_ptr();
        self.pending_data = data;
        self.pending_len = len;
        self.pending_lin = lin;
        self.frags = 0;
        self.incomplete = false;
        // SAFETY: as just said, borrowed mutably through `self`.
        Some(unsafe { core::slice::from_raw_parts_mut(data, lin) })
    }

    /// The skb the packet being built goes into: the pending one of a run,
    /// or the skb itself (a single packet, a run's first).
    fn building(&self) -> *mut sys::sk_buff {
        if self.run.seg != 0 && self.run.pkts > 0 {
            self.pending
        } else {
            self.skb.as_ptr()
        }
    }

    /// Gives the packet being built (after [`alloc_headers`], or
    /// [`Skb::append`] with `lin` below its length) the bytes of `pages` as
    /// its next page fragments, each with a page reference of its own, then
    /// `tail` zeroed bytes of its own (its pad and ICRC trailer) as its
    /// last. `false` without memory or room for them: the packet is then
    /// incomplete and is neither committed nor sent.
    ///
    /// # Safety
    ///
    /// Each of `pages` is a live page with `off + len` bytes (the caller
    /// holds it for the call, e.g. pinned by an MR found inside the RCU
    /// read-side section the caller holds).
    pub(crate) unsafe fn attach(&mut self, pages: &[PagePiece], tail: usize) -> bool {
        let skb = self.building();
        if skb.is_null() || self.data.is_null() {
            return false;
        }
        // Until the trailer is in.
        self.incomplete = true;
        self.paged = true;
        for p in pages {
            // SAFETY: the skb is ours (type invariant), being built; the
            // page is live with those bytes (caller), and gets a reference
            // of the skb's own.
            if unsafe { sys::rroce_helper_skb_add_page(skb, p.page, p.off, p.len) } != 0 {
                return false;
            }
            self.frags = self.frags.saturating_add(p.len as usize);
        }
        let Ok(tail32) = u32::try_from(tail) else {
            return false;
        };
        if tail < icrc::ICRC_LEN {
            return false;
        }
        let mut at: *mut u8 = null_mut();
        // SAFETY: the skb is ours (type invariant), being built.
        if unsafe { sys::rroce_helper_skb_add_tail(skb, tail32, &mut at) } != 0 {
            return false;
        }
        // INVARIANT: its last fragment is its own trailer.
        self.frags = self.frags.saturating_add(tail);
        self.incomplete = false;
        true
    }

    /// The packet written into [`Skb::append`]'s bytes (and the page
    /// fragments given it), `len` bytes in all, joins the run; one shorter
    /// than the segment size ends it.
    pub(crate) fn commit(&mut self, len: usize) {
        if !self.can_append(len) {
            return;
        }
        let frags = core::mem::take(&mut self.frags);
        if core::mem::take(&mut self.incomplete) {
            return;
        }
        if self.run.pkts == 0 {
            if self.cap.checked_add(frags) == Some(len) {
                self.run.pkts = 1;
            }
            return;
        }
        if self.pending.is_null()
            || len != self.pending_len
            || self.pending_lin.checked_add(frags) != Some(len)
        {
            return;
        }
        // SAFETY: both ours (type invariant); `tail` is null or the last
        // of the head's frag list, which the pending skb joins (so it is
        // owned with the head from now on).
        unsafe { sys::rroce_helper_run_chain(self.skb.as_ptr(), self.run.tail, self.pending) };
        // INVARIANT: the chained skb is the frag list's last, its packet
        // the pending one's.
        self.run.tail = self.pending;
        self.run.tail_data = self.pending_data;
        self.run.tail_len = self.pending_lin;
        self.pending = null_mut();
        self.pending_data = null_mut();
        self.run.pkts = self.run.pkts.saturating_add(1);
        if len < self.run.seg {
            self.run.open = false;
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
        mut self,
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
        let g = self.run;
        if g.pkts == 0 || (g.seg == 0 && self.incomplete) {
            return Err(EINVAL);
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
            self.write_segment_icrcs(pkt, f)?;
        } else if self.paged && has_frags(self.skb.as_ptr()) {
            let crc = icrc::start_using(pkt, f).map_err(|_| EINVAL)?;
            finish_icrc_frags(self.skb.as_ptr(), crc)?;
        } else if icrc::generate_using(pkt, f).is_err() {
            return Err(EINVAL);
        }
        self.free_pending();
        let skb = self.skb.as_ptr();
        core::mem::forget(self);
        counters.add(Counter::SentPkts, u64::from(segs));
        // SAFETY: consumes the skb, whatever the result; its netdev is
        // live (above).
        let _ = unsafe { sys::rroce_helper_tx_send(skb) };
        Ok(())
    }

    /// Writes the ICRC of each packet of a GSO run whose first packet,
    /// after its IP and UDP headers, is `pkt` (the linear data from the
    /// network header), each for the headers segmentation gives it: the
    /// first packet's, with its own lengths and (IPv4) the run's
    /// identification plus its index ([`gso::segment_headers`]). Those
    /// headers are also written in front of each later packet, where the
    /// segmentation of a frag list expects them: one walk of the list, one
    /// source of the headers on the wire.
    fn write_segment_icrcs(&self, pkt: &mut [u8], f: icrc::Crc32Fn) -> Result {
        let hl = gso::headers_len(pkt).map_err(|_| EINVAL)?;
        let room = u32::try_from(hl).map_err(|_| EINVAL)?;
        let (hdr, first) = pkt.split_at_mut(hl);
        // The first packet is a whole segment (`Skb::append`).
        let paged = |skb| (self.paged && has_frags(skb)).then_some(skb);
        segment_icrc(
            hdr,
            0,
            first,
            self.run.seg,
            paged(self.skb.as_ptr()),
            None,
            f,
        )?;
        let mut next: *mut sys::sk_buff = null_mut();
        for i in 1..self.run.pkts {
            let mut at: *mut u8 = null_mut();
            let mut data: *mut u8 = null_mut();
            let mut len: u32 = 0;
            // SAFETY: the head is ours (type invariant) and `next` null or
            // a skb of its frag list.
            next = unsafe {
                sys::rroce_helper_run_next(
                    self.skb.as_ptr(),
                    next,
                    room,
                    &mut at,
                    &mut data,
                    &mut len,
                )
            };
            if next.is_null() || at.is_null() {
                return Err(EINVAL);
            }
            // SAFETY: the packet of a frag list skb we own with the head,
            // not otherwise borrowed.
            let body = unsafe { core::slice::from_raw_parts_mut(data, len as usize) };
            // SAFETY: the `hl` bytes of its headroom just in front of
            // `data` (the helper checked the headroom), so apart from
            // `body`; owned with it.
            let out = unsafe { core::slice::from_raw_parts_mut(at, hl) };
            let frags = paged(next);
            let total = match frags {
                // SAFETY: a plain read of a frag list skb we own; it has
                // no frag list of its own.
                Some(skb) => unsafe { sys::rroce_helper_skb_len(skb) as usize },
                None => body.len(),
            };
            segment_icrc(hdr, i, body, total, frags, Some(out), f)?;
        }
        Ok(())
    }
}

/// Writes the ICRC of segment `i` of a GSO packet whose IP and UDP headers
/// are `hdr`, for the headers segmentation gives it; with `out`, writes
/// those headers there too. The segment is the packet of `len` bytes whose
/// linear part (the BTH on) is `body`, the rest, with `frags`, that skb's
/// page fragments (a held packet's, see [`Skb`]).
fn segment_icrc(
    hdr: &[u8],
    i: u32,
    body: &mut [u8],
    len: usize,
    frags: Option<*mut sys::sk_buff>,
    out: Option<&mut [u8]>,
    f: icrc::Crc32Fn,
) -> Result {
    let mut h = [0u8; gso::MAX_HEADERS];
    let id = u16::try_from(i).map_err(|_| EINVAL)?;
    let out = out.unwrap_or(&mut h[..]);
    if frags.is_none() && len != body.len() {
        return Err(EINVAL);
    }
    let n = gso::segment_headers(hdr, id, len, out).map_err(|_| EINVAL)?;
    let hs = out.get(..n).ok_or(EINVAL)?;
    if let Some(skb) = frags {
        let crc = gso::start_icrc(hs, body, f).map_err(|_| EINVAL)?;
        return finish_icrc_frags(skb, crc);
    }
    gso::generate_icrc(hs, body, f).map_err(|_| EINVAL)?;
    Ok(())
}

/// Whether `skb`, one of ours being sent, has page fragments.
fn has_frags(skb: *mut sys::sk_buff) -> bool {
    // SAFETY: a plain read of an skb the caller owns.
    unsafe { sys::rroce_helper_nr_frags(skb) != 0 }
}

/// Feeds `crc`, which has taken a packet's bytes in the linear data of
/// `skb`, the bytes of its page fragments but the last four, and writes
/// the ICRC into those.
///
/// `skb` is a held packet's (see [`Skb`]) with page fragments: its last is
/// its own trailer.
fn finish_icrc_frags(skb: *mut sys::sk_buff, mut crc: icrc::Crc32) -> Result {
    // SAFETY: a plain read of an skb the caller owns.
    let n = unsafe { sys::rroce_helper_nr_frags(skb) } as usize;
    if n == 0 || n > MAX_FRAGS {
        return Err(EINVAL);
    }
    let mut raw = [sys::rroce_piece {
        data: null_mut(),
        len: 0,
    }; MAX_FRAGS];
    // SAFETY: the skb is the caller's, with `n` page fragments, at most
    // `MAX_FRAGS`; `raw` has room for them.
    unsafe { sys::rroce_helper_rx_frags(skb, raw.as_mut_ptr(), n as u32) };
    let (last, pages) = raw.get(..n).and_then(|r| r.split_last()).ok_or(EINVAL)?;
    for p in pages {
        if p.data.is_null() {
            return Err(EINVAL);
        }
        // SAFETY: a page fragment of the skb, mapped (no highmem: see
        // `rroce_helper_tx_zerocopy()`), readable while the caller owns the
        // skb; only the CRC routine reads it (its owner may write the page
        // meanwhile, which at worst makes the ICRC wrong and the packet
        // dropped, as the sender broke the rule not to).
        let bytes = unsafe { core::slice::from_raw_parts(p.data, p.len as usize) };
        crc.update(bytes);
    }
    if last.data.is_null() {
        return Err(EINVAL);
    }
    // SAFETY: the skb's last fragment is its own trailer (type invariant
    // of `Skb` for a held packet), mapped, written only here.
    let tail = unsafe { core::slice::from_raw_parts_mut(last.data, last.len as usize) };
    let (covered, trailer) = tail
        .split_last_chunk_mut::<{ icrc::ICRC_LEN }>()
        .ok_or(EINVAL)?;
    crc.update(covered);
    *trailer = icrc::to_wire(crc.finish());
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
    let (skb, data) = alloc_raw(ndev, ipv6, len, 0)?;
    // INVARIANT: the helper put `len` bytes at `data`, owned with the skb;
    // a single packet uses them all.
    Some(Skb::new(skb, data, len, Run::single(ipv6)))
}

/// [`alloc`] for a packet sent without a copy: `lin` bytes for its headers
/// ([`Skb::buf`]), the rest given as page fragments ([`Skb::attach`]).
pub(crate) fn alloc_headers(ndev: *mut sys::net_device, ipv6: bool, lin: usize) -> Option<Skb> {
    let (skb, data) = alloc_raw(ndev, ipv6, lin, wire::MAX_HDR_LEN)?;
    // INVARIANT: `lin` bytes at `data`, owned with the skb, no fragments.
    Some(Skb::new(skb, data, lin, Run::single(ipv6)))
}

/// Allocates an empty GSO run for up to `pkts` packets of `seg` bytes
/// (see [`alloc`]; [`Skb::append`] adds them), the first with `lin` of
/// them in linear data (`seg`, or the headers of one sent without a copy),
/// or `None` (no memory, a null `ndev`, or fewer than two packets).
pub(crate) fn alloc_gso(
    ndev: *mut sys::net_device,
    ipv6: bool,
    seg: usize,
    lin: usize,
    pkts: usize,
) -> Option<Skb> {
    let max = u32::try_from(pkts.min(GSO_MAX_PKTS)).ok()?;
    if max < 2 || seg == 0 || lin > seg {
        return None;
    }
    let room = if lin < seg { wire::MAX_HDR_LEN } else { 0 };
    let (skb, data) = alloc_raw(ndev, ipv6, lin, room)?;
    // INVARIANT: `lin` bytes at `data` for the first packet, owned with
    // the skb; no frag list yet.
    Some(Skb::new(
        skb,
        data,
        lin,
        Run {
            seg,
            pkts: 0,
            max,
            open: true,
            ipv6,
            tail: null_mut(),
            tail_data: null_mut(),
            tail_len: 0,
        },
    ))
}

impl Run {
    /// A single packet.
    fn single(ipv6: bool) -> Self {
        Run {
            seg: 0,
            pkts: 1,
            max: 1,
            open: false,
            ipv6,
            tail: null_mut(),
            tail_data: null_mut(),
            tail_len: 0,
        }
    }
}

/// An skb with `len` bytes of data for `ndev` (see [`alloc`]) and at
/// least `room` bytes of tailroom after them (where a receiver on this host
/// pulls the headers of a packet whose payload is in page fragments).
fn alloc_raw(
    ndev: *mut sys::net_device,
    ipv6: bool,
    len: usize,
    room: usize,
) -> Option<(NonNull<sys::sk_buff>, *mut u8)> {
    if ndev.is_null() {
        return None;
    }
    #[cfg(CONFIG_KUNIT)]
    if fail_alloc::take() {
        return None;
    }
    let len32 = u32::try_from(len).ok()?;
    let room32 = u32::try_from(room).ok()?;
    let mut data: *mut u8 = null_mut();
    // SAFETY: `ndev` is non-null, and live: the callers read it from the
    // device inside the RCU read-side section they still hold.
    let skb = unsafe { sys::rroce_helper_tx_alloc(ndev, ipv6, len32, room32, &mut data) };
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

/// A received packet, from its IP header to its end, read where the skb
/// holds it, and the netdev it arrived on, for as long as the tunnel's
/// receive callback runs.
///
/// # Invariants
///
/// `ndev` is the live netdev the packet arrived on (softirq context, for
/// `'a`).
pub(crate) struct Received<'a> {
    pkt: Scatter<'a>,
    ndev: *mut sys::net_device,
}

impl<'a> Received<'a> {
    /// The packet `pkt` that arrived on `ndev`.
    ///
    /// # Safety
    ///
    /// `ndev` is the live netdev the packet arrived on, for `'a`.
    pub(super) unsafe fn new(pkt: Scatter<'a>, ndev: *mut sys::net_device) -> Self {
        // INVARIANT: per the caller.
        Received { pkt, ndev }
    }

    /// The packet from the IP header to its end (which may hold padding
    /// after the UDP payload), in the skb's pieces: its first piece holds
    /// the IP, UDP and RoCE headers (or all the packet, if shorter).
    pub(crate) fn packet(&self) -> Scatter<'a> {
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

/// Checks run by KUnit.
#[cfg(CONFIG_KUNIT)]
pub(crate) mod selftest;
