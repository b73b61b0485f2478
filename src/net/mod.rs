// SPDX-License-Identifier: GPL-2.0

//! RoCEv2 encapsulation: UDP tunnel sockets, received and sent packets.
//!
//! Every network namespace with an rroce device has a UDP tunnel socket on
//! port 4791 for IPv4 and one for IPv6 (created with the namespace's first
//! device, released with its last). Only one socket per namespace can own
//! the port: a namespace where rdma_rxe already listens gets a clear error
//! at `rdma link add` (see `Documentation/device.rst`).
//!
//! Received packets arrive in softirq context through the tunnel's
//! `encap_rcv` (`sock.rs`); with their headers pulled into the linear
//! part, they are handed to the receive path (`crate::recv`) as a
//! [`Received`] packet (`skb.rs`, so that the receive path names only the
//! skb layer), read where they lie: the linear part and each page fragment
//! (a real NIC's receive buffers) are pieces of one
//! `engine::scatter::Scatter`, which the ICRC check, the parser and the
//! copies into memory regions walk without linearizing it (only a frag
//! list, or a fragment in unmapped highmem, is linearized). Outgoing packets are built
//! by the transport into an skb that has room for the IP and UDP headers
//! (`skb.rs`), which the C helper pushes after the route lookup (as
//! rdma_rxe's `prepare4/6`); the ICRC is computed over the final packet
//! there, then `ip_local_out` sends it.
//!
//! Large received packets may be processed by another CPU's receive
//! thread rather than in the softirq that received them (`rxq.rs`; the
//! receive path decides, see `engine::handover`): with both ends of a
//! connection on one host, the sender's and the receiver's passes over
//! the payload then run on two CPUs.

mod rxq;
pub(crate) mod skb;
mod sock;

/// Module unload, after every device: the receive threads are gone (the
/// last device's sockets took them along; this stops them if a device
/// stayed).
pub(crate) fn exit() {
    rxq::stop();
}
pub(crate) use skb::net_of;
pub(crate) use sock::{get, init, put};
