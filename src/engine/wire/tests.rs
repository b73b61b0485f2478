// SPDX-License-Identifier: GPL-2.0

//! Host tests of the wire codec: the selftests, an independent oracle of the
//! acceptance rules and property tests.

use super::*;
use proptest::prelude::*;

#[test]
fn selftests() {
    selftest::round_trip_all_opcodes().unwrap();
    selftest::parses_in_pieces().unwrap();
    selftest::header_lengths().unwrap();
    selftest::decode_known_packet().unwrap();
    selftest::aeth_syndromes().unwrap();
    selftest::rejects_malformed().unwrap();
    selftest::mtu_rules().unwrap();
    selftest::builder_rejects().unwrap();
    selftest::parses_icrc_vectors().unwrap();
}

#[test]
fn set_ack_req_marks_only_the_bit() {
    let mut h = Headers::new(Bth::new(
        Opcode::RcWriteOnly,
        DEFAULT_PKEY,
        0x12345,
        Psn::new(77),
    ));
    h.reth = Some(Reth {
        va: 0x1000,
        rkey: 9,
        len: 5,
    });
    let mut buf = [0u8; 64];
    let n = build(&h, b"hello", &mut buf).unwrap();
    let mut marked = buf;
    assert!(set_ack_req(&mut marked[..n]));
    let p = parse(&marked[..n], None).unwrap();
    assert!(p.bth().ack_req);
    assert_eq!(p.bth().dest_qpn, 0x12345);
    assert_eq!(p.bth().psn, Psn::new(77));
    assert_eq!(p.bth().opcode, Opcode::RcWriteOnly);
    // Only byte 8 changed (the ICRC is written after).
    let diff: Vec<usize> = (0..n).filter(|&i| buf[i] != marked[i]).collect();
    assert_eq!(diff, vec![8]);
    assert!(!set_ack_req(&mut marked[..BTH_LEN - 1]));
}

#[test]
fn display() {
    assert_eq!(
        Opcode::RcSendOnlyInv.to_string(),
        "RC_SEND_ONLY_WITH_INVALIDATE"
    );
    assert_eq!(
        ParseError::UnknownOpcode(0x15).to_string(),
        "unknown opcode 0x15"
    );
    assert_eq!(
        BuildError::MissingHeader(Ext::Reth).to_string(),
        "opcode requires RETH"
    );
}

/// rxe's RXE_RWR_MASK and RXE_COMP_MASK opcodes, transcribed from
/// rxe_opcode.c.
#[test]
fn recv_wqe_flags_match_rxe() {
    let rwr = [
        0x00, 0x04, 0x05, 0x09, 0x0b, 0x17, 0x20, 0x24, 0x25, 0x29, 0x2b, 0x64, 0x65,
    ];
    let comp = [
        0x02, 0x03, 0x04, 0x05, 0x09, 0x0b, 0x16, 0x17, 0x22, 0x23, 0x24, 0x25, 0x29, 0x2b, 0x64,
        0x65,
    ];
    for &op in Opcode::ALL {
        let i = op.info();
        assert_eq!(i.consumes_recv_wqe(), rwr.contains(&op.code()), "{op}");
        assert_eq!(i.completes_recv_wqe(), comp.contains(&op.code()), "{op}");
    }
}

/// An independent statement of the acceptance rules, written from the
/// rxe tables rather than from `Opcode::info`.
fn oracle(buf: &[u8], mtu: Option<u32>) -> bool {
    if buf.len() < 16 {
        return false;
    }
    let op = buf[0];
    // (header length, payload: 0 none / 1 data / 2 exactly 8, position)
    let (hdr, rule, pos) = match op {
        0x00 | 0x20 => (12, 1, 'F'),
        0x01 | 0x21 => (12, 1, 'M'),
        0x02 | 0x22 => (12, 1, 'L'),
        0x03 | 0x23 | 0x16 => (16, 1, 'L'),
        0x04 | 0x24 => (12, 1, 'O'),
        0x05 | 0x25 | 0x17 => (16, 1, 'O'),
        0x06 | 0x26 => (28, 1, 'F'),
        0x07 | 0x27 => (12, 1, 'M'),
        0x08 | 0x28 => (12, 1, 'L'),
        0x09 | 0x29 => (16, 1, 'L'),
        0x0a | 0x2a => (28, 1, 'O'),
        0x0b | 0x2b => (32, 1, 'O'),
        0x0c => (28, 0, 'O'),
        0x0d => (16, 1, 'F'),
        0x0e => (12, 1, 'M'),
        0x0f => (16, 1, 'L'),
        0x10 => (16, 1, 'O'),
        0x11 => (16, 0, 'O'),
        0x12 => (24, 0, 'O'),
        0x13 | 0x14 => (40, 0, 'O'),
        0x1c => (32, 0, 'O'),
        0x1d => (28, 2, 'O'),
        0x64 => (20, 1, 'O'),
        0x65 => (24, 1, 'O'),
        0x81 => (28, 0, 'O'),
        _ => return false,
    };
    if buf[1] & 0x0f != 0 || buf.len() < hdr + 4 {
        return false;
    }
    let aeth_at = match op {
        0x0d | 0x0f | 0x10 | 0x11 | 0x12 => Some(12),
        _ => None,
    };
    if let Some(at) = aeth_at {
        let s = buf[at];
        let ok = match s >> 5 {
            0 | 1 => true,
            3 => s & 0x1f <= 4,
            _ => false,
        };
        if !ok {
            return false;
        }
    }
    let data = buf.len() - hdr - 4;
    let pad = usize::from((buf[1] >> 4) & 3);
    if !data.is_multiple_of(4) || pad > data {
        return false;
    }
    let payload = data - pad;
    match rule {
        0 => data == 0,
        2 => payload == 8,
        _ => match mtu.map(|m| m as usize) {
            None => true,
            Some(m) => match pos {
                'F' | 'M' => payload == m,
                'L' => payload >= 1 && payload <= m,
                _ => payload <= m,
            },
        },
    }
}

fn any_opcode() -> impl Strategy<Value = Opcode> {
    proptest::sample::select(Opcode::ALL)
}

fn any_mtu() -> impl Strategy<Value = Option<u32>> {
    prop_oneof![
        Just(None),
        proptest::sample::select(&[256u32, 512, 1024, 2048, 4096][..]).prop_map(Some),
        (0u32..300).prop_map(Some),
    ]
}

/// Headers for `op` with random field values (all in range).
fn any_headers(op: Opcode) -> impl Strategy<Value = Headers> {
    (
        any::<[bool; 5]>(),
        any::<u16>(),
        0..=QPN_MASK,
        0..=QPN_MASK,
        any::<[u64; 4]>(),
        any::<[u32; 4]>(),
        0u8..=0xff,
    )
        .prop_map(move |(flags, pkey, qpn, psn, q, d, syn)| {
            let mut h = selftest::sample_headers(op, d[0]);
            h.bth.solicited = flags[0];
            h.bth.mig_req = flags[1];
            h.bth.fecn = flags[2];
            h.bth.becn = flags[3];
            h.bth.ack_req = flags[4];
            h.bth.pkey = pkey;
            h.bth.dest_qpn = qpn;
            h.bth.psn = Psn::new(psn);
            if let Some(r) = h.reth.as_mut() {
                *r = Reth {
                    va: q[0],
                    rkey: d[1],
                    len: d[2],
                };
            }
            if let Some(a) = h.aeth.as_mut() {
                a.syndrome = Syndrome::from_byte(syn & 0x7f).unwrap_or(Syndrome::Ack {
                    credits: syn & 0x1f,
                });
                a.msn = d[3] & QPN_MASK;
            }
            if let Some(a) = h.atomic_eth.as_mut() {
                *a = AtomicEth {
                    va: q[0],
                    rkey: d[1],
                    swap_add: q[1],
                    compare: q[2],
                };
            }
            if let Some(a) = h.atomic_ack_eth.as_mut() {
                a.orig = q[3];
            }
            if let Some(i) = h.imm_dt.as_mut() {
                i.imm = d[2];
            }
            if let Some(i) = h.ieth.as_mut() {
                i.rkey = d[3];
            }
            if let Some(dt) = h.deth.as_mut() {
                *dt = Deth {
                    qkey: d[1],
                    src_qpn: d[2] & QPN_MASK,
                };
            }
            if let Some(f) = h.feth.as_mut() {
                *f = Feth {
                    placement_type: syn & 0x0f,
                    selectivity: (syn >> 4) & 3,
                };
            }
            h
        })
}

fn headers_and_payload() -> impl Strategy<Value = (Headers, Vec<u8>)> {
    any_opcode().prop_flat_map(|op| {
        let len = match op.info().payload {
            PayloadRule::None => 0..=0usize,
            PayloadRule::Exactly(n) => n..=n,
            PayloadRule::Data => 0..=600usize,
        };
        // Favour the lengths at the edges of the MTU rules.
        let len = prop_oneof![
            4 => len.clone(),
            1 => Just(*len.start()),
            1 => Just((*len.end()).min(256)),
            1 => Just((*len.end()).min(257)),
        ];
        (any_headers(op), len)
            .prop_flat_map(|(h, n)| (Just(h), proptest::collection::vec(any::<u8>(), n)))
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn build_parse_round_trip((mut h, payload) in headers_and_payload()) {
        let mut buf = vec![0u8; MAX_HDR_LEN + payload.len() + 8];
        let len = build(&h, &payload, &mut buf).unwrap();
        prop_assert_eq!(Some(len), packet_len(h.bth.opcode, payload.len()));
        let p = parse(&buf[..len], None).unwrap();
        h.bth.pad = pad_len(payload.len()) as u8;
        prop_assert_eq!(p.headers(), &h);
        prop_assert!(p.payload().eq_bytes(&payload));
        prop_assert_eq!(p.wire_len(), len);
        prop_assert!(oracle(&buf[..len], None));
        // Rebuilding from the parse reproduces the bytes exactly.
        let mut again = vec![0u8; len];
        prop_assert_eq!(build(p.headers(), p.payload().contiguous().unwrap(), &mut again), Ok(len));
        prop_assert_eq!(&again[..], &buf[..len]);
    }

    #[test]
    fn parse_never_panics(buf in proptest::collection::vec(any::<u8>(), 0..200), mtu in any_mtu()) {
        let r = parse(&buf, mtu);
        prop_assert_eq!(r.is_ok(), oracle(&buf, mtu), "{:?}", r);
    }

    /// Start from a valid packet and corrupt it: the parser agrees with
    /// the oracle on every mutation.
    #[test]
    fn parse_matches_oracle_on_mutations(
        (h, payload) in headers_and_payload(),
        mtu in any_mtu(),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4),
        cut in -8i32..8,
    ) {
        let mut buf = vec![0u8; MAX_HDR_LEN + payload.len() + 16];
        let len = build(&h, &payload, &mut buf).unwrap();
        let len = (len as i32 + cut).clamp(0, buf.len() as i32) as usize;
        let pkt = &mut buf[..len];
        if !pkt.is_empty() {
            for (i, x) in flips {
                let i = i.index(pkt.len().min(MAX_HDR_LEN));
                pkt[i] ^= x;
            }
        }
        let r = parse(pkt, mtu);
        prop_assert_eq!(r.is_ok(), oracle(pkt, mtu), "{:?}", r);
        if let Ok(p) = r {
            prop_assert_eq!(p.wire_len(), pkt.len());
            prop_assert_eq!(p.header_bytes(), &pkt[..p.info().hdr_len]);
            prop_assert_eq!(usize::from(p.bth().pad), p.pad_bytes().len());
            // Whatever parses can be rebuilt and parses the same.
            let mut again = vec![0u8; pkt.len()];
            let n = build(p.headers(), p.payload().contiguous().unwrap(), &mut again).unwrap();
            prop_assert_eq!(n, pkt.len());
            let q = parse(&again, mtu).unwrap();
            prop_assert_eq!(q.headers(), p.headers());
            prop_assert_eq!(q.payload(), p.payload());
        }
    }

    #[test]
    fn build_never_panics(
        (mut h, payload) in headers_and_payload(),
        buf_len in 0usize..700,
        qpn in any::<u32>(),
        resv in any::<u8>(),
    ) {
        h.bth.dest_qpn = qpn;
        h.bth.resv7 = resv;
        let mut buf = vec![0u8; buf_len];
        if let Ok(n) = build(&h, &payload, &mut buf) {
            prop_assert!(parse(&buf[..n], None).is_ok());
        }
    }
}
