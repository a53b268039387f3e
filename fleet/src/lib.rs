//! pfx fleet tool: the unit-side agent (`pfx-agent`) and the operator CLI
//! (`pfx-fleet`). See docs/fleet.md.

pub mod agent;
pub mod atomic;
pub mod http;
pub mod mountguard;
pub mod nic;
pub mod oneshot;
