//! `GET /profile`: the profiler's snapshot and who answered. Served by the player
//! (`player/src/http`), printed by `pfx-player profile`, read by the agent. Field meanings
//! and units: docs/profile-api.md.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::nic::NicStatus;

/// Percentiles of one series, in µs, and how many frames they cover.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StageStats {
    pub p50_us: f64,
    pub p95_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
    pub count: u64,
}

/// Δcounter/Δt of one output's counters over the last ~1 s.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OutputRates {
    pub packets_per_s: f64,
    pub bytes_per_s: f64,
    pub frames_sent_per_s: f64,
    pub frames_dropped_per_s: f64,
    pub frames_failed_per_s: f64,
    /// Frames sent in part and frames skipped per second (absent from older players).
    #[serde(default)]
    pub frames_partial_per_s: f64,
    #[serde(default)]
    pub frames_skipped_per_s: f64,
    /// The datagram of a frame that went out least often over the same interval, and its
    /// frames per second: for sACN the universe number, otherwise the datagram's index.
    /// With whole frames every datagram has `frames_sent_per_s`; after frames sent in part
    /// this names the universe (the pole rows) that froze. None before two readings.
    #[serde(default)]
    pub slowest_slot: Option<u64>,
    #[serde(default)]
    pub slowest_slot_per_s: Option<f64>,
}

/// One reading of an output's send counters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CountersSnapshot {
    pub packets: u64,
    pub bytes: u64,
    /// Frames sent whole: every datagram went.
    pub frames_sent: u64,
    /// Frames cut short because the socket would block (EAGAIN/ENOBUFS), in part or at
    /// the first datagram.
    pub frames_dropped: u64,
    /// Frames cut short by any other error.
    pub frames_failed: u64,
    /// Frames of which some datagrams went but not all (a torn frame on the pole). With
    /// `frames_sent` and `frames_skipped`, every frame due is counted once.
    #[serde(default)]
    pub frames_partial: u64,
    /// Frames of which nothing went: not started because the link could not carry them
    /// in time (docs/nic.md, "Whole frames"), or refused at the first datagram.
    #[serde(default)]
    pub frames_skipped: u64,
    /// Payload bytes and datagrams of one whole frame of this output.
    #[serde(default)]
    pub frame_bytes: u64,
    #[serde(default)]
    pub frame_datagrams: u64,
    /// errno name → count.
    pub errors: BTreeMap<String, u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OutputStats {
    pub name: String,
    pub protocol: String,
    pub destination: String,
    /// Flattened: the JSON keeps `packets`, `frames_sent`, ... beside `name`.
    #[serde(flatten)]
    pub counters: CountersSnapshot,
    /// None until two readings exist.
    pub rates: Option<OutputRates>,
}

/// Since the profiler started.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SinceStart {
    pub stages: BTreeMap<String, StageStats>,
    pub frames: u64,
    pub deadline_misses: u64,
    pub skipped_ticks: u64,
    pub fps: f64,
    /// Loop-clock seconds between the first and the newest frame.
    pub loop_s: f64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// The rolling window's span; `stages`, `frames`, `deadline_misses`, `skipped_ticks`
    /// and `fps` cover the frames that started within it.
    pub window_s: f64,
    pub stages: BTreeMap<String, StageStats>,
    pub frames: u64,
    pub deadline_misses: u64,
    pub skipped_ticks: u64,
    pub fps: f64,
    pub fps_target: u32,
    pub since_start: SinceStart,
    /// Samples the render thread could not hand over (ring full).
    pub samples_lost: u64,
    /// Since start: frames whose sequence data was not decoded in time, so the previous
    /// frame went out again.
    pub source_late: u64,
    /// Since start: frames lost to a decode error (a corrupt block), so the previous frame
    /// went out again.
    pub source_errors: u64,
    /// Wall time since the profiler thread last received a frame (None before the first).
    pub last_frame_age_ms: Option<f64>,
    pub uptime_s: f64,
    /// CPU time the profiler thread itself has used.
    pub profiler_cpu_s: f64,
    pub outputs: Vec<OutputStats>,
    pub nic: Option<NicStatus>,
    /// MultiSync as this unit sees it; `role: standalone` when it plays alone. Absent in
    /// the documents of players that predate it.
    #[serde(default)]
    pub sync: Option<SyncStatus>,
}

/// The `sync` section of `/profile` (docs/profile-api.md).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SyncStatus {
    /// `master`, `remote` or `standalone`.
    pub role: String,
    /// A remote: the address its sync packets come from (None before the first).
    pub master: Option<String>,
    /// A remote: `idle`, `open`, `playing` or `lost`; a master: `sending`; `standalone`.
    pub state: String,
    /// A remote: the master's sequence it plays (its file name).
    pub sequence: Option<String>,
    /// A remote: how far its frame deadlines are from its estimate of the master's, in
    /// ms (positive: behind the master).
    pub offset_ms: Option<f64>,
    /// A remote: how much the packets' arrival wanders above the network's floor, in ms.
    pub jitter_ms: Option<f64>,
    /// A remote: ms since the last sync packet (None before the first).
    pub last_packet_age_ms: Option<f64>,
    /// A remote: frames on which the deadlines were moved gently toward the master.
    pub corrections: u64,
    /// A remote: times it jumped onto the master's timeline (a start, a skip, far off).
    pub jumps: u64,
    /// A remote: sync packets received, and datagrams dropped as malformed.
    pub packets_received: u64,
    pub packets_dropped: u64,
    /// A master: packets sent, and sends the kernel refused.
    pub packets_sent: u64,
    pub send_errors: u64,
}

/// `GET /profile`: the snapshot plus who answered.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProfileDoc {
    pub unit: String,
    pub version: String,
    /// "ok", or the reason the loop is not on time (as GET /health says it).
    pub health: String,
    /// Flattened: the snapshot's fields sit beside `unit` in the JSON.
    #[serde(flatten)]
    pub snapshot: Snapshot,
    /// What plays: the store's show or the config's, and why (None from older players).
    #[serde(default)]
    pub show: Option<crate::show::ShowInfo>,
    /// A live override the unit holds (blackout, test pattern, brightness, ...), who set
    /// it and since when; absent when the schedule plays as it is (and from older players).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control: Option<crate::control::ControlState>,
}
