// SPDX-License-Identifier: GPL-2.0

//! Shared receive queues: the checks of `create_srq` and `modify_srq`, and
//! the limit event (IBA 10.2.9.3, 11.5.2.3), as rdma_rxe applies them.
//!
//! An SRQ is a receive ring several QPs take their receive WQEs from. Its
//! limit, when armed (non-zero), fires one `IB_EVENT_SRQ_LIMIT_REACHED` the
//! first time a WQE is taken and fewer than `limit` remain, and disarms
//! itself; `modify_srq` with `IB_SRQ_LIMIT` arms it again.

/// Fewest WQEs and SGEs an SRQ is given (smaller requests are rounded up).
pub const MIN_WR: u32 = 1;
/// Fewest SGEs per WQE.
pub const MIN_SGE: u32 = 1;

/// `IB_SRQ_MAX_WR`: resize.
pub const ATTR_MAX_WR: u32 = 1;
/// `IB_SRQ_LIMIT`: set the limit.
pub const ATTR_LIMIT: u32 = 2;

/// Why a `create_srq` or `modify_srq` is refused (`EINVAL`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SrqError {
    /// More WQEs than the device allows, or none.
    MaxWr,
    /// More SGEs than the device allows.
    MaxSge,
    /// A limit above the device's WQE count or the SRQ's capacity.
    Limit,
    /// A resize to fewer WQEs than the armed limit.
    BelowLimit,
    /// Attribute bits rroce does not know.
    Mask,
}

/// The WQE and SGE counts an SRQ is created with, for the requested ones,
/// under the device limits `max_wr` and `max_sge`.
pub const fn check_create(
    (wr, sge): (u32, u32),
    (max_wr, max_sge): (u32, u32),
) -> Result<(u32, u32), SrqError> {
    if wr == 0 || wr > max_wr {
        return Err(SrqError::MaxWr);
    }
    if sge > max_sge {
        return Err(SrqError::MaxSge);
    }
    Ok((
        if wr < MIN_WR { MIN_WR } else { wr },
        if sge < MIN_SGE { MIN_SGE } else { sge },
    ))
}

/// What a `modify_srq` does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Modify {
    /// Resize to hold this many WQEs.
    pub resize: Option<u32>,
    /// Set the limit (0 disarms).
    pub limit: Option<u32>,
}

/// Checks a `modify_srq` of attribute `mask` asking for `wr` WQEs and a
/// limit of `limit`, on an SRQ of `capacity` WQEs whose limit is `armed`,
/// under the device's `max_wr`.
pub const fn check_modify(
    mask: u32,
    (wr, limit): (u32, u32),
    (capacity, armed): (u32, u32),
    max_wr: u32,
) -> Result<Modify, SrqError> {
    if mask & !(ATTR_MAX_WR | ATTR_LIMIT) != 0 {
        return Err(SrqError::Mask);
    }
    let mut m = Modify {
        resize: None,
        limit: None,
    };
    if mask & ATTR_MAX_WR != 0 {
        if wr == 0 || wr > max_wr {
            return Err(SrqError::MaxWr);
        }
        // The limit that will hold after this modify.
        let new_limit = if mask & ATTR_LIMIT != 0 { limit } else { armed };
        if new_limit != 0 && wr < new_limit {
            return Err(SrqError::BelowLimit);
        }
        m.resize = Some(if wr < MIN_WR { MIN_WR } else { wr });
    }
    if mask & ATTR_LIMIT != 0 {
        let cap = match m.resize {
            Some(r) => r,
            None => capacity,
        };
        if limit > max_wr || limit > cap {
            return Err(SrqError::Limit);
        }
        m.limit = Some(limit);
    }
    Ok(m)
}

/// The SRQ limit: armed while non-zero.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Limit(u32);

impl Limit {
    /// A limit of `n` (0: disarmed).
    pub const fn new(n: u32) -> Self {
        Self(n)
    }

    /// The limit (0 once it fired).
    pub const fn get(self) -> u32 {
        self.0
    }

    /// A WQE was taken and `left` remain: whether the limit event fires
    /// now (it then disarms).
    pub fn after_take(&mut self, left: u32) -> bool {
        if self.0 != 0 && left < self.0 {
            self.0 = 0;
            true
        } else {
            false
        }
    }
}

/// Checks of the rules above, run by the host tests and by KUnit.
#[cfg(any(test, CONFIG_KUNIT))]
pub mod selftest {
    use super::*;

    const DEV: (u32, u32) = (0x4000, 32);

    /// `create_srq` rounds small requests up and refuses large ones.
    pub fn create_rules() -> Result<(), &'static str> {
        if check_create((16, 0), DEV) != Ok((16, 1)) {
            return Err("zero SGEs not rounded up to one");
        }
        if check_create((0, 1), DEV) != Err(SrqError::MaxWr) {
            return Err("an SRQ of no WQEs accepted");
        }
        if check_create((0x4001, 1), DEV) != Err(SrqError::MaxWr) {
            return Err("more WQEs than the device has accepted");
        }
        if check_create((16, 33), DEV) != Err(SrqError::MaxSge) {
            return Err("more SGEs than the device has accepted");
        }
        Ok(())
    }

    /// `modify_srq`: a resize may not go below the limit, a limit may not
    /// exceed the (new) capacity, 0 disarms.
    pub fn modify_rules() -> Result<(), &'static str> {
        let max = DEV.0;
        if check_modify(ATTR_LIMIT, (0, 8), (15, 0), max)
            != Ok(Modify {
                resize: None,
                limit: Some(8),
            })
        {
            return Err("arming the limit refused");
        }
        if check_modify(ATTR_LIMIT, (0, 16), (15, 0), max) != Err(SrqError::Limit) {
            return Err("a limit above the capacity accepted");
        }
        if check_modify(ATTR_MAX_WR, (4, 0), (15, 8), max) != Err(SrqError::BelowLimit) {
            return Err("a resize below the armed limit accepted");
        }
        if check_modify(ATTR_MAX_WR | ATTR_LIMIT, (4, 0), (15, 8), max)
            != Ok(Modify {
                resize: Some(4),
                limit: Some(0),
            })
        {
            return Err("a resize that disarms the limit refused");
        }
        if check_modify(ATTR_MAX_WR | ATTR_LIMIT, (64, 40), (15, 0), max)
            != Ok(Modify {
                resize: Some(64),
                limit: Some(40),
            })
        {
            return Err("a limit within the new capacity refused");
        }
        if check_modify(ATTR_MAX_WR, (0, 0), (15, 0), max) != Err(SrqError::MaxWr) {
            return Err("a resize to nothing accepted");
        }
        if check_modify(4, (0, 0), (15, 0), max) != Err(SrqError::Mask) {
            return Err("an unknown attribute accepted");
        }
        Ok(())
    }

    /// The limit fires once, when fewer WQEs than it remain, then stays
    /// quiet until armed again.
    pub fn limit_fires_once() -> Result<(), &'static str> {
        let mut l = Limit::new(3);
        if l.after_take(5) || l.after_take(3) {
            return Err("fired with enough WQEs left");
        }
        if !l.after_take(2) || l.get() != 0 {
            return Err("did not fire (and disarm) below the limit");
        }
        if l.after_take(0) {
            return Err("fired twice");
        }
        if Limit::new(0).after_take(0) {
            return Err("a disarmed limit fired");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::selftest;

    #[test]
    fn create_rules() {
        selftest::create_rules().unwrap();
    }

    #[test]
    fn modify_rules() {
        selftest::modify_rules().unwrap();
    }

    #[test]
    fn limit_fires_once() {
        selftest::limit_fires_once().unwrap();
    }
}
