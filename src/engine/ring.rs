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

/// Deterministic, allocation-free checks, run by KUnit in the kernel and by
/// `cargo test` on the host.
pub mod selftest {
    use super::{
        layout_for, offset, Consumer, IndexPair, Layout, Producer, RingError, SharedIndex,
        HEADER_SIZE, MAX_ELEM_SIZE, MIN_ELEM_SIZE,
    };
    use core::sync::atomic::AtomicU32;

    /// Fails with `msg` unless `cond` holds.
    fn check(cond: bool, msg: &'static str) -> Result<(), &'static str> {
        if cond {
            Ok(())
        } else {
            Err(msg)
        }
    }

    /// A fresh header with both indices 0.
    fn header() -> IndexPair<AtomicU32> {
        IndexPair {
            producer: AtomicU32::new(0),
            consumer: AtomicU32::new(0),
        }
    }

    /// Header offsets and rxe's rounding rules.
    pub fn layout_rules() -> Result<(), &'static str> {
        check(
            offset::LOG2_ELEM_SIZE == 0
                && offset::INDEX_MASK == 4
                && offset::PRODUCER_INDEX == 128
                && offset::CONSUMER_INDEX == 256
                && offset::DATA == 384
                && HEADER_SIZE == 384,
            "header offsets differ from struct rxe_queue_buf",
        )?;
        let l = layout_for(7, 48).map_err(|_| "7 x 48 B refused")?;
        check(
            l.slots() == 8 && l.capacity() == 7,
            "7 entries need 8 slots",
        )?;
        check(
            l.elem_size() == 64 && l.log2_elem_size() == 6,
            "48 B pads to 64 B",
        )?;
        check(l.index_mask() == 7, "mask is slots - 1")?;
        check(l.total_bytes() == 384 + 8 * 64, "total size")?;
        let l = layout_for(8, 65).map_err(|_| "8 x 65 B refused")?;
        check(
            l.slots() == 16 && l.elem_size() == 128,
            "8 entries need 16 slots",
        )?;
        let l = layout_for(0, 0).map_err(|_| "empty ring refused")?;
        check(l.slots() == 1 && l.capacity() == 0, "0 entries give 1 slot")?;
        check(l.elem_size() == MIN_ELEM_SIZE, "minimum element size")?;
        // Slot offsets mask the index and stay inside the buffer.
        let l = layout_for(3, 64).map_err(|_| "3 x 64 B refused")?;
        check(
            l.slot_offset(0) == 384 && l.slot_offset(3) == 384 + 3 * 64,
            "slot offsets",
        )?;
        check(
            l.slot_offset(4) == 384 && l.slot_offset(u32::MAX) == 384 + 3 * 64,
            "index not masked",
        )?;
        check(
            l.slot_offset(u32::MAX) + l.elem_size() <= l.total_bytes(),
            "slot out of bounds",
        )?;
        // Limits.
        check(
            layout_for(u32::MAX, 64) == Err(RingError::TooLarge),
            "u32::MAX + 1 wraps",
        )?;
        check(
            layout_for(1 << 31, 64) == Err(RingError::TooLarge),
            "2^32 slots accepted",
        )?;
        check(
            layout_for(1, MAX_ELEM_SIZE + 1) == Err(RingError::TooLarge),
            "huge element accepted",
        )?;
        check(
            layout_for((1 << 31) - 1, 64).is_ok() || usize::BITS < 64,
            "2^31 slots refused",
        )?;
        Ok(())
    }

    /// Producer and consumer on one header: empty, full, wrap, count.
    pub fn produce_consume_wrap() -> Result<(), &'static str> {
        let l = layout_for(3, 16).map_err(|_| "layout")?;
        let h = header();
        let mut p = Producer::new(l);
        let mut c = Consumer::new(l);
        check(c.peek(&h) == Err(RingError::Empty), "new ring not empty")?;
        for round in 0..5u32 {
            for _ in 0..3 {
                let s = p.reserve(&h).map_err(|_| "reserve in a non-full ring")?;
                check(s.len() == 64 && !s.is_empty(), "slot size")?;
                check(s.offset() == l.slot_offset(s.index()), "slot offset")?;
                p.commit(s, &h).map_err(|_| "commit")?;
            }
            check(
                p.reserve(&h) == Err(RingError::Full),
                "reserve in a full ring",
            )?;
            check(
                p.count(&h) == Ok(3) && p.free(&h) == Ok(0),
                "count when full",
            )?;
            check(c.available(&h) == Ok(3), "available when full")?;
            // Walk ahead without consuming.
            let third = c.peek_nth(&h, 2).map_err(|_| "peek_nth(2)")?;
            check(third.index() == (round * 3 + 2) & 3, "peek_nth index")?;
            check(
                c.peek_nth(&h, 3) == Err(RingError::Empty),
                "peek_nth past the end",
            )?;
            for _ in 0..3 {
                let s = c.peek(&h).map_err(|_| "peek in a non-empty ring")?;
                check(s.index() == c.index(), "head slot")?;
                c.advance(s, &h).map_err(|_| "advance")?;
            }
            check(
                c.peek(&h) == Err(RingError::Empty),
                "drained ring not empty",
            )?;
            check(
                c.advance_by(1, &h) == Err(RingError::Empty),
                "advance past the producer",
            )?;
            check(
                p.count(&h) == Ok(0) && p.free(&h) == Ok(3),
                "count when empty",
            )?;
        }
        check(
            h.producer.load_acquire() == p.index(),
            "shared producer index",
        )?;
        check(
            h.consumer.load_acquire() == c.index(),
            "shared consumer index",
        )?;
        Ok(())
    }

    /// Stale slots cannot move an index.
    pub fn stale_slots() -> Result<(), &'static str> {
        let l = layout_for(3, 64).map_err(|_| "layout")?;
        let h = header();
        let mut p = Producer::new(l);
        let a = p.reserve(&h).map_err(|_| "reserve")?;
        let b = p.reserve(&h).map_err(|_| "reserve")?;
        check(a == b, "two reserves differ")?;
        p.commit(a, &h).map_err(|_| "commit")?;
        check(
            p.commit(b, &h) == Err(RingError::StaleSlot),
            "stale commit accepted",
        )?;
        let mut c = Consumer::new(l);
        let x = c.peek(&h).map_err(|_| "peek")?;
        let y = c.peek(&h).map_err(|_| "peek")?;
        c.advance(x, &h).map_err(|_| "advance")?;
        check(
            c.advance(y, &h) == Err(RingError::StaleSlot),
            "stale advance accepted",
        )?;
        Ok(())
    }

    /// A user-written CQ consumer index is validated: unmasked values,
    /// running ahead of the producer and moving backwards are errors.
    pub fn hostile_consumer_index() -> Result<(), &'static str> {
        let l = layout_for(7, 64).map_err(|_| "layout")?;
        let h = header();
        let mut p = Producer::new(l);
        for _ in 0..4 {
            let s = p.reserve(&h).map_err(|_| "reserve")?;
            p.commit(s, &h).map_err(|_| "commit")?;
        }
        h.consumer.store_release(0xdead_beef);
        check(
            p.count(&h) == Err(RingError::IndexOutOfRange),
            "unmasked index",
        )?;
        check(
            p.reserve(&h) == Err(RingError::IndexOutOfRange),
            "unmasked index on reserve",
        )?;
        h.consumer.store_release(6); // ahead of the producer (4)
        check(
            p.count(&h) == Err(RingError::Underflow),
            "consumer ahead of producer",
        )?;
        h.consumer.store_release(4); // consumed everything: fine
        check(p.count(&h) == Ok(0), "legal consume")?;
        h.consumer.store_release(2); // backwards
        check(
            p.count(&h) == Err(RingError::Underflow),
            "consumer moved backwards",
        )?;
        check(
            p.reserve(&h) == Err(RingError::Underflow),
            "reserve after underflow",
        )?;
        h.consumer.store_release(4);
        check(p.count(&h) == Ok(0), "recovered index")?;
        Ok(())
    }

    /// A user-written SQ producer index is validated: unmasked values,
    /// overrunning the consumer and moving backwards are errors.
    pub fn hostile_producer_index() -> Result<(), &'static str> {
        let l = layout_for(7, 64).map_err(|_| "layout")?;
        let h = header();
        let mut c = Consumer::new(l);
        h.producer.store_release(8);
        check(
            c.available(&h) == Err(RingError::IndexOutOfRange),
            "unmasked index",
        )?;
        h.producer.store_release(5);
        check(c.available(&h) == Ok(5), "legal produce")?;
        c.advance_by(2, &h).map_err(|_| "advance_by")?;
        h.producer.store_release(4); // backwards by one
        check(
            c.available(&h) == Err(RingError::Overflow),
            "producer moved backwards",
        )?;
        // Eight entries past the consumer would lap it: the count drops to 0.
        h.producer.store_release(2);
        check(
            c.available(&h) == Err(RingError::Overflow),
            "producer overran consumer",
        )?;
        check(c.peek(&h) == Err(RingError::Overflow), "peek after overrun")?;
        // The last valid snapshot is kept: 3 entries may still be retired.
        check(
            c.advance_by(4, &h) == Err(RingError::Empty),
            "retired unvalidated entries",
        )?;
        h.producer.store_release(1); // 7 queued: full, and legal
        check(c.available(&h) == Ok(7), "legal fill")?;
        Ok(())
    }

    /// Resize keeps every queued entry in order and refuses to shrink
    /// below the queued count.
    pub fn resize_plans() -> Result<(), &'static str> {
        let l = layout_for(7, 48).map_err(|_| "layout")?;
        let h = header();
        let mut p = Producer::new(l);
        for _ in 0..7 {
            let s = p.reserve(&h).map_err(|_| "reserve")?;
            p.commit(s, &h).map_err(|_| "commit")?;
        }
        h.consumer.store_release(3); // 4 queued: indices 3..=6
        for _ in 0..2 {
            let s = p.reserve(&h).map_err(|_| "reserve after wrap")?;
            p.commit(s, &h).map_err(|_| "commit")?;
        }
        // 6 queued: 3,4,5,6,7,0.
        let small = layout_for(3, 48).map_err(|_| "layout")?;
        check(
            p.plan_resize(&h, small) == Err(RingError::TooSmall { queued: 6 }),
            "shrink below the count",
        )?;
        check(p.count(&h) == Ok(6), "failed resize changed the ring")?;
        let narrow = layout_for(100, 32).map_err(|_| "layout")?;
        let wide = layout_for(100, 128).map_err(|_| "layout")?;
        check(
            Producer::new(wide).plan_resize(&header(), narrow) == Err(RingError::Incompatible),
            "smaller elements accepted",
        )?;
        let big = layout_for(100, 48).map_err(|_| "layout")?;
        let plan = p.plan_resize(&h, big).map_err(|_| "grow")?;
        check(plan.count() == 6 && plan.copy_len() == 64, "plan size")?;
        let want = [3u32, 4, 5, 6, 7, 0];
        for (i, w) in (0u32..).zip(want) {
            let (from, to) = plan.copy(i).ok_or("copy ended early")?;
            check(
                from == l.slot_offset(w) && to == big.slot_offset(i),
                "copy order",
            )?;
        }
        check(plan.copy(6).is_none(), "copy past the count")?;
        let nh = header();
        plan.new_layout()
            .init_indices(&nh, plan.count())
            .map_err(|_| "init")?;
        let mut np = plan.into_producer();
        check(np.count(&nh) == Ok(6) && np.index() == 6, "new producer")?;
        check(np.layout() == big, "new layout")?;
        // Exactly the count fits.
        let fit = layout_for(6, 48).map_err(|_| "layout")?;
        check(p.plan_resize(&h, fit).is_ok(), "shrink to the count")?;
        // Consumer side (SRQ resize).
        let h2 = header();
        h2.producer.store_release(5);
        let mut c = Consumer::new(l);
        let plan = c.plan_resize(&h2, fit).map_err(|_| "consumer plan")?;
        check(plan.count() == 5, "consumer plan count")?;
        check(c.available(&h2) == Ok(5), "planning changed the consumer")?;
        let mut nc = plan.into_consumer();
        let nh = header();
        fit.init_indices(&nh, 5).map_err(|_| "init")?;
        check(
            nc.available(&nh) == Ok(5) && nc.index() == 0,
            "new consumer",
        )?;
        check(
            fit.init_indices(&nh, 8) == Err(RingError::TooSmall { queued: 8 }),
            "init overfull",
        )?;
        Ok(())
    }

    /// Layout limits are checked at compile time too (`const fn`).
    pub fn const_layout() -> Result<(), &'static str> {
        const L: Result<Layout, RingError> = layout_for(255, 48);
        match L {
            Ok(l) => check(l.slots() == 256 && l.elem_size() == 64, "const layout"),
            Err(_) => Err("const layout refused"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::VecDeque;

    #[test]
    fn selftests() {
        selftest::layout_rules().unwrap();
        selftest::produce_consume_wrap().unwrap();
        selftest::stale_slots().unwrap();
        selftest::hostile_consumer_index().unwrap();
        selftest::hostile_producer_index().unwrap();
        selftest::resize_plans().unwrap();
        selftest::const_layout().unwrap();
    }

    /// A byte buffer standing in for the vmalloc'd queue, with real header
    /// words, so the offsets are exercised for real.
    struct Buf {
        hdr: IndexPair<AtomicU32>,
        data: Vec<u8>,
    }

    impl Buf {
        fn new(l: Layout) -> Self {
            Buf {
                hdr: IndexPair::default(),
                data: vec![0; l.total_bytes()],
            }
        }
    }

    #[derive(Debug, Clone)]
    enum Op {
        Push(u8),
        Pop,
        Resize(u32),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => any::<u8>().prop_map(Op::Push),
            3 => Just(Op::Pop),
            1 => (0u32..20).prop_map(Op::Resize),
        ]
    }

    proptest! {
        /// Producer/consumer against a VecDeque model, with resizes.
        #[test]
        fn ring_matches_model(n in 0u32..10, ops in proptest::collection::vec(op(), 0..200)) {
            let mut l = layout_for(n, 8).unwrap();
            let mut buf = Buf::new(l);
            let mut p = Producer::new(l);
            let mut c = Consumer::new(l);
            let mut model = VecDeque::new();
            for op in ops {
                match op {
                    Op::Push(v) => match p.reserve(&buf.hdr) {
                        Ok(s) => {
                            prop_assert!(model.len() < l.capacity() as usize);
                            prop_assert!(s.offset() + s.len() <= buf.data.len());
                            buf.data[s.offset()] = v;
                            p.commit(s, &buf.hdr).unwrap();
                            model.push_back(v);
                        }
                        Err(e) => {
                            prop_assert_eq!(e, RingError::Full);
                            prop_assert_eq!(model.len(), l.capacity() as usize);
                        }
                    },
                    Op::Pop => match c.peek(&buf.hdr) {
                        Ok(s) => {
                            prop_assert_eq!(Some(buf.data[s.offset()]), model.pop_front());
                            c.advance(s, &buf.hdr).unwrap();
                        }
                        Err(e) => {
                            prop_assert_eq!(e, RingError::Empty);
                            prop_assert!(model.is_empty());
                        }
                    },
                    Op::Resize(m) => {
                        let nl = layout_for(m, 8).unwrap();
                        match p.plan_resize(&buf.hdr, nl) {
                            Ok(plan) => {
                                let mut nb = Buf::new(nl);
                                let mut i = 0;
                                while let Some((from, to)) = plan.copy(i) {
                                    let len = plan.copy_len();
                                    nb.data[to..to + len].copy_from_slice(&buf.data[from..from + len]);
                                    i += 1;
                                }
                                nl.init_indices(&nb.hdr, plan.count()).unwrap();
                                p = plan.into_producer();
                                c = Consumer::new(nl);
                                // The consumer of a fresh buffer starts at 0
                                // and sees `count` published entries.
                                prop_assert_eq!(c.available(&nb.hdr).unwrap() as usize, model.len());
                                buf = nb;
                                l = nl;
                            }
                            Err(RingError::TooSmall { queued }) => {
                                prop_assert_eq!(queued as usize, model.len());
                                prop_assert!(model.len() > nl.capacity() as usize);
                            }
                            Err(e) => prop_assert!(false, "resize: {:?}", e),
                        }
                    }
                }
                prop_assert_eq!(p.count(&buf.hdr).unwrap() as usize, model.len());
                prop_assert_eq!(c.available(&buf.hdr).unwrap() as usize, model.len());
            }
        }

        /// Whatever a hostile peer writes, nothing panics, every slot handed
        /// out is inside the buffer, and counts never exceed the capacity.
        #[test]
        fn hostile_peer_never_escapes(n in 0u32..40, writes in proptest::collection::vec((any::<u32>(), any::<bool>(), 0u32..4), 0..100)) {
            let l = layout_for(n, 40).unwrap();
            let hdr: IndexPair<AtomicU32> = IndexPair::default();
            let mut p = Producer::new(l);
            let hdr2: IndexPair<AtomicU32> = IndexPair::default();
            let mut c = Consumer::new(l);
            for (v, masked, steps) in writes {
                let v = if masked { v & l.index_mask() } else { v };
                hdr.consumer.store_release(v);
                hdr2.producer.store_release(v);
                for _ in 0..steps {
                    if let Ok(s) = p.reserve(&hdr) {
                        prop_assert!(s.offset() + s.len() <= l.total_bytes());
                        p.commit(s, &hdr).unwrap();
                    }
                    if let Ok(s) = c.peek(&hdr2) {
                        prop_assert!(s.offset() + s.len() <= l.total_bytes());
                        c.advance(s, &hdr2).unwrap();
                    }
                }
                if let Ok(k) = p.count(&hdr) {
                    prop_assert!(k <= l.capacity());
                }
                if let Ok(k) = c.available(&hdr2) {
                    prop_assert!(k <= l.capacity());
                }
                prop_assert!(p.index() <= l.index_mask() && c.index() <= l.index_mask());
            }
        }

        /// Layout arithmetic matches the rxe formulas.
        #[test]
        fn layout_formula(n in 0u32..100_000, e in 0usize..5000) {
            let l = layout_for(n, e).unwrap();
            let slots = (u64::from(n) + 1).next_power_of_two();
            prop_assert_eq!(u64::from(l.slots()), slots);
            prop_assert_eq!(l.elem_size(), e.max(64).next_power_of_two());
            prop_assert!(l.capacity() >= n);
            prop_assert_eq!(l.total_bytes(), 384 + l.slots() as usize * l.elem_size());
        }
    }
}
