// SPDX-License-Identifier: GPL-2.0

//! Device limits, as query_device/query_port report them and rroce enforces
//! them.

use super::Sge;
use core::mem::size_of;

/// QPs per device.
pub const MAX_QP: u32 = 0x10000;
/// Lowest QPN of a normal QP (0 and 1 are SMI and GSI).
pub const MIN_QP_INDEX: u32 = 16;
/// WRs per SQ or RQ (ring: 32768 slots of at most 1 KiB).
pub const MAX_QP_WR: u32 = 0x4000;
/// SGEs per send WR.
pub const MAX_SEND_SGE: u32 = 32;
/// SGEs per receive WR.
pub const MAX_RECV_SGE: u32 = 32;
/// SGEs per RDMA READ WR.
pub const MAX_SGE_RD: u32 = 32;
/// Inline bytes per send WR (the SGE area of a full-size WQE).
pub const MAX_INLINE_DATA: u32 = 512;
/// CQs per device.
pub const MAX_CQ: u32 = 0x4000;
/// CQEs per CQ (ring: 32768 slots of 64 bytes).
pub const MAX_CQE: u32 = 0x7fff;
/// SRQs per device.
pub const MAX_SRQ: u32 = 0x4000;
/// WRs per SRQ.
pub const MAX_SRQ_WR: u32 = 0x4000;
/// SGEs per SRQ WR.
pub const MAX_SRQ_SGE: u32 = 32;
/// PDs per device.
pub const MAX_PD: u32 = 0x7ffc;
/// MRs per device.
pub const MAX_MR: u32 = 0x4000;
/// MWs per device.
pub const MAX_MW: u32 = 0x4000;
/// Bytes per MR: no limit of its own (pinning limits apply).
pub const MAX_MR_SIZE: u64 = u64::MAX;
/// Supported MR page sizes: 4 KiB to 2 GiB.
pub const PAGE_SIZE_CAP: u32 = 0xffff_f000;
/// Pages per fast-register WR.
pub const MAX_FAST_REG_PAGE_LIST_LEN: u32 = 512;
/// AHs per device.
pub const MAX_AH: u32 = 0x3fff;
/// Lowest `ah_num` (0 means "no AH index").
pub const MIN_AH_INDEX: u32 = 1;
/// Responder RDMA READ/atomic resources per QP.
pub const MAX_QP_RD_ATOM: u32 = 128;
/// Initiator RDMA READ/atomic depth per QP.
pub const MAX_QP_INIT_RD_ATOM: u32 = 128;
/// Responder RDMA READ/atomic resources per device.
pub const MAX_RES_RD_ATOM: u32 = 0x3f000;
/// UD multicast groups per device.
pub const MAX_MCAST_GRP: u32 = 1024;
/// QPs per multicast group.
pub const MAX_MCAST_QP_ATTACH: u32 = 56;
/// Multicast attachments per device.
pub const MAX_TOTAL_MCAST_QP_ATTACH: u32 = 16384;
/// P_Key table entries (0xffff only).
pub const MAX_PKEYS: u32 = 1;
/// GID table entries per port.
pub const GID_TBL_LEN: u32 = 1024;
/// Largest IB MTU in bytes (`IB_MTU_4096`).
pub const MAX_MTU: u32 = 4096;
/// Bytes per message (2 GiB).
pub const MAX_MSG_SIZE: u32 = 0x8000_0000;
/// Local CA ACK delay (4.096 us * 2^15).
pub const LOCAL_CA_ACK_DELAY: u32 = 15;
/// Vendor id (IBTA: no OUI).
pub const VENDOR_ID: u32 = 0xff_ffff;

// Limits that follow from the layout.
const _: () = {
    assert!(MAX_INLINE_DATA as usize == MAX_SEND_SGE as usize * size_of::<Sge>());
    assert!(MIN_AH_INDEX > 0);
};
