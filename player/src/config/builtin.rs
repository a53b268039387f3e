//! The device profiles shipped inside the binary, so `pfx-player demo` and a show that
//! names a stock profile work with no profile files installed. A file of the same name in
//! a profiles directory wins (`show::load_profile`).

const PROFILES: [(&str, &str); 3] = [
    (
        "gen3-bigpacket",
        include_str!("../../../profiles/gen3-bigpacket.yaml"),
    ),
    (
        "legacy-2018-2023-sacn",
        include_str!("../../../profiles/legacy-2018-2023-sacn.yaml"),
    ),
    (
        "bench-ddp",
        include_str!("../../../profiles/bench-ddp.yaml"),
    ),
];

/// The YAML of the built-in profile `name`, if there is one.
pub fn builtin_profile(name: &str) -> Option<&'static str> {
    PROFILES.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}
