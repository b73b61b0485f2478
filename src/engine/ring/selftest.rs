// SPDX-License-Identifier: GPL-2.0

//! Deterministic, allocation-free checks, run by KUnit in the kernel and by
//! `cargo test` on the host.

use super::{
    layout_for, offset, Consumer, IndexPair, Layout, Producer, RingError, SharedIndex, HEADER_SIZE,
    MAX_ELEM_SIZE, MIN_ELEM_SIZE,
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

/// One index word of a hostile header: either a plain word, or a producer
/// index that always reads one behind the consumer's, as a process that
/// keeps rewriting its producer index ahead of the kernel makes it look.
enum Word<'a> {
    Plain(&'a AtomicU32),
    Chasing(&'a AtomicU32, u32),
}

impl SharedIndex for Word<'_> {
    fn load_acquire(&self) -> u32 {
        match self {
            Word::Plain(w) => w.load_acquire(),
            Word::Chasing(cons, mask) => cons.load_acquire().wrapping_sub(1) & mask,
        }
    }

    fn store_release(&self, value: u32) {
        if let Word::Plain(w) = self {
            w.store_release(value);
        }
    }
}

/// Draining a ring whose producer keeps running ahead of the consumer
/// (every load sees it full) retires only what was published when the
/// drain began: at most the capacity, then it returns.
pub fn drain_bounded_by_snapshot() -> Result<(), &'static str> {
    let l = layout_for(7, 64).map_err(|_| "layout")?;
    let cons = AtomicU32::new(0);
    let h = IndexPair {
        producer: Word::Chasing(&cons, l.index_mask()),
        consumer: Word::Plain(&cons),
    };
    let mut c = Consumer::new(l);
    // A fuse: a drain still running after 4 rings' worth stops here.
    let mut calls: u32 = 0;
    let n = c
        .drain(&h, |_| {
            calls += 1;
            calls <= 4 * l.capacity()
        })
        .map_err(|_| "drain failed")?;
    check(
        n == l.capacity() && calls == n,
        "drain kept following a producer that runs ahead",
    )?;
    // The next drain takes the next snapshot, again bounded.
    let n = c.drain(&h, |_| true).map_err(|_| "second drain")?;
    check(n == l.capacity(), "second drain")?;
    // Stopping early leaves the rest queued.
    let h2 = header();
    let mut c2 = Consumer::new(l);
    h2.producer.store_release(5);
    let mut seen = 0u32;
    let n = c2
        .drain(&h2, |s| {
            seen += 1;
            s.index() < 2
        })
        .map_err(|_| "drain")?;
    check(n == 2 && seen == 3, "early stop")?;
    check(c2.available(&h2) == Ok(3), "rest still queued")?;
    Ok(())
}
