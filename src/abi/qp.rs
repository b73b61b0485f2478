// SPDX-License-Identifier: GPL-2.0

//! Queue pair: the CREATE_QP response and the work request part of a send
//! WQE (`SendWr` and its opcode-dependent union), with the values of its
//! opcode and flag fields.

use super::Codec;
use super::{Av, MmapInfo};
use core::mem::{offset_of, size_of};

/// `struct rroce_create_qp_resp`: driver part of the CREATE_QP response (the
/// driver command input is empty).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CreateQpResp {
    /// Kernel: the RQ ring; size 0 and ignored when the QP uses an SRQ.
    pub rq_mi: MmapInfo,
    /// Kernel: the SQ ring.
    pub sq_mi: MmapInfo,
}

codec_struct!(CreateQpResp { rq_mi, sq_mi });

to_bytes!(CreateQpResp);

/// `struct rroce_wr_flush`: `wr.flush` (`WR_FLUSH`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WrFlush {
    /// User; kernel validates against the rkey's MR.
    pub remote_addr: u64,
    /// User; kernel validates.
    pub length: u32,
    /// User; kernel looks it up.
    pub rkey: u32,
    /// User: `IB_FLUSH_*` type; kernel validates.
    pub r#type: u8,
    /// User: `IB_FLUSH_*` level; kernel validates.
    pub level: u8,
    /// Implicit padding in rxe; kernel ignores.
    pub reserved: [u8; 6],
}

codec_struct!(WrFlush {
    remote_addr,
    length,
    rkey,
    r#type,
    level,
    reserved
});

/// `struct rroce_wr_rdma`: `wr.rdma` (RDMA WRITE, WRITE_WITH_IMM, READ).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WrRdma {
    /// User; the responder validates it.
    pub remote_addr: u64,
    /// User; the responder validates it.
    pub rkey: u32,
    /// User writes 0; kernel ignores.
    pub reserved: u32,
}

codec_struct!(WrRdma {
    remote_addr,
    rkey,
    reserved
});

/// `struct rroce_wr_atomic`: `wr.atomic` (CMP_AND_SWP, FETCH_AND_ADD).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WrAtomic {
    /// User; kernel requires 8-byte alignment.
    pub remote_addr: u64,
    /// User: compare (CMP_AND_SWP) or add (FETCH_AND_ADD) operand.
    pub compare_add: u64,
    /// User: swap operand.
    pub swap: u64,
    /// User; the responder validates it.
    pub rkey: u32,
    /// User writes 0; kernel ignores.
    pub reserved: u32,
}

codec_struct!(WrAtomic {
    remote_addr,
    compare_add,
    swap,
    rkey,
    reserved
});

/// `struct rroce_wr_ud`: `wr.ud` (sends on UD QPs).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WrUd {
    /// User; kernel masks it to 24 bits.
    pub remote_qpn: u32,
    /// User; bit 31 set means "use the QP's Q_Key".
    pub remote_qkey: u32,
    /// User writes 0; kernel ignores.
    pub pkey_index: u16,
    /// User writes 0; kernel ignores.
    pub reserved: u16,
    /// User: from [`super::CreateAhResp::ah_num`]; kernel looks it up and checks
    /// the AH's PD against the QP's.
    pub ah_num: u32,
    /// User writes 0; kernel ignores.
    pub pad: [u32; 4],
    /// User (old-kernel path only); kernel ignores.
    pub av: Av,
}

codec_struct!(WrUd {
    remote_qpn,
    remote_qkey,
    pkey_index,
    reserved,
    ah_num,
    pad,
    av
});

/// `struct rroce_wr_mw`: `wr.mw` (BIND_MW).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WrMw {
    /// User; kernel validates against the MR.
    pub addr: u64,
    /// User; kernel validates against the MR.
    pub length: u64,
    /// User: the MR's lkey; kernel looks it up.
    pub mr_lkey: u32,
    /// User: the MW's current rkey; kernel looks it up.
    pub mw_rkey: u32,
    /// User: the new rkey; kernel checks its index bits.
    pub rkey: u32,
    /// User: `IBV_ACCESS_*`; kernel validates.
    pub access: u32,
}

codec_struct!(WrMw {
    addr,
    length,
    mr_lkey,
    mw_rkey,
    rkey,
    access
});

/// Size of [`WrUnion`], the opcode-dependent part of a send WR.
pub const WR_UNION_SIZE: usize = 120;

/// `union rroce_wr_union`: the opcode-dependent part of a send WR, as bytes;
/// the accessors decode one member.
#[repr(C, align(8))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WrUnion {
    /// The union's bytes.
    pub raw: [u8; WR_UNION_SIZE],
}

codec_struct!(WrUnion { raw });

impl Default for WrUnion {
    fn default() -> Self {
        Self {
            raw: [0; WR_UNION_SIZE],
        }
    }
}

macro_rules! wr_union_members {
    ($($get:ident, $from:ident: $t:ident;)*) => {
        impl WrUnion {
            $(
                #[doc = concat!("The `", stringify!($get), "` member.")]
                pub fn $get(&self) -> $t {
                    $t::decode(&self.raw).unwrap_or_default()
                }

                #[doc = concat!("A union holding `", stringify!($get), "` (other bytes zero).")]
                pub fn $from(m: &$t) -> Self {
                    let mut u = Self::default();
                    let _ = m.encode(&mut u.raw);
                    u
                }
            )*
        }
    };
}

wr_union_members! {
    flush, from_flush: WrFlush;
    rdma, from_rdma: WrRdma;
    atomic, from_atomic: WrAtomic;
    ud, from_ud: WrUd;
    mw, from_mw: WrMw;
}

/// `struct rroce_send_wr`: the work request part of a send WQE.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SendWr {
    /// User; the kernel copies it into the CQE unchanged.
    pub wr_id: u64,
    /// User: 0 (providers before the rename wrote `num_sge`); kernel ignores.
    pub reserved: u32,
    /// User: `WR_*`; kernel validates it against the QP type.
    pub opcode: u32,
    /// User: `SEND_*` flags; kernel validates them.
    pub send_flags: u32,
    /// User: the `ex` union as its raw memory value. `imm_data` (network
    /// order) is `ex.to_ne_bytes()`; `invalidate_rkey` is `ex` itself.
    pub ex: u32,
    /// User: member chosen by opcode and QP type.
    pub wr: WrUnion,
}

codec_struct!(SendWr {
    wr_id,
    reserved,
    opcode,
    send_flags,
    ex,
    wr
});

/// `SendWr::opcode` (`IB_UVERBS_WR_*` == `IBV_WR_*`): RDMA WRITE.
pub const WR_RDMA_WRITE: u32 = 0;
/// RDMA WRITE with immediate.
pub const WR_RDMA_WRITE_WITH_IMM: u32 = 1;
/// SEND.
pub const WR_SEND: u32 = 2;
/// SEND with immediate.
pub const WR_SEND_WITH_IMM: u32 = 3;
/// RDMA READ.
pub const WR_RDMA_READ: u32 = 4;
/// Atomic compare and swap.
pub const WR_ATOMIC_CMP_AND_SWP: u32 = 5;
/// Atomic fetch and add.
pub const WR_ATOMIC_FETCH_AND_ADD: u32 = 6;
/// Local invalidate.
pub const WR_LOCAL_INV: u32 = 7;
/// Bind memory window.
pub const WR_BIND_MW: u32 = 8;
/// SEND with invalidate.
pub const WR_SEND_WITH_INV: u32 = 9;
/// TSO (not supported by rxe or rroce).
pub const WR_TSO: u32 = 10;
/// RDMA READ with invalidate (`IBV_WR_DRIVER1` in libibverbs).
pub const WR_RDMA_READ_WITH_INV: u32 = 11;
/// Masked atomic compare and swap.
pub const WR_MASKED_ATOMIC_CMP_AND_SWP: u32 = 12;
/// Masked atomic fetch and add.
pub const WR_MASKED_ATOMIC_FETCH_AND_ADD: u32 = 13;
/// FLUSH.
pub const WR_FLUSH: u32 = 14;
/// ATOMIC WRITE.
pub const WR_ATOMIC_WRITE: u32 = 15;

/// `SendWr::send_flags` (`IB_SEND_*` == `IBV_SEND_*`): fence.
pub const SEND_FENCE: u32 = 1 << 0;
/// Generate a CQE.
pub const SEND_SIGNALED: u32 = 1 << 1;
/// Solicited event.
pub const SEND_SOLICITED: u32 = 1 << 2;
/// Data is inline after the header.
pub const SEND_INLINE: u32 = 1 << 3;
/// IP checksum offload (not supported).
pub const SEND_IP_CSUM: u32 = 1 << 4;

// Compile-time layout checks (the full comparison with the C header is
// tests/abi_layout.rs).
const _: () = {
    assert!(size_of::<CreateQpResp>() == 32);
    assert!(offset_of!(CreateQpResp, sq_mi) == 16);
    assert!(size_of::<WrFlush>() <= WR_UNION_SIZE);
    assert!(size_of::<WrRdma>() == 16);
    assert!(size_of::<WrAtomic>() == 32);
    assert!(size_of::<WrUd>() == WR_UNION_SIZE);
    assert!(offset_of!(WrUd, av) == 32);
    assert!(size_of::<WrMw>() == 32);
    assert!(size_of::<WrUnion>() == WR_UNION_SIZE);
    assert!(size_of::<SendWr>() == 144);
    assert!(offset_of!(SendWr, opcode) == 12);
    assert!(offset_of!(SendWr, send_flags) == 16);
    assert!(offset_of!(SendWr, ex) == 20);
    assert!(offset_of!(SendWr, wr) == 24);
    assert!(offset_of!(SendWr, wr) + offset_of!(WrUd, ah_num) == 36);
};
