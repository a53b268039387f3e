//! Held connections for a show night: `pfx-fleet hold` keeps one SSH connection (an
//! OpenSSH ControlMaster) open to each unit for as long as it runs, and `pfx-fleet
//! control` rides on them, so an action pays no key exchange: a new connection costs the
//! operator about 0.1 s of CPU per unit, a command on a held one a few milliseconds.
//!
//! The sockets live in one directory only this user can enter (made 0700 and checked),
//! one per unit, named by a digest of everything that decides which host is reached and
//! how its key is checked (user, host, port, identity, known_hosts path and content).
//! So a command rides only on a connection made with its own pins; when the fleet's
//! known_hosts changes, every name changes, no command rides on the old connections and
//! `hold` makes new ones.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use crate::config::SshConfig;
use crate::db::UnitRow;
use crate::ssh;

/// Where the directory is asked for, to override the default.
pub const DIR_ENV: &str = "PFX_FLEET_HELD_DIR";

#[derive(Debug, thiserror::Error)]
pub enum HeldError {
    #[error(
        "{path} cannot hold SSH control sockets (it must be an absolute path of letters, digits and /._-+ short enough for a socket name); set {DIR_ENV} to a short private directory"
    )]
    Unusable { path: PathBuf },
    #[error("making the held-connection directory {path}: {source}")]
    Make {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "the held-connection directory {path} is not private (uid {uid}, mode {mode:o}, {kind}; want a directory of this user's, mode 0700): remove it or set {DIR_ENV}"
    )]
    NotPrivate {
        path: PathBuf,
        uid: u32,
        mode: u32,
        kind: &'static str,
    },
}

/// The directory's path: `$PFX_FLEET_HELD_DIR` when set, else `pfx-fleet-held` in
/// `$XDG_RUNTIME_DIR` (the user's own, gone at logout), else `/tmp/pfx-fleet-held-UID`.
/// Pure.
pub fn dir_path(over: Option<&str>, xdg: Option<&str>, uid: u32) -> PathBuf {
    match (over, xdg) {
        (Some(o), _) if !o.is_empty() => PathBuf::from(o),
        (_, Some(x)) if x.starts_with('/') => Path::new(x).join("pfx-fleet-held"),
        _ => PathBuf::from(format!("/tmp/pfx-fleet-held-{uid}")),
    }
}

/// The socket name of a unit: the first 16 hex digits of a SHA-256 over what decides
/// where ssh goes and which host key it accepts. Pure.
pub fn key(c: &SshConfig, host: &str, port: u16, known_hosts: &[u8]) -> String {
    let mut h = Sha256::new();
    for part in [
        c.user.as_bytes(),
        host.as_bytes(),
        port.to_string().as_bytes(),
        c.identity
            .as_deref()
            .map(|p| p.as_os_str().as_encoded_bytes())
            .unwrap_or_default(),
        c.known_hosts.as_os_str().as_encoded_bytes(),
    ] {
        h.update((part.len() as u64).to_le_bytes());
        h.update(part);
    }
    h.update(known_hosts);
    h.finalize()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The held connections' directory and the known_hosts they were checked against.
#[derive(Debug, Clone)]
pub struct Held {
    pub dir: PathBuf,
    known_hosts: Vec<u8>,
}

impl Held {
    /// The directory for this user, made when `create` (by `hold`) and checked private in
    /// any case. `Ok(None)`: it does not exist and was not to be made.
    pub fn open(c: &SshConfig, create: bool) -> Result<Option<Held>, HeldError> {
        // SAFETY: geteuid cannot fail.
        let me = unsafe { libc::geteuid() };
        let over = std::env::var(DIR_ENV).ok();
        let xdg = std::env::var("XDG_RUNTIME_DIR").ok();
        Self::open_in(&dir_path(over.as_deref(), xdg.as_deref(), me), c, create)
    }

    /// [`Held::open`] of a given directory.
    pub fn open_in(dir: &Path, c: &SshConfig, create: bool) -> Result<Option<Held>, HeldError> {
        // SAFETY: geteuid cannot fail.
        let me = unsafe { libc::geteuid() };
        let dir = dir.to_path_buf();
        // The directory, "/", 16 hex digits: within what ssh needs of a socket name.
        if !ssh::plain_path(&dir) || dir.as_os_str().len() + 17 > ssh::SUN_PATH_ROOM {
            return Err(HeldError::Unusable { path: dir });
        }
        if create {
            use std::os::unix::fs::DirBuilderExt;
            match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => {
                    return Err(HeldError::Make {
                        path: dir,
                        source: e,
                    });
                }
            }
        }
        let m = match std::fs::symlink_metadata(&dir) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !create => return Ok(None),
            Err(e) => {
                return Err(HeldError::Make {
                    path: dir,
                    source: e,
                });
            }
        };
        use std::os::unix::fs::MetadataExt;
        let kind = if m.file_type().is_symlink() {
            "a symlink"
        } else if m.is_dir() {
            "a directory"
        } else {
            "not a directory"
        };
        if !m.is_dir() || m.uid() != me || m.mode() & 0o7777 != 0o700 {
            return Err(HeldError::NotPrivate {
                path: dir,
                uid: m.uid(),
                mode: m.mode() & 0o7777,
                kind,
            });
        }
        // An unreadable known_hosts makes names no connection has: nothing rides, and
        // ssh itself says what is wrong with the file.
        let known_hosts = std::fs::read(&c.known_hosts).unwrap_or_default();
        Ok(Some(Held { dir, known_hosts }))
    }

    /// The socket of a unit's held connection.
    pub fn socket(&self, c: &SshConfig, host: &str, port: u16) -> PathBuf {
        self.dir.join(key(c, host, port, &self.known_hosts))
    }

    /// The socket to ride on for a command, when a held connection answers there now.
    pub fn live(&self, c: &SshConfig, host: &str, port: u16) -> Option<PathBuf> {
        let s = self.socket(c, host, port);
        ssh::master_answers(&s).then_some(s)
    }
}

/// Something that happened to one unit's held connection.
#[derive(Debug, Clone, serde::Serialize)]
pub struct HoldEvent {
    pub unit: String,
    /// `held` (its socket answers), `lost` (its ssh ended; tried again after
    /// `retry_in_s`), `elsewhere` (another `hold` holds it), `closed` (at the end).
    pub event: &'static str,
    pub reason: Option<String>,
    pub retry_in_s: Option<u64>,
    pub at_unix_ms: u64,
}

/// The wait before the `n`-th try in a row that failed: 2, 4, 8, 16, then 30 s. Pure.
pub fn backoff(failures: u32) -> Duration {
    Duration::from_secs(match failures {
        0 | 1 => 2,
        2 => 4,
        3 => 8,
        4 => 16,
        _ => 30,
    })
}

/// One unit's connection as `hold` keeps it.
struct Slot {
    unit: UnitRow,
    socket: PathBuf,
    child: Option<Child>,
    announced: bool,
    failures: u32,
    next_try: Instant,
}

/// Holds a connection to every unit until `stop` is set, making each again when it ends
/// (the unit rebooted, the network went), and calls `each` on every change.
pub fn hold(
    mut held: Held,
    c: &SshConfig,
    units: Vec<UnitRow>,
    stop: &Arc<AtomicBool>,
    mut each: impl FnMut(&HoldEvent),
) -> usize {
    let now = Instant::now();
    let mut slots: Vec<Slot> = units
        .into_iter()
        .map(|u| Slot {
            socket: held.socket(c, &u.host, u.port),
            unit: u,
            child: None,
            announced: false,
            failures: 0,
            next_try: now,
        })
        .collect();
    let mut tell = |s: &Slot, event, reason: Option<String>, retry: Option<Duration>| {
        each(&HoldEvent {
            unit: s.unit.unit_id.clone(),
            event,
            reason,
            retry_in_s: retry.map(|d| d.as_secs()),
            at_unix_ms: crate::agent::now_ms(),
        })
    };
    let mut known_checked = Instant::now();
    while !stop.load(Ordering::SeqCst) {
        // A changed known_hosts renames every socket: end the old connections (their
        // host keys were checked against the old file) and make new ones.
        if known_checked.elapsed() >= Duration::from_secs(2) {
            known_checked = Instant::now();
            if let Ok(Some(now_held)) = Held::open_in(&held.dir, c, false)
                && now_held.known_hosts != held.known_hosts
            {
                held = now_held;
                for s in &mut slots {
                    end(s);
                    s.socket = held.socket(c, &s.unit.host, s.unit.port);
                    s.next_try = Instant::now();
                    tell(
                        s,
                        "lost",
                        Some("the fleet's known_hosts changed".into()),
                        None,
                    );
                }
            }
        }
        for s in &mut slots {
            step(c, s, &mut tell);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let n = slots.iter().filter(|s| s.child.is_some()).count();
    for s in &mut slots {
        if s.child.is_some() {
            end(s);
            tell(s, "closed", None, None);
        }
    }
    n
}

/// One look at one unit's connection: start it when due, announce it when its socket
/// answers, notice when its ssh ended.
fn step(
    c: &SshConfig,
    s: &mut Slot,
    tell: &mut impl FnMut(&Slot, &'static str, Option<String>, Option<Duration>),
) {
    if let Some(child) = &mut s.child {
        match child.try_wait() {
            Ok(None) => {
                if !s.announced && ssh::master_answers(&s.socket) {
                    s.announced = true;
                    s.failures = 0;
                    tell(s, "held", None, None);
                }
            }
            Ok(Some(status)) => {
                let mut err = String::new();
                if let Some(mut e) = child.stderr.take() {
                    let _ = e.read_to_string(&mut err);
                }
                s.child = None;
                s.announced = false;
                s.failures += 1;
                let wait = backoff(s.failures);
                s.next_try = Instant::now() + wait;
                let why = match err.trim() {
                    "" => format!("ssh ended ({status})"),
                    e => format!("ssh ended ({status}): {}", last_line(e)),
                };
                tell(s, "lost", Some(why), Some(wait));
            }
            Err(e) => {
                s.child = None;
                tell(s, "lost", Some(format!("waiting for ssh: {e}")), None);
            }
        }
        return;
    }
    if Instant::now() < s.next_try {
        return;
    }
    if s.socket.exists() {
        if ssh::master_answers(&s.socket) {
            // Another `hold` of this user holds it: leave it be, look again later.
            if !s.announced {
                s.announced = true;
                tell(
                    s,
                    "elsewhere",
                    Some(format!("{} answers", s.socket.display())),
                    None,
                );
            }
            s.next_try = Instant::now() + Duration::from_secs(5);
            return;
        }
        // A socket whose master is gone (killed without cleaning up): ssh would refuse
        // to be a master at that path and carry on without one.
        let _ = std::fs::remove_file(&s.socket);
    }
    s.announced = false;
    let args = ssh::master_args(c, &s.unit.host, s.unit.port, &s.socket);
    let mut cmd = Command::new(&c.ssh);
    cmd.args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    {
        use std::os::unix::process::CommandExt;
        // SAFETY: prctl is async-signal-safe; it only asks the kernel to send SIGTERM to
        // the child when this process dies, so a killed `hold` leaves no connection open.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                Ok(())
            });
        }
    }
    match cmd.spawn() {
        Ok(child) => s.child = Some(child),
        Err(e) => {
            s.failures += 1;
            let wait = backoff(s.failures);
            s.next_try = Instant::now() + wait;
            tell(
                s,
                "lost",
                Some(format!("starting {}: {e}", c.ssh.display())),
                Some(wait),
            );
        }
    }
}

/// Ends a slot's connection (its ssh removes the socket as it exits).
fn end(s: &mut Slot) {
    if let Some(mut child) = s.child.take() {
        if let Ok(pid) = i32::try_from(child.id()) {
            // SAFETY: kill on our own child's pid, which wait below reaps.
            unsafe { libc::kill(pid, libc::SIGTERM) };
        }
        let _ = child.wait();
    }
    s.announced = false;
}

fn last_line(s: &str) -> &str {
    s.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_directory_is_the_override_then_the_runtime_dir_then_tmp() {
        assert_eq!(
            dir_path(Some("/x/held"), Some("/run/user/1000"), 1000),
            PathBuf::from("/x/held")
        );
        assert_eq!(
            dir_path(None, Some("/run/user/1000"), 1000),
            PathBuf::from("/run/user/1000/pfx-fleet-held")
        );
        assert_eq!(
            dir_path(Some(""), Some("relative"), 7),
            PathBuf::from("/tmp/pfx-fleet-held-7")
        );
    }

    #[test]
    fn a_socket_name_changes_with_every_pin() {
        let c = SshConfig {
            known_hosts: "/k".into(),
            identity: Some("/id".into()),
            ..Default::default()
        };
        let base = key(&c, "10.0.0.1", 22, b"10.0.0.1 ssh-ed25519 AAA\n");
        assert_eq!(base.len(), 16);
        assert!(base.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_eq!(base, key(&c, "10.0.0.1", 22, b"10.0.0.1 ssh-ed25519 AAA\n"));
        let other_user = SshConfig {
            user: "root".into(),
            ..c.clone()
        };
        let other_id = SshConfig {
            identity: None,
            ..c.clone()
        };
        let other_kh = SshConfig {
            known_hosts: "/k2".into(),
            ..c.clone()
        };
        for (what, k) in [
            (
                "host",
                key(&c, "10.0.0.2", 22, b"10.0.0.1 ssh-ed25519 AAA\n"),
            ),
            (
                "port",
                key(&c, "10.0.0.1", 2222, b"10.0.0.1 ssh-ed25519 AAA\n"),
            ),
            (
                "known_hosts content",
                key(&c, "10.0.0.1", 22, b"10.0.0.1 ssh-ed25519 BBB\n"),
            ),
            (
                "user",
                key(&other_user, "10.0.0.1", 22, b"10.0.0.1 ssh-ed25519 AAA\n"),
            ),
            (
                "identity",
                key(&other_id, "10.0.0.1", 22, b"10.0.0.1 ssh-ed25519 AAA\n"),
            ),
            (
                "known_hosts path",
                key(&other_kh, "10.0.0.1", 22, b"10.0.0.1 ssh-ed25519 AAA\n"),
            ),
        ] {
            assert_ne!(k, base, "{what} must change the name");
        }
        // Length-prefixed parts: moving a byte from one part to the next is another name.
        assert_ne!(key(&c, "10.0.0.1", 22, b""), key(&c, "10.0.0.12", 2, b""));
    }

    #[test]
    fn retries_back_off_to_half_a_minute() {
        let s: Vec<u64> = (1..=7).map(|n| backoff(n).as_secs()).collect();
        assert_eq!(s, [2, 4, 8, 16, 30, 30, 30]);
    }
}
