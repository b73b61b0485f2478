// SPDX-License-Identifier: GPL-2.0

//! Fuzzes the RoCEv2 packet parser.
//!
//! The first input byte selects the path MTU (none, one of the five IB MTUs,
//! or an arbitrary value); the rest is a UDP payload handed to
//! `wire::parse`. Whatever parses must rebuild with `wire::build` to a packet
//! of the same length that parses back to the same headers and payload. The
//! same bytes are also run through the ICRC functions as an IP packet.
//! Both are run again on the bytes cut into three pieces (at a point the
//! selector byte picks and half way through the rest), as a received skb's
//! page fragments hold them: the result must be the same (or, for cuts
//! inside the headers, a refusal of split headers).

#![no_main]

use libfuzzer_sys::fuzz_target;
use rroce_engine::engine::{icrc, scatter::Scatter, wire};

/// Maps the selector byte to a path MTU.
fn mtu(sel: u8) -> Option<u32> {
    match sel {
        0..=63 => None,
        64..=127 => Some(256 << ((sel - 64) % 5)),
        _ => Some(u32::from(sel - 128) * 37),
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&sel, pkt)) = data.split_first() else {
        return;
    };
    let mtu = mtu(sel);

    let whole = icrc::verify(pkt);
    let c1 = usize::from(sel) % (pkt.len() + 1);
    let c2 = c1 + (pkt.len() - c1) / 2;
    let rest = [&pkt[c1..c2], &pkt[c2..]];
    let pieces = Scatter::new(&pkt[..c1], &rest).expect("pieces");
    if c1 >= 40 + 8 + 12 || c1 == pkt.len() {
        assert_eq!(icrc::verify_scatter_using(pieces, icrc::crc32_le), whole);
    }
    match (wire::parse(pkt, mtu), wire::parse_scatter(pieces, mtu)) {
        (Ok(p), Ok(q)) => assert_eq!(p, q),
        // The headers must lie in the first non-empty piece.
        (Ok(p), Err(e)) => {
            assert!(c1 < p.info().hdr_len);
            assert_eq!(e, wire::ParseError::SplitHeaders { hdr_len: p.info().hdr_len });
        }
        (Err(e), Err(f)) => assert!(e == f || matches!(f, wire::ParseError::SplitHeaders { .. })),
        (Err(e), Ok(_)) => panic!("whole packet refused ({e}), pieces parsed"),
    }

    let mut copy = pkt.to_vec();
    if icrc::generate(&mut copy).is_ok() {
        assert_eq!(icrc::verify(&copy), Ok(()));
    }

    let Ok(p) = wire::parse(pkt, mtu) else {
        return;
    };
    assert_eq!(p.wire_len(), pkt.len());
    assert_eq!(p.header_bytes(), &pkt[..p.info().hdr_len]);
    assert_eq!(usize::from(p.bth().pad), p.pad_bytes().len());
    assert_eq!(p.icrc_bytes(), pkt[pkt.len() - 4..]);

    let mut out = vec![0u8; pkt.len()];
    let payload = p.payload().contiguous().expect("one slice parses to one slice");
    let n = wire::build(p.headers(), payload, &mut out).expect("parsed packet must rebuild");
    assert_eq!(n, pkt.len());
    let q = wire::parse(&out, mtu).expect("rebuilt packet must parse");
    assert_eq!(q.headers(), p.headers());
    assert_eq!(q.payload(), p.payload());

    // Building is deterministic: rebuilding the rebuilt packet changes nothing.
    let mut again = vec![0u8; n];
    let payload = q.payload().contiguous().expect("one slice parses to one slice");
    assert_eq!(wire::build(q.headers(), payload, &mut again), Ok(n));
    assert_eq!(again, out);
});
