// SPDX-License-Identifier: GPL-2.0

//! 24-bit packet sequence numbers.
//!
//! Every InfiniBand/RoCEv2 request and response carries a 24-bit PSN in its
//! base transport header. PSNs count modulo 2^24, so "before" and "after" are
//! only meaningful within half the sequence space: like the kernel's
//! `psn_compare()` in `drivers/infiniband/sw/rxe/rxe_verbs.h`, a PSN is
//! compared to another through the signed 24-bit difference between them.
//!
//! [`Psn`] is a newtype that keeps its value below 2^24 at all times, so the
//! arithmetic here cannot produce an out-of-range PSN and can never panic.

use core::cmp::Ordering;

/// Mask of the 24 bits a PSN occupies.
pub const PSN_MASK: u32 = 0x00ff_ffff;

/// Number of distinct PSNs (2^24).
pub const PSN_MODULUS: u32 = 1 << 24;

/// Half the PSN space (2^23): the largest distance that still tells
/// "before" from "after".
pub const PSN_HALF: u32 = 1 << 23;

/// A 24-bit packet sequence number.
///
/// Deliberately not `PartialOrd`/`Ord`: wrapping comparison is not a total
/// order. Use [`Psn::diff`], [`Psn::wrapping_cmp`], [`Psn::is_before`] or
/// [`Psn::is_after`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Psn(u32);

/// Where a received PSN lies relative to the PSN the responder expects
/// (rxe's `check_psn()` in `rxe_resp.c`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PsnClass {
    /// The expected PSN: process the packet.
    Expected,
    /// Up to 2^23 behind the expected PSN: a duplicate (a retried request
    /// or a stale response).
    Duplicate,
    /// Ahead of the expected PSN: packets were lost (PSN sequence error).
    Ahead,
}

impl Psn {
    /// PSN zero.
    pub const ZERO: Psn = Psn(0);

    /// The largest PSN, 2^24 - 1; its successor is [`Psn::ZERO`].
    pub const MAX: Psn = Psn(PSN_MASK);

    /// Makes a PSN from the low 24 bits of `value`; the upper 8 bits are
    /// ignored, as in the BTH.
    pub const fn new(value: u32) -> Self {
        Psn(value & PSN_MASK)
    }

    /// Makes a PSN from `value`, or returns `None` if it does not fit in
    /// 24 bits.
    pub const fn try_new(value: u32) -> Option<Self> {
        if value > PSN_MASK {
            None
        } else {
            Some(Psn(value))
        }
    }

    /// The PSN as an integer below 2^24.
    pub const fn get(self) -> u32 {
        self.0
    }

    /// The following PSN (wraps from 2^24 - 1 to 0).
    pub const fn next(self) -> Self {
        self.add(1)
    }

    /// The preceding PSN (wraps from 0 to 2^24 - 1).
    pub const fn prev(self) -> Self {
        self.sub(1)
    }

    /// This PSN advanced by `n` packets, modulo 2^24.
    pub const fn add(self, n: u32) -> Self {
        Psn::new(self.0.wrapping_add(n))
    }

    /// This PSN moved back by `n` packets, modulo 2^24.
    pub const fn sub(self, n: u32) -> Self {
        Psn::new(self.0.wrapping_sub(n))
    }

    /// Forward distance from `base` to `self`, in `0..2^24`: how many times
    /// [`Psn::next`] takes `base` to `self`.
    pub const fn distance_from(self, base: Psn) -> u32 {
        self.0.wrapping_sub(base.0) & PSN_MASK
    }

    /// Signed 24-bit difference `self - other`, in `-2^23..2^23`.
    ///
    /// Positive means `self` is after `other`. A difference of exactly 2^23
    /// is ambiguous and, as in rxe's `psn_compare()`, counts as negative, so
    /// `a.diff(b) == -(b.diff(a))` holds except at that single distance.
    pub const fn diff(self, other: Psn) -> i32 {
        // Move the 24-bit difference into the top of a 32-bit word, read it
        // as signed, and shift back arithmetically to sign-extend it.
        (self.0.wrapping_sub(other.0) << 8).cast_signed() >> 8
    }

    /// Wrap-aware comparison through [`Psn::diff`].
    pub const fn wrapping_cmp(self, other: Psn) -> Ordering {
        let d = self.diff(other);
        if d < 0 {
            Ordering::Less
        } else if d > 0 {
            Ordering::Greater
        } else {
            Ordering::Equal
        }
    }

    /// Whether `self` comes strictly before `other` (within 2^23).
    pub const fn is_before(self, other: Psn) -> bool {
        self.diff(other) < 0
    }

    /// Whether `self` comes strictly after `other` (within 2^23).
    pub const fn is_after(self, other: Psn) -> bool {
        self.diff(other) > 0
    }

    /// Whether `self` is one of the `size` PSNs starting at `base`, i.e. in
    /// `base ..= base + size - 1` modulo 2^24. An empty window contains
    /// nothing; a window of 2^24 or more contains every PSN. Windows larger
    /// than 2^23 cannot be told apart from "behind" and should not be used
    /// for duplicate detection.
    pub const fn in_window(self, base: Psn, size: u32) -> bool {
        self.distance_from(base) < size
    }

    /// Whether `self` lies in the inclusive range `first ..= last` taken in
    /// the forward direction from `first` (the requester's "is this ACK for
    /// one of the packets of this WQE" check).
    pub const fn in_range(self, first: Psn, last: Psn) -> bool {
        self.distance_from(first) <= last.distance_from(first)
    }

    /// Classifies a received PSN against the expected one, as a responder
    /// does: equal, behind (duplicate) or ahead (sequence error).
    pub const fn classify(self, expected: Psn) -> PsnClass {
        let d = self.diff(expected);
        if d == 0 {
            PsnClass::Expected
        } else if d < 0 {
            PsnClass::Duplicate
        } else {
            PsnClass::Ahead
        }
    }
}

impl From<Psn> for u32 {
    fn from(psn: Psn) -> u32 {
        psn.0
    }
}

impl core::fmt::Display for Psn {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{:#08x}", self.0)
    }
}

/// Deterministic, allocation-free checks of the PSN arithmetic, shared by
/// the host tests and KUnit.
#[cfg(any(test, CONFIG_KUNIT))]
pub mod selftest {
    use super::{Psn, PsnClass, PSN_HALF, PSN_MASK};
    use core::cmp::Ordering;

    /// Fails with `msg` unless `cond` holds.
    fn check(cond: bool, msg: &'static str) -> Result<(), &'static str> {
        if cond {
            Ok(())
        } else {
            Err(msg)
        }
    }

    /// Construction masks to 24 bits and `try_new` refuses larger values.
    pub fn construction() -> Result<(), &'static str> {
        check(Psn::new(0x1ab_cdef).get() == 0xab_cdef, "new() must mask")?;
        check(Psn::try_new(PSN_MASK) == Some(Psn::MAX), "try_new(max)")?;
        check(Psn::try_new(PSN_MASK + 1).is_none(), "try_new(2^24)")?;
        check(u32::from(Psn::new(7)) == 7, "u32::from")
    }

    /// `next`, `prev`, `add` and `sub` wrap at 2^24.
    pub fn wrap() -> Result<(), &'static str> {
        check(Psn::MAX.next() == Psn::ZERO, "max + 1 == 0")?;
        check(Psn::ZERO.prev() == Psn::MAX, "0 - 1 == max")?;
        check(Psn::new(0xff_fffe).add(5) == Psn::new(3), "add wraps")?;
        check(Psn::new(3).sub(5) == Psn::new(0xff_fffe), "sub wraps")?;
        check(Psn::new(9).add(u32::MAX) == Psn::new(8), "add(u32::MAX)")?;
        check(
            Psn::new(5).add(1 << 24) == Psn::new(5),
            "add(2^24) is a no-op",
        )
    }

    /// Signed differences across the wrap point, as rxe's `psn_compare()`.
    pub fn diff() -> Result<(), &'static str> {
        check(Psn::ZERO.diff(Psn::MAX) == 1, "0 is one after max")?;
        check(Psn::MAX.diff(Psn::ZERO) == -1, "max is one before 0")?;
        check(Psn::new(10).diff(Psn::new(3)) == 7, "plain positive")?;
        check(Psn::new(3).diff(Psn::new(10)) == -7, "plain negative")?;
        let half = Psn::new(PSN_HALF);
        check(half.diff(Psn::ZERO) == -(1 << 23), "2^23 counts as before")?;
        check(Psn::ZERO.diff(half) == -(1 << 23), "and so does -2^23")?;
        check(
            Psn::new(PSN_HALF - 1).diff(Psn::ZERO) == (1 << 23) - 1,
            "2^23 - 1 is after",
        )?;
        check(Psn::new(1).is_after(Psn::MAX), "1 after max")?;
        check(Psn::MAX.is_before(Psn::new(1)), "max before 1")?;
        check(
            Psn::new(4).wrapping_cmp(Psn::new(4)) == Ordering::Equal,
            "cmp equal",
        )?;
        check(
            Psn::new(2).distance_from(Psn::new(0xff_fffe)) == 4,
            "forward distance across wrap",
        )
    }

    /// Window and range membership, including windows that straddle 0.
    pub fn window() -> Result<(), &'static str> {
        let base = Psn::new(0xff_fffc);
        check(base.in_window(base, 1), "base is in a window of one")?;
        check(!base.in_window(base, 0), "empty window")?;
        check(Psn::new(3).in_window(base, 8), "wrapped member")?;
        check(!Psn::new(4).in_window(base, 8), "just past the end")?;
        check(!base.prev().in_window(base, 8), "just before the start")?;
        check(Psn::new(1).in_range(base, Psn::new(2)), "range across 0")?;
        check(!Psn::new(3).in_range(base, Psn::new(2)), "past range end")?;
        check(base.in_range(base, base), "single-PSN range")
    }

    /// Responder classification: expected, duplicate, ahead.
    pub fn classify() -> Result<(), &'static str> {
        let e = Psn::new(1);
        check(e.classify(e) == PsnClass::Expected, "expected")?;
        check(Psn::MAX.classify(e) == PsnClass::Duplicate, "dup across 0")?;
        check(Psn::new(2).classify(e) == PsnClass::Ahead, "ahead")?;
        check(
            e.add(PSN_HALF).classify(e) == PsnClass::Duplicate,
            "exactly half counts as a duplicate",
        )?;
        check(
            e.add(PSN_HALF - 1).classify(e) == PsnClass::Ahead,
            "just under half is ahead",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn selftests() {
        selftest::construction().unwrap();
        selftest::wrap().unwrap();
        selftest::diff().unwrap();
        selftest::window().unwrap();
        selftest::classify().unwrap();
    }

    #[test]
    fn display() {
        assert_eq!(Psn::new(0x12).to_string(), "0x000012");
    }

    /// rxe's `psn_compare()`, transcribed.
    fn rxe_psn_compare(a: u32, b: u32) -> i32 {
        (a.wrapping_sub(b) << 8) as i32
    }

    fn psn() -> impl Strategy<Value = Psn> {
        (0..PSN_MODULUS).prop_map(Psn::new)
    }

    proptest! {
        #[test]
        fn always_24_bits(v in any::<u32>(), n in any::<u32>()) {
            let p = Psn::new(v);
            prop_assert!(p.get() <= PSN_MASK);
            prop_assert!(p.add(n).get() <= PSN_MASK);
            prop_assert!(p.sub(n).get() <= PSN_MASK);
            prop_assert!(p.next().get() <= PSN_MASK);
        }

        #[test]
        fn diff_matches_rxe(a in psn(), b in psn()) {
            let ours = a.diff(b);
            let rxe = rxe_psn_compare(a.get(), b.get());
            prop_assert_eq!(ours.signum(), rxe.signum());
            prop_assert_eq!(ours << 8, rxe);
        }

        #[test]
        fn diff_antisymmetric(a in psn(), b in psn()) {
            prop_assume!(a.distance_from(b) != PSN_HALF);
            prop_assert_eq!(a.diff(b), -b.diff(a));
            prop_assert_eq!(a.wrapping_cmp(b), b.wrapping_cmp(a).reverse());
        }

        #[test]
        fn add_diff_inverse(a in psn(), n in 0..PSN_HALF) {
            let b = a.add(n);
            prop_assert_eq!(b.diff(a), i32::try_from(n).unwrap());
            prop_assert_eq!(b.sub(n), a);
            prop_assert_eq!(b.distance_from(a), n);
            prop_assert_eq!(a.add(n).add(PSN_MODULUS), b);
        }

        #[test]
        fn next_prev_inverse(a in psn()) {
            prop_assert_eq!(a.next().prev(), a);
            prop_assert_eq!(a.next().diff(a), 1);
            prop_assert!(a.next().is_after(a));
        }

        #[test]
        fn window_is_forward_distance(p in psn(), base in psn(), size in 0..=PSN_MODULUS) {
            prop_assert_eq!(p.in_window(base, size), p.distance_from(base) < size);
            if size > 0 {
                prop_assert!(base.in_window(base, size));
                prop_assert!(base.add(size - 1).in_window(base, size));
            }
            if size < PSN_MODULUS {
                prop_assert!(!base.add(size).in_window(base, size));
            }
        }

        #[test]
        fn classify_consistent(p in psn(), e in psn()) {
            let c = p.classify(e);
            match p.diff(e) {
                0 => prop_assert_eq!(c, PsnClass::Expected),
                d if d < 0 => prop_assert_eq!(c, PsnClass::Duplicate),
                _ => prop_assert_eq!(c, PsnClass::Ahead),
            }
        }
    }
}
