// SPDX-License-Identifier: GPL-2.0

//! What a responder refuses from its peer, seen by a kernel consumer: two
//! kernel RC QPs on one loopback device, one asking the other for what it
//! must not get. Also the MR keys' shape and the MR table's limit.

use super::*;

/// Two connected kernel RC QPs `a` (requester) and `b` (responder) on one
/// device, each completing into its own CQ. Fields drop in order: QPs,
/// CQs, PD, the consumer the CQs point at, the device.
pub(super) struct Pair {
    pub(super) a: TestQp,
    pub(super) b: TestQp,
    pub(super) cq_a: TestCq,
    pub(super) cq_b: TestCq,
    pub(super) pd: TestPd,
    _c: KBox<Consumer>,
    pub(super) dev: TestDev,
}

impl Pair {
    pub(super) fn new() -> Result<Self, &'static str> {
        Self::with_timeout(14)
    }

    /// [`Self::new`] with `a`'s retransmission timeout `timeout` (0: `a`
    /// never retransmits on its own).
    pub(super) fn with_timeout(timeout: u8) -> Result<Self, &'static str> {
        let dev = TestDev::new()?;
        let Some((sgid, gid)) = loopback_gid(&dev) else {
            return Err("no ::ffff:127.0.0.1 GID on the loopback device");
        };
        let c = KBox::new(Consumer::new(false), GFP_KERNEL).map_err(|_| "no memory")?;
        let pd = TestPd::new(&dev)?;
        let cq_a = TestCq::new(&dev, 64, 0, &c)?;
        let cq_b = TestCq::new(&dev, 64, 0, &c)?;
        let a = TestQp::new(&pd, &cq_a)?;
        let b = TestQp::new(&pd, &cq_b)?;
        a.connect_with(b.qpn(), &gid, sgid, timeout)?;
        b.connect(a.qpn(), &gid, sgid)?;
        Ok(Self {
            a,
            b,
            cq_a,
            cq_b,
            pd,
            _c: c,
            dev,
        })
    }

    /// A signaled RDMA READ of `len` bytes at `remote` under `rkey` into
    /// `local`; the status of its completion (or an error if none came).
    pub(super) fn read(
        &self,
        local: &mut [u8],
        remote: u64,
        rkey: u32,
    ) -> Result<u32, &'static str> {
        let op = sys::ib_wr_opcode_IB_WR_RDMA_READ;
        self.rdma(op, local.as_mut_ptr(), local.len(), remote, rkey)
    }

    /// A signaled RDMA WRITE of `local` to `remote` under `rkey`; the
    /// status of its completion.
    pub(super) fn write(&self, local: &[u8], remote: u64, rkey: u32) -> Result<u32, &'static str> {
        let op = sys::ib_wr_opcode_IB_WR_RDMA_WRITE;
        self.rdma(op, local.as_ptr(), local.len(), remote, rkey)
    }

    /// A signaled RDMA READ or WRITE from `a` of `len` bytes at `local`
    /// (a buffer of the caller's, written by a READ), at `remote` under
    /// `rkey`; the status of its completion.
    fn rdma(
        &self,
        opcode: u32,
        local: *const u8,
        len: usize,
        remote: u64,
        rkey: u32,
    ) -> Result<u32, &'static str> {
        let s = sge(local, len, self.pd.lkey());
        let w = rdma_wr(0xd1, opcode, &s, remote, rkey);
        if self.a.post_send(&w.wr).0 != 0 {
            return Err("post_send of an RDMA READ or WRITE failed");
        }
        let wcs = wait_wcs(&self.cq_a, 1);
        let wc = wcs
            .first()
            .ok_or("the RDMA READ or WRITE never completed")?;
        Ok(wc.status)
    }

    /// A receive of `b` into `rbuf`, then a signaled SEND with invalidate
    /// of `msg` from `a` naming `key`: the completions of both sides (the
    /// sender's first), each empty if none came.
    pub(super) fn send_with_inv(
        &self,
        rbuf: &mut [u8],
        msg: &[u8],
        key: u32,
    ) -> Result<(KVec<sys::ib_wc>, KVec<sys::ib_wc>), &'static str> {
        use sys::*;
        let lkey = self.pd.lkey();
        let r = sge(rbuf.as_mut_ptr(), rbuf.len(), lkey);
        if self.b.post_recv(&recv_wr(0xe1, &r)).0 != 0 {
            return Err("post_recv failed");
        }
        let s = sge(msg.as_ptr(), msg.len(), lkey);
        let mut w = send_wr(0xe2, ib_wr_opcode_IB_WR_SEND_WITH_INV, &s);
        w.ex.invalidate_rkey = key;
        if self.a.post_send(&w).0 != 0 {
            return Err("post_send of a SEND with invalidate failed");
        }
        let sent = wait_wcs(&self.cq_a, 1);
        let recvd = wait_wcs(&self.cq_b, 1);
        Ok((sent, recvd))
    }
}

/// A SEND with invalidate naming a key that is no fast-registration MR's
/// (here the PD's DMA MR) is refused with an invalid request NAK: the
/// sender completes with `IB_WC_REM_INV_REQ_ERR` and no receive completes
/// `WITH_INVALIDATE`.
pub(crate) fn send_with_invalidate_refused() -> Result<(), &'static str> {
    use sys::*;
    let p = Pair::new()?;
    let mut rbuf = zeroed(256)?;
    let src = pattern(64, 5)?;
    let (sent, recvd) = p.send_with_inv(&mut rbuf, &src, p.pd.rkey())?;
    if recvd.iter().any(|wc| {
        wc.status == ib_wc_status_IB_WC_SUCCESS
            && wc.wc_flags & ib_wc_flags_IB_WC_WITH_INVALIDATE as i32 != 0
    }) {
        return Err("a receive completed WITH_INVALIDATE though nothing was invalidated");
    }
    match sent.first() {
        Some(wc) if wc.status == ib_wc_status_IB_WC_REM_INV_REQ_ERR => Ok(()),
        Some(wc) => {
            pr_err!("SEND with invalidate completed with status {}\n", wc.status);
            Err("a SEND with invalidate was not refused with an invalid request NAK")
        }
        None => Err("the SEND with invalidate never completed"),
    }
}

/// A remote READ naming a DMA MR's local key (the PD's `local_dma_lkey`)
/// is refused: local keys of DMA MRs are not remote keys.
pub(crate) fn dma_lkey_not_a_remote_key() -> Result<(), &'static str> {
    let p = Pair::new()?;
    let secret = pattern(64, 77)?;
    let mut out = zeroed(64)?;
    let lkey = p.pd.lkey();
    if lkey == p.pd.rkey() {
        pr_err!("DMA MR lkey {:#x} is also its rkey\n", lkey);
    }
    let status = p.read(&mut out, secret.as_ptr() as u64, lkey)?;
    if status != sys::ib_wc_status_IB_WC_REM_ACCESS_ERR {
        pr_err!("READ through the local DMA key: status {}\n", status);
        return Err("a remote READ through a DMA MR's local key was not refused");
    }
    if out[..] == secret[..] {
        return Err("a remote READ through a DMA MR's local key returned the data");
    }
    Ok(())
}

/// `get_dma_mr` and `dereg_mr` through the device's ops, setting what the
/// core sets in between (`ib_alloc_pd` does the same for its DMA MR).
fn dma_mr(pd: &TestPd, access: u32) -> *mut sys::ib_mr {
    // SAFETY: a live kernel PD of a registered rroce device.
    unsafe {
        let device = (*pd.0).device;
        let mr = match (*device).ops.get_dma_mr {
            Some(f) => f(pd.0, access as i32),
            None => null_mut(),
        };
        if !bad_ptr(mr) {
            (*mr).device = device;
        }
        mr
    }
}

fn dereg(pd: &TestPd, mr: *mut sys::ib_mr) {
    // SAFETY: an MR `dma_mr` returned on `pd`, used by no QP.
    unsafe {
        if let Some(f) = (*(*pd.0).device).ops.dereg_mr {
            f(mr, null_mut());
        }
    }
}

/// Key bytes of successive MRs are not a counter: a key is not guessable
/// from the previous one.
pub(crate) fn mr_keys_unpredictable() -> Result<(), &'static str> {
    let dev = TestDev::new()?;
    let pd = TestPd::new(&dev)?;
    let mut keys = [0u32; 8];
    let mut mrs = [null_mut::<sys::ib_mr>(); 8];
    let mut res = Ok(());
    for (i, k) in keys.iter_mut().enumerate() {
        let mr = dma_mr(&pd, sys::ib_access_flags_IB_ACCESS_LOCAL_WRITE);
        if bad_ptr(mr) {
            res = Err("get_dma_mr failed");
            break;
        }
        mrs[i] = mr;
        // SAFETY: a live MR.
        *k = unsafe { (*mr).lkey };
    }
    for mr in mrs.iter().filter(|m| !m.is_null()) {
        dereg(&pd, *mr);
    }
    res?;
    let counting = keys
        .windows(2)
        .all(|w| (w[1] & 0xff) == ((w[0] & 0xff) + 1) & 0xff);
    if counting {
        pr_err!("MR keys {:x?}\n", keys);
        return Err("MR key bytes count up: the next key is predictable");
    }
    Ok(())
}

/// With every MR index the table holds taken, creating an MR fails with
/// ENOMEM and leaves nothing behind, instead of making an MR the
/// transport cannot find.
pub(crate) fn mr_table_full() -> Result<(), &'static str> {
    let dev = TestDev::new()?;
    let pd = TestPd::new(&dev)?;
    // SAFETY: a registered rroce device.
    let rdev = unsafe { crate::dev::RroceDev::from_ib(dev.0) };
    let table = rdev.mrs.len();
    let mut held = KVec::new();
    // Take every index the allocator has, then give back those past the
    // table: the next MR gets one of those.
    while let Ok(i) = rdev.mr_ids.alloc() {
        if held.push(i, GFP_KERNEL).is_err() {
            let _ = rdev.mr_ids.free(i);
            break;
        }
    }
    for i in held.iter().filter(|i| **i as usize >= table) {
        let _ = rdev.mr_ids.free(*i);
    }
    let mr = dma_mr(&pd, sys::ib_access_flags_IB_ACCESS_LOCAL_WRITE);
    let res = if bad_ptr(mr) {
        if mr as isize == ENOMEM.to_errno() as isize {
            Ok(())
        } else {
            Err("a full MR table failed with another error than ENOMEM")
        }
    } else {
        // SAFETY: a live MR.
        let key = unsafe { (*mr).lkey };
        let guard = kernel::sync::rcu::read_lock();
        let found = crate::mr::lookup(rdev, key, &guard).is_some();
        drop(guard);
        dereg(&pd, mr);
        if found {
            Err("an MR was created past a full table")
        } else {
            Err("an MR was created that the transport cannot find")
        }
    };
    let leaked = held
        .iter()
        .any(|i| *i as usize >= table && rdev.mr_ids.is_allocated(*i));
    for i in held.iter().filter(|i| (**i as usize) < table) {
        let _ = rdev.mr_ids.free(*i);
    }
    res?;
    if leaked {
        return Err("a failed MR creation kept its index");
    }
    Ok(())
}

/// Hundreds of MRs at once all succeed: the MR allocator spreads
/// successive indices over its bitmap words, and every index it hands out
/// must have a table slot (a table cut at `MAX_MR` refused the ~515th MR
/// with `ENOMEM`, which made nvmet-rdma fail its queues under
/// `ib_core.force_mr=1`).
pub(crate) fn many_mrs() -> Result<(), &'static str> {
    const N: usize = 600;
    let dev = TestDev::new()?;
    let pd = TestPd::new(&dev)?;
    let mut mrs = KVec::with_capacity(N, GFP_KERNEL).map_err(|_| "no memory")?;
    let mut res = Ok(());
    for _ in 0..N {
        let mr = dma_mr(&pd, sys::ib_access_flags_IB_ACCESS_LOCAL_WRITE);
        if bad_ptr(mr) {
            pr_err!("MR {} of {}: error {}\n", mrs.len() + 1, N, mr as isize);
            res = Err("an MR was refused long before the table was full");
            break;
        }
        // Capacity reserved above.
        let _ = mrs.push(mr, GFP_KERNEL);
    }
    for mr in mrs.iter() {
        dereg(&pd, *mr);
    }
    res
}

/// A remote READ of an unmapped kernel address through a DMA MR's remote
/// key completes with a remote access error instead of faulting the
/// responder.
pub(crate) fn dma_mr_bad_address() -> Result<(), &'static str> {
    let p = Pair::new()?;
    let mut out = zeroed(64)?;
    // The first page: never mapped.
    let status = p.read(&mut out, 0x10, p.pd.rkey())?;
    if status != sys::ib_wc_status_IB_WC_REM_ACCESS_ERR {
        pr_err!("READ of an unmapped address: status {}\n", status);
        return Err("a READ of an unmapped address did not fail with a remote access error");
    }
    Ok(())
}
