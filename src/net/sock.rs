// SPDX-License-Identifier: GPL-2.0

//! The per-namespace UDP tunnel sockets on port 4791 and their receive
//! callback, which hands each packet to `crate::recv`.

use core::ptr::NonNull;

use kernel::{ffi::c_int, prelude::*, sync::rcu};

use super::{
    rxq,
    skb::{Received, Skb},
};
use crate::{rdma::sys, recv::Verdict};

/// The UDP sockets of one network namespace.
///
/// # Invariants
///
/// `users == 0` for a free slot; otherwise `net` is the namespace of
/// `users` live rroce devices and the sockets are ours.
#[derive(Clone, Copy)]
struct NetSocks {
    net: usize,
    sock4: usize,
    sock6: usize,
    users: u32,
}

const MAX_NETS: usize = 64;

struct SockTable {
    slots: [NetSocks; MAX_NETS],
}

kernel::sync::global_lock! {
    // SAFETY: `init` runs in module init before any device exists.
    unsafe(uninit) static SOCKS: Mutex<SockTable> = SockTable {
        slots: [NetSocks { net: 0, sock4: 0, sock6: 0, users: 0 }; MAX_NETS],
    };
}

/// Initializes the socket table (module init).
pub(crate) fn init() {
    // SAFETY: called once, first.
    unsafe { SOCKS.init() };
}

/// The tunnel's receive callback.
///
/// # Safety
///
/// Called by the UDP stack in softirq context with an skb we now own, whose
/// data starts at the UDP header.
unsafe extern "C" fn encap_rcv(_sk: *mut sys::sock, skb: *mut sys::sk_buff) -> c_int {
    let Some(skb) = NonNull::new(skb) else {
        return 0;
    };
    // SAFETY: the stack passed us the skb.
    let skb = unsafe { Skb::from_received(skb) };
    receive(skb);
    0
}

/// Hands a received packet to the receive path, read where the skb holds
/// it (its linear part, with the headers pulled into it, and its page
/// fragments). A packet a device took is consumed, not dropped (the
/// device's counters record what it dropped); one the receive path hands
/// to another CPU's receive thread is queued there ([`rxq::queue`]), inside
/// the RCU read-side section in which its QP was found; anything else is
/// freed as a drop.
fn receive(skb: Skb) {
    let guard = rcu::read_lock();
    let verdict = skb.with_received(|pkt, ndev| {
        // SAFETY: the netdev the packet arrived on, live in softirq
        // context while this callback runs.
        let rx = unsafe { Received::new(pkt, ndev) };
        crate::recv::receive(&rx, &guard)
    });
    match verdict {
        Some(Verdict::Taken) => skb.consume(),
        Some(Verdict::HandOver(h)) => rxq::queue(skb, h),
        Some(Verdict::NotOurs) | None => drop(skb),
    }
}

/// Takes a reference on the sockets of `ndev`'s namespace, creating them
/// for its first device.
///
/// # Safety
///
/// `ndev` is a live netdev.
pub(crate) unsafe fn get(ndev: *mut sys::net_device) -> Result {
    // SAFETY: live per the caller.
    let net = unsafe { sys::rroce_helper_dev_net(ndev) } as usize;
    let mut t = SOCKS.lock();
    if let Some(s) = t.slots.iter_mut().find(|s| s.users != 0 && s.net == net) {
        s.users += 1;
        return Ok(());
    }
    let first = t.slots.iter().all(|s| s.users == 0);
    if first {
        // The module's first sockets: its receive threads go with them.
        rxq::start();
    }
    let r = open(&mut t, net);
    if r.is_err() && first {
        rxq::stop();
    }
    r
}

/// Creates the sockets of namespace `net` in a free slot of `t`.
fn open(t: &mut SockTable, net: usize) -> Result {
    let Some(slot) = t.slots.iter_mut().find(|s| s.users == 0) else {
        return Err(ENOSPC);
    };
    let mut err: c_int = 0;
    // SAFETY: `net` is live (the netdev holds it); `encap_rcv` is static.
    let sock4 = unsafe {
        sys::rroce_helper_udp_sock(net as *mut sys::net, false, Some(encap_rcv), &mut err)
    };
    if sock4.is_null() {
        pr_err!(
            "cannot bind UDP port 4791 in this network namespace ({}): is rdma_rxe using it?\n",
            err
        );
        return Err(Error::from_errno(err));
    }
    // SAFETY: as above.
    let sock6 = unsafe {
        sys::rroce_helper_udp_sock(net as *mut sys::net, true, Some(encap_rcv), &mut err)
    };
    if sock6.is_null() {
        pr_err!(
            "cannot bind UDP/IPv6 port 4791 in this network namespace ({})\n",
            err
        );
        // SAFETY: created above, unused.
        unsafe { sys::rroce_helper_udp_sock_release(sock4) };
        return Err(Error::from_errno(err));
    }
    // INVARIANT: a fresh slot with one user and our sockets.
    *slot = NetSocks {
        net,
        sock4: sock4 as usize,
        sock6: sock6 as usize,
        users: 1,
    };
    Ok(())
}

/// Drops a reference taken by [`get`] for a device on a netdev of `net`.
pub(crate) fn put(net: usize) {
    let mut t = SOCKS.lock();
    let Some(s) = t.slots.iter_mut().find(|s| s.users != 0 && s.net == net) else {
        return;
    };
    s.users -= 1;
    if s.users == 0 {
        let (s4, s6) = (s.sock4, s.sock6);
        *s = NetSocks {
            net: 0,
            sock4: 0,
            sock6: 0,
            users: 0,
        };
        // SAFETY: ours (type invariant), no longer listed.
        unsafe {
            sys::rroce_helper_udp_sock_release(s6 as *mut sys::sock);
            sys::rroce_helper_udp_sock_release(s4 as *mut sys::sock);
            // Receive callbacks still running finish before the module can
            // go away.
            sys::rroce_helper_synchronize_rcu();
        }
        if t.slots.iter().all(|s| s.users == 0) {
            // The module's last sockets: no callback hands packets over
            // any more; the threads process what they have, then stop.
            rxq::stop();
        }
    }
}
