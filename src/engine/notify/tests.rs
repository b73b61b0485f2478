// SPDX-License-Identifier: GPL-2.0

//! Host tests of the CQ notification machine: the selftests and property tests.

use super::*;
use proptest::prelude::*;

#[test]
fn selftests() {
    selftest::arm_merge_table().unwrap();
    selftest::one_callback_per_arm().unwrap();
    selftest::fire_on_arm().unwrap();
    selftest::fire_on_arm_by_type().unwrap();
    selftest::errors_satisfy_every_arm().unwrap();
    selftest::deferred_callback().unwrap();
    selftest::dead_after_overflow().unwrap();
    selftest::destroy_cancels().unwrap();
    selftest::ib_flags_mapping().unwrap();
    selftest::nd_notify_example().unwrap();
}

#[test]
fn merge_is_max_and_commutative() {
    for a in ArmType::ALL {
        for b in ArmType::ALL {
            assert_eq!(a.merge(b), a.max(b));
            assert_eq!(a.merge(b), b.merge(a));
        }
    }
}

/// One step of a sequential simulation of the CQ and its users.
#[derive(Clone, Debug)]
enum Step {
    Post(CompletionKind),
    Poll(u8),
    Arm(ArmType, bool),
    /// Return from the running callback (if any).
    Finish,
    Overflow,
}

fn step() -> impl Strategy<Value = Step> {
    let kind = prop_oneof![
        Just(CompletionKind::Unsolicited),
        Just(CompletionKind::Solicited),
        Just(CompletionKind::Error)
    ];
    let arm = prop_oneof![
        Just(ArmType::Errors),
        Just(ArmType::Solicited),
        Just(ArmType::Any)
    ];
    prop_oneof![
        6 => kind.prop_map(Step::Post),
        3 => (1u8..4).prop_map(Step::Poll),
        4 => (arm, any::<bool>()).prop_map(|(a, r)| Step::Arm(a, r)),
        4 => Just(Step::Finish),
        1 => Just(Step::Overflow),
    ]
}

/// Reference bookkeeping kept next to the machine.
#[derive(Default)]
struct Oracle {
    /// Unpolled completions: (kind, reported by a callback trigger,
    /// reported to the caller as a missed event).
    cq: std::collections::VecDeque<(CompletionKind, bool, bool)>,
    seq: u64,
    /// Arms requested and not yet consumed by a callback trigger.
    arm: Option<ArmType>,
    /// Callbacks started by a dispatcher and not yet finished.
    running: u32,
    /// Callbacks owed (triggered while one ran).
    owed: u32,
    triggers: u64,
    callbacks: u64,
    /// Triggers not yet followed by the start of a callback.
    uncovered: u64,
}

impl Oracle {
    /// A callback trigger: every completion so far is reported.
    fn trigger(&mut self) {
        assert!(self.arm.is_some(), "callback without an arm");
        self.arm = None;
        self.triggers += 1;
        self.uncovered += 1;
        for e in self.cq.iter_mut() {
            e.1 = true;
        }
    }

    fn run(&mut self, a: Action) {
        match a {
            Action::RunCallback => {
                assert_eq!(self.running, 0, "two callbacks at once");
                self.running = 1;
                self.callbacks += 1;
                self.uncovered = 0;
            }
            Action::Idle => {}
            Action::WakeDestroyer => panic!("no destroy here"),
        }
    }
}

/// The machine under test, driven step by step next to its [`Oracle`].
struct Sim {
    st: CqNotify,
    o: Oracle,
    /// The CQ has overflowed.
    dead: bool,
}

impl Sim {
    fn new() -> Self {
        Self {
            st: CqNotify::new(),
            o: Oracle::default(),
            dead: false,
        }
    }

    /// Runs one step and checks its outcome. `Ok(false)` where the step
    /// was refused (dead CQ, no callback running): the global invariants
    /// are then not checked after it.
    fn step(&mut self, s: Step) -> Result<bool, TestCaseError> {
        match s {
            Step::Post(k) => self.post(k),
            Step::Poll(n) => {
                for _ in 0..n {
                    self.o.cq.pop_front();
                }
                Ok(true)
            }
            Step::Arm(t, report) => self.arm(t, report),
            Step::Finish => self.finish(),
            Step::Overflow => self.overflow(),
        }
    }

    fn post(&mut self, k: CompletionKind) -> Result<bool, TestCaseError> {
        let (st, o) = (&mut self.st, &mut self.o);
        if self.dead {
            prop_assert!(st.on_completion(k).is_err());
            return Ok(false);
        }
        o.seq += 1;
        o.cq.push_back((k, false, false));
        let fire = o.arm.is_some_and(|a| a.satisfied_by(k));
        let a = st.on_completion(k).unwrap();
        if fire {
            o.trigger();
            if o.running > 0 {
                prop_assert_eq!(a, Action::Idle);
                o.owed = 1;
            }
        }
        prop_assert_eq!(a == Action::RunCallback, fire && o.running == 0);
        o.run(a);
        Ok(true)
    }

    fn arm(&mut self, t: ArmType, report: bool) -> Result<bool, TestCaseError> {
        let (st, o) = (&mut self.st, &mut self.o);
        let unpolled = o.cq.len() as u32;
        let r = st.arm(
            ArmRequest {
                kind: t,
                report_missed: report,
            },
            unpolled,
        );
        if self.dead {
            prop_assert!(r.is_err());
            return Ok(false);
        }
        let r = r.unwrap();
        let merged = o.arm.map_or(t, |a| a.merge(t));
        o.arm = Some(merged);
        prop_assert_eq!(
            st.armed(),
            Some(merged).filter(|_| r == ArmOutcome::Pending || r == ArmOutcome::MissedEvents)
        );
        let due = o.cq.iter().any(|e| !e.1 && merged.satisfied_by(e.0));
        if report && unpolled > 0 {
            prop_assert_eq!(r, ArmOutcome::MissedEvents);
            // The caller was told to poll these.
            for e in o.cq.iter_mut() {
                e.2 = true;
            }
        } else if due {
            o.trigger();
            if o.running > 0 {
                prop_assert_eq!(r, ArmOutcome::Deferred);
                o.owed = 1;
            } else {
                prop_assert_eq!(r, ArmOutcome::RunCallback);
            }
            o.run(r.action());
        } else {
            prop_assert_eq!(r, ArmOutcome::Pending);
        }
        Ok(true)
    }

    fn finish(&mut self) -> Result<bool, TestCaseError> {
        let (st, o) = (&mut self.st, &mut self.o);
        let a = st.callback_finished();
        if o.running == 0 {
            prop_assert_eq!(a, Err(NotifyError::NotInCallback));
            return Ok(false);
        }
        o.running = 0;
        let a = a.unwrap();
        if o.owed > 0 {
            o.owed = 0;
            prop_assert_eq!(a, Action::RunCallback);
        } else {
            prop_assert_eq!(a, Action::Idle);
        }
        o.run(a);
        Ok(true)
    }

    fn overflow(&mut self) -> Result<bool, TestCaseError> {
        let (st, o) = (&mut self.st, &mut self.o);
        let f = st.overflow();
        prop_assert_eq!(f.raise_cq_err, !self.dead);
        if !self.dead {
            self.dead = true;
            if o.arm.is_some() {
                o.trigger();
                if o.running > 0 {
                    o.owed = 1;
                    prop_assert_eq!(f.action, Action::Idle);
                } else {
                    prop_assert_eq!(f.action, Action::RunCallback);
                }
            } else {
                prop_assert_eq!(f.action, Action::Idle);
            }
            o.run(f.action);
        } else {
            prop_assert_eq!(f.action, Action::Idle);
        }
        Ok(true)
    }

    /// The global invariants, checked after every step that was not refused.
    fn check_invariants(&self) -> Result<(), TestCaseError> {
        let (st, o) = (&self.st, &self.o);
        prop_assert!(o.callbacks <= o.triggers);
        prop_assert_eq!(st.in_callback(), o.running > 0);
        prop_assert_eq!(st.callback_deferred(), o.owed > 0);
        // No lost wake-up: an outstanding arm never coexists with an
        // unpolled, unreported completion that satisfies it.
        // (Entries reported as missed events are the caller's to poll.)
        if let Some(a) = st.armed() {
            let lost = o.cq.iter().any(|e| !e.1 && !e.2 && a.satisfied_by(e.0));
            prop_assert!(!lost, "lost wake-up");
        }
        Ok(())
    }

    /// Returns from every running callback, then checks that every owed
    /// callback ran and every trigger was followed by a callback.
    fn drain(&mut self) -> Result<(), TestCaseError> {
        let (st, o) = (&mut self.st, &mut self.o);
        // Drain: every owed callback eventually runs.
        while o.running > 0 {
            o.running = 0;
            let a = st.callback_finished().unwrap();
            if o.owed > 0 {
                o.owed = 0;
                prop_assert_eq!(a, Action::RunCallback);
            }
            o.run(a);
        }
        // Every trigger was followed by a callback (triggers that happen
        // while one is deferred coalesce into it).
        prop_assert_eq!(o.uncovered, 0);
        prop_assert!(o.callbacks >= 1 || o.triggers == 0);
        Ok(())
    }
}

proptest! {
    /// Random interleavings of posts, polls, arms, callback returns and
    /// overflows, checked against the rules with an independent oracle.
    #[test]
    fn machine_follows_the_rules(steps in proptest::collection::vec(step(), 0..120)) {
        let mut sim = Sim::new();
        for s in steps {
            if sim.step(s)? {
                sim.check_invariants()?;
            }
        }
        sim.drain()?;
    }
}
