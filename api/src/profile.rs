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
}

/// One reading of an output's send counters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CountersSnapshot {
    pub packets: u64,
    pub bytes: u64,
    pub frames_sent: u64,
    pub frames_dropped: u64,
    pub frames_failed: u64,
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
}
