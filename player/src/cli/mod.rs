//! Subcommands of `pfx-player`, one module each: their arguments, and the printing of what
//! they found. What runs a show is in `app`.

pub mod doctor;
pub mod fppconnect;
pub mod nic;
pub mod profile;
pub mod run;
pub mod schedule;
pub mod seq;
