// SPDX-License-Identifier: GPL-2.0

//! The CQ arm/notify state machine, held to the NDKPI completion-handling
//! rules, and the dispatcher protocol that runs CQ callbacks.
//!
//! [`CqNotify`] is plain data mutated under the caller's CQ lock. Its
//! methods never call anything; they return what the caller must do once it
//! has dropped the lock. The callback (`ib_cq.comp_handler`, or an NDK
//! consumer's `NdkCqNotificationCallback`) therefore always runs **outside**
//! the CQ lock, so a handler may re-arm and poll its own CQ without
//! deadlocking (rxe calls `comp_handler` under `cq_lock` instead).
//!
//! # Rules (NDKPI "Completion Handling Requirements" and IND2CompletionQueue)
//!
//! - Arm types are ordered ERRORS < SOLICITED < ANY; arming again before the
//!   arm is satisfied merges to the maximum ([`ArmType::merge`], the 3×3
//!   table of the NDKPI page).
//! - An ANY arm is satisfied by every completion, SOLICITED by solicited
//!   completions and errors, ERRORS by errors only. "Errors always satisfy a
//!   Notify request" (IND2QueuePair), and so does a CQ overrun.
//! - The arm is cleared before the callback, and one arm yields at most one
//!   callback.
//! - Callbacks never overlap and never nest: if one becomes due while
//!   another runs, it is deferred and run by the same dispatcher after the
//!   running one returns.
//! - Arming when a completion placed after the last callback is still in the
//!   CQ (not polled) satisfies the arm at once ("fire on arm"). Completions
//!   that already triggered a callback do not satisfy a later arm.
//! - After a CQ overrun (or another fatal error) the CQ is dead: a pending
//!   arm fires once, later arms fail, the overrun is reported once.
//! - Destroying the CQ cancels the pending arm and any deferred callback.
//!
//! # Dispatcher protocol
//!
//! Whoever gets [`Action::RunCallback`] (from [`CqNotify::on_completion`],
//! [`ArmOutcome::RunCallback`], or [`CqNotify::fatal`]) is the dispatcher
//! and must, after unlocking:
//!
//! ```text
//! lock; action = st.on_completion(kind)?; unlock;
//! while action == RunCallback {
//!     callback();                                   // outside the CQ lock
//!     lock; action = st.callback_finished()?; unlock;
//! }
//! if action == WakeDestroyer { wake the thread blocked in destroy; }
//! ```
//!
//! The dispatcher may run the loop inline or hand it to a work item; a work
//! item holding the dispatcher role must then run (never be cancelled),
//! because the machine considers a callback in progress until
//! [`CqNotify::callback_finished`] is called.
//!
//! # "Still in the CQ"
//!
//! The machine counts completions ([`CqNotify::produced`]) and remembers the
//! count when an arm was last consumed (the watermark). At arm time the
//! caller passes how many entries are still unpolled — for a ring that is
//! `Producer::count()`: `(prod - cons) & mask` with the consumer index
//! acquire-loaded from the shared header — so the entries still in the CQ
//! are the newest `unpolled` ones, and those newer than the watermark are
//! "placed since the last callback". The newest solicited and error
//! completions are remembered by sequence number, which answers the same
//! question per arm type in O(1).
//!
//! Lock order: the CQ lock is innermost for the machine; nothing is called
//! under it. Callbacks run with no rroce lock held.

/// An arm (notification request) type, ordered by precedence.
///
/// The derive'd order is the NDKPI merge order ERRORS < SOLICITED < ANY.
/// It is *not* the numeric order of the ND v1 `ND_CQ_NOTIFY_*` constants
/// (ERRORS 0, ANY 1, SOLICITED 2); see [`ArmType::from_nd`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ArmType {
    /// Notify on errors only (`ND_CQ_NOTIFY_ERRORS`). No verbs flag maps
    /// here; reachable through [`ArmRequest::errors`] for kernel-internal
    /// consumers.
    Errors,
    /// Notify on solicited completions and errors (`ND_CQ_NOTIFY_SOLICITED`,
    /// `IB_CQ_SOLICITED`).
    Solicited,
    /// Notify on any completion (`ND_CQ_NOTIFY_ANY`, `IB_CQ_NEXT_COMP`).
    Any,
}

/// `ND_CQ_NOTIFY_ERRORS` (ND v1 numbering, also used by ND2).
pub const ND_CQ_NOTIFY_ERRORS: u32 = 0;
/// `ND_CQ_NOTIFY_ANY`.
pub const ND_CQ_NOTIFY_ANY: u32 = 1;
/// `ND_CQ_NOTIFY_SOLICITED`.
pub const ND_CQ_NOTIFY_SOLICITED: u32 = 2;

impl ArmType {
    /// All arm types, in precedence order.
    pub const ALL: [ArmType; 3] = [ArmType::Errors, ArmType::Solicited, ArmType::Any];

    /// The arm that results from arming `self` and then `other` before
    /// either is satisfied: the higher precedence of the two (NDKPI table).
    pub const fn merge(self, other: ArmType) -> ArmType {
        if (self as u8) >= (other as u8) {
            self
        } else {
            other
        }
    }

    /// Whether a completion of `kind` satisfies an arm of this type.
    pub const fn satisfied_by(self, kind: CompletionKind) -> bool {
        match self {
            ArmType::Any => true,
            ArmType::Solicited => !matches!(kind, CompletionKind::Unsolicited),
            ArmType::Errors => matches!(kind, CompletionKind::Error),
        }
    }

    /// Maps an ND `ND_CQ_NOTIFY_*` value.
    pub const fn from_nd(value: u32) -> Result<ArmType, NotifyError> {
        match value {
            ND_CQ_NOTIFY_ERRORS => Ok(ArmType::Errors),
            ND_CQ_NOTIFY_ANY => Ok(ArmType::Any),
            ND_CQ_NOTIFY_SOLICITED => Ok(ArmType::Solicited),
            _ => Err(NotifyError::InvalidFlags),
        }
    }
}

/// How a completion counts for notification.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CompletionKind {
    /// A successful completion without the solicited-event bit.
    Unsolicited,
    /// A successful receive completion of a Send with the solicited-event
    /// bit (BTH.SE, `ND_OP_FLAG_SEND_AND_SOLICIT_EVENT`, `IB_SEND_SOLICITED`).
    Solicited,
    /// A completion with an error status, flushes included.
    Error,
}

impl CompletionKind {
    /// Classifies a completion by its status and solicited bit; an error
    /// is an error whether or not it was solicited.
    pub const fn classify(success: bool, solicited: bool) -> CompletionKind {
        match (success, solicited) {
            (false, _) => CompletionKind::Error,
            (true, true) => CompletionKind::Solicited,
            (true, false) => CompletionKind::Unsolicited,
        }
    }
}

/// Linux `enum ib_cq_notify_flags` (`include/rdma/ib_verbs.h`).
pub mod ib_flags {
    /// `IB_CQ_SOLICITED`.
    pub const SOLICITED: u32 = 1 << 0;
    /// `IB_CQ_NEXT_COMP`.
    pub const NEXT_COMP: u32 = 1 << 1;
    /// `IB_CQ_SOLICITED_MASK`.
    pub const SOLICITED_MASK: u32 = SOLICITED | NEXT_COMP;
    /// `IB_CQ_REPORT_MISSED_EVENTS`.
    pub const REPORT_MISSED_EVENTS: u32 = 1 << 2;
}

/// One arm request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArmRequest {
    /// The requested arm type.
    pub kind: ArmType,
    /// Linux `IB_CQ_REPORT_MISSED_EVENTS`: instead of firing on arm, report
    /// unpolled completions to the caller, who then polls again.
    pub report_missed: bool,
}

impl ArmRequest {
    /// An ND/NDKPI-style arm (fire on arm, no missed-event report).
    pub const fn nd(kind: ArmType) -> ArmRequest {
        ArmRequest {
            kind,
            report_missed: false,
        }
    }

    /// An ERRORS arm, for kernel-internal consumers (there is no verbs flag
    /// for it).
    pub const fn errors() -> ArmRequest {
        ArmRequest::nd(ArmType::Errors)
    }

    /// Maps `ib_req_notify_cq()` flags: `IB_CQ_NEXT_COMP` is ANY,
    /// `IB_CQ_SOLICITED` is SOLICITED (both set merge to ANY, as rxe's OR
    /// does), `IB_CQ_REPORT_MISSED_EVENTS` sets `report_missed`. Neither
    /// type bit, or an unknown bit, is [`NotifyError::InvalidFlags`].
    pub const fn from_ib_flags(flags: u32) -> Result<ArmRequest, NotifyError> {
        if flags & !(ib_flags::SOLICITED_MASK | ib_flags::REPORT_MISSED_EVENTS) != 0 {
            return Err(NotifyError::InvalidFlags);
        }
        let kind = if flags & ib_flags::NEXT_COMP != 0 {
            ArmType::Any
        } else if flags & ib_flags::SOLICITED != 0 {
            ArmType::Solicited
        } else {
            return Err(NotifyError::InvalidFlags);
        };
        Ok(ArmRequest {
            kind,
            report_missed: flags & ib_flags::REPORT_MISSED_EVENTS != 0,
        })
    }
}

/// Why a CQ died.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fatal {
    /// More completions than the CQ holds (`ND_BUFFER_OVERFLOW`,
    /// `IB_EVENT_CQ_ERR`).
    Overflow,
    /// Any other unrecoverable error, e.g. a corrupted consumer index
    /// (`ND_INTERNAL_ERROR`, `IB_EVENT_CQ_ERR`).
    Internal,
}

/// Errors of [`CqNotify`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NotifyError {
    /// The CQ is dead (`ND_BUFFER_OVERFLOW` / `ND_INTERNAL_ERROR`; `-EIO`
    /// for verbs).
    Dead(Fatal),
    /// The CQ is being destroyed (`ND_CANCELED`; `-ECANCELED`).
    Canceled,
    /// Unknown or missing arm flags (`-EINVAL`).
    InvalidFlags,
    /// [`CqNotify::callback_finished`] without a callback in progress: the
    /// caller broke the dispatcher protocol.
    NotInCallback,
}

/// What the caller must do after dropping the CQ lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[must_use]
pub enum Action {
    /// Nothing.
    Idle,
    /// Run the callback, then call [`CqNotify::callback_finished`]: the
    /// caller is now the dispatcher.
    RunCallback,
    /// The last callback of a destroyed CQ returned: wake the destroyer.
    WakeDestroyer,
}

/// Result of [`CqNotify::arm`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[must_use]
pub enum ArmOutcome {
    /// Armed; a later completion fires it. `ib_req_notify_cq` returns 0.
    Pending,
    /// Satisfied at once by an unpolled completion newer than the last
    /// callback: the caller is the dispatcher. Returns 0.
    RunCallback,
    /// Satisfied at once, but a callback is running (the arm came from
    /// inside it): its dispatcher runs the next callback when it returns.
    /// Returns 0.
    Deferred,
    /// `report_missed` was requested and unpolled completions exist: the arm
    /// is set, nothing fires now, and the caller must poll again.
    /// `ib_req_notify_cq` returns 1.
    MissedEvents,
}

impl ArmOutcome {
    /// What the caller must do after unlocking.
    pub const fn action(self) -> Action {
        match self {
            ArmOutcome::RunCallback => Action::RunCallback,
            _ => Action::Idle,
        }
    }

    /// The `ib_req_notify_cq` return value (0, or 1 for missed events).
    pub const fn ib_return(self) -> i32 {
        match self {
            ArmOutcome::MissedEvents => 1,
            _ => 0,
        }
    }
}

/// Result of [`CqNotify::fatal`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[must_use]
pub struct FatalOutcome {
    /// First fatal error: raise `IB_EVENT_CQ_ERR` (once per CQ).
    pub raise_cq_err: bool,
    /// A pending arm was satisfied by the error.
    pub action: Action,
}

/// Result of [`CqNotify::destroy`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[must_use]
pub struct DestroyOutcome {
    /// An arm was pending: complete its waiters with `ND_CANCELED` /
    /// `-ECANCELED`.
    pub arm_canceled: bool,
    /// A callback is running: wait for [`Action::WakeDestroyer`] before
    /// freeing the CQ. Never wait from inside the callback itself.
    pub wait_for_callback: bool,
}

/// Life cycle of a CQ.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Life {
    Live,
    Dead(Fatal),
    Destroyed,
}

/// NDKPI notification state of one CQ, guarded by the CQ lock.
///
/// # Invariants
///
/// - `pending` implies `in_callback`: a deferred callback always has a
///   dispatcher that will run it.
/// - `mark <= produced`; `last_solicited` and `last_error`, when set, are in
///   `1..=produced`, and `last_error` is not newer than `last_solicited`
///   (an error counts as solicited).
/// - Once `life` is `Destroyed`, `arm` is `None` and `pending` is false.
/// - Once `life` is not `Live`, `arm` stays `None`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CqNotify {
    arm: Option<ArmType>,
    in_callback: bool,
    pending: bool,
    life: Life,
    /// Completions placed in the CQ so far; completion `n` has sequence
    /// number `n` (1-based).
    produced: u64,
    /// `produced` when an arm was last consumed (callback triggered).
    mark: u64,
    /// Sequence number of the newest solicited-or-error completion.
    last_solicited: Option<u64>,
    /// Sequence number of the newest error completion.
    last_error: Option<u64>,
}

impl Default for CqNotify {
    fn default() -> Self {
        Self::new()
    }
}

impl CqNotify {
    /// A new CQ: not armed ("by default, completion queues are not set to
    /// generate completion notifications").
    pub const fn new() -> Self {
        // INVARIANT: nothing produced, nothing pending.
        CqNotify {
            arm: None,
            in_callback: false,
            pending: false,
            life: Life::Live,
            produced: 0,
            mark: 0,
            last_solicited: None,
            last_error: None,
        }
    }

    /// The pending arm, if any.
    pub fn armed(&self) -> Option<ArmType> {
        self.arm
    }

    /// Whether a dispatcher is running (or about to run) a callback.
    pub fn in_callback(&self) -> bool {
        self.in_callback
    }

    /// Whether a callback is owed once the running one returns.
    pub fn callback_deferred(&self) -> bool {
        self.pending
    }

    /// Completions recorded so far.
    pub fn produced(&self) -> u64 {
        self.produced
    }

    /// Why the CQ died, if it did.
    pub fn fatal_reason(&self) -> Option<Fatal> {
        match self.life {
            Life::Dead(f) => Some(f),
            _ => None,
        }
    }

    /// Whether the CQ was destroyed.
    pub fn is_destroyed(&self) -> bool {
        self.life == Life::Destroyed
    }

    /// Fails unless completions may still be placed into the CQ. Check this
    /// before reserving a ring slot.
    pub fn check_postable(&self) -> Result<(), NotifyError> {
        match self.life {
            Life::Live => Ok(()),
            Life::Dead(f) => Err(NotifyError::Dead(f)),
            Life::Destroyed => Err(NotifyError::Canceled),
        }
    }

    /// Consumes the pending arm: either the caller becomes the dispatcher,
    /// or the running dispatcher owes one more callback.
    fn trigger(&mut self) -> Action {
        self.arm = None;
        self.mark = self.produced;
        if self.in_callback {
            // INVARIANT: `in_callback` holds, so `pending` may be set.
            self.pending = true;
            Action::Idle
        } else {
            self.in_callback = true;
            Action::RunCallback
        }
    }

    /// Records a completion that was just placed (committed) in the CQ.
    ///
    /// Returns [`Action::RunCallback`] if it satisfied the arm and no
    /// callback is running. Fails if the CQ is dead or destroyed (the caller
    /// should have checked [`CqNotify::check_postable`]).
    pub fn on_completion(&mut self, kind: CompletionKind) -> Result<Action, NotifyError> {
        self.check_postable()?;
        // Cannot wrap in practice: 2^64 completions.
        self.produced = self.produced.wrapping_add(1);
        // INVARIANT: the new sequence numbers equal `produced`; an error is
        // recorded as solicited too, so it is never newer than it.
        match kind {
            CompletionKind::Unsolicited => {}
            CompletionKind::Solicited => self.last_solicited = Some(self.produced),
            CompletionKind::Error => {
                self.last_solicited = Some(self.produced);
                self.last_error = Some(self.produced);
            }
        }
        match self.arm {
            Some(arm) if arm.satisfied_by(kind) => Ok(self.trigger()),
            _ => Ok(Action::Idle),
        }
    }

    /// Whether a still-unpolled completion newer than the last callback
    /// satisfies `arm`, given that the newest `unpolled` completions are in
    /// the CQ.
    fn unreported(&self, arm: ArmType, unpolled: u32) -> bool {
        // Completions in the CQ and newer than the watermark are the newest
        // `window` ones.
        let window = u64::from(unpolled).min(self.produced - self.mark);
        let in_window = |seq: Option<u64>| match seq {
            // Age 0 is the newest completion.
            Some(s) => self.produced - s < window,
            None => false,
        };
        match arm {
            ArmType::Any => window > 0,
            ArmType::Solicited => in_window(self.last_solicited),
            ArmType::Errors => in_window(self.last_error),
        }
    }

    /// Arms the CQ (`NdkArmCq`, `ib_req_notify_cq`).
    ///
    /// `unpolled` is the number of completions still in the CQ (not yet
    /// polled), e.g. `Producer::count()` under the CQ lock. A merged arm
    /// that an unpolled completion newer than the last callback satisfies
    /// fires at once ([`ArmOutcome::RunCallback`] or, from inside a
    /// callback, [`ArmOutcome::Deferred`]), unless `report_missed` is set, in
    /// which case any unpolled completion yields [`ArmOutcome::MissedEvents`]
    /// and the arm just stays set (Linux semantics: the caller polls again).
    pub fn arm(&mut self, req: ArmRequest, unpolled: u32) -> Result<ArmOutcome, NotifyError> {
        self.check_postable()?;
        let merged = match self.arm {
            Some(cur) => cur.merge(req.kind),
            None => req.kind,
        };
        self.arm = Some(merged);
        if req.report_missed && unpolled > 0 {
            return Ok(ArmOutcome::MissedEvents);
        }
        if !self.unreported(merged, unpolled) {
            return Ok(ArmOutcome::Pending);
        }
        Ok(match self.trigger() {
            Action::RunCallback => ArmOutcome::RunCallback,
            _ => ArmOutcome::Deferred,
        })
    }

    /// The dispatcher's callback returned. Returns [`Action::RunCallback`]
    /// if another callback was deferred meanwhile (the same dispatcher runs
    /// it), [`Action::WakeDestroyer`] if the CQ was destroyed meanwhile.
    pub fn callback_finished(&mut self) -> Result<Action, NotifyError> {
        if !self.in_callback {
            return Err(NotifyError::NotInCallback);
        }
        if self.pending {
            // INVARIANT: `in_callback` stays set for the deferred callback.
            self.pending = false;
            return Ok(Action::RunCallback);
        }
        self.in_callback = false;
        if self.life == Life::Destroyed {
            return Ok(Action::WakeDestroyer);
        }
        Ok(Action::Idle)
    }

    /// The CQ hit a fatal error (CQ overrun: the ring was full). The CQ is
    /// dead from now on; a pending arm of any type is satisfied (errors
    /// satisfy every arm). Only the first call reports the error.
    pub fn fatal(&mut self, reason: Fatal) -> FatalOutcome {
        if self.life != Life::Live {
            return FatalOutcome {
                raise_cq_err: false,
                action: Action::Idle,
            };
        }
        // INVARIANT: `arm` is consumed below (or already `None`), and no
        // arm is accepted once the CQ is dead.
        self.life = Life::Dead(reason);
        let action = if self.arm.is_some() {
            self.trigger()
        } else {
            Action::Idle
        };
        FatalOutcome {
            raise_cq_err: true,
            action,
        }
    }

    /// Shorthand for `fatal(Fatal::Overflow)`.
    pub fn overflow(&mut self) -> FatalOutcome {
        self.fatal(Fatal::Overflow)
    }

    /// The CQ is being destroyed: cancels the pending arm and any deferred
    /// callback. Later calls fail with [`NotifyError::Canceled`].
    pub fn destroy(&mut self) -> DestroyOutcome {
        let arm_canceled = self.arm.take().is_some();
        // INVARIANT: no arm and nothing deferred once destroyed.
        self.pending = false;
        self.life = Life::Destroyed;
        DestroyOutcome {
            arm_canceled,
            wait_for_callback: self.in_callback,
        }
    }
}

/// Deterministic, allocation-free checks, run by KUnit in the kernel and by
/// `cargo test` on the host.
pub mod selftest {
    use super::{
        Action, ArmOutcome, ArmRequest, ArmType, CompletionKind, CqNotify, Fatal, NotifyError,
    };
    use ArmType::{Any, Errors, Solicited};
    use CompletionKind::{Error, Solicited as Sol, Unsolicited as Uns};

    /// Fails with `msg` unless `cond` holds.
    fn check(cond: bool, msg: &'static str) -> Result<(), &'static str> {
        if cond {
            Ok(())
        } else {
            Err(msg)
        }
    }

    /// Arms with an ND-style request, nothing unpolled.
    fn arm(st: &mut CqNotify, t: ArmType) -> Result<ArmOutcome, &'static str> {
        st.arm(ArmRequest::nd(t), 0).map_err(|_| "arm failed")
    }

    /// Records a completion.
    fn post(st: &mut CqNotify, k: CompletionKind) -> Result<Action, &'static str> {
        st.on_completion(k).map_err(|_| "completion refused")
    }

    /// Finishes a callback.
    fn finish(st: &mut CqNotify) -> Result<Action, &'static str> {
        st.callback_finished()
            .map_err(|_| "callback_finished refused")
    }

    /// The NDKPI 3×3 table: (first arm, second arm) -> resulting arm.
    pub const MERGE_TABLE: [(ArmType, ArmType, ArmType); 9] = [
        (Any, Any, Any),
        (Any, Errors, Any),
        (Any, Solicited, Any),
        (Errors, Any, Any),
        (Errors, Errors, Errors),
        (Errors, Solicited, Solicited),
        (Solicited, Any, Any),
        (Solicited, Errors, Solicited),
        (Solicited, Solicited, Solicited),
    ];

    /// Every cell of the table, and for each the arm's reaction to an
    /// unsolicited, a solicited and an error completion (27 cases).
    pub fn arm_merge_table() -> Result<(), &'static str> {
        for (first, second, want) in MERGE_TABLE {
            check(
                first.merge(second) == want,
                "merge differs from the NDKPI table",
            )?;
            for kind in [Uns, Sol, Error] {
                let mut st = CqNotify::new();
                check(
                    arm(&mut st, first)? == ArmOutcome::Pending,
                    "arm on empty CQ fired",
                )?;
                check(arm(&mut st, second)? == ArmOutcome::Pending, "re-arm fired")?;
                check(st.armed() == Some(want), "merged arm not stored")?;
                let fired = post(&mut st, kind)? == Action::RunCallback;
                // Written out rather than via `satisfied_by`, so the rule
                // is checked independently.
                let expect = matches!(
                    (want, kind),
                    (Any, _) | (Solicited, Sol | Error) | (Errors, Error)
                );
                check(fired == expect, "wrong arm/completion reaction")?;
                check(
                    st.armed().is_none() == fired,
                    "arm not cleared exactly on fire",
                )?;
            }
        }
        Ok(())
    }

    /// Not armed by default; one callback per arm, however many completions.
    pub fn one_callback_per_arm() -> Result<(), &'static str> {
        let mut st = CqNotify::new();
        check(st.armed().is_none(), "new CQ armed")?;
        check(post(&mut st, Uns)? == Action::Idle, "unarmed CQ fired")?;
        check(
            arm(&mut st, Any)? == ArmOutcome::Pending,
            "polled CQ fired on arm",
        )?;
        check(
            post(&mut st, Uns)? == Action::RunCallback,
            "armed CQ did not fire",
        )?;
        check(st.in_callback(), "dispatcher not marked")?;
        for _ in 0..3 {
            check(
                post(&mut st, Error)? == Action::Idle,
                "second callback for one arm",
            )?;
        }
        check(!st.callback_deferred(), "deferred without an arm")?;
        check(
            finish(&mut st)? == Action::Idle,
            "callback owed without an arm",
        )?;
        check(
            post(&mut st, Sol)? == Action::Idle,
            "fired after the arm was used",
        )?;
        Ok(())
    }

    /// Fire on arm: unpolled completions newer than the last callback
    /// satisfy an arm at once; reported or polled ones do not (S0 Case 1).
    pub fn fire_on_arm() -> Result<(), &'static str> {
        let mut st = CqNotify::new();
        // GetResults returned 0, then two completions landed, then Notify.
        check(post(&mut st, Uns)? == Action::Idle, "unarmed fired")?;
        check(post(&mut st, Uns)? == Action::Idle, "unarmed fired")?;
        let r = st.arm(ArmRequest::nd(Any), 2).map_err(|_| "arm")?;
        check(
            r == ArmOutcome::RunCallback,
            "arm with unreported completions pending",
        )?;
        check(finish(&mut st)? == Action::Idle, "finish")?;
        // Re-arm without polling: those two already triggered a callback.
        let r = st.arm(ArmRequest::nd(Any), 2).map_err(|_| "arm")?;
        check(r == ArmOutcome::Pending, "reported completions fired again")?;
        // A new one fires the pending arm normally.
        check(
            post(&mut st, Uns)? == Action::RunCallback,
            "new completion did not fire",
        )?;
        check(finish(&mut st)? == Action::Idle, "finish")?;
        // New completion, but already polled: no fire.
        check(post(&mut st, Uns)? == Action::Idle, "unarmed fired")?;
        let r = st.arm(ArmRequest::nd(Any), 0).map_err(|_| "arm")?;
        check(r == ArmOutcome::Pending, "polled completion fired")?;
        // Two new, one polled: the other still fires (4 old + 2 new, 1 left).
        let mut st = CqNotify::new();
        check(arm(&mut st, Any)? == ArmOutcome::Pending, "arm")?;
        check(post(&mut st, Uns)? == Action::RunCallback, "fire")?;
        check(finish(&mut st)? == Action::Idle, "finish")?;
        check(post(&mut st, Uns)? == Action::Idle, "unarmed fired")?;
        check(post(&mut st, Uns)? == Action::Idle, "unarmed fired")?;
        let r = st.arm(ArmRequest::nd(Any), 1).map_err(|_| "arm")?;
        check(
            r == ArmOutcome::RunCallback,
            "remaining new completion ignored",
        )?;
        Ok(())
    }

    /// Fire on arm honours the arm type: a SOLICITED arm fires on an unpolled
    /// solicited or error completion, not on unsolicited ones; ERRORS only
    /// on errors.
    pub fn fire_on_arm_by_type() -> Result<(), &'static str> {
        // Sequence: 1 Sol, 2 Uns, 3 Uns (1 polled, 2..3 unpolled).
        let mut st = CqNotify::new();
        for k in [Sol, Uns, Uns] {
            check(post(&mut st, k)? == Action::Idle, "unarmed fired")?;
        }
        let r = st.arm(ArmRequest::nd(Solicited), 2).map_err(|_| "arm")?;
        check(
            r == ArmOutcome::Pending,
            "polled solicited completion fired",
        )?;
        let r = st.arm(ArmRequest::nd(Solicited), 3).map_err(|_| "arm")?;
        check(
            r == ArmOutcome::RunCallback,
            "unpolled solicited completion ignored",
        )?;
        check(finish(&mut st)? == Action::Idle, "finish")?;
        // Errors: an unpolled error satisfies ERRORS; a solicited success
        // does not.
        let mut st = CqNotify::new();
        check(post(&mut st, Sol)? == Action::Idle, "unarmed fired")?;
        let r = st.arm(ArmRequest::errors(), 1).map_err(|_| "arm")?;
        check(r == ArmOutcome::Pending, "ERRORS fired on a success")?;
        check(
            post(&mut st, Error)? == Action::RunCallback,
            "error did not fire ERRORS",
        )?;
        check(finish(&mut st)? == Action::Idle, "finish")?;
        let mut st = CqNotify::new();
        check(post(&mut st, Error)? == Action::Idle, "unarmed fired")?;
        check(post(&mut st, Uns)? == Action::Idle, "unarmed fired")?;
        let r = st.arm(ArmRequest::errors(), 2).map_err(|_| "arm")?;
        check(
            r == ArmOutcome::RunCallback,
            "unpolled error ignored by ERRORS",
        )?;
        // Upgrading a pending SOLICITED arm to ANY fires on the unsolicited
        // completions that are still unpolled and unreported.
        let mut st = CqNotify::new();
        check(post(&mut st, Uns)? == Action::Idle, "unarmed fired")?;
        let r = st.arm(ArmRequest::nd(Solicited), 1).map_err(|_| "arm")?;
        check(r == ArmOutcome::Pending, "SOLICITED fired on unsolicited")?;
        let r = st.arm(ArmRequest::nd(Any), 1).map_err(|_| "arm")?;
        check(r == ArmOutcome::RunCallback, "merged ANY did not fire")?;
        Ok(())
    }

    /// Errors satisfy every arm type, when posted and when found on arm.
    pub fn errors_satisfy_every_arm() -> Result<(), &'static str> {
        for t in ArmType::ALL {
            let mut st = CqNotify::new();
            check(arm(&mut st, t)? == ArmOutcome::Pending, "arm")?;
            check(
                post(&mut st, Error)? == Action::RunCallback,
                "error did not fire",
            )?;
            let mut st = CqNotify::new();
            check(post(&mut st, Error)? == Action::Idle, "unarmed fired")?;
            let r = st.arm(ArmRequest::nd(t), 1).map_err(|_| "arm")?;
            check(
                r == ArmOutcome::RunCallback,
                "unpolled error did not fire on arm",
            )?;
        }
        Ok(())
    }

    /// Callbacks never overlap: one due while another runs is deferred and
    /// run by the same dispatcher after it returns.
    pub fn deferred_callback() -> Result<(), &'static str> {
        let mut st = CqNotify::new();
        check(arm(&mut st, Any)? == ArmOutcome::Pending, "arm")?;
        check(post(&mut st, Uns)? == Action::RunCallback, "fire")?;
        // Inside the callback: re-arm, then a completion arrives on another
        // CPU. It must not start a second callback.
        check(
            arm(&mut st, Any)? == ArmOutcome::Pending,
            "re-arm in callback",
        )?;
        check(
            post(&mut st, Uns)? == Action::Idle,
            "nested/concurrent callback",
        )?;
        check(
            st.callback_deferred() && st.armed().is_none(),
            "not deferred",
        )?;
        check(
            finish(&mut st)? == Action::RunCallback,
            "deferred callback lost",
        )?;
        check(st.in_callback(), "dispatcher released too early")?;
        check(finish(&mut st)? == Action::Idle, "extra callback")?;
        check(!st.in_callback(), "dispatcher not released")?;
        // Re-arm from inside a callback while completions newer than its
        // start are unpolled: satisfied at once but deferred.
        check(arm(&mut st, Any)? == ArmOutcome::Pending, "arm")?;
        check(post(&mut st, Uns)? == Action::RunCallback, "fire")?;
        check(post(&mut st, Uns)? == Action::Idle, "unarmed fired")?;
        let r = st.arm(ArmRequest::nd(Any), 2).map_err(|_| "arm")?;
        check(
            r == ArmOutcome::Deferred,
            "fire on arm inside a callback not deferred",
        )?;
        check(
            finish(&mut st)? == Action::RunCallback,
            "deferred callback lost",
        )?;
        check(finish(&mut st)? == Action::Idle, "extra callback")?;
        check(
            st.callback_finished() == Err(NotifyError::NotInCallback),
            "finish without a callback accepted",
        )?;
        Ok(())
    }

    /// Overflow kills the CQ: the pending arm fires once, the error is
    /// reported once, later arms and completions fail.
    pub fn dead_after_overflow() -> Result<(), &'static str> {
        let mut st = CqNotify::new();
        check(arm(&mut st, Solicited)? == ArmOutcome::Pending, "arm")?;
        check(
            post(&mut st, Uns)? == Action::Idle,
            "SOLICITED fired on unsolicited",
        )?;
        let o = st.overflow();
        check(
            o.raise_cq_err && o.action == Action::RunCallback,
            "overflow did not fire",
        )?;
        let o = st.overflow();
        check(
            !o.raise_cq_err && o.action == Action::Idle,
            "overflow reported twice",
        )?;
        check(st.fatal_reason() == Some(Fatal::Overflow), "not dead")?;
        let dead = NotifyError::Dead(Fatal::Overflow);
        check(
            st.arm(ArmRequest::nd(Any), 0) == Err(dead),
            "arm on a dead CQ",
        )?;
        check(
            st.on_completion(Uns) == Err(dead),
            "completion on a dead CQ",
        )?;
        check(st.check_postable() == Err(dead), "dead CQ postable")?;
        check(finish(&mut st)? == Action::Idle, "finish")?;
        // Unarmed overflow: reported, no callback. Internal errors alike.
        let mut st = CqNotify::new();
        let o = st.fatal(Fatal::Internal);
        check(o.raise_cq_err && o.action == Action::Idle, "unarmed fatal")?;
        check(
            st.arm(ArmRequest::errors(), 0) == Err(NotifyError::Dead(Fatal::Internal)),
            "ERRORS arm on a dead CQ",
        )?;
        // Overflow while a callback runs: deferred, not nested.
        let mut st = CqNotify::new();
        check(arm(&mut st, Any)? == ArmOutcome::Pending, "arm")?;
        check(post(&mut st, Uns)? == Action::RunCallback, "fire")?;
        check(arm(&mut st, Errors)? == ArmOutcome::Pending, "re-arm")?;
        let o = st.overflow();
        check(
            o.raise_cq_err && o.action == Action::Idle,
            "overflow nested a callback",
        )?;
        check(
            finish(&mut st)? == Action::RunCallback,
            "overflow callback lost",
        )?;
        check(finish(&mut st)? == Action::Idle, "finish")?;
        Ok(())
    }

    /// Destroy cancels the pending arm and deferred callbacks, and waits for
    /// a running callback.
    pub fn destroy_cancels() -> Result<(), &'static str> {
        let mut st = CqNotify::new();
        check(arm(&mut st, Any)? == ArmOutcome::Pending, "arm")?;
        let d = st.destroy();
        check(
            d.arm_canceled && !d.wait_for_callback,
            "pending arm not canceled",
        )?;
        check(
            st.arm(ArmRequest::nd(Any), 0) == Err(NotifyError::Canceled),
            "arm after destroy",
        )?;
        check(
            st.on_completion(Uns) == Err(NotifyError::Canceled),
            "completion after destroy",
        )?;
        let d = st.destroy();
        check(!d.arm_canceled && !d.wait_for_callback, "second destroy")?;
        // During a callback with one deferred.
        let mut st = CqNotify::new();
        check(arm(&mut st, Any)? == ArmOutcome::Pending, "arm")?;
        check(post(&mut st, Uns)? == Action::RunCallback, "fire")?;
        check(arm(&mut st, Any)? == ArmOutcome::Pending, "re-arm")?;
        check(post(&mut st, Uns)? == Action::Idle, "deferred")?;
        let d = st.destroy();
        check(
            !d.arm_canceled && d.wait_for_callback,
            "running callback not waited for",
        )?;
        check(
            finish(&mut st)? == Action::WakeDestroyer,
            "deferred callback ran after destroy",
        )?;
        check(
            !st.in_callback() && st.is_destroyed(),
            "dispatcher not released",
        )?;
        Ok(())
    }

    /// Linux `ib_req_notify_cq` flags and the missed-events report.
    pub fn ib_flags_mapping() -> Result<(), &'static str> {
        use super::ib_flags::{NEXT_COMP, REPORT_MISSED_EVENTS, SOLICITED};
        let req = |f| ArmRequest::from_ib_flags(f);
        check(req(NEXT_COMP) == Ok(ArmRequest::nd(Any)), "NEXT_COMP")?;
        check(req(SOLICITED) == Ok(ArmRequest::nd(Solicited)), "SOLICITED")?;
        check(
            req(SOLICITED | NEXT_COMP) == Ok(ArmRequest::nd(Any)),
            "both bits",
        )?;
        check(req(0) == Err(NotifyError::InvalidFlags), "no type bit")?;
        check(
            req(REPORT_MISSED_EVENTS) == Err(NotifyError::InvalidFlags),
            "only REPORT",
        )?;
        check(
            req(NEXT_COMP | 8) == Err(NotifyError::InvalidFlags),
            "unknown bit",
        )?;
        let r = req(NEXT_COMP | REPORT_MISSED_EVENTS).map_err(|_| "flags")?;
        check(r.report_missed && r.kind == Any, "REPORT_MISSED_EVENTS")?;
        // Missed events: reported, arm kept, nothing fired.
        let mut st = CqNotify::new();
        check(post(&mut st, Uns)? == Action::Idle, "unarmed fired")?;
        let o = st.arm(r, 1).map_err(|_| "arm")?;
        check(
            o == ArmOutcome::MissedEvents && o.ib_return() == 1,
            "missed events",
        )?;
        check(
            o.action() == Action::Idle && st.armed() == Some(Any),
            "arm dropped",
        )?;
        let o = st.arm(r, 0).map_err(|_| "arm")?;
        check(
            o == ArmOutcome::Pending && o.ib_return() == 0,
            "empty CQ reported missed",
        )?;
        check(
            post(&mut st, Uns)? == Action::RunCallback,
            "kept arm did not fire",
        )?;
        check(
            ArmOutcome::RunCallback.ib_return() == 0,
            "fire on arm returns 0",
        )?;
        // ND numbering.
        check(
            ArmType::from_nd(0) == Ok(Errors)
                && ArmType::from_nd(1) == Ok(Any)
                && ArmType::from_nd(2) == Ok(Solicited)
                && ArmType::from_nd(3).is_err(),
            "ND_CQ_NOTIFY_* mapping",
        )?;
        check(
            CompletionKind::classify(false, true) == Error
                && CompletionKind::classify(true, true) == Sol
                && CompletionKind::classify(true, false) == Uns,
            "classify",
        )?;
        Ok(())
    }

    /// The S0 Notify example sequence (steps 1..11) and the two race cases.
    pub fn nd_notify_example() -> Result<(), &'static str> {
        let mut st = CqNotify::new();
        let mut in_cq = 0u32;
        for _ in 0..2 {
            // Notify returns pending.
            let r = st.arm(ArmRequest::nd(Any), in_cq).map_err(|_| "arm")?;
            check(r == ArmOutcome::Pending, "Notify did not pend")?;
            // Hardware adds a completion; the driver completes the Notify.
            in_cq += 1;
            check(
                post(&mut st, Uns)? == Action::RunCallback,
                "Notify not completed",
            )?;
            check(finish(&mut st)? == Action::Idle, "finish")?;
            // GetResults returns 1, then 0.
            in_cq -= 1;
        }
        let r = st.arm(ArmRequest::nd(Any), in_cq).map_err(|_| "arm")?;
        check(r == ArmOutcome::Pending, "final Notify did not pend")?;
        // Case 1: GetResults returns 0; completion lands; Notify completes.
        let mut st1 = CqNotify::new();
        check(post(&mut st1, Uns)? == Action::Idle, "unarmed fired")?;
        let r = st1.arm(ArmRequest::nd(Any), 1).map_err(|_| "arm")?;
        check(r == ArmOutcome::RunCallback, "case 1 lost the wake-up")?;
        // Case 2: Notify pends; completion lands; Notify completes.
        let mut st2 = CqNotify::new();
        check(arm(&mut st2, Any)? == ArmOutcome::Pending, "case 2 arm")?;
        check(
            post(&mut st2, Uns)? == Action::RunCallback,
            "case 2 lost the wake-up",
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
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

    proptest! {
        /// Random interleavings of posts, polls, arms, callback returns and
        /// overflows, checked against the rules with an independent oracle.
        #[test]
        fn machine_follows_the_rules(steps in proptest::collection::vec(step(), 0..120)) {
            let mut st = CqNotify::new();
            let mut o = Oracle::default();
            let mut dead = false;
            for s in steps {
                match s {
                    Step::Post(k) => {
                        if dead {
                            prop_assert!(st.on_completion(k).is_err());
                            continue;
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
                    }
                    Step::Poll(n) => {
                        for _ in 0..n {
                            o.cq.pop_front();
                        }
                    }
                    Step::Arm(t, report) => {
                        let unpolled = o.cq.len() as u32;
                        let r = st.arm(ArmRequest { kind: t, report_missed: report }, unpolled);
                        if dead {
                            prop_assert!(r.is_err());
                            continue;
                        }
                        let r = r.unwrap();
                        let merged = o.arm.map_or(t, |a| a.merge(t));
                        o.arm = Some(merged);
                        prop_assert_eq!(st.armed(), Some(merged).filter(|_| r == ArmOutcome::Pending || r == ArmOutcome::MissedEvents));
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
                    }
                    Step::Finish => {
                        let a = st.callback_finished();
                        if o.running == 0 {
                            prop_assert_eq!(a, Err(NotifyError::NotInCallback));
                            continue;
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
                    }
                    Step::Overflow => {
                        let f = st.overflow();
                        prop_assert_eq!(f.raise_cq_err, !dead);
                        if !dead {
                            dead = true;
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
                    }
                }
                // Global invariants.
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
            }
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
        }
    }
}
