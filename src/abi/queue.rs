// SPDX-License-Identifier: GPL-2.0

//! The shared ring header every mapped queue (CQ, SQ, RQ, SRQ) starts with,
//! and [`MmapInfo`], which tells user space where to map a ring.

use super::Codec;
use core::mem::{offset_of, size_of};

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

to_bytes!(MmapInfo);

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
};
