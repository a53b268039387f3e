//! The show config: which interface, which poles, what to play (see `docs/show-config.md`).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{ConfigError, DeviceProfile};
use crate::nic::tx_queue::Parent;
use crate::schedule::{self, Schedule};

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ShowConfig {
    /// Network interface the show goes out of, by name (e.g. `eth0`).
    pub interface: String,
    #[serde(default = "default_fps", deserialize_with = "super::yaml::fps")]
    pub fps: u32,
    /// Global brightness, 0.0..=1.0, applied in geometry.
    #[serde(
        default = "default_brightness",
        deserialize_with = "super::yaml::brightness"
    )]
    pub brightness: f32,
    /// HTTP listen address for /profile, /metrics, /health and the dashboard.
    #[serde(default = "default_http")]
    pub http: SocketAddr,
    #[serde(
        default = "default_ttl",
        deserialize_with = "super::yaml::multicast_ttl"
    )]
    pub multicast_ttl: u32,
    /// Loop our own multicast back to this host (needed when poles run on the same host).
    #[serde(default)]
    pub multicast_loop: bool,
    /// Directory of device profiles; relative to this file. Default: `profiles` beside it,
    /// then `/usr/share/pfx/profiles`.
    #[serde(default)]
    pub profiles_dir: Option<PathBuf>,
    /// Profiler window in seconds.
    #[serde(
        default = "default_window",
        deserialize_with = "super::yaml::profile_window_s"
    )]
    pub profile_window_s: u32,
    /// Name of this unit as it appears in mDNS, sACN source names and the fleet tool.
    /// Default: the host name.
    #[serde(default)]
    pub unit_id: Option<String>,
    /// The show interface's transmit queue: `newest` (default) keeps only the newest frame
    /// queued while the link is stalled; `kernel` leaves the interface's queue as it is.
    #[serde(default)]
    pub tx_queue: TxQueuePolicy,
    /// Where that queue goes: `root` (default), or a tc class `MAJOR:MINOR` under a shaper
    /// someone else put at the root.
    #[serde(default)]
    pub tx_queue_parent: Option<String>,
    pub outputs: Vec<OutputConfig>,
    /// What plays without a schedule. With a schedule, leave it out and name playlists.
    #[serde(default)]
    pub content: Content,
    /// Named playlists, for the schedule's entries (and `schedule.idle`).
    #[serde(default)]
    pub playlists: BTreeMap<String, Vec<ContentItem>>,
    /// When to play what; without it the show plays `content` from start.
    #[serde(default)]
    pub schedule: Option<ScheduleConfig>,
    /// Answering xLights' FPP Connect (docs/fpp-connect.md). Off unless `enabled`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fpp_connect: Option<FppConnectConfig>,
    /// MultiSync with other units (FPP-compatible); absent = standalone.
    #[serde(default)]
    pub sync: Option<SyncConfig>,
    /// Live control on a show night (`pfx-fleet control`): its limits on this unit.
    #[serde(default)]
    pub control: ControlConfig,
}

/// `control:`: what live actions may do on this unit (docs/show-config.md).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ControlConfig {
    /// The largest `brightness F` an operator may set: a multiplier on the show's own
    /// `brightness`, 0.0..=4.0 (default 1.0: never brighter than the show). The light
    /// never goes above full whatever the product.
    #[serde(default = "default_brightness_max")]
    pub brightness_max: f32,
}

impl Default for ControlConfig {
    fn default() -> Self {
        ControlConfig {
            brightness_max: default_brightness_max(),
        }
    }
}

fn default_brightness_max() -> f32 {
    1.0
}

/// `fpp_connect:`: uploads from xLights. Needs a password hash when enabled.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FppConnectConfig {
    #[serde(default)]
    pub enabled: bool,
    /// The HTTP Basic user name xLights sends (it pre-fills `admin`).
    #[serde(default = "default_fpp_user")]
    pub user: String,
    /// argon2 PHC string from `pfx-player fpp-connect hash-password`; never the password.
    #[serde(default)]
    pub password_hash: Option<String>,
    /// Where the FPP API listens; xLights always uses port 80.
    #[serde(default = "default_fpp_http")]
    pub http: SocketAddr,
    /// Upper bound on how fast uploads are written to the card.
    #[serde(default = "default_write_rate")]
    pub write_rate_mib_s: u32,
    /// When a posted playlist that changes the show takes over: when the item playing now
    /// ends (as a graceful stop), or at once.
    #[serde(default)]
    pub switch: FppSwitch,
}

/// `fpp_connect.switch`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FppSwitch {
    /// When the item playing now ends.
    #[default]
    ItemEnd,
    /// At the next frame boundary (the show starts again from its first item).
    Now,
}

fn default_fpp_user() -> String {
    "admin".into()
}
fn default_fpp_http() -> SocketAddr {
    SocketAddr::from(([0, 0, 0, 0], 80))
}
fn default_write_rate() -> u32 {
    16
}

impl FppConnectConfig {
    /// The checks `resolve` makes, as a message naming the key.
    fn check(&self) -> Result<(), String> {
        if !self.enabled {
            return Ok(());
        }
        if self.user.is_empty() || self.user.contains(':') {
            return Err("fpp_connect.user: give a name without `:` (xLights uses `admin`)".into());
        }
        let Some(h) = &self.password_hash else {
            return Err("fpp_connect.password_hash: FPP Connect needs a password; make the hash with `pfx-player fpp-connect hash-password`".into());
        };
        match argon2::password_hash::PasswordHash::new(h) {
            Ok(p) if p.algorithm.as_str().starts_with("argon2") => {}
            _ => return Err("fpp_connect.password_hash: not an argon2 hash (`$argon2id$...`); make one with `pfx-player fpp-connect hash-password`".into()),
        }
        if !(1..=1000).contains(&self.write_rate_mib_s) {
            return Err(format!(
                "fpp_connect.write_rate_mib_s: {} is outside 1..=1000",
                self.write_rate_mib_s
            ));
        }
        Ok(())
    }
}

/// `sync:` as written. Checked while it is read (`try_from`), so an error points at the
/// section's line and column.
#[derive(Debug, Clone, Deserialize, Serialize)]
/// Written out through `SyncRaw` too, so what is written reads back.
#[serde(try_from = "SyncRaw", into = "SyncRaw")]
pub struct SyncConfig {
    pub role: SyncRole,
    pub interface: Option<String>,
    pub port: u16,
    pub transport: SyncTransport,
    pub remotes: Vec<std::net::Ipv4Addr>,
    pub sequences: Option<PathBuf>,
    pub offset_ms: i64,
    pub master_lost: MasterLostConfig,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SyncRaw {
    #[serde(default)]
    pub role: SyncRole,
    #[serde(default)]
    pub interface: Option<String>,
    #[serde(default = "default_sync_port")]
    pub port: u16,
    #[serde(default)]
    pub transport: Option<SyncTransport>,
    #[serde(default)]
    pub remotes: Vec<std::net::Ipv4Addr>,
    #[serde(default)]
    pub sequences: Option<PathBuf>,
    #[serde(default)]
    pub offset_ms: i64,
    #[serde(default)]
    pub master_lost: MasterLostConfig,
}

impl TryFrom<SyncRaw> for SyncConfig {
    type Error = String;
    fn try_from(r: SyncRaw) -> Result<SyncConfig, String> {
        if r.port == 0 {
            return Err("sync.port: 0 is not a port; FPP uses 32320".into());
        }
        if r.interface.as_deref() == Some("") {
            return Err(
                "sync.interface: empty; name an interface, or leave it out to use the show's"
                    .into(),
            );
        }
        if !(-10_000..=10_000).contains(&r.offset_ms) {
            return Err(format!(
                "sync.offset_ms: {} is outside -10000..=10000 (a remote offset of more than 10 s is a mistake)",
                r.offset_ms
            ));
        }
        let a = r.master_lost.after_s;
        if !(a.is_finite() && a > 0.0 && a <= 3600.0) {
            return Err(format!(
                "sync.master_lost.after_s: {a} must be more than 0 and at most 3600 seconds"
            ));
        }
        match r.role {
            SyncRole::Master => {
                let t = r.transport.unwrap_or_default();
                if t == SyncTransport::Unicast && r.remotes.is_empty() {
                    return Err("sync.remotes: `transport: unicast` sends to the listed remotes; list at least one address".into());
                }
                if t != SyncTransport::Unicast && !r.remotes.is_empty() {
                    return Err("sync.remotes: only used with `transport: unicast`; set the transport or drop the list".into());
                }
            }
            SyncRole::Remote | SyncRole::Standalone => {
                if r.transport.is_some() || !r.remotes.is_empty() {
                    return Err("sync.transport/remotes: only a master sends; a remote listens on the port (multicast, broadcast and unicast alike)".into());
                }
            }
        }
        Ok(SyncConfig {
            role: r.role,
            interface: r.interface,
            port: r.port,
            transport: r.transport.unwrap_or_default(),
            remotes: r.remotes,
            sequences: r.sequences,
            offset_ms: r.offset_ms,
            master_lost: r.master_lost,
        })
    }
}

impl From<SyncConfig> for SyncRaw {
    fn from(c: SyncConfig) -> SyncRaw {
        SyncRaw {
            role: c.role,
            interface: c.interface,
            port: c.port,
            // Only a master's transport is written: `try_from` refuses one on a remote or
            // a standalone unit, so writing it would make the config unreadable (FPP
            // Connect writes the active config back out when it starts a playlist).
            transport: (c.role == SyncRole::Master).then_some(c.transport),
            remotes: c.remotes,
            sequences: c.sequences,
            offset_ms: c.offset_ms,
            master_lost: c.master_lost,
        }
    }
}

fn default_sync_port() -> u16 {
    32320
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SyncRole {
    Master,
    Remote,
    #[default]
    Standalone,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SyncTransport {
    #[default]
    Multicast,
    Broadcast,
    Unicast,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct MasterLostConfig {
    #[serde(default = "default_after_s")]
    pub after_s: f64,
    #[serde(default)]
    pub then: MasterLostThen,
}

impl Default for MasterLostConfig {
    fn default() -> Self {
        MasterLostConfig {
            after_s: default_after_s(),
            then: MasterLostThen::Stop,
        }
    }
}

fn default_after_s() -> f64 {
    5.0
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum MasterLostThen {
    #[default]
    Stop,
    Continue,
}

/// `sync:` resolved: the interface and the sequence folder filled in.
#[derive(Debug, Clone, PartialEq)]
pub struct SyncSettings {
    pub role: SyncRole,
    pub interface: String,
    pub port: u16,
    pub transport: SyncTransport,
    pub remotes: Vec<std::net::Ipv4Addr>,
    /// Where a remote looks up the master's file names (base names only).
    pub sequences: PathBuf,
    pub offset_ms: i64,
    pub lost_after_s: f64,
    pub lost_then: MasterLostThen,
}

/// `schedule:` as written; `resolve` turns it into a `schedule::Schedule`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ScheduleConfig {
    /// IANA zone name, e.g. `Europe/Berlin` (from the bundled tz database).
    pub timezone: String,
    /// Degrees north; needed when an entry uses sunrise, sunset, dawn or dusk.
    #[serde(default)]
    pub latitude: Option<f64>,
    /// Degrees east (west is negative).
    #[serde(default)]
    pub longitude: Option<f64>,
    /// Outside every entry: `black` (default) or a playlist name.
    #[serde(default)]
    pub idle: Option<String>,
    pub entries: Vec<EntryConfig>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct EntryConfig {
    #[serde(default)]
    pub name: Option<String>,
    pub playlist: String,
    /// `everyday` (default), `weekdays`, `weekend`, a day, or a list of days.
    #[serde(default)]
    pub days: Option<DaysConfig>,
    /// `HH:MM[:SS]`, or `sunrise`/`sunset`/`dawn`/`dusk` with optional `+N`/`-N` minutes.
    pub start: String,
    pub end: String,
    /// Inclusive date ranges the start date must fall in; none means every date.
    #[serde(default)]
    pub dates: Vec<DateRangeConfig>,
    #[serde(default = "default_true")]
    pub repeat: bool,
    /// `graceful` (default): the item playing finishes; `hard`: black at once.
    #[serde(default)]
    pub stop: StopConfig,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(untagged)]
pub enum DaysConfig {
    One(String),
    Many(Vec<String>),
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct DateRangeConfig {
    pub from: String,
    pub to: String,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StopConfig {
    #[default]
    Graceful,
    Hard,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TxQueuePolicy {
    #[default]
    Newest,
    Kernel,
}

fn default_fps() -> u32 {
    60
}
fn default_brightness() -> f32 {
    1.0
}
fn default_http() -> SocketAddr {
    SocketAddr::from(([0, 0, 0, 0], 8080))
}
fn default_ttl() -> u32 {
    1
}
fn default_window() -> u32 {
    5
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct OutputConfig {
    pub name: String,
    /// Profile name (file `<name>.yaml` in the profiles directory) or a path to a profile.
    pub profile: String,
    /// Overrides the profile's destination.
    #[serde(default)]
    pub destination: Option<SocketAddr>,
    /// First sequence channel of this pole, 1-based as in xLights.
    #[serde(default = "default_start")]
    pub start_channel: u32,
}

fn default_start() -> u32 {
    1
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Content {
    #[serde(default = "default_true", rename = "loop")]
    pub looped: bool,
    #[serde(default)]
    pub playlist: Vec<ContentItem>,
}

impl Default for Content {
    fn default() -> Content {
        Content {
            looped: true,
            playlist: Vec::new(),
        }
    }
}

fn default_true() -> bool {
    true
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PatternKind {
    Solid,
    Chase,
    Rainbow,
    Id,
    /// A channel walk: one channel at a time at full, ten a second (`source::pattern`).
    Walk,
}

/// One playlist entry: either `fseq: PATH` or `pattern: KIND` (with `seconds`, `color`).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ContentItem {
    #[serde(default)]
    pub fseq: Option<PathBuf>,
    #[serde(default)]
    pub pattern: Option<PatternKind>,
    /// How long a pattern plays. An fseq plays for its own length.
    #[serde(default)]
    pub seconds: Option<f64>,
    /// `#rrggbb`, for `solid` and `chase`.
    #[serde(default)]
    pub color: Option<String>,
}

/// A playlist entry after validation.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    Fseq(PathBuf),
    Pattern(PatternItem),
}

/// A test pattern as a playlist item: one type from the config through the engine to the
/// playlist's timing (`engine::frame_loop::ItemSource`, `engine::playlist::Entry`), each of
/// which adds only what its stage knows about a sequence.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PatternItem {
    pub kind: PatternKind,
    pub color: [u8; 3],
    pub seconds: f64,
}

/// A show config with every reference resolved: profiles loaded, paths absolute.
#[derive(Debug, Clone)]
pub struct Show {
    pub config: ShowConfig,
    pub outputs: Vec<ResolvedOutput>,
    pub playlist: Vec<Item>,
    /// `playlists:`, resolved like `playlist`.
    pub playlists: BTreeMap<String, Vec<Item>>,
    /// `schedule:`, checked: every entry's playlist is in `playlists`.
    pub schedule: Option<Schedule>,
    /// `tx_queue_parent`, parsed (`root` when not given).
    pub tx_queue_parent: Parent,
    /// `sync:`, resolved; None for a standalone unit.
    pub sync: Option<SyncSettings>,
    pub source: PathBuf,
}

#[derive(Debug, Clone)]
pub struct ResolvedOutput {
    pub name: String,
    pub profile: DeviceProfile,
    pub destination: SocketAddr,
    /// 0-based first channel in the sequence.
    pub start: usize,
}

pub fn parse_color(s: &str) -> Option<[u8; 3]> {
    let hex = s.strip_prefix('#')?;
    if hex.len() != 6 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let v = u32::from_str_radix(hex, 16).ok()?;
    Some([(v >> 16) as u8, (v >> 8) as u8, v as u8])
}

/// What a pushed show (one that came over the network into the unit's store) may read:
/// its own files, the names in its `manifest.json`. Named profiles come from the show's
/// own `profiles/NAME.yaml` when it holds one, else the image's profile directory, else
/// the built-ins. Nothing else: no `profiles_dir`, no absolute or `..` path, no file the
/// show does not hold (docs/show-store.md, "A pushed show is closed").
#[derive(Debug, Clone, Default)]
pub struct Closed {
    pub files: std::collections::BTreeSet<String>,
}

/// The image's named profiles.
pub const IMAGE_PROFILES: &str = "/usr/share/pfx/profiles";

impl ShowConfig {
    pub fn load(path: &Path) -> Result<Show, ConfigError> {
        Self::from_str(&super::yaml::read_text(path)?, path)
    }

    /// Loads `path` as a pushed show: it must be the `show.yaml` of a show in a store
    /// (`<root>/shows/<id>/`, its manifest beside it), and is held to [`Closed`].
    pub fn load_pushed(path: &Path) -> Result<Show, ConfigError> {
        let dir = path.parent().unwrap_or(Path::new("."));
        let dir = if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        };
        if path.file_name() != Some(std::ffi::OsStr::new("show.yaml")) {
            return Err(ConfigError::invalid(
                path,
                "a pushed show is checked as the show.yaml of its directory in the store (shows/<id>/show.yaml)",
            ));
        }
        let canon = std::fs::canonicalize(dir).map_err(|error| ConfigError::Read {
            path: dir.to_path_buf(),
            error,
        })?;
        let m = pfx_store::read_manifest(&canon).map_err(|e| {
            ConfigError::invalid(
                path,
                format!(
                    "not a show of a store ({e}); a pushed show is checked where the store made it, shows/<id>/show.yaml beside its manifest.json"
                ),
            )
        })?;
        let closed = Closed {
            files: m.files.into_keys().collect(),
        };
        let text = super::yaml::read_text(path)?;
        let config: ShowConfig = super::from_yaml_str(&text, path)?;
        config
            .check_closed(&closed)
            .map_err(|m| ConfigError::invalid(path, m).located(&text, path))?;
        config
            .resolve_in(path, Some(&closed))
            .map_err(|e| e.located(&text, path))
    }

    /// The paths of a pushed show, checked against what it holds (see [`Closed`]). Pure.
    pub fn check_closed(&self, c: &Closed) -> Result<(), String> {
        const WHY: &str = "a pushed show reads only its own files (put the file in the show directory and name it relative to show.yaml) and the image's named profiles";
        if let Some(d) = &self.profiles_dir {
            return Err(format!(
                "profiles_dir: {} is refused in a pushed show; name an image profile (`profile: gen3-bigpacket`) or put the profile file in the show (`profile: mine.yaml`)",
                d.display()
            ));
        }
        let own = |p: &Path| -> Result<(), String> {
            let s = p
                .to_str()
                .ok_or_else(|| format!("{} is not UTF-8", p.display()))?;
            pfx_store::check_name(s).map_err(|why| format!("`{s}` {why}; {WHY}"))?;
            if c.files.contains(s) {
                Ok(())
            } else {
                Err(format!("`{s}` is not a file of this show; {WHY}"))
            }
        };
        for (i, o) in self.outputs.iter().enumerate() {
            if is_profile_path(&o.profile) {
                own(Path::new(&o.profile)).map_err(|m| format!("outputs[{i}].profile: {m}"))?;
            }
        }
        let items = |list: &[ContentItem], key: &str| -> Result<(), String> {
            for (i, it) in list.iter().enumerate() {
                if let Some(p) = &it.fseq {
                    own(p).map_err(|m| format!("{key}[{i}].fseq: {m}"))?;
                }
            }
            Ok(())
        };
        items(&self.content.playlist, "content.playlist")?;
        for (name, list) in &self.playlists {
            items(list, &format!("playlists.{name}"))?;
        }
        if let Some(d) = self.sync.as_ref().and_then(|s| s.sequences.as_ref()) {
            let s = d
                .to_str()
                .ok_or_else(|| format!("sync.sequences: {} is not UTF-8", d.display()))?;
            pfx_store::check_name(s).map_err(|why| {
                format!("sync.sequences: `{s}` {why}; in a pushed show it is a directory of the show's own files (leave it out for the show's directory)")
            })?;
            let prefix = format!("{s}/");
            if !c.files.iter().any(|f| f.starts_with(&prefix)) {
                return Err(format!(
                    "sync.sequences: `{s}` holds no file of this show; in a pushed show it is a directory of the show's own files (leave it out for the show's directory)"
                ));
            }
        }
        Ok(())
    }

    pub fn from_str(text: &str, origin: &Path) -> Result<Show, ConfigError> {
        let config: ShowConfig = super::from_yaml_str(text, origin)?;
        config.resolve(origin).map_err(|e| e.located(text, origin))
    }

    /// Checks values and loads what the config refers to. `origin` is the config file's
    /// path; relative paths are taken from its directory.
    pub fn resolve(self, origin: &Path) -> Result<Show, ConfigError> {
        self.resolve_in(origin, None)
    }

    /// [`ShowConfig::resolve`]; `closed`: a pushed show's, whose named profiles are
    /// looked up only where [`Closed`] says.
    pub fn resolve_in(self, origin: &Path, closed: Option<&Closed>) -> Result<Show, ConfigError> {
        let bad = |m: String| Err(ConfigError::invalid(origin, m));
        if let Err(m) = self.check_values() {
            return bad(m);
        }
        let tx_queue_parent = match self.tx_queue_parent.as_deref().map(Parent::parse) {
            None => Parent::Root,
            Some(Ok(p)) => p,
            Some(Err(e)) => return bad(format!("tx_queue_parent: {e}")),
        };
        let base = origin.parent().unwrap_or(Path::new("."));
        let outputs = self.resolve_outputs(base, origin, closed)?;
        let playlist = resolve_items(&self.content.playlist, "content.playlist", base, origin)?;
        let mut playlists = BTreeMap::new();
        for (name, items) in &self.playlists {
            let key = format!("playlists.{name}");
            if items.is_empty() {
                return bad(format!("{key}: empty; add an `fseq:` or `pattern:` entry"));
            }
            playlists.insert(name.clone(), resolve_items(items, &key, base, origin)?);
        }
        let schedule = match &self.schedule {
            None => None,
            Some(c) => {
                Some(resolve_schedule(c, &playlists).map_err(|m| ConfigError::invalid(origin, m))?)
            }
        };
        let sync = self.sync_settings(base);
        if let Some(s) = &sync
            && s.role == SyncRole::Remote
            && !s.sequences.is_dir()
        {
            return bad(format!(
                "sync.sequences: {} is not a directory; a remote looks up the master's sequences there",
                s.sequences.display()
            ));
        }
        Ok(Show {
            config: self,
            outputs,
            playlist,
            playlists,
            schedule,
            tx_queue_parent,
            sync,
            source: origin.to_path_buf(),
        })
    }

    /// The config's own values and how its parts fit together, before anything it names
    /// is loaded: why not, in the config's words.
    fn check_values(&self) -> Result<(), String> {
        if !(1..=240).contains(&self.fps) {
            return Err(format!("fps: {} is outside 1..=240", self.fps));
        }
        if !(0.0..=1.0).contains(&self.brightness) {
            return Err(format!(
                "brightness: {} is outside 0.0..=1.0",
                self.brightness
            ));
        }
        let cap = self.control.brightness_max;
        if !(cap.is_finite() && (0.0..=pfx_api::control::MAX_FACTOR as f32).contains(&cap)) {
            return Err(format!(
                "control.brightness_max: {cap} is outside 0.0..=4.0 (a multiplier on the show's brightness)"
            ));
        }
        if self.interface.is_empty() {
            return Err("interface: empty; name the show interface, e.g. eth0".into());
        }
        if self.outputs.is_empty() {
            return Err("outputs: empty; a show needs at least one pole".into());
        }
        self.check_content()?;
        if !(1..=600).contains(&self.profile_window_s) {
            return Err(format!(
                "profile_window_s: {} is outside 1..=600",
                self.profile_window_s
            ));
        }
        if let Some(f) = &self.fpp_connect {
            f.check()?;
        }
        Ok(())
    }

    /// What plays: the content, the schedule and its playlists, and a sync remote's
    /// part, in the combinations that make sense.
    fn check_content(&self) -> Result<(), String> {
        if self.schedule.is_none() && !self.playlists.is_empty() {
            return Err(
                "playlists: given but there is no `schedule:` to play them; play `content.playlist`, or add a schedule".into(),
            );
        }
        if self.schedule.is_some() && !self.content.playlist.is_empty() {
            return Err("content: with a `schedule:`, put what plays under `playlists:` and name them in the entries".into());
        }
        let role = self.sync.as_ref().map_or(SyncRole::Standalone, |s| s.role);
        if role == SyncRole::Remote && self.schedule.is_some() {
            return Err("schedule: a sync remote plays what its master plays; give the schedule to the master (or make this unit `role: master`)".into());
        }
        if self.schedule.is_none() && self.content.playlist.is_empty() && role != SyncRole::Remote {
            return Err("content.playlist: empty; add an `fseq:` or `pattern:` entry".into());
        }
        Ok(())
    }

    /// Each output with its profile loaded (from `base`, `profiles_dir` or, for a pushed
    /// show, where `closed` says).
    fn resolve_outputs(
        &self,
        base: &Path,
        origin: &Path,
        closed: Option<&Closed>,
    ) -> Result<Vec<ResolvedOutput>, ConfigError> {
        let bad = |m: String| Err(ConfigError::invalid(origin, m));
        let profiles_dir = self.profiles_dir.as_ref().map(|d| base.join(d));
        let mut outputs = Vec::with_capacity(self.outputs.len());
        for (i, o) in self.outputs.iter().enumerate() {
            if outputs.iter().any(|r: &ResolvedOutput| r.name == o.name) {
                return bad(format!("outputs[{i}].name: `{}` is used twice", o.name));
            }
            if o.start_channel == 0 {
                return bad(format!(
                    "outputs[{i}].start_channel: channels are 1-based, as in xLights"
                ));
            }
            let profile = load_profile(&o.profile, base, profiles_dir.as_deref(), closed)
                .map_err(|e| ConfigError::invalid(origin, format!("outputs[{i}].profile: {e}")))?;
            let destination = o.destination.unwrap_or(profile.destination);
            outputs.push(ResolvedOutput {
                name: o.name.clone(),
                destination,
                start: o.start_channel as usize - 1,
                profile,
            });
        }
        Ok(outputs)
    }

    /// The MultiSync settings of a master or remote (none standalone), paths taken from
    /// `base`.
    fn sync_settings(&self, base: &Path) -> Option<SyncSettings> {
        self.sync.as_ref().and_then(|c| match c.role {
            SyncRole::Standalone => None,
            role => Some(SyncSettings {
                role,
                interface: c
                    .interface
                    .clone()
                    .unwrap_or_else(|| self.interface.clone()),
                port: c.port,
                transport: c.transport,
                remotes: c.remotes.clone(),
                sequences: c
                    .sequences
                    .as_ref()
                    .map_or_else(|| base.to_path_buf(), |d| base.join(d)),
                offset_ms: c.offset_ms,
                lost_after_s: c.master_lost.after_s,
                lost_then: c.master_lost.then,
            }),
        })
    }
}

/// One playlist's entries, checked; `key` names it in errors (`content.playlist`).
fn resolve_items(
    list: &[ContentItem],
    key: &str,
    base: &Path,
    origin: &Path,
) -> Result<Vec<Item>, ConfigError> {
    let bad = |m: String| Err(ConfigError::invalid(origin, m));
    let mut playlist = Vec::with_capacity(list.len());
    for (i, it) in list.iter().enumerate() {
        let item = match (&it.fseq, it.pattern) {
            (Some(p), None) => {
                if it.seconds.is_some() || it.color.is_some() {
                    return bad(format!(
                        "{key}[{i}]: `seconds`/`color` apply to patterns; an fseq plays for its own length"
                    ));
                }
                let p = base.join(p);
                if !p.is_file() {
                    return bad(format!("{key}[{i}].fseq: {} does not exist", p.display()));
                }
                Item::Fseq(p)
            }
            (None, Some(kind)) => {
                let seconds = it.seconds.unwrap_or(10.0);
                if !(seconds > 0.0 && seconds.is_finite()) {
                    return bad(format!("{key}[{i}].seconds: must be a positive number"));
                }
                let color = match &it.color {
                    None => [255, 255, 255],
                    Some(c) => match parse_color(c) {
                        Some(c) => c,
                        None => {
                            return bad(format!("{key}[{i}].color: `{c}` is not #rrggbb"));
                        }
                    },
                };
                Item::Pattern(PatternItem {
                    kind,
                    seconds,
                    color,
                })
            }
            _ => {
                return bad(format!(
                    "{key}[{i}]: give exactly one of `fseq:` or `pattern:`"
                ));
            }
        };
        playlist.push(item);
    }
    Ok(playlist)
}

/// `schedule:`, checked against the playlists it names.
fn resolve_schedule(
    c: &ScheduleConfig,
    playlists: &BTreeMap<String, Vec<Item>>,
) -> Result<Schedule, String> {
    let tz = jiff::tz::TimeZone::get(&c.timezone).map_err(|_| {
        format!(
            "schedule.timezone: `{}` is not a known time zone; give an IANA name such as Europe/Berlin or America/New_York",
            c.timezone
        )
    })?;
    let place = match (c.latitude, c.longitude) {
        (None, None) => None,
        (Some(lat), Some(lon)) => Some(schedule::Place::new(lat, lon).ok_or_else(|| {
            format!("schedule: latitude {lat} / longitude {lon} out of range (−90..90, −180..180)")
        })?),
        _ => return Err("schedule: give both `latitude` and `longitude`, or neither".into()),
    };
    let known = |name: &str, key: &str| {
        if playlists.contains_key(name) {
            Ok(())
        } else {
            Err(format!(
                "{key}: no playlist named `{name}` under `playlists:` (there are: {})",
                playlists.keys().cloned().collect::<Vec<_>>().join(", ")
            ))
        }
    };
    let idle = match c.idle.as_deref() {
        None | Some("black") => schedule::Idle::Black,
        Some(name) => {
            known(name, "schedule.idle")?;
            schedule::Idle::Playlist(name.to_string())
        }
    };
    if c.entries.is_empty() {
        return Err(
            "schedule.entries: empty; add an entry with `playlist`, `start` and `end`".into(),
        );
    }
    let mut entries = Vec::with_capacity(c.entries.len());
    for (i, e) in c.entries.iter().enumerate() {
        let key = format!("schedule.entries[{i}]");
        known(&e.playlist, &format!("{key}.playlist"))?;
        let days = match &e.days {
            None => Ok(schedule::Days::EVERY_DAY),
            Some(DaysConfig::One(w)) => schedule::spec::parse_days(std::slice::from_ref(w)),
            Some(DaysConfig::Many(ws)) => schedule::spec::parse_days(ws),
        }
        .map_err(|m| format!("{key}.days: {m}"))?;
        let start = schedule::spec::parse_at(&e.start).map_err(|m| format!("{key}.start: {m}"))?;
        let end = schedule::spec::parse_at(&e.end).map_err(|m| format!("{key}.end: {m}"))?;
        let sun = |a: schedule::At| matches!(a, schedule::At::Sun { .. });
        if place.is_none() && (sun(start) || sun(end)) {
            return Err(format!(
                "{key}: a sun time needs the unit's place; add `latitude` and `longitude` to `schedule:`"
            ));
        }
        let mut dates = Vec::with_capacity(e.dates.len());
        for (j, r) in e.dates.iter().enumerate() {
            let from = schedule::spec::parse_date(&r.from)
                .map_err(|m| format!("{key}.dates[{j}].from: {m}"))?;
            let to = schedule::spec::parse_date(&r.to)
                .map_err(|m| format!("{key}.dates[{j}].to: {m}"))?;
            if to < from {
                return Err(format!(
                    "{key}.dates[{j}]: `to` ({to}) is before `from` ({from})"
                ));
            }
            dates.push(schedule::DateRange { from, to });
        }
        entries.push(schedule::Entry {
            name: e
                .name
                .clone()
                .unwrap_or_else(|| format!("{}#{i}", e.playlist)),
            playlist: e.playlist.clone(),
            days,
            start,
            end,
            dates,
            repeat: e.repeat,
            stop: match e.stop {
                StopConfig::Graceful => schedule::Stop::Graceful,
                StopConfig::Hard => schedule::Stop::Hard,
            },
        });
    }
    Ok(Schedule {
        tz,
        place,
        idle,
        entries,
    })
}

/// A profile is a path (contains `/` or ends in `.yaml`) or a name looked up in the
/// profiles directories.
/// The file `load_profile` would read for `name` (None: a built-in profile, or none).
/// Used to write a config elsewhere that reads the same profiles.
pub fn profile_file(name: &str, base: &Path, dir: Option<&Path>) -> Option<PathBuf> {
    if name.contains('/') || name.ends_with(".yaml") {
        return Some(base.join(name));
    }
    let defaults = [
        base.join("profiles"),
        base.join("../profiles"),
        PathBuf::from("/usr/share/pfx/profiles"),
    ];
    let dirs: Vec<&Path> = match dir {
        Some(d) => vec![d],
        None => defaults.iter().map(PathBuf::as_path).collect(),
    };
    dirs.into_iter()
        .map(|d| d.join(format!("{name}.yaml")))
        .find(|p| p.is_file())
}

/// Whether `profile:` names a file (else a profile by name).
fn is_profile_path(name: &str) -> bool {
    name.contains('/') || name.ends_with(".yaml")
}

fn load_profile(
    name: &str,
    base: &Path,
    dir: Option<&Path>,
    closed: Option<&Closed>,
) -> Result<DeviceProfile, ConfigError> {
    if is_profile_path(name) {
        return DeviceProfile::load(&base.join(name));
    }
    let mut tried = Vec::new();
    let defaults = [
        base.join("profiles"),
        base.join("../profiles"),
        PathBuf::from(IMAGE_PROFILES),
    ];
    // A pushed show: its own profiles/NAME.yaml if it holds one, then the image's; never
    // beside the show's directory (that is the store, not the show).
    let own = closed.and_then(|c| {
        c.files
            .contains(&format!("profiles/{name}.yaml"))
            .then(|| base.join("profiles"))
    });
    let dirs: Vec<&Path> = match (dir, closed) {
        (_, Some(_)) => own
            .iter()
            .map(PathBuf::as_path)
            .chain([Path::new(IMAGE_PROFILES)])
            .collect(),
        (Some(d), None) => vec![d],
        (None, None) => defaults.iter().map(PathBuf::as_path).collect(),
    };
    for d in dirs {
        let p = d.join(format!("{name}.yaml"));
        if p.is_file() {
            return DeviceProfile::load(&p);
        }
        tried.push(p.display().to_string());
    }
    if let Some(text) = super::builtin::builtin_profile(name) {
        return DeviceProfile::from_str(text, Path::new(&format!("<built-in {name}>")));
    }
    Err(ConfigError::invalid(
        Path::new(name),
        format!("no profile named `{name}` (looked in {})", tried.join(", ")),
    ))
}
