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
pub mod txqueue;

pub use error::{NicError, errno_name};
pub use monitor::{MonitorHandle, NicReader, read_status, spawn_monitor};
pub use pause::{PauseAction, PauseOffOutcome, decide_pause_off, pause_off};

use serde::Serialize;

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

/// A counter that the driver may or may not provide. `None` totals mean unsupported:
/// never reported as 0.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CounterReading {
    /// Where the value came from: `standard` (ethtool netlink pause stats), `driver:NAME`
    /// (ethtool -S name), `sysfs`, or `unsupported`.
    pub source: String,
    pub total: Option<u64>,
    /// Δcounter/Δt since the previous reading, t read right after the counters.
    pub per_s: Option<f64>,
}

impl CounterReading {
    pub fn unsupported() -> Self {
        CounterReading {
            source: "unsupported".into(),
            total: None,
            per_s: None,
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct PauseSettings {
    pub autoneg: bool,
    pub rx: bool,
    pub tx: bool,
}

impl PauseSettings {
    pub const OFF: PauseSettings = PauseSettings {
        autoneg: false,
        rx: false,
        tx: false,
    };
}

impl std::fmt::Display for PauseSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let onoff = |b: bool| if b { "on" } else { "off" };
        write!(
            f,
            "autoneg {} rx {} tx {}",
            onoff(self.autoneg),
            onoff(self.rx),
            onoff(self.tx)
        )
    }
}

/// One reading of the show interface, with rates against the previous reading.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct NicStatus {
    pub interface: String,
    pub host: String,
    pub read_at_unix_ms: u64,
    /// None when the driver does not report PAUSE settings; `pause_error` says why.
    pub pause: Option<PauseSettings>,
    pub pause_error: Option<String>,
    pub pause_rx_frames: CounterReading,
    pub pause_tx_frames: CounterReading,
    pub tx_timeouts: CounterReading,
    pub speed_mbps: Option<u32>,
    pub duplex: Option<String>,
    /// Carrier and link counters, as rtnetlink gives them (flattened: the JSON keeps
    /// `carrier`, `tx_packets`, ... at this level).
    #[serde(flatten)]
    pub link: link::LinkStats,
    /// The root qdisc's kind: `pfifo_head_drop` when the player keeps its transmit queue
    /// there (docs/nic.md, "Transmit queue").
    pub qdisc: Option<String>,
    pub qdisc_drops: Option<u64>,
    pub qdisc_backlog_bytes: Option<u64>,
    /// The kernel driver's name (ETHTOOL_GDRVINFO), e.g. `bcmgenet`, `macb`, `veth`.
    pub driver: Option<String>,
    /// Set when this reading failed as a whole (the monitor keeps going).
    pub error: Option<String>,
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
