// SPDX-License-Identifier: GPL-2.0

//! rroce's user ABI: the Rust mirror of `uapi/rdma/rroce-abi.h`.
//!
//! rroce registers its devices as [`DRIVER_ID`] (`RDMA_DRIVER_RXE`) with
//! uverbs ABI [`UVERBS_ABI_VERSION`], so rdma-core's unmodified rxe provider
//! (librxe) drives them. Every type here is `#[repr(C)]` with exactly the
//! layout of the C structure of the same name in `uapi/rdma/rroce-abi.h`
//! (`Cqe` is `struct rroce_cqe`, and so on), which in turn is byte for byte
//! the rxe structure (`<rdma/rdma_user_rxe.h>`, `struct ib_uverbs_wc`).
//! Sizes and key offsets are checked at compile time below; every size,
//! alignment, field offset and constant is compared with the C header by
//! `tests/abi_layout.rs`, and the header with the rxe one by
//! `scripts/check-uapi.sh`. The protocol is described in
//! `Documentation/abi.rst`.
//!
//! C unions are mirrored as byte storage with the union's size and alignment
//! (`raw`) plus accessors that decode one member, so no `unsafe` is needed.
//! `__be` fields hold the raw memory value (use `u32::from_be` and friends).
//!
//! The kernel never interprets user-writable memory in place: it copies an
//! element out of a ring and decodes the copy with [`Codec::decode`] (or the
//! `from_bytes` helpers), then validates the decoded values. Elements it
//! produces (CQEs, command responses) are encoded with [`Codec::encode`] /
//! `to_bytes`. Byte images are in native byte order, the order user space
//! uses for the same memory (little-endian on every architecture rroce is
//! built for).
//!
//! Uses `core` only: this file is compiled into `rroce.ko` and, through
//! `host/lib.rs`, on the host.

use core::mem::{offset_of, size_of};

// ---------------------------------------------------------------------------
// Identity

/// `enum rdma_driver_id` `RDMA_DRIVER_RXE`: makes libibverbs load librxe.
pub const DRIVER_ID: u32 = 14;
/// `ib_device_ops.uverbs_abi_ver`; librxe accepts 1..=2, rxe reports 2.
pub const UVERBS_ABI_VERSION: u32 = 2;
/// rroce's extension level on top of the rxe ABI (0: no extension yet).
///
/// Extensions are only ever appended to driver responses, guarded by the
/// udata output length the provider passed; see `Documentation/abi.rst`.
pub const ABI_MINOR: u32 = 0;

// ---------------------------------------------------------------------------
// Byte codec

/// A value with a fixed byte image in the ABI.
///
/// The image is `size_of::<Self>()` bytes in native byte order, each field at
/// its `#[repr(C)]` offset. None of the ABI types has implicit padding, so
/// [`Codec::encode`] writes every byte of the image.
pub trait Codec: Sized {
    /// Size of the byte image.
    const SIZE: usize;

    /// Decodes the first [`Codec::SIZE`] bytes of `b`; `None` if `b` is
    /// shorter. Any bit pattern decodes: validation is the caller's job.
    fn decode(b: &[u8]) -> Option<Self>;

    /// Encodes into the first [`Codec::SIZE`] bytes of `out`; `None`, with
    /// nothing written, if `out` is shorter.
    fn encode(&self, out: &mut [u8]) -> Option<()>;
}

macro_rules! codec_int {
    ($($t:ty),*) => {$(
        impl Codec for $t {
            const SIZE: usize = size_of::<$t>();

            fn decode(b: &[u8]) -> Option<Self> {
                Some(<$t>::from_ne_bytes(b.get(..Self::SIZE)?.try_into().ok()?))
            }

            fn encode(&self, out: &mut [u8]) -> Option<()> {
                out.get_mut(..Self::SIZE)?.copy_from_slice(&self.to_ne_bytes());
                Some(())
            }
        }
    )*};
}

codec_int!(u8, u16, u32, u64);

impl<const N: usize> Codec for [u8; N] {
    const SIZE: usize = N;

    fn decode(b: &[u8]) -> Option<Self> {
        b.get(..N)?.try_into().ok()
    }

    fn encode(&self, out: &mut [u8]) -> Option<()> {
        out.get_mut(..N)?.copy_from_slice(self);
        Some(())
    }
}

impl<const N: usize> Codec for [u32; N] {
    const SIZE: usize = size_of::<[u32; N]>();

    fn decode(b: &[u8]) -> Option<Self> {
        let b = b.get(..Self::SIZE)?;
        let mut v = [0u32; N];
        // Indexing by word rather than `chunks_exact`, whose runtime chunk
        // size brings a division-by-zero panic path that objtool (7.3) does
        // not know as noreturn.
        for (i, x) in v.iter_mut().enumerate() {
            *x = u32::decode(b.get(i * 4..i * 4 + 4)?)?;
        }
        Some(v)
    }

    fn encode(&self, out: &mut [u8]) -> Option<()> {
        let out = out.get_mut(..Self::SIZE)?;
        for (i, x) in self.iter().enumerate() {
            x.encode(out.get_mut(i * 4..i * 4 + 4)?)?;
        }
        Some(())
    }
}

/// Implements [`Codec`] for a `#[repr(C)]` struct from its field list.
/// The struct literal in `decode` makes the list exhaustive; fields listed
/// under `flex` are C flexible arrays (zero-sized here) and carry no bytes.
macro_rules! codec_struct {
    ($t:ident { $($f:ident),* $(,)? } $(flex { $($x:ident),* $(,)? })?) => {
        impl Codec for $t {
            const SIZE: usize = size_of::<$t>();

            fn decode(b: &[u8]) -> Option<Self> {
                let b = b.get(..Self::SIZE)?;
                Some(Self {
                    $($f: Codec::decode(b.get(offset_of!($t, $f)..)?)?,)*
                    $($($x: [],)*)?
                })
            }

            fn encode(&self, out: &mut [u8]) -> Option<()> {
                let out = out.get_mut(..Self::SIZE)?;
                $(self.$f.encode(out.get_mut(offset_of!($t, $f)..)?)?;)*
                Some(())
            }
        }
    };
}

// ---------------------------------------------------------------------------
// Shared ring header

/// Offset of [`QueueBuf::log2_elem_size`] in a ring.
pub const QUEUE_LOG2_ELEM_SIZE_OFFSET: usize = 0;
/// Offset of [`QueueBuf::index_mask`] in a ring.
pub const QUEUE_INDEX_MASK_OFFSET: usize = 4;
/// Offset of [`QueueBuf::producer_index`] in a ring.
pub const QUEUE_PRODUCER_OFFSET: usize = 128;
/// Offset of [`QueueBuf::consumer_index`] in a ring.
pub const QUEUE_CONSUMER_OFFSET: usize = 256;
/// Offset of the first slot ([`QueueBuf::data`]) in a ring.
pub const QUEUE_DATA_OFFSET: usize = 384;

/// `struct rroce_queue_buf`: the header of every mapped ring (CQ, SQ, RQ,
/// SRQ), followed by `index_mask + 1` slots of `1 << log2_elem_size` bytes.
///
/// The kernel fills it at create time and keeps private copies of
/// `log2_elem_size` and `index_mask`; it never reads them back. It loads the
/// peer's index with acquire ordering and masks it, and stores its own with
/// release ordering.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueBuf {
    /// Kernel at create; user reads it; the kernel never re-reads it.
    pub log2_elem_size: u32,
    /// Kernel at create (slots - 1); user reads it; never re-read.
    pub index_mask: u32,
    /// Reserved; kernel zeroes.
    pub pad_1: [u32; 30],
    /// Written by the producer (user for SQ/RQ/SRQ, kernel for CQ).
    pub producer_index: u32,
    /// Reserved; kernel zeroes.
    pub pad_2: [u32; 31],
    /// Written by the consumer (kernel for SQ/RQ/SRQ, user for CQ).
    pub consumer_index: u32,
    /// Reserved; kernel zeroes.
    pub pad_3: [u32; 31],
    /// The slots (a C flexible array).
    pub data: [u8; 0],
}

codec_struct!(QueueBuf {
    log2_elem_size,
    index_mask,
    pad_1,
    producer_index,
    pad_2,
    consumer_index,
    pad_3,
} flex { data });

impl QueueBuf {
    /// A fresh header: both indices 0, everything reserved zero.
    pub const fn new(log2_elem_size: u32, index_mask: u32) -> Self {
        Self {
            log2_elem_size,
            index_mask,
            pad_1: [0; 30],
            producer_index: 0,
            pad_2: [0; 31],
            consumer_index: 0,
            pad_3: [0; 31],
            data: [],
        }
    }

    /// The header's byte image, to be written at offset 0 of a new ring.
    pub fn to_bytes(&self) -> [u8; QUEUE_DATA_OFFSET] {
        let mut b = [0u8; QUEUE_DATA_OFFSET];
        let _ = self.encode(&mut b);
        b
    }
}

// ---------------------------------------------------------------------------
// Command driver data

/// `struct rroce_mminfo`: where user space maps a ring.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MmapInfo {
    /// Kernel: mmap offset on the uverbs fd; unique within the file while
    /// the ring or a mapping of it exists.
    pub offset: u64,
    /// Kernel: bytes to map (page aligned); other lengths are refused.
    pub size: u32,
    /// Kernel writes 0.
    pub pad: u32,
}

codec_struct!(MmapInfo { offset, size, pad });

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

/// `struct rroce_create_srq_resp`: driver part of the CREATE_SRQ response.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CreateSrqResp {
    /// Kernel: the SRQ ring.
    pub mi: MmapInfo,
    /// Kernel: the SRQ number (informational).
    pub srq_num: u32,
    /// Kernel writes 0.
    pub reserved: u32,
}

codec_struct!(CreateSrqResp {
    mi,
    srq_num,
    reserved
});

/// `struct rroce_modify_srq_cmd`: driver part of the MODIFY_SRQ command.
///
/// With `IBV_SRQ_MAX_WR` the kernel resizes the ring and copies a
/// [`MmapInfo`] to `mmap_info_addr` with `copy_to_user` (not into a
/// response).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ModifySrqCmd {
    /// User: address of a `struct rroce_mminfo`; only ever used through
    /// `copy_to_user`.
    pub mmap_info_addr: u64,
}

codec_struct!(ModifySrqCmd { mmap_info_addr });

/// `struct rroce_create_ah_resp`: driver part of the CREATE_AH response.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CreateAhResp {
    /// Kernel: `MIN_AH_INDEX..=MAX_AH`, never 0 (0 makes librxe build an
    /// in-WQE address vector instead); user copies it to `wr.ud.ah_num`.
    pub ah_num: u32,
    /// Kernel writes 0.
    pub reserved: u32,
}

codec_struct!(CreateAhResp { ah_num, reserved });

macro_rules! to_bytes {
    ($($t:ident),*) => {$(
        impl $t {
            /// The byte image, as copied to user space.
            pub fn to_bytes(&self) -> [u8; size_of::<$t>()] {
                let mut b = [0u8; size_of::<$t>()];
                let _ = self.encode(&mut b);
                b
            }

            /// Decodes a byte image; `None` if `b` is too short.
            pub fn from_bytes(b: &[u8]) -> Option<Self> {
                Self::decode(b)
            }
        }
    )*};
}

to_bytes!(
    MmapInfo,
    CreateCqResp,
    ResizeCqResp,
    CreateQpResp,
    CreateSrqResp,
    ModifySrqCmd,
    CreateAhResp
);

// ---------------------------------------------------------------------------
// Address vector (ignored by rroce, kept for the layout)

/// `RROCE_NETWORK_TYPE_IPV4`: [`Av::network_type`] of an IPv4 AV.
pub const NETWORK_TYPE_IPV4: u8 = 1;
/// `RROCE_NETWORK_TYPE_IPV6`: [`Av::network_type`] of an IPv6 AV.
pub const NETWORK_TYPE_IPV6: u8 = 2;

/// `struct rroce_gid_global`: the two big-endian halves of a GID.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GidGlobal {
    /// Big-endian in memory.
    pub subnet_prefix: u64,
    /// Big-endian in memory.
    pub interface_id: u64,
}

codec_struct!(GidGlobal {
    subnet_prefix,
    interface_id
});

/// `union rroce_gid`: a GID (`raw`, or `global` over the same bytes).
#[repr(C, align(8))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Gid {
    /// The 16 bytes, network order.
    pub raw: [u8; 16],
}

codec_struct!(Gid { raw });

impl Gid {
    /// The `global` member.
    pub fn global(&self) -> GidGlobal {
        GidGlobal::decode(&self.raw).unwrap_or_default()
    }
}

/// `struct rroce_global_route`: GRH fields of an address vector.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GlobalRoute {
    /// User (old-kernel path); kernel ignores.
    pub dgid: Gid,
    /// User; kernel ignores.
    pub flow_label: u32,
    /// User; kernel ignores.
    pub sgid_index: u8,
    /// User; kernel ignores.
    pub hop_limit: u8,
    /// User; kernel ignores.
    pub traffic_class: u8,
    /// Implicit padding in rxe; kernel ignores.
    pub reserved: u8,
}

codec_struct!(GlobalRoute {
    dgid,
    flow_label,
    sgid_index,
    hop_limit,
    traffic_class,
    reserved
});

/// `struct rroce_sockaddr_in`: byte image of `struct sockaddr_in`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SockaddrIn {
    /// `AF_INET`, host order.
    pub family: u16,
    /// Big-endian in memory.
    pub port: u16,
    /// IPv4 address, big-endian in memory.
    pub addr: u32,
    /// `sin_zero`.
    pub zero: [u8; 8],
}

codec_struct!(SockaddrIn {
    family,
    port,
    addr,
    zero
});

/// `struct rroce_sockaddr_in6`: byte image of `struct sockaddr_in6`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SockaddrIn6 {
    /// `AF_INET6`, host order.
    pub family: u16,
    /// Big-endian in memory.
    pub port: u16,
    /// Big-endian in memory.
    pub flowinfo: u32,
    /// IPv6 address.
    pub addr: [u8; 16],
    /// Host order.
    pub scope_id: u32,
}

codec_struct!(SockaddrIn6 {
    family,
    port,
    flowinfo,
    addr,
    scope_id
});

/// `union rroce_sockaddr`: `sin` or `sin6` over the same 28 bytes.
#[repr(C, align(4))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sockaddr {
    /// The union's bytes.
    pub raw: [u8; 28],
}

codec_struct!(Sockaddr { raw });

impl Sockaddr {
    /// The `sin` member.
    pub fn sin(&self) -> SockaddrIn {
        SockaddrIn::decode(&self.raw).unwrap_or_default()
    }

    /// The `sin6` member.
    pub fn sin6(&self) -> SockaddrIn6 {
        SockaddrIn6::decode(&self.raw).unwrap_or_default()
    }
}

/// `struct rroce_av`: the address vector librxe writes into `wr.ud.av` only
/// when create_ah returned `ah_num == 0`, which rroce never does. rroce
/// resolves UD destinations from [`WrUd::ah_num`] and ignores these bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Av {
    /// User; kernel ignores.
    pub port_num: u8,
    /// User: `NETWORK_TYPE_*`; kernel ignores.
    pub network_type: u8,
    /// User; kernel ignores.
    pub dmac: [u8; 6],
    /// User; kernel ignores.
    pub grh: GlobalRoute,
    /// User; kernel ignores.
    pub sgid_addr: Sockaddr,
    /// User; kernel ignores.
    pub dgid_addr: Sockaddr,
}

codec_struct!(Av {
    port_num,
    network_type,
    dmac,
    grh,
    sgid_addr,
    dgid_addr
});

// ---------------------------------------------------------------------------
// Send work request

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
    /// User: from [`CreateAhResp::ah_num`]; kernel looks it up and checks
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

// ---------------------------------------------------------------------------
// Work queue elements

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

// ---------------------------------------------------------------------------
// Completion queue entry

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

// ---------------------------------------------------------------------------
// Values found in the rings

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

// ---------------------------------------------------------------------------
// Device limits, as query_device/query_port report them and rroce enforces
// them.

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
/// Multicast groups (multicast is not implemented).
pub const MAX_MCAST_GRP: u32 = 0;
/// QPs per multicast group (multicast is not implemented).
pub const MAX_MCAST_QP_ATTACH: u32 = 0;
/// Multicast attachments per device (multicast is not implemented).
pub const MAX_TOTAL_MCAST_QP_ATTACH: u32 = 0;
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

// ---------------------------------------------------------------------------
// Compile-time layout checks (the full comparison with the C header is
// tests/abi_layout.rs).

const _: () = {
    assert!(size_of::<QueueBuf>() == QUEUE_DATA_OFFSET);
    assert!(offset_of!(QueueBuf, log2_elem_size) == QUEUE_LOG2_ELEM_SIZE_OFFSET);
    assert!(offset_of!(QueueBuf, index_mask) == QUEUE_INDEX_MASK_OFFSET);
    assert!(offset_of!(QueueBuf, producer_index) == QUEUE_PRODUCER_OFFSET);
    assert!(offset_of!(QueueBuf, consumer_index) == QUEUE_CONSUMER_OFFSET);
    assert!(offset_of!(QueueBuf, data) == QUEUE_DATA_OFFSET);

    assert!(size_of::<MmapInfo>() == 16);
    assert!(size_of::<CreateCqResp>() == 16);
    assert!(size_of::<ResizeCqResp>() == 16);
    assert!(size_of::<CreateQpResp>() == 32);
    assert!(offset_of!(CreateQpResp, sq_mi) == 16);
    assert!(size_of::<CreateSrqResp>() == 24);
    assert!(offset_of!(CreateSrqResp, srq_num) == 16);
    assert!(size_of::<ModifySrqCmd>() == 8);
    assert!(size_of::<CreateAhResp>() == 8);

    assert!(size_of::<Gid>() == 16);
    assert!(size_of::<GlobalRoute>() == 24);
    assert!(size_of::<Sockaddr>() == 28);
    assert!(size_of::<Av>() == 88);
    assert!(offset_of!(Av, dgid_addr) == 60);

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

    assert!(size_of::<Cqe>() == CQE_SIZE);
    assert!(offset_of!(Cqe, ex) == 24);
    assert!(offset_of!(Cqe, wc_flags) == 36);
    assert!(offset_of!(Cqe, slid) == 42);
    assert!(offset_of!(Cqe, port_num) == 46);

    // Limits that follow from the layout.
    assert!(MAX_INLINE_DATA as usize == MAX_SEND_SGE as usize * size_of::<Sge>());
    assert!(MIN_AH_INDEX > 0);
};
