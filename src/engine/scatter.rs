// SPDX-License-Identifier: GPL-2.0

//! Bytes held in pieces: a received packet whose socket buffer keeps part
//! of it in page fragments (as real NICs deliver them), read where it lies
//! instead of being copied into one buffer first.
//!
//! A [`Scatter`] is a window of `len` bytes over a run of slices. The
//! receive path's first piece always holds the headers (the caller pulls
//! them into it), so parsing reads them as one slice; the payload, pad and
//! ICRC may lie anywhere.

use core::ops::Range;

/// At most this many pieces make up a received packet: the socket buffer's
/// linear part and its page fragments (`MAX_SKB_FRAGS`, 17, by default).
pub const MAX_PIECES: usize = 18;

/// A window of bytes over a run of slices.
///
/// # Invariants
///
/// `len <= first.len() + ` the sum of the lengths of `rest`.
#[derive(Clone, Copy, Debug)]
pub struct Scatter<'a> {
    /// The piece the window starts in, from the window's first byte.
    first: &'a [u8],
    /// The pieces after it.
    rest: &'a [&'a [u8]],
    /// The window's length.
    len: usize,
}

impl<'a> Scatter<'a> {
    /// The bytes of one slice.
    pub const fn from_slice(bytes: &'a [u8]) -> Self {
        // INVARIANT: exactly the slice.
        Scatter {
            first: bytes,
            rest: &[],
            len: bytes.len(),
        }
    }

    /// The bytes of `first` followed by those of each of `rest`.
    pub fn new(mut first: &'a [u8], mut rest: &'a [&'a [u8]]) -> Option<Self> {
        // The window starts in its first non-empty piece.
        while first.is_empty() {
            let Some((p, more)) = rest.split_first() else {
                break;
            };
            first = p;
            rest = more;
        }
        let mut len = first.len();
        for p in rest {
            len = len.checked_add(p.len())?;
        }
        // INVARIANT: `len` is the sum of every piece's length.
        Some(Scatter { first, rest, len })
    }

    /// The number of bytes.
    pub const fn len(&self) -> usize {
        self.len
    }

    /// Whether there are none.
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The window's bytes in its first piece (all of them if they lie
    /// there).
    pub fn head(&self) -> &'a [u8] {
        self.first.get(..self.len).unwrap_or(self.first)
    }

    /// The bytes as one slice, if they lie in the window's first piece.
    pub fn contiguous(&self) -> Option<&'a [u8]> {
        self.first.get(..self.len)
    }

    /// The window without its first `n` bytes, `None` past its end.
    pub fn skip(&self, n: usize) -> Option<Self> {
        let len = self.len.checked_sub(n)?;
        if n < self.first.len() || len == 0 {
            if let Some(first) = self.first.get(n..) {
                // INVARIANT: `n` fewer bytes from the same pieces.
                return Some(Scatter {
                    first,
                    rest: self.rest,
                    len,
                });
            }
        }
        // The window starts in a later piece (an empty window at a piece's
        // end moves on too, so that the next window starts in its piece).
        let mut left = n.saturating_sub(self.first.len());
        for (i, p) in self.rest.iter().enumerate() {
            if let Some(first) = p.get(left..) {
                if !first.is_empty() || len == 0 {
                    let rest = self.rest.get(i + 1..).unwrap_or(&[]);
                    // INVARIANT: the bytes from the `n`th on are `first`
                    // and `rest`, and `len` of them are in the window.
                    return Some(Scatter { first, rest, len });
                }
            }
            left = left.saturating_sub(p.len());
        }
        // Only reached with `len == 0` past every piece.
        Some(Scatter {
            first: &[],
            rest: &[],
            len: 0,
        })
    }

    /// The first `n` bytes of the window, `None` past its end.
    pub fn take(&self, n: usize) -> Option<Self> {
        if n > self.len {
            return None;
        }
        // INVARIANT: fewer bytes from the same pieces.
        Some(Scatter {
            first: self.first,
            rest: self.rest,
            len: n,
        })
    }

    /// The bytes `r` of the window, `None` unless within it.
    pub fn range(&self, r: Range<usize>) -> Option<Self> {
        let n = r.end.checked_sub(r.start)?;
        self.skip(r.start)?.take(n)
    }

    /// Splits the window after its first `n` bytes.
    pub fn split_at(&self, n: usize) -> Option<(Self, Self)> {
        Some((self.take(n)?, self.skip(n)?))
    }

    /// The window's bytes, piece by piece (no empty pieces), each with its
    /// offset in the window.
    pub fn chunks(&self) -> Chunks<'a> {
        Chunks {
            next: Some(self.first),
            rest: self.rest,
            left: self.len,
            off: 0,
        }
    }

    /// Calls `f` with each piece of the window and its offset in it, in
    /// order, stopping at the first error.
    pub fn try_for_each<E>(
        &self,
        mut f: impl FnMut(usize, &'a [u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        for (off, piece) in self.chunks() {
            f(off, piece)?;
        }
        Ok(())
    }

    /// Copies the window into `out`, which must be exactly as long.
    pub fn copy_to(&self, out: &mut [u8]) -> bool {
        if out.len() != self.len {
            return false;
        }
        if let Some(c) = self.contiguous() {
            out.copy_from_slice(c);
            return true;
        }
        for (off, piece) in self.chunks() {
            match out.get_mut(off..off + piece.len()) {
                Some(o) => o.copy_from_slice(piece),
                None => return false,
            }
        }
        true
    }

    /// The window's bytes as an array, if it is exactly `N` long.
    pub fn to_array<const N: usize>(&self) -> Option<[u8; N]> {
        if let Some(c) = self.contiguous() {
            return c.try_into().ok();
        }
        let mut a = [0u8; N];
        self.copy_to(&mut a).then_some(a)
    }

    /// Whether the window holds exactly `bytes`.
    pub fn eq_bytes(&self, bytes: &[u8]) -> bool {
        self.len == bytes.len()
            && self
                .chunks()
                .all(|(off, piece)| bytes.get(off..off + piece.len()) == Some(piece))
    }
}

impl PartialEq for Scatter<'_> {
    fn eq(&self, other: &Self) -> bool {
        if self.len != other.len {
            return false;
        }
        self.chunks().all(|(off, piece)| {
            other
                .range(off..off + piece.len())
                .is_some_and(|o| o.eq_bytes(piece))
        })
    }
}

impl Eq for Scatter<'_> {}

/// The pieces of a [`Scatter`], see [`Scatter::chunks`].
#[derive(Clone, Debug)]
pub struct Chunks<'a> {
    next: Option<&'a [u8]>,
    rest: &'a [&'a [u8]],
    left: usize,
    off: usize,
}

impl<'a> Iterator for Chunks<'a> {
    type Item = (usize, &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        while self.left > 0 {
            let p = match self.next.take() {
                Some(p) => p,
                None => {
                    let (p, rest) = self.rest.split_first()?;
                    self.rest = rest;
                    p
                }
            };
            let n = p.len().min(self.left);
            if n == 0 {
                continue;
            }
            let off = self.off;
            self.left -= n;
            self.off += n;
            return p.get(..n).map(|c| (off, c));
        }
        None
    }
}

/// Deterministic, allocation-free checks, shared by the host tests and
/// KUnit.
#[cfg(any(test, CONFIG_KUNIT))]
pub mod selftest {
    use super::Scatter;

    fn check(ok: bool, what: &'static str) -> Result<(), &'static str> {
        if ok {
            Ok(())
        } else {
            Err(what)
        }
    }

    /// Every window of a buffer cut into pieces at every pair of points
    /// reads the same bytes as the same window of the whole buffer.
    pub fn windows_match_contiguous() -> Result<(), &'static str> {
        let mut whole = [0u8; 13];
        for (i, b) in whole.iter_mut().enumerate() {
            *b = (i as u8).wrapping_mul(37).wrapping_add(5);
        }
        let n = whole.len();
        for a in 0..=n {
            for b in a..=n {
                let (p0, tail) = whole.split_at(a);
                let (p1, p2) = tail.split_at(b - a);
                // An empty piece in the middle too.
                let rest: [&[u8]; 3] = [p1, &[], p2];
                let s = Scatter::new(p0, &rest).ok_or("new")?;
                check(s.len() == n, "len")?;
                check(s.eq_bytes(&whole), "whole")?;
                for x in 0..=n {
                    for y in x..=n {
                        let w = s.range(x..y).ok_or("range in bounds")?;
                        let want = &whole[x..y];
                        check(w.len() == y - x, "window len")?;
                        check(w.eq_bytes(want), "window bytes")?;
                        check(w == Scatter::from_slice(want), "window eq")?;
                        let mut out = [0u8; 13];
                        check(w.copy_to(&mut out[..y - x]), "copy")?;
                        check(&out[..y - x] == want, "copied bytes")?;
                        let mut next = x;
                        for (off, c) in w.chunks() {
                            check(!c.is_empty(), "empty chunk")?;
                            check(off + x == next, "chunk offset")?;
                            next += c.len();
                        }
                        check(next == y, "chunks cover the window")?;
                        if let Some(c) = w.contiguous() {
                            check(c == want, "contiguous bytes")?;
                        }
                    }
                    check(s.range(x..n + 1).is_none(), "range past the end")?;
                }
                check(s.skip(n + 1).is_none(), "skip past the end")?;
                check(s.take(n + 1).is_none(), "take past the end")?;
                let nonempty = [a, b - a, n - b].iter().filter(|&&l| l > 0).count();
                check(
                    s.contiguous().is_some() == (nonempty <= 1),
                    "contiguous iff in one piece",
                )?;
                // A window starting at a piece boundary starts in that piece.
                if a < b {
                    let w = s.range(a..b).ok_or("second piece")?;
                    check(w.contiguous() == Some(p1), "window of the second piece")?;
                }
            }
        }
        Ok(())
    }

    /// Short helpers: arrays, copies of the wrong length, splits.
    pub fn helpers() -> Result<(), &'static str> {
        let a = [1u8, 2, 3];
        let b = [4u8, 5];
        let rest: [&[u8]; 1] = [&b];
        let s = Scatter::new(&a, &rest).ok_or("new")?;
        check(
            s.skip(2).and_then(|w| w.to_array::<3>()) == Some([3, 4, 5]),
            "array across pieces",
        )?;
        check(s.to_array::<4>().is_none(), "array of the wrong length")?;
        let mut out = [0u8; 4];
        check(!s.copy_to(&mut out), "copy of the wrong length")?;
        check(s.skip(5).is_some_and(|w| w.is_empty()), "empty at the end")?;
        check(
            s.split_at(3)
                .is_some_and(|(x, y)| x.eq_bytes(&a) && y.eq_bytes(&b)),
            "split",
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::selftest;

    #[test]
    fn selftests() {
        selftest::windows_match_contiguous().unwrap();
        selftest::helpers().unwrap();
    }
}
