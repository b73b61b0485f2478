// SPDX-License-Identifier: GPL-2.0

//! Deterministic, allocation-free checks, run by KUnit in the kernel and by
//! `cargo test` on the host.

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
