//! pfx-player: everything that runs on a unit.
//!
//! The pure parts (`wire`, `source`, `geometry`, `engine::clock`, `profiler`'s math) take
//! bytes and time as arguments; sockets, netlink and threads live in `output`, `nic`,
//! `http` and `engine::frame_loop`.

pub mod cli;
pub mod config;
pub mod demo;
pub mod doctor;
pub mod engine;
pub mod geometry;
pub mod http;
pub mod mdns;
pub mod nic;
pub mod output;
pub mod profiler;
pub mod source;
pub mod wire;
