//! The show config: which interface, which poles, what to play (see `docs/show-config.md`).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{ConfigError, DeviceProfile, from_yaml_file};
use crate::nic::txqueue::Parent;

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
    pub content: Content,
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
    pub playlist: Vec<ContentItem>,
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
    Pattern {
        kind: PatternKind,
        seconds: f64,
        color: [u8; 3],
    },
}

/// A show config with every reference resolved: profiles loaded, paths absolute.
#[derive(Debug, Clone)]
pub struct Show {
    pub config: ShowConfig,
    pub outputs: Vec<ResolvedOutput>,
    pub playlist: Vec<Item>,
    /// `tx_queue_parent`, parsed (`root` when not given).
    pub tx_queue_parent: Parent,
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

impl ShowConfig {
    pub fn load(path: &Path) -> Result<Show, ConfigError> {
        let config: ShowConfig = from_yaml_file(path)?;
        config.resolve(path)
    }

    pub fn from_str(text: &str, origin: &Path) -> Result<Show, ConfigError> {
        let config: ShowConfig = super::from_yaml_str(text, origin)?;
        config.resolve(origin)
    }

    /// Checks values and loads what the config refers to. `origin` is the config file's
    /// path; relative paths are taken from its directory.
    pub fn resolve(self, origin: &Path) -> Result<Show, ConfigError> {
        let bad = |m: String| Err(ConfigError::invalid(origin, m));
        if !(1..=240).contains(&self.fps) {
            return bad(format!("fps: {} is outside 1..=240", self.fps));
        }
        if !(0.0..=1.0).contains(&self.brightness) {
            return bad(format!(
                "brightness: {} is outside 0.0..=1.0",
                self.brightness
            ));
        }
        if self.interface.is_empty() {
            return bad("interface: empty; name the show interface, e.g. eth0".into());
        }
        if self.outputs.is_empty() {
            return bad("outputs: empty; a show needs at least one pole".into());
        }
        if self.content.playlist.is_empty() {
            return bad("content.playlist: empty; add an `fseq:` or `pattern:` entry".into());
        }
        if !(1..=600).contains(&self.profile_window_s) {
            return bad(format!(
                "profile_window_s: {} is outside 1..=600",
                self.profile_window_s
            ));
        }
        let tx_queue_parent = match self.tx_queue_parent.as_deref().map(Parent::parse) {
            None => Parent::Root,
            Some(Ok(p)) => p,
            Some(Err(e)) => return bad(format!("tx_queue_parent: {e}")),
        };
        let base = origin.parent().unwrap_or(Path::new("."));
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
            let profile = load_profile(&o.profile, base, profiles_dir.as_deref())
                .map_err(|e| ConfigError::invalid(origin, format!("outputs[{i}].profile: {e}")))?;
            let destination = o.destination.unwrap_or(profile.destination);
            outputs.push(ResolvedOutput {
                name: o.name.clone(),
                destination,
                start: o.start_channel as usize - 1,
                profile,
            });
        }
        let mut playlist = Vec::with_capacity(self.content.playlist.len());
        for (i, it) in self.content.playlist.iter().enumerate() {
            let item = match (&it.fseq, it.pattern) {
                (Some(p), None) => {
                    if it.seconds.is_some() || it.color.is_some() {
                        return bad(format!(
                            "content.playlist[{i}]: `seconds`/`color` apply to patterns; an fseq plays for its own length"
                        ));
                    }
                    let p = base.join(p);
                    if !p.is_file() {
                        return bad(format!(
                            "content.playlist[{i}].fseq: {} does not exist",
                            p.display()
                        ));
                    }
                    Item::Fseq(p)
                }
                (None, Some(kind)) => {
                    let seconds = it.seconds.unwrap_or(10.0);
                    if !(seconds > 0.0 && seconds.is_finite()) {
                        return bad(format!(
                            "content.playlist[{i}].seconds: must be a positive number"
                        ));
                    }
                    let color = match &it.color {
                        None => [255, 255, 255],
                        Some(c) => match parse_color(c) {
                            Some(c) => c,
                            None => {
                                return bad(format!(
                                    "content.playlist[{i}].color: `{c}` is not #rrggbb"
                                ));
                            }
                        },
                    };
                    Item::Pattern {
                        kind,
                        seconds,
                        color,
                    }
                }
                _ => {
                    return bad(format!(
                        "content.playlist[{i}]: give exactly one of `fseq:` or `pattern:`"
                    ));
                }
            };
            playlist.push(item);
        }
        Ok(Show {
            config: self,
            outputs,
            playlist,
            tx_queue_parent,
            source: origin.to_path_buf(),
        })
    }
}

/// A profile is a path (contains `/` or ends in `.yaml`) or a name looked up in the
/// profiles directories.
fn load_profile(name: &str, base: &Path, dir: Option<&Path>) -> Result<DeviceProfile, ConfigError> {
    if name.contains('/') || name.ends_with(".yaml") {
        return DeviceProfile::load(&base.join(name));
    }
    let mut tried = Vec::new();
    let defaults = [
        base.join("profiles"),
        base.join("../profiles"),
        PathBuf::from("/usr/share/pfx/profiles"),
    ];
    let dirs: Vec<&Path> = match dir {
        Some(d) => vec![d],
        None => defaults.iter().map(PathBuf::as_path).collect(),
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
