// SPDX-License-Identifier: GPL-2.0

//! Work queue elements as the rings hold them: the send and receive WQE
//! headers and the SGE array that follows them.

use super::Codec;
use super::SendWr;
use core::mem::{offset_of, size_of};

/// `struct rroce_sge`: a scatter/gather element (`struct ibv_sge`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sge {
    /// User; kernel checks it against the lkey's MR.
    pub addr: u64,
    /// User; kernel checks it against the MR and sums lengths itself.
    pub length: u32,
    /// User; kernel looks it up in the QP's PD.
    pub lkey: u32,
}

codec_struct!(Sge { addr, length, lkey });

impl Sge {
    /// Decodes an SGE; `None` if `b` is too short.
    pub fn from_bytes(b: &[u8]) -> Option<Self> {
        Self::decode(b)
    }
}

/// `struct rroce_dma_info`: the DMA part of a WQE. rxe keeps its progress
/// (`resid`, `cur_sge`, `sge_offset`) here in user-writable memory; rroce
/// keeps progress in kernel memory and never reads those.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DmaInfo {
    /// User: total bytes. Kernel: the inline length for inline WQEs (bounded
    /// by the QP's max_inline), otherwise ignored (it sums the SGEs).
    pub length: u32,
    /// User: equal to `length`; kernel ignores.
    pub resid: u32,
    /// User: 0; kernel ignores.
    pub cur_sge: u32,
    /// User: SGE count (meaningless for inline); kernel bounds it.
    pub num_sge: u32,
    /// User: 0; kernel ignores.
    pub sge_offset: u32,
    /// User: 0 or stale; kernel ignores.
    pub reserved: u32,
    /// The C flexible-array union `inline_data[]` / `atomic_wr[]` / `sge[]`
    /// that follows the header (zero-sized here; read it with
    /// [`SendWqe::sge`], [`SendWqe::payload`] or [`RecvWqe::sge`]).
    pub sge: [Sge; 0],
}

codec_struct!(DmaInfo {
    length,
    resid,
    cur_sge,
    num_sge,
    sge_offset,
    reserved,
} flex { sge });

/// Size of the send WQE header; the SGEs or inline data start here.
pub const SEND_WQE_HEADER_SIZE: usize = 208;
/// Size of the receive WQE header; the SGEs start here.
pub const RECV_WQE_HEADER_SIZE: usize = 40;

/// Decodes SGE `i` of the array that starts at `start` in `elem`.
fn sge_at(elem: &[u8], start: usize, i: usize) -> Option<Sge> {
    let off = i.checked_mul(size_of::<Sge>())?.checked_add(start)?;
    Sge::decode(elem.get(off..)?)
}

/// `struct rroce_send_wqe`: a send queue element. This 208-byte header is
/// followed by the SGE array or the inline data.
///
/// librxe's classic post_send zeroes only `wr` and sets `iova`, `dma`
/// (`length`, `resid`, `num_sge`, `cur_sge`, `sge_offset`), `state` and
/// `ssn`; the other header fields are stale. rroce reads only `wr`,
/// `dma.length` (inline) and `dma.num_sge` from the copy.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SendWqe {
    /// User: the work request.
    pub wr: SendWr,
    /// rxe-private, stale; kernel ignores and never writes it.
    pub status: u32,
    /// User: 0; kernel ignores and never writes it.
    pub state: u32,
    /// User: copy of the remote address; kernel uses `wr.rdma`/`wr.atomic`.
    pub iova: u64,
    /// rxe-private, stale; kernel ignores.
    pub mask: u32,
    /// rxe-private, stale; kernel ignores.
    pub first_psn: u32,
    /// rxe-private, stale; kernel ignores.
    pub last_psn: u32,
    /// rxe-private, stale; kernel ignores.
    pub ack_length: u32,
    /// User: send sequence number; kernel ignores (keeps its own).
    pub ssn: u32,
    /// rxe-private, stale; kernel ignores.
    pub has_rd_atomic: u32,
    /// User: lengths and the SGE/inline area.
    pub dma: DmaInfo,
}

codec_struct!(SendWqe {
    wr,
    status,
    state,
    iova,
    mask,
    first_psn,
    last_psn,
    ack_length,
    ssn,
    has_rd_atomic,
    dma
});

impl SendWqe {
    /// Decodes the header of a send queue element (a kernel copy of the
    /// slot); `None` if `elem` is shorter than [`SEND_WQE_HEADER_SIZE`].
    pub fn from_bytes(elem: &[u8]) -> Option<Self> {
        Self::decode(elem)
    }

    /// SGE `i` of the element; `None` if it lies beyond `elem`. The caller
    /// bounds `i` by the validated SGE count.
    pub fn sge(elem: &[u8], i: usize) -> Option<Sge> {
        sge_at(elem, SEND_WQE_HEADER_SIZE, i)
    }

    /// The first `len` bytes after the header (inline data, or the 8 bytes
    /// of an ATOMIC_WRITE); `None` if they lie beyond `elem`.
    pub fn payload(elem: &[u8], len: usize) -> Option<&[u8]> {
        elem.get(SEND_WQE_HEADER_SIZE..SEND_WQE_HEADER_SIZE.checked_add(len)?)
    }
}

/// `struct rroce_recv_wqe`: a receive queue / SRQ element. This 40-byte
/// header is followed by `dma.num_sge` SGEs.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecvWqe {
    /// User; the kernel copies it into the CQE unchanged.
    pub wr_id: u64,
    /// User: stale (providers before the rename wrote `num_sge`); kernel
    /// ignores.
    pub reserved: u32,
    /// User: stale; kernel ignores.
    pub padding: u32,
    /// User: `num_sge` and the SGEs; kernel bounds `num_sge` and sums the
    /// lengths itself.
    pub dma: DmaInfo,
}

codec_struct!(RecvWqe {
    wr_id,
    reserved,
    padding,
    dma
});

impl RecvWqe {
    /// Decodes the header of a receive queue element (a kernel copy of the
    /// slot); `None` if `elem` is shorter than [`RECV_WQE_HEADER_SIZE`].
    pub fn from_bytes(elem: &[u8]) -> Option<Self> {
        Self::decode(elem)
    }

    /// SGE `i` of the element; `None` if it lies beyond `elem`.
    pub fn sge(elem: &[u8], i: usize) -> Option<Sge> {
        sge_at(elem, RECV_WQE_HEADER_SIZE, i)
    }
}

// Compile-time layout checks (the full comparison with the C header is
// tests/abi_layout.rs).
const _: () = {
    assert!(size_of::<Sge>() == 16);
    assert!(size_of::<DmaInfo>() == 24);
    assert!(offset_of!(DmaInfo, sge) == 24);
    assert!(size_of::<SendWqe>() == SEND_WQE_HEADER_SIZE);
    assert!(offset_of!(SendWqe, status) == 144);
    assert!(offset_of!(SendWqe, iova) == 152);
    assert!(offset_of!(SendWqe, ssn) == 176);
    assert!(offset_of!(SendWqe, dma) == 184);
    assert!(offset_of!(SendWqe, dma) + offset_of!(DmaInfo, sge) == SEND_WQE_HEADER_SIZE);
    assert!(size_of::<RecvWqe>() == RECV_WQE_HEADER_SIZE);
    assert!(offset_of!(RecvWqe, dma) == 16);
    assert!(offset_of!(RecvWqe, dma) + offset_of!(DmaInfo, sge) == RECV_WQE_HEADER_SIZE);
};
