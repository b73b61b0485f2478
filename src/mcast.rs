// SPDX-License-Identifier: GPL-2.0

//! UD multicast: the groups QPs are attached to (`attach_mcast`,
//! `detach_mcast`) and delivery of a datagram sent to a group to every QP
//! attached to it.
//!
//! One table for every device, behind one IRQ-safe lock (received
//! datagrams look it up in softirq): each group is its device, its GID
//! (an IPv4-mapped or IPv6 multicast address) and up to
//! `MAX_MCAST_QP_ATTACH` QP numbers. Attaching also adds the group's
//! Ethernet address to the netdev's filter (`dev_mc_add`, outside the lock,
//! once per attachment: the netdev counts them); joining the IP group, so
//! the stack accepts the datagrams, is the RDMA CM's business, as for
//! rdma_rxe.

use kernel::{prelude::*, sync::rcu};

use crate::{
    dev::{limits, RroceDev},
    rdma::sys,
};

/// The destination QP number of a multicast datagram.
pub(crate) const MCAST_QPN: u32 = 0xff_ffff;

/// One group of one device.
struct Group {
    dev: usize,
    gid: [u8; 16],
    qpns: [u32; limits::MAX_MCAST_QP_ATTACH as usize],
    n: usize,
}

kernel::sync::global_lock! {
    // SAFETY: `init` runs in module init before any device exists.
    unsafe(uninit) static GROUPS: SpinLockIrq<KVec<KBox<Group>>> = KVec::new();
}

/// Initializes the group table (module init).
pub(crate) fn init() {
    // SAFETY: called once, first.
    unsafe { GROUPS.init() };
}

/// Frees the group table (module exit, after every device is gone).
pub(crate) fn exit() {
    let table = core::mem::take(&mut *GROUPS.lock());
    // Freed outside the lock.
    drop(table);
}

/// Whether `gid` is a multicast address: IPv4-mapped 224.0.0.0/4, or
/// IPv6 ff00::/8.
pub(crate) fn is_multicast(gid: &[u8; 16]) -> bool {
    let v4mapped = gid[..10].iter().all(|b| *b == 0) && gid[10] == 0xff && gid[11] == 0xff;
    if v4mapped {
        gid[12] & 0xf0 == 0xe0
    } else {
        gid[0] == 0xff
    }
}

fn key(dev: &RroceDev) -> usize {
    core::ptr::from_ref(dev) as usize
}

/// Attaches QP `qpn` of `dev` to group `gid`.
pub(crate) fn attach(dev: &RroceDev, gid: &[u8; 16], qpn: u32) -> Result {
    if !is_multicast(gid) {
        return Err(EINVAL);
    }
    // A new group, made outside the lock in case the group is new.
    let mut qpns = [0; limits::MAX_MCAST_QP_ATTACH as usize];
    qpns[0] = qpn;
    let fresh = KBox::new(
        Group {
            dev: key(dev),
            gid: *gid,
            qpns,
            n: 1,
        },
        GFP_KERNEL,
    )?;
    {
        let mut g = GROUPS.lock();
        let d = key(dev);
        let (mut groups, mut total) = (0u32, 0u32);
        for grp in g.iter().filter(|grp| grp.dev == d) {
            groups += 1;
            total += grp.n as u32;
        }
        if total >= limits::MAX_TOTAL_MCAST_QP_ATTACH {
            return Err(ENOMEM);
        }
        match g.iter_mut().find(|grp| grp.dev == d && grp.gid == *gid) {
            Some(grp) => {
                if grp.qpns[..grp.n].contains(&qpn) {
                    // Attached already: nothing changes (as rxe).
                    return Ok(());
                }
                let n = grp.n;
                let slot = grp.qpns.get_mut(n).ok_or(ENOMEM)?;
                *slot = qpn;
                grp.n = n + 1;
            }
            None => {
                if groups >= limits::MAX_MCAST_GRP {
                    return Err(ENOMEM);
                }
                // Under the lock, with interrupts off, the table of
                // pointers may grow: an atomic allocation of at most a few
                // KiB (attach is a control path).
                g.push(fresh, GFP_ATOMIC)?;
            }
        }
    }
    filter(dev, gid, true);
    Ok(())
}

/// Detaches QP `qpn` of `dev` from group `gid`.
pub(crate) fn detach(dev: &RroceDev, gid: &[u8; 16], qpn: u32) -> Result {
    if !remove(dev, gid, qpn) {
        return Err(EINVAL);
    }
    filter(dev, gid, false);
    Ok(())
}

/// Detaches QP `qpn` of `dev` from every group (the QP is destroyed).
pub(crate) fn detach_all(dev: &RroceDev, qpn: u32) {
    loop {
        let mut gid = None;
        {
            let g = GROUPS.lock();
            let d = key(dev);
            if let Some(grp) = g
                .iter()
                .find(|grp| grp.dev == d && grp.qpns[..grp.n].contains(&qpn))
            {
                gid = Some(grp.gid);
            }
        }
        let Some(gid) = gid else {
            return;
        };
        let _ = detach(dev, &gid, qpn);
    }
}

/// Takes `qpn` out of group `gid` of `dev`; `false` if it was not there.
/// An empty group goes.
fn remove(dev: &RroceDev, gid: &[u8; 16], qpn: u32) -> bool {
    let mut g = GROUPS.lock();
    let d = key(dev);
    let Some(i) = g
        .iter()
        .position(|grp| grp.dev == d && grp.gid == *gid && grp.qpns[..grp.n].contains(&qpn))
    else {
        return false;
    };
    let grp = &mut g[i];
    if let Some(j) = grp.qpns[..grp.n].iter().position(|q| *q == qpn) {
        // The last one takes its place (the order does not matter).
        grp.qpns[j] = grp.qpns[grp.n - 1];
        grp.n -= 1;
    }
    let empty = if grp.n == 0 { g.remove(i).ok() } else { None };
    drop(g);
    // An empty group is freed outside the lock.
    drop(empty);
    true
}

/// Adds or removes `gid`'s Ethernet address on `dev`'s netdev.
fn filter(dev: &RroceDev, gid: &[u8; 16], add: bool) {
    let guard = rcu::read_lock();
    let ndev = dev.netdev(&guard);
    if ndev.is_null() {
        return;
    }
    // SAFETY: `ndev` is live inside the RCU read-side section (the device
    // reads it so); the GID is 16 bytes.
    let err = unsafe { sys::rroce_helper_mc_mac(ndev, gid.as_ptr(), add) };
    if err != 0 {
        pr_debug!("multicast filter update failed: {}\n", err);
    }
}

/// The QPs of `dev` attached to group `gid`, for a datagram sent to it:
/// calls `f` with each QP number, outside the table's lock.
pub(crate) fn for_each_member(dev: &RroceDev, gid: &[u8; 16], mut f: impl FnMut(u32)) -> bool {
    let mut qpns = [0u32; limits::MAX_MCAST_QP_ATTACH as usize];
    let n = {
        let g = GROUPS.lock();
        let d = key(dev);
        match g.iter().find(|grp| grp.dev == d && grp.gid == *gid) {
            Some(grp) => {
                for (d, s) in qpns.iter_mut().zip(&grp.qpns[..grp.n]) {
                    *d = *s;
                }
                grp.n
            }
            None => return false,
        }
    };
    for q in &qpns[..n] {
        f(*q);
    }
    true
}
