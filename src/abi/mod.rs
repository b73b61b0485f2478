// SPDX-License-Identifier: GPL-2.0

//! rroce's user ABI: the Rust mirror of `uapi/rdma/rroce-abi.h`.
//!
//! rroce registers its devices as [`DRIVER_ID`] (`RDMA_DRIVER_RXE`) with
//! uverbs ABI [`UVERBS_ABI_VERSION`], so rdma-core's unmodified rxe provider
//! (librxe) drives them. Every type here is `#[repr(C)]` with exactly the
//! layout of the C structure of the same name in `uapi/rdma/rroce-abi.h`
//! (`Cqe` is `struct rroce_cqe`, and so on), which in turn is byte for byte
//! the rxe structure (`<rdma/rdma_user_rxe.h>`, `struct ib_uverbs_wc`).
//! Sizes and key offsets are checked at compile time next to each type;
//! every size, alignment, field offset and constant is compared with the C
//! header by `tests/abi_layout.rs`, and the header with the rxe one by
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
//! Uses `core` only: these files are compiled into `rroce.ko` and, through
//! `host/lib.rs`, on the host.
//!
//! One file per object (`queue`: the ring header, `cq`, `qp`, `srq`, `ah`,
//! `wqe`: the ring elements, `limits`: the device limits); this file holds
//! the identity constants and the byte [`Codec`] and re-exports the rest, so
//! users name everything as `abi::X`. Each file checks its layouts at
//! compile time.

use core::mem::size_of;

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

/// Adds `to_bytes` and `from_bytes` to command structures (the byte image as
/// copied to and from user space).
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

mod ah;
mod cq;
mod limits;
mod qp;
mod queue;
mod srq;
mod wqe;

pub use ah::*;
pub use cq::*;
pub use limits::*;
pub use qp::*;
pub use queue::*;
pub use srq::*;
pub use wqe::*;
