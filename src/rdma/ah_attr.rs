// SPDX-License-Identifier: GPL-2.0

//! The core's address attributes (`struct rdma_ah_attr`) copied into a
//! plain value at the verbs edge, so that `crate::ah` validates them
//! without touching raw pointers or unions.

use super::sys;

/// The fields of an `rdma_ah_attr` rroce looks at, copied out.
#[derive(Clone, Copy, Debug)]
pub(crate) struct AhAttr {
    /// `type`.
    pub(crate) type_: sys::rdma_ah_attr_type,
    /// `ah_flags`.
    pub(crate) ah_flags: u32,
    /// `sl`.
    pub(crate) sl: u8,
    /// `grh.dgid`.
    pub(crate) dgid: [u8; 16],
    /// `grh.sgid_index`.
    pub(crate) sgid_index: u8,
    /// `grh.hop_limit`.
    pub(crate) hop_limit: u8,
    /// `grh.traffic_class`.
    pub(crate) traffic_class: u8,
    /// `grh.flow_label`.
    pub(crate) flow_label: u32,
    /// `roce.dmac`.
    pub(crate) dmac: [u8; 6],
    /// The GID and GID type of `grh.sgid_attr`, if it is set.
    pub(crate) sgid: Option<([u8; 16], sys::ib_gid_type)>,
}

impl AhAttr {
    /// Copies `attr` out.
    ///
    /// # Safety
    ///
    /// `attr` points at valid attributes whose `grh.sgid_attr` (if
    /// non-null) is referenced for the duration of the call.
    pub(crate) unsafe fn read(attr: *const sys::rdma_ah_attr) -> Self {
        // SAFETY: valid per the caller.
        let a = unsafe { &*attr };
        let sgid_attr = a.grh.sgid_attr;
        // SAFETY: the union members are plain bytes; `sgid_attr` is
        // referenced if non-null (caller).
        let (dgid, dmac, sgid) = unsafe {
            (
                a.grh.dgid.raw,
                a.__bindgen_anon_1.roce.dmac,
                sgid_attr.as_ref().map(|s| (s.gid.raw, s.gid_type)),
            )
        };
        Self {
            type_: a.type_,
            ah_flags: u32::from(a.ah_flags),
            sl: a.sl,
            dgid,
            sgid_index: a.grh.sgid_index,
            hop_limit: a.grh.hop_limit,
            traffic_class: a.grh.traffic_class,
            flow_label: a.grh.flow_label,
            dmac,
            sgid,
        }
    }
}
