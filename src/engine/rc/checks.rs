// SPDX-License-Identifier: GPL-2.0

//! The receive path's checks of a packet against its destination QP, as
//! rdma_rxe's `rxe_recv.c` makes them (`check_type_state`, `check_addr`,
//! `check_keys`), and the completer's test for a response nobody asked
//! for.
//!
//! Each returns a plain yes or no; the kernel side counts the drop in its
//! `rdma statistic` counter (`rcvd_bad_opcode`, `rcvd_bad_addr`,
//! `rcvd_bad_pkey`, `rcvd_unexpected_resp`).

use crate::engine::{psn::Psn, wire::Transport};

/// Whether a packet's BTH P_Key `pkt` matches the port's `port` P_Key
/// (IBTA 10.9.3, rxe's `pkey_match`): the same 15-bit key, not the invalid
/// key 0, and at least one side a full member (bit 15). With the default
/// P_Key 0xffff this takes 0xffff and the limited 0x7fff.
pub const fn pkey_matches(pkt: u16, port: u16) -> bool {
    let (a, b) = (pkt & 0x7fff, port & 0x7fff);
    a != 0 && a == b && (pkt & 0x8000 != 0 || port & 0x8000 != 0)
}

/// Whether a packet of `transport` may go to a QP whose service is `qp`
/// (RC, UC, or UD for UD and GSI QPs): only its own transport's opcodes;
/// CNPs go to no QP (see [`is_notification`]).
pub const fn opcode_fits_qp(transport: Transport, qp: Transport) -> bool {
    matches!(
        (transport, qp),
        (Transport::Rc, Transport::Rc)
            | (Transport::Uc, Transport::Uc)
            | (Transport::Ud, Transport::Ud)
    )
}

/// Whether packets of `transport` are congestion notifications: valid
/// RoCEv2 traffic rroce does not act on (dropped, not counted as a bad
/// opcode).
pub const fn is_notification(transport: Transport) -> bool {
    matches!(transport, Transport::Cnp)
}

/// Whether a connected QP's packet came over its path: the packet's IP
/// source (as a GID, IPv4-mapped for IPv4) is the QP's destination GID
/// `av_dgid` and its IP destination is the QP's source GID `av_sgid`.
pub fn path_matches(
    src: &[u8; 16],
    dst: &[u8; 16],
    av_dgid: &[u8; 16],
    av_sgid: &[u8; 16],
) -> bool {
    src == av_dgid && dst == av_sgid
}

/// Whether a response (ACK, NAK, READ response, atomic ACK) at `psn` can
/// answer a request: something is outstanding (`una` before `max_psn`, one
/// past the highest PSN sent) and `psn` is not beyond what was sent. A
/// response behind `una` is a stale duplicate of one already counted, or a
/// READ response from before a rewind: dropped, but not unexpected.
pub const fn response_expected(psn: Psn, una: Psn, max_psn: Psn) -> bool {
    if una.get() == max_psn.get() {
        return false;
    }
    // Behind `una` (stale) is fine; at or past `max_psn` was never sent.
    psn.diff(una) < 0 || psn.diff(max_psn) < 0
}
