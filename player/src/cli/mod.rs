//! Subcommands of `pfx-player`, one module each.

pub mod run;
pub mod seq;
pub mod services;
