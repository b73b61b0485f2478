// SPDX-License-Identifier: GPL-2.0

//! Fuzzes the RoCEv2 packet parser.
//!
//! The first input byte selects the path MTU (none, one of the five IB MTUs,
//! or an arbitrary value); the rest is a UDP payload handed to
//! `wire::parse`. Whatever parses must rebuild with `wire::build` to a packet
//! of the same length that parses back to the same headers and payload. The
//! same bytes are also run through the ICRC functions as an IP packet.

#![no_main]

use libfuzzer_sys::fuzz_target;
use rroce_engine::engine::{icrc, wire};

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

    let _ = icrc::verify(pkt);
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
    let n = wire::build(p.headers(), p.payload(), &mut out).expect("parsed packet must rebuild");
    assert_eq!(n, pkt.len());
    let q = wire::parse(&out, mtu).expect("rebuilt packet must parse");
    assert_eq!(q.headers(), p.headers());
    assert_eq!(q.payload(), p.payload());

    // Building is deterministic: rebuilding the rebuilt packet changes nothing.
    let mut again = vec![0u8; n];
    assert_eq!(wire::build(q.headers(), q.payload(), &mut again), Ok(n));
    assert_eq!(again, out);
});
