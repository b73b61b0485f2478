// SPDX-License-Identifier: GPL-2.0

//! Where a received packet is processed: in the softirq that received it,
//! or by the receive thread of another CPU.
//!
//! A software RoCE device does its heaviest work per byte twice: the
//! sender computes the ICRC and copies the payload in, the receiver checks
//! the ICRC and copies it out. When both ends live on one host (the
//! benchmark, a container pair, a VM and its host) the receive runs in the
//! softirq of the CPU that sent, right after the send, so both passes land
//! on one CPU while the others idle. Handing large received packets to a
//! receive thread on another CPU splits the passes (see
//! `Documentation/benchmark.rst`, "Handing receive to the other CPU").
//!
//! The decision is made per packet, after the device and the QP are found,
//! for one of the QP's two receive roles: its *requests* (the responder's
//! work: SEND, WRITE, READ request, atomic) and its *responses* (the
//! requester's: READ responses, ACKs, atomic ACKs). Each role keeps its
//! packets in arrival order: while a role has packets waiting on a thread,
//! every later packet of that role joins them there ([`place`]). The two
//! roles are independent state machines of the transport (their own
//! PSNs), as rdma_rxe's responder and completer tasks are.
//!
//! Nothing here touches the kernel: the glue (`crate::net`, `crate::recv`)
//! reads the CPU numbers, keeps a [`RoleState`] per QP role and carries
//! the packet.

use core::sync::atomic::{AtomicU64, Ordering};

/// The receive role of a packet within its QP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Requests to the QP's responder.
    Requests = 0,
    /// Responses and acknowledgements to the QP's requester.
    Responses = 1,
}

impl Role {
    /// The role as an index (0 or 1), and back.
    pub const fn index(self) -> usize {
        self as usize
    }

    /// The role numbered `i` by [`Role::index`]; anything but 0 is
    /// [`Role::Responses`].
    pub const fn from_index(i: u32) -> Role {
        if i == 0 {
            Role::Requests
        } else {
            Role::Responses
        }
    }
}

/// Packets of at least this many bytes (RoCE headers through ICRC) are
/// worth a hand-over: below it, the wake-up costs more than the CRC and
/// copy it moves (the 64-byte and latency rows lost when every packet
/// went).
pub const MIN_HANDED_LEN: usize = 512;

/// What a packet weighs for [`place`] ([`Arrival::len`]): its length, RoCE
/// headers through ICRC, or, for a READ request (`read_len`: the DMA
/// length its RETH asks for), the bytes of the responses it asks for when
/// they are more. A READ request is small on the wire, but whoever takes
/// it builds and sends its responses on the spot, a CRC pass over every
/// byte: processed where it arrives, that pass lands on the CPU that also
/// receives the responses when both ends share a host (the requester's
/// transmit restarts where its completions run), and both passes of a
/// READ stream end up on one CPU while the other only polls. A READ
/// below [`MIN_WEIGHED_READ`] weighs its request only: its responses are
/// a few packets, and the wake-ups of a hand-over (the request's, then its
/// responses' back) cost its round trip more than the pass they move.
pub fn weight(len: usize, read_len: Option<u32>) -> usize {
    match read_len.map(|n| usize::try_from(n).unwrap_or(usize::MAX)) {
        Some(n) if n >= MIN_WEIGHED_READ => len.max(n),
        _ => len,
    }
}

/// The smallest READ whose request weighs its responses ([`weight`]):
/// under TCG, weighing every READ of [`MIN_HANDED_LEN`] bytes or more made
/// 4 KiB READs 1.42x as fast in a stream and their round trip 1.39x as
/// long (`Documentation/benchmark.rst`, "READs answered on the other CPU").
pub const MIN_WEIGHED_READ: usize = 16 * 1024;

/// The packets of one QP role waiting on a receive thread: how many, and
/// on which CPU's thread (meaningless when there are none). Kept in one
/// 64-bit word ([`RoleState`]) so that one compare-and-swap changes both:
/// two CPUs handing over packets of one role at once cannot send them to
/// two threads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Waiting {
    /// Packets handed over and not yet processed.
    pub count: u32,
    /// The CPU whose thread has them.
    pub cpu: u32,
}

impl Waiting {
    /// Nothing waits.
    pub const NONE: Waiting = Waiting { count: 0, cpu: 0 };

    /// The state a word of [`RoleState`] holds.
    pub const fn from_word(w: u64) -> Self {
        Waiting {
            count: w as u32,
            cpu: (w >> 32) as u32,
        }
    }

    /// The word that holds this state.
    pub const fn to_word(self) -> u64 {
        ((self.cpu as u64) << 32) | self.count as u64
    }

    /// The state once one more packet waits on `cpu`'s thread; `None` if
    /// that would break the role's order (others wait on another CPU) or
    /// the count is full.
    pub fn join(self, cpu: u32) -> Option<Waiting> {
        if self.count > 0 && self.cpu != cpu {
            return None;
        }
        Some(Waiting {
            count: self.count.checked_add(1)?,
            cpu,
        })
    }

    /// The state once one waiting packet was processed; `None` if none
    /// waited.
    pub fn leave(self) -> Option<Waiting> {
        Some(Waiting {
            count: self.count.checked_sub(1)?,
            cpu: self.cpu,
        })
    }
}

/// Where the CPUs stand when a packet arrives (read only when the
/// decision needs it: [`place`] asks for it through a closure).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cpus {
    /// The CPU whose thread takes this CPU's hand-overs; `None` without
    /// receive threads, with one CPU, or with the hand-over turned off.
    pub other: Option<u32>,
    /// Whether this CPU's own receive thread took a request within the
    /// last tick (the responder works here: an ACK arriving here was most
    /// likely sent by that thread, and is its requester's business).
    pub here_takes_requests: bool,
}

/// What the receive path knows of a packet when it decides.
#[derive(Clone, Copy, Debug)]
pub struct Arrival {
    /// The packet's role in its QP.
    pub role: Role,
    /// Its weight ([`weight`]): its length, RoCE headers through ICRC,
    /// or what a READ request asks to be sent.
    pub len: usize,
    /// Its role's packets waiting on a thread.
    pub waiting: Waiting,
    /// For a response: its requester's transmit stopped with work left
    /// that only an acknowledgement lets go (its send window or its
    /// READ/atomic limit is full). Always `false` for a request.
    pub requester_waits: bool,
    /// For a response: its requester's process posts without polling a
    /// completion in between (a stream, not a round trip: with both ends
    /// on one host a small READ completes inside its own doorbell, so the
    /// requester never has two outstanding to tell it by). Always `false`
    /// for a request.
    pub requester_streams: bool,
}

/// Where the packet is processed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// Here, now.
    Here,
    /// By the receive thread of this CPU.
    Thread(u32),
}

/// Decides where a received packet is processed; `cpus` is called (at
/// most once) only if the answer depends on it.
///
/// 1. Behind packets of its QP and role that wait on a thread, on that
///    thread, whatever else holds (arrival order within a role is kept,
///    even if the hand-over was turned off meanwhile).
/// 2. A light request (weighing less than [`MIN_HANDED_LEN`]), here.
/// 3. Without another CPU, here.
/// 4. A packet weighing [`MIN_HANDED_LEN`] bytes or more (a request's
///    payload to check and copy, a READ request's responses to build, or
///    a READ response's payload while its requester waits or streams,
///    [`Arrival::requester_streams`]), on the other CPU.
/// 5. A small response (an ACK) to a requester whose transmit waits for
///    it ([`Arrival::requester_waits`]), arriving on a CPU whose thread
///    takes requests, on the other CPU: the transmit the ACK lets go
///    (a CRC pass and a copy per packet) then runs where the requester's
///    consumer does, not beside the responder.
/// 6. Anything else, here. A response whose requester neither waits nor
///    streams stays without asking where the CPUs stand, whatever its
///    size: an ACK that only completes work (a stream that posts a
///    message per doorbell sends each whole before its ACK comes back)
///    costs less where it arrives than the other CPU's wake-up, a context
///    switch per message on the CPU that posts them; so do the READ
///    responses of a READ posted alone (a round trip: its process waits
///    for the completion, and the wake-up would come on top of the CRC
///    pass and copy it moves).
pub fn place(a: &Arrival, cpus: impl FnOnce() -> Cpus) -> Place {
    if a.waiting.count > 0 {
        return Place::Thread(a.waiting.cpu);
    }
    let large = a.len >= MIN_HANDED_LEN;
    let stays = match a.role {
        Role::Requests => !large,
        Role::Responses => !(a.requester_waits || (large && a.requester_streams)),
    };
    if stays {
        return Place::Here;
    }
    let c = cpus();
    let Some(other) = c.other else {
        return Place::Here;
    };
    if large || c.here_takes_requests {
        return Place::Thread(other);
    }
    Place::Here
}

/// One QP role's [`Waiting`] state, shared by every CPU that receives
/// for the QP and the threads that process its handed packets.
pub struct RoleState(AtomicU64);

impl Default for RoleState {
    fn default() -> Self {
        Self::new()
    }
}

impl RoleState {
    /// Nothing waiting.
    pub const fn new() -> Self {
        RoleState(AtomicU64::new(Waiting::NONE.to_word()))
    }

    /// The packets waiting now.
    pub fn waiting(&self) -> Waiting {
        Waiting::from_word(self.0.load(Ordering::Acquire))
    }

    /// Places a packet of this role: `decide` (given what waits; called
    /// again if another CPU changed that meanwhile) says where, and a
    /// packet placed on a thread is counted there in the same atomic
    /// step, so every packet of the role that follows sees it.
    pub fn place(&self, mut decide: impl FnMut(Waiting) -> Place) -> Place {
        let mut cur = self.0.load(Ordering::Acquire);
        loop {
            let w = Waiting::from_word(cur);
            let p = decide(w);
            let Place::Thread(cpu) = p else {
                return p;
            };
            let Some(next) = w.join(cpu) else {
                // Only a decision that ignores what waits gets here
                // (`place` never does), or four billion waiting packets.
                return Place::Here;
            };
            match self.0.compare_exchange_weak(
                cur,
                next.to_word(),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return p,
                Err(now) => cur = now,
            }
        }
    }

    /// A packet placed on a thread was processed (or dropped): the last
    /// access to the state for it.
    pub fn done(&self) {
        let _ = self
            .0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |w| {
                Waiting::from_word(w).leave().map(Waiting::to_word)
            });
    }
}

/// Tells a process's doorbells that stream from those of a ping-pong, per
/// QP.
///
/// A doorbell runs the QP's transmit inline, and with both ends on one
/// host the whole round trip of a small message (the peer's receive, its
/// ACK or READ response, the completion) runs inside it: a process that
/// posts a stream of small messages then never has more than one
/// outstanding, and the other CPU idles. A stream shows itself at the
/// doorbell: the process posts again without having polled a completion
/// since its last doorbell (the send CQ's consumer index has not moved),
/// where a latency test polls each completion first.
///
/// [`Doorbells::ring`] answers two questions from that one test:
/// whether the process streams at all, whatever the messages' size (the
/// receive path's hint, [`Arrival::requester_streams`]: a READ's
/// responses belong to a stream or to a round trip), and whether this
/// doorbell is a small stream's, whose transmit can run on another CPU
/// that keeps busy while the process goes on posting.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Doorbells {
    /// The send CQ's consumer index at the last doorbell (`None` before
    /// the first).
    cons: Option<u32>,
    /// The last doorbell could be handed over (`small` in [`Self::ring`]).
    small: bool,
}

/// What a doorbell is, by [`Doorbells::ring`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ring {
    /// No completion was polled since the last doorbell: the process
    /// streams.
    pub streams: bool,
    /// It streams, and this doorbell and the last one could both be
    /// handed over: a small stream's doorbell.
    pub small_stream: bool,
}

impl Doorbells {
    /// A doorbell. `small`: it could be handed over (the QP's last
    /// message was shorter than [`MIN_HANDED_LEN`] and there is a CPU to
    /// hand it to). `cons`: the send CQ's consumer index now, a value from
    /// the process's memory (any value is safe: it only steers).
    pub fn ring(&mut self, small: bool, cons: u32) -> Ring {
        let streams = self.cons == Some(cons);
        let small_stream = streams && small && self.small;
        self.cons = Some(cons);
        self.small = small;
        Ring {
            streams,
            small_stream,
        }
    }
}

/// Deterministic checks of [`place`] and [`RoleState`], shared by the host
/// tests and KUnit.
#[cfg(any(test, CONFIG_KUNIT))]
pub mod selftest {
    use super::{
        place, weight, Arrival, Cpus, Doorbells, Place, Ring, Role, RoleState, Waiting,
        MIN_HANDED_LEN, MIN_WEIGHED_READ,
    };

    /// Fails with `msg` unless `cond` holds.
    fn check(cond: bool, msg: &'static str) -> Result<(), &'static str> {
        if cond {
            Ok(())
        } else {
            Err(msg)
        }
    }

    fn arrival(role: Role, len: usize) -> Arrival {
        Arrival {
            role,
            len,
            waiting: Waiting::NONE,
            requester_waits: false,
            requester_streams: false,
        }
    }

    /// A response to a requester whose transmit waits for it.
    fn awaited(len: usize) -> Arrival {
        Arrival {
            requester_waits: true,
            ..arrival(Role::Responses, len)
        }
    }

    fn two(here_takes_requests: bool) -> impl FnOnce() -> Cpus {
        move || Cpus {
            other: Some(1),
            here_takes_requests,
        }
    }

    /// A packet behind waiting ones of its role goes where they wait,
    /// whatever its size, and even with the hand-over off.
    pub fn keeps_order() -> Result<(), &'static str> {
        for role in [Role::Requests, Role::Responses] {
            for len in [0, 64, MIN_HANDED_LEN, 4096] {
                for other in [None, Some(1), Some(3)] {
                    let a = Arrival {
                        waiting: Waiting { count: 2, cpu: 5 },
                        ..arrival(role, len)
                    };
                    let cpus = move || Cpus {
                        other,
                        here_takes_requests: false,
                    };
                    check(
                        place(&a, cpus) == Place::Thread(5),
                        "a packet must follow its waiting role",
                    )?;
                }
            }
        }
        Ok(())
    }

    /// Without another CPU nothing is handed over.
    pub fn alone_stays() -> Result<(), &'static str> {
        for role in [Role::Requests, Role::Responses] {
            let cpus = || Cpus {
                other: None,
                here_takes_requests: true,
            };
            check(
                place(&arrival(role, 4096), cpus) == Place::Here,
                "no other CPU: here",
            )?;
        }
        Ok(())
    }

    /// Large requests go to the other CPU, small ones stay (without
    /// asking where the CPUs stand); a response nothing waits for stays
    /// without asking, whatever its size; an awaited one goes if large,
    /// and if small only where the thread takes requests.
    pub fn by_size_and_role() -> Result<(), &'static str> {
        check(
            place(&arrival(Role::Requests, MIN_HANDED_LEN), two(false)) == Place::Thread(1),
            "a large request goes",
        )?;
        for len in [MIN_HANDED_LEN, 4096] {
            let mut asked = false;
            let p = place(&arrival(Role::Responses, len), || {
                asked = true;
                two(true)()
            });
            check(p == Place::Here, "a large response nothing waits for stays")?;
            check(!asked, "a response nothing waits for does not ask")?;
            let streamed = Arrival {
                requester_streams: true,
                ..arrival(Role::Responses, len)
            };
            check(
                place(&streamed, two(false)) == Place::Thread(1),
                "a large response to a streaming requester goes",
            )?;
        }
        let small_streamed = Arrival {
            requester_streams: true,
            ..arrival(Role::Responses, 28)
        };
        check(
            place(&small_streamed, two(true)) == Place::Here,
            "an ACK to a requester that streams but does not wait stays",
        )?;
        let mut asked = false;
        let p = place(&arrival(Role::Requests, MIN_HANDED_LEN - 1), || {
            asked = true;
            two(true)()
        });
        check(p == Place::Here, "a small request stays")?;
        check(!asked, "a small request does not ask where the CPUs stand")?;
        check(
            place(&awaited(28), two(false)) == Place::Here,
            "an ACK stays where no thread takes requests",
        )?;
        check(
            place(&awaited(28), two(true)) == Place::Thread(1),
            "an awaited ACK where the thread takes requests goes back",
        )?;
        let mut asked = false;
        let p = place(&arrival(Role::Responses, 28), || {
            asked = true;
            two(true)()
        });
        check(p == Place::Here, "an ACK nothing waits for stays")?;
        check(!asked, "an ACK nothing waits for does not ask")?;
        check(
            place(&awaited(4096), two(false)) == Place::Thread(1),
            "a large awaited response goes too",
        )?;
        let forced = Arrival {
            requester_waits: true,
            ..arrival(Role::Requests, 28)
        };
        check(
            place(&forced, two(true)) == Place::Here,
            "a small request stays whatever the flag says",
        )
    }

    /// A READ request of [`MIN_WEIGHED_READ`] bytes or more weighs what it
    /// asks for and goes to the other CPU; a smaller one weighs its
    /// request and stays, as any other packet weighs its length.
    pub fn read_weight() -> Result<(), &'static str> {
        let req = 28 + 16;
        check(weight(req, None) == req, "a packet weighs its length")?;
        check(
            weight(req, Some(2)) == req,
            "a tiny READ weighs its request",
        )?;
        check(
            weight(req, Some(MIN_WEIGHED_READ as u32 - 1)) == req,
            "a READ below the floor weighs its request",
        )?;
        check(
            weight(req, Some(MIN_WEIGHED_READ as u32)) == MIN_WEIGHED_READ,
            "a READ at the floor weighs its responses",
        )?;
        check(
            weight(req, Some(65536)) == 65536,
            "a READ weighs its responses",
        )?;
        check(
            weight(req, Some(u32::MAX)) == u32::MAX as usize,
            "the largest READ",
        )?;
        check(
            place(
                &arrival(Role::Requests, weight(req, Some(65536))),
                two(false),
            ) == Place::Thread(1),
            "a large READ request goes",
        )?;
        check(
            place(&arrival(Role::Requests, weight(req, Some(4096))), two(true)) == Place::Here,
            "a small READ request stays",
        )
    }

    /// Role indices round-trip.
    pub fn role_index() -> Result<(), &'static str> {
        check(
            Role::from_index(Role::Requests.index() as u32) == Role::Requests,
            "requests",
        )?;
        check(
            Role::from_index(Role::Responses.index() as u32) == Role::Responses,
            "responses",
        )?;
        check(
            Role::from_index(7) == Role::Responses,
            "other indices are responses",
        )
    }

    /// The packed state: words round-trip, joins keep one CPU, leaves
    /// never go below zero; a role state counts what it placed on a
    /// thread and forgets it once done.
    pub fn role_state() -> Result<(), &'static str> {
        let w = Waiting {
            count: 0xdead_beef,
            cpu: 0x1234_5678,
        };
        check(Waiting::from_word(w.to_word()) == w, "word round trip")?;
        check(
            Waiting::NONE.join(3) == Some(Waiting { count: 1, cpu: 3 }),
            "first join",
        )?;
        check(
            Waiting { count: 1, cpu: 3 }.join(4).is_none(),
            "join elsewhere",
        )?;
        check(
            Waiting {
                count: u32::MAX,
                cpu: 3,
            }
            .join(3)
            .is_none(),
            "join past the count",
        )?;
        check(Waiting::NONE.leave().is_none(), "leave below zero")?;
        let r = RoleState::new();
        let p = r.place(|w| {
            place(
                &Arrival {
                    waiting: w,
                    ..arrival(Role::Requests, 4096)
                },
                two(false),
            )
        });
        check(p == Place::Thread(1), "placed on the thread")?;
        check(r.waiting() == Waiting { count: 1, cpu: 1 }, "counted")?;
        let p = r.place(|w| {
            place(
                &Arrival {
                    waiting: w,
                    ..arrival(Role::Requests, 8)
                },
                two(false),
            )
        });
        check(p == Place::Thread(1), "a small one follows")?;
        check(r.waiting().count == 2, "counted too")?;
        r.done();
        r.done();
        check(r.waiting().count == 0, "both done")?;
        r.done();
        check(r.waiting().count == 0, "an extra done stays at zero")?;
        let p = r.place(|w| {
            place(
                &Arrival {
                    waiting: w,
                    ..arrival(Role::Requests, 8)
                },
                two(false),
            )
        });
        check(p == Place::Here, "nothing waits: a small one stays")?;
        check(r.waiting().count == 0, "and is not counted")
    }

    /// A doorbell streams when the consumer index has not moved since the
    /// last one, whatever the size; it is a small stream's when, besides,
    /// it and the last one could both be handed over. The first doorbell
    /// never streams.
    pub fn doorbells() -> Result<(), &'static str> {
        const NONE: Ring = Ring {
            streams: false,
            small_stream: false,
        };
        const STREAM: Ring = Ring {
            streams: true,
            small_stream: false,
        };
        const SMALL: Ring = Ring {
            streams: true,
            small_stream: true,
        };
        let mut d = Doorbells::default();
        check(d.ring(true, 5) == NONE, "the first doorbell")?;
        check(d.ring(true, 5) == SMALL, "posted again without polling")?;
        check(d.ring(true, 5) == SMALL, "and again")?;
        check(d.ring(true, 6) == NONE, "polled a completion since")?;
        check(d.ring(true, 6) == SMALL, "posting on without polling")?;
        check(d.ring(false, 6) == STREAM, "a large message streams")?;
        check(d.ring(true, 6) == STREAM, "the first small one after it")?;
        check(d.ring(true, 6) == SMALL, "small again")?;
        check(d.ring(false, 7) == NONE, "a large one after a poll")?;
        check(d.ring(false, 7) == STREAM, "large ones stream too")?;
        check(d.ring(true, u32::MAX) == NONE, "any index moves it")?;
        check(d.ring(true, u32::MAX) == SMALL, "even the last one")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::sync::Arc;

    #[test]
    fn selftests() {
        selftest::keeps_order().unwrap();
        selftest::alone_stays().unwrap();
        selftest::by_size_and_role().unwrap();
        selftest::read_weight().unwrap();
        selftest::role_index().unwrap();
        selftest::role_state().unwrap();
        selftest::doorbells().unwrap();
    }

    /// `Doorbells::ring` answers what the two tests it replaced answered:
    /// a transmit test that counted only small doorbells (and forgot the
    /// index at a large one) and a test over every doorbell, for every
    /// sequence of six doorbells, small or large, at one of two indices.
    #[test]
    fn ring_matches_the_two_tests_it_replaced() {
        fn old(last: &mut Option<u32>, counts: bool, cons: u32) -> bool {
            if !counts {
                *last = None;
                return false;
            }
            let same = *last == Some(cons);
            *last = Some(cons);
            same
        }
        for code in 0u32..4096 {
            let (mut d, mut tx, mut any) = (Doorbells::default(), None, None);
            for k in 0..6 {
                let small = (code >> (2 * k)) & 1 == 1;
                let cons = (code >> (2 * k + 1)) & 1;
                let r = d.ring(small, cons);
                assert_eq!(
                    r.small_stream,
                    old(&mut tx, small, cons),
                    "{code:#x} at {k}"
                );
                assert_eq!(r.streams, old(&mut any, true, cons), "{code:#x} at {k}");
            }
        }
    }

    fn role() -> impl Strategy<Value = Role> {
        prop_oneof![Just(Role::Requests), Just(Role::Responses)]
    }

    /// A model of one QP role's packets through the decision: each packet
    /// placed in turn, the threads draining at arbitrary moments in FIFO
    /// order. Returns the order in which packets were processed.
    fn run(
        packets: &[(usize, bool, bool, bool)],
        drains: &[bool],
        other: Option<u32>,
        role: Role,
    ) -> Vec<usize> {
        let mut done = Vec::new();
        // One FIFO per CPU (0: here, 1: other); packets of the role only.
        let mut fifo: [Vec<usize>; 2] = [Vec::new(), Vec::new()];
        let state = RoleState::new();
        for (i, &(len, recent, requester_waits, requester_streams)) in packets.iter().enumerate() {
            if drains.get(i).copied().unwrap_or(false) {
                for f in fifo.iter_mut() {
                    for _ in f.iter() {
                        state.done();
                    }
                    done.append(f);
                }
            }
            let cpus = move || Cpus {
                other,
                here_takes_requests: recent,
            };
            let arrival = |waiting| Arrival {
                role,
                len,
                waiting,
                requester_waits,
                requester_streams,
            };
            match state.place(|waiting| place(&arrival(waiting), cpus)) {
                Place::Here => done.push(i),
                Place::Thread(c) => fifo[(c & 1) as usize].push(i),
            }
        }
        for f in fifo.iter_mut() {
            done.append(f);
        }
        done
    }

    proptest! {
        /// Whatever the sizes, the threads' timing and the CPUs, a role's
        /// packets are processed in the order they arrived, and none is
        /// lost or processed twice.
        #[test]
        fn role_order_is_arrival_order(
            packets in proptest::collection::vec(
                (0usize..9000, any::<bool>(), any::<bool>(), any::<bool>()),
                0..64,
            ),
            drains in proptest::collection::vec(any::<bool>(), 0..64),
            other in proptest::option::of(0u32..2),
            role in role(),
        ) {
            let done = run(&packets, &drains, other, role);
            let want: Vec<usize> = (0..packets.len()).collect();
            prop_assert_eq!(done, want);
        }

        /// Nothing waits on a thread when there is no other CPU.
        #[test]
        fn no_other_cpu_is_inline(
            len in 0usize..9000,
            recent in any::<bool>(),
            waits in any::<bool>(),
            streams in any::<bool>(),
            role in role(),
        ) {
            let a = Arrival {
                role,
                len,
                waiting: Waiting::NONE,
                requester_waits: waits,
                requester_streams: streams,
            };
            let cpus = move || Cpus { other: None, here_takes_requests: recent };
            prop_assert_eq!(place(&a, cpus), Place::Here);
        }
    }

    /// CPUs placing packets of one role at once, each preferring its own
    /// "other" CPU: while a packet is counted as waiting, the state names
    /// the CPU it was placed on, so no two threads ever hold packets of the
    /// role at the same time. (Two separate atomics for the count and the
    /// CPU fail this: two CPUs both see nothing waiting and send to two
    /// threads.)
    #[test]
    fn concurrent_placements_agree_on_one_thread() {
        let state = Arc::new(RoleState::new());
        let threads: Vec<_> = (0..4u32)
            .map(|t| {
                let state = Arc::clone(&state);
                std::thread::spawn(move || {
                    for _ in 0..20_000 {
                        let cpus = || Cpus {
                            other: Some(t),
                            here_takes_requests: false,
                        };
                        // The decision takes time (the kernel asks where the
                        // CPUs stand): let another thread in meanwhile.
                        let p = state.place(|waiting| {
                            std::thread::yield_now();
                            place(
                                &Arrival {
                                    role: Role::Requests,
                                    len: 4096,
                                    waiting,
                                    requester_waits: false,
                                    requester_streams: false,
                                },
                                cpus,
                            )
                        });
                        let Place::Thread(c) = p else {
                            panic!("a large packet with another CPU must be handed over");
                        };
                        // The packet waits on its thread a while.
                        std::thread::yield_now();
                        let w = state.waiting();
                        assert!(w.count > 0, "our own packet is counted");
                        assert_eq!(
                            w.cpu, c,
                            "every waiting packet of the role is on one thread"
                        );
                        state.done();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(state.waiting().count, 0);
    }
}
