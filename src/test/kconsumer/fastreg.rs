// SPDX-License-Identifier: GPL-2.0

//! Fast registration as a storage initiator uses it (nvme-rdma, xprtrdma):
//! a kernel consumer allocates an MR with `ib_alloc_mr`, maps a kernel
//! buffer onto it with `ib_map_mr_sg`, changes its key byte (and, like
//! xprtrdma, the high half of its iova), registers it with a REG_MR work
//! request, lets its peer READ and WRITE through the key, and ends the
//! registration with LOCAL_INV or the peer's SEND with invalidate. All on
//! two kernel RC QPs over the loopback device ([`Pair`]); `b` owns the MR,
//! `a` is the peer.

use super::peer::Pair;
use super::*;

/// Bytes registered, from 0x100 into the buffer's first page: three 4 KiB
/// pages, the last one partly.
const LEN: usize = 10000;
const OFF: usize = 0x100;

/// A fast-registration MR of the pair's PD, mapped onto `buf[OFF..OFF +
/// LEN]`; deregistered (and unmapped) on drop.
struct FastMr {
    mr: *mut sys::ib_mr,
    sg: KBox<sys::scatterlist>,
    dev: *mut sys::ib_device,
    mapped: bool,
}

impl FastMr {
    /// Allocates an MR for 8 pages on `pd` and maps `buf[OFF..OFF + LEN]`
    /// onto it in 4 KiB pages.
    fn new(p: &Pair, buf: &mut [u8]) -> Result<Self, &'static str> {
        if buf.len() < OFF + LEN {
            return Err("buffer too small");
        }
        // SAFETY: a live kernel PD of a registered rroce device.
        let mr = unsafe { sys::ib_alloc_mr(p.pd.0, sys::ib_mr_type_IB_MR_TYPE_MEM_REG, 8) };
        if bad_ptr(mr) {
            return Err("ib_alloc_mr(IB_MR_TYPE_MEM_REG) failed");
        }
        // SAFETY: all-zero is a valid (empty) scatterlist entry.
        let sg = KBox::new(
            unsafe { core::mem::zeroed::<sys::scatterlist>() },
            GFP_KERNEL,
        );
        let mut m = Self {
            mr,
            sg: sg.map_err(|_| "no memory")?,
            dev: p.dev.0,
            mapped: false,
        };
        // SAFETY: `buf` outlives the MR (the caller drops the MR first);
        // one scatterlist entry for it.
        let r = unsafe {
            sys::rroce_helper_test_sg_map(
                m.dev,
                &mut *m.sg,
                buf.as_mut_ptr().add(OFF).cast(),
                LEN as u32,
            )
        };
        if r != 0 {
            return Err("ib_dma_map_sg failed");
        }
        m.mapped = true;
        // SAFETY: a live MR and a mapped one-entry scatterlist.
        let n = unsafe { sys::ib_map_mr_sg(m.mr, &mut *m.sg, 1, null_mut(), 4096) };
        if n != 1 {
            pr_err!("ib_map_mr_sg mapped {}\n", n);
            return Err("ib_map_mr_sg did not map the scatterlist");
        }
        // SAFETY: a live MR; the core set these in `ib_map_mr_sg`.
        let (iova, len) = unsafe { ((*mr).iova, (*mr).length) };
        if iova != buf.as_ptr() as u64 + OFF as u64 || len != LEN as u64 {
            return Err("ib_map_mr_sg: wrong iova or length");
        }
        Ok(m)
    }

    fn key(&self) -> u32 {
        // SAFETY: a live MR.
        unsafe { (*self.mr).rkey }
    }

    fn iova(&self) -> u64 {
        // SAFETY: a live MR.
        unsafe { (*self.mr).iova }
    }

    /// `ib_update_fast_reg_key`: a new key byte, same index.
    fn next_key(&self) {
        // SAFETY: a live MR the test owns.
        unsafe {
            let k = ((*self.mr).rkey & 0xff).wrapping_add(1) & 0xff;
            (*self.mr).lkey = ((*self.mr).lkey & 0xffff_ff00) | k;
            (*self.mr).rkey = ((*self.mr).rkey & 0xffff_ff00) | k;
        }
    }

    /// What xprtrdma does before REG_MR: the RPC XID in the iova's high
    /// 32 bits.
    fn set_iova_high(&self, hi: u32) {
        // SAFETY: a live MR the test owns.
        unsafe { (*self.mr).iova = (u64::from(hi) << 32) | ((*self.mr).iova & 0xffff_ffff) };
    }
}

impl Drop for FastMr {
    fn drop(&mut self) {
        // SAFETY: the MR (no work request in flight any more) and the
        // mapping made in `new`.
        unsafe {
            sys::ib_dereg_mr_user(self.mr, null_mut());
            if self.mapped {
                sys::rroce_helper_test_sg_unmap(self.dev, &mut *self.sg);
            }
        }
    }
}

/// Posts a signaled REG_MR of `m` with its current key on `qp` with
/// `access`; the completion's (status, opcode).
fn reg(qp: &TestQp, cq: &TestCq, m: &FastMr, access: u32) -> Result<(u32, u32), &'static str> {
    use sys::*;
    // SAFETY: all-zero is a valid `ib_reg_wr`.
    let mut w: ib_reg_wr = unsafe { core::mem::zeroed() };
    w.wr.__bindgen_anon_1.wr_id = 0xf1;
    w.wr.opcode = ib_wr_opcode_IB_WR_REG_MR;
    w.wr.send_flags = ib_send_flags_IB_SEND_SIGNALED;
    w.mr = m.mr;
    w.key = m.key();
    w.access = access as i32;
    if qp.post_send(&w.wr).0 != 0 {
        return Err("post_send of REG_MR failed");
    }
    let wc = *wait_wcs(cq, 1).first().ok_or("REG_MR never completed")?;
    Ok((wc.status, wc.opcode))
}

/// Posts a signaled LOCAL_INV of `key` on `qp`; the completion's
/// (status, opcode).
fn local_inv(qp: &TestQp, cq: &TestCq, key: u32) -> Result<(u32, u32), &'static str> {
    use sys::*;
    // SAFETY: all-zero is a valid `ib_send_wr`.
    let mut w: ib_send_wr = unsafe { core::mem::zeroed() };
    w.__bindgen_anon_1.wr_id = 0xf2;
    w.opcode = ib_wr_opcode_IB_WR_LOCAL_INV;
    w.send_flags = ib_send_flags_IB_SEND_SIGNALED;
    w.ex.invalidate_rkey = key;
    if qp.post_send(&w).0 != 0 {
        return Err("post_send of LOCAL_INV failed");
    }
    let wc = *wait_wcs(cq, 1).first().ok_or("LOCAL_INV never completed")?;
    Ok((wc.status, wc.opcode))
}

const REMOTE_RW: u32 = sys::ib_access_flags_IB_ACCESS_LOCAL_WRITE
    | sys::ib_access_flags_IB_ACCESS_REMOTE_WRITE
    | sys::ib_access_flags_IB_ACCESS_REMOTE_READ;

/// REG_MR, then the peer WRITEs and READs through the fast-registered key
/// (at an iova whose high half the consumer replaced), then LOCAL_INV:
/// the old key no longer reaches the buffer.
pub(crate) fn frwr_write_read_local_inv() -> Result<(), &'static str> {
    use sys::*;
    let p = Pair::new()?;
    let mut buf = zeroed(4 * 4096)?;
    let m = FastMr::new(&p, &mut buf)?;
    m.next_key();
    m.set_iova_high(0x5a5a_0001);
    let (status, opcode) = reg(&p.b, &p.cq_b, &m, REMOTE_RW)?;
    if status != ib_wc_status_IB_WC_SUCCESS || opcode != ib_wc_opcode_IB_WC_REG_MR {
        pr_err!("REG_MR: status {} opcode {}\n", status, opcode);
        return Err("REG_MR did not complete as IB_WC_REG_MR with success");
    }
    let (key, iova) = (m.key(), m.iova());
    let data = pattern(LEN, 31)?;
    if p.write(&data, iova, key)? != ib_wc_status_IB_WC_SUCCESS {
        return Err("a WRITE through the fast-registered key failed");
    }
    if buf[OFF..OFF + LEN] != data[..] || buf[..OFF].iter().any(|b| *b != 0) {
        return Err("the WRITE did not land exactly in the registered pages");
    }
    // Across the page boundary at 4096 - OFF into the registration.
    let mut back = zeroed(512)?;
    let at = 4096 - OFF - 256;
    if p.read(&mut back, iova + at as u64, key)? != ib_wc_status_IB_WC_SUCCESS {
        return Err("a READ through the fast-registered key failed");
    }
    if back[..] != data[at..at + 512] {
        return Err("a READ across a page of the registration returned other bytes");
    }
    let (status, opcode) = local_inv(&p.b, &p.cq_b, key)?;
    if status != ib_wc_status_IB_WC_SUCCESS || opcode != ib_wc_opcode_IB_WC_LOCAL_INV {
        pr_err!("LOCAL_INV: status {} opcode {}\n", status, opcode);
        return Err("LOCAL_INV did not complete as IB_WC_LOCAL_INV with success");
    }
    let other = pattern(64, 99)?;
    let status = p.write(&other, iova, key)?;
    if status != ib_wc_status_IB_WC_REM_ACCESS_ERR {
        pr_err!("WRITE after LOCAL_INV: status {}\n", status);
        return Err("a WRITE through an invalidated key was not refused");
    }
    if buf[OFF..OFF + 64] != data[..64] {
        return Err("a WRITE through an invalidated key changed the buffer");
    }
    Ok(())
}

/// The peer's SEND with invalidate ends the registration it names: the
/// receive completes `WITH_INVALIDATE` with that key, and the key reaches
/// nothing afterwards. The MR can then be registered again.
pub(crate) fn frwr_remote_invalidate() -> Result<(), &'static str> {
    use sys::*;
    let p = Pair::new()?;
    let mut buf = zeroed(4 * 4096)?;
    let m = FastMr::new(&p, &mut buf)?;
    m.next_key();
    let (status, _) = reg(&p.b, &p.cq_b, &m, REMOTE_RW)?;
    if status != ib_wc_status_IB_WC_SUCCESS {
        return Err("REG_MR failed");
    }
    let key = m.key();
    let mut rbuf = zeroed(64)?;
    let msg = pattern(32, 3)?;
    let (sent, recvd) = p.send_with_inv(&mut rbuf, &msg, key)?;
    let sent = *sent.first().ok_or("the SEND never completed")?;
    let got = *recvd.first().ok_or("no receive completed")?;
    if sent.status != ib_wc_status_IB_WC_SUCCESS || got.status != ib_wc_status_IB_WC_SUCCESS {
        pr_err!(
            "SEND with invalidate: send {} recv {}\n",
            sent.status,
            got.status
        );
        return Err("a SEND with invalidate of a valid fast-registered key failed");
    }
    // SAFETY: rroce fills `invalidate_rkey` for a receive WITH_INVALIDATE.
    let inv = unsafe { got.ex.invalidate_rkey };
    if got.wc_flags & ib_wc_flags_IB_WC_WITH_INVALIDATE as i32 == 0 || inv != key {
        pr_err!(
            "receive: flags {:#x} invalidate_rkey {:#x} (key {:#x})\n",
            got.wc_flags,
            inv,
            key
        );
        return Err("the receive did not complete WITH_INVALIDATE and the key");
    }
    if rbuf[..32] != msg[..] {
        return Err("the SEND with invalidate's data did not arrive");
    }
    // The key is dead; a new registration with a new key byte works.
    let mut out = zeroed(16)?;
    if p.read(&mut out, m.iova(), key)? != ib_wc_status_IB_WC_REM_ACCESS_ERR {
        return Err("a READ through a remotely invalidated key was not refused");
    }
    Ok(())
}

/// REG_MR is refused (`IB_WC_LOC_QP_OP_ERR`) for a valid MR, for a key
/// naming another index, and from a QP on another PD; LOCAL_INV is refused
/// for a key that is not the MR's, and for a DMA MR.
pub(crate) fn frwr_rules() -> Result<(), &'static str> {
    use sys::*;
    let op_err = ib_wc_status_IB_WC_LOC_QP_OP_ERR;
    // Each refusal moves the QP to the error state: a new pair each.
    {
        let p = Pair::new()?;
        let mut buf = zeroed(4 * 4096)?;
        let m = FastMr::new(&p, &mut buf)?;
        if reg(&p.b, &p.cq_b, &m, REMOTE_RW)?.0 != ib_wc_status_IB_WC_SUCCESS {
            return Err("REG_MR of a free MR failed");
        }
        if reg(&p.b, &p.cq_b, &m, REMOTE_RW)?.0 != op_err {
            return Err("REG_MR of a valid MR was not refused");
        }
    }
    {
        let p = Pair::new()?;
        let mut buf = zeroed(4 * 4096)?;
        let m = FastMr::new(&p, &mut buf)?;
        // SAFETY: a live MR the test owns.
        unsafe { (*m.mr).rkey ^= 0x100 };
        if reg(&p.b, &p.cq_b, &m, REMOTE_RW)?.0 != op_err {
            return Err("REG_MR with a key of another index was not refused");
        }
    }
    {
        let p = Pair::new()?;
        let pd2 = TestPd::new(&p.dev)?;
        let mut buf = zeroed(4 * 4096)?;
        // SAFETY: a live kernel PD of the pair's device.
        let mr = unsafe { ib_alloc_mr(pd2.0, ib_mr_type_IB_MR_TYPE_MEM_REG, 8) };
        if bad_ptr(mr) {
            return Err("ib_alloc_mr on a second PD failed");
        }
        let mut m = FastMr::new(&p, &mut buf)?;
        // Swap in the second PD's MR, mapped the same way.
        // SAFETY: a live MR; `m.sg` is mapped.
        let n = unsafe { ib_map_mr_sg(mr, &mut *m.sg, 1, null_mut(), 4096) };
        let pd1_mr = core::mem::replace(&mut m.mr, mr);
        // SAFETY: the first PD's MR, never registered.
        unsafe { ib_dereg_mr_user(pd1_mr, null_mut()) };
        if n != 1 {
            return Err("ib_map_mr_sg on the second PD's MR failed");
        }
        if reg(&p.b, &p.cq_b, &m, REMOTE_RW)?.0 != op_err {
            return Err("REG_MR of another PD's MR was not refused");
        }
        drop(m);
        drop(pd2);
    }
    {
        let p = Pair::new()?;
        let mut buf = zeroed(4 * 4096)?;
        let m = FastMr::new(&p, &mut buf)?;
        if reg(&p.b, &p.cq_b, &m, REMOTE_RW)?.0 != ib_wc_status_IB_WC_SUCCESS {
            return Err("REG_MR of a free MR failed");
        }
        if local_inv(&p.b, &p.cq_b, m.key() ^ 1)?.0 != op_err {
            return Err("LOCAL_INV with a stale key byte was not refused");
        }
    }
    {
        let p = Pair::new()?;
        if local_inv(&p.b, &p.cq_b, p.pd.rkey())?.0 != op_err {
            return Err("LOCAL_INV of a DMA MR was not refused");
        }
    }
    Ok(())
}
