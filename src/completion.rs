// SPDX-License-Identifier: GPL-2.0

//! Work completions: what the transport reports when a WQE retires.
//!
//! The transport builds a [`Completion`] (typed status, opcode and extra
//! data) and converts it once, at the CQ: to the user CQE ring layout
//! ([`Completion::to_cqe`], `struct ib_uverbs_wc`) for a CQ a process has
//! mapped, or to `struct ib_wc` ([`Completion::to_ib_wc`]) for a kernel
//! consumer's CQ. The flag encodings of both live here and in `abi` only.

use crate::{abi, rdma::sys};

/// Completion status (`enum ib_wc_status` == `enum ibv_wc_status`): the
/// values rroce reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WcStatus {
    /// The WQE completed.
    Success,
    /// Local length error.
    LocLenErr,
    /// Local QP operation error (an invalid WQE).
    LocQpOpErr,
    /// Local protection error (an SGE failed its MR check).
    LocProtErr,
    /// Flushed by the error state.
    WrFlushErr,
    /// Bad response (unexpected opcode, length or position).
    BadRespErr,
    /// The responder NAKed an invalid request.
    RemInvReqErr,
    /// The responder NAKed a remote access error.
    RemAccessErr,
    /// The responder NAKed a remote operational error.
    RemOpErr,
    /// The transport retry budget ran out.
    RetryExcErr,
    /// The RNR retry budget ran out.
    RnrRetryExcErr,
    /// A BIND_MW work request was refused.
    MwBindErr,
}

impl WcStatus {
    /// The status value (the same in the user and the kernel encoding).
    pub(crate) const fn raw(self) -> u32 {
        match self {
            Self::Success => abi::WC_SUCCESS,
            Self::LocLenErr => abi::WC_LOC_LEN_ERR,
            Self::LocQpOpErr => abi::WC_LOC_QP_OP_ERR,
            Self::LocProtErr => abi::WC_LOC_PROT_ERR,
            Self::WrFlushErr => abi::WC_WR_FLUSH_ERR,
            Self::BadRespErr => abi::WC_BAD_RESP_ERR,
            Self::RemInvReqErr => abi::WC_REM_INV_REQ_ERR,
            Self::RemAccessErr => abi::WC_REM_ACCESS_ERR,
            Self::RemOpErr => abi::WC_REM_OP_ERR,
            Self::RetryExcErr => abi::WC_RETRY_EXC_ERR,
            Self::RnrRetryExcErr => abi::WC_RNR_RETRY_EXC_ERR,
            Self::MwBindErr => abi::WC_MW_BIND_ERR,
        }
    }
}

/// Completion opcode (`enum ib_wc_opcode` == `enum ibv_wc_opcode`): the
/// values rroce reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WcOpcode {
    /// A SEND (with immediate or invalidate) completed.
    Send,
    /// An RDMA WRITE (with immediate) completed.
    RdmaWrite,
    /// An RDMA READ completed.
    RdmaRead,
    /// A compare-and-swap completed.
    CompSwap,
    /// A fetch-and-add completed.
    FetchAdd,
    /// A LOCAL_INV completed.
    LocalInv,
    /// A REG_MR completed (kernel consumers only).
    RegMr,
    /// An ATOMIC WRITE completed.
    AtomicWrite,
    /// A BIND_MW completed.
    BindMw,
    /// A receive WQE took a SEND or a datagram.
    Recv,
    /// A receive WQE took an RDMA WRITE with immediate.
    RecvRdmaWithImm,
}

impl WcOpcode {
    /// The opcode value (the same in the user and the kernel encoding).
    pub(crate) const fn raw(self) -> u32 {
        match self {
            Self::Send => abi::WC_SEND,
            Self::RdmaWrite => abi::WC_RDMA_WRITE,
            Self::RdmaRead => abi::WC_RDMA_READ,
            Self::CompSwap => abi::WC_COMP_SWAP,
            Self::FetchAdd => abi::WC_FETCH_ADD,
            Self::LocalInv => abi::WC_LOCAL_INV,
            Self::RegMr => sys::ib_wc_opcode_IB_WC_REG_MR,
            Self::AtomicWrite => abi::WC_ATOMIC_WRITE,
            Self::BindMw => abi::WC_BIND_MW,
            Self::Recv => abi::WC_RECV,
            Self::RecvRdmaWithImm => abi::WC_RECV_RDMA_WITH_IMM,
        }
    }
}

// The user ABI values are the kernel's: one conversion serves both.
const _: () = {
    assert!(abi::WC_SUCCESS == sys::ib_wc_status_IB_WC_SUCCESS);
    assert!(abi::WC_LOC_LEN_ERR == sys::ib_wc_status_IB_WC_LOC_LEN_ERR);
    assert!(abi::WC_LOC_QP_OP_ERR == sys::ib_wc_status_IB_WC_LOC_QP_OP_ERR);
    assert!(abi::WC_LOC_PROT_ERR == sys::ib_wc_status_IB_WC_LOC_PROT_ERR);
    assert!(abi::WC_WR_FLUSH_ERR == sys::ib_wc_status_IB_WC_WR_FLUSH_ERR);
    assert!(abi::WC_BAD_RESP_ERR == sys::ib_wc_status_IB_WC_BAD_RESP_ERR);
    assert!(abi::WC_REM_INV_REQ_ERR == sys::ib_wc_status_IB_WC_REM_INV_REQ_ERR);
    assert!(abi::WC_REM_ACCESS_ERR == sys::ib_wc_status_IB_WC_REM_ACCESS_ERR);
    assert!(abi::WC_REM_OP_ERR == sys::ib_wc_status_IB_WC_REM_OP_ERR);
    assert!(abi::WC_RETRY_EXC_ERR == sys::ib_wc_status_IB_WC_RETRY_EXC_ERR);
    assert!(abi::WC_RNR_RETRY_EXC_ERR == sys::ib_wc_status_IB_WC_RNR_RETRY_EXC_ERR);
    assert!(abi::WC_SEND == sys::ib_wc_opcode_IB_WC_SEND);
    assert!(abi::WC_RDMA_WRITE == sys::ib_wc_opcode_IB_WC_RDMA_WRITE);
    assert!(abi::WC_RDMA_READ == sys::ib_wc_opcode_IB_WC_RDMA_READ);
    assert!(abi::WC_COMP_SWAP == sys::ib_wc_opcode_IB_WC_COMP_SWAP);
    assert!(abi::WC_FETCH_ADD == sys::ib_wc_opcode_IB_WC_FETCH_ADD);
    assert!(abi::WC_LOCAL_INV == sys::ib_wc_opcode_IB_WC_LOCAL_INV);
    assert!(abi::WC_ATOMIC_WRITE == sys::ib_wc_opcode_IB_WC_ATOMIC_WRITE);
    assert!(abi::WC_BIND_MW == sys::ib_wc_opcode_IB_WC_BIND_MW);
    assert!(abi::WC_MW_BIND_ERR == sys::ib_wc_status_IB_WC_MW_BIND_ERR);
    assert!(abi::WC_RECV == sys::ib_wc_opcode_IB_WC_RECV);
    assert!(abi::WC_RECV_RDMA_WITH_IMM == sys::ib_wc_opcode_IB_WC_RECV_RDMA_WITH_IMM);
};

/// The extra word of a completion (the `ex` union).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum WcEx {
    /// None.
    #[default]
    None,
    /// Immediate data, as its raw memory value
    /// (`u32::from_ne_bytes(wire_bytes)`).
    Imm(u32),
    /// The rkey a SEND with invalidate named (and invalidated).
    Inv(u32),
}

/// A work completion, as the transport reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Completion {
    /// The WQE's `wr_id`.
    pub(crate) wr_id: u64,
    /// How it ended.
    pub(crate) status: WcStatus,
    /// What completed.
    pub(crate) opcode: WcOpcode,
    /// Bytes transferred.
    pub(crate) byte_len: u32,
    /// Immediate data or invalidated rkey.
    pub(crate) ex: WcEx,
    /// The local QP number.
    pub(crate) qp_num: u32,
    /// The sending QP's number (receives).
    pub(crate) src_qp: u32,
    /// A datagram: its GRH area is filled, and its network type (an
    /// `enum rdma_network_type`) is this.
    pub(crate) grh: Option<u8>,
    /// The port (1 on datagram receives, else 0).
    pub(crate) port_num: u8,
}

impl Completion {
    /// A completion of `opcode` with `status` for `wr_id` on QP `qp_num`;
    /// the other fields are zero.
    pub(crate) const fn new(wr_id: u64, status: WcStatus, opcode: WcOpcode, qp_num: u32) -> Self {
        Self {
            wr_id,
            status,
            opcode,
            byte_len: 0,
            ex: WcEx::None,
            qp_num,
            src_qp: 0,
            grh: None,
            port_num: 0,
        }
    }

    /// Whether it reports an error.
    pub(crate) fn is_error(&self) -> bool {
        self.status != WcStatus::Success
    }

    /// The `ex` word and its flag in the user encoding.
    const fn ex_raw(&self) -> (u32, u32) {
        match self.ex {
            WcEx::None => (0, 0),
            WcEx::Imm(v) => (v, abi::WC_WITH_IMM),
            WcEx::Inv(k) => (k, abi::WC_WITH_INV),
        }
    }

    /// The user CQE (`struct rroce_cqe`) of this completion.
    pub(crate) fn to_cqe(self) -> abi::Cqe {
        let (ex, mut wc_flags) = self.ex_raw();
        if self.grh.is_some() {
            wc_flags |= abi::WC_GRH;
        }
        abi::Cqe {
            wr_id: self.wr_id,
            status: self.status.raw(),
            opcode: self.opcode.raw(),
            byte_len: self.byte_len,
            ex,
            qp_num: self.qp_num,
            src_qp: self.src_qp,
            wc_flags,
            port_num: self.port_num,
            ..Default::default()
        }
    }

    /// The completion as a kernel consumer polls it: `struct ib_wc`, with
    /// the QP pointer `qp` and the kernel's flag encoding.
    pub(crate) fn to_ib_wc(self, qp: *mut sys::ib_qp) -> sys::ib_wc {
        // SAFETY: all-zero is a valid `ib_wc`.
        let mut wc: sys::ib_wc = unsafe { core::mem::zeroed() };
        let (ex, _) = self.ex_raw();
        wc.__bindgen_anon_1.wr_id = self.wr_id;
        wc.status = self.status.raw();
        wc.opcode = self.opcode.raw();
        wc.byte_len = self.byte_len;
        wc.qp = qp;
        wc.ex.invalidate_rkey = ex;
        wc.src_qp = self.src_qp;
        let mut flags = match self.ex {
            WcEx::None => 0,
            WcEx::Imm(_) => sys::ib_wc_flags_IB_WC_WITH_IMM,
            WcEx::Inv(_) => sys::ib_wc_flags_IB_WC_WITH_INVALIDATE,
        };
        if self.grh.is_some() {
            flags |= sys::ib_wc_flags_IB_WC_GRH;
        }
        wc.wc_flags = flags as i32;
        wc.port_num = u32::from(self.port_num);
        if let Some(net) = self.grh {
            // A datagram: the MAD layer and the CM read the GRH area by it.
            wc.network_hdr_type = net;
            wc.wc_flags |= sys::ib_wc_flags_IB_WC_WITH_NETWORK_HDR_TYPE as i32;
        }
        wc
    }
}
