//! `pfx-fleet push update BUNDLE --site S`: new software on the units of a site, in
//! waves (a canary, then a share, then the rest). Per unit: what does it run and hold
//! (`update status`), send what it lacks (`update put`, resumable), install into the
//! other slot (`update install`), switch when the operator said (`update switch`), then
//! read back until the unit runs the new slot, marked good, healthy, at the bundle's
//! version. A wave starts only when every unit of the one before it reads back so; the
//! run stops at the first unit that rolls back or does not come back in time. Every
//! result is committed to the state database before it is printed (docs/update.md,
//! "Rolling out").

use crate::agent::now_ms;
use crate::config::{FleetConfig, SshConfig};
use crate::db::{Counts, DbError, FleetDb, UnitRow, UpdateEvent};
use crate::gate::UnitState;
use crate::showpush::{Bars, PLAIN_STEP, answer, human_bytes, remote, slice};
use crate::ssh;
use pfx_api::update::{
    BundleInfo, InstallReport, SwitchMode, SwitchReport, UpdatePutReport, UpdateStatus,
};
use std::io::Read;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

/// The bundle on the operator's disk, with what it says it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalBundle {
    pub path: PathBuf,
    pub info: BundleInfo,
    /// Where version and compatible came from: `rauc info` or the sidecar.
    pub source: String,
}

/// The sidecar of `DIR/NAME.raucb`: `DIR/NAME.json`, else `DIR/NAME.raucb.json`.
pub fn sidecar_paths(bundle: &Path) -> Vec<PathBuf> {
    let mut v = vec![bundle.with_extension("json")];
    let mut s = bundle.as_os_str().to_owned();
    s.push(".json");
    v.push(PathBuf::from(s));
    v.dedup();
    v
}

/// `prog` in `$PATH` (the operator's `rauc`, when installed).
pub fn find_on_path(prog: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(prog))
            .find(|c| c.is_file())
    })
}

/// The bundle's sidecar, the first of [`sidecar_paths`] there is, when its sha256 and
/// size are the bundle's (`sha`, `size`); None when there is none.
fn read_sidecar(
    path: &Path,
    sha: &str,
    size: u64,
) -> Result<Option<(PathBuf, BundleInfo)>, String> {
    for p in sidecar_paths(path) {
        match std::fs::read(&p) {
            Ok(b) => {
                let i: BundleInfo = serde_json::from_slice(&b).map_err(|e| {
                    format!(
                        "{}: not a bundle sidecar {{version, compatible, sha256, size}}: {e}",
                        p.display()
                    )
                })?;
                if i.sha256 != sha || i.size != size {
                    return Err(format!(
                        "{}: says sha256 {} and {} bytes, but {} has sha256 {sha} and {size} bytes: the sidecar belongs to another build",
                        p.display(),
                        i.sha256,
                        i.size,
                        path.display()
                    ));
                }
                return Ok(Some((p, i)));
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(format!("{}: {e}", p.display())),
        }
    }
    Ok(None)
}

/// What `rauc info` reads of the bundle, when `rauc` is given; a failure of rauc is only
/// a warning when there is a sidecar to fall back on (`have_sidecar`).
fn read_rauc_info(
    path: &Path,
    keyring: Option<&Path>,
    rauc: Option<&Path>,
    have_sidecar: bool,
) -> Result<Option<crate::rauc::Info>, String> {
    let Some(r) = rauc else {
        return Ok(None);
    };
    let b = path.display().to_string();
    let kr = keyring.map(|k| format!("--keyring={}", k.display()));
    let mut args: Vec<&str> = Vec::new();
    if let Some(k) = &kr {
        args.push(k);
    }
    args.push("info");
    if kr.is_none() {
        args.push("--no-verify");
    }
    args.extend(["--output-format=json", &b]);
    let ran = crate::rauc::run(r, &args, Duration::from_secs(120))?;
    if ran.ok {
        Ok(Some(crate::rauc::parse_info(&ran.stdout)?))
    } else if have_sidecar {
        eprintln!(
            "pfx-fleet: warning: rauc info {}: {}; using the sidecar",
            path.display(),
            ran.why()
        );
        Ok(None)
    } else {
        Err(format!("rauc info {}: {}", path.display(), ran.why()))
    }
}

/// The bundle as `rauc info` reads it, checked against the sidecar when there is one.
fn bundle_from_rauc(
    path: &Path,
    i: crate::rauc::Info,
    side: Option<(PathBuf, BundleInfo)>,
    sha: String,
    size: u64,
) -> Result<LocalBundle, String> {
    let version = i
        .version
        .ok_or_else(|| format!("{}: the bundle's manifest has no version", path.display()))?;
    if let Some((p, s)) = &side
        && (s.version != version || s.compatible != i.compatible)
    {
        return Err(format!(
            "{} says {} for {}, but rauc info reads {version} for {}: the sidecar belongs to another build",
            p.display(),
            s.version,
            s.compatible,
            i.compatible
        ));
    }
    Ok(LocalBundle {
        path: path.to_path_buf(),
        info: BundleInfo {
            version,
            compatible: i.compatible,
            sha256: sha,
            size,
        },
        source: "rauc info".into(),
    })
}

/// Reads the bundle: its sha256 and size from the file itself; its version and
/// compatible from `rauc info` when `rauc` is installed here (verified with `keyring`
/// when given, else `--no-verify`: the unit verifies it in any case), else from the
/// sidecar `BUNDLE.json` that `pfx-image bundle` writes. When both are there they must
/// agree, and a sidecar's sha256 and size must be the file's.
pub fn read_bundle(
    path: &Path,
    keyring: Option<&Path>,
    rauc: Option<&Path>,
) -> Result<LocalBundle, String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if !meta.is_file() {
        return Err(format!("{}: not a file", path.display()));
    }
    let sha = pfx_store::hash_file(path)
        .map_err(|e| e.to_string())?
        .to_string();
    let size = meta.len();
    let side = read_sidecar(path, &sha, size)?;
    let from_rauc = read_rauc_info(path, keyring, rauc, side.is_some())?;
    match (from_rauc, side) {
        (Some(i), side) => bundle_from_rauc(path, i, side, sha, size),
        (None, Some((p, info))) => Ok(LocalBundle {
            path: path.to_path_buf(),
            info,
            source: p.display().to_string(),
        }),
        (None, None) => Err(format!(
            "{}: no rauc here to read the bundle with, and no sidecar {}: install rauc, or keep the BUNDLE.json that pfx-image bundle wrote beside it",
            path.display(),
            sidecar_paths(path)
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(" or ")
        )),
    }
}

/// The waves over `n` units in order: the first `canary`, then `pct` % of all (at least
/// one), then the rest. Pure.
pub fn waves(n: usize, canary: usize, pct: u32) -> Vec<std::ops::Range<usize>> {
    let c = canary.clamp(1, n.max(1)).min(n);
    let share = ((n as u64 * pct as u64).div_ceil(100) as usize).max(1);
    let second = (c + share).min(n);
    [0..c, c..second, second..n]
        .into_iter()
        .filter(|r| !r.is_empty())
        .collect()
}

/// What a read-back says about the unit, for the bundle `want` (its version) and the
/// slot it ran before (`old`). Pure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Phase {
    /// On the new slot, marked good, its health check passed on this slot and version.
    Committed,
    /// Back on the old slot, the new one bad: the reason, in words.
    RolledBack(String),
    /// Not yet: why, in words.
    Waiting(String),
}

pub fn judge(st: &UpdateStatus, want: &str, old: Option<&str>) -> Phase {
    let booted = st.booted.as_deref();
    let bs = st.booted_slot_info();
    let version_ok = st.booted_version.as_deref() == Some(want);
    let good = bs.and_then(|s| s.boot_status.as_deref()) == Some("good");
    let healthy = st.health.as_ref().is_some_and(|h| {
        h.passed
            && h.finished_unix_ms > 0
            && h.slot.as_deref() == booted
            && h.version.as_deref() == Some(want)
    });
    let new_slot = booted.is_some() && booted != old;
    if version_ok && good && healthy && (old.is_none() || new_slot) {
        return Phase::Committed;
    }
    if let Some(p) = &st.pending_switch {
        return Phase::Waiting(if p.armed {
            format!(
                "switch pending ({}) at {}",
                p.mode.as_str(),
                crate::gate::utc(p.at_unix_ms)
            )
        } else {
            format!(
                "the pending switch's timer is gone ({}): run push update again",
                p.reason
            )
        });
    }
    if new_slot || (old.is_none() && version_ok) {
        return Phase::Waiting(match &st.health {
            Some(h) if h.finished_unix_ms == 0 => "trial boot: health check running".into(),
            Some(h) if !h.passed && h.slot.as_deref() == booted => {
                format!("trial boot unhealthy: {}", h.message)
            }
            _ => "trial boot: not committed yet".into(),
        });
    }
    // On the old slot. Rolled back when the boot order no longer names the new slot.
    let other = st
        .slots
        .iter()
        .find(|s| s.bootname.is_some() && s.bootname.as_deref() != booted);
    let other_bad = other.and_then(|s| s.boot_status.as_deref()) == Some("bad");
    let primary_old = st.boot_primary.as_deref() == booted;
    let other_new = other.and_then(|s| s.version.as_deref()) == Some(want);
    if other_new && other_bad && primary_old && old.is_some() {
        let why = st
            .last_trial
            .as_ref()
            .filter(|h| !h.passed && h.version.as_deref() == Some(want))
            .map(|h| format!("its trial boot failed: {}", h.message))
            .unwrap_or_else(|| {
                "the new slot did not commit (hang or crash: the boot counter went back)".into()
            });
        return Phase::RolledBack(format!(
            "rolled back to slot {} ({}): {why}",
            booted.unwrap_or("?"),
            st.booted_version.as_deref().unwrap_or("?")
        ));
    }
    Phase::Waiting(format!(
        "still on slot {} (next boot: {})",
        booted.unwrap_or("?"),
        st.boot_primary.as_deref().unwrap_or("?")
    ))
}

/// A unit's time `unit_ms` on the operator's clock, from the unit's clock read at
/// `unit_read_ms` and received here at `here_ms`. The difference also holds the answer's
/// way back over SSH (up to a second or so), so below 2 s it is taken as agreeing clocks:
/// `--switch at 23:59` is then said as 23:59:00, not 23:58:59. Pure.
pub fn operator_time(unit_ms: u64, unit_read_ms: u64, here_ms: u64) -> u64 {
    let skew = here_ms as i64 - unit_read_ms as i64;
    let skew = if skew.abs() < 2000 { 0 } else { skew };
    (unit_ms as i64 + skew).max(0) as u64
}

/// `--switch at TIME`: `HH:MM` (the next such time on this machine's clock, local time)
/// or RFC 3339 (`2026-12-03T02:30:00+01:00`, `...Z`), as Unix seconds. Pure but for the
/// local time zone of `HH:MM`.
pub fn parse_switch_time(s: &str, now_s: i64) -> Result<i64, String> {
    if let Some((h, m)) = crate::updateagent::parse_clock(s) {
        return Ok(crate::updateagent::next_clock(now_s, h, m));
    }
    parse_rfc3339(s).ok_or_else(|| {
        format!(
            "--switch at {s:?}: give HH:MM (this machine's local time) or 2026-12-03T02:30:00+01:00"
        )
    })
}

fn parse_rfc3339(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let t = s.get(r)?;
        t.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| t.parse().ok())?
    };
    if b.len() < 16
        || b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b'T' | b't' | b' ')
        || b[13] != b':'
    {
        return None;
    }
    let (y, mo, d, h, mi) = (
        num(0..4)?,
        num(5..7)?,
        num(8..10)?,
        num(11..13)?,
        num(14..16)?,
    );
    let mut i = 16;
    let mut sec = 0;
    if b.get(i) == Some(&b':') {
        sec = num(17..19)?;
        i = 19;
    }
    let off = match b.get(i..)? {
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), ..] if b.len() == i + 6 && b[i + 3] == b':' => {
            let o = num(i + 1..i + 3)? * 3600 + num(i + 4..i + 6)? * 60;
            if *sign == b'+' { o } else { -o }
        }
        _ => return None,
    };
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    // Days from the civil date (Howard Hinnant's algorithm).
    let (y2, m2) = if mo <= 2 {
        (y - 1, mo + 9)
    } else {
        (y, mo - 3)
    };
    let era = y2.div_euclid(400);
    let yoe = y2 - era * 400;
    let doy = (153 * m2 + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86_400 + h * 3600 + mi * 60 + sec - off)
}

/// When to switch, as the fleet asks each unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Switch {
    Now,
    Idle,
    /// Unix seconds.
    At(i64),
}

impl Switch {
    fn verb(&self) -> String {
        match self {
            Switch::Now => "update switch now".into(),
            Switch::Idle => "update switch idle".into(),
            Switch::At(t) => format!("update switch at {t}"),
        }
    }
}

pub struct UpdatePushOpts {
    pub parallel: usize,
    pub chunk_bytes: u64,
    pub canary: usize,
    pub wave_pct: u32,
    pub switch: Switch,
    /// How long a unit may take from its switch to its commit.
    pub timeout: Duration,
    pub force: bool,
    /// Between two read-backs of a unit that is switching.
    pub poll: Duration,
    pub operator: String,
    pub args: String,
    pub site: Option<String>,
    pub bars: bool,
    pub json: bool,
}

#[derive(Debug, Default, serde::Serialize)]
pub struct UnitResult {
    pub unit: String,
    pub wave: usize,
    pub state: String,
    pub phase: String,
    pub reason: Option<String>,
    pub bytes_sent: u64,
    /// When it switched or will switch (Unix ms, the operator's clock).
    pub switch_at_unix_ms: Option<u64>,
    pub software: Option<String>,
}

#[derive(Debug, Default, serde::Serialize)]
pub struct UpdatePushSummary {
    pub run_id: i64,
    pub bundle: String,
    pub version: String,
    pub compatible: String,
    pub sha256: String,
    pub size: u64,
    pub waves: Vec<usize>,
    pub targets: usize,
    pub skipped_done: usize,
    pub done: usize,
    pub pending: usize,
    pub failed: usize,
    /// The unit the run stopped at, and why; None when every wave completed.
    pub stopped_at: Option<String>,
    pub stop_reason: Option<String>,
    pub units: Vec<UnitResult>,
}

/// What one unit's update came to.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct UnitOutcome {
    pub state: Option<UnitState>,
    /// How far it got: `status`, `transfer`, `install`, `switch`, `stopped`, `waiting`,
    /// `rolled_back`, `timeout`, `committed`.
    pub phase: String,
    pub reason: Option<String>,
    /// The last `update status` (JSON) when there was one.
    pub readback: Option<String>,
    pub software: Option<String>,
    pub bytes_sent: u64,
    pub switch_at_ms: Option<u64>,
    /// This unit stops the run (it rolled back or did not come back).
    pub stops: bool,
}

enum Msg {
    Started(UnitRow),
    Planned(String, u64),
    Progress(String, u64),
    /// unit, when it will switch (operator ms), the unit's words
    Switching(String, u64, String),
    Finished(UnitRow, UnitOutcome),
}

struct Job {
    ssh: SshConfig,
    socket: Option<PathBuf>,
    prefix: String,
    bundle: Arc<LocalBundle>,
    o: Arc<UpdateCtx>,
}

/// What every worker shares.
struct UpdateCtx {
    chunk: u64,
    switch: Switch,
    timeout: Duration,
    force: bool,
    poll: Duration,
    stop: Arc<AtomicBool>,
    stop_why: Mutex<Option<String>>,
}

fn fail(phase: &str, state: UnitState, why: String) -> UnitOutcome {
    UnitOutcome {
        state: Some(state),
        phase: phase.into(),
        reason: Some(why),
        ..Default::default()
    }
}

/// One SSH command to the unit's agent.
fn go(
    job: &Job,
    u: &UnitRow,
    verb: &str,
    input: Option<(&mut dyn Read, &AtomicU64)>,
    timeout: Duration,
    share: bool,
) -> ssh::Raw {
    let r = remote(&job.prefix, verb);
    let via = ssh::Via::shared(job.socket.as_deref().filter(|_| share));
    let input = input.map(|(from, sent)| ssh::Input { from, sent });
    ssh::run_for(&job.ssh, &u.host, u.port, &r, via, input, timeout)
}

fn read_status(
    job: &Job,
    u: &UnitRow,
    share: bool,
) -> Result<(UpdateStatus, String), (UnitState, String)> {
    let t = job.ssh.command_timeout_s;
    let raw = go(
        job,
        u,
        "update status --json",
        None,
        Duration::from_secs(t),
        share,
    );
    let st: UpdateStatus = answer(&raw, &u.unit_id, "update status", t)?;
    let text = serde_json::to_string(&st).unwrap_or_default();
    Ok((st, text))
}

/// Whether the bundle is installed in the other slot already (nothing to send or
/// install: only the switch is left).
fn installed_here(st: &UpdateStatus, b: &BundleInfo) -> bool {
    st.installed_bundle.as_deref() == Some(b.sha256.as_str())
        && st.slots.iter().any(|s| {
            s.bootname.is_some()
                && s.bootname != st.booted
                && s.version.as_deref() == Some(b.version.as_str())
        })
}

/// Reports a chunk's progress while it goes: what `sent` gained, every 100 ms and once
/// more when `done` is set.
fn watch_progress(
    sent: Arc<AtomicU64>,
    done: Arc<AtomicBool>,
    tx: mpsc::Sender<Msg>,
    unit: String,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut last = 0;
        loop {
            let fin = done.load(Ordering::Relaxed);
            let now = sent.load(Ordering::Relaxed);
            if now > last {
                let _ = tx.send(Msg::Progress(unit.clone(), now - last));
                last = now;
            }
            if fin {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    })
}

/// One unit's update as it goes. Each step either goes on or breaks with the unit's
/// outcome (`ControlFlow::Break`): where it stopped and why.
struct UnitUpdate<'a> {
    job: &'a Job,
    u: &'a UnitRow,
    tx: &'a mpsc::Sender<Msg>,
}

impl UnitUpdate<'_> {
    /// Step 1: what does it run, and what does it hold? Ends here when the bundle is
    /// not for this unit, or the unit already runs it committed.
    fn check_status(&self) -> ControlFlow<UnitOutcome, UpdateStatus> {
        let b = &self.job.bundle.info;
        let (st, text) = match read_status(self.job, self.u, true) {
            Ok(x) => x,
            Err((state, why)) => return ControlFlow::Break(fail("status", state, why)),
        };
        if let Some(c) = &st.compatible
            && *c != b.compatible
        {
            return ControlFlow::Break(fail(
                "status",
                UnitState::Failed,
                format!(
                    "the bundle is for {}, this unit is {c}: nothing sent",
                    b.compatible
                ),
            ));
        }
        if judge(&st, &b.version, None) == Phase::Committed {
            return ControlFlow::Break(UnitOutcome {
                state: Some(UnitState::Done),
                phase: "committed".into(),
                reason: Some(format!(
                    "already runs {} on slot {}, committed and healthy",
                    b.version,
                    st.booted.as_deref().unwrap_or("?")
                )),
                software: st.booted_version.clone(),
                readback: Some(text),
                ..Default::default()
            });
        }
        ControlFlow::Continue(st)
    }

    /// Step 2: sends what the unit lacks, chunk by chunk from what it has staged.
    fn send(&self, st: &UpdateStatus, out: &mut UnitOutcome) -> ControlFlow<UnitOutcome> {
        let b = &self.job.bundle.info;
        let mut offset = st
            .staged
            .iter()
            .find(|s| s.hash == b.sha256)
            .map(|s| s.have.min(b.size))
            .unwrap_or(0);
        let _ = self
            .tx
            .send(Msg::Planned(self.u.unit_id.clone(), b.size - offset));
        loop {
            let len = self.job.o.chunk.min(b.size - offset);
            let rep = self.put_chunk(offset, len, out)?;
            let errs: Vec<&String> = rep
                .errors
                .iter()
                .filter(|e| !e.starts_with("could not lower"))
                .collect();
            if !errs.is_empty() {
                let why = format!(
                    "update put: {}; run the push again to resume",
                    errs.iter()
                        .map(|e| e.as_str())
                        .collect::<Vec<_>>()
                        .join("; ")
                );
                return ControlFlow::Break(fail("transfer", UnitState::Failed, why).with(out));
            }
            if rep.stored {
                return ControlFlow::Continue(());
            }
            if rep.have != offset + len || rep.have >= b.size {
                let why = format!(
                    "update put: the unit holds {} bytes, expected {}; run the push again",
                    rep.have,
                    offset + len
                );
                return ControlFlow::Break(fail("transfer", UnitState::Failed, why).with(out));
            }
            offset = rep.have;
        }
    }

    /// One `update put` of `len` bytes at `offset`, its progress reported while it goes;
    /// what it sent is added to `out` whatever the answer.
    fn put_chunk(
        &self,
        offset: u64,
        len: u64,
        out: &mut UnitOutcome,
    ) -> ControlFlow<UnitOutcome, UpdatePutReport> {
        let (job, u) = (self.job, self.u);
        let (b, t) = (&job.bundle.info, job.ssh.command_timeout_s);
        let mut input = match slice(&job.bundle.path, offset, len) {
            Ok(r) => r,
            Err(e) => {
                return ControlFlow::Break(fail(
                    "transfer",
                    UnitState::Failed,
                    format!("{}: {e}", job.bundle.path.display()),
                ));
            }
        };
        let sent = Arc::new(AtomicU64::new(0));
        let done = Arc::new(AtomicBool::new(false));
        let watcher = watch_progress(
            Arc::clone(&sent),
            Arc::clone(&done),
            self.tx.clone(),
            u.unit_id.clone(),
        );
        let verb = format!("update put {} {} {offset} {len}", b.sha256, b.size);
        let raw = go(
            job,
            u,
            &verb,
            Some((&mut input, &sent)),
            Duration::from_secs(t + len / (64 * 1024)),
            true,
        );
        done.store(true, Ordering::Relaxed);
        let _ = watcher.join();
        out.bytes_sent += sent.load(Ordering::Relaxed);
        match answer(&raw, &u.unit_id, "update put", t) {
            Ok(r) => ControlFlow::Continue(r),
            Err((state, why)) => {
                let why = format!(
                    "{why} (sending the bundle at {offset} of {}); run the push again to resume",
                    b.size
                );
                ControlFlow::Break(fail("transfer", state, why).with(out))
            }
        }
    }

    /// Step 3: installs into the other slot (RAUC checks it first).
    fn install(&self, out: &UnitOutcome) -> ControlFlow<UnitOutcome> {
        let (job, u) = (self.job, self.u);
        let (b, t) = (&job.bundle.info, job.ssh.command_timeout_s);
        let verb = format!(
            "update install {}{}",
            b.sha256,
            if job.o.force { " --force" } else { "" }
        );
        let raw = go(job, u, &verb, None, Duration::from_secs(t + 3600), true);
        let rep: InstallReport = match answer(&raw, &u.unit_id, "update install", t) {
            Ok(r) => r,
            Err((state, why)) => {
                let why = format!(
                    "{why}; run the push again (an install is checked again from its start)"
                );
                return ControlFlow::Break(fail("install", state, why).with(out));
            }
        };
        if !rep.installed {
            let why = format!("update install: {}", rep.message);
            return ControlFlow::Break(fail("install", UnitState::Failed, why).with(out));
        }
        ControlFlow::Continue(())
    }

    /// Step 4: switches, unless another unit has stopped the run meanwhile; goes on with
    /// the time of the switch on the operator's clock.
    fn switch(&self, out: &mut UnitOutcome) -> ControlFlow<UnitOutcome, u64> {
        let (job, u) = (self.job, self.u);
        let t = job.ssh.command_timeout_s;
        if job.o.stop.load(Ordering::SeqCst) {
            let why = job
                .o
                .stop_why
                .lock()
                .ok()
                .and_then(|w| w.clone())
                .unwrap_or_default();
            let why = format!(
                "installed, not switched: the run stopped ({why}); run the push again once that is understood"
            );
            return ControlFlow::Break(fail("stopped", UnitState::Pending, why).with(out));
        }
        let raw = go(
            job,
            u,
            &job.o.switch.verb(),
            None,
            Duration::from_secs(t + 60),
            true,
        );
        let sw: SwitchReport = match answer(&raw, &u.unit_id, "update switch", t) {
            Ok(r) => r,
            // The reboot can take the answer with it: the read-backs below decide.
            Err((_, why)) if job.o.switch == Switch::Now && raw.exit == Some(255) => SwitchReport {
                mode: SwitchMode::Now,
                rebooting: true,
                message: format!("no answer to the switch ({why}): reading back"),
                read_at_unix_ms: now_ms(),
                at_unix_ms: Some(now_ms()),
                unit: u.unit_id.clone(),
                ..Default::default()
            },
            Err((state, why)) => {
                return ControlFlow::Break(fail("switch", state, why).with(out));
            }
        };
        if !sw.errors.is_empty() || !(sw.rebooting || sw.scheduled) {
            let why = format!("update switch: {}", sw.message);
            return ControlFlow::Break(fail("switch", UnitState::Failed, why).with(out));
        }
        // The unit's time of the switch on the operator's clock (unit clocks may be off).
        let at = operator_time(
            sw.at_unix_ms.unwrap_or(sw.read_at_unix_ms),
            sw.read_at_unix_ms,
            now_ms(),
        );
        out.switch_at_ms = Some(at);
        let _ = self
            .tx
            .send(Msg::Switching(u.unit_id.clone(), at, sw.message.clone()));
        ControlFlow::Continue(at)
    }

    /// Step 5: reads back until the unit commits, rolls back (from `old`, the slot it
    /// booted before), or the time after the switch at `at` is up.
    fn read_back(&self, at: u64, old: Option<&str>, mut out: UnitOutcome) -> UnitOutcome {
        let (job, u) = (self.job, self.u);
        let b = &job.bundle.info;
        let deadline =
            Instant::now() + Duration::from_millis(at.saturating_sub(now_ms())) + job.o.timeout;
        let mut last: String;
        loop {
            std::thread::sleep(job.o.poll);
            // A fresh connection each time: the shared one does not survive a reboot.
            match read_status(job, u, false) {
                Ok((st, text)) => {
                    out.software = st.booted_version.clone().or(out.software.take());
                    out.readback = Some(text);
                    match judge(&st, &b.version, old) {
                        Phase::Committed => {
                            out.state = Some(UnitState::Done);
                            out.phase = "committed".into();
                            out.reason = Some(format!(
                                "runs {} on slot {}, marked good and healthy",
                                b.version,
                                st.booted.as_deref().unwrap_or("?")
                            ));
                            return out;
                        }
                        Phase::RolledBack(why) => {
                            out.state = Some(UnitState::Failed);
                            out.phase = "rolled_back".into();
                            out.reason = Some(why);
                            out.stops = true;
                            return out;
                        }
                        Phase::Waiting(w) => last = w,
                    }
                }
                Err((_, why)) => last = format!("not answering ({why})"),
            }
            if Instant::now() >= deadline {
                out.state = Some(UnitState::Failed);
                out.phase = "timeout".into();
                out.reason = Some(format!(
                    "did not come back committed within {} s of its switch: {last}",
                    job.o.timeout.as_secs()
                ));
                out.stops = true;
                return out;
            }
        }
    }

    /// The steps in order: status, send, install, switch, read back.
    fn steps(&self) -> ControlFlow<UnitOutcome, UnitOutcome> {
        let b = &self.job.bundle.info;
        let st = self.check_status()?;
        let old = st.booted.clone();
        let mut out = UnitOutcome {
            software: st.booted_version.clone(),
            ..Default::default()
        };
        let installed_here = installed_here(&st, b);
        if !installed_here && st.ready.as_deref() != Some(b.sha256.as_str()) {
            self.send(&st, &mut out)?;
        }
        if !installed_here {
            self.install(&out)?;
        }
        let at = self.switch(&mut out)?;
        ControlFlow::Continue(self.read_back(at, old.as_deref(), out))
    }
}

/// Updates one unit. Pure of the database: the caller records the outcome.
fn update_unit(job: &Job, u: &UnitRow, tx: &mpsc::Sender<Msg>) -> UnitOutcome {
    match (UnitUpdate { job, u, tx }).steps() {
        ControlFlow::Break(out) | ControlFlow::Continue(out) => out,
    }
}

impl UnitOutcome {
    /// This outcome's state and phase with what `so_far` already holds (bytes, software).
    fn with(self, so_far: &UnitOutcome) -> UnitOutcome {
        UnitOutcome {
            bytes_sent: so_far.bytes_sent,
            software: so_far.software.clone(),
            readback: so_far.readback.clone(),
            ..self
        }
    }
}

/// One line of `--json` output: what happened, as it happened.
fn event(o: &UpdatePushOpts, v: serde_json::Value) {
    if o.json {
        println!("{v}");
    }
}

/// What every worker of the run shares: the operator's settings and the run's stop.
fn update_ctx(o: &UpdatePushOpts) -> Arc<UpdateCtx> {
    Arc::new(UpdateCtx {
        chunk: o.chunk_bytes,
        switch: o.switch,
        timeout: o.timeout,
        force: o.force,
        poll: o.poll,
        stop: Arc::new(AtomicBool::new(false)),
        stop_why: Mutex::new(None),
    })
}

/// The pool for one wave: one [`update_unit`] per unit, each reporting to `tx`. A unit
/// that stops the run says why (the first one's reason is kept) and sets the stop, so no
/// new unit starts.
fn spawn_wave(
    cfg: &FleetConfig,
    jobs: Vec<UnitRow>,
    o: &UpdatePushOpts,
    reuse: Option<Arc<ssh::ControlDir>>,
    ctx: &Arc<UpdateCtx>,
    bundle: &Arc<LocalBundle>,
    tx: mpsc::Sender<Msg>,
) -> crate::pool::Workers {
    let (ssh_cfg, agents, bnd, c) = (
        cfg.ssh.clone(),
        cfg.agent_commands(),
        Arc::clone(bundle),
        Arc::clone(ctx),
    );
    crate::pool::spawn(
        jobs,
        o.parallel,
        reuse,
        Some(Arc::clone(&ctx.stop)),
        move |_slot, u: UnitRow, socket| {
            if tx.send(Msg::Started(u.clone())).is_err() {
                return false;
            }
            let job = Job {
                ssh: ssh_cfg.clone(),
                socket,
                prefix: agents.prefix(&u.unit_id).to_string(),
                bundle: Arc::clone(&bnd),
                o: Arc::clone(&c),
            };
            let out = update_unit(&job, &u, &tx);
            if out.stops {
                if let Ok(mut w) = c.stop_why.lock() {
                    w.get_or_insert_with(|| {
                        format!("{}: {}", u.unit_id, out.reason.clone().unwrap_or_default())
                    });
                }
                c.stop.store(true, Ordering::SeqCst);
            }
            tx.send(Msg::Finished(u, out)).is_ok()
        },
    )
}

/// The main thread's side of the run: records every message as it arrives (the only
/// writer of the database), draws the transfers, prints the `--json` events and keeps
/// the summary.
struct Recorder<'a> {
    store: &'a FleetDb,
    run: &'a crate::push::OpenRun,
    b: &'a BundleInfo,
    o: &'a UpdatePushOpts,
    bars: &'a mut Bars,
    sum: &'a mut UpdatePushSummary,
}

impl Recorder<'_> {
    /// The wave's units still to update: one already done with this bundle is skipped.
    fn still_to_update(&mut self, units: &[UnitRow], wave: usize) -> Result<Vec<UnitRow>, DbError> {
        let (b, o) = (self.b, self.o);
        let mut jobs = Vec::new();
        for u in units {
            match self.store.latest_update(&u.unit_id, &b.sha256)? {
                Some(l) if l.state == UnitState::Done => {
                    self.bars.say(format!(
                        "skip {}: already done with this bundle ({})",
                        u.unit_id, b.version
                    ));
                    event(
                        o,
                        serde_json::json!({"event": "skip", "unit": u.unit_id, "wave": wave}),
                    );
                    self.sum.skipped_done += 1;
                }
                _ => jobs.push(u.clone()),
            }
        }
        Ok(jobs)
    }

    /// Records one wave's messages until its workers are done; whether every unit of it
    /// is done.
    fn record_wave(&mut self, wave: usize, rx: mpsc::Receiver<Msg>) -> Result<bool, DbError> {
        let mut wave_ok = true;
        for m in rx {
            match m {
                Msg::Started(u) => self.store.record_update(&UpdateEvent {
                    run_id: self.run.run_id,
                    unit_id: &u.unit_id,
                    site: u.site.as_deref(),
                    state: Some(UnitState::Started),
                    bundle_sha256: &self.b.sha256,
                    version: Some(&self.b.version),
                    recorded_ms: now_ms(),
                    ..Default::default()
                })?,
                Msg::Planned(unit, total) => {
                    self.bars.planned(unit.clone(), total);
                    event(
                        self.o,
                        serde_json::json!({"event": "transfer", "unit": unit, "bytes": total}),
                    );
                }
                Msg::Progress(unit, n) => self.progress(&unit, n),
                Msg::Switching(unit, at, words) => self.switching(&unit, at, &words),
                // Closing on a signal: nothing more is recorded (see OpenRun::closing).
                Msg::Finished(..) if self.run.closing() => {}
                Msg::Finished(u, out) => {
                    if !self.finished(wave, u, out)? {
                        wave_ok = false;
                    }
                }
            }
        }
        Ok(wave_ok)
    }

    /// A line (and an event) per 16 MiB sent to a unit, and when all is sent.
    fn progress(&mut self, unit: &str, n: u64) {
        let Some((before, sent, total)) = self.bars.advance(unit, n) else {
            return;
        };
        let crossed = sent / PLAIN_STEP > before / PLAIN_STEP || sent == total;
        if crossed {
            if !self.bars.draw {
                eprintln!(
                    "{unit}: {} of {} sent",
                    human_bytes(sent),
                    human_bytes(total)
                );
            }
            event(
                self.o,
                serde_json::json!({"event": "progress", "unit": unit, "sent": sent, "total": total}),
            );
        }
    }

    /// The unit has its switch: when (operator's clock) and in its own words.
    fn switching(&mut self, unit: &str, at: u64, words: &str) {
        self.bars.finished(unit);
        let when = if at <= now_ms() + 1500 {
            "now".to_string()
        } else {
            format!(
                "at {} UTC (in {})",
                crate::gate::utc(at),
                crate::gate::human_age(at - now_ms())
            )
        };
        self.bars.say(format!("{unit} switches {when}: {words}"));
        event(
            self.o,
            serde_json::json!({"event": "switch", "unit": unit, "at_unix_ms": at, "message": words}),
        );
    }

    /// Records a unit's outcome, then reports it; whether the unit is done. The first
    /// unit that stops the run is where the run stopped.
    fn finished(&mut self, wave: usize, u: UnitRow, out: UnitOutcome) -> Result<bool, DbError> {
        let (b, sum) = (self.b, &mut *self.sum);
        let state = out.state.unwrap_or(UnitState::Failed);
        self.store.record_update(&UpdateEvent {
            run_id: self.run.run_id,
            unit_id: &u.unit_id,
            site: u.site.as_deref(),
            state: Some(state),
            bundle_sha256: &b.sha256,
            version: Some(&b.version),
            phase: Some(&out.phase),
            reason: out.reason.as_deref(),
            readback: out.readback.as_deref(),
            software: out.software.as_deref(),
            bytes_sent: out.bytes_sent,
            switch_at_ms: out.switch_at_ms,
            recorded_ms: now_ms(),
        })?;
        self.bars.finished(&u.unit_id);
        // Printed only after the commit: whatever this line reports is on disk.
        self.bars.say(format!(
            "recorded {} {} ({}): {} ({} sent)",
            u.unit_id,
            state.as_str(),
            out.phase,
            out.reason.as_deref().unwrap_or(""),
            human_bytes(out.bytes_sent)
        ));
        event(
            self.o,
            serde_json::json!({"event": "recorded", "unit": u.unit_id, "wave": wave, "state": state.as_str(),
            "phase": out.phase, "reason": out.reason, "software": out.software, "bytes_sent": out.bytes_sent}),
        );
        Counts {
            done: &mut sum.done,
            pending: &mut sum.pending,
            failed: &mut sum.failed,
        }
        .count(state);
        let done = state == UnitState::Done;
        if !done && out.stops && sum.stopped_at.is_none() {
            sum.stopped_at = Some(u.unit_id.clone());
            sum.stop_reason = out.reason.clone();
        }
        sum.units.push(UnitResult {
            unit: u.unit_id,
            wave,
            state: state.as_str().into(),
            phase: out.phase,
            reason: out.reason,
            bytes_sent: out.bytes_sent,
            switch_at_unix_ms: out.switch_at_ms,
            software: out.software,
        });
        Ok(done)
    }

    /// A wave that did not complete stops the run: at its first unit not done, unless a
    /// unit already stopped it.
    fn stop_at_incomplete(&mut self, wave: usize) {
        let sum = &mut *self.sum;
        if sum.stopped_at.is_some() {
            return;
        }
        let first = sum
            .units
            .iter()
            .find(|r| r.wave == wave && r.state != "done");
        sum.stopped_at = first.map(|r| r.unit.clone());
        sum.stop_reason = first.map(|r| {
            format!(
                "wave {wave} is not complete ({} {}: {}); the next wave waits until every unit of this one is done",
                r.unit,
                r.state,
                r.reason.as_deref().unwrap_or("")
            )
        });
    }
}

/// Pushes the bundle to `targets` in waves.
pub fn push_update(
    store: &FleetDb,
    cfg: &FleetConfig,
    bundle: LocalBundle,
    targets: Vec<UnitRow>,
    o: &UpdatePushOpts,
) -> Result<UpdatePushSummary, DbError> {
    let b = bundle.info.clone();
    let plan = waves(targets.len(), o.canary, o.wave_pct);
    let run = crate::push::open_run(
        store,
        cfg,
        &crate::push::RunInfo {
            kind: "push update",
            site: o.site.as_deref(),
            operator: &o.operator,
            args: &o.args,
        },
        targets.len(),
    )?;
    let mut sum = UpdatePushSummary {
        run_id: run.run_id,
        bundle: bundle.path.display().to_string(),
        version: b.version.clone(),
        compatible: b.compatible.clone(),
        sha256: b.sha256.clone(),
        size: b.size,
        waves: plan.iter().map(|r| r.len()).collect(),
        targets: targets.len(),
        ..Default::default()
    };
    let ctx = update_ctx(o);
    let bundle = Arc::new(bundle);
    let mut bars = Bars::new(o.bars);
    event(
        o,
        serde_json::json!({"event": "plan", "run_id": run.run_id, "version": b.version, "compatible": b.compatible,
        "sha256": b.sha256, "size": b.size, "waves": sum.waves, "switch": format!("{:?}", o.switch).to_lowercase()}),
    );
    let mut rec = Recorder {
        store,
        run: &run,
        b: &b,
        o,
        bars: &mut bars,
        sum: &mut sum,
    };
    for (wi, range) in plan.iter().enumerate() {
        let wave = wi + 1;
        let jobs = rec.still_to_update(&targets[range.clone()], wave)?;
        rec.bars.say(format!(
            "wave {wave} of {}: {} units, {} to update",
            plan.len(),
            range.len(),
            jobs.len()
        ));
        event(
            o,
            serde_json::json!({"event": "wave", "wave": wave, "units": range.len(), "to_update": jobs.len()}),
        );
        let (tx, rx) = mpsc::channel::<Msg>();
        let workers = spawn_wave(cfg, jobs, o, run.reuse.clone(), &ctx, &bundle, tx);
        let wave_ok = rec.record_wave(wave, rx)?;
        workers.join();
        // The wave's bars end with it.
        rec.bars.clear();
        if run.closing() {
            break;
        }
        if !wave_ok {
            rec.stop_at_incomplete(wave);
            break;
        }
    }
    run.finish(store, &sum)?;
    Ok(sum)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_unit_time_on_the_operator_clock() {
        // The answer took 0.8 s to arrive: the clocks agree, the time is the unit's.
        assert_eq!(super::operator_time(86_340_000, 60_000, 60_800), 86_340_000);
        // The unit's clock is a minute behind.
        assert_eq!(
            super::operator_time(86_340_000, 60_000, 120_300),
            86_400_300
        );
        assert_eq!(super::operator_time(1_000, 60_000, 0), 0);
    }

    use super::*;
    use pfx_api::update::{HealthReport, SlotInfo};

    #[test]
    fn waves_are_a_canary_a_share_and_the_rest() {
        assert_eq!(waves(200, 1, 10), vec![0..1, 1..21, 21..200]);
        assert_eq!(waves(4, 1, 25), vec![0..1, 1..2, 2..4]);
        assert_eq!(waves(3, 1, 100), vec![0..1, 1..3]);
        assert_eq!(waves(1, 1, 25), vec![0..1]);
        assert_eq!(waves(2, 5, 25), vec![0..2]);
        assert_eq!(
            waves(10, 0, 0),
            vec![0..1, 1..2, 2..10],
            "at least one canary, one in the share"
        );
        assert!(waves(0, 1, 25).is_empty());
    }

    fn slot(b: &str, state: &str, good: bool, v: Option<&str>) -> SlotInfo {
        SlotInfo {
            name: format!("rootfs.{}", if b == "A" { 0 } else { 1 }),
            bootname: Some(b.into()),
            state: state.into(),
            boot_status: Some(if good { "good" } else { "bad" }.into()),
            version: v.map(Into::into),
            installed: None,
        }
    }

    fn st(
        booted: &str,
        primary: &str,
        a: SlotInfo,
        b: SlotInfo,
        health: Option<HealthReport>,
    ) -> UpdateStatus {
        let bv = [&a, &b]
            .iter()
            .find(|s| s.bootname.as_deref() == Some(booted))
            .and_then(|s| s.version.clone());
        UpdateStatus {
            unit: "u1".into(),
            booted: Some(booted.into()),
            boot_primary: Some(primary.into()),
            booted_version: bv,
            slots: vec![a, b],
            health,
            ..Default::default()
        }
    }

    fn health(slot: &str, v: &str, passed: bool, done: bool) -> HealthReport {
        HealthReport {
            slot: Some(slot.into()),
            version: Some(v.into()),
            passed,
            finished_unix_ms: if done { 5 } else { 0 },
            message: "player crashed at start".into(),
            ..Default::default()
        }
    }

    #[test]
    fn the_read_back_is_judged_committed_rolled_back_or_waiting() {
        let want = "2.0.0";
        let old = Some("A");
        // Committed: B, good, healthy at 2.0.0.
        let ok = st(
            "B",
            "B",
            slot("A", "inactive", true, Some("1.0")),
            slot("B", "booted", true, Some(want)),
            Some(health("B", want, true, true)),
        );
        assert_eq!(judge(&ok, want, old), Phase::Committed);
        assert_eq!(
            judge(&ok, want, None),
            Phase::Committed,
            "a re-run finds it done"
        );
        // The golden status the agent writes is a committed unit.
        let g: UpdateStatus =
            serde_json::from_str(&pfx_api::golden::read("update-status.json")).unwrap();
        assert_eq!(
            judge(
                &UpdateStatus {
                    pending_switch: None,
                    ..g
                },
                want,
                Some("A")
            ),
            Phase::Committed
        );
        // Trial boot, health still running: waiting.
        let trial = st(
            "B",
            "A",
            slot("A", "inactive", true, Some("1.0")),
            slot("B", "booted", false, Some(want)),
            Some(health("B", want, false, false)),
        );
        assert!(
            matches!(judge(&trial, want, old), Phase::Waiting(w) if w.contains("health check running"))
        );
        // Healthy but the old version's health file: not yet.
        let stale = st(
            "B",
            "B",
            slot("A", "inactive", true, Some("1.0")),
            slot("B", "booted", true, Some(want)),
            Some(health("B", "1.5", true, true)),
        );
        assert!(matches!(judge(&stale, want, old), Phase::Waiting(_)));
        // Before the reboot: still on A, next boot B.
        let before = st(
            "A",
            "B",
            slot("A", "booted", true, Some("1.0")),
            slot("B", "inactive", true, Some(want)),
            None,
        );
        assert!(
            matches!(judge(&before, want, old), Phase::Waiting(w) if w.contains("next boot: B"))
        );
        // Rolled back: on A, B bad, next boot A; the failed trial named.
        let mut back = st(
            "A",
            "A",
            slot("A", "booted", true, Some("1.0")),
            slot("B", "inactive", false, Some(want)),
            Some(health("A", "1.0", true, true)),
        );
        back.last_trial = Some(health("B", want, false, true));
        match judge(&back, want, old) {
            Phase::RolledBack(w) => assert!(
                w.contains("rolled back to slot A") && w.contains("player crashed"),
                "{w}"
            ),
            p => panic!("{p:?}"),
        }
        // The same on a unit that was never switched (a fresh run): not a rollback.
        assert!(matches!(judge(&back, want, None), Phase::Waiting(_)));
        // A pending switch: waiting, with when.
        let mut pend = before.clone();
        pend.boot_primary = Some("A".into());
        pend.pending_switch = Some(pfx_api::update::PendingSwitch {
            armed: true,
            at_unix_ms: 1_764_730_800_000,
            ..Default::default()
        });
        assert!(
            matches!(judge(&pend, want, old), Phase::Waiting(w) if w.contains("switch pending"))
        );
    }

    #[test]
    fn switch_times_are_read_exactly() {
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(
            parse_rfc3339("2026-12-03T01:30:00Z"),
            parse_rfc3339("2026-12-03T02:30:00+01:00")
        );
        assert_eq!(parse_rfc3339("2000-02-29T12:00Z"), Some(951_825_600));
        for bad in [
            "2026-13-01T00:00Z",
            "2026-12-03 02:30",
            "02:30:00",
            "2026-12-03T02:30:00+0100",
            "x",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
        let now = 1_796_176_800;
        assert!(parse_switch_time("02:30", now).is_ok_and(|t| t > now && t <= now + 90_000));
        assert!(parse_switch_time("25:00", now).is_err());
    }

    #[test]
    fn a_bundle_is_read_from_its_sidecar_checked_against_the_file() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("pfx-2.0.0.raucb");
        std::fs::write(&p, b"bundle bytes").unwrap();
        let sha = pfx_store::Hash::of(b"bundle bytes").to_string();
        // No rauc here: the sidecar is needed.
        let e = read_bundle(&p, None, None).unwrap_err();
        assert!(
            e.contains("no sidecar") && e.contains("pfx-2.0.0.json"),
            "{e}"
        );
        let side = BundleInfo {
            version: "2.0.0".into(),
            compatible: "pfx-vm-arm64".into(),
            sha256: sha.clone(),
            size: 12,
        };
        std::fs::write(
            d.path().join("pfx-2.0.0.json"),
            serde_json::to_vec(&side).unwrap(),
        )
        .unwrap();
        let b = read_bundle(&p, None, None).unwrap();
        assert_eq!(b.info, side);
        // A sidecar of another build.
        std::fs::write(&p, b"other bytes!").unwrap();
        let e = read_bundle(&p, None, None).unwrap_err();
        assert!(e.contains("belongs to another build"), "{e}");
        // With rauc (the test double): its reading, checked against the sidecar's.
        std::fs::write(
            &p,
            b"{\"compatible\":\"pfx-vm-arm64\",\"version\":\"2.0.0\",\"signed\":true}\n",
        )
        .unwrap();
        std::fs::remove_file(d.path().join("pfx-2.0.0.json")).unwrap();
        let state = d.path().join("rauc");
        let dbl = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/rauc_double.py");
        assert!(
            std::process::Command::new("python3")
                .args([dbl, "--state", state.to_str().unwrap(), "init", "x", "1"])
                .status()
                .unwrap()
                .success()
        );
        let w = d.path().join("rauc-wrapper");
        std::fs::write(
            &w,
            format!(
                "#!/bin/sh\nexec python3 {dbl} --state {} \"$@\"\n",
                state.display()
            ),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&w, std::fs::Permissions::from_mode(0o755)).unwrap();
        let b = read_bundle(&p, None, Some(&w)).unwrap();
        assert_eq!(
            (
                b.info.version.as_str(),
                b.info.compatible.as_str(),
                b.source.as_str()
            ),
            ("2.0.0", "pfx-vm-arm64", "rauc info")
        );
        let calls = std::fs::read_to_string(state.join("calls.log")).unwrap();
        assert!(
            calls.contains("info --no-verify --output-format=json"),
            "{calls}"
        );
        let wrong = BundleInfo {
            version: "2.0.1".into(),
            compatible: "pfx-vm-arm64".into(),
            sha256: b.info.sha256.clone(),
            size: b.info.size,
        };
        std::fs::write(
            d.path().join("pfx-2.0.0.json"),
            serde_json::to_vec(&wrong).unwrap(),
        )
        .unwrap();
        let e = read_bundle(&p, None, Some(&w)).unwrap_err();
        assert!(e.contains("rauc info reads 2.0.0"), "{e}");
    }
}
