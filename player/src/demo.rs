//! The built-in demo show: patterns to one pole of each kind on loopback multicast, so
//! `pfx-player demo` works on a laptop with no files and no root.

use std::path::Path;

use crate::config::show::{Show, ShowConfig};
use crate::config::ConfigError;

const PROFILES: [(&str, &str); 3] = [
    ("gen3-bigpacket", include_str!("../../profiles/gen3-bigpacket.yaml")),
    ("legacy-2018-2023-sacn", include_str!("../../profiles/legacy-2018-2023-sacn.yaml")),
    ("bench-ddp", include_str!("../../profiles/bench-ddp.yaml")),
];

/// The profiles shipped in the binary, found by name when no file matches.
pub fn builtin_profile(name: &str) -> Option<&'static str> {
    PROFILES.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}

pub const DEMO_SHOW: &str = include_str!("../../examples/demo.yaml");

pub fn demo_show() -> Result<Show, ConfigError> {
    ShowConfig::from_str(DEMO_SHOW, Path::new("<built-in demo.yaml>"))
}
