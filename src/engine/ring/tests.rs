// SPDX-License-Identifier: GPL-2.0

//! Host tests of the shared-ring index machine: the selftests and property tests.

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

#[test]
fn drain_bounded_by_snapshot() {
    selftest::drain_bounded_by_snapshot().unwrap();
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
