// SPDX-License-Identifier: GPL-2.0

//! Memory windows (IBA 10.6.7): the rules of binding, invalidating and
//! using a window, as pure functions on a window's state.
//!
//! A window is allocated on a PD (`alloc_mw`), type 1 or type 2B. A BIND_MW
//! work request gives it a part of an MR (an address range, access rights
//! and a new key byte); its key then reaches that range, with the window's
//! rights, for QPs on its PD (type 2: only the QP that bound it). A type 1
//! window is bound again to change or end its binding (length 0 unbinds)
//! and can never be invalidated; a type 2 window is bound only while free,
//! and LOCAL_INV (on its PD) or a peer's SEND with invalidate (on the QP it
//! is bound to) frees it again.
//!
//! Window keys live apart from MR keys: their index bits start at
//! [`KEY_INDEX_BASE`], above every MR index, so a key names a window or an
//! MR by its value alone.
//!
//! rroce is stricter than rdma_rxe 7.3 where rxe's checks are missing:
//! accesses must stay inside the window (rxe checks only the MR's bounds),
//! the MR must be on the window's PD, invalidation names the window's PD or
//! bound QP, and invalidating a window that is not bound is an error (rxe
//! dereferences a NULL QP there). Zero-based windows are refused.

/// The first window key index; MR indices stay below it.
pub const KEY_INDEX_BASE: u32 = 1 << 20;

/// `IB_ACCESS_*` bits a window binding may carry.
pub const LOCAL_WRITE: u32 = 1;
/// Remote write.
pub const REMOTE_WRITE: u32 = 2;
/// Remote read.
pub const REMOTE_READ: u32 = 4;
/// Remote atomics.
pub const REMOTE_ATOMIC: u32 = 8;
/// The MR may have windows bound to it.
pub const MW_BIND: u32 = 16;
/// Zero-based addressing (refused).
pub const ZERO_BASED: u32 = 32;

/// Whether `key` names a window (else an MR).
pub const fn is_window_key(key: u32) -> bool {
    key >> 8 >= KEY_INDEX_BASE
}

/// The window table index of window key `key`.
pub const fn table_index(key: u32) -> Option<u32> {
    (key >> 8).checked_sub(KEY_INDEX_BASE)
}

/// The first key of the window at table index `index` with key byte `byte`.
pub const fn key_of(index: u32, byte: u8) -> Option<u32> {
    match index.checked_add(KEY_INDEX_BASE) {
        Some(i) if i < 1 << 24 => Some(i << 8 | byte as u32),
        _ => None,
    }
}

/// A window's type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MwType {
    /// Type 1: bound through `ibv_bind_mw`, never invalidated.
    One,
    /// Type 2B: bound by a BIND_MW work request, to its QP.
    Two,
}

/// Why a bind, an invalidation or an access through a window is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MwError {
    /// The key is not the window's current key.
    KeyMismatch,
    /// The new key names another window (its index bits differ).
    KeyIndex,
    /// Type 2: bind of a window that is already bound.
    NotFree,
    /// Not bound: nothing to invalidate or to reach.
    NotBound,
    /// The QP or the MR is on another PD than the window.
    OtherPd,
    /// Type 2: the access comes from, or the invalidation names, another
    /// QP than the one the window is bound to.
    OtherQp,
    /// Type 1 windows are never invalidated (IBA o10-37.2.26).
    Type1Invalidate,
    /// Type 2: a bind without an MR or of length 0.
    Type2NeedsMr,
    /// The MR does not allow windows (no `IB_ACCESS_MW_BIND`, C10-73).
    MrNoBind,
    /// Remote write or atomics through a window of an MR without local
    /// write (C10-74).
    MrNoLocalWrite,
    /// The range is not inside the MR (C10-75), or an access is not
    /// inside the window.
    Bounds,
    /// Unknown or refused access bits (zero-based addressing).
    Access,
    /// The window does not grant the access asked for.
    Rights,
}

/// What a window is bound to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Binding {
    /// First byte (a virtual address of the MR).
    pub addr: u64,
    /// Bytes; never 0.
    pub length: u64,
    /// `IB_ACCESS_*` remote rights the window grants.
    pub access: u32,
    /// The MR's local key (its index names it in the MR table).
    pub mr_lkey: u32,
}

impl Binding {
    /// Whether `[va, va + len)` lies inside the binding.
    pub const fn contains(&self, va: u64, len: u64) -> bool {
        match (va.checked_add(len), self.addr.checked_add(self.length)) {
            (Some(end), Some(wend)) => va >= self.addr && end <= wend,
            _ => false,
        }
    }
}

/// A window's state, behind its lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    /// Its type.
    pub ty: MwType,
    /// Its current key.
    pub key: u32,
    /// What it is bound to, if anything.
    pub binding: Option<Binding>,
    /// Type 2: the QP number it is bound to.
    pub qpn: u32,
}

/// What a bind needs to know of the MR it names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MrFacts {
    /// On the window's PD.
    pub same_pd: bool,
    /// The MR's `IB_ACCESS_*`.
    pub access: u32,
    /// Its first byte and length.
    pub iova: u64,
    /// Its length.
    pub length: u64,
    /// Its local key.
    pub lkey: u32,
}

/// A BIND_MW work request (`wr.mw` of the send WQE).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BindRequest {
    /// The window's current key.
    pub mw_key: u32,
    /// The key it gets (only its low byte is new).
    pub new_key: u32,
    /// The range and rights.
    pub addr: u64,
    /// Bytes; 0 unbinds a type 1 window.
    pub length: u64,
    /// `IB_ACCESS_*`.
    pub access: u32,
}

/// The rights a binding may grant.
const BIND_ACCESS: u32 = LOCAL_WRITE | REMOTE_WRITE | REMOTE_READ | REMOTE_ATOMIC | ZERO_BASED;

impl Window {
    /// A new window of type `ty` with key `key`: unbound (a type 1 window
    /// is usable once bound).
    pub const fn new(ty: MwType, key: u32) -> Self {
        Self {
            ty,
            key,
            binding: None,
            qpn: 0,
        }
    }

    /// Checks a bind by QP `qpn` (`qp_same_pd`: on the window's PD) of
    /// `req` over the MR `mr` (`None`: the request names no MR it could
    /// find) and returns the binding it makes (`None`: a type 1 unbind).
    pub fn check_bind(
        &self,
        req: &BindRequest,
        qp_same_pd: bool,
        mr: Option<MrFacts>,
    ) -> Result<Option<Binding>, MwError> {
        if req.mw_key != self.key {
            return Err(MwError::KeyMismatch);
        }
        if req.new_key >> 8 != self.key >> 8 {
            return Err(MwError::KeyIndex);
        }
        if !qp_same_pd {
            return Err(MwError::OtherPd);
        }
        if req.access & !BIND_ACCESS != 0 || req.access & ZERO_BASED != 0 {
            return Err(MwError::Access);
        }
        if self.ty == MwType::Two && self.binding.is_some() {
            return Err(MwError::NotFree);
        }
        if req.length == 0 {
            // Type 1: unbound, no MR needed; type 2 cannot bind nothing.
            return match self.ty {
                MwType::One => Ok(None),
                MwType::Two => Err(MwError::Type2NeedsMr),
            };
        }
        let mr = mr.ok_or(MwError::Type2NeedsMr)?;
        if !mr.same_pd {
            return Err(MwError::OtherPd);
        }
        if mr.access & MW_BIND == 0 {
            return Err(MwError::MrNoBind);
        }
        if req.access & (REMOTE_WRITE | REMOTE_ATOMIC) != 0 && mr.access & LOCAL_WRITE == 0 {
            return Err(MwError::MrNoLocalWrite);
        }
        let b = Binding {
            addr: req.addr,
            length: req.length,
            access: req.access,
            mr_lkey: mr.lkey,
        };
        let mr_range = Binding {
            addr: mr.iova,
            length: mr.length,
            ..b
        };
        if !mr_range.contains(b.addr, b.length) {
            return Err(MwError::Bounds);
        }
        Ok(Some(b))
    }

    /// Makes binding `b` (checked by [`Self::check_bind`] for `req`) by QP
    /// `qpn`; returns the binding it replaces (its MR is no longer bound).
    pub fn bind(&mut self, req: &BindRequest, b: Option<Binding>, qpn: u32) -> Option<Binding> {
        self.key = (self.key & !0xff) | (req.new_key & 0xff);
        self.qpn = if self.ty == MwType::Two { qpn } else { 0 };
        core::mem::replace(&mut self.binding, b)
    }

    /// Checks an invalidation of `key` by QP `qpn` (`qp_same_pd`: on the
    /// window's PD); `remote`: a peer's SEND with invalidate arriving on
    /// that QP (which must be the one the window is bound to).
    pub fn check_invalidate(
        &self,
        key: u32,
        qp_same_pd: bool,
        qpn: u32,
        remote: bool,
    ) -> Result<(), MwError> {
        if key != self.key {
            return Err(MwError::KeyMismatch);
        }
        if self.ty == MwType::One {
            return Err(MwError::Type1Invalidate);
        }
        if self.binding.is_none() {
            return Err(MwError::NotBound);
        }
        if !qp_same_pd {
            return Err(MwError::OtherPd);
        }
        if remote && qpn != self.qpn {
            return Err(MwError::OtherQp);
        }
        Ok(())
    }

    /// Invalidates the window (checked by [`Self::check_invalidate`]);
    /// returns the binding it ends.
    pub fn invalidate(&mut self) -> Option<Binding> {
        self.qpn = 0;
        self.binding.take()
    }

    /// Checks an access of `len` bytes at `va` needing the `need` rights
    /// through key `key`, from QP `qpn` (`qp_same_pd`: on the window's PD);
    /// returns the MR's local key. The MR's own bounds are checked by the
    /// caller (the window lies inside them).
    pub fn translate(
        &self,
        key: u32,
        va: u64,
        len: u64,
        need: u32,
        qp_same_pd: bool,
        qpn: u32,
    ) -> Result<u32, MwError> {
        if key != self.key {
            return Err(MwError::KeyMismatch);
        }
        let b = self.binding.ok_or(MwError::NotBound)?;
        if !qp_same_pd {
            return Err(MwError::OtherPd);
        }
        if self.ty == MwType::Two && qpn != self.qpn {
            return Err(MwError::OtherQp);
        }
        if b.access & need != need {
            return Err(MwError::Rights);
        }
        if !b.contains(va, len) {
            return Err(MwError::Bounds);
        }
        Ok(b.mr_lkey)
    }
}

/// Checks of the rules above, run by the host tests and by KUnit.
#[cfg(any(test, CONFIG_KUNIT))]
pub mod selftest {
    use super::*;

    const MR: MrFacts = MrFacts {
        same_pd: true,
        access: LOCAL_WRITE | MW_BIND,
        iova: 0x1000,
        length: 0x2000,
        lkey: 0x0000_1234,
    };

    fn req(w: &Window, addr: u64, length: u64, access: u32) -> BindRequest {
        BindRequest {
            mw_key: w.key,
            new_key: (w.key & !0xff) | ((w.key + 1) & 0xff),
            addr,
            length,
            access,
        }
    }

    /// Window keys and MR keys never meet.
    pub fn key_space() -> Result<(), &'static str> {
        let k = key_of(0, 0x5a).ok_or("no key for index 0")?;
        if !is_window_key(k) || table_index(k) != Some(0) {
            return Err("window key not recognised");
        }
        // MR keys: index below 2^20, any key byte.
        if is_window_key(0x000f_ffff_u32 << 8 | 0xff) || table_index(0x0012_3456).is_some() {
            return Err("an MR key taken for a window key");
        }
        if key_of(u32::MAX - KEY_INDEX_BASE, 0).is_some() {
            return Err("a window index beyond 24 bits made a key");
        }
        Ok(())
    }

    /// Type 2: bound only while free, with an MR of the window's PD that
    /// allows windows, inside it; then reachable by its QP only, with its
    /// rights, inside the window; invalidated on its PD (remotely only by
    /// its QP), never while free.
    pub fn type2_rules() -> Result<(), &'static str> {
        let mut w = Window::new(MwType::Two, key_of(7, 0x10).ok_or("key")?);
        let r = req(&w, 0x1800, 0x100, LOCAL_WRITE | REMOTE_WRITE);
        if w.check_invalidate(w.key, true, 5, false) != Err(MwError::NotBound) {
            return Err("a never-bound type 2 window invalidated");
        }
        if w.check_bind(&r, true, None) != Err(MwError::Type2NeedsMr) {
            return Err("type 2 bound without an MR");
        }
        if w.check_bind(&req(&w, 0x1800, 0, REMOTE_WRITE), true, Some(MR))
            != Err(MwError::Type2NeedsMr)
        {
            return Err("type 2 bound with length 0");
        }
        if w.check_bind(&r, false, Some(MR)) != Err(MwError::OtherPd) {
            return Err("bound by a QP of another PD");
        }
        let other = MrFacts {
            same_pd: false,
            ..MR
        };
        if w.check_bind(&r, true, Some(other)) != Err(MwError::OtherPd) {
            return Err("bound to an MR of another PD");
        }
        let nobind = MrFacts {
            access: LOCAL_WRITE,
            ..MR
        };
        if w.check_bind(&r, true, Some(nobind)) != Err(MwError::MrNoBind) {
            return Err("bound to an MR without MW_BIND");
        }
        let nolw = MrFacts {
            access: MW_BIND,
            ..MR
        };
        if w.check_bind(&r, true, Some(nolw)) != Err(MwError::MrNoLocalWrite) {
            return Err("remote write through an MR without local write");
        }
        if w.check_bind(&req(&w, 0x2f00, 0x200, REMOTE_READ), true, Some(MR))
            != Err(MwError::Bounds)
        {
            return Err("bound past the MR's end");
        }
        if w.check_bind(
            &req(&w, 0x1800, 0x100, REMOTE_READ | ZERO_BASED),
            true,
            Some(MR),
        ) != Err(MwError::Access)
        {
            return Err("zero-based window accepted");
        }
        let mut bad_key = r;
        bad_key.new_key ^= 0x100;
        if w.check_bind(&bad_key, true, Some(MR)) != Err(MwError::KeyIndex) {
            return Err("bind to another window's key index accepted");
        }
        let b = w
            .check_bind(&r, true, Some(MR))
            .map_err(|_| "valid bind refused")?;
        if w.bind(&r, b, 5).is_some() || w.key != r.new_key {
            return Err("bind did not take the new key");
        }
        let r2 = req(&w, 0x1800, 0x100, REMOTE_WRITE | LOCAL_WRITE);
        if w.check_bind(&r2, true, Some(MR)) != Err(MwError::NotFree) {
            return Err("a bound type 2 window bound again");
        }
        let k = w.key;
        if w.translate(k, 0x1800, 0x100, REMOTE_WRITE, true, 5) != Ok(MR.lkey) {
            return Err("write inside the window refused");
        }
        if w.translate(k, 0x1800, 0x101, REMOTE_WRITE, true, 5) != Err(MwError::Bounds) {
            return Err("write past the window (inside the MR) accepted");
        }
        if w.translate(k, 0x1800, 8, REMOTE_READ, true, 5) != Err(MwError::Rights) {
            return Err("read through a write-only window accepted");
        }
        if w.translate(k, 0x1800, 8, REMOTE_WRITE, true, 6) != Err(MwError::OtherQp) {
            return Err("another QP reached a type 2 window");
        }
        if w.translate(k ^ 1, 0x1800, 8, REMOTE_WRITE, true, 5) != Err(MwError::KeyMismatch) {
            return Err("a stale key reached the window");
        }
        if w.check_invalidate(k, true, 6, true) != Err(MwError::OtherQp) {
            return Err("remote invalidate arriving on another QP accepted");
        }
        if w.check_invalidate(k, false, 5, false) != Err(MwError::OtherPd) {
            return Err("LOCAL_INV from another PD accepted");
        }
        if w.check_invalidate(k, true, 5, true).is_err() {
            return Err("remote invalidate on the bound QP refused");
        }
        if w.invalidate() != b || w.binding.is_some() {
            return Err("invalidate did not free the window");
        }
        if w.translate(k, 0x1800, 8, REMOTE_WRITE, true, 5) != Err(MwError::NotBound) {
            return Err("a free window still reached memory");
        }
        if w.check_invalidate(k, true, 5, false) != Err(MwError::NotBound) {
            return Err("a free window invalidated twice");
        }
        Ok(())
    }

    /// Type 1: bound again to change or end its binding, reachable by any
    /// QP of its PD, never invalidated.
    pub fn type1_rules() -> Result<(), &'static str> {
        let mut w = Window::new(MwType::One, key_of(3, 0x77).ok_or("key")?);
        let r = req(&w, 0x1000, 0x2000, LOCAL_WRITE | REMOTE_WRITE);
        let b = w
            .check_bind(&r, true, Some(MR))
            .map_err(|_| "valid bind refused")?;
        w.bind(&r, b, 9);
        let k = w.key;
        if w.translate(k, 0x2000, 0x100, REMOTE_WRITE, true, 1) != Ok(MR.lkey) {
            return Err("a QP of the PD could not reach a type 1 window");
        }
        if w.check_invalidate(k, true, 9, false) != Err(MwError::Type1Invalidate) {
            return Err("a type 1 window invalidated");
        }
        let r2 = req(&w, 0, 0, 0);
        let unbind = w
            .check_bind(&r2, true, None)
            .map_err(|_| "unbind refused")?;
        if unbind.is_some() || w.bind(&r2, unbind, 9) != b {
            return Err("unbind did not end the binding");
        }
        if w.translate(w.key, 0x2000, 0x100, REMOTE_WRITE, true, 1) != Err(MwError::NotBound) {
            return Err("an unbound type 1 window reached memory");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::selftest;

    #[test]
    fn key_space() {
        selftest::key_space().unwrap();
    }

    #[test]
    fn type2_rules() {
        selftest::type2_rules().unwrap();
    }

    #[test]
    fn type1_rules() {
        selftest::type1_rules().unwrap();
    }
}
