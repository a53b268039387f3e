//! The show interface as the kernel sees it: PAUSE settings and counters (ethtool
//! netlink, driver stats), tx_timeout, link speed and carrier, link and qdisc stats.
//!
//! Layout: `rate` and the decision/matching functions are pure; `pause` (ethtool
//! netlink), `driver_stats` (SIOCETHTOOL ioctl), `link` (rtnetlink, sysfs) do the I/O;
//! `monitor` puts one reading together and repeats it on its own thread.

pub mod driver_stats;
pub mod error;
pub mod link;
pub mod monitor;
pub mod pause;
pub mod qdisc;
pub mod rate;
pub mod tx_queue;

pub use error::{NicError, errno_name};
pub use monitor::{MonitorHandle, NicReader, read_status, spawn_monitor};
pub use pause::{PauseAction, PauseOffOutcome, decide_pause_off, pause_off};

/// What `nic --json` and the `nic` object of `/profile` carry: the contract with the
/// fleet, defined once in pfx-api.
pub use pfx_api::nic::{CounterReading, NicStatus, PauseSettings};

/// A current-thread runtime for the blocking wrappers around the netlink calls; the render
/// thread never runs one.
pub(crate) fn netlink_runtime() -> Result<tokio::runtime::Runtime, NicError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| NicError::Io {
            what: "starting a runtime for netlink".into(),
            source: e,
        })
}

/// A reading with every field set, for the golden-JSON tests (`api/tests/golden/nic.json`
/// and the `nic` object of `profile.json`).
#[cfg(test)]
pub(crate) fn golden_status() -> NicStatus {
    NicStatus {
        interface: "eth0".into(),
        host: "gen3-7".into(),
        read_at_unix_ms: 1_764_547_200_000,
        pause: Some(PauseSettings {
            autoneg: false,
            rx: false,
            tx: true,
        }),
        pause_error: None,
        pause_rx_frames: CounterReading {
            source: "standard".into(),
            total: Some(2_400_000),
            per_s: Some(130.0),
        },
        pause_tx_frames: CounterReading::unsupported(),
        tx_timeouts: CounterReading {
            source: "sysfs".into(),
            total: Some(0),
            per_s: Some(0.0),
        },
        speed_mbps: Some(1000),
        duplex: Some("full".into()),
        link: link::LinkStats {
            carrier: Some(true),
            carrier_changes: Some(1),
            rx_packets: Some(10),
            tx_packets: Some(216_000),
            rx_bytes: Some(640),
            tx_bytes: Some(165_369_600),
            tx_dropped: Some(0),
            tx_errors: Some(2),
        },
        qdisc: Some("pfifo_head_drop".into()),
        qdisc_drops: Some(7),
        qdisc_backlog_bytes: Some(0),
        driver: Some("bcmgenet".into()),
        error: None,
    }
}

#[cfg(test)]
mod golden_tests {
    /// `pfx-player nic status --json` prints `to_string_pretty` and a newline: the golden
    /// file is those bytes, and the fleet reads the same file back (fleet/src/nic.rs).
    #[test]
    fn nic_status_json_matches_the_golden_file() {
        let text = serde_json::to_string_pretty(&super::golden_status()).unwrap() + "\n";
        pfx_api::golden::check("nic.json", &text);
    }
}
