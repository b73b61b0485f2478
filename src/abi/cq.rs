// SPDX-License-Identifier: GPL-2.0

//! Completion queue: the CREATE_CQ / RESIZE_CQ responses, the CQE the
//! kernel writes into the ring and the values of its status, opcode and
//! flag fields.

use super::Codec;
use super::MmapInfo;
use core::mem::{offset_of, size_of};

/// `struct rroce_create_cq_resp`: driver part of the CREATE_CQ response.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CreateCqResp {
    /// Kernel: the CQ ring.
    pub mi: MmapInfo,
}

codec_struct!(CreateCqResp { mi });

/// `struct rroce_resize_cq_resp`: driver part of the RESIZE_CQ response.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResizeCqResp {
    /// Kernel: the new CQ ring; user space unmaps the old one.
    pub mi: MmapInfo,
}

codec_struct!(ResizeCqResp { mi });

to_bytes!(CreateCqResp, ResizeCqResp);

/// Size of a CQE.
pub const CQE_SIZE: usize = 48;

/// `struct rroce_cqe` (`struct ib_uverbs_wc`): a CQ element. librxe copies
/// it into `struct ibv_wc` unchanged. Written by the kernel only.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cqe {
    /// The WQE's `wr_id`.
    pub wr_id: u64,
    /// `WC_*` status.
    pub status: u32,
    /// `WC_*` opcode.
    pub opcode: u32,
    /// 0.
    pub vendor_err: u32,
    /// Bytes transferred.
    pub byte_len: u32,
    /// The `ex` union as its raw memory value: with [`WC_WITH_IMM`] the
    /// immediate data, `u32::from_ne_bytes(wire_bytes)`; with
    /// [`WC_WITH_INV`] the invalidated rkey.
    pub ex: u32,
    /// The local QP number.
    pub qp_num: u32,
    /// UD receives: the sender's QPN.
    pub src_qp: u32,
    /// `WC_*` flags (libibverbs encoding).
    pub wc_flags: u32,
    /// 0.
    pub pkey_index: u16,
    /// 0 (RoCE has no LIDs).
    pub slid: u16,
    /// 0.
    pub sl: u8,
    /// 0.
    pub dlid_path_bits: u8,
    /// 1 on receives (not part of `struct ibv_wc`).
    pub port_num: u8,
    /// 0.
    pub reserved: u8,
}

codec_struct!(Cqe {
    wr_id,
    status,
    opcode,
    vendor_err,
    byte_len,
    ex,
    qp_num,
    src_qp,
    wc_flags,
    pkey_index,
    slid,
    sl,
    dlid_path_bits,
    port_num,
    reserved
});

impl Cqe {
    /// The CQE's byte image, to be copied into a CQ slot.
    pub fn to_bytes(&self) -> [u8; CQE_SIZE] {
        let mut b = [0u8; CQE_SIZE];
        let _ = self.encode(&mut b);
        b
    }

    /// Decodes a CQE; `None` if `b` is too short.
    pub fn from_bytes(b: &[u8]) -> Option<Self> {
        Self::decode(b)
    }
}

/// `Cqe::status` (`enum ib_wc_status` == `enum ibv_wc_status`): success.
pub const WC_SUCCESS: u32 = 0;
/// Local length error.
pub const WC_LOC_LEN_ERR: u32 = 1;
/// Local QP operation error.
pub const WC_LOC_QP_OP_ERR: u32 = 2;
/// Local EE context operation error.
pub const WC_LOC_EEC_OP_ERR: u32 = 3;
/// Local protection error.
pub const WC_LOC_PROT_ERR: u32 = 4;
/// Work request flushed.
pub const WC_WR_FLUSH_ERR: u32 = 5;
/// Memory window bind error.
pub const WC_MW_BIND_ERR: u32 = 6;
/// Bad response.
pub const WC_BAD_RESP_ERR: u32 = 7;
/// Local access error.
pub const WC_LOC_ACCESS_ERR: u32 = 8;
/// Remote invalid request.
pub const WC_REM_INV_REQ_ERR: u32 = 9;
/// Remote access error.
pub const WC_REM_ACCESS_ERR: u32 = 10;
/// Remote operation error.
pub const WC_REM_OP_ERR: u32 = 11;
/// Transport retry counter exceeded.
pub const WC_RETRY_EXC_ERR: u32 = 12;
/// RNR retry counter exceeded.
pub const WC_RNR_RETRY_EXC_ERR: u32 = 13;
/// Local RDD violation.
pub const WC_LOC_RDD_VIOL_ERR: u32 = 14;
/// Remote invalid RD request.
pub const WC_REM_INV_RD_REQ_ERR: u32 = 15;
/// Remote aborted.
pub const WC_REM_ABORT_ERR: u32 = 16;
/// Invalid EE context number.
pub const WC_INV_EECN_ERR: u32 = 17;
/// Invalid EE context state.
pub const WC_INV_EEC_STATE_ERR: u32 = 18;
/// Fatal error.
pub const WC_FATAL_ERR: u32 = 19;
/// Response timeout.
pub const WC_RESP_TIMEOUT_ERR: u32 = 20;
/// General error.
pub const WC_GENERAL_ERR: u32 = 21;

/// `Cqe::opcode` (`IB_UVERBS_WC_*` == `IBV_WC_*`): SEND completed.
pub const WC_SEND: u32 = 0;
/// RDMA WRITE completed.
pub const WC_RDMA_WRITE: u32 = 1;
/// RDMA READ completed.
pub const WC_RDMA_READ: u32 = 2;
/// Compare and swap completed.
pub const WC_COMP_SWAP: u32 = 3;
/// Fetch and add completed.
pub const WC_FETCH_ADD: u32 = 4;
/// Memory window bind completed.
pub const WC_BIND_MW: u32 = 5;
/// Local invalidate completed.
pub const WC_LOCAL_INV: u32 = 6;
/// TSO completed.
pub const WC_TSO: u32 = 7;
/// FLUSH completed.
pub const WC_FLUSH: u32 = 8;
/// ATOMIC WRITE completed.
pub const WC_ATOMIC_WRITE: u32 = 9;
/// A receive completed (test with `opcode & WC_RECV`).
pub const WC_RECV: u32 = 1 << 7;
/// An RDMA WRITE with immediate consumed a receive.
pub const WC_RECV_RDMA_WITH_IMM: u32 = WC_RECV + 1;

/// `Cqe::wc_flags` in the libibverbs encoding (`enum ibv_wc_flags`): a GRH
/// precedes the receive data (always, on RoCE).
pub const WC_GRH: u32 = 1 << 0;
/// `Cqe::ex` holds immediate data.
pub const WC_WITH_IMM: u32 = 1 << 1;
/// IP checksum verified (never set by rroce).
pub const WC_IP_CSUM_OK: u32 = 1 << 2;
/// `Cqe::ex` holds an invalidated rkey. The kernel's own
/// `IB_WC_WITH_INVALIDATE` is bit 2, which applications read as
/// [`WC_IP_CSUM_OK`]; rxe writes that, rroce writes this.
pub const WC_WITH_INV: u32 = 1 << 3;

// Compile-time layout checks (the full comparison with the C header is
// tests/abi_layout.rs).
const _: () = {
    assert!(size_of::<CreateCqResp>() == 16);
    assert!(size_of::<ResizeCqResp>() == 16);
    assert!(size_of::<Cqe>() == CQE_SIZE);
    assert!(offset_of!(Cqe, ex) == 24);
    assert!(offset_of!(Cqe, wc_flags) == 36);
    assert!(offset_of!(Cqe, slid) == 42);
    assert!(offset_of!(Cqe, port_num) == 46);
};
