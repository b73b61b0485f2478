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
//! The AH verbs are in `crate::verbs::ah`.

use kernel::{prelude::*, sync::rcu};

use crate::{dev::RroceDev, rdma::sys};

/// How the packets of an AH are encapsulated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NetworkType {
    /// RoCEv2 over IPv4 (the GID is an IPv4-mapped IPv6 address).
    Ipv4,
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
#[derive(Clone, Copy, Debug)]
#[expect(dead_code, reason = "read by the UD transport, which is not there yet")]
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
/// `ibah` is first, so the core's `*mut ib_ah` is a `*mut RroceAh`. `num`
/// is 0 until `create_ah` succeeds and then the AH's allocated number.
#[repr(C)]
pub(crate) struct RroceAh {
    ibah: sys::ib_ah,
    num: u32,
    av: core::mem::MaybeUninit<AddressVector>,
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
        // SAFETY: `av` is written before the AH is published in the table.
        Some(unsafe { ah.av.assume_init_read() })
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
        // SAFETY: per the caller: a created rroce AH, `av` written.
        let ah = unsafe { &*ibah.cast::<RroceAh>() };
        if ah.ibah.pd != pd {
            return None;
        }
        // SAFETY: as above.
        Some(unsafe { ah.av.assume_init_read() })
    }
}

/// Copies and validates the core's attributes: RoCE needs a GRH with a
/// resolved source GID entry.
///
/// # Safety
///
/// `attr` points at valid attributes whose `sgid_attr` (if non-null) is
/// referenced for the duration of the call.
pub(crate) unsafe fn av_from_attr(attr: *const sys::rdma_ah_attr) -> Result<AddressVector> {
    // SAFETY: valid per the caller.
    let a = unsafe { &*attr };
    if a.type_ != sys::rdma_ah_attr_type_RDMA_AH_ATTR_TYPE_ROCE
        || u32::from(a.ah_flags) & sys::ib_ah_flags_IB_AH_GRH == 0
        || a.grh.sgid_attr.is_null()
    {
        return Err(EINVAL);
    }
    // SAFETY: the union members are plain bytes; `sgid_attr` is referenced.
    let (dgid, dmac, sgid, gid_type) = unsafe {
        (
            a.grh.dgid.raw,
            a.__bindgen_anon_1.roce.dmac,
            (*a.grh.sgid_attr).gid.raw,
            (*a.grh.sgid_attr).gid_type,
        )
    };
    if gid_type != sys::ib_gid_type_IB_GID_TYPE_ROCE_UDP_ENCAP {
        // rroce speaks RoCEv2 only.
        return Err(EINVAL);
    }
    Ok(AddressVector {
        dgid,
        sgid,
        dmac,
        sgid_index: a.grh.sgid_index,
        hop_limit: a.grh.hop_limit,
        traffic_class: a.grh.traffic_class,
        flow_label: a.grh.flow_label,
        sl: a.sl,
        network: NetworkType::of_gid(&sgid),
    })
}

impl RroceAh {
    /// `create_ah`: numbers the AH and records `av`. A user AH (`user`) is
    /// published for UD sends, which name it by number, and `respond`
    /// gives the number to the caller; if that fails, nothing is left
    /// behind.
    ///
    /// # Safety
    ///
    /// `ibah` is an AH being created on an rroce device, allocated by the
    /// core with `RroceAh`'s size; process context if `user`.
    pub(crate) unsafe fn create(
        ibah: *mut sys::ib_ah,
        av: AddressVector,
        user: bool,
        respond: impl FnOnce(u32) -> Result,
    ) -> Result {
        // SAFETY: the AH belongs to one of our devices.
        let dev = unsafe { RroceDev::from_ib((*ibah).device) };
        let num = dev.ah_ids.alloc().map_err(|_| ENOMEM)?;
        // SAFETY: the core allocated `ibah` with our size (type invariant).
        let ah = unsafe { &mut *ibah.cast::<RroceAh>() };
        ah.av.write(av);
        ah.num = num;
        if user {
            // UD sends of this process name the AH by number.
            if dev.ahs.set(num as usize, core::ptr::from_ref(ah)).is_err() {
                // Not published: nothing can have read it.
                let _ = dev.ah_ids.free(num);
                ah.num = 0;
                return Err(ENOMEM);
            }
            if let Err(e) = respond(num) {
                // The core will not call destroy_ah for a failed create.
                // Nothing read the entry yet: the number was never given
                // out, and a grace period passes before it is reused.
                dev.ahs.clear(num as usize);
                rcu::synchronize_rcu();
                let _ = dev.ah_ids.free(num);
                ah.num = 0;
                return Err(e);
            }
        }
        Ok(())
    }

    /// `destroy_ah`. A user AH may still be read by UD sends: it is
    /// unpublished and a grace period waited for, which needs a `sleepable`
    /// caller (else `EBUSY`).
    ///
    /// # Safety
    ///
    /// `ibah` is an rroce AH that was created successfully, after its last
    /// use by the core.
    pub(crate) unsafe fn destroy(ibah: *mut sys::ib_ah, sleepable: bool) -> Result {
        let ah = ibah.cast::<RroceAh>();
        // SAFETY: per the caller; UD senders may read it concurrently
        // (shared), so it is only read here until they are gone.
        let (dev, num) = unsafe { (RroceDev::from_ib((*ibah).device), (*ah).num) };
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
        // SAFETY: no reader is left (grace period above); the core owns the
        // memory until we return.
        unsafe { (*ah).num = 0 };
        Ok(())
    }
}
