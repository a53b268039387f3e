//! The player's edge to the operating system: every clock read, sleep, scheduling change,
//! socket option, interface lookup and host-name read goes through here, so the modules
//! above (`engine`, `output`, `profiler`, `nic`, `app`) hold logic and this module holds
//! the `unsafe` calls and the sysfs/procfs paths.
//!
//! - `time`: CLOCK_MONOTONIC, per-thread CPU time, Unix time, absolute sleeps.
//! - `sched`: real-time priority for the threads a frame waits on; background priority
//!   (nice 19, idle I/O) for uploads.
//! - `net`: interface index, names, MTU and type; the socket options socket2 lacks.
//! - `host`: the host name; asking our own supervisor to reload.
//! - `disk`: free and total space of a file system.
//!
//! It depends on no other module of the crate.

pub mod disk;
pub mod host;
pub mod net;
pub mod sched;
pub mod time;
