// SPDX-License-Identifier: GPL-2.0

//! Glue to the kernel's RDMA core: raw bindings and the small safe
//! abstractions rroce builds on them.

pub(crate) mod ah_attr;
pub(crate) mod ibcq;
pub(crate) mod mem;
pub(crate) mod mmap;
pub(crate) mod rcu_table;
pub(crate) mod sys;
pub(crate) mod work;

use core::sync::atomic::{AtomicBool, Ordering};

/// Whether the kernel's `crc32_le` is arch-optimised, asked once at module
/// init ([`init_crc`]) rather than for every packet.
static KERNEL_CRC_FAST: AtomicBool = AtomicBool::new(false);

/// Asks the CRC library whether its `crc32_le` is arch-optimised (module
/// init; until then, and if not, ICRCs use the engine's routine).
pub(crate) fn init_crc() {
    // SAFETY: plain query of the CRC library.
    let fast = unsafe { sys::rroce_helper_crc32_le_fast() };
    KERNEL_CRC_FAST.store(fast, Ordering::Relaxed);
}

/// The CRC-32 routine for ICRCs: the kernel's `crc32_le` where the kernel
/// has an arch-optimised one (`CONFIG_CRC_OPTIMIZATIONS`, e.g. PCLMULQDQ on
/// x86, the one a distribution kernel uses), otherwise the engine's
/// slicing-by-8, which beats the kernel's generic byte-at-a-time fallback.
pub(crate) fn icrc_crc32() -> crate::engine::icrc::Crc32Fn {
    if KERNEL_CRC_FAST.load(Ordering::Relaxed) {
        kernel_crc32_le
    } else {
        crate::engine::icrc::crc32_le
    }
}

/// The kernel's `crc32_le` (raw state in and out, no inversion).
fn kernel_crc32_le(crc: u32, data: &[u8]) -> u32 {
    // SAFETY: `data` is a live slice of `data.len()` bytes.
    unsafe { sys::rroce_helper_crc32_le(crc, data.as_ptr().cast(), data.len()) }
}

/// The kernel's `IS_ERR()`: whether a pointer the kernel returned encodes
/// an errno (the last page of the address space).
pub(crate) fn is_err_ptr<T>(p: *const T) -> bool {
    (p as usize) >= (-4095isize) as usize
}

/// Raises `event` on SRQ `srq` to its consumer's `event_handler`, if any
/// (for a user SRQ the core's, which queues it on the async event file).
pub(crate) fn raise_srq_event(srq: *mut sys::ib_srq, event: sys::ib_event_type) {
    // SAFETY: `srq` is a live SRQ of ours (callers hold its state); its
    // handler and context are fixed by the core before the SRQ is used,
    // and an all-zero `ib_event` is valid before its fields are set.
    unsafe {
        if let Some(handler) = (*srq).event_handler {
            let mut ev: sys::ib_event = core::mem::zeroed();
            ev.device = (*srq).device;
            ev.element.srq = srq;
            ev.event = event;
            handler(&mut ev, (*srq).srq_context);
        }
    }
}

/// Raises `event` on QP `qp` to its `event_handler` (the core's, which for
/// `IB_EVENT_QP_LAST_WQE_REACHED` also ends `ib_drain_qp`'s wait).
pub(crate) fn raise_qp_event(qp: *mut sys::ib_qp, event: sys::ib_event_type) {
    // SAFETY: `qp` is a live QP of ours (callers hold its state); as for
    // an SRQ above.
    unsafe {
        if let Some(handler) = (*qp).event_handler {
            let mut ev: sys::ib_event = core::mem::zeroed();
            ev.device = (*qp).device;
            ev.element.qp = qp;
            ev.event = event;
            handler(&mut ev, (*qp).qp_context);
        }
    }
}

/// KUnit's view of the glue.
#[cfg(CONFIG_KUNIT)]
pub(crate) mod selftest {
    use crate::engine::icrc;

    /// The kernel's `crc32_le` (arch-optimised or not: the binding and its
    /// raw-state contract), and the routine the module uses for ICRCs,
    /// give the engine's results: on every length from 0 to 300 bytes at
    /// every alignment up to 16, and on the ICRCs of the packets captured
    /// from rdma_rxe.
    pub(crate) fn icrc_crc32_agrees() -> Result<(), &'static str> {
        for f in [super::kernel_crc32_le as icrc::Crc32Fn, super::icrc_crc32()] {
            agrees(f)?;
        }
        Ok(())
    }

    fn agrees(f: icrc::Crc32Fn) -> Result<(), &'static str> {
        let mut buf = [0u8; 320];
        let mut x = 7u8;
        for b in buf.iter_mut() {
            x = x.wrapping_mul(31).wrapping_add(17);
            *b = x;
        }
        for off in 0..16 {
            for len in 0..300 {
                let d = buf.get(off..off + len).ok_or("range")?;
                if f(icrc::ICRC_SEED, d) != icrc::crc32_le(icrc::ICRC_SEED, d) {
                    return Err("the kernel's crc32_le disagrees with the engine's");
                }
            }
        }
        for (_name, packet) in icrc::selftest::VECTORS {
            icrc::verify_using(packet, f).map_err(|_| "a captured rdma_rxe packet fails")?;
        }
        Ok(())
    }
}
