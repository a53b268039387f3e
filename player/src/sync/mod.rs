//! MultiSync, FPP-compatible frame sync across the units of a site. The pure core is the
//! `pfx-multisync` crate, re-exported here so `sync::packet` and the rest keep their paths:
//!
//! - `packet`: the datagrams, byte for byte with FPP (decode and encode).
//! - `announce`: which packets a master sends after each frame.
//! - `estimator`: the master's timeline on this unit's clock, from packet arrivals.
//! - `pace`: how a remote moves its frame deadlines onto that timeline.
//! - `follow`: the remote's state machine (idle, open, playing, lost).
//!
//! `shared` (the lock-free state between the sync thread and the render thread) is the
//! player's own. No sockets and no clocks here; the sync thread is `app::sync`.

pub use pfx_multisync::{announce, estimator, follow, pace, packet};

pub mod shared;
