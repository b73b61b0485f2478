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

#[cfg(any(test, CONFIG_KUNIT))]
pub mod selftest;

#[cfg(test)]
mod tests;
