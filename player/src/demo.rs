//! The built-in demo show: patterns to one pole of each kind on loopback multicast, so
//! `pfx-player demo` works on a laptop with no files and no root. Its profiles are the
//! built-in ones (`config::builtin`).

use std::path::Path;

use crate::config::ConfigError;
use crate::config::show::{Show, ShowConfig};

pub const DEMO_SHOW: &str = include_str!("../../examples/demo.yaml");

pub fn demo_show() -> Result<Show, ConfigError> {
    ShowConfig::from_str(DEMO_SHOW, Path::new("<built-in demo.yaml>"))
}
