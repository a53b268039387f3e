//! `pfx-agent update health-commit`: run at every boot by `pfx-update-health.service`. A
//! slot is kept only when the unit proves healthy on it: the player reached its first
//! frame and `/health` stayed ok for `health_ok_s`, the data partition is mounted, PAUSE
//! is off on the show interface, sshd answers with its banner, and `pfx-agent status`
//! answers. Pass: `rauc status mark-good`. A trial boot (`pfx.trial=1`) that fails, or
//! runs out of `health_deadline_s`: `rauc status mark-bad` and a reboot, so the other
//! slot boots. A boot that was not a trial is only recorded (see `HealthAction`).
//!
//! The checks are pure functions of what was read; the loop and the reads are the shell.

use crate::agent::now_ms;
use crate::dispatch::AgentConfig;
use crate::nic::NicBackend;
use crate::updateagent::{self, UpdateOpts};
use pfx_api::update::{HealthAction, HealthCheck, HealthReport};
use std::io::Read;
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::time::Duration;

/// What the health commit needs besides the update settings.
pub struct HealthOpts {
    pub update: UpdateOpts,
    pub iface: String,
    pub backend: Box<dyn NicBackend>,
    /// The player's `/profile` and `/health`.
    pub profile_url: String,
    pub health_url: String,
    pub ok_for: Duration,
    pub deadline: Duration,
    pub ssh_addr: SocketAddr,
    /// `pfx-agent status` as this agent runs it (program and arguments).
    pub status_cmd: Vec<String>,
    pub poll: Duration,
    /// The player's systemd unit, read for restarts (None without systemd): a player that
    /// keeps crashing fails the check at once instead of at the deadline, so a bad
    /// update's trial costs the show seconds, not `health_deadline_s`.
    pub player_unit: Option<String>,
}

/// `http://HOST:PORT/profile` -> `http://HOST:PORT/health`. Pure.
pub fn health_url_for(profile_url: &str) -> String {
    match profile_url.strip_suffix("/profile") {
        Some(base) => format!("{base}/health"),
        None => format!("{}/health", profile_url.trim_end_matches('/')),
    }
}

impl HealthOpts {
    pub fn from_config(
        cfg: &AgentConfig,
        config_path: &std::path::Path,
        unit_id: &str,
    ) -> HealthOpts {
        let backend: Box<dyn NicBackend> = match (cfg.nic_backend, &cfg.mock_nic_dir) {
            (crate::dispatch::Backend::Mock, Some(dir)) if crate::dispatch::TEST_BACKENDS => {
                Box::new(crate::nic::MockBackend { dir: dir.clone() })
            }
            _ => Box::new(crate::nic::PlayerBackend {
                player: cfg.player.clone(),
            }),
        };
        let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("/usr/bin/pfx-agent"));
        let mut status_cmd = vec![
            exe.display().to_string(),
            "--iface".into(),
            cfg.iface.clone(),
            "--lower".into(),
            cfg.lower.display().to_string(),
            "--player".into(),
            cfg.player.display().to_string(),
            "--unit-id".into(),
            unit_id.into(),
            "--image-version-file".into(),
            cfg.image_version_file.display().to_string(),
            "--profile-url".into(),
            cfg.profile_url.clone(),
        ];
        if let (crate::dispatch::Backend::Mock, Some(d)) = (cfg.nic_backend, &cfg.mock_nic_dir) {
            status_cmd.extend([
                "--nic-backend".into(),
                "mock".into(),
                "--mock-nic-dir".into(),
                d.display().to_string(),
            ]);
        }
        if !cfg.systemd {
            status_cmd.push("--no-systemd".into());
        }
        status_cmd.extend([
            "status".into(),
            "--json".into(),
            "--rate-interval-ms".into(),
            "100".into(),
        ]);
        HealthOpts {
            update: crate::dispatch::update_opts(cfg, config_path, unit_id),
            iface: cfg.iface.clone(),
            backend,
            profile_url: cfg.profile_url.clone(),
            health_url: health_url_for(&cfg.profile_url),
            ok_for: Duration::from_secs(cfg.health_ok_s),
            deadline: Duration::from_secs(cfg.health_deadline_s),
            ssh_addr: cfg
                .health_ssh_addr
                .parse()
                .unwrap_or_else(|_| SocketAddr::from(([127, 0, 0, 1], 22))),
            status_cmd,
            poll: Duration::from_secs(1),
            player_unit: cfg.systemd.then(|| "pfx-player.service".to_string()),
        }
    }
}

/// The player's part: its first frame, then `/health` ok without a break for `ok_for`.
/// Fed one reading per poll. Pure.
#[derive(Debug, Clone, Default)]
pub struct PlayerWatch {
    pub first_frame_ms: Option<u64>,
    /// Since when `/health` has been ok without a break (after the first frame).
    pub ok_since_ms: Option<u64>,
    pub last: String,
}

impl PlayerWatch {
    /// `frames`: frames since start from `/profile` (None: no answer); `health`: Ok on a
    /// 200 from `/health`, else what it said. Returns whether the player part passed.
    pub fn feed(
        &mut self,
        now_ms: u64,
        frames: Option<u64>,
        health: Result<(), String>,
        ok_for_ms: u64,
    ) -> bool {
        if frames.is_some_and(|f| f > 0) && self.first_frame_ms.is_none() {
            self.first_frame_ms = Some(now_ms);
        }
        match (&health, self.first_frame_ms) {
            (Ok(()), Some(_)) => {
                let since = *self.ok_since_ms.get_or_insert(now_ms);
                self.last = format!("/health ok for {} ms", now_ms - since);
            }
            (Ok(()), None) => {
                self.ok_since_ms = None;
                self.last = format!(
                    "no first frame yet ({})",
                    frames
                        .map(|f| format!("{f} frames"))
                        .unwrap_or_else(|| "/profile did not answer".into())
                );
            }
            (Err(e), _) => {
                self.ok_since_ms = None;
                self.last = format!("/health not ok: {e}");
            }
        }
        self.ok_since_ms.is_some_and(|s| now_ms - s >= ok_for_ms)
    }
}

/// Restarts of the player's unit after which the check gives up before its deadline.
pub const PLAYER_RESTARTS_GIVE_UP: u32 = 3;

/// Whether the player's unit has given up or keeps restarting (systemd's `NRestarts` and
/// `ActiveState`), and why. Pure.
pub fn player_gave_up(restarts: u32, active_state: &str) -> Option<String> {
    if active_state == "failed" {
        Some(format!("its systemd unit failed after {restarts} restarts"))
    } else if restarts >= PLAYER_RESTARTS_GIVE_UP {
        Some(format!(
            "its systemd unit restarted {restarts} times (the check gives up at {PLAYER_RESTARTS_GIVE_UP})"
        ))
    } else {
        None
    }
}

/// `systemctl show UNIT -p NRestarts -p ActiveState` output -> (restarts, state). Pure.
pub fn parse_unit_state(out: &str) -> Option<(u32, String)> {
    let mut restarts = None;
    let mut state = None;
    for line in out.lines() {
        if let Some(v) = line.strip_prefix("NRestarts=") {
            restarts = v.trim().parse().ok();
        } else if let Some(v) = line.strip_prefix("ActiveState=") {
            state = Some(v.trim().to_string());
        }
    }
    Some((restarts?, state?))
}

fn player_unit_state(unit: &str) -> Option<(u32, String)> {
    let out = std::process::Command::new("systemctl")
        .args(["show", unit, "-p", "NRestarts", "-p", "ActiveState"])
        .output()
        .ok()?;
    parse_unit_state(&String::from_utf8_lossy(&out.stdout))
}

/// sshd's greeting is `SSH-2.0-...` (RFC 4253 4.2). Pure.
pub fn is_ssh_banner(first: &[u8]) -> bool {
    first.starts_with(b"SSH-2.0-") || first.starts_with(b"SSH-1.99-")
}

/// Connects to `addr` and reads the first line.
pub fn ssh_banner(addr: SocketAddr, timeout: Duration) -> Result<String, String> {
    let mut s = TcpStream::connect_timeout(&addr, timeout).map_err(|e| format!("{addr}: {e}"))?;
    s.set_read_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    let mut buf = [0u8; 255];
    let mut n = 0;
    while n < buf.len() {
        match s.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => {
                n += k;
                if buf[..n].contains(&b'\n') {
                    break;
                }
            }
            Err(e) => return Err(format!("{addr}: reading the banner: {e}")),
        }
    }
    let line = String::from_utf8_lossy(&buf[..n]).trim().to_string();
    if is_ssh_banner(&buf[..n]) {
        Ok(line)
    } else {
        Err(format!("{addr} answered {line:?}, not an SSH banner"))
    }
}

fn check(name: &str, r: Result<String, String>) -> HealthCheck {
    match r {
        Ok(detail) => HealthCheck {
            name: name.into(),
            ok: true,
            detail,
        },
        Err(detail) => HealthCheck {
            name: name.into(),
            ok: false,
            detail,
        },
    }
}

/// The checks besides the player's, read once.
fn other_checks(o: &HealthOpts) -> Vec<HealthCheck> {
    let marker = o.update.store_root.join(pfx_store::MARKER);
    let data = if marker.is_file() {
        Ok(format!("{} is there", marker.display()))
    } else {
        Err(format!(
            "{} is missing: the data partition is not mounted at {}",
            marker.display(),
            o.update.store_root.display()
        ))
    };
    let pause = match o.backend.read(&o.iface) {
        Ok(r) => match r.pause {
            Some(p) if p.is_off() => Ok(format!("{}: PAUSE {p}", o.iface)),
            Some(p) => Err(format!("{}: PAUSE {p}, not off", o.iface)),
            None => Err(format!(
                "{}: the driver reports no PAUSE settings ({})",
                o.iface,
                r.pause_error.unwrap_or_default()
            )),
        },
        Err(e) => Err(format!("{}: {e}", o.iface)),
    };
    let sshd = ssh_banner(o.ssh_addr, Duration::from_secs(3));
    let status = agent_status(o);
    vec![
        check("data_mounted", data),
        check("pause_off", pause),
        check("sshd", sshd),
        check("agent_status", status),
    ]
}

fn agent_status(o: &HealthOpts) -> Result<String, String> {
    let (prog, args) = o.status_cmd.split_first().ok_or("no status command")?;
    let out = std::process::Command::new(prog)
        .args(args)
        .output()
        .map_err(|e| format!("{prog}: {e}"))?;
    let r: pfx_api::agent::StatusReport = serde_json::from_slice(&out.stdout).map_err(|e| {
        format!(
            "pfx-agent status did not answer its report ({e}): {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )
    })?;
    if r.unit != o.update.unit_id {
        return Err(format!("pfx-agent status answered as {:?}", r.unit));
    }
    Ok(format!(
        "pfx-agent status answers as {} (agent {})",
        r.unit, r.agent_version
    ))
}

fn player_reading(o: &HealthOpts) -> (Option<u64>, Result<(), String>) {
    let t = Duration::from_secs(2);
    let frames = crate::http::request("GET", &o.profile_url, &[], None, t)
        .ok()
        .filter(|r| r.status == 200)
        .and_then(|r| serde_json::from_slice::<pfx_api::profile::ProfileDoc>(&r.body).ok())
        .map(|d| d.snapshot.since_start.frames);
    let health = match crate::http::request("GET", &o.health_url, &[], None, t) {
        Ok(r) if r.status == 200 => Ok(()),
        Ok(r) => Err(format!(
            "HTTP {}: {}",
            r.status,
            String::from_utf8_lossy(&r.body)
                .lines()
                .next()
                .unwrap_or("")
                .trim()
        )),
        Err(e) => Err(e.to_string()),
    };
    (frames, health)
}

/// The verdict: passed when every check did. Pure.
pub fn verdict(checks: &[HealthCheck]) -> bool {
    !checks.is_empty() && checks.iter().all(|c| c.ok)
}

/// What to do with a verdict. Pure.
pub fn action_for(passed: bool, trial: bool) -> HealthAction {
    match (passed, trial) {
        (true, _) => HealthAction::MarkedGood,
        (false, true) => HealthAction::MarkedBadRebooting,
        (false, false) => HealthAction::RecordedOnly,
    }
}

/// The report as it starts: which boot this is (trial or not, its id), and the booted
/// slot and version as RAUC tells them.
fn begin_report(u: &UpdateOpts, started: u64) -> HealthReport {
    let mut r = HealthReport {
        unit: u.unit_id.clone(),
        started_unix_ms: started,
        message: "checking".into(),
        ..Default::default()
    };
    r.trial = std::fs::read_to_string(&u.cmdline_file)
        .map(|c| updateagent::is_trial(&c))
        .unwrap_or(false);
    r.boot_id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()
        .map(|s| s.trim().to_string());
    match updateagent::rauc_status(u) {
        Ok(st) => {
            r.slot = st.booted.clone();
            r.version = st.booted_info().and_then(|s| s.version.clone());
        }
        Err(e) => r.errors.push(e),
    }
    r
}

/// The player's two checks as the watch has them now: a first frame, then healthy for
/// long enough after it.
fn player_checks(
    o: &HealthOpts,
    watch: &PlayerWatch,
    started: u64,
    player_ok: bool,
) -> Vec<HealthCheck> {
    vec![
        HealthCheck {
            name: "first_frame".into(),
            ok: watch.first_frame_ms.is_some(),
            detail: match watch.first_frame_ms {
                Some(t) => format!(
                    "first frame {} ms after the check began",
                    t.saturating_sub(started)
                ),
                None => "no frame yet".into(),
            },
        },
        HealthCheck {
            name: "health_ok".into(),
            ok: player_ok,
            detail: format!("{} (needs {} s)", watch.last, o.ok_for.as_secs()),
        },
    ]
}

/// Polls the player until every check passes, the player's service has given up, or the
/// deadline; the checks as they stood then.
fn watch_checks(o: &HealthOpts, started: u64) -> Vec<HealthCheck> {
    let mut watch = PlayerWatch::default();
    let ok_ms = o.ok_for.as_millis() as u64;
    let deadline = started + o.deadline.as_millis() as u64;
    loop {
        let (frames, health) = player_reading(o);
        let now = now_ms();
        let player_ok = watch.feed(now, frames, health, ok_ms);
        let mut checks = player_checks(o, &watch, started, player_ok);
        if player_ok {
            checks.extend(other_checks(o));
            if verdict(&checks) {
                return checks;
            }
        }
        let gave_up = o
            .player_unit
            .as_deref()
            .and_then(player_unit_state)
            .and_then(|(n, st)| player_gave_up(n, &st));
        if let Some(why) = gave_up {
            checks[1].ok = false;
            checks[1].detail = format!("the player is not running: {why}");
            checks.truncate(2);
            checks.extend(other_checks(o));
            return checks;
        }
        if now_ms() >= deadline {
            if !player_ok {
                checks.extend(other_checks(o));
            }
            return checks;
        }
        std::thread::sleep(o.poll);
    }
}

/// Tells RAUC the verdict on the booted slot (good, or bad for a failed trial boot); a
/// refusal turns the action into [`HealthAction::MarkFailed`].
fn mark_booted(u: &UpdateOpts, r: &mut HealthReport) {
    let m = match r.action {
        HealthAction::MarkedGood => "mark-good",
        HealthAction::MarkedBadRebooting => "mark-bad",
        _ => return,
    };
    match crate::rauc::run(&u.rauc, &["status", m, "booted"], Duration::from_secs(60)) {
        Ok(ran) if ran.ok => {}
        Ok(ran) => {
            r.errors
                .push(format!("rauc status {m} booted: {}", ran.why()));
            r.action = HealthAction::MarkFailed;
        }
        Err(e) => {
            r.errors.push(e);
            r.action = HealthAction::MarkFailed;
        }
    }
}

/// The report's message for its action; `failed` is the failed checks, one line each.
fn message_for(r: &HealthReport, failed: &[String]) -> String {
    let slot = r.slot.clone().unwrap_or_else(|| "?".into());
    match r.action {
        HealthAction::MarkedGood => format!("slot {slot} healthy: marked good"),
        HealthAction::MarkedBadRebooting => format!(
            "slot {slot}'s trial boot failed ({}): marked bad, rebooting into the other slot",
            failed.join("; ")
        ),
        HealthAction::RecordedOnly => format!(
            "slot {slot} is not healthy ({}); not a trial boot, so it stays (recorded only)",
            failed.join("; ")
        ),
        HealthAction::MarkFailed => format!(
            "slot {slot}: RAUC refused the mark: {}",
            r.errors.join("; ")
        ),
    }
}

/// Writes the finished report to health.json, and for a trial boot to
/// health-trial.json too; a failed write is one more error in the report.
fn record(u: &UpdateOpts, r: &mut HealthReport) {
    if let Err(e) = updateagent::write_json(&u.health_file(), r) {
        r.errors.push(e);
    }
    if r.trial
        && let Err(e) = updateagent::write_json(&u.trial_health_file(), r)
    {
        r.errors.push(e);
    }
}

/// Runs the health commit. Returns the report (also written to health.json, and for a
/// trial boot to health-trial.json) and the exit status.
pub fn commit(o: &HealthOpts) -> (HealthReport, u8) {
    let u = &o.update;
    let started = now_ms();
    let mut r = begin_report(u, started);
    // In progress, so `update status` never shows the last boot's verdict as this one's.
    let _ = updateagent::write_json(&u.health_file(), &r);
    let checks = watch_checks(o, started);
    r.passed = verdict(&checks) && r.errors.is_empty();
    r.checks = checks;
    r.action = action_for(r.passed, r.trial);
    let failed: Vec<String> = r
        .checks
        .iter()
        .filter(|c| !c.ok)
        .map(|c| format!("{}: {}", c.name, c.detail))
        .collect();
    mark_booted(u, &mut r);
    r.message = message_for(&r, &failed);
    r.finished_unix_ms = now_ms();
    record(u, &mut r);
    if r.action == HealthAction::MarkedBadRebooting {
        reboot(u);
    }
    let code = if r.passed { 0 } else { 1 };
    (r, code)
}

fn reboot(u: &UpdateOpts) {
    if let Some((p, a)) = u.reboot.split_first() {
        let _ = std::process::Command::new(p).args(a).status();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_player_must_stay_healthy_after_its_first_frame() {
        let mut w = PlayerWatch::default();
        let ok = || Ok(());
        assert!(!w.feed(0, None, Err("refused".into()), 3000));
        // /health ok before any frame does not count.
        assert!(!w.feed(1000, Some(0), ok(), 3000));
        assert_eq!(w.first_frame_ms, None);
        assert!(!w.feed(2000, Some(5), ok(), 3000));
        assert!(!w.feed(4000, Some(100), ok(), 3000));
        // A break resets the streak.
        assert!(!w.feed(4500, Some(120), Err("HTTP 503: loop late".into()), 3000));
        assert!(w.last.contains("loop late"), "{}", w.last);
        assert!(!w.feed(5000, Some(150), ok(), 3000));
        assert!(!w.feed(7999, Some(250), ok(), 3000));
        assert!(w.feed(8000, Some(260), ok(), 3000));
        assert_eq!(w.first_frame_ms, Some(2000));
    }

    #[test]
    fn a_player_that_keeps_restarting_fails_the_check_at_once() {
        assert_eq!(player_gave_up(0, "active"), None);
        assert_eq!(player_gave_up(2, "activating"), None);
        assert!(player_gave_up(3, "activating").is_some_and(|w| w.contains("3 times")));
        assert!(player_gave_up(0, "failed").is_some_and(|w| w.contains("failed")));
        assert_eq!(
            parse_unit_state("NRestarts=4\nActiveState=activating\n"),
            Some((4, "activating".into()))
        );
        assert_eq!(parse_unit_state("ActiveState=active\n"), None);
        assert_eq!(parse_unit_state("NRestarts=x\nActiveState=active\n"), None);
    }

    #[test]
    fn verdicts_and_what_they_do() {
        let c = |ok| HealthCheck {
            name: "x".into(),
            ok,
            detail: String::new(),
        };
        assert!(verdict(&[c(true), c(true)]));
        assert!(!verdict(&[c(true), c(false)]));
        assert!(!verdict(&[]));
        assert_eq!(action_for(true, true), HealthAction::MarkedGood);
        assert_eq!(action_for(true, false), HealthAction::MarkedGood);
        assert_eq!(action_for(false, true), HealthAction::MarkedBadRebooting);
        assert_eq!(action_for(false, false), HealthAction::RecordedOnly);
        assert_eq!(
            health_url_for("http://127.0.0.1:8080/profile"),
            "http://127.0.0.1:8080/health"
        );
    }

    #[test]
    fn ssh_banners() {
        assert!(is_ssh_banner(b"SSH-2.0-OpenSSH_10.0p2 Debian-5\r\n"));
        assert!(!is_ssh_banner(b"HTTP/1.1 400 Bad Request\r\n"));
        assert!(!is_ssh_banner(b""));
    }

    /// A real TCP listener that greets as sshd does, one that greets otherwise, and a
    /// port where nothing listens.
    #[test]
    fn the_sshd_check_reads_a_real_socket() {
        use std::io::Write;
        let serve = |greeting: &'static [u8]| {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let a = l.local_addr().unwrap();
            std::thread::spawn(move || {
                if let Ok((mut s, _)) = l.accept() {
                    let _ = s.write_all(greeting);
                    std::thread::sleep(Duration::from_millis(200));
                }
            });
            a
        };
        let a = serve(b"SSH-2.0-OpenSSH_10.0\r\n");
        assert_eq!(
            ssh_banner(a, Duration::from_secs(2)).unwrap(),
            "SSH-2.0-OpenSSH_10.0"
        );
        let b = serve(b"220 smtp ready\r\n");
        assert!(
            ssh_banner(b, Duration::from_secs(2))
                .unwrap_err()
                .contains("not an SSH banner")
        );
        let dead = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        assert!(ssh_banner(dead, Duration::from_secs(1)).is_err());
    }
}
