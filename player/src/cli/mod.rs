//! Subcommands of `pfx-player`, one module each.

pub mod doctor;
pub mod nic;
pub mod profile;
pub mod run;
pub mod seq;
pub mod services;
pub mod tx_queue;
