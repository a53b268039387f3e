//! The show interface as the kernel sees it: PAUSE settings and counters (ethtool
//! netlink, driver stats), tx_timeout, link speed and carrier, link and qdisc stats.

use serde::Serialize;

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

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct PauseSettings {
    pub autoneg: bool,
    pub rx: bool,
    pub tx: bool,
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
    pub carrier: Option<bool>,
    pub carrier_changes: Option<u64>,
    pub rx_packets: Option<u64>,
    pub tx_packets: Option<u64>,
    pub rx_bytes: Option<u64>,
    pub tx_bytes: Option<u64>,
    pub tx_dropped: Option<u64>,
    pub tx_errors: Option<u64>,
    pub qdisc_drops: Option<u64>,
    pub qdisc_backlog_bytes: Option<u64>,
}
