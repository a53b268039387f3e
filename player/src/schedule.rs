//! The show schedule: which entry plays at a given instant, and when that changes. The
//! pure `pfx-schedule` crate, re-exported so `schedule::Schedule` and the rest keep their
//! paths; `app::schedule` follows it with the clock.

pub use pfx_schedule::*;
