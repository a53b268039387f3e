//! The unit side of `pfx-fleet push update`: the dispatcher's `update ...` verbs
//! (docs/update.md, "Rolling out"). A bundle arrives like a show file (resumable, at idle
//! I/O and CPU priority, at the store's rate cap), is checked and installed by RAUC into
//! the slot that is not booted, and the unit switches to it only when told: now, at a
//! time, or in its schedule's next idle window.
//!
//! Files, all under `<store_root>/update/` on the data partition:
//! - `staging/HASH.part`: a transfer under way (kept for a resume; one writer, flock'd);
//! - `HASH.raucb`: the complete bundle, its sha256 checked (older bundles removed);
//! - `installed.json`: the bundle last installed through the agent, and into which slot;
//! - `switch.json`: a switch asked for and not made yet; `switch.pid`: its waiter;
//! - `health.json`, `health-trial.json`: the last health check, the last trial boot's.

use crate::agent::now_ms;
use crate::rauc::{self, Status};
use pfx_api::update::{
    HealthReport, InstallReport, PendingSwitch, StagedBundle, SwitchMode, SwitchReport,
    UpdatePutReport, UpdateStatus,
};
use pfx_store::{ByteRate, Hash};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// How long one `rauc install` may take (a 400 MB bundle onto an SD card at idle I/O).
const INSTALL_TIMEOUT: Duration = Duration::from_secs(3600);
const RAUC_TIMEOUT: Duration = Duration::from_secs(60);
/// The answer goes out before the reboot begins.
const REBOOT_DELAY_S: u64 = 2;
/// The transient systemd timer of a pending switch.
pub const SWITCH_TIMER: &str = "pfx-update-switch";

/// One accepted `update ...` request (parsed by the dispatcher).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpdateVerb {
    Put {
        hash: Hash,
        size: u64,
        offset: u64,
        len: u64,
    },
    Install {
        hash: Hash,
        force: bool,
    },
    Switch(SwitchWhen),
    Status,
}

/// When to switch, as asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SwitchWhen {
    Now,
    Idle,
    /// The next HH:MM on the unit's clock, in its local time.
    Clock(u8, u8),
    /// An absolute time (Unix seconds): what `pfx-fleet` sends, so no time zone can
    /// differ between the operator and the unit.
    Unix(u64),
}

/// The largest bundle a unit takes.
pub const MAX_BUNDLE: u64 = 16 << 30;
/// The most one `update put` carries.
pub const MAX_PUT: u64 = 256 << 20;

fn digits(what: &str, w: &str) -> Result<u64, String> {
    if w.is_empty() || w.len() > 20 || !w.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("update: {what} {w:?} is not a number"));
    }
    w.parse::<u64>()
        .map_err(|_| format!("update: {what} {w:?} is too large"))
}

/// `HH:MM`, 00:00..=23:59. Pure.
pub fn parse_clock(w: &str) -> Option<(u8, u8)> {
    let (h, m) = w.split_once(':')?;
    if h.len() != 2 || m.len() != 2 || !(h.bytes().chain(m.bytes())).all(|b| b.is_ascii_digit()) {
        return None;
    }
    let (h, m): (u8, u8) = (h.parse().ok()?, m.parse().ok()?);
    (h < 24 && m < 60).then_some((h, m))
}

/// The words after `update`. Pure; every word must be one the verb expects.
pub fn parse(words: &[&str]) -> Result<UpdateVerb, String> {
    match words {
        ["put", hash, size, offset, len] => {
            let hash = hash.parse().map_err(|e| format!("update put: {e}"))?;
            let (size, offset, len) = (
                digits("SIZE", size)?,
                digits("OFFSET", offset)?,
                digits("LEN", len)?,
            );
            if size > MAX_BUNDLE
                || len > MAX_PUT
                || offset.checked_add(len).is_none_or(|e| e > size)
            {
                return Err(format!(
                    "update put: OFFSET {offset} + LEN {len} must lie within SIZE {size} (SIZE at most {MAX_BUNDLE}, LEN at most {MAX_PUT})"
                ));
            }
            Ok(UpdateVerb::Put {
                hash,
                size,
                offset,
                len,
            })
        }
        ["install", hash] | ["install", hash, "--force"] => Ok(UpdateVerb::Install {
            hash: hash.parse().map_err(|e| format!("update install: {e}"))?,
            force: words.len() == 3,
        }),
        ["switch", "now"] => Ok(UpdateVerb::Switch(SwitchWhen::Now)),
        ["switch", "idle"] => Ok(UpdateVerb::Switch(SwitchWhen::Idle)),
        ["switch", "at", t] => {
            if let Some((h, m)) = parse_clock(t) {
                Ok(UpdateVerb::Switch(SwitchWhen::Clock(h, m)))
            } else if t.bytes().all(|b| b.is_ascii_digit()) && (9..=12).contains(&t.len()) {
                Ok(UpdateVerb::Switch(SwitchWhen::Unix(digits("TIME", t)?)))
            } else {
                Err(format!(
                    "update switch at: {t:?} is neither HH:MM nor Unix seconds"
                ))
            }
        }
        ["status"] | ["status", "--json"] => Ok(UpdateVerb::Status),
        _ => Err(
            "update: use `update put HASH SIZE OFFSET LEN`, `update install HASH [--force]`, `update switch now|idle|at HH:MM|at UNIX_SECONDS` or `update status [--json]`"
                .into(),
        ),
    }
}

/// What the update verbs and the health commit need from the agent config.
#[derive(Debug, Clone)]
pub struct UpdateOpts {
    pub unit_id: String,
    pub store_root: PathBuf,
    pub rauc: PathBuf,
    pub rate_bytes_per_s: u64,
    pub reserve_bytes: Option<u64>,
    pub player: PathBuf,
    pub profile_url: String,
    pub systemd: bool,
    pub slot_carry: PathBuf,
    pub force_file: PathBuf,
    pub image_version_file: PathBuf,
    pub show_config: PathBuf,
    pub min_idle_s: u64,
    pub cmdline_file: PathBuf,
    /// The reboot: `systemctl reboot`, or a test build's stand-in.
    pub reboot: Vec<String>,
    /// This agent and its config, for the switch's timer.
    pub agent_exe: PathBuf,
    pub config_path: PathBuf,
}

impl UpdateOpts {
    pub fn dir(&self) -> PathBuf {
        self.store_root.join("update")
    }
    fn staging(&self) -> PathBuf {
        self.dir().join("staging")
    }
    pub fn bundle(&self, h: &Hash) -> PathBuf {
        self.dir().join(format!("{h}.raucb"))
    }
    pub fn health_file(&self) -> PathBuf {
        self.dir().join("health.json")
    }
    pub fn trial_health_file(&self) -> PathBuf {
        self.dir().join("health-trial.json")
    }
    fn switch_file(&self) -> PathBuf {
        self.dir().join("switch.json")
    }
    fn installed_file(&self) -> PathBuf {
        self.dir().join("installed.json")
    }
}

/// Runs one `update` verb, prints its one-line JSON answer, and returns the exit status
/// (0 done, 1 not, 2 the answer could not be written). The dispatcher's single arm.
pub fn run_verb(o: &UpdateOpts, verb: UpdateVerb, input: &mut dyn Read) -> u8 {
    let mut after: Option<Vec<String>> = None;
    let (text, good) = match verb {
        UpdateVerb::Put {
            hash,
            size,
            offset,
            len,
        } => {
            let (r, ok) = put(o, &hash, size, offset, len, input);
            (serde_json::to_string(&r), ok)
        }
        UpdateVerb::Install { hash, force } => {
            let (r, ok) = install(o, &hash, force);
            (serde_json::to_string(&r), ok)
        }
        UpdateVerb::Switch(w) => {
            let (r, ok) = switch(o, w);
            if r.rebooting {
                after = Some(o.reboot.clone());
            }
            (serde_json::to_string(&r), ok)
        }
        UpdateVerb::Status => {
            let r = status(o);
            let ok = r.errors.is_empty();
            (serde_json::to_string(&r), ok)
        }
    };
    let code = match text {
        Ok(t) => {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{t}");
            let _ = out.flush();
            if good { 0 } else { 1 }
        }
        Err(e) => {
            eprintln!("pfx-agent: encoding the answer: {e}");
            2
        }
    };
    if let Some(cmd) = after {
        detached(&cmd, REBOOT_DELAY_S);
    }
    code
}

/// Starts `cmd` in its own session after `delay_s`, not waited for: it outlives this
/// process and the SSH session that started it.
fn detached(cmd: &[String], delay_s: u64) -> Option<u32> {
    let mut c = Command::new("/bin/sh");
    c.arg("-c")
        .arg(format!("sleep {delay_s}; exec \"$@\""))
        .arg("sh")
        .args(cmd)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: setsid(2) is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        c.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    c.spawn().ok().map(|ch| ch.id())
}

fn fsync_dir(d: &Path) -> Result<(), String> {
    File::open(d)
        .and_then(|f| f.sync_all())
        .map_err(|e| format!("{}: {e}", d.display()))
}

/// Writes `value` as JSON to `path` durably: a temp file, fsync, rename, fsync the dir.
pub fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<(), String> {
    let dir = path.parent().ok_or("no directory")?;
    fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        path.file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default(),
        std::process::id()
    ));
    let text = serde_json::to_vec_pretty(value).map_err(|e| e.to_string())?;
    let mut f = File::create(&tmp).map_err(|e| format!("{}: {e}", tmp.display()))?;
    f.write_all(&text)
        .and_then(|_| f.sync_all())
        .map_err(|e| format!("{}: {e}", tmp.display()))?;
    fs::rename(&tmp, path).map_err(|e| format!("{}: {e}", path.display()))?;
    fsync_dir(dir)
}

fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<Option<T>, String> {
    match fs::read(path) {
        Ok(b) => serde_json::from_slice(&b)
            .map(Some)
            .map_err(|e| format!("{}: {e}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

/// The sha256 of a file, read at the rate cap.
fn hash_paced(p: &Path, rate: u64) -> Result<Hash, String> {
    let mut f = File::open(p).map_err(|e| format!("{}: {e}", p.display()))?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut pacer = ByteRate::new(Some(rate));
    loop {
        let n = f
            .read(&mut buf)
            .map_err(|e| format!("{}: {e}", p.display()))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
        pacer.account(n);
    }
    Ok(Hash(h.finalize().into()))
}

/// The data partition's free bytes above the store's reserve.
fn free_bytes(o: &UpdateOpts) -> Result<u64, String> {
    let s = pfx_store::Store::open(&o.store_root).map_err(|e| e.to_string())?;
    let s = match o.reserve_bytes {
        Some(r) => s.with_reserve(r),
        None => s,
    };
    s.free_bytes().map_err(|e| e.to_string())
}

/// One `update put`: which bundle, its size, and the slice this call carries.
struct PutArgs<'a> {
    o: &'a UpdateOpts,
    hash: &'a Hash,
    size: u64,
    offset: u64,
    len: u64,
}

impl PutArgs<'_> {
    /// The resumable write, step by step; `r` gets what the unit then holds.
    fn write(&self, input: &mut dyn Read, r: &mut UpdatePutReport) -> Result<(), String> {
        let o = self.o;
        // Only on the data partition (its marker), never on the root's tmpfs.
        let free = free_bytes(o)?;
        let done = o.bundle(self.hash);
        if done.is_file() {
            r.have = self.size;
            r.stored = true;
            return Ok(());
        }
        let staging = o.staging();
        let (mut f, part) = self.open_part(&staging)?;
        let have = self.check_resume(&f, &part, free, r)?;
        self.append(input, &mut f, &part, have, r)?;
        if r.have < self.size {
            return Ok(());
        }
        self.store_whole(&part, &staging, &done, r)
    }

    /// The bundle's `.part` file in `staging`, opened to append and locked: one writer
    /// per bundle.
    fn open_part(&self, staging: &Path) -> Result<(File, PathBuf), String> {
        let hash = self.hash;
        fs::create_dir_all(staging).map_err(|e| format!("{}: {e}", staging.display()))?;
        let part = staging.join(format!("{hash}.part"));
        let f = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&part)
            .map_err(|e| format!("{}: {e}", part.display()))?;
        // SAFETY: flock on a descriptor we own; released when `f` closes.
        if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            return Err(format!(
                "another transfer of bundle {hash} is writing on this unit: wait for it, then send from where it stopped"
            ));
        }
        Ok((f, part))
    }

    /// What the `.part` holds, which must be where this slice starts, and room for the
    /// rest of the bundle; a `.part` larger than the bundle is dropped.
    fn check_resume(
        &self,
        f: &File,
        part: &Path,
        free: u64,
        r: &mut UpdatePutReport,
    ) -> Result<u64, String> {
        let (hash, size, offset) = (self.hash, self.size, self.offset);
        let have = f
            .metadata()
            .map_err(|e| format!("{}: {e}", part.display()))?
            .len();
        r.have = have;
        if have > size {
            let _ = fs::remove_file(part);
            r.have = 0;
            return Err(format!(
                "the unit held {have} bytes of {hash}, more than its size {size}: dropped; send it again from 0"
            ));
        }
        if have != offset {
            return Err(format!(
                "the unit holds {have} bytes of {hash}, not {offset}: ask `update status` again and send from there"
            ));
        }
        if size - have > free {
            return Err(format!(
                "the bundle needs {} more bytes, the data partition has {free} free above its reserve: nothing written",
                size - have
            ));
        }
        Ok(have)
    }

    /// Appends the slice from `input` at the rate cap. Whatever arrived is synced and
    /// kept for a resume, also when the transfer broke off.
    fn append(
        &self,
        input: &mut dyn Read,
        f: &mut File,
        part: &Path,
        have: u64,
        r: &mut UpdatePutReport,
    ) -> Result<(), String> {
        let (size, len) = (self.size, self.len);
        let mut buf = vec![0u8; 1 << 20];
        let mut left = len;
        let mut pacer = ByteRate::new(Some(self.o.rate_bytes_per_s));
        let mut err = None;
        while left > 0 {
            let want = left.min(buf.len() as u64) as usize;
            match input.read(&mut buf[..want]) {
                Ok(0) => break,
                Ok(n) => {
                    if let Err(e) = f.write_all(&buf[..n]) {
                        err = Some(format!("{}: {e}", part.display()));
                        break;
                    }
                    r.received += n as u64;
                    left -= n as u64;
                    pacer.account(n);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    err = Some(format!("reading the transfer: {e}"));
                    break;
                }
            }
        }
        f.sync_data()
            .map_err(|e| format!("{}: {e}", part.display()))?;
        r.have = have + r.received;
        if let Some(e) = err {
            return Err(e);
        }
        if left > 0 {
            return Err(format!(
                "the transfer ended after {} of {len} bytes; {} of {size} are kept, resume from there",
                r.received, r.have
            ));
        }
        Ok(())
    }

    /// The whole `.part`, hashed: moved to `done` when it is the bundle, else dropped.
    fn store_whole(
        &self,
        part: &Path,
        staging: &Path,
        done: &Path,
        r: &mut UpdatePutReport,
    ) -> Result<(), String> {
        let (o, hash) = (self.o, self.hash);
        let got = hash_paced(part, o.rate_bytes_per_s)?;
        if got != *hash {
            let _ = fs::remove_file(part);
            let _ = fsync_dir(staging);
            r.have = 0;
            return Err(format!(
                "the bundle's sha256 is {got}, not {hash}: it was corrupted on the way and is dropped; send it again"
            ));
        }
        fs::rename(part, done).map_err(|e| format!("{}: {e}", done.display()))?;
        fsync_dir(&o.dir())?;
        fsync_dir(staging)?;
        r.stored = true;
        // One bundle at a time: older ones and other transfers go.
        remove_others(o, hash);
        Ok(())
    }
}

/// `update put HASH SIZE OFFSET LEN`: stdin carries bytes OFFSET..OFFSET+LEN of the
/// bundle. Whatever arrives is kept (synced) for a resume.
pub fn put(
    o: &UpdateOpts,
    hash: &Hash,
    size: u64,
    offset: u64,
    len: u64,
    input: &mut dyn Read,
) -> (UpdatePutReport, bool) {
    let mut r = UpdatePutReport {
        unit: o.unit_id.clone(),
        hash: hash.to_string(),
        size,
        ..Default::default()
    };
    for e in crate::showagent::be_idle() {
        r.errors
            .push(format!("could not lower this transfer's priority: {e}"));
    }
    let prio_errors = r.errors.len();
    let args = PutArgs {
        o,
        hash,
        size,
        offset,
        len,
    };
    if let Err(e) = args.write(input, &mut r) {
        r.errors.push(e);
    }
    let ok = r.errors.len() == prio_errors;
    (r, ok)
}

fn remove_others(o: &UpdateOpts, keep: &Hash) {
    let keep_b = format!("{keep}.raucb");
    if let Ok(rd) = fs::read_dir(o.dir()) {
        for e in rd.flatten() {
            let n = e.file_name().to_string_lossy().into_owned();
            if n.ends_with(".raucb") && n != keep_b {
                let _ = fs::remove_file(e.path());
            }
        }
    }
    if let Ok(rd) = fs::read_dir(o.staging()) {
        for e in rd.flatten() {
            if e.file_name().to_string_lossy().ends_with(".part") {
                let _ = fs::remove_file(e.path());
            }
        }
    }
    let _ = fsync_dir(&o.dir());
    let _ = fsync_dir(&o.staging());
}

/// `rauc status --detailed --output-format=json`, read.
pub fn rauc_status(o: &UpdateOpts) -> Result<Status, String> {
    let ran = rauc::run(
        &o.rauc,
        &["status", "--detailed", "--output-format=json"],
        RAUC_TIMEOUT,
    )?;
    if !ran.ok {
        return Err(format!("rauc status: {}", ran.why()));
    }
    rauc::parse_status(&ran.stdout)
}

/// The booted slot's version: its installed bundle's, else the image's version file.
fn booted_version(o: &UpdateOpts, st: &Status) -> Option<String> {
    st.booted_info()
        .and_then(|s| s.version.clone())
        .or_else(|| {
            fs::read_to_string(&o.image_version_file)
                .ok()
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
        })
}

/// What `installed.json` holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Installed {
    pub hash: String,
    pub slot: String,
    pub version: Option<String>,
    pub at_unix_ms: u64,
}

/// Removes the force file when the install is over, however it ends.
struct ForceGuard<'a>(&'a Path);
impl Drop for ForceGuard<'_> {
    fn drop(&mut self) {
        let _ = fs::remove_file(self.0);
    }
}

/// `update install HASH [--force]`: RAUC checks the bundle (signature, payload,
/// compatible) and writes it into the slot that is not booted; nothing switches.
pub fn install(o: &UpdateOpts, hash: &Hash, force: bool) -> (InstallReport, bool) {
    crate::showagent::be_idle();
    let mut r = InstallReport {
        unit: o.unit_id.clone(),
        hash: hash.to_string(),
        forced: force,
        ..Default::default()
    };
    let res = (|| -> Result<(), String> {
        let bundle = o.bundle(hash);
        if !bundle.is_file() {
            return Err(format!(
                "no complete bundle {hash} on the unit: send it first (update put)"
            ));
        }
        let st = rauc_status(o)?;
        r.system_compatible = st.compatible.clone();
        r.booted_version = booted_version(o, &st);
        let b = bundle.display().to_string();
        let ran = rauc::run(&o.rauc, &["info", "--output-format=json", &b], RAUC_TIMEOUT)?;
        if !ran.ok {
            return Err(format!(
                "refused before writing anything: rauc info: {}",
                ran.why()
            ));
        }
        let info = rauc::parse_info(&ran.stdout)?;
        r.bundle_version = info.version.clone();
        r.bundle_compatible = Some(info.compatible.clone());
        if let Some(sys) = &st.compatible
            && *sys != info.compatible
        {
            return Err(format!(
                "refused before writing anything: the bundle is for {}, this unit is {sys}",
                info.compatible
            ));
        }
        if let (Some(new), Some(cur)) = (&info.version, &r.booted_version)
            && rauc::version_cmp(new, cur) == std::cmp::Ordering::Less
            && !force
        {
            return Err(format!(
                "refused before writing anything: the bundle's version {new} is older than the booted {cur}; push it with --force to go back"
            ));
        }
        let _ = fs::remove_file(o.installed_file());
        let _guard = if force {
            if let Some(d) = o.force_file.parent() {
                fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
            }
            fs::write(&o.force_file, format!("{hash}\n"))
                .map_err(|e| format!("{}: {e}", o.force_file.display()))?;
            Some(ForceGuard(&o.force_file))
        } else {
            None
        };
        let ran = rauc::run(&o.rauc, &["install", &b], INSTALL_TIMEOUT)?;
        if !ran.ok {
            return Err(format!("rauc install: {}", ran.why()));
        }
        let after = rauc_status(o)?;
        let target = after.other().cloned();
        r.target = target.clone();
        let t = target.ok_or("after the install, rauc status shows no other slot")?;
        if t.version != info.version {
            return Err(format!(
                "rauc install finished, but slot {} reads back version {:?}, not {:?}",
                t.name, t.version, info.version
            ));
        }
        write_json(
            &o.installed_file(),
            &Installed {
                hash: hash.to_string(),
                slot: t.bootname.clone().unwrap_or_else(|| t.name.clone()),
                version: t.version.clone(),
                at_unix_ms: now_ms(),
            },
        )?;
        r.installed = true;
        r.message = format!(
            "installed {} into slot {} ({}); it boots only after update switch",
            info.version.as_deref().unwrap_or("?"),
            t.bootname.as_deref().unwrap_or("?"),
            t.name
        );
        Ok(())
    })();
    if let Err(e) = res {
        r.message = e.clone();
        r.errors.push(e);
    }
    r.read_at_unix_ms = now_ms();
    let ok = r.installed && r.errors.is_empty();
    (r, ok)
}

/// One change of the schedule's winner: at `at_s`, idle (black) or not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Change {
    pub at_s: i64,
    pub idle: bool,
}

/// The first idle window that is still at least `min_s` long from `now_s` on: its start
/// (`now_s` when idle already) and end. `start_idle`: the winner at `from_s`;
/// `horizon_s`: the end of what the schedule was asked for. Pure.
pub fn next_idle_window(
    now_s: i64,
    from_s: i64,
    start_idle: bool,
    changes: &[Change],
    horizon_s: i64,
    min_s: i64,
) -> Option<(i64, i64)> {
    let mut cs: Vec<Change> = changes.to_vec();
    cs.sort_by_key(|c| c.at_s);
    let mut seg_start = from_s;
    let mut idle = start_idle;
    let mut bounds: Vec<(i64, i64, bool)> = Vec::new();
    for c in cs {
        if c.at_s > seg_start {
            bounds.push((seg_start, c.at_s, idle));
        }
        seg_start = seg_start.max(c.at_s);
        idle = c.idle;
    }
    if horizon_s > seg_start {
        bounds.push((seg_start, horizon_s, idle));
    }
    // Adjacent idle segments are one window.
    let mut merged: Vec<(i64, i64)> = Vec::new();
    for (s, e, i) in bounds {
        if !i {
            continue;
        }
        match merged.last_mut() {
            Some(last) if last.1 == s => last.1 = e,
            _ => merged.push((s, e)),
        }
    }
    merged
        .into_iter()
        .map(|(s, e)| (s.max(now_s), e))
        .find(|(s, e)| e - s >= min_s)
}

#[derive(Debug, Deserialize)]
struct EntryJson {
    entry: Option<String>,
    #[serde(default)]
    idle: Option<String>,
}

#[derive(Debug, Deserialize)]
struct ChangeJson {
    unix: i64,
    to: EntryJson,
}

#[derive(Debug, Deserialize)]
struct ScheduleJson {
    from: String,
    days: i64,
    at_start: EntryJson,
    changes: Vec<ChangeJson>,
}

fn is_black(e: &EntryJson) -> bool {
    e.entry.is_none() && e.idle.as_deref() == Some("black")
}

/// The show the player would play: the store's active one, else the config show.
fn schedule_source(o: &UpdateOpts) -> PathBuf {
    let active = o.store_root.join("active/show.yaml");
    if active.is_file() {
        active
    } else {
        o.show_config.clone()
    }
}

/// The next idle window of the unit's show (`pfx-player schedule --json`), as
/// (start, end) in Unix seconds.
pub fn idle_window(o: &UpdateOpts, now_s: i64) -> Result<(i64, i64, String), String> {
    let cfg = schedule_source(o);
    let out = Command::new(&o.player)
        .args(["schedule", "--json", "--days", "8", "--config"])
        .arg(&cfg)
        .output()
        .map_err(|e| format!("{}: {e}", o.player.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!(
            "pfx-player schedule --config {}: {}",
            cfg.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let doc: ScheduleJson = match serde_json::from_str(&text) {
        Ok(d) => d,
        Err(_) if text.contains("no `schedule:`") => {
            return Err(format!(
                "the show {} has no schedule, so it has no idle window: switch with --switch at TIME (or now)",
                cfg.display()
            ));
        }
        Err(e) => return Err(format!("pfx-player schedule --json: {e}")),
    };
    let from_s = doc
        .changes
        .first()
        .map(|c| c.unix.min(now_s))
        .unwrap_or(now_s)
        .min(now_s - 86_400);
    let horizon = now_s + (doc.days - 1).max(1) * 86_400;
    let changes: Vec<Change> = doc
        .changes
        .iter()
        .map(|c| Change {
            at_s: c.unix,
            idle: is_black(&c.to),
        })
        .collect();
    next_idle_window(
        now_s,
        from_s,
        is_black(&doc.at_start),
        &changes,
        horizon,
        o.min_idle_s as i64,
    )
    .map(|(s, e)| {
        (
            s,
            e,
            format!(
                "the schedule of {} (from {}) is idle (black) then",
                cfg.display(),
                doc.from
            ),
        )
    })
    .ok_or_else(|| {
        format!(
            "the schedule of {} has no idle (black) window of {} s or more in the next week: switch with --switch at TIME",
            cfg.display(),
            o.min_idle_s
        )
    })
}

/// The next HH:MM on the unit's clock in its local time, in Unix seconds (a time that
/// has passed today is tomorrow's).
pub fn next_clock(now_s: i64, h: u8, m: u8) -> i64 {
    // SAFETY: localtime_r and mktime write into and read from the struct we own.
    unsafe {
        let t: libc::time_t = now_s as libc::time_t;
        let mut tm: libc::tm = std::mem::zeroed();
        libc::localtime_r(&t, &mut tm);
        tm.tm_hour = h as i32;
        tm.tm_min = m as i32;
        tm.tm_sec = 0;
        tm.tm_isdst = -1;
        let mut at = libc::mktime(&mut tm) as i64;
        if at <= now_s {
            tm.tm_mday += 1;
            tm.tm_hour = h as i32;
            tm.tm_min = m as i32;
            tm.tm_isdst = -1;
            at = libc::mktime(&mut tm) as i64;
        }
        at
    }
}

/// The switch itself: the unit's identity carried into the other slot once more, that
/// slot marked active (its one trial boot), read back. The caller reboots.
fn switch_now(o: &UpdateOpts) -> Result<(String, Option<String>), String> {
    let st = rauc_status(o)?;
    let other = st
        .other()
        .cloned()
        .ok_or("rauc status shows no other slot to switch to")?;
    let to = other.bootname.clone().unwrap_or_else(|| other.name.clone());
    let inst: Option<Installed> = read_json(&o.installed_file())?;
    if other.version.is_none() || inst.as_ref().is_none_or(|i| i.slot != to) {
        return Err(format!(
            "nothing was installed into slot {to} through update install: install a bundle first"
        ));
    }
    let out = Command::new(&o.slot_carry)
        .arg("switch")
        .output()
        .map_err(|e| format!("{}: {e}", o.slot_carry.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} switch (carrying the unit's identity into slot {to}): {}; not switched",
            o.slot_carry.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let ran = rauc::run(&o.rauc, &["status", "mark-active", "other"], RAUC_TIMEOUT)?;
    if !ran.ok {
        return Err(format!("rauc status mark-active other: {}", ran.why()));
    }
    let after = rauc_status(o)?;
    if after.boot_primary.as_deref() != Some(to.as_str()) {
        return Err(format!(
            "after mark-active, the next boot is {:?}, not {to}: not rebooting",
            after.boot_primary
        ));
    }
    Ok((to, other.version))
}

/// Sets the timer of a pending switch: a transient systemd timer, or (without systemd) a
/// waiter process of our own.
fn arm(o: &UpdateOpts, at_ms: u64, token: u64) -> Result<(), String> {
    let delay_s = (at_ms.saturating_sub(now_ms()) / 1000).max(1);
    let exe = o.agent_exe.display().to_string();
    let cfgp = o.config_path.display().to_string();
    let tok = token.to_string();
    if o.systemd {
        let _ = Command::new("systemctl")
            .args(["stop", &format!("{SWITCH_TIMER}.timer")])
            .output();
        let out = Command::new("systemd-run")
            .args([
                &format!("--unit={SWITCH_TIMER}"),
                &format!("--on-active={delay_s}s"),
                "--timer-property=AccuracySec=1s",
                "--collect",
                &exe,
                "update",
                "switch-due",
                "--config",
                &cfgp,
                "--token",
                &tok,
            ])
            .output()
            .map_err(|e| format!("systemd-run: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "systemd-run (the switch's timer): {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        return Ok(());
    }
    let pid = detached(
        &[
            exe,
            "update".into(),
            "switch-due".into(),
            "--config".into(),
            cfgp,
            "--token".into(),
            tok,
        ],
        delay_s,
    )
    .ok_or("could not start the switch's waiter")?;
    fs::write(o.dir().join("switch.pid"), format!("{pid}\n")).map_err(|e| e.to_string())
}

fn armed(o: &UpdateOpts) -> bool {
    if o.systemd {
        return Command::new("systemctl")
            .args(["is-active", "--quiet", &format!("{SWITCH_TIMER}.timer")])
            .status()
            .is_ok_and(|s| s.success());
    }
    fs::read_to_string(o.dir().join("switch.pid"))
        .ok()
        .and_then(|t| t.trim().parse::<i32>().ok())
        // SAFETY: signal 0 only asks whether the process exists.
        .is_some_and(|p| p > 1 && unsafe { libc::kill(p, 0) } == 0)
}

/// `update switch now|idle|at TIME`.
pub fn switch(o: &UpdateOpts, when: SwitchWhen) -> (SwitchReport, bool) {
    let mode = match when {
        SwitchWhen::Now => SwitchMode::Now,
        SwitchWhen::Idle => SwitchMode::Idle,
        _ => SwitchMode::At,
    };
    let mut r = SwitchReport {
        unit: o.unit_id.clone(),
        mode,
        ..Default::default()
    };
    let now = now_ms();
    let res = (|| -> Result<(), String> {
        let (at_s, end_s, why) = match when {
            SwitchWhen::Now => ((now / 1000) as i64, None, "asked to switch now".to_string()),
            SwitchWhen::Idle => {
                let (s, e, why) = idle_window(o, (now / 1000) as i64)?;
                (s, Some(e), why)
            }
            SwitchWhen::Clock(h, m) => (
                next_clock((now / 1000) as i64, h, m),
                None,
                format!("asked for {h:02}:{m:02} unit time"),
            ),
            SwitchWhen::Unix(t) => (t as i64, None, "asked for this time".to_string()),
        };
        let at_ms = (at_s.max(0) as u64) * 1000;
        // A pending switch asked for again is replaced.
        let _ = fs::remove_file(o.switch_file());
        if at_ms <= now + 1000 {
            let (to, version) = switch_now(o)?;
            r.at_unix_ms = Some(now);
            r.to_slot = Some(to.clone());
            r.version = version;
            r.rebooting = true;
            r.message = format!(
                "switching to slot {to} now ({why}): the unit reboots in {REBOOT_DELAY_S} s for the slot's trial boot"
            );
            return Ok(());
        }
        let st = rauc_status(o)?;
        let other = st
            .other()
            .cloned()
            .ok_or("rauc status shows no other slot")?;
        let to = other.bootname.clone().unwrap_or_else(|| other.name.clone());
        let inst: Option<Installed> = read_json(&o.installed_file())?;
        if other.version.is_none() || inst.as_ref().is_none_or(|i| i.slot != to) {
            return Err(format!(
                "nothing was installed into slot {to} through update install: install a bundle first"
            ));
        }
        let mut p = PendingSwitch {
            mode,
            at_unix_ms: at_ms,
            window_end_unix_ms: end_s.map(|e| (e.max(0) as u64) * 1000),
            requested_unix_ms: now,
            to_slot: to.clone(),
            version: other.version.clone(),
            armed: false,
            reason: why,
        };
        write_json(&o.switch_file(), &p)?;
        arm(o, at_ms, now)?;
        p.armed = true;
        write_json(&o.switch_file(), &p)?;
        r.at_unix_ms = Some(at_ms);
        r.to_slot = Some(to.clone());
        r.version = other.version;
        r.scheduled = true;
        r.message = format!(
            "switches to slot {to} in {} s ({})",
            (at_ms - now) / 1000,
            p.reason
        );
        Ok(())
    })();
    if let Err(e) = res {
        r.message = format!("not switched: {e}");
        r.errors.push(e);
    }
    r.read_at_unix_ms = now_ms();
    let ok = r.errors.is_empty();
    (r, ok)
}

/// `pfx-agent update switch-due`: the pending switch's timer fired. The switch is made
/// only when `switch.json` still holds the request that set this timer, and, for an idle
/// switch, when the schedule is idle now (a show pushed since may have changed it: then
/// the timer is set again for the new window). Returns the exit status.
pub fn switch_due(o: &UpdateOpts, token: u64) -> u8 {
    let p: Option<PendingSwitch> = match read_json(&o.switch_file()) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("pfx-agent update switch-due: {e}");
            return 2;
        }
    };
    let Some(mut p) = p.filter(|p| p.requested_unix_ms == token) else {
        // Replaced or cancelled since this timer was set.
        return 0;
    };
    let now = now_ms();
    if now + 1000 < p.at_unix_ms {
        // Woken early (a waiter's sleep is in whole seconds): wait out the rest.
        std::thread::sleep(Duration::from_millis(p.at_unix_ms - now));
    }
    if p.mode == SwitchMode::Idle {
        match idle_window(o, (now_ms() / 1000) as i64) {
            Ok((s, e, why)) if (s as u64) * 1000 > now_ms() + 1000 => {
                p.at_unix_ms = (s as u64) * 1000;
                p.window_end_unix_ms = Some((e as u64) * 1000);
                p.reason = format!("the schedule changed: {why}");
                let ok = write_json(&o.switch_file(), &p).is_ok()
                    && arm(o, p.at_unix_ms, p.requested_unix_ms).is_ok();
                return if ok { 0 } else { 1 };
            }
            Ok(_) => {}
            Err(e) => {
                eprintln!("pfx-agent update switch-due: no idle window now: {e}; not switched");
                p.armed = false;
                p.reason = format!("not switched: {e}");
                let _ = write_json(&o.switch_file(), &p);
                return 1;
            }
        }
    }
    match switch_now(o) {
        Ok(_) => {
            let _ = fs::remove_file(o.switch_file());
            let _ = fsync_dir(&o.dir());
            detached(&o.reboot, REBOOT_DELAY_S);
            0
        }
        Err(e) => {
            eprintln!("pfx-agent update switch-due: {e}");
            p.armed = false;
            p.reason = format!("not switched: {e}");
            let _ = write_json(&o.switch_file(), &p);
            1
        }
    }
}

/// Whether this boot is a slot's trial boot (the boot script adds `pfx.trial=1`).
pub fn is_trial(cmdline: &str) -> bool {
    cmdline.split_ascii_whitespace().any(|w| w == "pfx.trial=1")
}

/// `update status`.
pub fn status(o: &UpdateOpts) -> UpdateStatus {
    let mut r = UpdateStatus {
        unit: o.unit_id.clone(),
        agent_version: env!("CARGO_PKG_VERSION").into(),
        ..Default::default()
    };
    match rauc_status(o) {
        Ok(st) => {
            r.booted_version = booted_version(o, &st);
            r.compatible = st.compatible;
            r.booted = st.booted;
            r.booted_slot = st.booted_slot;
            r.boot_primary = st.boot_primary;
            r.slots = st.slots;
        }
        Err(e) => r.errors.push(e),
    }
    r.trial = fs::read_to_string(&o.cmdline_file)
        .map(|c| is_trial(&c))
        .unwrap_or(false);
    if let Ok(rd) = fs::read_dir(o.dir()) {
        for e in rd.flatten() {
            let n = e.file_name().to_string_lossy().into_owned();
            if let Some(h) = n.strip_suffix(".raucb") {
                r.ready = Some(h.to_string());
            }
        }
    }
    if let Ok(rd) = fs::read_dir(o.staging()) {
        for e in rd.flatten() {
            let n = e.file_name().to_string_lossy().into_owned();
            if let Some(h) = n.strip_suffix(".part") {
                r.staged.push(StagedBundle {
                    hash: h.to_string(),
                    have: e.metadata().map(|m| m.len()).unwrap_or(0),
                });
            }
        }
    }
    r.staged.sort_by(|a, b| a.hash.cmp(&b.hash));
    match read_json::<Installed>(&o.installed_file()) {
        Ok(i) => r.installed_bundle = i.map(|i| i.hash),
        Err(e) => r.errors.push(e),
    }
    match read_json::<PendingSwitch>(&o.switch_file()) {
        Ok(Some(mut p)) => {
            p.armed = p.armed && armed(o);
            r.pending_switch = Some(p);
        }
        Ok(None) => {}
        Err(e) => r.errors.push(e),
    }
    match read_json::<HealthReport>(&o.health_file()) {
        Ok(h) => r.health = h,
        Err(e) => r.errors.push(e),
    }
    match read_json::<HealthReport>(&o.trial_health_file()) {
        Ok(h) => r.last_trial = h,
        Err(e) => r.errors.push(e),
    }
    r.boot_id = fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()
        .map(|s| s.trim().to_string());
    r.read_at_unix_ms = now_ms();
    r
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use pfx_api::update::{BundleInfo, HealthAction, HealthCheck, SlotInfo};

    fn slot(name: &str, b: &str, state: &str, good: bool, v: Option<&str>) -> SlotInfo {
        SlotInfo {
            name: name.into(),
            bootname: Some(b.into()),
            state: state.into(),
            boot_status: Some(if good { "good" } else { "bad" }.into()),
            version: v.map(Into::into),
            installed: v.map(|_| "2026-12-02T10:00:00Z".into()),
        }
    }

    /// A unit just committed on B at 2.0.0 (what `push update` waits for).
    pub(crate) fn golden_status() -> UpdateStatus {
        let health = HealthReport {
            unit: "gen3-7".into(),
            slot: Some("B".into()),
            version: Some("2.0.0".into()),
            boot_id: Some("0b6c4a2e-57f3-4b1d-9a47-3f0c2d1e9b88".into()),
            trial: true,
            passed: true,
            action: HealthAction::MarkedGood,
            checks: vec![HealthCheck {
                name: "health_ok".into(),
                ok: true,
                detail: "/health ok for 30012 ms (needs 30 s)".into(),
            }],
            started_unix_ms: 1_764_670_000_000,
            finished_unix_ms: 1_764_670_041_000,
            message: "slot B healthy: marked good".into(),
            errors: vec![],
        };
        UpdateStatus {
            unit: "gen3-7".into(),
            compatible: Some("pfx-rpi4-arm64".into()),
            booted: Some("B".into()),
            booted_slot: Some("rootfs.1".into()),
            boot_primary: Some("B".into()),
            booted_version: Some("2.0.0".into()),
            trial: true,
            slots: vec![
                slot("rootfs.0", "A", "inactive", true, Some("1.0.0")),
                slot("rootfs.1", "B", "booted", true, Some("2.0.0")),
            ],
            ready: Some("ab".repeat(32)),
            staged: vec![StagedBundle {
                hash: "cd".repeat(32),
                have: 1_048_576,
            }],
            installed_bundle: Some("ab".repeat(32)),
            pending_switch: Some(PendingSwitch {
                mode: SwitchMode::Idle,
                at_unix_ms: 1_764_730_800_000,
                window_end_unix_ms: Some(1_764_774_000_000),
                requested_unix_ms: 1_764_670_100_000,
                to_slot: "A".into(),
                version: Some("1.0.0".into()),
                armed: true,
                reason: "the schedule of /var/lib/pfx/active/show.yaml (from 2026-12-02) is idle (black) then".into(),
            }),
            health: Some(health.clone()),
            last_trial: Some(health),
            boot_id: Some("0b6c4a2e-57f3-4b1d-9a47-3f0c2d1e9b88".into()),
            agent_version: "0.1.0".into(),
            read_at_unix_ms: 1_764_670_100_000,
            errors: vec![],
        }
    }

    #[test]
    fn update_answers_match_the_golden_files() {
        fn pretty<T: Serialize>(v: &T) -> String {
            serde_json::to_string_pretty(v).unwrap() + "\n"
        }
        pfx_api::golden::check("update-status.json", &pretty(&golden_status()));
        pfx_api::golden::check(
            "update-put.json",
            &pretty(&UpdatePutReport {
                unit: "gen3-7".into(),
                hash: "ab".repeat(32),
                size: 367_001_600,
                have: 16_777_216,
                received: 16_777_216,
                stored: false,
                errors: vec![],
            }),
        );
        pfx_api::golden::check(
            "update-install.json",
            &pretty(&InstallReport {
                unit: "gen3-7".into(),
                hash: "ab".repeat(32),
                bundle_version: Some("2.0.0".into()),
                bundle_compatible: Some("pfx-rpi4-arm64".into()),
                system_compatible: Some("pfx-rpi4-arm64".into()),
                booted_version: Some("1.0.0".into()),
                forced: false,
                installed: true,
                target: Some(slot("rootfs.1", "B", "inactive", false, Some("2.0.0"))),
                message:
                    "installed 2.0.0 into slot B (rootfs.1); it boots only after update switch"
                        .into(),
                read_at_unix_ms: 1_764_669_000_000,
                errors: vec![],
            }),
        );
        pfx_api::golden::check(
            "update-switch.json",
            &pretty(&SwitchReport {
                unit: "gen3-7".into(),
                mode: SwitchMode::At,
                at_unix_ms: Some(1_764_730_800_000),
                to_slot: Some("B".into()),
                version: Some("2.0.0".into()),
                rebooting: false,
                scheduled: true,
                message: "switches to slot B in 61700 s (asked for this time)".into(),
                read_at_unix_ms: 1_764_669_100_000,
                errors: vec![],
            }),
        );
        pfx_api::golden::check(
            "bundle.json",
            &pretty(&BundleInfo {
                version: "2.0.0".into(),
                compatible: "pfx-rpi4-arm64".into(),
                sha256: "ab".repeat(32),
                size: 367_001_600,
            }),
        );
    }

    #[test]
    fn update_verbs_with_checked_arguments() {
        let h = "b".repeat(64);
        let hash: Hash = h.parse().unwrap();
        assert_eq!(
            parse(&["put", &h, "100", "0", "100"]),
            Ok(UpdateVerb::Put {
                hash,
                size: 100,
                offset: 0,
                len: 100
            })
        );
        assert_eq!(
            parse(&["install", &h, "--force"]),
            Ok(UpdateVerb::Install { hash, force: true })
        );
        assert_eq!(
            parse(&["install", &h]),
            Ok(UpdateVerb::Install { hash, force: false })
        );
        assert_eq!(
            parse(&["switch", "now"]),
            Ok(UpdateVerb::Switch(SwitchWhen::Now))
        );
        assert_eq!(
            parse(&["switch", "idle"]),
            Ok(UpdateVerb::Switch(SwitchWhen::Idle))
        );
        assert_eq!(
            parse(&["switch", "at", "02:30"]),
            Ok(UpdateVerb::Switch(SwitchWhen::Clock(2, 30)))
        );
        assert_eq!(
            parse(&["switch", "at", "1796176800"]),
            Ok(UpdateVerb::Switch(SwitchWhen::Unix(1_796_176_800)))
        );
        assert_eq!(parse(&["status", "--json"]), Ok(UpdateVerb::Status));
        for bad in [
            vec!["put", &h, "100", "10", "91"],
            vec!["put", &h, "100", "-1", "10"],
            vec!["put", "../../x", "1", "0", "1"],
            vec!["put", &h, "17179869185", "0", "1"],
            vec!["install", &h, "--force", "--force"],
            vec!["install", &h, "/etc/shadow"],
            vec!["install", "x"],
            vec!["switch"],
            vec!["switch", "later"],
            vec!["switch", "at", "24:00"],
            vec!["switch", "at", "2:30"],
            vec!["switch", "at", "12"],
            vec!["switch", "at", "02:30;reboot"],
            vec!["switch", "now", "now"],
            vec!["status", "--rauc", "/bin/sh"],
            vec!["rm"],
            vec![],
        ] {
            assert!(parse(&bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn the_next_idle_window_is_found_from_the_schedules_changes() {
        let day = 86_400;
        // Idle (black) until 18:00, a show 18:00-23:00, idle again; min 10 min.
        let ch = |h: i64, idle| Change {
            at_s: h * 3600,
            idle,
        };
        let changes = [ch(18, false), ch(23, true), ch(42, false), ch(47, true)];
        // At 12:00, idle now: now, until 18:00.
        assert_eq!(
            next_idle_window(12 * 3600, 0, true, &changes, 7 * day, 600),
            Some((12 * 3600, 18 * 3600))
        );
        // At 20:00 the show plays: the window starts at 23:00 and runs until 42:00.
        assert_eq!(
            next_idle_window(20 * 3600, 0, true, &changes, 7 * day, 600),
            Some((23 * 3600, 42 * 3600))
        );
        // At 17:55 only 5 min are left: the next window.
        assert_eq!(
            next_idle_window(17 * 3600 + 55 * 60, 0, true, &changes, 7 * day, 600),
            Some((23 * 3600, 42 * 3600))
        );
        // A show that always plays, or an idle playlist (not black): none.
        assert_eq!(next_idle_window(0, 0, false, &[], 7 * day, 600), None);
        // The last window runs to the horizon.
        assert_eq!(
            next_idle_window(50 * 3600, 0, true, &changes, 7 * day, 600),
            Some((50 * 3600, 7 * day))
        );
        // Changes out of order, and two idle stretches that touch, are one window.
        let odd = [ch(5, true), ch(2, false), ch(5, true)];
        assert_eq!(
            next_idle_window(3 * 3600, 0, false, &odd, 10 * 3600, 600),
            Some((5 * 3600, 10 * 3600))
        );
    }

    #[test]
    fn trial_boots_are_told_by_the_kernel_command_line() {
        assert!(is_trial(
            "console=ttyAMA0 root=PARTUUID=x-03 rauc.slot=B pfx.trial=1\n"
        ));
        assert!(!is_trial("root=PARTUUID=x-02 rauc.slot=A"));
        assert!(!is_trial("pfx.trial=10"));
    }

    #[test]
    fn the_next_clock_time_is_ahead_and_within_a_day() {
        let now = 1_796_176_800; // some instant
        for (h, m) in [(0, 0), (2, 30), (23, 59), (12, 0)] {
            let at = next_clock(now, h, m);
            assert!(at > now && at <= now + 86_400 + 3600, "{h}:{m} -> {at}");
        }
    }
}
