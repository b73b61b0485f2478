// SPDX-License-Identifier: GPL-2.0

//! Lock-free allocation of small object indices (AH numbers, MR indices).
//!
//! A bitmap of `N` words: `alloc` finds a clear bit and sets it with a
//! compare-and-swap, `free` clears it. It never blocks and never allocates,
//! so it can be used from atomic context (address handles may be created
//! there). Index 0 is never handed out: for AHs it means "no AH" in the
//! rxe ABI, and for keys it keeps key 0 invalid.

use core::sync::atomic::{AtomicU64, Ordering};

/// A set of indices `1..(64 * N)`.
pub struct IndexAllocator<const N: usize> {
    words: [AtomicU64; N],
    /// Where the next search starts, so recently freed indices are not
    /// reused at once (a stale handle then fails instead of aliasing).
    hint: AtomicU64,
}

/// Errors of [`IndexAllocator`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IndexError {
    /// Every index is in use.
    Exhausted,
    /// The index is out of range or was not allocated.
    NotAllocated,
}

impl<const N: usize> Default for IndexAllocator<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> IndexAllocator<N> {
    /// Number of indices the allocator manages, including the reserved 0.
    pub const CAPACITY: usize = 64 * N;

    /// An empty allocator.
    pub const fn new() -> Self {
        // Bit 0 of word 0 (index 0) is permanently taken.
        let mut words = [const { AtomicU64::new(0) }; N];
        if N > 0 {
            words[0] = AtomicU64::new(1);
        }
        Self {
            words,
            hint: AtomicU64::new(0),
        }
    }

    /// Takes a free index.
    pub fn alloc(&self) -> Result<u32, IndexError> {
        if N == 0 {
            return Err(IndexError::Exhausted);
        }
        let start = (self.hint.load(Ordering::Relaxed) as usize) % N;
        for step in 0..N {
            let w = (start + step) % N;
            let Some(word) = self.words.get(w) else {
                continue;
            };
            let mut cur = word.load(Ordering::Relaxed);
            while cur != u64::MAX {
                let bit = (!cur).trailing_zeros();
                match word.compare_exchange_weak(
                    cur,
                    cur | (1u64 << bit),
                    Ordering::Acquire,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => {
                        self.hint.store((w + 1) as u64, Ordering::Relaxed);
                        return Ok((w as u32) * 64 + bit);
                    }
                    Err(now) => cur = now,
                }
            }
        }
        Err(IndexError::Exhausted)
    }

    /// Returns `index` to the free set.
    pub fn free(&self, index: u32) -> Result<(), IndexError> {
        if index == 0 {
            return Err(IndexError::NotAllocated);
        }
        let word = self
            .words
            .get((index / 64) as usize)
            .ok_or(IndexError::NotAllocated)?;
        let mask = 1u64 << (index % 64);
        let prev = word.fetch_and(!mask, Ordering::Release);
        if prev & mask == 0 {
            return Err(IndexError::NotAllocated);
        }
        Ok(())
    }

    /// Whether `index` is currently allocated.
    pub fn is_allocated(&self, index: u32) -> bool {
        index != 0
            && self
                .words
                .get((index / 64) as usize)
                .is_some_and(|w| w.load(Ordering::Relaxed) & (1u64 << (index % 64)) != 0)
    }
}

/// Checks shared by the host tests and KUnit.
#[cfg(any(test, CONFIG_KUNIT))]
pub mod selftest {
    use super::{IndexAllocator, IndexError};

    /// Every index is handed out once, 0 never, and exhaustion is reported.
    pub fn exhaust_and_refill() -> Result<(), &'static str> {
        let a = IndexAllocator::<2>::new();
        let mut seen = [false; 128];
        for _ in 1..128 {
            let i = a.alloc().map_err(|_| "allocator ran out early")?;
            let slot = seen.get_mut(i as usize).ok_or("index out of range")?;
            if i == 0 || *slot {
                return Err("index 0 or a duplicate was handed out");
            }
            *slot = true;
        }
        if a.alloc() != Err(IndexError::Exhausted) {
            return Err("a full allocator must report Exhausted");
        }
        a.free(77)
            .map_err(|_| "free of an allocated index failed")?;
        if a.alloc() != Ok(77) {
            return Err("the only free index was not reused");
        }
        Ok(())
    }

    /// Freeing what was never allocated is an error, not a silent no-op.
    pub fn bad_free() -> Result<(), &'static str> {
        let a = IndexAllocator::<1>::new();
        if a.free(0).is_ok() || a.free(5).is_ok() || a.free(64).is_ok() {
            return Err("free of a foreign index succeeded");
        }
        let i = a.alloc().map_err(|_| "alloc failed")?;
        a.free(i).map_err(|_| "free failed")?;
        if a.free(i).is_ok() {
            return Err("double free succeeded");
        }
        if a.is_allocated(i) {
            return Err("freed index still allocated");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selftests() {
        selftest::exhaust_and_refill().unwrap();
        selftest::bad_free().unwrap();
    }

    #[test]
    fn concurrent_allocations_are_unique() {
        use std::sync::Arc;
        let a = Arc::new(IndexAllocator::<4>::new());
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let a = a.clone();
                std::thread::spawn(move || (0..63).map(|_| a.alloc().unwrap()).collect::<Vec<_>>())
            })
            .collect();
        let mut all: Vec<u32> = handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), 252);
        assert!(!all.contains(&0));
    }
}
