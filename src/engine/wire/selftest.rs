// SPDX-License-Identifier: GPL-2.0

//! Deterministic, allocation-free checks of the codec, shared by the host
//! tests and KUnit.

use super::*;

/// Fails with `msg` unless `cond` holds.
fn check(cond: bool, msg: &'static str) -> Result<(), &'static str> {
    if cond {
        Ok(())
    } else {
        Err(msg)
    }
}

/// Headers for `opcode` with every extension header it needs, filled
/// with recognisable values.
pub fn sample_headers(opcode: Opcode, seed: u32) -> Headers {
    let s = u64::from(seed);
    let mut bth = Bth::new(
        opcode,
        0xffff,
        0x12_3456 ^ (seed & QPN_MASK),
        Psn::new(seed),
    );
    bth.solicited = seed & 1 != 0;
    bth.ack_req = seed & 2 != 0;
    bth.mig_req = seed & 4 != 0;
    bth.fecn = seed & 8 != 0;
    bth.becn = seed & 16 != 0;
    let info = opcode.info();
    let mut h = Headers::new(bth);
    if info.has(Ext::Reth) {
        h.reth = Some(Reth {
            va: 0x0000_7fff_dead_b000 ^ s,
            rkey: 0x1234_5678 ^ seed,
            len: 4096 ^ seed,
        });
    }
    if info.has(Ext::Aeth) {
        let syndrome = match seed % 3 {
            0 => Syndrome::Ack {
                credits: Syndrome::CREDITS_INVALID,
            },
            1 => Syndrome::RnrNak { timer: 14 },
            _ => Syndrome::Nak(NakCode::RemoteAccessError),
        };
        h.aeth = Some(Aeth {
            syndrome,
            msn: seed & QPN_MASK,
        });
    }
    if info.has(Ext::AtomicEth) {
        h.atomic_eth = Some(AtomicEth {
            va: 0x1000 ^ s,
            rkey: 0xabcd ^ seed,
            swap_add: 0x0102_0304_0506_0708 ^ s,
            compare: 0x1112_1314_1516_1718 ^ s,
        });
    }
    if info.has(Ext::AtomicAckEth) {
        h.atomic_ack_eth = Some(AtomicAckEth {
            orig: 0xfeed_face_cafe_beef ^ s,
        });
    }
    if info.has(Ext::ImmDt) {
        h.imm_dt = Some(ImmDt {
            imm: 0xc0ff_ee00 ^ seed,
        });
    }
    if info.has(Ext::Ieth) {
        h.ieth = Some(Ieth {
            rkey: 0x5555_aaaa ^ seed,
        });
    }
    if info.has(Ext::Deth) {
        h.deth = Some(Deth {
            qkey: GSI_QKEY ^ seed,
            src_qpn: 1 ^ (seed & QPN_MASK),
        });
    }
    if info.has(Ext::Feth) {
        h.feth = Some(Feth {
            placement_type: 1,
            selectivity: 2,
        });
    }
    h
}

/// A payload length valid for `opcode` under `mtu`.
pub fn sample_payload_len(opcode: Opcode, mtu: usize) -> usize {
    let info = opcode.info();
    match info.payload {
        PayloadRule::None => 0,
        PayloadRule::Exactly(n) => n,
        PayloadRule::Data => match info.position {
            Position::First | Position::Middle => mtu,
            Position::Last => 1,
            Position::Only => 13,
        },
    }
}

/// Builds a packet for every opcode and parses it back to the same
/// headers and payload.
pub fn round_trip_all_opcodes() -> Result<(), &'static str> {
    const MTU: usize = 256;
    let mut payload = [0u8; MTU];
    for (i, b) in payload.iter_mut().enumerate() {
        *b = i.to_le_bytes().first().copied().unwrap_or(0);
    }
    let mut buf = [0u8; MAX_HDR_LEN + MTU + 8];
    for (seed, &op) in (1u32..).zip(Opcode::ALL) {
        let mut h = sample_headers(op, seed.wrapping_mul(0x9e37_79b9));
        let n = sample_payload_len(op, MTU);
        let data = payload.get(..n).ok_or("payload")?;
        h.bth.pad = u8::try_from(pad_len(n)).map_err(|_| "pad")?;
        let len = build(&h, data, &mut buf).map_err(|_| "build failed")?;
        check(packet_len(op, n) == Some(len), "packet_len")?;
        let wire = buf.get(..len).ok_or("length")?;
        let p = parse(wire, Some(256)).map_err(|_| "parse of built packet failed")?;
        check(*p.headers() == h, "headers differ after round trip")?;
        check(
            p.payload().eq_bytes(data),
            "payload differs after round trip",
        )?;
        check(p.wire_len() == len, "wire_len")?;
        check(p.header_bytes().len() == op.info().hdr_len, "hdr_len")?;
        check(p.pad_bytes().iter().all(|&b| b == 0), "pad not zero")?;
        check(Opcode::from_u8(op.code()) == Some(op), "from_u8")?;
    }
    Ok(())
}

/// A packet held in pieces parses as it does whole, wherever its payload,
/// pad and ICRC are cut, for every opcode; headers cut in two are refused.
pub fn parses_in_pieces() -> Result<(), &'static str> {
    use crate::engine::scatter::Scatter;
    const MTU: usize = 64;
    let mut payload = [0u8; MTU];
    for (i, b) in payload.iter_mut().enumerate() {
        *b = i
            .to_le_bytes()
            .first()
            .copied()
            .unwrap_or(0)
            .wrapping_mul(7);
    }
    let mut buf = [0u8; MAX_HDR_LEN + MTU + 8];
    for (seed, &op) in (1u32..).zip(Opcode::ALL) {
        let mut h = sample_headers(op, seed.wrapping_mul(0x2545_f491));
        let n = sample_payload_len(op, MTU).min(13);
        let data = payload.get(..n).ok_or("payload")?;
        h.bth.pad = u8::try_from(pad_len(n)).map_err(|_| "pad")?;
        let len = build(&h, data, &mut buf).map_err(|_| "build failed")?;
        // Pad bytes the parser must keep in order (it does not check them).
        let hdr = op.info().hdr_len;
        for (i, b) in buf.iter_mut().enumerate().take(len - 4).skip(hdr + n) {
            *b = 0xa0 | i.to_le_bytes().first().copied().unwrap_or(0) & 0x0f;
        }
        let wire = buf.get(..len).ok_or("length")?;
        let whole = parse(wire, None).map_err(|_| "parse whole")?;
        check(
            whole.pad_bytes() == wire.get(hdr + n..len - 4).ok_or("pad")?,
            "pad bytes",
        )?;
        for a in 0..=len {
            for b in a..=len {
                let (p0, tail) = wire.split_at(a);
                let (p1, p2) = tail.split_at(b - a);
                let rest: [&[u8]; 2] = [p1, p2];
                let sc = Scatter::new(p0, &rest).ok_or("scatter")?;
                let r = parse_scatter(sc, None);
                if a >= hdr || (a == 0 && (b >= hdr || b == 0)) {
                    let p = r.map_err(|_| "parse in pieces")?;
                    check(p == whole, "pieces parse differently")?;
                    check(p.wire_len() == len, "wire_len in pieces")?;
                    check(p.payload().eq_bytes(data), "payload in pieces")?;
                    check(p.icrc_bytes() == whole.icrc_bytes(), "icrc in pieces")?;
                } else {
                    check(
                        r == Err(ParseError::SplitHeaders { hdr_len: hdr }),
                        "split headers accepted",
                    )?;
                }
            }
        }
    }
    Ok(())
}

/// Header lengths of every opcode agree with rxe's `rxe_opcode[]`.
pub fn header_lengths() -> Result<(), &'static str> {
    const RXE: [(u8, usize); 39] = [
        (0x00, 12),
        (0x01, 12),
        (0x02, 12),
        (0x03, 16),
        (0x04, 12),
        (0x05, 16),
        (0x06, 28),
        (0x07, 12),
        (0x08, 12),
        (0x09, 16),
        (0x0a, 28),
        (0x0b, 32),
        (0x0c, 28),
        (0x0d, 16),
        (0x0e, 12),
        (0x0f, 16),
        (0x10, 16),
        (0x11, 16),
        (0x12, 24),
        (0x13, 40),
        (0x14, 40),
        (0x16, 16),
        (0x17, 16),
        (0x1c, 32),
        (0x1d, 28),
        (0x20, 12),
        (0x21, 12),
        (0x22, 12),
        (0x23, 16),
        (0x24, 12),
        (0x25, 16),
        (0x26, 28),
        (0x27, 12),
        (0x28, 12),
        (0x29, 16),
        (0x2a, 28),
        (0x2b, 32),
        (0x64, 20),
        (0x65, 24),
    ];
    for (code, len) in RXE {
        let op = Opcode::from_u8(code).ok_or("rxe opcode missing from the table")?;
        check(op.info().hdr_len == len, "header length differs from rxe")?;
    }
    check(Opcode::ALL.len() == RXE.len() + 1, "table size (rxe + CNP)")?;
    // Reserved, RD and manufacturer-specific opcodes are refused.
    for code in [
        0x15, 0x18, 0x1b, 0x1e, 0x1f, 0x2c, 0x40, 0x44, 0x66, 0x80, 0xe0, 0xff,
    ] {
        check(Opcode::from_u8(code).is_none(), "reserved opcode accepted")?;
    }
    Ok(())
}

/// A hand-assembled RC RDMA WRITE ONLY with immediate decodes to the
/// expected fields (bit positions of every BTH flag included).
pub fn decode_known_packet() -> Result<(), &'static str> {
    #[rustfmt::skip]
    const PKT: [u8; 44] = [
        0x0b, 0xf0, 0x80, 0x01, 0xbf, 0x00, 0x01, 0x23, 0xff, 0xff, 0xff, 0xfe,
        0x00, 0x00, 0x7f, 0x00, 0x12, 0x34, 0x56, 0x78, 0xde, 0xad, 0xbe, 0xef,
        0x00, 0x00, 0x00, 0x05, 0xca, 0xfe, 0xf0, 0x0d, b'h', b'e', b'l', b'l',
        b'o', 0x00, 0x00, 0x00, 0x11, 0x22, 0x33, 0x44,
    ];
    let p = parse(&PKT, Some(1024)).map_err(|_| "parse failed")?;
    let b = p.bth();
    check(p.opcode() == Opcode::RcWriteOnlyImm, "opcode")?;
    check(
        b.solicited && b.mig_req && b.pad == 3 && b.tver == 0,
        "flags",
    )?;
    check(b.pkey == 0x8001, "pkey")?;
    check(b.fecn && !b.becn && b.resv6a == 0x3f, "resv8a")?;
    check(b.dest_qpn == 0x123, "qpn")?;
    check(b.ack_req && b.resv7 == 0x7f, "ack req")?;
    check(b.psn == Psn::new(0xff_fffe), "psn")?;
    let reth = p.headers().reth.ok_or("reth")?;
    check(reth.va == 0x7f00_1234_5678, "va")?;
    check(reth.rkey == 0xdead_beef && reth.len == 5, "rkey/len")?;
    check(
        p.headers().imm_dt == Some(ImmDt { imm: 0xcafe_f00d }),
        "imm",
    )?;
    check(p.payload().eq_bytes(b"hello"), "payload")?;
    check(p.icrc_bytes() == [0x11, 0x22, 0x33, 0x44], "icrc bytes")?;
    check(p.icrc() == 0x4433_2211, "icrc value")
}

/// AETH syndromes decode per IBTA, reserved ones are refused.
pub fn aeth_syndromes() -> Result<(), &'static str> {
    check(
        Syndrome::from_byte(0x1f) == Some(Syndrome::Ack { credits: 0x1f }),
        "ACK",
    )?;
    check(
        Syndrome::from_byte(0x2e) == Some(Syndrome::RnrNak { timer: 14 }),
        "RNR NAK",
    )?;
    check(
        Syndrome::from_byte(0x60) == Some(Syndrome::Nak(NakCode::PsnSequenceError)),
        "NAK PSN",
    )?;
    check(
        Syndrome::from_byte(0x63) == Some(Syndrome::Nak(NakCode::RemoteOperationalError)),
        "NAK remote op",
    )?;
    check(
        Syndrome::from_byte(0x64) == Some(Syndrome::Nak(NakCode::InvalidRdRequest)),
        "NAK RD",
    )?;
    for reserved in [0x40, 0x5f, 0x65, 0x7f, 0x80, 0xff] {
        check(Syndrome::from_byte(reserved).is_none(), "reserved syndrome")?;
    }
    for b in 0..=0x7f_u8 {
        if let Some(s) = Syndrome::from_byte(b) {
            check(s.to_byte() == Some(b), "syndrome round trip")?;
        }
    }
    check(Syndrome::Ack { credits: 32 }.to_byte().is_none(), "credits")?;
    check(rnr_timer_usecs(0) == 655_360, "RNR timer 0")?;
    check(rnr_timer_usecs(14) == 1_280, "RNR timer 14")?;
    check(rnr_timer_usecs(31) == 491_520, "RNR timer 31")?;
    let mut ack = [0u8; 20];
    let h = sample_headers(Opcode::RcAck, 0);
    build(&h, &[], &mut ack).map_err(|_| "build ACK")?;
    if let Some(syn) = ack.get_mut(BTH_LEN) {
        *syn = 0x41;
    }
    check(
        parse(&ack, None) == Err(ParseError::BadSyndrome(0x41)),
        "reserved syndrome parsed",
    )
}

/// Malformed packets are refused with the right error.
pub fn rejects_malformed() -> Result<(), &'static str> {
    // RC SEND ONLY, 5 bytes payload, pad 3.
    let mut buf = [0u8; 64];
    let h = sample_headers(Opcode::RcSendOnly, 0);
    let len = build(&h, b"abcde", &mut buf).map_err(|_| "build")?;
    check(len == 12 + 8 + 4, "length")?;
    let good = buf;
    let pkt = |b: &[u8; 64], n: usize| -> Result<(), ParseError> {
        parse(b.get(..n).unwrap_or(&[]), None).map(|_| ())
    };
    check(pkt(&good, len).is_ok(), "good packet")?;
    for n in 0..16 {
        check(
            matches!(pkt(&good, n), Err(ParseError::TooShort { .. })),
            "short packet",
        )?;
    }
    check(
        matches!(pkt(&good, len - 1), Err(ParseError::Misaligned { .. })),
        "misaligned",
    )?;

    let mut b = good;
    b[0] = 0x15;
    check(
        pkt(&b, len) == Err(ParseError::UnknownOpcode(0x15)),
        "reserved opcode",
    )?;
    b[0] = 0x44;
    check(
        pkt(&b, len) == Err(ParseError::UnknownOpcode(0x44)),
        "RD opcode",
    )?;

    let mut b = good;
    b[1] |= 0x01;
    check(
        pkt(&b, len) == Err(ParseError::BadTransportVersion(1)),
        "tver",
    )?;

    // Pad 3 but only the ICRC after the headers: pad exceeds the data.
    let mut b = good;
    b[1] = 0x30;
    check(
        matches!(pkt(&b, 16), Err(ParseError::BadPadCount { pad: 3, len: 0 })),
        "pad count",
    )?;

    // An ACK with payload.
    let h = sample_headers(Opcode::RcAck, 0);
    let n = build(&h, &[], &mut b).map_err(|_| "build ack")?;
    check(pkt(&b, n).is_ok(), "good ack")?;
    check(
        matches!(
            pkt(&b, n + 4),
            Err(ParseError::UnexpectedPayload { len: 4, .. })
        ),
        "ACK with payload",
    )?;

    // ATOMIC WRITE must carry exactly 8 bytes.
    let h = sample_headers(Opcode::RcAtomicWrite, 0);
    let n = build(&h, &[7; 8], &mut b).map_err(|_| "build atomic write")?;
    check(pkt(&b, n).is_ok(), "good atomic write")?;
    check(
        matches!(
            pkt(&b, n + 4),
            Err(ParseError::BadPayloadLength {
                len: 12,
                expected: 8,
                ..
            })
        ),
        "atomic write payload",
    )?;
    check(
        build(&h, &[7; 4], &mut b)
            == Err(BuildError::BadPayloadLength {
                len: 4,
                expected: 8,
            }),
        "builder refuses short atomic write",
    )?;
    Ok(())
}

/// Path MTU rules for first, middle, last and only packets.
pub fn mtu_rules() -> Result<(), &'static str> {
    let mut buf = [0u8; 600];
    let payload = [0xa5u8; 512];
    let cases: [(Opcode, usize, bool); 12] = [
        (Opcode::RcSendFirst, 256, true),
        (Opcode::RcSendFirst, 252, false),
        (Opcode::RcSendMiddle, 256, true),
        (Opcode::RcWriteMiddle, 260, false),
        (Opcode::RcSendLast, 1, true),
        (Opcode::RcSendLast, 256, true),
        (Opcode::RcSendLast, 0, false),
        (Opcode::RcReadResponseLast, 260, false),
        (Opcode::RcSendOnly, 0, true),
        (Opcode::UdSendOnly, 256, true),
        (Opcode::UdSendOnly, 257, false),
        (Opcode::UcWriteOnlyImm, 512, false),
    ];
    for (op, n, ok) in cases {
        let h = sample_headers(op, 3);
        let data = payload.get(..n).ok_or("payload")?;
        let len = build(&h, data, &mut buf).map_err(|_| "build")?;
        let wire = buf.get(..len).ok_or("len")?;
        check(parse(wire, None).is_ok(), "MTU unknown: accepted")?;
        let r = parse(wire, Some(256));
        check(r.is_ok() == ok, "MTU rule")?;
        if !ok {
            check(
                matches!(r, Err(ParseError::MtuViolation { mtu: 256, .. })),
                "MTU error kind",
            )?;
        }
    }
    Ok(())
}

/// The builder refuses inconsistent headers and short buffers.
pub fn builder_rejects() -> Result<(), &'static str> {
    let mut buf = [0u8; 64];
    let mut h = sample_headers(Opcode::RcWriteOnly, 0);
    h.reth = None;
    check(
        build(&h, b"x", &mut buf) == Err(BuildError::MissingHeader(Ext::Reth)),
        "missing RETH",
    )?;
    let mut h = sample_headers(Opcode::RcSendOnly, 0);
    h.deth = Some(Deth::default());
    check(
        build(&h, b"x", &mut buf) == Err(BuildError::UnexpectedHeader(Ext::Deth)),
        "DETH on RC",
    )?;
    let mut h = sample_headers(Opcode::RcSendOnly, 0);
    h.bth.dest_qpn = 1 << 24;
    check(
        build(&h, b"x", &mut buf) == Err(BuildError::FieldOutOfRange("bth.dest_qpn")),
        "QPN range",
    )?;
    h.bth.dest_qpn = 1;
    h.bth.tver = 1;
    check(
        build(&h, b"x", &mut buf) == Err(BuildError::FieldOutOfRange("bth.tver")),
        "tver",
    )?;
    let h = sample_headers(Opcode::RcReadRequest, 0);
    check(
        build(&h, b"x", &mut buf) == Err(BuildError::UnexpectedPayload { len: 1 }),
        "payload on READ request",
    )?;
    let h = sample_headers(Opcode::RcSendOnly, 0);
    for n in 0..20 {
        let short = buf.get_mut(..n).ok_or("len")?;
        check(
            build(&h, b"x", short) == Err(BuildError::BufferTooSmall { len: n, needed: 20 }),
            "short buffer",
        )?;
    }
    check(
        build_headers(&h, 1, &mut buf) == Ok(BTH_LEN),
        "build_headers returns hdr_len",
    )?;
    check(
        buf.get(1).copied() == Some(0x30),
        "pad count derived from the payload length",
    )
}

/// The packets of the ICRC known-answer vectors parse (the CNP too) and
/// their trailers are the ICRC.
pub fn parses_icrc_vectors() -> Result<(), &'static str> {
    for (_name, ip_packet) in super::super::icrc::selftest::VECTORS {
        let v6 = ip_packet.first().is_some_and(|b| b >> 4 == 6);
        let udp_payload = ip_packet.get(if v6 { 48 } else { 28 }..).ok_or("short")?;
        let p = parse(udp_payload, Some(1024)).map_err(|_| "vector does not parse")?;
        let (covered, _) = ip_packet.split_last_chunk::<4>().ok_or("short")?;
        let computed = super::super::icrc::compute(covered).map_err(|_| "icrc")?;
        check(p.icrc() == computed, "trailer is not the ICRC")?;
    }
    Ok(())
}
