// SPDX-License-Identifier: GPL-2.0

//! Many RoCEv2 packets in one UDP GSO packet (`SKB_GSO_UDP_L4`).
//!
//! (rroce sends a run as a frag list, `SKB_GSO_FRAGLIST`: the first packet
//! in the skb, each other one in an skb of its own, so that segmentation
//! copies no payload. Its bytes, and what segmentation makes of them, are
//! those described here.)
//!
//! A GSO packet is one IP and UDP header followed by segments, each a
//! whole RoCEv2 packet (BTH through ICRC) of the segment size but the last,
//! which may be shorter. The IP stack goes through it once; whoever
//! segments it (the netdev, the stack before a netdev that cannot, or the
//! receiving UDP socket) gives segment `i` the headers of a packet of its
//! own: the IPv4 total length or IPv6 payload length and the UDP length of
//! its size, and (IPv4) the identification of the GSO packet plus `i`
//! (the kernel's `inet_gso_segment` without a fixed ID). The ICRC covers
//! those headers, so the sender writes each segment's ICRC over the
//! headers [`segment_headers`] rebuilds.

use super::icrc::{
    self, Crc32Fn, IcrcError, BTH_LEN, ICRC_LEN, IPV4_HDR_LEN, IPV6_HDR_LEN, MAX_PSEUDO_LEN,
    UDP_HDR_LEN,
};

/// The longest IP + UDP header of a RoCEv2 packet (IPv6).
pub const MAX_HEADERS: usize = IPV6_HDR_LEN + UDP_HDR_LEN;

/// Why a GSO packet's segment headers or ICRCs cannot be made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GsoError {
    /// Not an IPv4 header without options or an IPv6 header.
    NotIp,
    /// Shorter than its headers, or an output buffer too small.
    Truncated,
    /// A segment too short for a BTH and an ICRC, or longer than a UDP
    /// length can say.
    BadSegment,
}

/// The length of the IP and UDP headers at the start of `l3`: 28 (IPv4
/// without options) or 48 (IPv6 without extension headers).
pub fn headers_len(l3: &[u8]) -> Result<usize, GsoError> {
    let ip = match l3.first().map(|b| (b >> 4, b & 0x0f)) {
        Some((4, 5)) => IPV4_HDR_LEN,
        Some((6, _)) => IPV6_HDR_LEN,
        _ => return Err(GsoError::NotIp),
    };
    let len = ip + UDP_HDR_LEN;
    if l3.len() < len {
        return Err(GsoError::Truncated);
    }
    Ok(len)
}

/// Writes into `out` the IP and UDP headers segment `index` of `seg_len`
/// bytes (UDP payload) carries, made from the GSO packet's headers `hdr`
/// (at least [`headers_len`] bytes); returns their length. Every other
/// field is `hdr`'s, the IPv4 header checksum included (the ICRC masks it;
/// the stack recomputes it).
pub fn segment_headers(
    hdr: &[u8],
    index: u16,
    seg_len: usize,
    out: &mut [u8],
) -> Result<usize, GsoError> {
    let len = headers_len(hdr)?;
    let ip = len - UDP_HDR_LEN;
    let (src, dst) = match (hdr.get(..len), out.get_mut(..len)) {
        (Some(s), Some(d)) => (s, d),
        _ => return Err(GsoError::Truncated),
    };
    if seg_len < BTH_LEN + ICRC_LEN {
        return Err(GsoError::BadSegment);
    }
    let udp_len = seg_len
        .checked_add(UDP_HDR_LEN)
        .and_then(|n| u16::try_from(n).ok())
        .ok_or(GsoError::BadSegment)?;
    dst.copy_from_slice(src);
    if ip == IPV4_HDR_LEN {
        let total =
            u16::try_from(usize::from(udp_len) + IPV4_HDR_LEN).map_err(|_| GsoError::BadSegment)?;
        put16(dst, 2, total);
        let id = u16::from_be_bytes([src[4], src[5]]).wrapping_add(index);
        put16(dst, 4, id);
    } else {
        put16(dst, 4, udp_len);
    }
    put16(dst, ip + 4, udp_len);
    Ok(len)
}

/// Writes `v` big-endian at `buf[at..at + 2]` (in bounds: callers pass
/// offsets inside the headers they checked).
fn put16(buf: &mut [u8], at: usize, v: u16) {
    if let Some(b) = buf.get_mut(at..at + 2) {
        b.copy_from_slice(&v.to_be_bytes());
    }
}

/// Computes the ICRC of the segment `seg` (BTH through the 4-byte trailer,
/// whose contents are ignored) sent with the IP and UDP headers `hdrs`
/// (from [`segment_headers`]), writes it into the trailer and returns it:
/// the ICRC of the packet the segment becomes.
pub fn generate_icrc(hdrs: &[u8], seg: &mut [u8], f: Crc32Fn) -> Result<u32, IcrcError> {
    let truncated = IcrcError::Truncated {
        needed: BTH_LEN + ICRC_LEN,
        len: seg.len(),
    };
    let (covered, trailer) = seg.split_last_chunk_mut::<ICRC_LEN>().ok_or(truncated)?;
    let v = start_icrc(hdrs, covered, f)?.finish();
    *trailer = icrc::to_wire(v);
    Ok(v)
}

/// Starts the ICRC of a segment sent with the IP and UDP headers `hdrs`
/// (from [`segment_headers`]) whose first bytes are `head` (its BTH and
/// whatever follows it), all fed: feed the rest up to the trailer with
/// [`icrc::Crc32::update`]. For a segment whose payload lies elsewhere
/// (in pages sent without a copy).
pub fn start_icrc(hdrs: &[u8], head: &[u8], f: Crc32Fn) -> Result<icrc::Crc32, IcrcError> {
    let len = hdrs.len();
    let mut pseudo = [0u8; MAX_PSEUDO_LEN];
    let (bth, rest) = head.split_at_checked(BTH_LEN).ok_or(IcrcError::Truncated {
        needed: BTH_LEN,
        len: head.len(),
    })?;
    let ph = pseudo
        .get_mut(..len + BTH_LEN)
        .ok_or(IcrcError::Truncated {
            needed: len + BTH_LEN,
            len: MAX_PSEUDO_LEN,
        })?;
    ph[..len].copy_from_slice(hdrs);
    ph[len..].copy_from_slice(bth);
    let mut crc = icrc::start_using(ph, f)?;
    crc.update(rest);
    Ok(crc)
}

/// Deterministic, allocation-free checks, shared by the host tests and
/// KUnit.
#[cfg(any(test, CONFIG_KUNIT))]
pub mod selftest {
    use super::{generate_icrc, headers_len, segment_headers, GsoError, MAX_HEADERS};
    use crate::engine::icrc;

    const SEG: usize = 48;

    /// The byte range of segment `index` within `payload` bytes of UDP
    /// payload cut into `seg`-byte segments (as a capture shows a run);
    /// `None` past the last one.
    fn segment_range(payload: usize, seg: usize, index: usize) -> Option<core::ops::Range<usize>> {
        let start = index.checked_mul(seg)?;
        if start >= payload {
            return None;
        }
        Some(start..payload.min(start.checked_add(seg)?))
    }

    /// An IPv4 (or IPv6) GSO packet of three segments of a RoCEv2 SEND
    /// middle stream (the last 20 bytes shorter), each segment's BTH PSN
    /// its index, the payload bytes a pattern; the headers' lengths are
    /// the whole packet's, as the sender writes them.
    fn gso_packet(v6: bool, buf: &mut [u8; 48 + 3 * SEG]) -> usize {
        let ip = if v6 { 40 } else { 20 };
        let payload = 3 * SEG - 20;
        let total = ip + 8 + payload;
        buf.fill(0);
        if v6 {
            buf[0] = 0x60;
            buf[4..6].copy_from_slice(&((8 + payload) as u16).to_be_bytes());
            buf[6] = 17;
            buf[7] = 64;
            buf[8..24].copy_from_slice(&[0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
            buf[24..40].copy_from_slice(&[0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
        } else {
            buf[..20].copy_from_slice(&[
                0x45, 0, 0, 0, 0xff, 0xfe, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
            ]);
            buf[2..4].copy_from_slice(&(total as u16).to_be_bytes());
        }
        buf[ip..ip + 2].copy_from_slice(&0xc123u16.to_be_bytes());
        buf[ip + 2..ip + 4].copy_from_slice(&4791u16.to_be_bytes());
        buf[ip + 4..ip + 6].copy_from_slice(&((8 + payload) as u16).to_be_bytes());
        for i in 0..3 {
            let Some(r) = segment_range(payload, SEG, i) else {
                continue;
            };
            let s = &mut buf[ip + 8 + r.start..ip + 8 + r.end];
            s[0] = 0x01; // RC SEND middle
            s[2] = 0xff;
            s[3] = 0xff;
            s[7] = 0x11;
            s[11] = i as u8;
            let n = s.len();
            for (k, b) in s[12..n - 4].iter_mut().enumerate() {
                *b = (k as u8).wrapping_mul(7).wrapping_add(i as u8);
            }
        }
        total
    }

    /// Segment headers: lengths of the segment, IPv4 IDs counting up from
    /// the GSO packet's (wrapping), everything else unchanged.
    pub fn headers() -> Result<(), &'static str> {
        for v6 in [false, true] {
            let mut buf = [0u8; 48 + 3 * SEG];
            gso_packet(v6, &mut buf);
            let len = headers_len(&buf).map_err(|_| "headers_len")?;
            if len != if v6 { 48 } else { 28 } {
                return Err("header length");
            }
            let mut out = [0u8; MAX_HEADERS];
            for (i, seg_len) in [(0u16, SEG), (1, SEG), (2, SEG - 20)] {
                let n = segment_headers(&buf, i, seg_len, &mut out).map_err(|_| "segment")?;
                let h = &out[..n];
                let ip = n - 8;
                if u16::from_be_bytes([h[ip + 4], h[ip + 5]]) as usize != seg_len + 8 {
                    return Err("UDP length");
                }
                if v6 {
                    if u16::from_be_bytes([h[4], h[5]]) as usize != seg_len + 8 {
                        return Err("IPv6 payload length");
                    }
                } else {
                    if u16::from_be_bytes([h[2], h[3]]) as usize != seg_len + 28 {
                        return Err("IPv4 total length");
                    }
                    // 0xfffe + 2 wraps to 0x0000.
                    let want = 0xfffeu16.wrapping_add(i);
                    if u16::from_be_bytes([h[4], h[5]]) != want {
                        return Err("IPv4 identification");
                    }
                }
                for (k, (a, b)) in h.iter().zip(&buf[..n]).enumerate() {
                    let varies = if v6 {
                        matches!(k, 4 | 5) || k == ip + 4 || k == ip + 5
                    } else {
                        matches!(k, 2..=5) || k == ip + 4 || k == ip + 5
                    };
                    if !varies && a != b {
                        return Err("a field that is not a length or the ID changed");
                    }
                }
            }
        }
        Ok(())
    }

    /// Each segment's ICRC, written over the rebuilt headers, is the ICRC of
    /// the standalone packet the segment becomes (checked by the ordinary
    /// verifier over headers and segment laid out contiguously).
    pub fn icrc_of_each_segment() -> Result<(), &'static str> {
        for v6 in [false, true] {
            let mut buf = [0u8; 48 + 3 * SEG];
            let total = gso_packet(v6, &mut buf);
            let hl = headers_len(&buf).map_err(|_| "headers_len")?;
            let payload = total - hl;
            let (hdr, body) = buf.split_at_mut(hl);
            let mut prev = 0u32;
            for i in 0..3 {
                let r = segment_range(payload, SEG, i).ok_or("range")?;
                let mut h = [0u8; MAX_HEADERS];
                let n = segment_headers(hdr, i as u16, r.len(), &mut h).map_err(|_| "hdrs")?;
                let seg = &mut body[r.clone()];
                let v = generate_icrc(&h[..n], seg, icrc::crc32_le).map_err(|_| "generate")?;
                let mut pkt = [0u8; MAX_HEADERS + SEG];
                pkt[..n].copy_from_slice(&h[..n]);
                pkt[n..n + seg.len()].copy_from_slice(seg);
                icrc::verify(&pkt[..n + seg.len()]).map_err(|_| "segment ICRC")?;
                if i > 0 && v == prev {
                    return Err("two segments with one ICRC");
                }
                prev = v;
            }
            // A segment checked against the GSO packet's own headers (not
            // its own) fails.
            let r = segment_range(payload, SEG, 1).ok_or("range")?;
            let mut pkt = [0u8; MAX_HEADERS + SEG];
            pkt[..hl].copy_from_slice(hdr);
            pkt[hl..hl + r.len()].copy_from_slice(&body[r.clone()]);
            if icrc::verify(&pkt[..hl + r.len()]).is_ok() {
                return Err("a segment's ICRC ignores its headers");
            }
        }
        Ok(())
    }

    /// Segment arithmetic and what cannot be a segment.
    pub fn bounds() -> Result<(), &'static str> {
        if segment_range(100, 48, 2) != Some(96..100) || segment_range(96, 48, 2).is_some() {
            return Err("segment_range");
        }
        if segment_range(usize::MAX, usize::MAX, 2).is_some() {
            return Err("segment_range overflow");
        }
        let mut buf = [0u8; 48 + 3 * SEG];
        gso_packet(false, &mut buf);
        let mut out = [0u8; MAX_HEADERS];
        if segment_headers(&buf, 0, 15, &mut out) != Err(GsoError::BadSegment) {
            return Err("a segment without room for BTH and ICRC");
        }
        if segment_headers(&buf, 0, 65535, &mut out) != Err(GsoError::BadSegment) {
            return Err("a segment over the UDP length limit");
        }
        if segment_headers(&buf, 0, 48, &mut out[..20]) != Err(GsoError::Truncated) {
            return Err("a short output buffer");
        }
        if headers_len(&[0x46; 40]) != Err(GsoError::NotIp) || headers_len(&[0x45; 20]).is_ok() {
            return Err("headers_len accepts options or short headers");
        }
        let mut seg = [0u8; 15];
        if generate_icrc(&buf[..28], &mut seg, icrc::crc32_le).is_ok() {
            return Err("an ICRC for a segment without room");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn selftests() {
        selftest::headers().unwrap();
        selftest::icrc_of_each_segment().unwrap();
        selftest::bounds().unwrap();
    }
}
