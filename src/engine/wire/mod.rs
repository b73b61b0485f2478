// SPDX-License-Identifier: GPL-2.0

//! RoCEv2 transport headers: the opcode table, a zero-copy parser and a
//! builder.
//!
//! A RoCEv2 packet is a UDP datagram to port 4791 whose payload is an
//! InfiniBand transport packet:
//!
//! ```text
//! | BTH (12) | extension headers (0..28) | payload | pad (0..3) | ICRC (4) |
//! ```
//!
//! The opcode in the base transport header (BTH) selects the transport
//! (RC, UC, UD, or a congestion notification packet) and which extension
//! headers follow, in a fixed order. [`Opcode::info`] gives that per opcode,
//! following the IBTA opcode table as the kernel's rdma_rxe implements it
//! (`drivers/infiniband/sw/rxe/rxe_opcode.c`, `rxe_hdr.h`,
//! `include/rdma/ib_pack.h`).
//!
//! [`parse`] takes the UDP payload, checks everything that can be checked
//! without per-QP state (see `Documentation/wire-format.rst`) and returns a
//! [`Packet`] that borrows the header bytes and the payload. [`build`] and
//! [`build_headers`] write a packet from decoded [`Headers`]; whatever the
//! builder accepts, the parser accepts and decodes to the same headers.
//!
//! Nothing here panics on any input: lengths are checked before every access
//! and all arithmetic on them is checked.
//!
//! The code is split by role: `opcode` holds the opcode table, `headers`
//! the decoded headers and their field codecs, `codec` the whole-packet
//! [`parse`] and [`build`]; this file holds the wire constants and
//! re-exports the three, so users name everything as `wire::X`. The
//! `selftest` checks (shared with KUnit) are only built for tests.

// The submodules take the constants and `Psn` from here with `use super::*`.
use super::psn::Psn;

/// UDP destination port of RoCEv2.
pub const ROCE_V2_UDP_PORT: u16 = 4791;

/// Length of the base transport header.
pub const BTH_LEN: usize = 12;
/// Length of the RDMA extended transport header.
pub const RETH_LEN: usize = 16;
/// Length of the ACK extended transport header.
pub const AETH_LEN: usize = 4;
/// Length of the atomic extended transport header.
pub const ATOMIC_ETH_LEN: usize = 28;
/// Length of the atomic ACK extended transport header.
pub const ATOMIC_ACK_ETH_LEN: usize = 8;
/// Length of the immediate data header.
pub const IMM_DT_LEN: usize = 4;
/// Length of the invalidate extended transport header.
pub const IETH_LEN: usize = 4;
/// Length of the datagram extended transport header.
pub const DETH_LEN: usize = 8;
/// Length of the flush extended transport header.
pub const FETH_LEN: usize = 4;
/// Length of the reserved block that follows the BTH of a CNP.
pub const CNP_RSVD_LEN: usize = 16;
/// Longest header (BTH + extension headers) of any known opcode.
pub const MAX_HDR_LEN: usize = BTH_LEN + ATOMIC_ETH_LEN;

/// Mask of a 24-bit queue pair number.
pub const QPN_MASK: u32 = 0x00ff_ffff;
/// Destination QPN of multicast packets.
pub const MULTICAST_QPN: u32 = 0x00ff_ffff;
/// The default P_Key.
pub const DEFAULT_PKEY: u16 = 0xffff;
/// Q_Key of the general services interface (QP1).
pub const GSI_QKEY: u32 = 0x8001_0000;

mod codec;
mod headers;
mod opcode;

pub use codec::*;
pub use headers::*;
pub use opcode::*;

#[cfg(any(test, CONFIG_KUNIT))]
pub mod selftest;

#[cfg(test)]
mod tests;
