// SPDX-License-Identifier: GPL-2.0

//! Whole packets: [`parse`] validates a received UDP payload into a
//! [`Packet`], [`build_headers`] and [`build`] write one from decoded
//! [`Headers`], and [`ParseError`] / [`BuildError`] say why not.

use super::headers::{decode_ext, encode_ext, Reader, Writer, OPTIONAL_EXTS};
use super::*;
use crate::engine::icrc::ICRC_LEN;
use crate::engine::scatter::Scatter;
use core::fmt;

/// Why [`parse`] rejected a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParseError {
    /// Shorter than the headers its opcode calls for plus the ICRC.
    TooShort {
        /// Length of the buffer.
        len: usize,
        /// Bytes needed.
        needed: usize,
    },
    /// Reserved or unsupported opcode.
    UnknownOpcode(u8),
    /// Transport header version other than 0.
    BadTransportVersion(u8),
    /// Payload plus pad is not a multiple of 4 bytes.
    Misaligned {
        /// Bytes between the headers and the ICRC.
        len: usize,
    },
    /// Pad count larger than the bytes between the headers and the ICRC.
    BadPadCount {
        /// Pad count from the BTH.
        pad: u8,
        /// Bytes between the headers and the ICRC.
        len: usize,
    },
    /// Payload on an opcode that carries none.
    UnexpectedPayload {
        /// The opcode.
        opcode: Opcode,
        /// Payload plus pad length.
        len: usize,
    },
    /// Payload of the wrong size for an opcode with a fixed payload size.
    BadPayloadLength {
        /// The opcode.
        opcode: Opcode,
        /// Payload length.
        len: usize,
        /// The size the opcode requires.
        expected: usize,
    },
    /// Payload size breaks the path MTU rules for the packet's position.
    MtuViolation {
        /// The opcode.
        opcode: Opcode,
        /// Payload length.
        len: usize,
        /// Path MTU.
        mtu: u32,
    },
    /// Reserved AETH syndrome.
    BadSyndrome(u8),
    /// The headers do not lie in the packet's first piece (see
    /// [`parse_scatter`]).
    SplitHeaders {
        /// Bytes of headers the opcode calls for.
        hdr_len: usize,
    },
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::TooShort { len, needed } => {
                write!(f, "packet too short: {len} bytes, need {needed}")
            }
            Self::UnknownOpcode(op) => write!(f, "unknown opcode {op:#04x}"),
            Self::BadTransportVersion(v) => write!(f, "transport header version {v}"),
            Self::Misaligned { len } => {
                write!(f, "payload + pad of {len} bytes is not a multiple of 4")
            }
            Self::BadPadCount { pad, len } => {
                write!(
                    f,
                    "pad count {pad} exceeds the {len} bytes after the headers"
                )
            }
            Self::UnexpectedPayload { opcode, len } => {
                write!(f, "{opcode} carries {len} bytes of payload, it takes none")
            }
            Self::BadPayloadLength {
                opcode,
                len,
                expected,
            } => write!(f, "{opcode} payload is {len} bytes, must be {expected}"),
            Self::MtuViolation { opcode, len, mtu } => {
                write!(f, "{opcode} payload of {len} bytes breaks path MTU {mtu}")
            }
            Self::BadSyndrome(s) => write!(f, "reserved AETH syndrome {s:#04x}"),
            Self::SplitHeaders { hdr_len } => {
                write!(f, "the {hdr_len} bytes of headers are not in one piece")
            }
        }
    }
}

/// Why [`build`] or [`build_headers`] refused to write a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BuildError {
    /// The output buffer is too small.
    BufferTooSmall {
        /// Length of the buffer.
        len: usize,
        /// Bytes needed.
        needed: usize,
    },
    /// The opcode calls for an extension header that is `None`.
    MissingHeader(Ext),
    /// An extension header is set that the opcode does not carry.
    UnexpectedHeader(Ext),
    /// A field does not fit its wire width, or is a reserved encoding.
    FieldOutOfRange(&'static str),
    /// Payload on an opcode that carries none.
    UnexpectedPayload {
        /// Payload length.
        len: usize,
    },
    /// Payload of the wrong size for an opcode with a fixed payload size.
    BadPayloadLength {
        /// Payload length.
        len: usize,
        /// The size the opcode requires.
        expected: usize,
    },
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::BufferTooSmall { len, needed } => {
                write!(f, "buffer of {len} bytes too small, need {needed}")
            }
            Self::MissingHeader(ext) => write!(f, "opcode requires {}", ext.name()),
            Self::UnexpectedHeader(ext) => write!(f, "opcode does not carry {}", ext.name()),
            Self::FieldOutOfRange(field) => write!(f, "{field} out of range"),
            Self::UnexpectedPayload { len } => {
                write!(f, "{len} bytes of payload on an opcode that takes none")
            }
            Self::BadPayloadLength { len, expected } => {
                write!(f, "payload is {len} bytes, must be {expected}")
            }
        }
    }
}

/// Number of pad bytes that bring `payload_len` to a multiple of 4.
pub const fn pad_len(payload_len: usize) -> usize {
    match payload_len % 4 {
        0 => 0,
        r => 4 - r,
    }
}

/// Sets the AckReq bit of the built packet `pkt` (BTH first), before its
/// ICRC is written; `false` (nothing changed) if it is shorter than a BTH.
pub fn set_ack_req(pkt: &mut [u8]) -> bool {
    match pkt.get_mut(..BTH_LEN).and_then(|b| b.get_mut(8)) {
        Some(b8) => {
            *b8 |= 0x80;
            true
        }
        None => false,
    }
}

/// Length of the UDP payload (headers, payload, pad and ICRC) of a packet
/// with opcode `opcode` and `payload_len` bytes of payload, or `None` if that
/// overflows.
pub const fn packet_len(opcode: Opcode, payload_len: usize) -> Option<usize> {
    let fixed = opcode.info().hdr_len + ICRC_LEN;
    match payload_len.checked_add(pad_len(payload_len)) {
        Some(padded) => padded.checked_add(fixed),
        None => None,
    }
}

/// A received packet, validated by [`parse`]. Borrows the buffer it was
/// parsed from; nothing is copied but the (small) decoded headers and the
/// ICRC trailer. Its payload may lie in pieces ([`parse_scatter`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet<'a> {
    headers: Headers,
    header_bytes: &'a [u8],
    payload: Scatter<'a>,
    /// The pad bytes (copied: at most 3), `pad_len` of them.
    pad: [u8; 3],
    pad_len: u8,
    icrc: [u8; ICRC_LEN],
}

impl<'a> Packet<'a> {
    /// The decoded headers.
    pub const fn headers(&self) -> &Headers {
        &self.headers
    }

    /// The base transport header.
    pub const fn bth(&self) -> &Bth {
        &self.headers.bth
    }

    /// The opcode.
    pub const fn opcode(&self) -> Opcode {
        self.headers.bth.opcode
    }

    /// The opcode's table entry.
    pub const fn info(&self) -> &'static OpInfo {
        self.headers.bth.opcode.info()
    }

    /// The PSN.
    pub const fn psn(&self) -> Psn {
        self.headers.bth.psn
    }

    /// The raw BTH and extension headers.
    pub const fn header_bytes(&self) -> &'a [u8] {
        self.header_bytes
    }

    /// The payload, without pad.
    pub const fn payload(&self) -> Scatter<'a> {
        self.payload
    }

    /// The pad bytes between the payload and the ICRC.
    pub fn pad_bytes(&self) -> &[u8] {
        self.pad.get(..usize::from(self.pad_len)).unwrap_or(&[])
    }

    /// The ICRC as stored in the trailer, read least significant byte first
    /// as rxe does, so it compares equal to [`crate::engine::icrc::compute`]'s result.
    pub const fn icrc(&self) -> u32 {
        u32::from_le_bytes(self.icrc)
    }

    /// The four trailer bytes as they are on the wire.
    pub const fn icrc_bytes(&self) -> [u8; ICRC_LEN] {
        self.icrc
    }

    /// Length of the whole packet (the UDP payload).
    pub fn wire_len(&self) -> usize {
        self.header_bytes.len() + self.payload.len() + usize::from(self.pad_len) + ICRC_LEN
    }
}

/// Checks the payload length against the opcode's payload rule and, if
/// known, the path MTU.
fn check_payload(
    info: &OpInfo,
    len: usize,
    padded: usize,
    path_mtu: Option<u32>,
) -> Result<(), ParseError> {
    let opcode = info.opcode;
    match info.payload {
        PayloadRule::None if padded != 0 => Err(ParseError::UnexpectedPayload {
            opcode,
            len: padded,
        }),
        PayloadRule::Exactly(expected) if len != expected => Err(ParseError::BadPayloadLength {
            opcode,
            len,
            expected,
        }),
        PayloadRule::Data => match path_mtu {
            Some(mtu) => check_mtu(info, len, mtu),
            None => Ok(()),
        },
        _ => Ok(()),
    }
}

/// Checks a data payload against the path MTU rules of its position (as
/// rxe's `check_length()`).
fn check_mtu(info: &OpInfo, len: usize, mtu: u32) -> Result<(), ParseError> {
    let max = usize::try_from(mtu).unwrap_or(usize::MAX);
    let ok = match info.position {
        Position::First | Position::Middle => len == max,
        Position::Last => len != 0 && len <= max,
        Position::Only => len <= max,
    };
    if ok {
        Ok(())
    } else {
        Err(ParseError::MtuViolation {
            opcode: info.opcode,
            len,
            mtu,
        })
    }
}

/// Parses and validates a RoCEv2 packet.
///
/// `buf` is the UDP payload: it starts at the BTH and ends after the ICRC.
/// With `path_mtu`, data payloads are also checked against the path MTU
/// (first and middle packets exactly one MTU, last packets 1 to MTU bytes,
/// only packets at most one MTU); pass `None` where it is not known.
///
/// The ICRC itself is not checked here; see [`crate::engine::icrc::verify`].
pub fn parse(buf: &[u8], path_mtu: Option<u32>) -> Result<Packet<'_>, ParseError> {
    let len = buf.len();
    let short = ParseError::TooShort {
        len,
        needed: BTH_LEN + ICRC_LEN,
    };
    let (body, icrc) = buf.split_last_chunk::<ICRC_LEN>().ok_or(short)?;
    let bth_bytes = body.first_chunk::<BTH_LEN>().ok_or(short)?;
    let split = |hdr_len| body.split_at_checked(hdr_len);
    parse_parts(len, *bth_bytes, *icrc, path_mtu, |hdr_len, short| {
        let (h, d) = split(hdr_len).ok_or(short)?;
        Ok((h, Scatter::from_slice(d)))
    })
}

/// [`parse`], for a packet held in pieces: its headers (the BTH and the
/// extension headers its opcode calls for) must lie in the first piece,
/// the payload, pad and ICRC may lie anywhere.
pub fn parse_scatter(buf: Scatter<'_>, path_mtu: Option<u32>) -> Result<Packet<'_>, ParseError> {
    if let Some(b) = buf.contiguous() {
        return parse(b, path_mtu);
    }
    let len = buf.len();
    let short = ParseError::TooShort {
        len,
        needed: BTH_LEN + ICRC_LEN,
    };
    let body_len = len.checked_sub(ICRC_LEN).ok_or(short)?;
    let (body, trailer) = buf.split_at(body_len).ok_or(short)?;
    let icrc = trailer.to_array::<ICRC_LEN>().ok_or(short)?;
    let bth_bytes = body
        .take(BTH_LEN)
        .and_then(|b| b.to_array::<BTH_LEN>())
        .ok_or(short)?;
    parse_parts(len, bth_bytes, icrc, path_mtu, |hdr_len, short| {
        let (h, d) = body.split_at(hdr_len).ok_or(short)?;
        let h = h.contiguous().ok_or(ParseError::SplitHeaders { hdr_len })?;
        Ok((h, d))
    })
}

/// The rest of [`parse`] and [`parse_scatter`], from the BTH and the ICRC
/// trailer of a `len`-byte packet on: `split` cuts the bytes before the
/// trailer after the headers of the opcode (their length, and the error
/// for too short a packet, given), into the headers and the rest.
fn parse_parts<'a>(
    len: usize,
    bth_bytes: [u8; BTH_LEN],
    icrc: [u8; ICRC_LEN],
    path_mtu: Option<u32>,
    split: impl FnOnce(usize, ParseError) -> Result<(&'a [u8], Scatter<'a>), ParseError>,
) -> Result<Packet<'a>, ParseError> {
    let bth = Bth::decode(bth_bytes)?;
    let info = bth.opcode.info();
    let short = ParseError::TooShort {
        len,
        needed: info.hdr_len + ICRC_LEN,
    };
    let (header_bytes, data) = split(info.hdr_len, short)?;

    let mut headers = Headers::new(bth);
    let mut r = Reader {
        buf: header_bytes.get(BTH_LEN..).ok_or(short)?,
        short,
    };
    for &ext in info.exts {
        decode_ext(ext, &mut r, &mut headers)?;
    }

    if !data.len().is_multiple_of(4) {
        return Err(ParseError::Misaligned { len: data.len() });
    }
    let payload_len =
        data.len()
            .checked_sub(usize::from(bth.pad))
            .ok_or(ParseError::BadPadCount {
                pad: bth.pad,
                len: data.len(),
            })?;
    check_payload(info, payload_len, data.len(), path_mtu)?;
    let payload = data.take(payload_len).ok_or(short)?;
    // The pad count is two bits: at most 3 bytes, copied one by one.
    let mut pad = [0u8; 3];
    if bth.pad > 0 {
        let mut at = pad.iter_mut();
        for (_, piece) in data.skip(payload_len).ok_or(short)?.chunks() {
            // The piece first: `zip` takes no slot once it is exhausted.
            for (&b, d) in piece.iter().zip(at.by_ref()) {
                *d = b;
            }
        }
    }

    Ok(Packet {
        headers,
        header_bytes,
        payload,
        pad,
        pad_len: bth.pad,
        icrc,
    })
}

/// Checks that `h` carries exactly the extension headers of its opcode and
/// that `payload_len` suits the opcode.
fn check_build(h: &Headers, payload_len: usize) -> Result<(), BuildError> {
    let info = h.info();
    for ext in OPTIONAL_EXTS {
        match (info.has(ext), h.has(ext)) {
            (true, false) => return Err(BuildError::MissingHeader(ext)),
            (false, true) => return Err(BuildError::UnexpectedHeader(ext)),
            _ => {}
        }
    }
    match info.payload {
        PayloadRule::None if payload_len != 0 => {
            Err(BuildError::UnexpectedPayload { len: payload_len })
        }
        PayloadRule::Exactly(expected) if payload_len != expected => {
            Err(BuildError::BadPayloadLength {
                len: payload_len,
                expected,
            })
        }
        _ => Ok(()),
    }
}

/// Writes the BTH and extension headers of `h` for a packet carrying
/// `payload_len` bytes of payload to the start of `buf`, and returns how
/// many bytes that took (`h`'s opcode's `hdr_len`).
///
/// The BTH pad count is derived from `payload_len` (`h.bth.pad` is
/// ignored); the caller appends the payload, [`pad_len`] zero bytes and the
/// ICRC. Reserved fields are written as zero.
pub fn build_headers(h: &Headers, payload_len: usize, buf: &mut [u8]) -> Result<usize, BuildError> {
    check_build(h, payload_len)?;
    write_headers(h, payload_len, buf)
}

/// [`build_headers`] without the consistency checks of [`check_build`].
fn write_headers(h: &Headers, payload_len: usize, buf: &mut [u8]) -> Result<usize, BuildError> {
    let info = h.info();
    let short = BuildError::BufferTooSmall {
        len: buf.len(),
        needed: info.hdr_len,
    };
    let mut w = Writer { buf, short };
    let pad = match pad_len(payload_len) {
        1 => 1,
        2 => 2,
        3 => 3,
        _ => 0,
    };
    w.put(h.bth.encode(pad)?)?;
    for &ext in info.exts {
        encode_ext(ext, h, &mut w)?;
    }
    Ok(info.hdr_len)
}

/// Writes a whole packet to the start of `buf`: headers, `payload`, zeroed
/// pad and a zeroed ICRC trailer for [`crate::engine::icrc::generate`] to fill in.
/// Returns the packet's length (the UDP payload length).
pub fn build(h: &Headers, payload: &[u8], buf: &mut [u8]) -> Result<usize, BuildError> {
    let len = buf.len();
    let total = packet_len(h.bth.opcode, payload.len()).ok_or(BuildError::BufferTooSmall {
        len,
        needed: usize::MAX,
    })?;
    // Validate the headers before reporting a short buffer, so callers see
    // the more fundamental error first.
    check_build(h, payload.len())?;
    let short = BuildError::BufferTooSmall { len, needed: total };
    let out = buf.get_mut(..total).ok_or(short)?;
    let (hdr, rest) = out.split_at_mut_checked(h.info().hdr_len).ok_or(short)?;
    write_headers(h, payload.len(), hdr)?;
    let mut w = Writer { buf: rest, short };
    w.put_slice(payload)?;
    w.zeros(pad_len(payload.len()))?;
    w.zeros(ICRC_LEN)?;
    Ok(total)
}
