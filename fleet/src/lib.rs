//! pfx fleet tool: the unit-side agent (`pfx-agent`) and the operator CLI
//! (`pfx-fleet`). See docs/fleet.md.

pub mod agent;
pub mod atomic;
pub mod bootenv;
pub mod config;
pub mod controlagent;
pub mod controlpush;
pub mod discover;
pub mod dispatch;
pub mod gate;
pub mod health;
pub mod held;
/// The one HTTP/1.1 client, shared with the player.
pub use pfx_api::http;
pub mod db;
pub mod mountguard;
pub mod nic;
pub mod oneshot;
pub mod pool;
pub mod push;
pub mod rauc;
pub mod rollout;
pub mod showagent;
pub mod showpush;
pub mod ssh;
pub mod top;
pub mod updateagent;
pub mod updatepush;
