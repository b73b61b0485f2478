// SPDX-License-Identifier: GPL-2.0

//! Shared queues (rings) in the rxe / rdma-core 44 layout, and their index
//! logic.
//!
//! Every work queue and completion queue that user space maps is one buffer
//! laid out as `struct rxe_queue_buf` (`include/uapi/rdma/rdma_user_rxe.h`),
//! which the unmodified librxe provider reads and writes directly:
//!
//! | offset | field            | written by                     |
//! |--------|------------------|--------------------------------|
//! | 0      | `log2_elem_size` | kernel, once, before create returns |
//! | 4      | `index_mask`     | kernel, once, before create returns |
//! | 128    | `producer_index` | the producer (own cache line)  |
//! | 256    | `consumer_index` | the consumer (own cache line)  |
//! | 384    | element data     | the producer                   |
//!
//! Element `i` lives at `384 + (i << log2_elem_size)`. The number of slots is
//! a power of two, one slot always stays free, so the capacity is
//! `slots - 1`: the ring is empty when `prod == cons` and full when
//! `((prod + 1) & mask) == cons`. Both indices are stored already masked.
//!
//! Ownership: for a CQ the kernel produces and the consumer (user process or
//! kernel ULP) consumes; for an SQ, RQ or SRQ the user produces and the
//! kernel consumes. Each end is one of the two types here:
//!
//! - [`Producer`]: `reserve` a slot, let the glue write the element at the
//!   slot's byte offset, then `commit`, which release-stores the new producer
//!   index so the consumer sees the element before the index.
//! - [`Consumer`]: `peek` (or `peek_nth`) the next element, let the glue copy
//!   it out, then `advance`, which release-stores the new consumer index so
//!   the producer does not overwrite the slot while it is still being read.
//!
//! The peer's index is the only thing read back from shared memory. It is
//! loaded with acquire ordering (pairing with the peer's release store, as
//! librxe and rxe's `smp_load_acquire`/`smp_store_release` do) and treated as
//! hostile: it must fit the mask, and it may only move the way the protocol
//! allows (a consumer never passes the producer; a producer never overruns
//! the consumer or goes backwards). Violations are reported as
//! [`RingError::IndexOutOfRange`], [`RingError::Underflow`] or
//! [`RingError::Overflow`]; nothing wraps silently. Each end keeps private
//! copies of its own index, the mask and the element size and never re-reads
//! them from the shared header.
//!
//! This module does no memory access itself: it hands out byte offsets
//! (always inside [`Layout::total_bytes`]) and lets the kernel glue touch the
//! buffer, so it contains no `unsafe`. The shared indices are reached through
//! [`SharedIndex`]/[`SharedHeader`], implemented by `core`'s `AtomicU32`
//! (the kernel glue builds those over the vmalloc'd header with
//! `AtomicU32::from_ptr`), and by loom's atomics in the model tests.
//!
//! Locking: each end is plain data. The kernel serialises each end with the
//! lock of the object that owns it (the CQ lock for a CQ producer, the QP's
//! lock for an SQ consumer); the two ends synchronise only through the
//! acquire/release index protocol.

use core::sync::atomic::{AtomicU32, Ordering};

/// Byte offsets inside the shared queue buffer (`struct rxe_queue_buf`).
pub mod offset {
    /// `__u32 log2_elem_size`.
    pub const LOG2_ELEM_SIZE: usize = 0;
    /// `__u32 index_mask`.
    pub const INDEX_MASK: usize = 4;
    /// `__u32 producer_index`, alone on its cache line.
    pub const PRODUCER_INDEX: usize = 128;
    /// `__u32 consumer_index`, alone on its cache line.
    pub const CONSUMER_INDEX: usize = 256;
    /// `__u8 data[]`: the first element.
    pub const DATA: usize = 384;
}

/// Size of the header that precedes the element data.
pub const HEADER_SIZE: usize = offset::DATA;

/// Smallest element size: elements are padded to at least a cache line.
pub const MIN_ELEM_SIZE: usize = 64;

/// Largest element size accepted (after rounding), a sanity cap well above
/// any WQE or CQE the device defines.
pub const MAX_ELEM_SIZE: usize = 1 << 16;

/// Largest number of slots a ring may have (so every index fits in `u32`
/// and `slots - 1` is a valid mask).
pub const MAX_SLOTS: u32 = 1 << 31;

/// Errors of ring operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RingError {
    /// The producer has no free slot (CQ overflow for a CQ).
    Full,
    /// The consumer has nothing to take.
    Empty,
    /// The peer's index in shared memory has bits set above the index mask;
    /// no well-behaved peer stores that.
    IndexOutOfRange,
    /// The consumer's shared index claims entries that were never produced:
    /// it is ahead of the producer or moved backwards.
    Underflow,
    /// The producer's shared index overran the consumer (more entries than
    /// the capacity) or moved backwards.
    Overflow,
    /// The requested geometry does not fit the limits or the address space.
    TooLarge,
    /// A resize target cannot hold the entries still queued.
    TooSmall {
        /// Entries queued when the resize was attempted.
        queued: u32,
    },
    /// A resize target has smaller elements than the source.
    Incompatible,
    /// A [`Slot`] was used after the ring moved past it.
    StaleSlot,
}

/// Access to one 32-bit index word in the shared header.
///
/// Implemented by `core::sync::atomic::AtomicU32` (host, and kernel over the
/// vmalloc'd header) and by wrappers around loom's atomics in model tests.
pub trait SharedIndex {
    /// Loads the index with acquire ordering: everything the peer wrote
    /// before its release store of this value is visible afterwards.
    fn load_acquire(&self) -> u32;
    /// Stores the index with release ordering: everything written before is
    /// visible to a peer that acquire-loads this value.
    fn store_release(&self, value: u32);
}

impl SharedIndex for AtomicU32 {
    fn load_acquire(&self) -> u32 {
        self.load(Ordering::Acquire)
    }

    fn store_release(&self, value: u32) {
        self.store(value, Ordering::Release)
    }
}

impl<T: SharedIndex + ?Sized> SharedIndex for &T {
    fn load_acquire(&self) -> u32 {
        (**self).load_acquire()
    }

    fn store_release(&self, value: u32) {
        (**self).store_release(value)
    }
}

/// The two index words of one shared queue header.
///
/// Passing the header, rather than single words, to [`Producer`] and
/// [`Consumer`] means an end can never load or store the wrong index.
pub trait SharedHeader {
    /// How one index word is accessed.
    type Index: SharedIndex + ?Sized;
    /// The `producer_index` word (offset [`offset::PRODUCER_INDEX`]).
    fn producer_index(&self) -> &Self::Index;
    /// The `consumer_index` word (offset [`offset::CONSUMER_INDEX`]).
    fn consumer_index(&self) -> &Self::Index;
}

impl<H: SharedHeader + ?Sized> SharedHeader for &H {
    type Index = H::Index;

    fn producer_index(&self) -> &Self::Index {
        (**self).producer_index()
    }

    fn consumer_index(&self) -> &Self::Index {
        (**self).consumer_index()
    }
}

/// A header made of two separately stored index words (tests, models, and
/// kernel glue that wraps the two words of a mapped buffer).
#[derive(Debug, Default)]
pub struct IndexPair<I> {
    /// The producer index word.
    pub producer: I,
    /// The consumer index word.
    pub consumer: I,
}

impl<I: SharedIndex> SharedHeader for IndexPair<I> {
    type Index = I;

    fn producer_index(&self) -> &I {
        &self.producer
    }

    fn consumer_index(&self) -> &I {
        &self.consumer
    }
}

/// Geometry of one shared queue buffer.
///
/// # Invariants
///
/// - `index_mask + 1` is a power of two no larger than [`MAX_SLOTS`].
/// - `1 << log2_elem_size` is a power of two in
///   `MIN_ELEM_SIZE..=MAX_ELEM_SIZE`.
/// - `HEADER_SIZE + ((index_mask + 1) << log2_elem_size)` fits in `usize`,
///   so every slot offset computed below is in bounds and cannot overflow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    log2_elem_size: u32,
    index_mask: u32,
}

/// The layout for a ring holding at least `num_elems` elements of
/// `elem_size` bytes (see [`Layout::new`]).
pub const fn layout_for(num_elems: u32, elem_size: usize) -> Result<Layout, RingError> {
    Layout::new(num_elems, elem_size)
}

impl Layout {
    /// Computes the layout rxe uses for `num_elems` elements of `elem_size`
    /// bytes: the element size is rounded up to a power of two of at least
    /// [`MIN_ELEM_SIZE`], the slot count to `roundup_pow_of_two(n + 1)` (so
    /// the capacity is at least `num_elems`). Rounding the total up to pages
    /// is the caller's job.
    pub const fn new(num_elems: u32, elem_size: usize) -> Result<Layout, RingError> {
        if elem_size > MAX_ELEM_SIZE {
            return Err(RingError::TooLarge);
        }
        let elem = if elem_size < MIN_ELEM_SIZE {
            MIN_ELEM_SIZE
        } else {
            elem_size
        };
        // Cannot fail: `elem <= MAX_ELEM_SIZE`, a power of two.
        let Some(elem) = elem.checked_next_power_of_two() else {
            return Err(RingError::TooLarge);
        };
        let Some(wanted) = num_elems.checked_add(1) else {
            return Err(RingError::TooLarge);
        };
        let Some(slots) = wanted.checked_next_power_of_two() else {
            return Err(RingError::TooLarge);
        };
        if slots > MAX_SLOTS {
            return Err(RingError::TooLarge);
        }
        let Some(data) = (slots as usize).checked_mul(elem) else {
            return Err(RingError::TooLarge);
        };
        if data.checked_add(HEADER_SIZE).is_none() {
            return Err(RingError::TooLarge);
        }
        // INVARIANT: `slots` is a power of two <= MAX_SLOTS, `elem` a power
        // of two within the element limits, and the total size fits.
        Ok(Layout {
            log2_elem_size: elem.trailing_zeros(),
            index_mask: slots - 1,
        })
    }

    /// `log2_elem_size`, to be written at [`offset::LOG2_ELEM_SIZE`].
    pub const fn log2_elem_size(&self) -> u32 {
        self.log2_elem_size
    }

    /// `index_mask`, to be written at [`offset::INDEX_MASK`].
    pub const fn index_mask(&self) -> u32 {
        self.index_mask
    }

    /// Bytes per slot (a power of two).
    pub const fn elem_size(&self) -> usize {
        1usize << self.log2_elem_size
    }

    /// Number of slots (a power of two).
    pub const fn slots(&self) -> u32 {
        // Cannot overflow: index_mask < MAX_SLOTS <= u32::MAX (invariant).
        self.index_mask + 1
    }

    /// Number of elements the ring can hold: `slots - 1`.
    pub const fn capacity(&self) -> u32 {
        self.index_mask
    }

    /// Bytes of element data.
    pub const fn data_bytes(&self) -> usize {
        // Cannot overflow (invariant).
        (self.slots() as usize) << self.log2_elem_size
    }

    /// Bytes of the whole buffer, header included (before page rounding).
    pub const fn total_bytes(&self) -> usize {
        // Cannot overflow (invariant).
        HEADER_SIZE + self.data_bytes()
    }

    /// Byte offset, from the start of the buffer, of the slot that `index`
    /// designates. `index` is masked first, so any value is safe:
    /// `slot_offset(i) + elem_size() <= total_bytes()` always holds.
    pub const fn slot_offset(&self, index: u32) -> usize {
        // Cannot overflow: the masked index is below `slots` (invariant).
        HEADER_SIZE + (((index & self.index_mask) as usize) << self.log2_elem_size)
    }

    /// Number of entries between `cons` and `prod` (both masked first).
    pub const fn distance(&self, cons: u32, prod: u32) -> u32 {
        prod.wrapping_sub(cons) & self.index_mask
    }

    /// The index after `index`.
    pub const fn next(&self, index: u32) -> u32 {
        index.wrapping_add(1) & self.index_mask
    }

    /// Stores fresh indices into a new buffer's header: consumer 0 and
    /// producer `count` (the entries copied in by a resize, or 0).
    ///
    /// Use this only on a buffer no peer is using yet.
    pub fn init_indices<H: SharedHeader + ?Sized>(
        &self,
        hdr: &H,
        count: u32,
    ) -> Result<(), RingError> {
        if count > self.capacity() {
            return Err(RingError::TooSmall { queued: count });
        }
        hdr.consumer_index().store_release(0);
        hdr.producer_index().store_release(count);
        Ok(())
    }
}

/// One slot handed out by [`Producer::reserve`] or [`Consumer::peek`].
///
/// Consumed by [`Producer::commit`] / [`Consumer::advance`], which check it
/// still designates the slot at the ring's head, so a stale slot cannot move
/// the index. Not `Clone`, for the same reason.
#[derive(Debug, PartialEq, Eq)]
pub struct Slot {
    index: u32,
    offset: usize,
    len: usize,
}

impl Slot {
    /// The (masked) ring index of the slot.
    pub fn index(&self) -> u32 {
        self.index
    }

    /// Byte offset of the slot from the start of the shared buffer; the
    /// slot's `len()` bytes lie inside [`Layout::total_bytes`].
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// Bytes in the slot (the padded element size).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always `false`: slots hold at least [`MIN_ELEM_SIZE`] bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// What a resize must copy: built by [`Producer::plan_resize`] or
/// [`Consumer::plan_resize`] under the lock, then executed by the glue
/// (copy every pair from [`ResizePlan::copy`], initialise the new header with
/// [`Layout::init_indices`]) and finished with [`ResizePlan::into_producer`]
/// or [`ResizePlan::into_consumer`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResizePlan {
    old: Layout,
    new: Layout,
    /// Old-ring index of the oldest queued entry.
    first: u32,
    /// Entries to carry over, at most `new.capacity()`.
    count: u32,
}

impl ResizePlan {
    /// Builds a plan to move `count` entries starting at old index `first`.
    fn new(old: Layout, new: Layout, first: u32, count: u32) -> Result<Self, RingError> {
        if new.elem_size() < old.elem_size() {
            return Err(RingError::Incompatible);
        }
        if count > new.capacity() {
            return Err(RingError::TooSmall { queued: count });
        }
        Ok(ResizePlan {
            old,
            new,
            first,
            count,
        })
    }

    /// The new ring's layout.
    pub fn new_layout(&self) -> Layout {
        self.new
    }

    /// Number of entries to copy (the new producer index).
    pub fn count(&self) -> u32 {
        self.count
    }

    /// Bytes to copy per entry (the old element size).
    pub fn copy_len(&self) -> usize {
        self.old.elem_size()
    }

    /// `(old_offset, new_offset)` of the `i`-th entry to copy, oldest first;
    /// `None` once `i >= count()`.
    pub fn copy(&self, i: u32) -> Option<(usize, usize)> {
        if i >= self.count {
            return None;
        }
        Some((
            self.old.slot_offset(self.first.wrapping_add(i)),
            self.new.slot_offset(i),
        ))
    }

    /// The producer end of the new ring, holding `count()` entries.
    pub fn into_producer(self) -> Producer {
        // INVARIANT: count <= new.capacity() was checked in `new`, so both
        // indices are masked and the count is consistent.
        Producer {
            layout: self.new,
            prod: self.count,
            seen_cons: 0,
        }
    }

    /// The consumer end of the new ring, holding `count()` entries.
    pub fn into_consumer(self) -> Consumer {
        // INVARIANT: as for `into_producer`.
        Consumer {
            layout: self.new,
            cons: 0,
            seen_prod: self.count,
        }
    }
}

/// Loads a peer index from shared memory, rejecting bits above the mask.
fn load_peer<I: SharedIndex + ?Sized>(word: &I, layout: &Layout) -> Result<u32, RingError> {
    let raw = word.load_acquire();
    if raw & !layout.index_mask() != 0 {
        return Err(RingError::IndexOutOfRange);
    }
    Ok(raw)
}

/// The kernel's end of a ring it produces into (a CQ; or a kernel ULP's SQ
/// or RQ, posted through the verbs API).
///
/// # Invariants
///
/// - `prod` and `seen_cons` are masked (`<= layout.index_mask()`).
/// - `seen_cons` is the last consumer index validated, and
///   `layout.distance(seen_cons, prod)` is at most the capacity (trivially,
///   after masking): the consumer never passed the producer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Producer {
    layout: Layout,
    prod: u32,
    seen_cons: u32,
}

impl Producer {
    /// The producer end of a new, empty ring. The header must hold
    /// producer 0 and consumer 0 ([`Layout::init_indices`] with 0).
    pub const fn new(layout: Layout) -> Self {
        // INVARIANT: 0 is masked.
        Producer {
            layout,
            prod: 0,
            seen_cons: 0,
        }
    }

    /// The ring's geometry (the kernel's private copy).
    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// The kernel's private producer index.
    pub fn index(&self) -> u32 {
        self.prod
    }

    /// Loads and validates the consumer index.
    ///
    /// The consumer may only have moved forward from the last index seen,
    /// and not past the producer.
    fn refresh<H: SharedHeader + ?Sized>(&mut self, hdr: &H) -> Result<u32, RingError> {
        let cons = load_peer(hdr.consumer_index(), &self.layout)?;
        let moved = self.layout.distance(self.seen_cons, cons);
        let produced = self.layout.distance(self.seen_cons, self.prod);
        if moved > produced {
            return Err(RingError::Underflow);
        }
        // INVARIANT: `cons` is masked and between `seen_cons` and `prod`.
        self.seen_cons = cons;
        Ok(cons)
    }

    /// Entries the consumer has not taken yet (re-reads the consumer index).
    pub fn count<H: SharedHeader + ?Sized>(&mut self, hdr: &H) -> Result<u32, RingError> {
        let cons = self.refresh(hdr)?;
        Ok(self.layout.distance(cons, self.prod))
    }

    /// Free slots (re-reads the consumer index).
    pub fn free<H: SharedHeader + ?Sized>(&mut self, hdr: &H) -> Result<u32, RingError> {
        let count = self.count(hdr)?;
        Ok(self.layout.capacity() - count)
    }

    /// Reserves the next slot for writing, or [`RingError::Full`].
    ///
    /// The caller writes the element at [`Slot::offset`] and then calls
    /// [`Producer::commit`]. Reserving again before committing returns the
    /// same slot.
    pub fn reserve<H: SharedHeader + ?Sized>(&mut self, hdr: &H) -> Result<Slot, RingError> {
        let cons = self.refresh(hdr)?;
        if self.layout.next(self.prod) == cons {
            return Err(RingError::Full);
        }
        Ok(Slot {
            index: self.prod,
            offset: self.layout.slot_offset(self.prod),
            len: self.layout.elem_size(),
        })
    }

    /// Publishes the element written into `slot`: advances the private
    /// producer index and release-stores it to the shared header.
    pub fn commit<H: SharedHeader + ?Sized>(
        &mut self,
        slot: Slot,
        hdr: &H,
    ) -> Result<(), RingError> {
        if slot.index != self.prod {
            return Err(RingError::StaleSlot);
        }
        // INVARIANT: `next` masks; `reserve` saw a free slot and the
        // consumer can only free more, so the consumer is still not passed.
        self.prod = self.layout.next(self.prod);
        hdr.producer_index().store_release(self.prod);
        Ok(())
    }

    /// Plans moving every queued entry into a ring of layout `new`.
    ///
    /// Fails with [`RingError::TooSmall`] if they do not fit; nothing
    /// changes on failure. The plan is only valid while the lock serialising
    /// this end is held.
    pub fn plan_resize<H: SharedHeader + ?Sized>(
        &mut self,
        hdr: &H,
        new: Layout,
    ) -> Result<ResizePlan, RingError> {
        let cons = self.refresh(hdr)?;
        let count = self.layout.distance(cons, self.prod);
        ResizePlan::new(self.layout, new, cons, count)
    }
}

/// The kernel's end of a ring it consumes from (an SQ, RQ or SRQ the user
/// produces into; or a kernel ULP's CQ, polled through the verbs API).
///
/// # Invariants
///
/// - `cons` and `seen_prod` are masked.
/// - `seen_prod` is the last producer index validated; the entries between
///   `cons` and `seen_prod` were published and not yet consumed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Consumer {
    layout: Layout,
    cons: u32,
    seen_prod: u32,
}

impl Consumer {
    /// The consumer end of a new, empty ring. The header must hold
    /// producer 0 and consumer 0 ([`Layout::init_indices`] with 0).
    pub const fn new(layout: Layout) -> Self {
        // INVARIANT: 0 is masked.
        Consumer {
            layout,
            cons: 0,
            seen_prod: 0,
        }
    }

    /// The ring's geometry (the kernel's private copy).
    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// The kernel's private consumer index.
    pub fn index(&self) -> u32 {
        self.cons
    }

    /// Loads and validates the producer index.
    ///
    /// The producer may only move forward from the last index seen, into
    /// free slots: the queued count can grow but never shrink, since only
    /// the kernel consumes. A smaller count means the producer overran the
    /// consumer or moved backwards.
    fn refresh<H: SharedHeader + ?Sized>(&mut self, hdr: &H) -> Result<u32, RingError> {
        let prod = load_peer(hdr.producer_index(), &self.layout)?;
        let before = self.layout.distance(self.cons, self.seen_prod);
        let now = self.layout.distance(self.cons, prod);
        if now < before {
            return Err(RingError::Overflow);
        }
        // INVARIANT: `prod` is masked and not behind `seen_prod`.
        self.seen_prod = prod;
        Ok(prod)
    }

    /// Entries published and not yet consumed (re-reads the producer index).
    pub fn available<H: SharedHeader + ?Sized>(&mut self, hdr: &H) -> Result<u32, RingError> {
        let prod = self.refresh(hdr)?;
        Ok(self.layout.distance(self.cons, prod))
    }

    /// The oldest unconsumed element, or [`RingError::Empty`].
    pub fn peek<H: SharedHeader + ?Sized>(&mut self, hdr: &H) -> Result<Slot, RingError> {
        self.peek_nth(hdr, 0)
    }

    /// The `n`-th unconsumed element (0 = oldest), for walking ahead of the
    /// consumer index as rxe's requester does; [`RingError::Empty`] if fewer
    /// than `n + 1` are available.
    pub fn peek_nth<H: SharedHeader + ?Sized>(
        &mut self,
        hdr: &H,
        n: u32,
    ) -> Result<Slot, RingError> {
        if n >= self.available(hdr)? {
            return Err(RingError::Empty);
        }
        let index = self.cons.wrapping_add(n) & self.layout.index_mask();
        Ok(Slot {
            index,
            offset: self.layout.slot_offset(index),
            len: self.layout.elem_size(),
        })
    }

    /// Retires the oldest element, obtained from [`Consumer::peek`], and
    /// release-stores the consumer index so the producer may reuse the slot.
    pub fn advance<H: SharedHeader + ?Sized>(
        &mut self,
        slot: Slot,
        hdr: &H,
    ) -> Result<(), RingError> {
        if slot.index != self.cons {
            return Err(RingError::StaleSlot);
        }
        self.advance_by(1, hdr)
    }

    /// Retires the `n` oldest elements (without looking at them), or fails
    /// with [`RingError::Empty`] if fewer are known to be published.
    pub fn advance_by<H: SharedHeader + ?Sized>(
        &mut self,
        n: u32,
        hdr: &H,
    ) -> Result<(), RingError> {
        // Only entries already validated may be retired; no reload here.
        if n > self.layout.distance(self.cons, self.seen_prod) {
            return Err(RingError::Empty);
        }
        // INVARIANT: masked, and not past `seen_prod` (checked above).
        self.cons = self.cons.wrapping_add(n) & self.layout.index_mask();
        hdr.consumer_index().store_release(self.cons);
        Ok(())
    }

    /// Retires, oldest first, the entries published when it is called,
    /// calling `f` with each slot before retiring it; `f` returns `false`
    /// to stop early. Returns how many were retired.
    ///
    /// The producer index is read once: entries published meanwhile wait
    /// for the next call, so a producer that keeps running ahead (a process
    /// rewriting its index while the kernel flushes) cannot keep the drain
    /// going. It retires at most [`Layout::capacity`] entries.
    pub fn drain<H: SharedHeader + ?Sized>(
        &mut self,
        hdr: &H,
        mut f: impl FnMut(&Slot) -> bool,
    ) -> Result<u32, RingError> {
        let avail = self.available(hdr)?;
        for n in 0..avail {
            let slot = Slot {
                index: self.cons,
                offset: self.layout.slot_offset(self.cons),
                len: self.layout.elem_size(),
            };
            if !f(&slot) {
                return Ok(n);
            }
            // Cannot fail: `avail - n` validated entries are left.
            self.advance_by(1, hdr)?;
        }
        Ok(avail)
    }

    /// Plans moving every queued entry into a ring of layout `new`.
    ///
    /// Fails with [`RingError::TooSmall`] if they do not fit; nothing
    /// changes on failure.
    pub fn plan_resize<H: SharedHeader + ?Sized>(
        &mut self,
        hdr: &H,
        new: Layout,
    ) -> Result<ResizePlan, RingError> {
        let prod = self.refresh(hdr)?;
        let count = self.layout.distance(self.cons, prod);
        ResizePlan::new(self.layout, new, self.cons, count)
    }
}

#[cfg(any(test, CONFIG_KUNIT))]
pub mod selftest;

#[cfg(test)]
mod tests;
