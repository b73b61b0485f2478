// SPDX-License-Identifier: GPL-2.0

//! Received packets handed to another CPU's receive thread.
//!
//! The receive path (`crate::recv`) decides, once it has found a packet's
//! device and QP, whether the packet is processed in the softirq that
//! received it or by a receive thread (`engine::handover`). A handed packet
//! travels with what was found for it: a reference on its device and its
//! QP, which stays alive until the threads are flushed (`destroy_qp` does,
//! after the RCU grace period that ends every receive callback which could
//! still hand one over). The threads (a real-time kthread worker per CPU,
//! `rroce_helper_rxq_*` in the C helpers) exist while the module has UDP
//! sockets, that is while it has devices; each processes its packets in
//! order with bottom halves disabled, as the softirq would have.

use core::ptr::NonNull;

use kernel::{ffi::c_void, prelude::*};

use super::skb::Skb;
use crate::{
    rdma::sys,
    recv::{self, HandOver, Handed},
};

/// Starts the receive threads (the module's first socket pair). Without
/// them nothing is handed over; that is not an error.
pub(super) fn start() {
    // SAFETY: process context; `process` is the function the threads call
    // for each packet, with the values `queue` gave, and `kicked` the one
    // they call for each QP kicked to them, with its node.
    let err = unsafe { sys::rroce_helper_rxq_start(Some(process), Some(recv::transmit_kicked)) };
    if err != 0 {
        pr_warn!("no receive threads ({err}): every packet is processed where it arrives\n");
    }
}

/// Stops the receive threads once every packet handed to them has been
/// processed (the module's last socket pair is gone, so no receive
/// callback hands any more over).
pub(crate) fn stop() {
    // SAFETY: process context.
    unsafe { sys::rroce_helper_rxq_stop() };
}

/// Queues `skb`, the packet the receive path decided to hand over as `h`
/// says, for its receive thread (which counts it, `rcvd_handed`). A full
/// queue (or no thread) drops it, counted on its device
/// (`recv::refuse`).
pub(super) fn queue(skb: Skb, h: HandOver<'_>) {
    let cpu = h.cpu();
    let (dev, qp, role) = h.into_raw();
    // SAFETY: an skb we own, queued with the raw parts of a hand-over,
    // which `process` (or the arm below) takes back once.
    if unsafe {
        sys::rroce_helper_rxq_queue(cpu, skb.as_ptr(), dev.cast(), qp.cast_mut().cast(), role)
    } {
        // The thread owns the skb now.
        core::mem::forget(skb);
    } else {
        // SAFETY: not queued, so the parts are still ours, from `into_raw`.
        let h = unsafe { Handed::from_raw(dev, qp, role) };
        // Counted as a bad ICRC if it is one, as anywhere else.
        skb.with_handed(|pkt| recv::refuse(pkt, h));
    }
}

/// A receive thread's function for each packet handed to it.
///
/// # Safety
///
/// Called by the receive thread, bottom halves disabled, with an skb it
/// owns and the values [`queue`] queued with it (from
/// `HandOver::into_raw`), once.
unsafe extern "C" fn process(skb: *mut sys::sk_buff, dev: *mut c_void, qp: *mut c_void, role: u32) {
    // SAFETY: the parts of a hand-over, given back once (caller).
    let h = unsafe { Handed::from_raw(dev.cast(), qp.cast(), role) };
    let Some(skb) = NonNull::new(skb) else {
        return;
    };
    // SAFETY: the thread gave us the skb it owned.
    let skb = unsafe { Skb::from_received(skb) };
    let used = skb.with_handed(|pkt| recv::receive_handed(pkt, h));
    if used == Some(true) {
        skb.consume();
    }
}
