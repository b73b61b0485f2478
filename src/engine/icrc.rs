// SPDX-License-Identifier: GPL-2.0

//! The RoCEv2 invariant CRC (ICRC).
//!
//! Every RoCEv2 packet ends with a 4-byte ICRC covering the parts of the
//! packet that no switch or router may change: the IP and UDP headers with
//! their variant fields replaced by ones, the transport headers, the payload
//! and the pad bytes (IBTA Annex A17, computed here exactly as
//! `drivers/infiniband/sw/rxe/rxe_icrc.c` does).
//!
//! The algorithm:
//!
//! 1. Start a CRC-32 (the Ethernet/zlib polynomial, reflected, `0xEDB88320`)
//!    from the state [`ICRC_SEED`] = `0xdebb20e3`. That is the state a CRC-32
//!    started from `0xffffffff` reaches after eight bytes of `0xff`, which
//!    stand for the masked InfiniBand local route header a RoCEv2 packet does
//!    not carry. Hence "`zlib.crc32(b'\xff' * 8 + pseudo_packet)`" computes
//!    the same value, which is how the known-answer vectors below were made.
//! 2. Feed a copy of the IP header, the UDP header and the 12-byte BTH with
//!    the variant fields set to all ones:
//!    IPv4 TOS, TTL and header checksum; IPv6 traffic class, flow label and
//!    hop limit; the UDP checksum; and the BTH byte holding FECN, BECN and
//!    the six reserved bits (`resv8a`).
//! 3. Feed everything after the BTH as is: extension headers, payload, pad.
//! 4. The ICRC is the complement of the final state. On the wire it is
//!    stored least significant byte first (like the Ethernet FCS, and like
//!    rxe does on little-endian machines): see [`to_wire`].
//!
//! The CRC-32 itself is table driven, slicing by 8; the tables are computed
//! at compile time.

use crate::engine::scatter::Scatter;
use core::fmt;

/// Length of the ICRC trailer.
pub const ICRC_LEN: usize = 4;

/// CRC-32 state after the eight `0xff` bytes of the masked LRH, starting from
/// `0xffffffff` (rxe's seed).
pub const ICRC_SEED: u32 = 0xdebb_20e3;

/// The reflected CRC-32 polynomial (IEEE 802.3).
const POLY: u32 = 0xedb8_8320;

/// Length of an IPv4 header without options.
pub(super) const IPV4_HDR_LEN: usize = 20;
/// Length of the fixed IPv6 header.
pub(super) const IPV6_HDR_LEN: usize = 40;
/// Length of the UDP header.
pub const UDP_HDR_LEN: usize = 8;
/// Length of the base transport header.
pub(super) const BTH_LEN: usize = 12;
/// IP protocol number of UDP.
const IPPROTO_UDP: u8 = 17;
/// Longest pseudo header: IPv6 + UDP + BTH.
pub(super) const MAX_PSEUDO_LEN: usize = IPV6_HDR_LEN + UDP_HDR_LEN + BTH_LEN;

/// Why an ICRC could not be computed or did not match.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IcrcError {
    /// The buffer is shorter than the headers (and trailer) it must hold.
    Truncated {
        /// Bytes needed.
        needed: usize,
        /// Bytes available.
        len: usize,
    },
    /// The IP version nibble is neither 4 nor 6.
    UnsupportedIpVersion(u8),
    /// An IPv4 header with options (IHL other than 5), which RoCEv2 does not
    /// use and rxe cannot checksum.
    Ipv4Options(u8),
    /// The IP payload is not UDP (IPv4 protocol or IPv6 next header).
    NotUdp(u8),
    /// The packet's ICRC differs from the computed one.
    Mismatch {
        /// ICRC computed over the packet.
        computed: u32,
        /// ICRC found in the packet's trailer.
        found: u32,
    },
}

impl fmt::Display for IcrcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::Truncated { needed, len } => {
                write!(f, "packet too short for its ICRC: {len} < {needed} bytes")
            }
            Self::UnsupportedIpVersion(v) => write!(f, "unsupported IP version {v}"),
            Self::Ipv4Options(ihl) => write!(f, "IPv4 header with options (IHL {ihl})"),
            Self::NotUdp(p) => write!(f, "IP payload is protocol {p}, not UDP"),
            Self::Mismatch { computed, found } => {
                write!(
                    f,
                    "ICRC mismatch: computed {computed:#010x}, found {found:#010x}"
                )
            }
        }
    }
}

/// Builds the slicing-by-8 tables: `TABLES[0]` is the classic byte-wise
/// table, `TABLES[k][i]` the CRC of byte `i` followed by `k` zero bytes.
const fn make_tables() -> [[u32; 256]; 8] {
    let mut t = [[0u32; 256]; 8];
    let mut i = 0;
    while i < 256 {
        // `i < 256`, so the conversion is lossless.
        let mut crc = i as u32;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ POLY
            } else {
                crc >> 1
            };
            bit += 1;
        }
        t[0][i] = crc;
        i += 1;
    }
    let mut k = 1;
    while k < 8 {
        let mut i = 0;
        while i < 256 {
            let prev = t[k - 1][i];
            t[k][i] = (prev >> 8) ^ t[0][(prev & 0xff) as usize];
            i += 1;
        }
        k += 1;
    }
    t
}

/// Slicing-by-8 CRC-32 tables (8 KiB, computed at compile time).
static TABLES: [[u32; 256]; 8] = make_tables();

/// Looks up `byte` in slicing table `T`.
#[inline(always)]
fn lookup<const T: usize>(byte: u8) -> u32 {
    TABLES[T][usize::from(byte)]
}

/// Advances a raw CRC-32 state over `data`, with no pre- or post-inversion:
/// the same contract as the kernel's `crc32_le(crc, p, len)`.
pub fn crc32_le(mut crc: u32, data: &[u8]) -> u32 {
    let (blocks, tail) = data.as_chunks::<8>();
    for &[b0, b1, b2, b3, b4, b5, b6, b7] in blocks {
        let [c0, c1, c2, c3] = (crc ^ u32::from_le_bytes([b0, b1, b2, b3])).to_le_bytes();
        crc = lookup::<7>(c0)
            ^ lookup::<6>(c1)
            ^ lookup::<5>(c2)
            ^ lookup::<4>(c3)
            ^ lookup::<3>(b4)
            ^ lookup::<2>(b5)
            ^ lookup::<1>(b6)
            ^ lookup::<0>(b7);
    }
    for &b in tail {
        let [c0, ..] = crc.to_le_bytes();
        crc = (crc >> 8) ^ lookup::<0>(c0 ^ b);
    }
    crc
}

/// A routine with [`crc32_le`]'s contract: the module passes the kernel's
/// (arch-accelerated where the kernel has that), the host uses this file's.
pub type Crc32Fn = fn(u32, &[u8]) -> u32;

/// An incremental CRC-32 for feeding a packet in pieces, for example the
/// headers from the skb's linear area and then each payload fragment.
///
/// Start an ICRC with [`start`], feed the rest with [`Crc32::update`] and
/// read the result with [`Crc32::finish`].
#[derive(Clone, Copy)]
pub struct Crc32 {
    state: u32,
    f: Crc32Fn,
}

impl Crc32 {
    /// A CRC in raw state `state` (e.g. `0xffffffff` for a plain CRC-32,
    /// [`ICRC_SEED`] for an ICRC), computed by [`crc32_le`].
    pub const fn with_state(state: u32) -> Self {
        Self::using(state, crc32_le)
    }

    /// A CRC in raw state `state`, computed by `f`.
    pub const fn using(state: u32, f: Crc32Fn) -> Self {
        Self { state, f }
    }

    /// Feeds `data`.
    pub fn update(&mut self, data: &[u8]) {
        self.state = (self.f)(self.state, data);
    }

    /// The raw state, as the kernel's `crc32_le()` would return it.
    pub const fn state(&self) -> u32 {
        self.state
    }

    /// The finished CRC: the complement of the state.
    pub const fn finish(&self) -> u32 {
        !self.state
    }
}

/// The ICRC's four trailer bytes as they appear on the wire.
pub const fn to_wire(icrc: u32) -> [u8; ICRC_LEN] {
    icrc.to_le_bytes()
}

/// The ICRC value held in the four trailer bytes `wire`.
pub const fn from_wire(wire: [u8; ICRC_LEN]) -> u32 {
    u32::from_le_bytes(wire)
}

/// Checks that `packet` starts with an IP header the ICRC is defined for and
/// returns the length of that IP header and of the whole IP + UDP + BTH
/// pseudo header.
fn pseudo_header_len(packet: &[u8]) -> Result<(usize, usize), IcrcError> {
    let first = *packet.first().ok_or(IcrcError::Truncated {
        needed: IPV4_HDR_LEN + UDP_HDR_LEN + BTH_LEN,
        len: 0,
    })?;
    let (ip_len, proto_at) = match first >> 4 {
        4 => {
            let ihl = first & 0x0f;
            if ihl != 5 {
                return Err(IcrcError::Ipv4Options(ihl));
            }
            (IPV4_HDR_LEN, 9)
        }
        6 => (IPV6_HDR_LEN, 6),
        v => return Err(IcrcError::UnsupportedIpVersion(v)),
    };
    let needed = ip_len + UDP_HDR_LEN + BTH_LEN;
    if packet.len() < needed {
        return Err(IcrcError::Truncated {
            needed,
            len: packet.len(),
        });
    }
    match packet.get(proto_at) {
        Some(&IPPROTO_UDP) => Ok((ip_len, needed)),
        Some(&p) => Err(IcrcError::NotUdp(p)),
        None => Err(IcrcError::Truncated {
            needed,
            len: packet.len(),
        }),
    }
}

/// Sets the variant fields of a copied IP + UDP + BTH pseudo header `ph`,
/// whose IP header is `ip_len` bytes long, to ones.
fn mask_variant_fields(ph: &mut [u8], ip_len: usize) {
    if ip_len == IPV4_HDR_LEN {
        // TOS, TTL, header checksum.
        for i in [1, 8, 10, 11] {
            set_ones(ph, i);
        }
    } else {
        // Traffic class (low nibble of byte 0, high nibble of byte 1), flow
        // label (rest of bytes 1..4), hop limit.
        if let Some(b) = ph.first_mut() {
            *b |= 0x0f;
        }
        for i in [1, 2, 3, 7] {
            set_ones(ph, i);
        }
    }
    // UDP checksum.
    set_ones(ph, ip_len + 6);
    set_ones(ph, ip_len + 7);
    // BTH FECN, BECN, resv6a: rxe's `bth->qpn |= ~BTH_QPN_MASK`.
    set_ones(ph, ip_len + UDP_HDR_LEN + 4);
}

/// Sets `buf[i]` to `0xff` if it exists.
fn set_ones(buf: &mut [u8], i: usize) {
    if let Some(b) = buf.get_mut(i) {
        *b = 0xff;
    }
}

/// Starts the ICRC of a packet: `headers` begins at the IP header and holds
/// at least the IP, UDP and base transport headers. Those are fed with their
/// variant fields masked; whatever follows the BTH in `headers` is fed as is.
/// Feed the remaining bytes up to the end of the pad (not the ICRC) with
/// [`Crc32::update`].
pub fn start(headers: &[u8]) -> Result<Crc32, IcrcError> {
    start_using(headers, crc32_le)
}

/// [`start`], with the CRC-32 routine `f`.
pub fn start_using(headers: &[u8], f: Crc32Fn) -> Result<Crc32, IcrcError> {
    let (ip_len, len) = pseudo_header_len(headers)?;
    let (pseudo, rest) = headers.split_at_checked(len).ok_or(IcrcError::Truncated {
        needed: len,
        len: headers.len(),
    })?;
    let mut copy = [0u8; MAX_PSEUDO_LEN];
    let ph = copy.get_mut(..len).ok_or(IcrcError::Truncated {
        needed: len,
        len: MAX_PSEUDO_LEN,
    })?;
    ph.copy_from_slice(pseudo);
    mask_variant_fields(ph, ip_len);
    let mut crc = Crc32::using(ICRC_SEED, f);
    crc.update(ph);
    crc.update(rest);
    Ok(crc)
}

/// Computes the ICRC of `packet`, which starts at the IP header and ends
/// after the pad bytes (without the ICRC trailer).
pub fn compute(packet: &[u8]) -> Result<u32, IcrcError> {
    compute_using(packet, crc32_le)
}

/// [`compute`], with the CRC-32 routine `f`.
pub fn compute_using(packet: &[u8], f: Crc32Fn) -> Result<u32, IcrcError> {
    Ok(start_using(packet, f)?.finish())
}

/// Splits a whole packet into the part the ICRC covers and its trailer.
fn split_trailer(packet: &[u8]) -> Result<(&[u8], [u8; ICRC_LEN]), IcrcError> {
    match packet.split_last_chunk::<ICRC_LEN>() {
        Some((covered, trailer)) => Ok((covered, *trailer)),
        None => Err(IcrcError::Truncated {
            needed: ICRC_LEN,
            len: packet.len(),
        }),
    }
}

/// Checks the ICRC of a received `packet`, which starts at the IP header and
/// ends with the 4-byte ICRC.
pub fn verify(packet: &[u8]) -> Result<(), IcrcError> {
    verify_using(packet, crc32_le)
}

/// [`verify`], with the CRC-32 routine `f`.
pub fn verify_using(packet: &[u8], f: Crc32Fn) -> Result<(), IcrcError> {
    let (covered, trailer) = split_trailer(packet)?;
    let computed = compute_using(covered, f)?;
    let found = from_wire(trailer);
    if computed == found {
        Ok(())
    } else {
        Err(IcrcError::Mismatch { computed, found })
    }
}

/// [`verify_using`], for a packet held in pieces: its IP, UDP and base
/// transport headers must lie in the first piece (the rest may lie
/// anywhere, the trailer too).
pub fn verify_scatter_using(packet: Scatter<'_>, f: Crc32Fn) -> Result<(), IcrcError> {
    if let Some(p) = packet.contiguous() {
        return verify_using(p, f);
    }
    let len = packet.len();
    let truncated = IcrcError::Truncated {
        needed: ICRC_LEN,
        len,
    };
    let covered_len = len.checked_sub(ICRC_LEN).ok_or(truncated)?;
    let (covered, trailer) = packet.split_at(covered_len).ok_or(truncated)?;
    let trailer = trailer.to_array::<ICRC_LEN>().ok_or(truncated)?;
    // The window's bytes in its first piece: `start_using` checks the
    // pseudo header is among them.
    let head = covered.head();
    let mut crc = start_using(head, f)?;
    for (_, piece) in covered.skip(head.len()).ok_or(truncated)?.chunks() {
        crc.update(piece);
    }
    let computed = crc.finish();
    let found = from_wire(trailer);
    if computed == found {
        Ok(())
    } else {
        Err(IcrcError::Mismatch { computed, found })
    }
}

/// Computes the ICRC of an outgoing `packet` (IP header through the 4-byte
/// trailer, whose contents are ignored), writes it into the trailer and
/// returns it.
pub fn generate(packet: &mut [u8]) -> Result<u32, IcrcError> {
    generate_using(packet, crc32_le)
}

/// [`generate`], with the CRC-32 routine `f`.
pub fn generate_using(packet: &mut [u8], f: Crc32Fn) -> Result<u32, IcrcError> {
    let len = packet.len();
    let (covered, trailer) =
        packet
            .split_last_chunk_mut::<ICRC_LEN>()
            .ok_or(IcrcError::Truncated {
                needed: ICRC_LEN,
                len,
            })?;
    let icrc = compute_using(covered, f)?;
    *trailer = to_wire(icrc);
    Ok(icrc)
}

/// Deterministic, allocation-free checks of the ICRC, shared by the host
/// tests and KUnit.
#[cfg(any(test, CONFIG_KUNIT))]
pub mod selftest {
    use super::{crc32_le, start, verify, Crc32, IcrcError, ICRC_SEED};

    include!("icrc_rxe_vectors.rs");

    /// Every known-answer and captured packet cut into three pieces at any
    /// two points after its pseudo header verifies as it does whole; a flipped
    /// payload bit is caught in pieces too; a pseudo header cut in two is
    /// refused.
    pub fn verifies_in_pieces() -> Result<(), &'static str> {
        use crate::engine::scatter::Scatter;
        let mut buf = [0u8; 2048];
        for (_, packet) in VECTORS.iter().chain(RXE_CAPTURED.iter()).take(12) {
            let v6 = packet.first().is_some_and(|b| b >> 4 == 6);
            let ph = if v6 { 40 + 8 + 12 } else { 20 + 8 + 12 };
            let n = packet.len();
            let step = if n > 200 { 7 } else { 1 };
            for a in (ph..=n).step_by(step) {
                for b in (a..=n).step_by(step) {
                    let (p0, tail) = packet.split_at_checked(a).ok_or("cut")?;
                    let (p1, p2) = tail.split_at_checked(b - a).ok_or("cut")?;
                    let rest: [&[u8]; 2] = [p1, p2];
                    let s = Scatter::new(p0, &rest).ok_or("scatter")?;
                    let f = crc32_le;
                    check(
                        super::verify_scatter_using(s, f).is_ok(),
                        "pieces do not verify",
                    )?;
                }
            }
            let flip = buf.get_mut(..n).ok_or("vector too long")?;
            flip.copy_from_slice(packet);
            if let Some(x) = flip.get_mut(ph) {
                *x ^= 0x10;
            }
            let (p0, p1) = flip.split_at_checked(ph + 1).ok_or("cut")?;
            let rest: [&[u8]; 1] = [p1];
            let s = Scatter::new(p0, &rest).ok_or("scatter")?;
            check(
                super::verify_scatter_using(s, crc32_le).is_err(),
                "a flipped bit verifies",
            )?;
            let (p0, p1) = packet.split_at_checked(ph - 1).ok_or("cut")?;
            let rest: [&[u8]; 1] = [p1];
            let s = Scatter::new(p0, &rest).ok_or("scatter")?;
            check(
                matches!(
                    super::verify_scatter_using(s, crc32_le),
                    Err(IcrcError::Truncated { .. })
                ),
                "split pseudo header accepted",
            )?;
        }
        Ok(())
    }

    /// Every packet the in-tree rdma_rxe sent in the test VM (IPv4 and IPv6;
    /// SEND, ACK, WRITE, READ request and response) carries the ICRC rroce
    /// computes, and its UDP payload parses.
    pub fn rxe_captured() -> Result<(), &'static str> {
        let (mut v4, mut v6) = (false, false);
        for (_name, packet) in RXE_CAPTURED {
            verify(packet).map_err(|_| "ICRC of an rdma_rxe packet does not match")?;
            let is_v6 = packet.first().is_some_and(|b| b >> 4 == 6);
            let udp = if is_v6 { 40 } else { 20 };
            v4 |= !is_v6;
            v6 |= is_v6;
            let payload = packet.get(udp + 8..).ok_or("captured packet too short")?;
            crate::engine::wire::parse(payload, None)
                .map_err(|_| "an rdma_rxe packet does not parse")?;
        }
        if !(v4 && v6) {
            return Err("the rdma_rxe capture lacks IPv4 or IPv6 packets");
        }
        Ok(())
    }

    /// Known-answer packets: complete IPv4/IPv6 packets, IP header through
    /// the trailing ICRC.
    ///
    /// The first five were built by hand and their ICRC computed with an
    /// independent implementation (Python's `zlib.crc32` over eight `0xff`
    /// bytes followed by the masked pseudo packet, see the module doc).
    /// `scapy-uc-send-only` is the UC packet of Scapy's RoCE regression test
    /// (`test/contrib/roce.uts`, ICRC `0x78f353f3`), and `connectx4lx-cnp` a
    /// congestion notification packet captured from a Mellanox ConnectX-4
    /// Lx, quoted in the same test: its ICRC was computed by hardware.
    ///
    /// Packets captured from rdma_rxe itself are in [`RXE_CAPTURED`] and
    /// checked by [`rxe_captured`].
    #[rustfmt::skip]
    pub const VECTORS: &[(&str, &[u8])] = &[
        // RC SEND ONLY, 13 bytes + 3 pad, SE, AckReq, BECN, ECN in TOS.
        ("ipv4-rc-send-only-pad3", &[
            0x45, 0x02, 0x00, 0x38, 0x12, 0x34, 0x40, 0x00, 0x40, 0x11, 0xa5, 0x2b,
            0xc0, 0xa8, 0x01, 0x01, 0xc0, 0xa8, 0x01, 0x02, 0xc0, 0x00, 0x12, 0xb7,
            0x00, 0x24, 0x00, 0x00, 0x04, 0xb0, 0xff, 0xff, 0x40, 0x00, 0x00, 0x11,
            0x80, 0x00, 0xab, 0xcd, 0x48, 0x65, 0x6c, 0x6c, 0x6f, 0x2c, 0x20, 0x52,
            0x6f, 0x43, 0x45, 0x76, 0x32, 0x00, 0x00, 0x00, 0xe3, 0xbd, 0x33, 0xa2,
        ]),
        // RC RDMA WRITE ONLY with immediate, 8 bytes, MigReq, FECN, TTL 1.
        ("ipv4-rc-write-only-imm", &[
            0x45, 0x00, 0x00, 0x44, 0x00, 0x00, 0x40, 0x00, 0x01, 0x11, 0x65, 0xa7,
            0x0a, 0x00, 0x00, 0x01, 0x0a, 0x00, 0x00, 0x02, 0xc0, 0x00, 0x12, 0xb7,
            0x00, 0x30, 0x00, 0x00, 0x0b, 0x40, 0x80, 0x01, 0x80, 0x00, 0x01, 0x23,
            0x80, 0xff, 0xff, 0xfe, 0x00, 0x00, 0x7f, 0x00, 0x12, 0x34, 0x56, 0x78,
            0xde, 0xad, 0xbe, 0xef, 0x00, 0x00, 0x00, 0x08, 0xca, 0xfe, 0xf0, 0x0d,
            0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x2a, 0x8a, 0x1a, 0x70,
        ]),
        // RC ACKNOWLEDGE, unlimited credits, MSN 7.
        ("ipv4-rc-ack", &[
            0x45, 0xb8, 0x00, 0x2c, 0xbe, 0xef, 0x40, 0x00, 0xff, 0x11, 0xa8, 0x16,
            0x0a, 0x00, 0x00, 0x02, 0x0a, 0x00, 0x00, 0x01, 0xc0, 0x00, 0x12, 0xb7,
            0x00, 0x18, 0x00, 0x00, 0x11, 0x00, 0xff, 0xff, 0x00, 0x00, 0x00, 0x42,
            0x00, 0x00, 0x01, 0x00, 0x1f, 0x00, 0x00, 0x07, 0x33, 0x26, 0xce, 0xa6,
        ]),
        // UD SEND ONLY with immediate to QP1 (GSI Q_Key), 5 bytes + 3 pad,
        // traffic class 0x6a, flow label 0x12345.
        ("ipv6-ud-send-only-imm", &[
            0x66, 0xa1, 0x23, 0x45, 0x00, 0x28, 0x11, 0x40, 0xfe, 0x80, 0x00, 0x00,
            0x00, 0x00, 0x00, 0x00, 0x02, 0x02, 0xb3, 0xff, 0xfe, 0x1e, 0x83, 0x29,
            0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x02, 0xb3, 0xff,
            0xfe, 0x1e, 0x83, 0x2a, 0xc0, 0x01, 0x12, 0xb7, 0x00, 0x28, 0x12, 0x34,
            0x65, 0xb0, 0xff, 0xff, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x05,
            0x80, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x07, 0x01, 0x02, 0x03, 0x04,
            0x61, 0x62, 0x63, 0x64, 0x65, 0x00, 0x00, 0x00, 0x66, 0xbc, 0xe0, 0x13,
        ]),
        // RC RDMA READ RESPONSE ONLY, 16 bytes, FECN + BECN, UDP checksum 0.
        ("ipv6-rc-read-resp-only", &[
            0x60, 0x00, 0x00, 0x00, 0x00, 0x28, 0x11, 0x01, 0x20, 0x01, 0x0d, 0xb8,
            0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01,
            0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
            0x00, 0x00, 0x00, 0x02, 0xc0, 0x01, 0x12, 0xb7, 0x00, 0x28, 0x00, 0x00,
            0x10, 0x00, 0xff, 0xff, 0xc0, 0xab, 0xcd, 0xef, 0x00, 0x7f, 0xff, 0xff,
            0x00, 0x00, 0x00, 0x10, 0xf0, 0xf1, 0xf2, 0xf3, 0xf4, 0xf5, 0xf6, 0xf7,
            0xf8, 0xf9, 0xfa, 0xfb, 0xfc, 0xfd, 0xfe, 0xff, 0xfa, 0x48, 0x61, 0x2a,
        ]),
        // UC SEND ONLY, 18 bytes + 2 pad, MigReq (Scapy regression test).
        ("scapy-uc-send-only", &[
            0x45, 0x01, 0x00, 0x40, 0x04, 0x78, 0x40, 0x00, 0x40, 0x11, 0xb4, 0xd5,
            0xc0, 0xa8, 0x00, 0x07, 0xc0, 0xa8, 0x00, 0x07, 0xc0, 0x00, 0x12, 0xb7,
            0x00, 0x2c, 0xac, 0xa2, 0x24, 0x60, 0xff, 0xff, 0x00, 0x00, 0x00, 0xd3,
            0x00, 0xcf, 0x17, 0x10, 0x46, 0x30, 0x81, 0x8b, 0xe2, 0x89, 0x35, 0xd9,
            0x0e, 0x9a, 0x95, 0x50, 0x54, 0x01, 0xbe, 0x88, 0x5e, 0x50, 0x00, 0x00,
            0x78, 0xf3, 0x53, 0xf3,
        ]),
        // CNP with BECN, captured from a ConnectX-4 Lx (hardware ICRC).
        ("connectx4lx-cnp", &[
            0x45, 0xc2, 0x00, 0x3c, 0x71, 0x8c, 0x40, 0x00, 0x40, 0x11, 0x91, 0x61,
            0x0a, 0x00, 0x11, 0x01, 0x0a, 0x00, 0x12, 0x01, 0x00, 0x00, 0x12, 0xb7,
            0x00, 0x28, 0x00, 0x00, 0x81, 0x00, 0xff, 0xff, 0x40, 0x00, 0x01, 0x18,
            0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
            0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x82, 0xfd, 0x00, 0x2a,
        ]),
    ];

    /// Fails with `msg` unless `cond` holds.
    fn check(cond: bool, msg: &'static str) -> Result<(), &'static str> {
        if cond {
            Ok(())
        } else {
            Err(msg)
        }
    }

    /// The CRC-32 core: the standard check value, and the ICRC seed being
    /// the state after eight `0xff` bytes.
    pub fn crc32_core() -> Result<(), &'static str> {
        let mut c = Crc32::with_state(!0);
        c.update(b"123456789");
        check(
            c.finish() == 0xcbf4_3926,
            "CRC-32 check value of \"123456789\"",
        )?;
        check(crc32_le(!0, &[0xff; 8]) == ICRC_SEED, "ICRC seed")?;
        // Slicing-by-8 and byte-wise paths agree whatever the split.
        let mut data = [0u8; 37];
        let mut x = 1u8;
        for b in data.iter_mut() {
            x = x.wrapping_mul(73).wrapping_add(11);
            *b = x;
        }
        let whole = crc32_le(ICRC_SEED, &data);
        for cut in [0, 1, 7, 8, 9, 20, 37] {
            let (a, b) = data.split_at(cut);
            check(crc32_le(crc32_le(ICRC_SEED, a), b) == whole, "split CRC")?;
        }
        Ok(())
    }

    /// Every entry of [`VECTORS`] verifies, whole and fed in pieces.
    pub fn known_answers() -> Result<(), &'static str> {
        for (_name, packet) in VECTORS {
            verify(packet).map_err(|_| "known-answer packet does not verify")?;
            let (covered, _) = packet
                .split_last_chunk::<4>()
                .ok_or("known-answer packet too short")?;
            let (head, tail) = covered.split_at_checked(60).unwrap_or((covered, &[]));
            let mut crc = start(head).map_err(|_| "start() failed")?;
            for piece in tail.chunks(5) {
                crc.update(piece);
            }
            let trailer = packet.last_chunk::<4>().ok_or("short packet")?;
            check(
                crc.finish() == u32::from_le_bytes(*trailer),
                "incremental ICRC differs",
            )?;
        }
        Ok(())
    }

    /// Variant fields do not change the ICRC; invariant ones do.
    pub fn masking() -> Result<(), &'static str> {
        let mut buf = [0u8; 128];
        for (_name, packet) in VECTORS {
            let pkt = buf
                .get_mut(..packet.len())
                .ok_or("vector longer than the test buffer")?;
            pkt.copy_from_slice(packet);
            let v6 = pkt.first().is_some_and(|b| b >> 4 == 6);
            let ip = if v6 { 40 } else { 20 };
            let variant: &[usize] = if v6 {
                &[1, 2, 3, 7, ip + 6, ip + 7, ip + 12]
            } else {
                &[1, 8, 10, 11, ip + 6, ip + 7, ip + 12]
            };
            for &i in variant {
                let b = pkt.get_mut(i).ok_or("index")?;
                *b ^= 0x5a;
            }
            if v6 {
                let b = pkt.first_mut().ok_or("index")?;
                *b ^= 0x0f;
            }
            verify(pkt).map_err(|_| "variant field changed the ICRC")?;
            // Invariant: source address, UDP port, opcode, QPN, PSN.
            for i in [12, ip, ip + 2, ip + 8, ip + 15, ip + 19] {
                let b = pkt.get_mut(i).ok_or("index")?;
                *b ^= 0x01;
                check(
                    matches!(verify(pkt), Err(IcrcError::Mismatch { .. })),
                    "invariant field did not change the ICRC",
                )?;
                let b = pkt.get_mut(i).ok_or("index")?;
                *b ^= 0x01;
            }
        }
        Ok(())
    }

    /// Generation writes what verification expects; malformed IP headers
    /// are refused, not misread.
    pub fn generate_and_reject() -> Result<(), &'static str> {
        let mut buf = [0u8; 128];
        let (_, packet) = VECTORS.first().ok_or("no vectors")?;
        let pkt = buf.get_mut(..packet.len()).ok_or("vector too long")?;
        pkt.copy_from_slice(packet);
        let (_, trailer) = pkt.split_last_chunk_mut::<4>().ok_or("short")?;
        *trailer = [0; 4];
        check(verify(pkt).is_err(), "zeroed trailer verifies")?;
        super::generate(pkt).map_err(|_| "generate failed")?;
        check(&*pkt == *packet, "generate wrote a different ICRC")?;

        check(
            super::compute(&[0x45; 20])
                == Err(IcrcError::Truncated {
                    needed: 40,
                    len: 20,
                }),
            "short IPv4",
        )?;
        check(
            matches!(super::compute(&[0x46; 60]), Err(IcrcError::Ipv4Options(6))),
            "IPv4 options",
        )?;
        check(
            matches!(
                super::compute(&[0x55; 60]),
                Err(IcrcError::UnsupportedIpVersion(5))
            ),
            "IP version 5",
        )?;
        check(
            matches!(super::compute(&[0x45; 60]), Err(IcrcError::NotUdp(0x45))),
            "not UDP",
        )?;
        check(
            matches!(super::compute(&[]), Err(IcrcError::Truncated { .. })),
            "empty",
        )?;
        check(
            matches!(verify(&[0x45, 0, 0]), Err(IcrcError::Truncated { .. })),
            "shorter than the trailer",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn selftests() {
        selftest::crc32_core().unwrap();
        selftest::known_answers().unwrap();
        selftest::masking().unwrap();
        selftest::generate_and_reject().unwrap();
        selftest::rxe_captured().unwrap();
        selftest::verifies_in_pieces().unwrap();
    }

    #[test]
    fn display() {
        let e = IcrcError::Mismatch {
            computed: 1,
            found: 2,
        };
        assert_eq!(
            e.to_string(),
            "ICRC mismatch: computed 0x00000001, found 0x00000002"
        );
    }

    /// Bit-at-a-time CRC-32, the reference for the table-driven one.
    fn crc32_bitwise(mut crc: u32, data: &[u8]) -> u32 {
        for &b in data {
            crc ^= u32::from(b);
            for _ in 0..8 {
                crc = if crc & 1 != 0 {
                    (crc >> 1) ^ POLY
                } else {
                    crc >> 1
                };
            }
        }
        crc
    }

    proptest! {
        #[test]
        fn table_matches_bitwise(seed in any::<u32>(), data in proptest::collection::vec(any::<u8>(), 0..300)) {
            prop_assert_eq!(crc32_le(seed, &data), crc32_bitwise(seed, &data));
        }

        #[test]
        fn incremental_equals_whole(data in proptest::collection::vec(any::<u8>(), 0..300), cut in any::<prop::sample::Index>()) {
            let (a, b) = data.split_at(cut.index(data.len() + 1));
            let mut c = Crc32::with_state(ICRC_SEED);
            c.update(a);
            c.update(b);
            prop_assert_eq!(c.state(), crc32_le(ICRC_SEED, &data));
        }

        #[test]
        fn never_panics(data in proptest::collection::vec(any::<u8>(), 0..120)) {
            let _ = compute(&data);
            let _ = verify(&data);
            let mut d = data.clone();
            if generate(&mut d).is_ok() {
                prop_assert!(verify(&d).is_ok());
            }
        }

        #[test]
        fn any_bit_flip_outside_variant_fields_detected(which in 0..selftest::VECTORS.len(), bit in 0usize..1024) {
            let (_, v) = selftest::VECTORS[which];
            let mut p = v.to_vec();
            let i = (bit / 8) % p.len();
            let v6 = p[0] >> 4 == 6;
            let ip = if v6 { 40 } else { 20 };
            let variant: &[usize] = if v6 { &[0, 1, 2, 3, 7] } else { &[1, 8, 10, 11] };
            prop_assume!(i != 0 || v6);
            prop_assume!(!variant.contains(&i) && ![ip + 6, ip + 7, ip + 12].contains(&i));
            // Changing the version or header length or protocol is a
            // different error; any other flip must be a mismatch.
            p[i] ^= 1 << (bit % 8);
            match verify(&p) {
                Err(IcrcError::Mismatch { .. }) => {}
                Err(IcrcError::NotUdp(_)) => prop_assert_eq!(i, if v6 { 6 } else { 9 }),
                r => prop_assert!(false, "flip at {} gave {:?}", i, r),
            }
        }
    }
}
