// SPDX-License-Identifier: GPL-2.0

//! Checks of socket buffers, run by KUnit.

use super::{alloc, alloc_gso, null_mut, sys, NonNull, Skb};
use crate::engine::{icrc, wire};

/// A received packet is read where the skb holds it: whole in its
/// linear part, or with its UDP payload in page fragments (its RoCE
/// headers are pulled into the first piece, the rest stays in place),
/// where the ICRC checks and the packet parses as it does whole; a frag
/// list is linearized.
pub(crate) fn rx_pieces() -> Result<(), &'static str> {
    // SAFETY: plain query.
    let lo = unsafe { sys::rroce_helper_init_net_loopback() };
    let mut paged = false;
    for (_, pkt) in icrc::selftest::RXE_CAPTURED.iter() {
        let l3 = if pkt.first().is_some_and(|b| b >> 4 == 6) {
            40
        } else {
            20
        };
        let len = pkt.len();
        let udp = l3 + icrc::UDP_HDR_LEN;
        // (bytes in the linear part, fragment size, frag list)
        let rest = len.saturating_sub(udp);
        let cases = [
            (len, 4096, false),
            (udp, 4096, false),
            (udp, rest.div_ceil(16).max(1), false),
            (udp + 5, rest.div_ceil(16).max(3), false),
            (udp, 4096, true),
        ];
        for (linear, frag, list) in cases {
            // SAFETY: `len` bytes at `pkt`; the skb returned is ours.
            let raw = unsafe {
                sys::rroce_helper_test_rx_skb(
                    pkt.as_ptr(),
                    len as u32,
                    l3 as u32,
                    linear as u32,
                    frag as u32,
                    list,
                )
            };
            let raw = NonNull::new(raw).ok_or("test skb")?;
            // SAFETY: a new skb nobody else owns.
            let skb = unsafe { Skb::from_received(raw) };
            let r = skb.with_received(|s, ndev| -> Result<bool, &'static str> {
                if ndev != lo {
                    return Err("the netdev the packet arrived on");
                }
                if !s.eq_bytes(pkt) {
                    return Err("the pieces hold other bytes than the packet");
                }
                let head = (udp + wire::MAX_HDR_LEN).min(len);
                if s.head().len() < head {
                    return Err("the RoCE headers are not in the first piece");
                }
                let split = s.contiguous().is_none();
                if split != (linear < len && !list && head < len) {
                    return Err("linearized, or page fragments where there were none");
                }
                icrc::verify_scatter_using(s, icrc::crc32_le).map_err(|_| "ICRC in pieces")?;
                let roce = s.skip(udp).ok_or("UDP payload")?;
                let whole = pkt.get(udp..).ok_or("UDP payload")?;
                if wire::parse_scatter(roce, None) != wire::parse(whole, None) {
                    return Err("pieces parse differently");
                }
                Ok(split)
            });
            paged |= r.ok_or("no pieces")??;
        }
    }
    if !paged {
        return Err("no packet was read in pieces");
    }
    Ok(())
}

/// A packet sent from pages ([`Skb::attach`]: its headers in the
/// skb, its payload in page fragments, its pad and ICRC in one of its
/// own) holds the bytes of the packet it stands for and gets that
/// packet's ICRC: every captured rdma_rxe packet with a payload, rebuilt
/// with its payload cut in two pieces of one page, gets the ICRC
/// rdma_rxe sent with it. A packet with more pieces than fragments
/// left is refused, and not committed.
pub(crate) fn tx_pages() -> Result<(), &'static str> {
    use super::{alloc_headers, finish_icrc_frags, gso, PagePiece};
    use kernel::page::Page;
    // SAFETY: plain query.
    let lo = unsafe { sys::rroce_helper_init_net_loopback() };
    let page = Page::alloc_page(kernel::prelude::GFP_KERNEL).map_err(|_| "page")?;
    let pg = page.as_ptr().cast::<sys::page>();
    let mut tried = 0;
    for (_, pkt) in icrc::selftest::RXE_CAPTURED.iter() {
        let ipv6 = pkt.first().is_some_and(|b| b >> 4 == 6);
        let udp = if ipv6 { 40 } else { 20 } + icrc::UDP_HDR_LEN;
        let roce = pkt.get(udp..).ok_or("UDP payload")?;
        let Ok(p) = wire::parse(roce, None) else {
            continue;
        };
        let hdr = p.headers().info().hdr_len;
        let payload = p.payload().contiguous().ok_or("payload")?;
        if payload.len() < 2 {
            continue;
        }
        tried += 1;
        let tail = roce.len() - hdr - payload.len();
        // The payload in two pieces of the page, apart.
        let half = payload.len() / 2;
        let (a, b) = payload.split_at(half);
        let (at_a, at_b) = (100usize, 100 + half + 64);
        // SAFETY: both within the page (captured payloads are below
        // 2 KiB), which is ours.
        unsafe {
            page.write_raw(a.as_ptr(), at_a, a.len())
                .map_err(|_| "page write")?;
            page.write_raw(b.as_ptr(), at_b, b.len())
                .map_err(|_| "page write")?;
        }
        let pieces = [
            PagePiece {
                page: pg,
                off: at_a as u32,
                len: a.len() as u32,
            },
            PagePiece {
                page: pg,
                off: at_b as u32,
                len: b.len() as u32,
            },
        ];
        let mut skb = alloc_headers(lo, ipv6, hdr).ok_or("alloc_headers")?;
        let buf = skb.buf();
        if buf.len() != hdr {
            return Err("the linear part is the headers");
        }
        buf.copy_from_slice(roce.get(..hdr).ok_or("headers")?);
        // SAFETY: our page, live for the call (and after: the skb
        // takes references of its own).
        if !unsafe { skb.attach(&pieces, tail) } {
            return Err("attach");
        }
        // SAFETY: plain reads of an skb we own.
        let (len, frags) = unsafe {
            (
                sys::rroce_helper_skb_len(skb.as_ptr()) as usize,
                sys::rroce_helper_nr_frags(skb.as_ptr()),
            )
        };
        if len != roce.len() || frags != 3 {
            return Err("the packet's length, or its fragments");
        }
        let lin = skb.last_packet_mut().ok_or("last packet")?;
        let crc = gso::start_icrc(pkt.get(..udp).ok_or("headers")?, lin, icrc::crc32_le)
            .map_err(|_| "start_icrc")?;
        finish_icrc_frags(skb.as_ptr(), crc).map_err(|_| "finish_icrc_frags")?;
        // The bytes the packet holds, the ICRC among them.
        let mut raw = [sys::rroce_piece {
            data: null_mut(),
            len: 0,
        }; 3];
        // SAFETY: three fragments, room for three.
        unsafe { sys::rroce_helper_rx_frags(skb.as_ptr(), raw.as_mut_ptr(), 3) };
        let mut at = hdr;
        for r in raw {
            // SAFETY: a mapped fragment of the skb we own.
            let got = unsafe { core::slice::from_raw_parts(r.data, r.len as usize) };
            if roce.get(at..at + got.len()) != Some(got) {
                return Err("a fragment holds other bytes (or another ICRC) than the packet");
            }
            at += got.len();
        }
    }
    if tried == 0 {
        return Err("no captured packet with a payload");
    }
    // More pieces than fragments left beside the trailer's.
    let mut run = alloc_gso(lo, false, 64, 12, 2).ok_or("alloc_gso")?;
    run.append(lo, 64, 12).ok_or("append")?.fill(0);
    let one = [PagePiece {
        page: pg,
        off: 0,
        len: 1,
    }; 20];
    // SAFETY: as above.
    if unsafe { run.attach(&one[..], 4) } {
        return Err("more fragments than an skb has");
    }
    run.commit(64);
    if run.packets() != 0 {
        return Err("a refused packet was committed");
    }
    Ok(())
}

/// A GSO run holds its first packet in its own data and chains each
/// other one, in order, as an skb of its frag list; its first packet
/// is a full segment, a shorter one ends it, and it holds at most the
/// packets it was made for.
pub(crate) fn run_chain() -> Result<(), &'static str> {
    // SAFETY: init_net's loopback netdev lives as long as the kernel.
    let lo = unsafe { sys::rroce_helper_init_net_loopback() };
    let mut run = alloc_gso(lo, false, 64, 64, 4).ok_or("alloc_gso")?;
    if run.packets() != 0 || !run.is_run() {
        return Err("a new run holds no packet");
    }
    if run.can_append(40) || run.append(lo, 40, 40).is_some() {
        return Err("a run starts with a full segment");
    }
    for (i, len) in [(1u8, 64usize), (2, 64), (3, 40)] {
        let buf = run.append(lo, len, len).ok_or("append")?;
        if buf.len() != len {
            return Err("append gave the wrong room");
        }
        buf.fill(i);
        // Appended but not yet committed, it is not the last: the one
        // committed before it is (none before the first).
        let before = run.last_packet_mut().map(|p| (p.len(), p.first().copied()));
        let want = if i == 1 {
            None
        } else {
            Some((64, Some(i - 1)))
        };
        if before != want {
            return Err("an uncommitted packet became the last");
        }
        run.commit(len);
        // The packet just committed is the one a requester pass marks.
        let last = run.last_packet_mut().ok_or("no last packet")?;
        if last.len() != len || last.iter().any(|b| *b != i) {
            return Err("the last packet is the one committed last");
        }
    }
    if run.packets() != 3 || run.can_append(64) || run.can_append(8) {
        return Err("a shorter packet ends the run");
    }
    let mut next = null_mut();
    // IPv4 and UDP headers: room in front of each later packet.
    const ROOM: u32 = 28;
    for (i, want, room) in [(2u8, 64u32, ROOM), (3, 40, 0)] {
        let (mut at, mut data, mut len) = (null_mut(), null_mut(), 0u32);
        // SAFETY: the run owns its head, `next` is null or in its list.
        next = unsafe {
            sys::rroce_helper_run_next(run.as_ptr(), next, room, &mut at, &mut data, &mut len)
        };
        let placed = if room == 0 {
            at.is_null()
        } else {
            !at.is_null() && at.wrapping_add(ROOM as usize) == data
        };
        if !placed {
            return Err("the header room is just in front of the packet, if asked for");
        }
        if next.is_null() || len != want {
            return Err("the frag list holds the later packets, in order");
        }
        // SAFETY: `len` bytes of a frag list skb the run owns.
        let bytes = unsafe { core::slice::from_raw_parts(data, len as usize) };
        if bytes.iter().any(|b| *b != i) {
            return Err("a chained packet lost its bytes");
        }
    }
    let (mut at, mut data, mut len) = (null_mut(), null_mut(), 0u32);
    // SAFETY: as above.
    if !unsafe { sys::rroce_helper_run_next(run.as_ptr(), next, 0, &mut at, &mut data, &mut len) }
        .is_null()
    {
        return Err("the frag list ends after the last packet");
    }
    let mut full = alloc_gso(lo, false, 64, 64, 2).ok_or("alloc_gso")?;
    for _ in 0..2 {
        full.append(lo, 64, 64).ok_or("append")?.fill(0);
        full.commit(64);
    }
    if full.packets() != 2 || full.can_append(64) {
        return Err("a run holds at most the packets it was made for");
    }
    if alloc_gso(lo, false, 64, 64, 1).is_some() {
        return Err("a run of one packet");
    }
    let mut one = alloc(lo, false, 24).ok_or("alloc")?;
    one.buf().fill(5);
    if one
        .last_packet_mut()
        .is_none_or(|p| p.len() != 24 || p.iter().any(|b| *b != 5))
    {
        return Err("a single packet is its own last");
    }
    Ok(())
}
