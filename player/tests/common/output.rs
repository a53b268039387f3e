//! An `Output` on loopback for tests that send through the real socket path.

use std::path::Path;

use pfx_player::config::DeviceProfile;
use pfx_player::config::show::ResolvedOutput;
use pfx_player::output::{Output, OutputOptions, SocketOptions};

/// Opens an output on `lo` from a device profile's YAML text.
pub fn open_on_lo(profile_yaml: &str, send_buffer: Option<usize>) -> Output {
    open_on_lo_with(profile_yaml, send_buffer, false)
}

/// `open_on_lo`; with `send_every_frame`, every frame is sent as far as the socket takes
/// it (no admission: `--send-every-frame`).
pub fn open_on_lo_with(
    profile_yaml: &str,
    send_buffer: Option<usize>,
    send_every_frame: bool,
) -> Output {
    let profile = DeviceProfile::from_str(profile_yaml, Path::new("<test>")).expect("test profile");
    let resolved = ResolvedOutput {
        name: profile.name.clone(),
        destination: profile.destination,
        start: 0,
        profile,
    };
    let opts = OutputOptions {
        socket: SocketOptions {
            interface: "lo".into(),
            multicast_ttl: 0,
            multicast_loop: false,
            blocking: false,
            send_every_frame,
            send_buffer,
        },
        cid: uuid::Uuid::nil(),
        source_name: "test".into(),
    };
    Output::open(&resolved, &opts).expect("open output on lo")
}
