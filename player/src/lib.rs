//! pfx-player: everything that runs on a unit.
//!
//! The pure cores are crates of their own, re-exported here: `source::fseq` (pfx-fseq),
//! `wire` (pfx-wire), `sync` (pfx-multisync, but `sync::shared`) and `schedule`
//! (pfx-schedule). The pure modules (`geometry`, `engine::clock`, `profiler`'s math) take
//! bytes and time as arguments; sockets, netlink and threads live in `output`, `nic`,
//! `http` and `engine::frame_loop`; every clock read, sleep, priority change, socket option
//! and host lookup goes through `sys`. `app` builds and supervises a show from a config;
//! `cli` is the command line over it. No two modules depend on each other, and the
//! forbidden edges of docs/architecture.md do not exist (`scripts/check-cycles`).

pub mod app;
pub mod cli;
pub mod config;
pub mod demo;
pub mod doctor;
pub mod engine;
pub mod fppconnect;
pub mod geometry;
pub mod http;
pub mod mdns;
pub mod nic;
pub mod output;
pub mod pixels;
pub mod profiler;
pub mod schedule;
pub mod source;
pub mod sync;
pub mod sys;
pub mod wire;
