//! MultiSync, FPP-compatible frame sync across the units of a site: the pure core.
//!
//! - `packet`: the datagrams, byte for byte with FPP (decode and encode).
//! - `announce`: which packets a master sends after each frame.
//! - `estimator`: the master's timeline on this unit's clock, from packet arrivals.
//! - `pace`: how a remote moves its frame deadlines onto that timeline.
//! - `follow`: the remote's state machine (idle, open, playing, lost).
//!
//! No sockets, no threads and no clocks here: every time is an argument. The sync thread
//! is the player's `app::sync`, the state it shares with the render thread is
//! `pfx_player::sync::shared`. See README.md for what this crate must never depend on.

pub mod announce;
pub mod estimator;
pub mod follow;
pub mod pace;
pub mod packet;
