// SPDX-License-Identifier: GPL-2.0

//! A peer's responses, built with the wire codec and handed to a kernel
//! QP's completer as the receive path would (under the QP lock), in orders
//! a real peer produces only by chance: each case pins down one sequence.

use kernel::sync::rcu;

use super::*;
use crate::{
    engine::{
        psn::Psn,
        wire::{self, Aeth, Bth, Headers, Opcode, Syndrome},
    },
    qp::RroceQp,
};

/// The first PSN `TestQp::connect` gives a QP's send queue.
const FIRST_PSN: u32 = 0x100;

/// One of the transport's values in `qp`'s restrack snapshot.
fn diag(qp: &TestQp, name: &str) -> u32 {
    // SAFETY: a live QP of an rroce device.
    let d = unsafe { RroceQp::state(qp.0) }.diag();
    d.iter()
        .find(|(n, _)| n.to_bytes() == name.as_bytes())
        .map_or(u32::MAX, |&(_, v)| v)
}

/// Waits up to a second for `qp`'s next PSN to reach `psn`.
fn sent_through(qp: &TestQp, psn: u32) -> bool {
    for _ in 0..100 {
        if diag(qp, "psn") == psn {
            return true;
        }
        fsleep(Delta::from_millis(10));
    }
    false
}

/// Hands `qp` an ACK-class response (RNR NAK, ACK) at `psn` as its peer's.
fn respond(qp: &TestQp, psn: u32, syndrome: Syndrome, msn: u32) -> Result<(), &'static str> {
    let mut h = Headers::new(Bth::new(Opcode::RcAck, 0xffff, qp.qpn(), Psn::new(psn)));
    h.aeth = Some(Aeth { syndrome, msn });
    let mut buf = [0u8; 64];
    let n = wire::build(&h, &[], &mut buf).map_err(|_| "cannot build the response")?;
    let pkt = wire::parse(buf.get(..n).ok_or("short")?, None).map_err(|_| "cannot parse it")?;
    let guard = rcu::read_lock();
    // SAFETY: a live QP of an rroce device.
    unsafe { RroceQp::state(qp.0) }.deliver(&guard, |ctx| ctx.on_response(&pkt));
    Ok(())
}

/// An RNR NAK for a WRITE, then an ACK for it before the RNR timer (the
/// responder took a second copy of the packet, sent before the NAK came:
/// what ODP faults and retransmissions produce). The ACK retires the
/// WRITE; the QP must not keep waiting out an RNR timer the ACK made
/// pointless: the next WQE goes out at once. (It was left waiting
/// forever: the ACK cancelled the timer, whose expiry alone ended the
/// wait, and nothing was sent on that QP again.)
pub(crate) fn ack_ends_rnr_wait() -> Result<(), &'static str> {
    use sys::*;
    let dev = TestDev::new()?;
    let Some((sgid, gid)) = loopback_gid(&dev) else {
        return Err("no ::ffff:127.0.0.1 GID on the loopback device");
    };
    let src = pattern(8, 5)?;
    let pd = TestPd::new(&dev)?;
    let c = Consumer::new(false);
    let cq = TestCq::new(&dev, 16, 0, &c)?;
    let a = TestQp::new(&pd, &cq)?;
    // The peer: a QP left in RESET, which drops what `a` sends. The
    // responses `a` gets are this test's.
    let peer = TestQp::new(&pd, &cq)?;
    a.connect(peer.qpn(), &gid, sgid)?;
    let s = sge(src.as_ptr(), src.len(), pd.lkey());
    let mut w = rdma_wr(0xe1, ib_wr_opcode_IB_WR_RDMA_WRITE, &s, 0x1000, 0x4242);
    if a.post_send(&w.wr).0 != 0 {
        return Err("post_send of the first WRITE failed");
    }
    if !sent_through(&a, FIRST_PSN + 1) {
        return Err("the first WRITE was not sent");
    }
    // RNR NAK with the longest timer (491.52 ms), then the ACK.
    respond(&a, FIRST_PSN, Syndrome::RnrNak { timer: 31 }, 0)?;
    if diag(&a, "rnr_wait") != 1 {
        return Err("the RNR NAK did not start an RNR wait");
    }
    let credits = Syndrome::CREDITS_INVALID;
    respond(&a, FIRST_PSN, Syndrome::Ack { credits }, 1)?;
    let wcs = wait_wcs(&cq, 1);
    match wcs.first() {
        Some(wc) if wc.status == ib_wc_status_IB_WC_SUCCESS && wr_id(wc) == 0xe1 => {}
        Some(_) => return Err("the first WRITE completed in error"),
        None => return Err("the ACK did not complete the first WRITE"),
    }
    if diag(&a, "rnr_wait") != 0 {
        pr_err!(
            "after the ACK: una {:#x} psn {:#x}\n",
            diag(&a, "una"),
            diag(&a, "psn")
        );
        return Err("the ACK of everything sent left the QP in its RNR wait");
    }
    w.wr.__bindgen_anon_1.wr_id = 0xe2;
    if a.post_send(&w.wr).0 != 0 {
        return Err("post_send of the second WRITE failed");
    }
    // Well before the RNR timer would have run out.
    let sent = (0..10).any(|_| {
        fsleep(Delta::from_millis(10));
        diag(&a, "psn") == FIRST_PSN + 2
    });
    a.to_error()?;
    let _ = wait_wcs(&cq, 1);
    if !sent {
        return Err("the next WRITE was not sent");
    }
    Ok(())
}
