//! `pfx-player nic status|pause-off IFACE --json`, and the `nic` object of `/profile`:
//! the show interface as the kernel sees it. Produced by `player/src/nic`, read by the
//! fleet agent (`fleet/src/nic.rs`).

use serde::{Deserialize, Serialize};

/// A counter that the driver may or may not provide. `None` totals mean unsupported:
/// never reported as 0.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
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

/// 802.3x PAUSE settings as read back from the NIC.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
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

    pub fn is_off(&self) -> bool {
        *self == Self::OFF
    }
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

/// Carrier and IFLA_STATS64 counters of a link; `None` where the kernel did not say.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LinkStats {
    pub carrier: Option<bool>,
    pub carrier_changes: Option<u64>,
    pub rx_packets: Option<u64>,
    pub tx_packets: Option<u64>,
    pub rx_bytes: Option<u64>,
    pub tx_bytes: Option<u64>,
    pub tx_dropped: Option<u64>,
    pub tx_errors: Option<u64>,
}

/// One reading of the show interface, with rates against the previous reading.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
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
    pub link: LinkStats,
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

/// `pfx-player nic pause-off IFACE --json`: what was there, what was set, what read back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PauseOffOutcome {
    pub interface: String,
    pub driver: String,
    pub before: PauseSettings,
    pub after: PauseSettings,
    /// False when the settings were already off and nothing was sent.
    pub changed: bool,
    /// How many transient refusals were retried before the set went through.
    pub retries: u32,
    pub waited_s: f64,
    pub carrier: Option<bool>,
    pub note: Option<String>,
}

/// The per-second rate of a counter between two readings `dt_s` apart, t read right after
/// the counters. A backward step (driver reset, interface re-created) counts as zero, never
/// as a negative or huge rate; no time passed gives no rate.
pub fn rate_per_s(prev: u64, cur: u64, dt_s: f64) -> Option<f64> {
    (dt_s > 0.0).then(|| cur.saturating_sub(prev) as f64 / dt_s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_clamps_backward_steps() {
        assert_eq!(rate_per_s(10, 30, 2.0), Some(10.0));
        assert_eq!(rate_per_s(500, 3, 1.0), Some(0.0));
        assert_eq!(rate_per_s(1, 5, 0.0), None);
    }

    #[test]
    fn pause_display_and_off() {
        let p = PauseSettings {
            autoneg: true,
            rx: true,
            tx: false,
        };
        assert_eq!(p.to_string(), "autoneg on rx on tx off");
        assert!(!p.is_off() && PauseSettings::OFF.is_off());
    }
}
