//! What `pfx-agent apply pause-off --json` and `pfx-agent status` answer. Produced on the
//! unit (`fleet/src/agent.rs`), read by `pfx-fleet push` over SSH and kept in its state
//! database.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::nic::PauseSettings;

/// The agent's view of one NIC reading, as read back from the NIC (never what was asked).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NicReading {
    pub interface: String,
    /// None when the driver does not report PAUSE settings.
    pub pause: Option<PauseSettings>,
    pub pause_error: Option<String>,
    /// Total PAUSE frames received; None = unsupported (never a silent 0).
    pub pause_rx_frames: Option<u64>,
    /// `pfx-player` or `mock`.
    pub backend: String,
}

/// The persisted PAUSE-off file on the read-only lower root.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Persisted {
    pub path: PathBuf,
    /// The file on the lower root holds exactly the expected bytes (read back after the write).
    pub matches: bool,
    pub lower_readonly: bool,
}

/// The boot-time oneshot (`pfx-eth-no-pause@IFACE.service`) as systemd reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Oneshot {
    Known {
        unit: String,
        active_state: String,
        result: String,
        exec_main_status: i32,
    },
    Unknown {
        unit: String,
        reason: String,
    },
}

impl Oneshot {
    /// A oneshot known to have failed means PAUSE will be back on after a reboot.
    pub fn failed(&self) -> bool {
        matches!(self, Oneshot::Known { result, exec_main_status, .. } if result != "success" || *exec_main_status != 0)
    }
}

/// `pfx-agent apply pause-off --json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApplyReport {
    pub unit: String,
    pub interface: String,
    /// `apply pause-off`.
    pub action: String,
    pub ok: bool,
    /// PAUSE off in the NIC readback, the lower file exact, the lower read-only, and the
    /// oneshot not known to have failed.
    pub verified: bool,
    pub changed: bool,
    pub changed_nic: bool,
    pub changed_persisted: bool,
    pub removed_stale_temps: usize,
    pub lower_found_rw: bool,
    pub message: String,
    pub readback: Option<NicReading>,
    pub persisted: Option<Persisted>,
    pub oneshot: Oneshot,
    pub image_version: Option<String>,
    pub agent_version: String,
    pub read_at_unix_ms: u64,
    pub errors: Vec<String>,
}

/// What the agent read from the player's `/profile`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlayerInfo {
    pub reachable: bool,
    pub fps: Option<f64>,
    pub deadline_misses: Option<u64>,
    pub reason: Option<String>,
}

/// `pfx-agent status`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatusReport {
    pub unit: String,
    pub interface: String,
    pub pause: Option<PauseSettings>,
    pub pause_off: bool,
    pub pause_error: Option<String>,
    pub pause_rx_frames_total: Option<u64>,
    /// Over `rate_interval_s`; None when the driver has no PAUSE counter.
    pub pause_rx_frames_per_s: Option<f64>,
    pub rate_interval_s: f64,
    pub persisted: Option<Persisted>,
    pub oneshot: Oneshot,
    pub player: PlayerInfo,
    pub image_version: Option<String>,
    pub agent_version: String,
    pub read_at_unix_ms: u64,
    pub errors: Vec<String>,
}
