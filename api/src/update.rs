//! A/B updates: what the agent's `update ...` verbs answer (docs/update.md, "Rolling
//! out"), what `pfx-agent update health-commit` writes after a boot, and the bundle's
//! sidecar `BUNDLE.json` that `pfx-image bundle` writes beside a bundle. Produced on the
//! unit (`fleet/src/updateagent.rs`, `fleet/src/health.rs`), read by `pfx-fleet push
//! update` over SSH and kept in its state database.

use serde::{Deserialize, Serialize};

/// `BUNDLE.json`, beside `BUNDLE.raucb`: what the operator side needs of a bundle when
/// it has no `rauc` of its own to read the bundle's manifest with.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BundleInfo {
    /// The manifest's `[update] version`.
    pub version: String,
    /// The manifest's `[update] compatible` (`pfx-<target>`).
    pub compatible: String,
    /// sha256 of the whole bundle file, hex.
    pub sha256: String,
    /// Bytes of the bundle file.
    pub size: u64,
}

/// `update put HASH SIZE OFFSET LEN`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UpdatePutReport {
    pub unit: String,
    pub hash: String,
    pub size: u64,
    /// Bytes of this bundle the unit holds now (staged, or all of it once complete).
    pub have: u64,
    /// Bytes this call received.
    pub received: u64,
    /// The bundle is complete, its sha256 checked, and it waits for `update install`.
    pub stored: bool,
    pub errors: Vec<String>,
}

/// One RAUC slot as `rauc status --detailed` reads it back.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlotInfo {
    /// RAUC's slot name, e.g. `rootfs.0`.
    pub name: String,
    /// `A` or `B` (what the boot script and `rauc.slot=` call it).
    pub bootname: Option<String>,
    /// RAUC's slot state: `booted`, `active` or `inactive`.
    pub state: String,
    /// The boot environment's word on it: `good` (attempts left) or `bad` (none).
    pub boot_status: Option<String>,
    /// The version of the bundle last installed into it (None: never installed by RAUC,
    /// e.g. the slot the image was flashed with).
    pub version: Option<String>,
    /// When that install finished (RAUC's timestamp text).
    pub installed: Option<String>,
}

/// When `update switch` switches.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SwitchMode {
    /// At once: the show stops for the reboot.
    Now,
    /// At the start of the schedule's next idle (black) window.
    #[default]
    Idle,
    /// At a time the operator chose.
    At,
}

impl SwitchMode {
    pub fn as_str(self) -> &'static str {
        match self {
            SwitchMode::Now => "now",
            SwitchMode::Idle => "idle",
            SwitchMode::At => "at",
        }
    }
}

/// A switch the unit has been asked for and has not made yet
/// (`<store_root>/update/switch.json`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingSwitch {
    pub mode: SwitchMode,
    /// When the unit will switch (Unix ms).
    pub at_unix_ms: u64,
    /// idle: when that idle window ends (the next show starts).
    pub window_end_unix_ms: Option<u64>,
    pub requested_unix_ms: u64,
    /// The slot it will boot (bootname) and the version installed there.
    pub to_slot: String,
    pub version: Option<String>,
    /// A timer is set for it (false after a reboot: transient timers do not survive one,
    /// so a pending switch whose timer is gone is reported and not made).
    pub armed: bool,
    /// In words: why this time.
    pub reason: String,
}

/// `update install HASH [--force]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct InstallReport {
    pub unit: String,
    pub hash: String,
    /// What `rauc info` read from the bundle (its signature checked).
    pub bundle_version: Option<String>,
    pub bundle_compatible: Option<String>,
    /// The unit's own `compatible` (from `rauc status`).
    pub system_compatible: Option<String>,
    /// The booted slot's version (the bundle must not be older unless forced).
    pub booted_version: Option<String>,
    pub forced: bool,
    /// `rauc install` finished and the target slot reads back with the bundle's version.
    pub installed: bool,
    /// The slot written, as read back after the install.
    pub target: Option<SlotInfo>,
    pub message: String,
    pub read_at_unix_ms: u64,
    pub errors: Vec<String>,
}

/// `update switch now|idle|at TIME`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SwitchReport {
    pub unit: String,
    pub mode: SwitchMode,
    /// When the unit will switch (Unix ms): now, the idle window's start, or the time
    /// asked for. None when it refused.
    pub at_unix_ms: Option<u64>,
    /// The slot it switches to (bootname) and the version there.
    pub to_slot: Option<String>,
    pub version: Option<String>,
    /// now: the other slot is marked active and the unit reboots in a moment.
    pub rebooting: bool,
    /// idle, at: the switch is pending and its timer is set.
    pub scheduled: bool,
    pub message: String,
    pub read_at_unix_ms: u64,
    pub errors: Vec<String>,
}

/// A bundle transfer kept on the unit for a resume.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StagedBundle {
    pub hash: String,
    /// Bytes staged so far.
    pub have: u64,
}

/// `update status`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UpdateStatus {
    pub unit: String,
    /// The unit's RAUC compatible (`pfx-<target>`).
    pub compatible: Option<String>,
    /// The booted slot's bootname (`A`, `B`) and RAUC name.
    pub booted: Option<String>,
    pub booted_slot: Option<String>,
    /// The slot the next boot picks (the first of the boot order with attempts left).
    pub boot_primary: Option<String>,
    /// The booted slot's software version: its installed bundle's version, else the
    /// image's version file.
    pub booted_version: Option<String>,
    /// This boot is a slot's one trial boot (`pfx.trial=1` on the kernel command line).
    pub trial: bool,
    pub slots: Vec<SlotInfo>,
    /// A complete bundle waiting for `update install` (its sha256).
    pub ready: Option<String>,
    pub staged: Vec<StagedBundle>,
    /// The bundle last installed through `update install` (its sha256), into the slot
    /// that is not booted (or, after a switch, the booted one).
    pub installed_bundle: Option<String>,
    pub pending_switch: Option<PendingSwitch>,
    /// The last health check (`<store_root>/update/health.json`).
    pub health: Option<HealthReport>,
    /// The last trial boot's health check (`health-trial.json`): after a rollback, why
    /// the new slot was not kept.
    pub last_trial: Option<HealthReport>,
    pub boot_id: Option<String>,
    pub agent_version: String,
    pub read_at_unix_ms: u64,
    pub errors: Vec<String>,
}

impl UpdateStatus {
    /// The booted slot as read back.
    pub fn booted_slot_info(&self) -> Option<&SlotInfo> {
        self.slots
            .iter()
            .find(|s| s.bootname.is_some() && s.bootname == self.booted)
    }
}

/// One check of the health commit.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HealthCheck {
    /// `first_frame`, `health_ok`, `data_mounted`, `pause_off`, `sshd`, `agent_status`.
    pub name: String,
    pub ok: bool,
    /// What was seen, in words.
    pub detail: String,
}

/// What the health commit did with its verdict.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HealthAction {
    /// Every check passed: `rauc status mark-good` (the slot is kept).
    MarkedGood,
    /// A trial boot failed a check or ran out of time: `rauc status mark-bad` and a
    /// reboot, so the other slot boots.
    MarkedBadRebooting,
    /// A boot that was not a trial failed a check: recorded only (a committed slot is
    /// not thrown away for one unhealthy boot; the boot counter decides after three).
    #[default]
    RecordedOnly,
    /// The verdict could not be acted on (RAUC refused the mark): see `errors`.
    MarkFailed,
}

/// `<store_root>/update/health.json`, written by `pfx-agent update health-commit`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HealthReport {
    pub unit: String,
    /// The slot that booted (bootname) and its version.
    pub slot: Option<String>,
    pub version: Option<String>,
    pub boot_id: Option<String>,
    pub trial: bool,
    pub passed: bool,
    pub action: HealthAction,
    pub checks: Vec<HealthCheck>,
    pub started_unix_ms: u64,
    pub finished_unix_ms: u64,
    pub message: String,
    pub errors: Vec<String>,
}
