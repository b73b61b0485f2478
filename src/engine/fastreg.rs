// SPDX-License-Identifier: GPL-2.0

//! Fast-registration memory regions (FRWR): the rules of the REG_MR and
//! LOCAL_INV work requests and of remote invalidation, and the translation
//! of an I/O virtual address into the page list `map_mr_sg` made.
//!
//! A fast-registration MR is allocated empty (`alloc_mr`, state
//! [`FrState::Free`]). The kernel consumer maps a scatterlist onto it
//! (`ib_map_mr_sg`: a list of `page_size` pages and the first byte's
//! address), may change the high bits of `mr->iova` (xprtrdma puts an RPC
//! XID there) and the key byte (`ib_update_fast_reg_key`), and posts REG_MR:
//! the MR becomes [`FrState::Valid`] with that key, access and iova. A
//! LOCAL_INV work request or a peer's SEND with invalidate makes it free
//! again; only a free MR can be registered again.
//!
//! Addresses inside a registration are byte offsets from its iova: page
//! `i` holds bytes `[i * page_size - off0, (i + 1) * page_size - off0)`,
//! where `off0` is the first byte's offset in the first page. That holds
//! whatever the consumer did to the iova's high bits and for any page size,
//! larger or smaller than the CPU's.

/// Most pages in one fast registration (`max_fast_reg_page_list_len`).
pub const MAX_PAGE_LIST: u32 = 512;
/// Smallest MR page size accepted by `map_mr_sg`, as a shift (512 bytes).
pub const MIN_PAGE_SHIFT: u32 = 9;
/// Largest MR page size accepted by `map_mr_sg`, as a shift (1 GiB).
pub const MAX_PAGE_SHIFT: u32 = 30;

/// A fast-registration MR's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrState {
    /// No registration: REG_MR may register it; no key reaches memory.
    Free,
    /// Registered: its key reaches the registration's bytes.
    Valid,
}

/// Why a REG_MR, LOCAL_INV or remote invalidation is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrError {
    /// REG_MR of an MR that is already valid.
    NotFree,
    /// The MR and the QP are on different protection domains.
    OtherPd,
    /// The new key names another MR (its index bits differ).
    KeyIndex,
    /// The key does not match the MR's current key.
    KeyMismatch,
    /// The MR is not a fast-registration MR (user, DMA).
    NotFastReg,
    /// The mapped pages do not cover the registration, or the iova's
    /// offset in its first page changed since `map_mr_sg`.
    Layout,
    /// The access flags ask for remote write or atomics without local
    /// write, or carry unknown bits.
    Access,
}

/// The page size `map_mr_sg` was given, as a shift: a power of two from
/// 2^[`MIN_PAGE_SHIFT`] to 2^[`MAX_PAGE_SHIFT`].
pub const fn page_shift(page_size: u32) -> Option<u32> {
    if !page_size.is_power_of_two() {
        return None;
    }
    let s = page_size.trailing_zeros();
    if s < MIN_PAGE_SHIFT || s > MAX_PAGE_SHIFT {
        None
    } else {
        Some(s)
    }
}

/// Whether REG_MR may register an MR in `state` on its QP (`same_pd`:
/// the MR's PD is the QP's) with `new_key`, the MR's key being `cur_key`:
/// the MR is free and only the key byte changes (IBA o10-37.2.4, rxe's
/// `rxe_reg_fast_mr`).
pub const fn may_register(
    state: FrState,
    same_pd: bool,
    cur_key: u32,
    new_key: u32,
) -> Result<(), FrError> {
    if !same_pd {
        Err(FrError::OtherPd)
    } else if cur_key >> 8 != new_key >> 8 {
        Err(FrError::KeyIndex)
    } else if !matches!(state, FrState::Free) {
        Err(FrError::NotFree)
    } else {
        Ok(())
    }
}

/// Whether LOCAL_INV or a peer's SEND with invalidate may invalidate an
/// MR with `key` (`fast`: a fast-registration MR; `same_pd`: on the QP's
/// PD; `cur_key`: the MR's key). Invalidating a free MR is allowed and
/// changes nothing (the consumer's key may be stale; rxe does the same).
pub const fn may_invalidate(
    fast: bool,
    same_pd: bool,
    cur_key: u32,
    key: u32,
) -> Result<(), FrError> {
    if !fast {
        Err(FrError::NotFastReg)
    } else if cur_key != key {
        Err(FrError::KeyMismatch)
    } else if !same_pd {
        Err(FrError::OtherPd)
    } else {
        Ok(())
    }
}

/// One piece of an access to a registration: page `index`, `offset`
/// bytes into it, `len` bytes (all in that page).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Piece {
    /// Index in the page list.
    pub index: u32,
    /// Byte offset in the page.
    pub offset: u64,
    /// Bytes in this piece.
    pub len: u64,
}

/// A valid registration: which bytes its key reaches and where they are
/// in the page list.
///
/// # Invariants
///
/// `MIN_PAGE_SHIFT <= shift <= MAX_PAGE_SHIFT`, `npages <= MAX_PAGE_LIST`,
/// `first + length <= npages << shift`, `first < 1 << shift`, and
/// `iova + length` does not overflow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Registration {
    iova: u64,
    length: u64,
    shift: u32,
    first: u64,
    npages: u32,
}

impl Registration {
    /// The registration REG_MR makes of a mapping: `map_iova`, `length`
    /// and `npages` pages of `1 << shift` bytes from `map_mr_sg`, and
    /// `iova`, the MR's iova when REG_MR was posted. `iova` may differ from
    /// `map_iova` above the page offset only.
    pub const fn new(
        map_iova: u64,
        iova: u64,
        length: u64,
        shift: u32,
        npages: u32,
    ) -> Result<Self, FrError> {
        if shift < MIN_PAGE_SHIFT || shift > MAX_PAGE_SHIFT || npages > MAX_PAGE_LIST {
            return Err(FrError::Layout);
        }
        let mask = (1u64 << shift) - 1;
        let first = map_iova & mask;
        if iova & mask != first || iova.checked_add(length).is_none() {
            return Err(FrError::Layout);
        }
        // No overflow: npages <= 2^9, shift <= 30.
        let covered = (npages as u64) << shift;
        match first.checked_add(length) {
            Some(end) if end <= covered => {}
            _ => return Err(FrError::Layout),
        }
        // INVARIANT: checked above.
        Ok(Self {
            iova,
            length,
            shift,
            first,
            npages,
        })
    }

    /// The first byte's address.
    pub const fn iova(&self) -> u64 {
        self.iova
    }

    /// Bytes registered.
    pub const fn length(&self) -> u64 {
        self.length
    }

    /// Whether `[va, va + len)` lies in the registration.
    pub const fn contains(&self, va: u64, len: u64) -> bool {
        if va < self.iova {
            return false;
        }
        let rel = va - self.iova;
        match rel.checked_add(len) {
            Some(end) => end <= self.length,
            None => false,
        }
    }

    /// The first piece of `[va, va + len)` (`len > 0`): the bytes from
    /// `va` to the end of its page or of the access, whichever is first.
    /// `None` when the access leaves the registration.
    pub const fn piece(&self, va: u64, len: u64) -> Option<Piece> {
        if len == 0 || !self.contains(va, len) {
            return None;
        }
        // No overflow: first + rel < first + length <= npages << shift.
        let abs = self.first + (va - self.iova);
        let size = 1u64 << self.shift;
        let offset = abs & (size - 1);
        let room = size - offset;
        let index = (abs >> self.shift) as u32;
        if index >= self.npages {
            return None;
        }
        Some(Piece {
            index,
            offset,
            len: if len < room { len } else { room },
        })
    }
}

/// Checks of the pure parts, run by KUnit.
#[cfg(any(test, CONFIG_KUNIT))]
pub mod selftest {
    use super::*;

    /// Every piece of `[va, va + len)`, in order, or `None` if any is out.
    fn pieces(r: &Registration, mut va: u64, mut len: u64, out: &mut [Piece]) -> Option<usize> {
        let mut n = 0;
        while len > 0 {
            let p = r.piece(va, len)?;
            *out.get_mut(n)? = p;
            n += 1;
            va += p.len;
            len -= p.len;
        }
        Some(n)
    }

    /// REG_MR, LOCAL_INV and remote invalidation follow the state rules.
    pub fn state_rules() -> Result<(), &'static str> {
        let key = 0x1234_56aa;
        if may_register(FrState::Free, true, key, 0x1234_5601).is_err() {
            return Err("REG_MR of a free MR with a new key byte refused");
        }
        if may_register(FrState::Valid, true, key, key) != Err(FrError::NotFree) {
            return Err("REG_MR of a valid MR accepted");
        }
        if may_register(FrState::Free, false, key, key) != Err(FrError::OtherPd) {
            return Err("REG_MR across PDs accepted");
        }
        if may_register(FrState::Free, true, key, 0x1234_5700) != Err(FrError::KeyIndex) {
            return Err("REG_MR changing the key index accepted");
        }
        if may_invalidate(true, true, key, key).is_err() {
            return Err("invalidate with the MR's key refused");
        }
        if may_invalidate(true, true, key, key ^ 1) != Err(FrError::KeyMismatch) {
            return Err("invalidate with a stale key byte accepted");
        }
        if may_invalidate(false, true, key, key) != Err(FrError::NotFastReg) {
            return Err("invalidate of a user or DMA MR accepted");
        }
        if may_invalidate(true, false, key, key) != Err(FrError::OtherPd) {
            return Err("invalidate across PDs accepted");
        }
        Ok(())
    }

    /// Page sizes: powers of two from 512 bytes to 1 GiB.
    pub fn page_sizes() -> Result<(), &'static str> {
        if page_shift(4096) != Some(12)
            || page_shift(512) != Some(9)
            || page_shift(1 << 30) != Some(30)
        {
            return Err("a valid page size refused");
        }
        if page_shift(0).is_some()
            || page_shift(256).is_some()
            || page_shift(4097).is_some()
            || page_shift(1 << 31).is_some()
        {
            return Err("an invalid page size accepted");
        }
        Ok(())
    }

    /// A 4 KiB-page mapping starting mid-page, its iova's high 32 bits
    /// replaced (xprtrdma), translated piece by piece.
    pub fn translate_4k_xid() -> Result<(), &'static str> {
        let map_iova = 0xffff_8880_1234_5e00;
        let iova = 0xdead_beef_1234_5e00;
        // 0x200 bytes in page 0, pages 1 and 2 whole, 0x100 bytes in page 3.
        let len = 0x200 + 0x2000 + 0x100;
        let r = Registration::new(map_iova, iova, len, 12, 4).map_err(|_| "layout refused")?;
        let mut out = [Piece {
            index: 0,
            offset: 0,
            len: 0,
        }; 8];
        let n = pieces(&r, iova, len, &mut out).ok_or("a registered range left the MR")?;
        let want = [
            Piece {
                index: 0,
                offset: 0xe00,
                len: 0x200,
            },
            Piece {
                index: 1,
                offset: 0,
                len: 0x1000,
            },
            Piece {
                index: 2,
                offset: 0,
                len: 0x1000,
            },
            Piece {
                index: 3,
                offset: 0,
                len: 0x100,
            },
        ];
        if out.get(..n) != Some(&want[..]) {
            return Err("wrong pieces for a 4 KiB mapping with a changed iova");
        }
        if r.piece(iova + len - 1, 2).is_some() || r.piece(iova - 1, 1).is_some() {
            return Err("an access past either end was translated");
        }
        if r.piece(map_iova, 1).is_some() {
            return Err("the old iova still reaches the MR");
        }
        Ok(())
    }

    /// Page sizes other than the CPU's: 2 MiB pages (SMC-R maps large
    /// pages) and 512-byte pages.
    pub fn translate_other_sizes() -> Result<(), &'static str> {
        let base = 0x4020_0000 + 0x1_0000;
        let r =
            Registration::new(base, base, 3 << 20, 21, 3).map_err(|_| "2 MiB layout refused")?;
        // `base` is 64 KiB into its 2 MiB page: page 0 ends 2 MiB - 64 KiB on.
        let end0 = base + (2 << 20) - 0x1_0000;
        let p = r.piece(end0 - 8, 64).ok_or("2 MiB: in range refused")?;
        if p != (Piece {
            index: 0,
            offset: (2 << 20) - 8,
            len: 8,
        }) {
            return Err("2 MiB: a piece crossed its page");
        }
        let p = r
            .piece(end0 + 0x100, 16)
            .ok_or("2 MiB: second page refused")?;
        if p != (Piece {
            index: 1,
            offset: 0x100,
            len: 16,
        }) {
            return Err("2 MiB: wrong second page");
        }
        let r =
            Registration::new(0x1000, 0x1000, 2048, 9, 4).map_err(|_| "512 B layout refused")?;
        let mut out = [Piece {
            index: 0,
            offset: 0,
            len: 0,
        }; 8];
        if pieces(&r, 0x1100, 0x400, &mut out) != Some(3)
            || out[0]
                != (Piece {
                    index: 0,
                    offset: 0x100,
                    len: 0x100,
                })
            || out[2]
                != (Piece {
                    index: 2,
                    offset: 0,
                    len: 0x100,
                })
        {
            return Err("512 B: wrong pieces");
        }
        Ok(())
    }

    /// Registrations the pages do not cover, or whose iova moved inside
    /// its page, are refused.
    pub fn bad_layouts() -> Result<(), &'static str> {
        let bad = [
            // One byte more than two pages hold from offset 0x10.
            Registration::new(0x10, 0x10, 0x2000 - 0x10 + 1, 12, 2),
            // The iova moved within its page.
            Registration::new(0x10, 0x20, 16, 12, 1),
            // Too many pages, a page size out of range.
            Registration::new(0, 0, 16, 12, MAX_PAGE_LIST + 1),
            Registration::new(0, 0, 16, 8, 1),
            Registration::new(0, 0, 16, 31, 1),
            // The end of the registration wraps.
            Registration::new(0, u64::MAX - 0xfff, 0x1000, 12, 2),
        ];
        if bad.iter().any(|r| r.is_ok()) {
            return Err("a registration the pages do not cover was accepted");
        }
        if Registration::new(0x10, 0x10, 0x2000 - 0x10, 12, 2).is_err() {
            return Err("a registration filling its pages was refused");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_rules() {
        selftest::state_rules().unwrap();
    }

    #[test]
    fn page_sizes() {
        selftest::page_sizes().unwrap();
    }

    #[test]
    fn translate_4k_xid() {
        selftest::translate_4k_xid().unwrap();
    }

    #[test]
    fn translate_other_sizes() {
        selftest::translate_other_sizes().unwrap();
    }

    #[test]
    fn bad_layouts() {
        selftest::bad_layouts().unwrap();
    }

    /// Any access inside a registration splits into pieces that stay
    /// inside their pages and add up to the access, in order.
    #[test]
    fn pieces_cover_every_access() {
        for shift in [9u32, 12, 16] {
            let size = 1u64 << shift;
            for first in [0, 1, size / 2, size - 1] {
                let npages = 5u32;
                let length = (u64::from(npages) << shift) - first;
                let iova = 0x7000_0000_0000 + first;
                let r = Registration::new(iova, iova, length, shift, npages).unwrap();
                for (off, len) in [(0, length), (1, size), (size - 1, 2), (length - 1, 1)] {
                    let (mut va, mut left) = (iova + off, len);
                    let mut last = None;
                    while left > 0 {
                        let p = r.piece(va, left).unwrap();
                        assert!(p.offset + p.len <= size && p.len > 0);
                        let abs = u64::from(p.index) * size + p.offset;
                        assert_eq!(abs, first + (va - iova));
                        if let Some(l) = last {
                            assert!(p.index >= l);
                        }
                        last = Some(p.index);
                        va += p.len;
                        left -= p.len;
                    }
                }
            }
        }
    }
}
