// SPDX-License-Identifier: GPL-2.0

//! Address handle: the CREATE_AH response and the address vector of a UD
//! work request (ignored by rroce, kept for the layout).

use super::Codec;
use core::mem::{offset_of, size_of};

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

to_bytes!(CreateAhResp);

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
/// resolves UD destinations from [`super::WrUd::ah_num`] and ignores these bytes.
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

// Compile-time layout checks (the full comparison with the C header is
// tests/abi_layout.rs).
const _: () = {
    assert!(size_of::<CreateAhResp>() == 8);
    assert!(size_of::<Gid>() == 16);
    assert!(size_of::<GlobalRoute>() == 24);
    assert!(size_of::<Sockaddr>() == 28);
    assert!(size_of::<Av>() == 88);
    assert!(offset_of!(Av, dgid_addr) == 60);
};
