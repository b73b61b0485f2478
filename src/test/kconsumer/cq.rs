// SPDX-License-Identifier: GPL-2.0

//! Conformance of rroce's completion queues as a kernel ULP sees them: the
//! NDKPI arm/notify rules checked with several producers at once, fatal
//! overrun, resize under load and the completion vector's CPU.

use super::*;

/// Several kernel threads complete into one CQ while its handler
/// drains and re-arms from inside the callback: nothing is lost or
/// reordered per producer, callbacks never overlap or nest, and there
/// is never more than one callback per arm (A4, A6, B1, B3).
pub(crate) fn concurrent_producers() -> Result<(), &'static str> {
    const COUNT: u32 = 1000;
    let dev = TestDev::new()?;
    let c = Consumer::new(true);
    let cq = TestCq::new(&dev, 4096, 0, &c)?;
    if cq.capacity() < PRODUCERS as u32 * COUNT {
        return Err("CQ smaller than asked");
    }
    c.arms.fetch_add(1, Ordering::SeqCst);
    if cq.notify(NEXT_COMP) < 0 {
        return Err("arm failed");
    }
    let mut p = start(&cq, COUNT)?;
    if join(&mut p) != 0 {
        return Err("a post into a CQ with room failed");
    }
    cq.state().flush_callbacks();
    let total = PRODUCERS as u32 * COUNT;
    let polled = c.polled.load(Ordering::SeqCst);
    drop(cq);
    if polled != total {
        pr_err!("polled {polled} of {total} completions\n");
        return Err("a completion was never delivered to the armed handler");
    }
    if c.disorder.load(Ordering::SeqCst) != 0 {
        return Err("completions of one producer out of order");
    }
    if c.bad.load(Ordering::SeqCst) != 0 {
        return Err("poll failed or returned a bad status");
    }
    if c.overlap.load(Ordering::SeqCst) != 0 {
        return Err("two callbacks ran at once (or nested)");
    }
    if c.calls() == 0 || c.calls() > c.arms.load(Ordering::SeqCst) {
        return Err("more callbacks than arms");
    }
    Ok(())
}

/// Fire-on-arm through the device: an arm placed after a new unpolled
/// completion fires at once; one already reported does not re-fire it;
/// an arm with nothing new waits for the next completion (A1, A5, A7).
pub(crate) fn fire_on_arm() -> Result<(), &'static str> {
    let dev = TestDev::new()?;
    let c = Consumer::new(false);
    let cq = TestCq::new(&dev, 64, 0, &c)?;
    let st = cq.state();
    post(st, 0, Kind::Unsolicited).map_err(|_| "post")?;
    st.flush_callbacks();
    if c.calls() != 0 {
        return Err("a callback without an arm");
    }
    if cq.notify(NEXT_COMP) < 0 {
        return Err("arm failed");
    }
    st.flush_callbacks();
    if c.calls() != 1 {
        return Err("an arm after a new unpolled completion did not fire at once");
    }
    cq.notify(NEXT_COMP);
    st.flush_callbacks();
    if c.calls() != 1 {
        return Err("an already reported completion fired a second arm");
    }
    post(st, 1, Kind::Unsolicited).map_err(|_| "post")?;
    st.flush_callbacks();
    if c.calls() != 2 {
        return Err("the pending arm did not fire on the next completion");
    }
    if cq.drain(&c) != 2 {
        return Err("poll did not return both completions");
    }
    if cq.notify(NEXT_COMP | REPORT_MISSED) != 0 {
        return Err("REPORT_MISSED_EVENTS saw completions in a drained CQ");
    }
    st.flush_callbacks();
    if c.calls() != 2 {
        return Err("an arm on a drained CQ fired");
    }
    Ok(())
}

/// A solicited arm ignores unsolicited successes and fires on a
/// solicited completion; an error satisfies a solicited arm and an any
/// arm (A2, A3, A9, E3).
pub(crate) fn solicited_and_errors() -> Result<(), &'static str> {
    let dev = TestDev::new()?;
    let c = Consumer::new(false);
    let cq = TestCq::new(&dev, 64, 0, &c)?;
    let st = cq.state();
    cq.notify(SOLICITED);
    post(st, 0, Kind::Unsolicited).map_err(|_| "post")?;
    st.flush_callbacks();
    if c.calls() != 0 {
        return Err("a solicited arm fired on an unsolicited completion");
    }
    post(st, 1, Kind::Solicited).map_err(|_| "post")?;
    st.flush_callbacks();
    if c.calls() != 1 {
        return Err("a solicited arm did not fire on a solicited completion");
    }
    cq.drain(&c);
    // SOLICITED then NEXT_COMP merge to ANY: an unsolicited success fires.
    cq.notify(SOLICITED);
    cq.notify(NEXT_COMP);
    post(st, 2, Kind::Unsolicited).map_err(|_| "post")?;
    st.flush_callbacks();
    if c.calls() != 2 {
        return Err("SOLICITED + ANY did not merge to ANY");
    }
    cq.drain(&c);
    for (n, flags) in [(3u32, SOLICITED), (4, NEXT_COMP)] {
        cq.notify(flags);
        post(st, 3, Kind::Error).map_err(|_| "post")?;
        st.flush_callbacks();
        if c.calls() != n {
            return Err("an error completion did not satisfy the arm");
        }
        cq.drain(&c);
    }
    Ok(())
}

/// Overrun kills the CQ: the consumer gets `IB_EVENT_CQ_ERR`, a pending
/// arm is satisfied once, later arms fail and nothing more is queued
/// (A12, B4).
pub(crate) fn overrun_is_fatal() -> Result<(), &'static str> {
    let dev = TestDev::new()?;
    let c = Consumer::new(false);
    let cq = TestCq::new(&dev, 8, 0, &c)?;
    let st = cq.state();
    let cap = cq.capacity();
    cq.notify(SOLICITED);
    for i in 0..cap {
        post(st, u64::from(i), Kind::Unsolicited).map_err(|_| "post into a CQ with room")?;
    }
    if post(st, 99, Kind::Unsolicited).is_ok() {
        return Err("a post into a full CQ succeeded");
    }
    st.flush_callbacks();
    if c.cq_err.load(Ordering::SeqCst) != 1 {
        return Err("no IB_EVENT_CQ_ERR after the overrun");
    }
    if c.calls() != 1 {
        return Err("the overrun did not satisfy the pending arm exactly once");
    }
    if cq.notify(NEXT_COMP) >= 0 {
        return Err("arming a dead CQ succeeded");
    }
    if post(st, 100, Kind::Error).is_ok() {
        return Err("a dead CQ accepted a completion");
    }
    Ok(())
}

/// Resizing while several kernel threads complete into the CQ and the
/// handler drains it loses and reorders nothing (B5, B6).
pub(crate) fn resize_under_load() -> Result<(), &'static str> {
    const COUNT: u32 = 1000;
    let dev = TestDev::new()?;
    let c = Consumer::new(true);
    let cq = TestCq::new(&dev, 4096, 0, &c)?;
    c.arms.fetch_add(1, Ordering::SeqCst);
    cq.notify(NEXT_COMP);
    let mut p = start(&cq, COUNT)?;
    let mut resized = 0;
    for k in 0..40 {
        let n = if k % 2 == 0 { 8000 } else { 3100 };
        if cq.state().resize(n, None).is_ok() {
            resized += 1;
        }
        fsleep(Delta::from_micros(200));
    }
    if join(&mut p) != 0 {
        return Err("a post failed during a resize");
    }
    cq.state().flush_callbacks();
    let total = PRODUCERS as u32 * COUNT;
    let polled = c.polled.load(Ordering::SeqCst);
    let disorder = c.disorder.load(Ordering::SeqCst);
    let overlap = c.overlap.load(Ordering::SeqCst);
    drop(cq);
    // Shrinking below the queued count fails and changes nothing (on a
    // CQ whose handler does not poll).
    let idle = Consumer::new(false);
    let cq = TestCq::new(&dev, 16, 0, &idle)?;
    post(cq.state(), 0, Kind::Unsolicited).map_err(|_| "post")?;
    post(cq.state(), 1, Kind::Unsolicited).map_err(|_| "post")?;
    let shrink = cq.state().resize(1, None);
    let kept = cq.drain(&idle);
    drop(cq);
    if resized < 20 {
        return Err("fewer resizes succeeded than the growing ones");
    }
    if polled != total {
        pr_err!("polled {polled} of {total} completions across resizes\n");
        return Err("a completion was lost across a resize");
    }
    if disorder != 0 {
        return Err("a resize reordered completions");
    }
    if overlap != 0 {
        return Err("two callbacks ran at once");
    }
    if shrink.is_ok() || kept != 2 || idle.disorder.load(Ordering::SeqCst) != 0 {
        return Err("shrinking below the queued count succeeded or lost entries");
    }
    Ok(())
}

/// The callback runs on the CPU of the CQ's completion vector (A10).
pub(crate) fn callback_on_vector_cpu() -> Result<(), &'static str> {
    let dev = TestDev::new()?;
    // SAFETY: a registered device.
    let vectors = unsafe { (*dev.0).num_comp_vectors } as u32;
    for vector in 0..vectors.min(4) {
        let c = Consumer::new(false);
        let cq = TestCq::new(&dev, 16, vector, &c)?;
        cq.notify(NEXT_COMP);
        post(cq.state(), 0, Kind::Unsolicited).map_err(|_| "post")?;
        cq.state().flush_callbacks();
        // SAFETY: plain function call.
        let want = unsafe { sys::rroce_helper_vector_cpu(vector) } as i32;
        let got = c.cpu.load(Ordering::SeqCst);
        drop(cq);
        if c.calls() != 1 {
            return Err("no callback");
        }
        if got != want {
            pr_err!("vector {vector}: callback on CPU {got}, want {want}\n");
            return Err("callback on another CPU than the completion vector's");
        }
    }
    Ok(())
}
