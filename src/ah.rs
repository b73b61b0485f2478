// SPDX-License-Identifier: GPL-2.0

//! Address handles.
//!
//! An AH records where a UD datagram goes: the destination GID and MAC, the
//! source GID entry, and the IP header fields. Each AH gets a device-unique
//! non-zero number that is returned to userspace (`rxe_create_ah_resp`);
//! librxe then names the AH by that number in its UD send WQEs instead of
//! copying the address vector into the WQE. Creation may happen in atomic
//! context (kernel AHs without `RDMA_CREATE_AH_SLEEPABLE`), so it neither
//! sleeps nor allocates.
//!
//! The AH verbs are in `crate::verbs::ah`, which turn the core's pointers
//! into `&RroceAh` and its attributes into [`AhAttr`]. The one `unsafe`
//! left is [`RroceAh::kernel_av`]: a kernel consumer's send WR names its
//! AH by the core's pointer, which the UD transport hands over.

use kernel::{prelude::*, sync::rcu};

use crate::{
    dev::RroceDev,
    rdma::{ah_attr::AhAttr, sys},
};

/// How the packets of an AH are encapsulated.
///
/// `repr(u8)` with `Ipv4 = 0`, so that all-zero bytes are a valid value
/// (see [`RroceAh`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum NetworkType {
    /// RoCEv2 over IPv4 (the GID is an IPv4-mapped IPv6 address).
    Ipv4 = 0,
    /// RoCEv2 over IPv6.
    Ipv6,
}

impl NetworkType {
    /// The network type of a RoCEv2 GID.
    pub(crate) fn of_gid(gid: &[u8; 16]) -> Self {
        if gid[..10].iter().all(|b| *b == 0) && gid[10] == 0xff && gid[11] == 0xff {
            NetworkType::Ipv4
        } else {
            NetworkType::Ipv6
        }
    }
}

/// The address vector of an AH, copied out of the core's attributes.
///
/// All-zero bytes are a valid value: integers and a [`NetworkType`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct AddressVector {
    pub(crate) dgid: [u8; 16],
    pub(crate) sgid: [u8; 16],
    pub(crate) dmac: [u8; 6],
    pub(crate) sgid_index: u8,
    pub(crate) hop_limit: u8,
    pub(crate) traffic_class: u8,
    pub(crate) flow_label: u32,
    pub(crate) sl: u8,
    pub(crate) network: NetworkType,
}

/// rroce's AH: the core allocates it (`size_ib_ah`).
///
/// # Invariants
///
/// `ibah` is first, so the core's `*mut ib_ah` is a `*mut RroceAh`. Every
/// `RroceAh` is allocated zeroed by the core (`rdma_zalloc_drv_obj`) and
/// freed by it after `destroy_ah` returns; rroce never makes one. `num` is
/// 0 until [`Self::create`] succeeds and then the AH's allocated number;
/// `av` is the address vector from then on.
#[repr(C)]
pub(crate) struct RroceAh {
    ibah: sys::ib_ah,
    num: u32,
    av: AddressVector,
}

impl RroceAh {
    /// The address vector of the user AH numbered `num` on `pd` (UD
    /// sends), copied out while `guard` is held.
    pub(crate) fn user_av(
        dev: &RroceDev,
        num: u32,
        pd: *mut sys::ib_pd,
        guard: &rcu::Guard,
    ) -> Option<AddressVector> {
        let ah = dev.ahs.get(num as usize, guard)?;
        if ah.ibah.pd != pd || ah.num != num {
            return None;
        }
        // `av` is written before the AH is published in the table.
        Some(ah.av)
    }

    /// The address vector of the AH, if it is on `pd`.
    fn av_on(&self, pd: *mut sys::ib_pd) -> Option<AddressVector> {
        (self.ibah.pd == pd).then_some(self.av)
    }

    /// The address vector of a kernel consumer's AH, if it is on `pd`.
    ///
    /// # Safety
    ///
    /// `ibah` is a live AH of an rroce device.
    pub(crate) unsafe fn kernel_av(
        ibah: *mut sys::ib_ah,
        pd: *mut sys::ib_pd,
    ) -> Option<AddressVector> {
        // SAFETY: per the caller: a created rroce AH (type invariant).
        unsafe { &*ibah.cast::<RroceAh>() }.av_on(pd)
    }

    /// The device the AH is on (`ib_ah.device`).
    pub(crate) fn device(&self) -> *mut sys::ib_device {
        self.ibah.device
    }

    /// Its address vector (set once created).
    pub(crate) fn av(&self) -> &AddressVector {
        &self.av
    }
}

/// Validates the core's attributes, copied out by the verbs: RoCE needs a
/// GRH with a resolved source GID entry.
pub(crate) fn av_from_attr(a: &AhAttr) -> Result<AddressVector> {
    if a.type_ != sys::rdma_ah_attr_type_RDMA_AH_ATTR_TYPE_ROCE
        || a.ah_flags & sys::ib_ah_flags_IB_AH_GRH == 0
    {
        return Err(EINVAL);
    }
    let Some((sgid, gid_type)) = a.sgid else {
        return Err(EINVAL);
    };
    if gid_type != sys::ib_gid_type_IB_GID_TYPE_ROCE_UDP_ENCAP {
        // rroce speaks RoCEv2 only.
        return Err(EINVAL);
    }
    Ok(AddressVector {
        dgid: a.dgid,
        sgid,
        dmac: a.dmac,
        sgid_index: a.sgid_index,
        hop_limit: a.hop_limit,
        traffic_class: a.traffic_class,
        flow_label: a.flow_label,
        sl: a.sl,
        network: NetworkType::of_gid(&sgid),
    })
}

impl RroceAh {
    /// `create_ah` on `dev`: numbers the AH and records `av`. A user AH
    /// (`user`, process context) is published for UD sends, which name it
    /// by number, and `respond` gives the number to the caller; if that
    /// fails, nothing is left behind.
    pub(crate) fn create(
        &mut self,
        dev: &RroceDev,
        av: AddressVector,
        user: bool,
        respond: impl FnOnce(u32) -> Result,
    ) -> Result {
        let num = dev.ah_ids.alloc().map_err(|_| ENOMEM)?;
        self.av = av;
        self.num = num;
        if user {
            // UD sends of this process name the AH by number. The core
            // frees the AH only after `destroy_ah`, which unpublishes it
            // and waits for a grace period (type invariant).
            if dev
                .ahs
                .set(num as usize, core::ptr::from_ref(self))
                .is_err()
            {
                // Not published: nothing can have read it.
                let _ = dev.ah_ids.free(num);
                self.num = 0;
                return Err(ENOMEM);
            }
            if let Err(e) = respond(num) {
                // The core will not call destroy_ah for a failed create.
                // Nothing read the entry yet: the number was never given
                // out, and a grace period passes before it is reused.
                dev.ahs.clear(num as usize);
                rcu::synchronize_rcu();
                let _ = dev.ah_ids.free(num);
                self.num = 0;
                return Err(e);
            }
        }
        Ok(())
    }

    /// `destroy_ah` on `dev`. A user AH may still be read by UD sends: it
    /// is unpublished and a grace period waited for, which needs a
    /// `sleepable` caller (else `EBUSY`). UD senders may read the AH
    /// concurrently, so it is only read here; on success the caller may
    /// reset its number once no reader is left.
    pub(crate) fn destroy(&self, dev: &RroceDev, sleepable: bool) -> Result {
        let num = self.num;
        if dev.ahs.get(num as usize, &rcu::read_lock()).is_some() {
            // A user AH: UD sends may be reading it inside an RCU section;
            // the core frees it when we return.
            if !sleepable {
                // uverbs always destroys sleepably; anything else is
                // refused rather than freed under a reader.
                return Err(EBUSY);
            }
            dev.ahs.clear(num as usize);
            rcu::synchronize_rcu();
        }
        if dev.ah_ids.free(num).is_err() {
            pr_warn!("destroying AH {} that was not allocated\n", num);
        }
        Ok(())
    }

    /// Resets the number of a destroyed AH.
    pub(crate) fn forget(&mut self) {
        self.num = 0;
    }
}
