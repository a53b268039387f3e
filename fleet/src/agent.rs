//! `pfx-agent`: the unit side. Applies PAUSE-off now, persists it into the read-only
//! lower root through a remount-rw window, and answers with what it read back.

use crate::atomic;
use crate::mountguard::{self, RwWindow};
use crate::nic::{self, NicBackend, NicReading};
use crate::oneshot::{self, Oneshot};
use pfx_api::profile::ProfileDoc;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The reports are the contract with `pfx-fleet`, defined once in pfx-api.
pub use pfx_api::agent::{ApplyReport, Persisted, PlayerInfo, StatusReport};

pub struct AgentOpts {
    pub iface: String,
    pub lower: PathBuf,
    pub backend: Box<dyn NicBackend>,
    pub unit_id: String,
    pub image_version_file: PathBuf,
    /// Executable started as `EXE guard-ro --lower L` for the rw window (ourselves).
    pub guardian_exe: PathBuf,
    /// Whether to ask systemd over D-Bus (off = reported as unknown, with the reason).
    pub systemd: bool,
    pub profile_url: String,
    /// Set to a signal number by the signal handlers; checked between steps.
    pub stop: Arc<AtomicUsize>,
    /// Test hook: stay inside the rw window, half-way through the write, this long.
    pub hold_in_write: Option<Duration>,
    pub hold_pidfile: Option<PathBuf>,
}

/// Path of the persisted setting inside the lower root.
pub fn persisted_path(lower: &Path, iface: &str) -> PathBuf {
    lower.join("etc/pfx/nic.d").join(format!("{iface}.yaml"))
}

/// The persisted file's exact bytes; deterministic so a second apply can tell that
/// nothing needs writing.
pub fn persisted_contents(iface: &str) -> String {
    format!(
        "# Written by pfx-agent apply pause-off; read at boot by pfx-eth-no-pause@{iface}.service.\n\
         interface: {iface}\n\
         pause:\n  autoneg: false\n  rx: false\n  tx: false\n"
    )
}

pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn read_trimmed(p: &Path) -> Option<String> {
    std::fs::read_to_string(p)
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

fn check_stop(stop: &AtomicUsize) -> Result<(), String> {
    match stop.load(Ordering::SeqCst) {
        0 => Ok(()),
        s => Err(format!("interrupted by signal {s}")),
    }
}

fn read_oneshot(o: &AgentOpts) -> Oneshot {
    if o.systemd {
        oneshot::read(&o.iface)
    } else {
        Oneshot::Unknown {
            unit: oneshot::unit_name(&o.iface),
            reason: "not asked: --no-systemd".into(),
        }
    }
}

/// The persisting step: returns (wrote, stale temps removed, lower was rw at start).
fn persist(o: &AgentOpts, target: &Path, want: &[u8]) -> Result<(bool, usize, bool), String> {
    let lower_found_rw = !mountguard::is_readonly(&o.lower).map_err(|e| e.to_string())?;
    let prefix = atomic::temp_prefix(target);
    let stale = target
        .parent()
        .and_then(|d| std::fs::read_dir(d).ok())
        .map(|rd| {
            rd.flatten()
                .any(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        })
        .unwrap_or(false);
    let current = std::fs::read(target).ok();
    if current.as_deref() == Some(want) && !stale && !lower_found_rw {
        return Ok((false, 0, false));
    }
    check_stop(&o.stop)?;
    let window = RwWindow::open(&o.lower, &o.guardian_exe).map_err(|e| e.to_string())?;
    let removed = atomic::remove_stale_temps(target);
    let mut wrote = false;
    if current.as_deref() != Some(want) {
        atomic::write_atomic_with(target, want, || {
            check_stop(&o.stop)?;
            if let Some(hold) = o.hold_in_write {
                if let Some(pf) = &o.hold_pidfile {
                    let _ = std::fs::write(pf, std::process::id().to_string());
                }
                let until = Instant::now() + hold;
                while Instant::now() < until {
                    check_stop(&o.stop)?;
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
            check_stop(&o.stop)
        })
        .map_err(|e| e.to_string())?;
        wrote = true;
    }
    window.close().map_err(|e| e.to_string())?;
    Ok((wrote, removed, lower_found_rw))
}

/// Serialises agents on one unit (two operators pushing at once): an exclusive flock on
/// the lower root's directory, held until the returned file is dropped. A directory on a
/// read-only filesystem can still be opened and locked.
fn lock_lower(lower: &Path) -> Result<std::fs::File, String> {
    use std::os::unix::io::AsRawFd;
    let f = std::fs::File::open(lower)
        .map_err(|e| format!("opening {} to lock it: {e}", lower.display()))?;
    // SAFETY: flock on a file descriptor we own; blocking until the other agent is done.
    let r = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) };
    if r != 0 {
        return Err(format!(
            "locking {}: {}",
            lower.display(),
            std::io::Error::last_os_error()
        ));
    }
    Ok(f)
}

/// Step 1, now: sets PAUSE off on the NIC only when the readback differs. Returns
/// whether the NIC was changed and the reading it answered with.
fn set_pause_off_now(o: &AgentOpts, errors: &mut Vec<String>) -> (bool, Option<NicReading>) {
    match o.backend.read(&o.iface) {
        Ok(r) if r.pause.is_some_and(|p| p.is_off()) => (false, Some(r)),
        Ok(_) => match o.backend.pause_off(&o.iface) {
            Ok(r) => (true, Some(r)),
            Err(e) => {
                errors.push(format!("setting PAUSE off: {e}"));
                (false, None)
            }
        },
        Err(e) => {
            errors.push(format!("reading PAUSE: {e}"));
            (false, None)
        }
    }
}

/// Step 2: persists through the read-only lower root; a failure is an error in the
/// report and counts as nothing written.
fn persist_step(
    o: &AgentOpts,
    target: &Path,
    want: &[u8],
    errors: &mut Vec<String>,
) -> (bool, usize, bool) {
    match persist(o, target, want) {
        Ok(t) => t,
        Err(e) => {
            errors.push(format!("persisting {}: {e}", target.display()));
            (false, 0, false)
        }
    }
}

/// Step 3's reading of the persisted file and the lower root's mount, fresh from disk
/// (not from what step 2 believes it wrote).
fn read_persisted(
    o: &AgentOpts,
    target: &Path,
    want: &[u8],
    errors: &mut Vec<String>,
) -> Option<Persisted> {
    match mountguard::is_readonly(&o.lower) {
        Ok(ro) => Some(Persisted {
            matches: std::fs::read(target).ok().as_deref() == Some(want),
            lower_readonly: ro,
            path: target.to_path_buf(),
        }),
        Err(e) => {
            errors.push(e.to_string());
            None
        }
    }
}

/// What step 3 found, as the report's one-line message.
struct Verdict {
    nic_off: bool,
    persisted_ok: bool,
    oneshot_failed: bool,
    errors: bool,
}

impl Verdict {
    fn verified(&self) -> bool {
        self.nic_off && self.persisted_ok && !self.oneshot_failed && !self.errors
    }

    fn message(&self, changed: bool) -> String {
        if !self.verified() {
            let mut why = Vec::new();
            if !self.nic_off {
                why.push("PAUSE is not off in the readback");
            }
            if !self.persisted_ok {
                why.push("the persisted file or the read-only lower did not read back");
            }
            if self.oneshot_failed {
                why.push("the boot oneshot failed");
            }
            if self.errors {
                why.push("errors (see errors)");
            }
            format!("NOT verified: {}", why.join("; "))
        } else if changed {
            "applied and verified".into()
        } else {
            "already applied: nothing changed (verified)".into()
        }
    }
}

pub fn apply_pause_off(o: &AgentOpts) -> ApplyReport {
    let mut errors = Vec::new();
    let _lock = match lock_lower(&o.lower) {
        Ok(f) => Some(f),
        Err(e) => {
            errors.push(e);
            None
        }
    };
    let target = persisted_path(&o.lower, &o.iface);
    let want = persisted_contents(&o.iface);

    let (changed_nic, mut readback) = set_pause_off_now(o, &mut errors);
    let (changed_persisted, removed, lower_found_rw) =
        persist_step(o, &target, want.as_bytes(), &mut errors);

    // 3. Verify, from fresh reads only.
    match o.backend.read(&o.iface) {
        Ok(r) => readback = Some(r),
        Err(e) => errors.push(format!("PAUSE readback: {e}")),
    }
    let persisted = read_persisted(o, &target, want.as_bytes(), &mut errors);
    let oneshot = read_oneshot(o);
    let verdict = Verdict {
        nic_off: readback
            .as_ref()
            .and_then(|r| r.pause)
            .is_some_and(|p| p.is_off()),
        persisted_ok: persisted
            .as_ref()
            .is_some_and(|p| p.matches && p.lower_readonly),
        oneshot_failed: oneshot.failed(),
        errors: !errors.is_empty(),
    };
    let verified = verdict.verified();
    let changed = changed_nic || changed_persisted || removed > 0;
    let message = verdict.message(changed);
    ApplyReport {
        unit: o.unit_id.clone(),
        interface: o.iface.clone(),
        action: "apply pause-off".into(),
        ok: errors.is_empty(),
        verified,
        changed,
        changed_nic,
        changed_persisted,
        removed_stale_temps: removed,
        lower_found_rw,
        message,
        readback,
        persisted,
        oneshot,
        image_version: read_trimmed(&o.image_version_file),
        agent_version: env!("CARGO_PKG_VERSION").into(),
        read_at_unix_ms: now_ms(),
        errors,
    }
}

pub fn player_info(url: &str) -> PlayerInfo {
    let fail = |reason: String| PlayerInfo {
        reachable: false,
        fps: None,
        deadline_misses: None,
        reason: Some(reason),
    };
    match crate::http::request("GET", url, &[], None, Duration::from_secs(2)) {
        Ok(r) if r.status == 200 => player_info_from(url, &r.body),
        Ok(r) => fail(format!("{url}: HTTP {}", r.status)),
        Err(e) => fail(e.to_string()),
    }
}

/// What the agent reports from a `/profile` body: read as the typed document the player
/// serves, so a renamed field is an error here, not a silent `null`.
pub fn player_info_from(url: &str, body: &[u8]) -> PlayerInfo {
    match serde_json::from_slice::<ProfileDoc>(body) {
        Ok(d) => PlayerInfo {
            reachable: true,
            fps: Some(d.snapshot.fps),
            deadline_misses: Some(d.snapshot.deadline_misses),
            reason: None,
        },
        Err(e) => PlayerInfo {
            reachable: false,
            fps: None,
            deadline_misses: None,
            reason: Some(format!("{url}: not a pfx-player /profile document: {e}")),
        },
    }
}

pub fn status(o: &AgentOpts, rate_interval: Duration) -> StatusReport {
    let mut errors = Vec::new();
    let first = o.backend.read(&o.iface);
    let t0 = Instant::now();
    std::thread::sleep(rate_interval);
    let second = o.backend.read(&o.iface);
    let dt = t0.elapsed().as_secs_f64();
    let (reading, per_s) = match (first, second) {
        (Ok(a), Ok(b)) => {
            let r = nic::frames_per_s(a.pause_rx_frames, b.pause_rx_frames, dt);
            (Some(b), r)
        }
        (Err(e), _) | (_, Err(e)) => {
            errors.push(e.to_string());
            (None, None)
        }
    };
    let target = persisted_path(&o.lower, &o.iface);
    let want = persisted_contents(&o.iface);
    let persisted = match mountguard::is_readonly(&o.lower) {
        Ok(ro) => Some(Persisted {
            matches: std::fs::read(&target).ok().as_deref() == Some(want.as_bytes()),
            lower_readonly: ro,
            path: target,
        }),
        Err(e) => {
            errors.push(e.to_string());
            None
        }
    };
    let pause = reading.as_ref().and_then(|r| r.pause);
    StatusReport {
        unit: o.unit_id.clone(),
        interface: o.iface.clone(),
        pause,
        pause_off: pause.is_some_and(|p| p.is_off()),
        pause_error: reading.as_ref().and_then(|r| r.pause_error.clone()),
        pause_rx_frames_total: reading.as_ref().and_then(|r| r.pause_rx_frames),
        pause_rx_frames_per_s: per_s,
        rate_interval_s: dt,
        persisted,
        oneshot: read_oneshot(o),
        player: player_info(&o.profile_url),
        image_version: read_trimmed(&o.image_version_file),
        agent_version: env!("CARGO_PKG_VERSION").into(),
        read_at_unix_ms: now_ms(),
        errors,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn persisted_file_is_deterministic_yaml() {
        let a = persisted_contents("eth0");
        assert_eq!(a, persisted_contents("eth0"));
        assert!(a.contains("interface: eth0\n"));
        assert!(a.contains("  rx: false\n"));
        assert_eq!(
            persisted_path(Path::new("/media/root-ro"), "eth0"),
            Path::new("/media/root-ro/etc/pfx/nic.d/eth0.yaml")
        );
    }
}

/// The agent's answers as `pfx-agent ... --json` prints them, byte for byte against
/// `api/tests/golden/agent-*.json`, and read back the way `pfx-fleet push` reads them.
#[cfg(test)]
mod golden_tests {
    use super::*;
    use pfx_api::agent::NicReading;
    use pfx_api::nic::PauseSettings;

    fn readback() -> NicReading {
        NicReading {
            interface: "eth0".into(),
            pause: Some(PauseSettings::OFF),
            pause_error: None,
            pause_rx_frames: Some(2_400_000),
            backend: "pfx-player".into(),
        }
    }

    fn persisted() -> Persisted {
        Persisted {
            path: "/media/root-ro/etc/pfx/nic.d/eth0.yaml".into(),
            matches: true,
            lower_readonly: true,
        }
    }

    pub(crate) fn golden_apply() -> ApplyReport {
        ApplyReport {
            unit: "gen3-7".into(),
            interface: "eth0".into(),
            action: "apply pause-off".into(),
            ok: true,
            verified: true,
            changed: true,
            changed_nic: true,
            changed_persisted: true,
            removed_stale_temps: 1,
            lower_found_rw: false,
            message: "applied and verified".into(),
            readback: Some(readback()),
            persisted: Some(persisted()),
            oneshot: Oneshot::Known {
                unit: "pfx-eth-no-pause@eth0.service".into(),
                active_state: "active".into(),
                result: "success".into(),
                exec_main_status: 0,
            },
            image_version: Some("2026.12.1".into()),
            agent_version: "0.1.0".into(),
            read_at_unix_ms: 1_764_547_200_000,
            errors: vec![],
        }
    }

    pub(crate) fn golden_status() -> StatusReport {
        StatusReport {
            unit: "gen3-7".into(),
            interface: "eth0".into(),
            pause: Some(PauseSettings::OFF),
            pause_off: true,
            pause_error: None,
            pause_rx_frames_total: Some(2_400_000),
            pause_rx_frames_per_s: Some(0.0),
            rate_interval_s: 1.0,
            persisted: Some(persisted()),
            oneshot: Oneshot::Unknown {
                unit: "pfx-eth-no-pause@eth0.service".into(),
                reason: "no systemd bus".into(),
            },
            player: PlayerInfo {
                reachable: true,
                fps: Some(60.0),
                deadline_misses: Some(0),
                reason: None,
            },
            image_version: None,
            agent_version: "0.1.0".into(),
            read_at_unix_ms: 1_764_547_200_000,
            errors: vec!["example error".into()],
        }
    }

    #[test]
    fn apply_report_matches_the_golden_file() {
        let text = serde_json::to_string_pretty(&golden_apply()).unwrap() + "\n";
        pfx_api::golden::check("agent-apply.json", &text);
        // What `push` keeps of it and what the gate trusts.
        assert!(crate::gate::readback_verified(&text));
    }

    #[test]
    fn status_report_matches_the_golden_file() {
        let text = serde_json::to_string_pretty(&golden_status()).unwrap() + "\n";
        pfx_api::golden::check("agent-status.json", &text);
    }

    /// What `pfx-fleet push` gets back over SSH reads as the typed report.
    #[test]
    fn the_golden_apply_report_reads_back() {
        let a: ApplyReport =
            serde_json::from_str(&pfx_api::golden::read("agent-apply.json")).unwrap();
        assert_eq!(a, golden_apply());
    }

    /// The player's golden `/profile` (written by the player's server test) gives the
    /// agent its fps and deadline misses.
    #[test]
    fn reads_fps_from_the_players_golden_profile() {
        let body = pfx_api::golden::read("profile.json");
        let p = player_info_from("http://127.0.0.1:8080/profile", body.as_bytes());
        assert_eq!(
            p,
            PlayerInfo {
                reachable: true,
                fps: Some(60.00000002033898),
                deadline_misses: Some(0),
                reason: None,
            }
        );
        let renamed = body.replacen("\"deadline_misses\"", "\"misses\"", 1);
        let p = player_info_from("http://u/profile", renamed.as_bytes());
        assert!(!p.reachable, "{p:?}");
        assert!(
            p.reason
                .as_deref()
                .is_some_and(|r| r.contains("missing field `deadline_misses`")),
            "{p:?}"
        );
    }
}
