//! `pfx-agent dispatch`: the fleet account's forced command. The image puts the fleet's
//! keys in the `pfx` account's `authorized_keys` as
//! `restrict,command="/usr/bin/sudo -n /usr/bin/pfx-agent dispatch" KEY`, so whatever a
//! key holder asks for arrives here in `SSH_ORIGINAL_COMMAND`, and only the agent's own
//! verbs, with checked arguments, are run. Everything that picks what the agent touches
//! (interface, lower root, player, NIC backend) comes from a root-owned config file on the
//! unit, never from the remote command line. See docs/fleet.md, "Security".

use crate::agent::{self, AgentOpts};
use crate::nic::{MockBackend, NicBackend, PlayerBackend};
use serde::Deserialize;
use std::ffi::OsString;
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// The unit's agent config (root-owned; the image writes it).
pub const DEFAULT_CONFIG: &str = "/etc/pfx/agent.yaml";
/// Exit status of a refused command (distinct from the agent's 0/1/2 and 128+N).
pub const REFUSED: u8 = 126;
/// Whether this build may pick the test-only parts (the mock NIC backend, the test hooks).
/// Only debug builds can: the image builds the agent with `--release`, so no image can.
pub const TEST_BACKENDS: bool = cfg!(debug_assertions);

/// Present in the binary only when it was built with the test backends; `pfx-image verify`
/// refuses an image whose agent contains it.
#[cfg(debug_assertions)]
pub static TEST_BUILD_MARKER: &str = "PFX-AGENT-TEST-BACKENDS-ENABLED";

/// What the verbs accept, for the refusal message.
pub const USAGE: &str = "allowed: `apply pause-off [--json]`, `status [--json] [--rate-interval-ms N]` (N 10..=10000), \
     `show missing`, `show put HASH SIZE OFFSET LEN`, `show activate`, `show status`, \
     `update put HASH SIZE OFFSET LEN`, `update install HASH [--force]`, `update switch now|idle|at HH:MM`, `update status`, \
     `control blackout|stop|resume [--by NAME]`, `control play PLAYLIST [--by NAME]`, `control brightness F [--by NAME]`, \
     `control test id|walk|red|green|blue|white [--output NAME] [--by NAME]`; \
     everything else (interface, lower root, player) comes from the unit's root-owned agent config";

/// `pfx-agent dispatch --help`: every verb the fleet key can run, what each can and
/// cannot reach (docs/fleet.md, "Security", says the same at more length).
pub const VERBS_HELP: &str = "\
The fleet account's forced command (authorized_keys `command=`). Runs one verb from \
SSH_ORIGINAL_COMMAND, split on white space (no shell), with every setting from the \
root-owned --config (/etc/pfx/agent.yaml; refused unless it and every directory above \
it are root's and not writable by group or others). Anything else is refused (exit 126) \
and logged to syslog (auth, tag pfx-agent) with the client's address.

Verbs the fleet key can run:

  apply pause-off [--json]
      Ethernet PAUSE off on the config's interface through the config's player, and \
the file LOWER/etc/pfx/nic.d/IFACE.yaml on the read-only lower root (inside a \
remount-rw window the agent closes on every exit). Writes nothing else.

  status [--json] [--rate-interval-ms N]   (N 10..=10000)
      Reads PAUSE state and counters, the oneshot, the persisted file, the player's \
/profile, the image version and the unit id. Changes nothing.

  show missing                 (stdin: JSON [{hash, size}], at most 4 MiB)
      Which of those files the show store lacks, what is staged of each, the free \
bytes above the reserve. Changes nothing but the store's own checks (a stored file \
that does not match its name is quarantined).

  show put HASH SIZE OFFSET LEN   (stdin: LEN bytes; SIZE <= 64 GiB, LEN <= 256 MiB)
      Appends to staging/HASH.part in the store only, one writer per file (a second \
is refused), only at OFFSET = what is staged, never below the store's reserve; the file \
moves into store/sha256/HASH only when the whole file hashes to HASH. Cannot write any \
other file or replace a stored one.

  show activate                (stdin: JSON {name, show_yaml, files: {name: hash}})
      Makes a show of files already stored, checks it with the unit's own \
`pfx-player run --check --pushed` (the show may read only its own files and the \
image's named profiles: no profiles_dir, absolute or .. paths), re-reads every file \
against its hash, switches the store's active show, signals the player, and removes \
old shows (the active one, the one before it and recent ones are kept). This decides \
what the unit plays: its outputs, their destinations, the show interface, the player's \
HTTP address and whether FPP Connect listens (with the show's password hash).

  show status
      Reads the store's active show and what the player says it plays. Changes nothing.

  control blackout|stop|resume [--by NAME]
  control play PLAYLIST [--by NAME]
  control brightness F [--by NAME]        (F 0..=4, at most the show's control.brightness_max)
  control test id|walk|red|green|blue|white [--output NAME] [--by NAME]
      A live action on the player now, through its local control socket (root only; \
never the network or HTTP), taken at a frame boundary: every output black (kept on the \
data partition, so a restarted unit stays black), the item playing ended gracefully, a \
playlist of the active show played now, the show's brightness scaled, a test pattern on \
one output or all, or back to the schedule. The player checks the playlist, output and \
cap against its show and refuses anything else naming the choices. NAME (--by) is the \
operator's name, for the unit's log and /profile. Cannot change the show, its outputs \
or their destinations, or any file but the held blackout.

  (Verbs other teams add, `update ...` and `control ...`, are listed here with what \
they reach when they are added.)

The key cannot: run a shell or any other program, pass the agent options (player, \
interface, lower root, store root, NIC backend are the config's), get a pty, forward \
anything, copy files (scp, sftp), or log in as another account.";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    Player,
    Mock,
}

fn d_iface() -> String {
    "eth0".into()
}
fn d_lower() -> PathBuf {
    "/media/root-ro".into()
}
fn d_player() -> PathBuf {
    "/usr/bin/pfx-player".into()
}
fn d_image_version() -> PathBuf {
    "/etc/pfx/image-version".into()
}
fn d_profile_url() -> String {
    "http://127.0.0.1:8080/profile".into()
}
fn d_true() -> bool {
    true
}
fn d_backend() -> Backend {
    Backend::Player
}
fn d_store_root() -> PathBuf {
    pfx_store::DEFAULT_ROOT.into()
}
fn d_store_rate() -> u64 {
    8 << 20
}
fn d_confirm() -> u64 {
    20
}
fn d_rauc() -> PathBuf {
    "/usr/bin/rauc".into()
}
fn d_slot_carry() -> PathBuf {
    "/usr/lib/pfx/pfx-slot-carry".into()
}
fn d_force_file() -> PathBuf {
    "/run/pfx/update-force".into()
}
fn d_show_config() -> PathBuf {
    "/etc/pfx/show.yaml".into()
}
fn d_min_idle() -> u64 {
    600
}
fn d_health_ok() -> u64 {
    30
}
fn d_health_deadline() -> u64 {
    300
}
fn d_health_ssh() -> String {
    "127.0.0.1:22".into()
}
fn d_control_socket() -> PathBuf {
    "/run/pfx-player/control.sock".into()
}

/// `/etc/pfx/agent.yaml`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentConfig {
    #[serde(default = "d_iface")]
    pub iface: String,
    #[serde(default = "d_lower")]
    pub lower: PathBuf,
    #[serde(default = "d_player")]
    pub player: PathBuf,
    /// Default: /etc/pfx/unit-id, else the host name.
    #[serde(default)]
    pub unit_id: Option<String>,
    #[serde(default = "d_image_version")]
    pub image_version_file: PathBuf,
    #[serde(default = "d_profile_url")]
    pub profile_url: String,
    /// Ask systemd over D-Bus for the oneshot's result.
    #[serde(default = "d_true")]
    pub systemd: bool,
    /// Also append one line per decision here (syslog always gets it).
    #[serde(default)]
    pub audit_log: Option<PathBuf>,
    /// The show store (the data partition's mount point).
    #[serde(default = "d_store_root")]
    pub store_root: PathBuf,
    /// The most a show transfer writes per second (staging and hashing), so the playing
    /// show keeps the SD card. Default 8 MiB/s.
    #[serde(default = "d_store_rate")]
    pub store_rate_bytes_per_s: u64,
    /// Bytes the store leaves free on the partition (default: 5 %, at least 64 MiB, at most 1 GiB).
    #[serde(default)]
    pub store_reserve_bytes: Option<u64>,
    /// SIGHUP the player whose pid is in this file after a switch; default: systemd's
    /// pfx-player.service.
    #[serde(default)]
    pub player_pidfile: Option<PathBuf>,
    /// How long `show activate` waits for the player to say it plays the new show.
    #[serde(default = "d_confirm")]
    pub show_confirm_timeout_s: u64,
    /// TEST BUILDS ONLY: `mock` (file-backed NIC in `mock_nic_dir`).
    #[serde(default = "d_backend")]
    pub nic_backend: Backend,
    #[serde(default)]
    pub mock_nic_dir: Option<PathBuf>,
    /// TEST BUILDS ONLY: hold half-way through the write, inside the rw window.
    #[serde(default)]
    pub test_hold_in_write_ms: Option<u64>,
    #[serde(default)]
    pub test_hold_pidfile: Option<PathBuf>,
    /// TEST BUILDS ONLY: wait this long before running the verb (a slow unit).
    #[serde(default)]
    pub test_delay_ms: Option<u64>,
    // A/B updates (the `update` verbs and `pfx-agent update health-commit`; docs/update.md).
    /// The RAUC binary.
    #[serde(default = "d_rauc")]
    pub rauc: PathBuf,
    /// Carries the unit's identity into the other slot before a switch (run as `PATH switch`).
    #[serde(default = "d_slot_carry")]
    pub slot_carry: PathBuf,
    /// Written for one `update install --force` (the install-check handler reads it).
    #[serde(default = "d_force_file")]
    pub update_force_file: PathBuf,
    /// The config show, whose schedule decides the idle window when the store has no show.
    #[serde(default = "d_show_config")]
    pub show_config: PathBuf,
    /// The shortest idle window `update switch idle` uses, in seconds.
    #[serde(default = "d_min_idle")]
    pub update_min_idle_s: u64,
    /// The health commit: how long /health must stay ok, and the deadline for it all.
    #[serde(default = "d_health_ok")]
    pub health_ok_s: u64,
    #[serde(default = "d_health_deadline")]
    pub health_deadline_s: u64,
    /// Where sshd must answer with its banner.
    #[serde(default = "d_health_ssh")]
    pub health_ssh_addr: String,
    /// TEST BUILDS ONLY: run this instead of `systemctl reboot`.
    #[serde(default)]
    pub test_reboot_command: Option<PathBuf>,
    /// TEST BUILDS ONLY: read this instead of /proc/cmdline (trial boots).
    #[serde(default)]
    pub test_cmdline_file: Option<PathBuf>,
    /// The player's live control socket (`control ...` verbs).
    #[serde(default = "d_control_socket")]
    pub control_socket: PathBuf,
}

impl AgentConfig {
    /// Parses and checks the file's text. `test_backends`: whether this build may use the
    /// test-only keys.
    pub fn parse(text: &str, test_backends: bool) -> Result<AgentConfig, String> {
        let c: AgentConfig = serde_saphyr::from_str(text).map_err(|e| e.to_string())?;
        let iface_ok = !c.iface.is_empty()
            && c.iface.len() <= 15
            && c.iface
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
        if !iface_ok {
            return Err(format!("iface {:?} is not an interface name", c.iface));
        }
        for (k, p) in [
            ("lower", &c.lower),
            ("player", &c.player),
            ("image_version_file", &c.image_version_file),
            ("store_root", &c.store_root),
            ("rauc", &c.rauc),
            ("slot_carry", &c.slot_carry),
            ("update_force_file", &c.update_force_file),
            ("show_config", &c.show_config),
            ("control_socket", &c.control_socket),
        ]
        .into_iter()
        .chain(c.player_pidfile.iter().map(|p| ("player_pidfile", p)))
        {
            if !p.is_absolute() {
                return Err(format!("{k}: {} must be an absolute path", p.display()));
            }
        }
        let mut test_only = Vec::new();
        if c.nic_backend == Backend::Mock {
            test_only.push("nic_backend: mock");
        }
        if c.mock_nic_dir.is_some() {
            test_only.push("mock_nic_dir");
        }
        if c.test_hold_in_write_ms.is_some() || c.test_hold_pidfile.is_some() {
            test_only.push("test_hold_*");
        }
        if c.test_delay_ms.is_some() {
            test_only.push("test_delay_ms");
        }
        if c.test_reboot_command.is_some() || c.test_cmdline_file.is_some() {
            test_only.push("test_reboot_command, test_cmdline_file");
        }
        if !test_only.is_empty() && !test_backends {
            return Err(format!(
                "{} only work in a test build of pfx-agent (a debug build); this is a release build, as on every image",
                test_only.join(", ")
            ));
        }
        if c.store_rate_bytes_per_s < 64 * 1024 {
            return Err(format!(
                "store_rate_bytes_per_s: {} is below 65536; a show would take hours",
                c.store_rate_bytes_per_s
            ));
        }
        if !(1..=3600).contains(&c.health_ok_s) || c.health_deadline_s < c.health_ok_s {
            return Err(
                "health_ok_s: give 1..=3600 seconds, and health_deadline_s at least as much".into(),
            );
        }
        if c.health_ssh_addr.parse::<std::net::SocketAddr>().is_err() {
            return Err(format!(
                "health_ssh_addr {:?}: give ADDRESS:PORT",
                c.health_ssh_addr
            ));
        }
        if !(1..=600).contains(&c.show_confirm_timeout_s) {
            return Err("show_confirm_timeout_s: give 1..=600 seconds".into());
        }
        if c.nic_backend == Backend::Mock && c.mock_nic_dir.is_none() {
            return Err("nic_backend: mock needs mock_nic_dir".into());
        }
        Ok(c)
    }
}

/// One accepted request.
#[derive(Debug, Clone, PartialEq)]
pub enum Verb {
    ApplyPauseOff {
        json: bool,
    },
    Status {
        json: bool,
        rate_interval_ms: u64,
    },
    ShowMissing,
    ShowPut {
        hash: pfx_store::Hash,
        size: u64,
        offset: u64,
        len: u64,
    },
    ShowActivate,
    ShowStatus,
    Update(crate::updateagent::UpdateVerb),
    /// A live action (`controlagent`), and the operator's name the fleet sent.
    Control {
        action: pfx_api::control::Action,
        by: String,
    },
}

/// The largest file a show may hold, and the most one `show put` carries.
pub const MAX_SHOW_FILE: u64 = 64 << 30;
pub const MAX_PUT: u64 = 256 << 20;

/// Parses `SSH_ORIGINAL_COMMAND`. Pure. Words are split on white space and never given to
/// a shell; every word must be one the verb expects, each flag at most once.
pub fn parse_command(cmd: Option<&str>) -> Result<Verb, String> {
    // ASCII white space only, the same as the word split below: a command with other
    // white space at its ends is refused like one with it between its words.
    let cmd = cmd
        .map(|c| c.trim_matches(|ch: char| ch.is_ascii_whitespace()))
        .unwrap_or("");
    if cmd.is_empty() {
        return Err("no command: this account runs only the agent's verbs (no shell)".into());
    }
    let words: Vec<&str> = cmd.split_ascii_whitespace().collect();
    let flag_once = |seen: &mut bool, w: &str| -> Result<(), String> {
        if std::mem::replace(seen, true) {
            Err(format!("{w} given twice"))
        } else {
            Ok(())
        }
    };
    match words.as_slice() {
        ["apply", "pause-off", rest @ ..] => {
            let mut json = false;
            for w in rest {
                match *w {
                    "--json" => flag_once(&mut json, w)?,
                    _ => return Err(format!("apply pause-off: unexpected {w:?}")),
                }
            }
            Ok(Verb::ApplyPauseOff { json })
        }
        ["status", rest @ ..] => {
            let (mut json, mut rate) = (false, None);
            let mut it = rest.iter();
            while let Some(w) = it.next() {
                match *w {
                    "--json" => flag_once(&mut json, w)?,
                    "--rate-interval-ms" if rate.is_none() => {
                        let n = it
                            .next()
                            .and_then(|v| v.parse::<u64>().ok())
                            .filter(|n| (10..=10_000).contains(n))
                            .ok_or("status: --rate-interval-ms needs a number 10..=10000")?;
                        rate = Some(n);
                    }
                    _ => return Err(format!("status: unexpected {w:?}")),
                }
            }
            Ok(Verb::Status {
                json,
                rate_interval_ms: rate.unwrap_or(1000),
            })
        }
        ["show", "missing"] => Ok(Verb::ShowMissing),
        ["show", "activate"] => Ok(Verb::ShowActivate),
        ["show", "status"] => Ok(Verb::ShowStatus),
        ["show", "put", hash, size, offset, len] => {
            let hash = hash.parse().map_err(|e| format!("show put: {e}"))?;
            let num = |what: &str, w: &str| {
                // Digits only: no sign, no spaces, no hex.
                if w.is_empty() || w.len() > 20 || !w.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(format!("show put: {what} {w:?} is not a number"));
                }
                w.parse::<u64>()
                    .map_err(|_| format!("show put: {what} {w:?} is too large"))
            };
            let (size, offset, len) = (num("SIZE", size)?, num("OFFSET", offset)?, num("LEN", len)?);
            if size > MAX_SHOW_FILE || len > MAX_PUT || offset.checked_add(len).is_none_or(|e| e > size) {
                return Err(format!(
                    "show put: OFFSET {offset} + LEN {len} must lie within SIZE {size} (SIZE at most {MAX_SHOW_FILE}, LEN at most {MAX_PUT})"
                ));
            }
            Ok(Verb::ShowPut {
                hash,
                size,
                offset,
                len,
            })
        }
        ["update", rest @ ..] => crate::updateagent::parse(rest).map(Verb::Update),
        ["control", rest @ ..] => {
            crate::controlagent::parse(rest).map(|(action, by)| Verb::Control { action, by })
        }
        ["show", ..] => Err(
            "show: use `show missing`, `show put HASH SIZE OFFSET LEN`, `show activate` or `show status`".into(),
        ),
        [first, ..] => Err(format!("{first:?} is not an agent verb")),
        [] => Err("no command".into()),
    }
}

/// Whether a file or directory may decide what root runs: owned by root and not writable
/// by group or others (a sticky directory such as /tmp is allowed: only root may rename
/// root's entries in it). Pure.
pub fn trusted(uid: u32, mode: u32, is_dir: bool) -> bool {
    uid == 0 && (mode & 0o022 == 0 || (is_dir && mode & 0o1000 != 0))
}

/// The config file and every directory above it must be [`trusted`].
pub fn check_trusted_path(path: &Path) -> Result<(), String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if !meta.is_file() || !trusted(meta.uid(), meta.mode(), false) {
        return Err(format!(
            "{} must be a regular file owned by root and not writable by group or others (it is uid {}, mode {:o})",
            path.display(),
            meta.uid(),
            meta.mode() & 0o7777
        ));
    }
    let mut dir = path.parent();
    while let Some(d) = dir.filter(|d| !d.as_os_str().is_empty()) {
        let m = std::fs::metadata(d).map_err(|e| format!("{}: {e}", d.display()))?;
        if !trusted(m.uid(), m.mode(), true) {
            return Err(format!(
                "{} (above {}) must be owned by root and not writable by group or others (it is uid {}, mode {:o})",
                d.display(),
                path.display(),
                m.uid(),
                m.mode() & 0o7777
            ));
        }
        dir = d.parent();
    }
    Ok(())
}

/// The root-owned agent config at `config`, checked ([`check_trusted_path`]) and parsed.
pub fn load_config(config: &Path) -> Result<AgentConfig, String> {
    check_trusted_path(config)?;
    let text = std::fs::read_to_string(config).map_err(|e| format!("{}: {e}", config.display()))?;
    AgentConfig::parse(&text, TEST_BACKENDS).map_err(|e| format!("{}: {e}", config.display()))
}

/// How a remote command is shown in logs: escaped, at most 200 characters.
fn shown(cmd: Option<&str>) -> String {
    match cmd {
        None => "(none)".into(),
        Some(c) => {
            let mut s = format!("{:?}", c.chars().take(200).collect::<String>());
            if c.chars().count() > 200 {
                s.push_str("...");
            }
            s
        }
    }
}

/// To syslog (auth facility: the journal on a unit), and to the audit file when configured.
fn log(priority: libc::c_int, audit: Option<&Path>, line: &str) {
    let msg = std::ffi::CString::new(line.replace('\0', " ")).unwrap_or_default();
    // SAFETY: a static NUL-terminated ident and format; `msg` lives across the call.
    unsafe {
        libc::openlog(c"pfx-agent".as_ptr(), libc::LOG_PID, libc::LOG_AUTH);
        libc::syslog(priority, c"%s".as_ptr(), msg.as_ptr());
        libc::closelog();
    }
    if let Some(p) = audit
        && let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(p)
    {
        let _ = writeln!(f, "{} pfx-agent dispatch: {line}", agent::now_ms());
    }
}

/// The unit's id when the config names none: `/etc/pfx/unit-id` (written by the image),
/// else the host name. Shared with `pfx-agent`'s direct verbs so both report the same id.
pub fn default_unit_id() -> String {
    if let Ok(s) = std::fs::read_to_string("/etc/pfx/unit-id") {
        let s = s.trim();
        if !s.is_empty() {
            return s.to_string();
        }
    }
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

/// Who asked, from the environment sshd and sudo leave: the remote command, the client's
/// address and the account sudo was run from.
struct Caller {
    original: Option<String>,
    from: String,
    who: String,
}

impl Caller {
    fn from_env() -> Caller {
        Caller {
            // Invalid UTF-8 becomes U+FFFD here, which no verb matches: refused, and
            // logged readably.
            original: std::env::var_os("SSH_ORIGINAL_COMMAND")
                .map(|s| s.to_string_lossy().into_owned()),
            from: std::env::var("SSH_CLIENT").unwrap_or_else(|_| "local".into()),
            who: std::env::var("SUDO_USER").unwrap_or_else(|_| "?".into()),
        }
    }
}

/// The agent's own command line must be exactly `dispatch [--config PATH]`: an option
/// riding along is refused (and logged) with the status to exit with.
fn check_argv(argv: &[OsString]) -> Result<(), u8> {
    let argv_ok = match argv {
        [d] => d == "dispatch",
        [d, c, _] => d == "dispatch" && c == "--config",
        _ => false,
    };
    if argv_ok {
        return Ok(());
    }
    eprintln!(
        "pfx-agent dispatch: takes no options but --config; every setting comes from the config file"
    );
    log(
        libc::LOG_WARNING,
        None,
        &format!("refused: options on the dispatch command line ({argv:?})"),
    );
    Err(REFUSED)
}

/// [`load_config`], a refusal printed and logged with the status to exit with.
fn load_config_or_exit(config: &Path) -> Result<AgentConfig, u8> {
    load_config(config).map_err(|e| {
        eprintln!("pfx-agent dispatch: agent config refused: {e}");
        log(
            libc::LOG_ERR,
            None,
            &format!("config refused, nothing run: {e}"),
        );
        2
    })
}

/// The caller's verb, parsed; accepted or refused, it is logged with who asked and from
/// where.
fn accept_verb(caller: &Caller, audit: Option<&Path>) -> Result<Verb, u8> {
    let original = caller.original.as_deref();
    let (who, from) = (&caller.who, &caller.from);
    match parse_command(original) {
        Ok(v) => {
            log(
                libc::LOG_INFO,
                audit,
                &format!("accepted {} for {who} from {from}", shown(original)),
            );
            Ok(v)
        }
        Err(why) => {
            eprintln!("pfx-agent: refused {}: {why}; {USAGE}", shown(original));
            log(
                libc::LOG_WARNING,
                audit,
                &format!("refused {} for {who} from {from}: {why}", shown(original)),
            );
            Err(REFUSED)
        }
    }
}

/// The NIC agent's options, every one from the config.
fn agent_opts(cfg: &AgentConfig, stop: &Arc<AtomicUsize>) -> Result<AgentOpts, u8> {
    let backend: Box<dyn NicBackend> = match (cfg.nic_backend, &cfg.mock_nic_dir) {
        (Backend::Mock, Some(dir)) if TEST_BACKENDS => Box::new(MockBackend { dir: dir.clone() }),
        _ => Box::new(PlayerBackend {
            player: cfg.player.clone(),
        }),
    };
    let guardian_exe = match std::env::current_exe() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("pfx-agent: cannot find own executable for the guardian: {e}");
            return Err(2);
        }
    };
    Ok(AgentOpts {
        iface: cfg.iface.clone(),
        lower: cfg.lower.clone(),
        backend,
        unit_id: cfg.unit_id.clone().unwrap_or_else(default_unit_id),
        image_version_file: cfg.image_version_file.clone(),
        guardian_exe,
        systemd: cfg.systemd,
        profile_url: cfg.profile_url.clone(),
        stop: Arc::clone(stop),
        hold_in_write: cfg.test_hold_in_write_ms.map(Duration::from_millis),
        hold_pidfile: cfg.test_hold_pidfile.clone(),
    })
}

/// The show store's options, every one from the config.
fn show_opts(cfg: &AgentConfig, unit_id: &str) -> crate::showagent::ShowOpts {
    crate::showagent::ShowOpts {
        unit_id: unit_id.to_string(),
        root: cfg.store_root.clone(),
        player: cfg.player.clone(),
        rate_bytes_per_s: cfg.store_rate_bytes_per_s,
        reserve_bytes: cfg.store_reserve_bytes,
        profile_url: cfg.profile_url.clone(),
        player_pidfile: cfg.player_pidfile.clone(),
        systemd: cfg.systemd,
        confirm_timeout: Duration::from_secs(cfg.show_confirm_timeout_s),
    }
}

/// What a verb answered: its document (to print) and whether it succeeded, or, for the
/// update verbs, which print their own answer, the exit status.
enum Answer {
    Text(serde_json::Result<String>, bool),
    Exit(u8),
}

/// Everything a verb may be given, all from the config and the caller.
struct VerbCtx<'a> {
    cfg: &'a AgentConfig,
    config: &'a Path,
    opts: &'a AgentOpts,
    from: &'a str,
}

impl VerbCtx<'_> {
    fn run(&self, verb: Verb) -> Answer {
        let (cfg, opts) = (self.cfg, self.opts);
        let show_opts = show_opts(cfg, &opts.unit_id);
        let mut stdin = std::io::stdin().lock();
        if matches!(
            verb,
            Verb::ShowPut { .. } | Verb::ShowActivate | Verb::ShowMissing
        ) {
            store_umask();
        }
        let (text, good) = match verb {
            Verb::Control { action, by } => {
                store_umask();
                let o = crate::controlagent::ControlOpts {
                    unit_id: opts.unit_id.clone(),
                    socket: cfg.control_socket.clone(),
                    store_root: cfg.store_root.clone(),
                };
                // The client's address, without its ports.
                let client = self.from.split_whitespace().next().unwrap_or("local");
                let (r, ok) = crate::controlagent::run(&o, &action, &by, client);
                (serde_json::to_string(&r), ok)
            }
            Verb::Update(u) => {
                store_umask();
                let o = update_opts(cfg, self.config, &opts.unit_id);
                return Answer::Exit(crate::updateagent::run_verb(&o, u, &mut stdin));
            }
            Verb::ShowMissing => {
                let (r, ok) = crate::showagent::missing(&show_opts, &mut stdin);
                (serde_json::to_string(&r), ok)
            }
            Verb::ShowPut {
                hash,
                size,
                offset,
                len,
            } => {
                let (r, ok) =
                    crate::showagent::put(&show_opts, &hash, size, offset, len, &mut stdin);
                (serde_json::to_string(&r), ok)
            }
            Verb::ShowActivate => {
                let (r, ok) = crate::showagent::activate(&show_opts, &mut stdin);
                (serde_json::to_string(&r), ok)
            }
            Verb::ShowStatus => {
                let (r, ok) = crate::showagent::status(&show_opts);
                (serde_json::to_string(&r), ok)
            }
            Verb::ApplyPauseOff { json } => {
                let r = agent::apply_pause_off(opts);
                let text = if json {
                    serde_json::to_string_pretty(&r)
                } else {
                    Ok(format!("{}: {}: {}", r.unit, r.interface, r.message))
                };
                (text, r.verified)
            }
            Verb::Status {
                rate_interval_ms, ..
            } => {
                let r = agent::status(opts, Duration::from_millis(rate_interval_ms));
                let good = r.errors.is_empty();
                (serde_json::to_string_pretty(&r), good)
            }
        };
        Answer::Text(text, good)
    }
}

/// Prints a verb's answer; the exit status: 0 or 1 by the verb's success, 128+N when a
/// signal N arrived, 2 when the answer could not be encoded.
fn finish(text: serde_json::Result<String>, good: bool, stop: &AtomicUsize) -> u8 {
    match text {
        Ok(t) => println!("{t}"),
        Err(e) => {
            eprintln!("pfx-agent: encoding the answer: {e}");
            return 2;
        }
    }
    #[cfg(debug_assertions)]
    std::hint::black_box(TEST_BUILD_MARKER);
    match stop.load(Ordering::SeqCst) {
        0 if good => 0,
        0 => 1,
        sig => (128 + sig) as u8,
    }
}

/// The forced command. `argv` is the agent's own command line without the program name;
/// it must be exactly `dispatch [--config PATH]` (no option may ride along). Returns the
/// exit status.
pub fn run(argv: &[OsString], config: &Path, stop: Arc<AtomicUsize>) -> u8 {
    run_steps(argv, config, &stop).unwrap_or_else(|code| code)
}

/// [`run`]'s steps in order; an `Err` is a step that ended the run early (a refusal or a
/// failure, already printed and logged), with the status to exit with.
fn run_steps(argv: &[OsString], config: &Path, stop: &Arc<AtomicUsize>) -> Result<u8, u8> {
    let caller = Caller::from_env();
    check_argv(argv)?;
    let cfg = load_config_or_exit(config)?;
    let verb = accept_verb(&caller, cfg.audit_log.as_deref())?;
    if let Some(ms) = cfg.test_delay_ms {
        std::thread::sleep(Duration::from_millis(ms));
    }
    let opts = agent_opts(&cfg, stop)?;
    let ctx = VerbCtx {
        cfg: &cfg,
        config,
        opts: &opts,
        from: &caller.from,
    };
    Ok(match ctx.run(verb) {
        Answer::Exit(code) => code,
        Answer::Text(text, good) => finish(text, good, stop),
    })
}

/// What the store's writers create is group-writable: on the image the data partition's
/// root is set-gid to the fleet account's group, which the player (FPP Connect's uploads)
/// writes through, so directories the agent makes must be writable by that group too.
fn store_umask() {
    // SAFETY: umask(2) only sets the process's file mode mask; it cannot fail.
    unsafe {
        libc::umask(0o002);
    }
}

/// The update verbs' settings from the unit's agent config (here, beside the config, so
/// the update module does not depend back on the dispatcher).
pub fn update_opts(
    cfg: &AgentConfig,
    config_path: &Path,
    unit_id: &str,
) -> crate::updateagent::UpdateOpts {
    crate::updateagent::UpdateOpts {
        unit_id: unit_id.into(),
        store_root: cfg.store_root.clone(),
        rauc: cfg.rauc.clone(),
        rate_bytes_per_s: cfg.store_rate_bytes_per_s,
        reserve_bytes: cfg.store_reserve_bytes,
        player: cfg.player.clone(),
        profile_url: cfg.profile_url.clone(),
        systemd: cfg.systemd,
        slot_carry: cfg.slot_carry.clone(),
        force_file: cfg.update_force_file.clone(),
        image_version_file: cfg.image_version_file.clone(),
        show_config: cfg.show_config.clone(),
        min_idle_s: cfg.update_min_idle_s,
        cmdline_file: cfg
            .test_cmdline_file
            .clone()
            .filter(|_| TEST_BACKENDS)
            .unwrap_or_else(|| "/proc/cmdline".into()),
        reboot: match &cfg.test_reboot_command {
            Some(p) if TEST_BACKENDS => vec![p.display().to_string()],
            _ => vec!["systemctl".into(), "reboot".into()],
        },
        agent_exe: std::env::current_exe().unwrap_or_else(|_| "/usr/bin/pfx-agent".into()),
        config_path: config_path.to_path_buf(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_agent_verbs_with_checked_arguments() {
        assert_eq!(
            parse_command(Some("apply pause-off --json")),
            Ok(Verb::ApplyPauseOff { json: true })
        );
        assert_eq!(
            parse_command(Some(" apply  pause-off ")),
            Ok(Verb::ApplyPauseOff { json: false })
        );
        assert_eq!(
            parse_command(Some("status --json --rate-interval-ms 200")),
            Ok(Verb::Status {
                json: true,
                rate_interval_ms: 200
            })
        );
        assert_eq!(
            parse_command(Some("status")),
            Ok(Verb::Status {
                json: false,
                rate_interval_ms: 1000
            })
        );
        let h = "a".repeat(64);
        assert_eq!(
            parse_command(Some(&format!("show put {h} 100 10 90"))),
            Ok(Verb::ShowPut {
                hash: h.parse().unwrap(),
                size: 100,
                offset: 10,
                len: 90
            })
        );
        assert_eq!(parse_command(Some("show missing")), Ok(Verb::ShowMissing));
        assert_eq!(parse_command(Some("show activate")), Ok(Verb::ShowActivate));
        assert_eq!(parse_command(Some("show status")), Ok(Verb::ShowStatus));
        assert_eq!(
            parse_command(Some("control blackout --by alice")),
            Ok(Verb::Control {
                action: pfx_api::control::Action::Blackout,
                by: "alice".into()
            })
        );
        assert_eq!(
            parse_command(Some("control test walk --output Pole_3 --by ops")),
            Ok(Verb::Control {
                action: pfx_api::control::Action::Test {
                    pattern: pfx_api::control::TestPattern::Walk,
                    output: Some("Pole_3".into())
                },
                by: "ops".into()
            })
        );
        for bad in [
            "control",
            "control blackout now",
            "control blackout --by",
            "control blackout --by root;id",
            "control play",
            "control play ../../etc",
            "control play $(id)",
            "control brightness 1e9",
            "control brightness -0.5",
            "control brightness nan",
            "control test rainbow",
            "control test id --output",
            "control test id --output /dev/sda",
            "control test id --output a --output b",
            "control --socket /tmp/x blackout",
            "control blackout --by a --store-root /",
        ] {
            let e = parse_command(Some(bad)).unwrap_err();
            assert!(e.starts_with("control"), "{bad:?}: {e}");
        }
        let e = parse_command(Some("control dim")).unwrap_err();
        assert!(
            e.contains("the actions are blackout, stop, play PLAYLIST"),
            "{e}"
        );
        let e = parse_command(Some("control test rainbow")).unwrap_err();
        assert!(e.contains("`id`, `walk`, `red`"), "{e}");
        for bad in [
            format!("show put {h} 100 10 91"),
            format!("show put {h} 100 -1 10"),
            format!("show put {h} 100 +1 10"),
            format!("show put {h} 100 0x1 10"),
            format!("show put {h} 100 18446744073709551615 10"),
            format!("show put {h} 100 0"),
            "show put ../../etc/passwd 100 0 10".to_string(),
            format!("show put {} 100 0 10", "A".repeat(64)),
            "show missing --root /".into(),
            "show activate /etc/shadow".into(),
            "show".into(),
            "show rm".into(),
        ] {
            assert!(parse_command(Some(&bad)).is_err(), "{bad:?} accepted");
        }
        for bad in [
            None,
            Some(""),
            Some("   "),
            Some("sh -c id"),
            Some("id"),
            Some("pfx-agent --player /bin/sh apply pause-off"),
            Some("/usr/bin/pfx-agent apply pause-off --json"),
            Some("apply pause-off --json; id"),
            Some("apply pause-off --json --player /bin/sh"),
            Some("apply pause-off --lower /"),
            Some("apply pause-off --json --json"),
            Some("apply pause-on"),
            Some("apply"),
            Some("status --rate-interval-ms"),
            Some("status --rate-interval-ms 0"),
            Some("status --rate-interval-ms 99999999"),
            Some("status --rate-interval-ms 100 --rate-interval-ms 100"),
            Some("status --nic-backend mock"),
            Some("guard-ro --lower /"),
            Some("dispatch"),
            Some("scp -t /tmp"),
            Some("/usr/lib/openssh/sftp-server"),
            Some("\u{2003}status"),
            Some("status\u{a0}"),
            Some("internal-sftp"),
        ] {
            assert!(parse_command(bad).is_err(), "{bad:?} accepted");
        }
        let e = parse_command(Some("sh -c id")).unwrap_err();
        assert!(e.contains("\"sh\" is not an agent verb"), "{e}");
    }

    /// Issue 25: the help and docs said the key runs `apply pause-off` and `status`,
    /// "nothing else", after the show verbs were added. Each verb the parser accepts is
    /// listed in both.
    #[test]
    fn help_and_docs_list_every_verb_the_key_can_run() {
        let docs = include_str!("../../docs/fleet.md");
        let security = docs
            .split("## Security")
            .nth(1)
            .and_then(|s| s.split("\n## ").next())
            .unwrap_or("");
        let h = "a".repeat(64);
        for (verb, cmd) in [
            ("apply pause-off", "apply pause-off".to_string()),
            ("status [--json]", "status --json".into()),
            ("show missing", "show missing".into()),
            (
                "show put HASH SIZE OFFSET LEN",
                format!("show put {h} 10 0 10"),
            ),
            ("show activate", "show activate".into()),
            ("show status", "show status".into()),
            ("control blackout|stop|resume", "control blackout".into()),
            ("control play PLAYLIST", "control play evening".into()),
            ("control brightness F", "control brightness 0.5".into()),
            (
                "control test id|walk|red|green|blue|white [--output NAME]",
                "control test id --output a".into(),
            ),
        ] {
            assert!(parse_command(Some(&cmd)).is_ok(), "{cmd}");
            assert!(VERBS_HELP.contains(verb), "--help lacks {verb}");
            assert!(
                security.contains(verb),
                "docs/fleet.md Security lacks {verb}"
            );
        }
        assert!(!security.contains("nothing else: no option"), "stale text");
        for place in [VERBS_HELP, security] {
            assert!(place.contains("`update ...` and `control ...`"));
        }
    }

    #[test]
    fn config_test_keys_only_in_test_builds() {
        let c = AgentConfig::parse("iface: eth0\n", false).unwrap();
        assert_eq!(c.lower, Path::new("/media/root-ro"));
        assert_eq!(c.player, Path::new("/usr/bin/pfx-player"));
        assert_eq!(c.nic_backend, Backend::Player);
        for text in [
            "nic_backend: mock\nmock_nic_dir: /run/x\n",
            "test_delay_ms: 5\n",
            "test_hold_in_write_ms: 5\n",
        ] {
            let e = AgentConfig::parse(text, false).unwrap_err();
            assert!(e.contains("release build"), "{e}");
            AgentConfig::parse(text, true).unwrap();
        }
        assert!(AgentConfig::parse("nic_backend: mock\n", true).is_err());
        assert!(AgentConfig::parse("iface: 'eth0; id'\n", true).is_err());
        assert!(AgentConfig::parse("player: bin/sh\n", true).is_err());
        assert!(AgentConfig::parse("players: /bin/sh\n", true).is_err());
        assert_eq!(c.store_root, Path::new("/var/lib/pfx"));
        assert!(AgentConfig::parse("store_root: data\n", false).is_err());
        assert!(AgentConfig::parse("player_pidfile: run/p.pid\n", false).is_err());
        assert!(AgentConfig::parse("store_rate_bytes_per_s: 10\n", false).is_err());
        AgentConfig::parse("store_root: /data\nplayer_pidfile: /run/p.pid\n", false).unwrap();
    }

    #[test]
    fn only_root_owned_unwritable_files_are_trusted() {
        assert!(trusted(0, 0o100644, false));
        assert!(trusted(0, 0o40755, true));
        assert!(trusted(0, 0o41777, true), "sticky /tmp");
        assert!(!trusted(0, 0o100666, false));
        assert!(!trusted(0, 0o100664, false));
        assert!(!trusted(0, 0o40777, true));
        assert!(!trusted(1000, 0o100644, false));
        assert!(
            !trusted(0, 0o101777, false),
            "sticky means nothing on a file"
        );
    }

    #[test]
    fn trusted_path_checks_the_file_and_every_directory_above() {
        // Running as non-root, the temp files are not root's: both refused; as root the
        // mode decides.
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("agent.yaml");
        std::fs::write(&f, "iface: eth0\n").unwrap();
        let root = unsafe { libc::geteuid() } == 0;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(check_trusted_path(&f).is_ok(), root);
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o666)).unwrap();
        assert!(check_trusted_path(&f).is_err());
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = check_trusted_path(&f).unwrap_err();
        assert!(e.contains("not writable by group or others"), "{e}");
        assert!(check_trusted_path(&d.path().join("missing.yaml")).is_err());
    }
}
