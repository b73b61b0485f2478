// SPDX-License-Identifier: GPL-2.0

//! Per-device packet counters, read with `rdma statistic` (the RDMA core's
//! hw_counters: `alloc_hw_port_stats` and `get_hw_stats`).

use core::sync::atomic::{AtomicU64, Ordering};

use crate::rdma::sys;

/// What is counted. The names follow rdma_rxe's where the meaning is the
/// same.
#[derive(Clone, Copy)]
pub(crate) enum Counter {
    /// Packets handed to the IP stack.
    SentPkts,
    /// RoCEv2 packets received for the device.
    RcvdPkts,
    /// Requests at a PSN already processed (re-ACKed or replayed).
    DupRequest,
    /// Requests ahead of the expected PSN (PSN sequence NAKs sent).
    OutOfSeqRequest,
    /// RNR NAKs received by the requester.
    RcvdRnrErr,
    /// RNR NAKs sent by the responder.
    SendRnrErr,
    /// Retransmissions (go-back-N restarts).
    Retransmits,
    /// Packets dropped for a bad ICRC.
    BadIcrc,
    /// Packets dropped as malformed (headers, lengths, opcode).
    Malformed,
    /// Packets for no QP of the device (or a QP that does not take them).
    NoQp,
    /// Packets not sent for lack of a route.
    NoRoute,
    /// Datagrams dropped for a Q_Key other than the UD QP's.
    QkeyViolation,
    /// Datagrams dropped because the UD QP had no receive posted.
    UdNoRecv,
    /// Connected-QP packets whose IP addresses are not the QP's path.
    BadAddr,
    /// Packets whose BTH P_Key is not the port's.
    BadPkey,
    /// Opcodes the destination QP's type does not take.
    BadOpcode,
    /// Responses and ACKs for no outstanding request.
    UnexpectedResp,
    /// Duplicate READ/atomic requests that match no remembered request.
    BadDup,
    /// "Invalid request" NAKs sent.
    SentNakInvReq,
    /// "Remote access error" NAKs sent.
    SentNakRemAccess,
    /// ODP page faults the work items served (pages a copy needed).
    OdpFaults,
    /// Packets for the device that arrived in pieces (an skb with page
    /// fragments, as real NICs' receive buffers are) and were read in
    /// place, without linearizing.
    RcvdPaged,
    /// Packets handed to another CPU's receive thread
    /// (`engine::handover`).
    RcvdHanded,
    /// Packets dropped because the receive thread they were to be handed
    /// to had a full queue.
    RcvdHandoverFull,
    /// Doorbells that handed their QP's transmit to another CPU's receive
    /// thread: a stream of small messages (`engine::handover::Doorbells`,
    /// module parameter `tx_stream`).
    TxStreamed,
    /// Sends of a QP's requests that found them to leave from another
    /// CPU, the one its requests in flight left from, and kicked the
    /// transmit there (`QpState::flush_lane`; a kick may find one already
    /// pending). A small stream's doorbell handing its transmit over is
    /// `TxStreamed`.
    TxKickedHome,
    /// Packets built with their payload as page fragments of the user MR
    /// it lies in instead of a copy (`transport::ZcPayload`, module
    /// parameter `tx_zerocopy`).
    SentZerocopy,
}

/// Number of counters.
pub(crate) const COUNT: usize = 27;

/// The names `rdma statistic` shows, in [`Counter`] order (NUL-terminated).
const NAMES: [&[u8]; COUNT] = [
    b"sent_pkts\0",
    b"rcvd_pkts\0",
    b"duplicate_request\0",
    b"out_of_seq_request\0",
    b"rcvd_rnr_err\0",
    b"send_rnr_err\0",
    b"retransmits\0",
    b"rcvd_bad_icrc\0",
    b"rcvd_malformed\0",
    b"rcvd_no_qp\0",
    b"send_no_route\0",
    b"rcvd_bad_qkey\0",
    b"rcvd_ud_no_recv\0",
    b"rcvd_bad_addr\0",
    b"rcvd_bad_pkey\0",
    b"rcvd_bad_opcode\0",
    b"rcvd_unexpected_resp\0",
    b"rcvd_bad_dup\0",
    b"sent_nak_inv_req\0",
    b"sent_nak_rem_access\0",
    b"odp_faults\0",
    b"rcvd_paged\0",
    b"rcvd_handed\0",
    b"rcvd_handover_full\0",
    b"tx_streamed\0",
    b"tx_kicked_home\0",
    b"sent_zerocopy\0",
];

/// The counters of one device; all zero is a valid initial value (the
/// core allocates devices zeroed).
pub(crate) struct Counters([AtomicU64; COUNT]);

impl Counters {
    /// Counts one `c`.
    pub(crate) fn inc(&self, c: Counter) {
        self.add(c, 1);
    }

    /// Counts `n` of `c` (the packets of a GSO run, say).
    pub(crate) fn add(&self, c: Counter, n: u64) {
        self.0[c as usize].fetch_add(n, Ordering::Relaxed);
    }

    /// The value of counter number `i`.
    pub(crate) fn get(&self, i: usize) -> u64 {
        self.0.get(i).map_or(0, |v| v.load(Ordering::Relaxed))
    }

    /// Reads every counter into `values`, in [`Counter`] order.
    pub(crate) fn read_into(&self, values: &mut [u64]) {
        for (i, v) in values.iter_mut().enumerate() {
            *v = self.get(i);
        }
    }
}

/// `struct rdma_stat_desc` entries pointing at the static names.
struct Descs([sys::rdma_stat_desc; COUNT]);

// SAFETY: read-only after construction; the pointers are to static strings.
unsafe impl Sync for Descs {}

const fn descs() -> Descs {
    let mut d = [sys::rdma_stat_desc {
        name: core::ptr::null(),
        flags: 0,
        priv_: core::ptr::null(),
    }; COUNT];
    let mut i = 0;
    while i < COUNT {
        d[i].name = NAMES[i].as_ptr();
        i += 1;
    }
    Descs(d)
}

static DESCS: Descs = descs();

/// The counters' descriptions for `rdma_alloc_hw_stats_struct`, in
/// [`Counter`] order.
pub(crate) fn descriptors() -> &'static [sys::rdma_stat_desc; COUNT] {
    &DESCS.0
}
