// SPDX-License-Identifier: GPL-2.0

//! Shared receive queue: the CREATE_SRQ response and the MODIFY_SRQ
//! command.

use super::Codec;
use super::MmapInfo;
use core::mem::{offset_of, size_of};

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

to_bytes!(CreateSrqResp, ModifySrqCmd);

// Compile-time layout checks (the full comparison with the C header is
// tests/abi_layout.rs).
const _: () = {
    assert!(size_of::<CreateSrqResp>() == 24);
    assert!(offset_of!(CreateSrqResp, srq_num) == 16);
    assert!(size_of::<ModifySrqCmd>() == 8);
};
