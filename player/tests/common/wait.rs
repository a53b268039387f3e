//! Waiting for a condition instead of sleeping for a guess: polls until it holds, and
//! panics naming the condition and the timeout when it does not hold in time.
//!
//! Self-contained (std only), so a test that includes just this file with
//! `#[path = "common/wait.rs"] mod wait;` gets it too.
#![allow(dead_code)] // Each test crate uses some of it.

use std::time::{Duration, Instant};

/// How often a condition is looked at again.
pub const POLL: Duration = Duration::from_millis(20);

/// Polls `f` every [`POLL`] until it returns `Some`, and returns that; panics with
/// "timed out after {timeout} waiting for {what}" when it has not within `timeout`.
/// `f` is called at least once, and last at or after the deadline.
#[track_caller]
pub fn wait_for<T>(timeout: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let end = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return v;
        }
        let now = Instant::now();
        if now >= end {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        std::thread::sleep(POLL.min(end - now));
    }
}

/// [`wait_for`] of a condition with no value.
#[track_caller]
pub fn wait_until(timeout: Duration, what: &str, mut f: impl FnMut() -> bool) {
    wait_for(timeout, what, || f().then_some(()))
}
