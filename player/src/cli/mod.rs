//! Subcommands of `pfx-player`, one module each.

pub mod profile;
