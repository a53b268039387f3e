//! The unit side of `pfx-fleet push show`: the dispatcher's `show ...` verbs on the
//! unit's show store (pfx-store). A transfer writes at idle I/O and CPU priority and at a
//! bounded rate, so the show that is playing never waits for the disk or the CPU.

use crate::agent::now_ms;
use pfx_api::show::{
    ActivateRequest, ActiveShowInfo, MissingFile, MissingReport, PutReport, ShowInfo, ShowReadback,
    ShowSource, WantedFile,
};
use pfx_store::{Hash, ShowId, Store, StoreError};
use std::collections::BTreeMap;
use std::io::Read;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The largest manifest or wanted-list `show activate` and `show missing` read.
const MAX_INPUT: u64 = 4 << 20;

/// What the show verbs need from the agent config.
#[derive(Debug, Clone)]
pub struct ShowOpts {
    pub unit_id: String,
    pub root: PathBuf,
    pub player: PathBuf,
    pub rate_bytes_per_s: u64,
    pub reserve_bytes: Option<u64>,
    pub profile_url: String,
    /// SIGHUP this pid's player; None: `systemctl kill -s HUP` the player's service.
    pub player_pidfile: Option<PathBuf>,
    pub systemd: bool,
    pub confirm_timeout: Duration,
}

fn open(o: &ShowOpts) -> Result<Store, StoreError> {
    let s = Store::open(&o.root)?.with_rate(Some(o.rate_bytes_per_s));
    Ok(match o.reserve_bytes {
        Some(r) => s.with_reserve(r),
        None => s,
    })
}

/// Idle I/O class, idle CPU policy and nice 19 for this process: the render thread
/// (SCHED_FIFO) and the decode-ahead threads always go first.
pub fn be_idle() -> Vec<String> {
    let mut errs = Vec::new();
    const IOPRIO_WHO_PROCESS: libc::c_long = 1;
    const IOPRIO_CLASS_IDLE: libc::c_long = 3;
    // SAFETY: plain syscalls on this process with constant arguments.
    unsafe {
        if libc::syscall(
            libc::SYS_ioprio_set,
            IOPRIO_WHO_PROCESS,
            0 as libc::c_long,
            IOPRIO_CLASS_IDLE << 13,
        ) != 0
        {
            errs.push(format!("ioprio idle: {}", std::io::Error::last_os_error()));
        }
        let p = libc::sched_param { sched_priority: 0 };
        if libc::sched_setscheduler(0, libc::SCHED_IDLE, &p) != 0 {
            errs.push(format!("SCHED_IDLE: {}", std::io::Error::last_os_error()));
        }
        if libc::setpriority(libc::PRIO_PROCESS, 0, 19) != 0 {
            errs.push(format!("nice 19: {}", std::io::Error::last_os_error()));
        }
    }
    errs
}

fn read_input(input: &mut dyn Read) -> Result<Vec<u8>, String> {
    let mut buf = Vec::new();
    input
        .take(MAX_INPUT + 1)
        .read_to_end(&mut buf)
        .map_err(|e| format!("reading the request: {e}"))?;
    if buf.len() as u64 > MAX_INPUT {
        return Err(format!("request over {MAX_INPUT} bytes"));
    }
    Ok(buf)
}

/// `show missing`: stdin is a JSON list of `{hash, size}`.
pub fn missing(o: &ShowOpts, input: &mut dyn Read) -> (MissingReport, bool) {
    let mut r = MissingReport {
        unit: o.unit_id.clone(),
        ..Default::default()
    };
    let res = (|| -> Result<(), String> {
        let wanted: Vec<WantedFile> = serde_json::from_slice(&read_input(input)?)
            .map_err(|e| format!("the wanted list is not JSON [{{hash, size}}]: {e}"))?;
        let mut pairs = Vec::new();
        for w in &wanted {
            let h: Hash = w
                .hash
                .parse()
                .map_err(|e: pfx_store::BadHash| e.to_string())?;
            pairs.push((h, w.size));
        }
        let s = open(o).map_err(|e| e.to_string())?;
        r.free_bytes = s.free_bytes().map_err(|e| e.to_string())?;
        r.missing = s
            .missing(&pairs)
            .map_err(|e| e.to_string())?
            .into_iter()
            .map(|m| MissingFile {
                hash: m.hash.to_string(),
                size: m.size,
                offset: m.offset,
            })
            .collect();
        Ok(())
    })();
    if let Err(e) = res {
        r.errors.push(e);
    }
    let ok = r.errors.is_empty();
    (r, ok)
}

/// `show put HASH SIZE OFFSET LEN`: stdin carries bytes OFFSET..OFFSET+LEN of the file.
/// Whatever arrives is kept (synced) for a resume, also when the sender goes away.
pub fn put(
    o: &ShowOpts,
    hash: &Hash,
    size: u64,
    offset: u64,
    len: u64,
    input: &mut dyn Read,
) -> (PutReport, bool) {
    let mut r = PutReport {
        unit: o.unit_id.clone(),
        hash: hash.to_string(),
        size,
        ..Default::default()
    };
    for e in be_idle() {
        // Not fatal (a container may refuse SCHED_IDLE), but the operator should know.
        r.errors
            .push(format!("could not lower this transfer's priority: {e}"));
    }
    let prio_errors = r.errors.len();
    let res = (|| -> Result<(), String> {
        let s = open(o).map_err(|e| e.to_string())?;
        if s.has(hash) {
            r.have = size;
            r.stored = true;
            return Ok(());
        }
        // One writer per file: a second put of it while one runs is refused (Busy), and
        // an OFFSET that is not what is staged makes no file.
        let mut st = match s.resume(&hash.to_string(), size, offset) {
            Ok(st) => st,
            // Another writer finished the file meanwhile: it is stored, which is what
            // this put was for.
            Err(StoreError::WrongOffset { .. }) if s.has(hash) => {
                r.have = size;
                r.stored = true;
                return Ok(());
            }
            Err(e) => {
                if let StoreError::WrongOffset { have, .. } = &e {
                    r.have = *have;
                }
                return Err(e.to_string());
            }
        };
        let mut buf = vec![0u8; 1 << 20];
        let mut left = len;
        let mut err = None;
        while left > 0 {
            let want = left.min(buf.len() as u64) as usize;
            match input.read(&mut buf[..want]) {
                Ok(0) => break,
                Ok(n) => {
                    if let Err(e) = s.write(&mut st, &buf[..n]) {
                        err = Some(e.to_string());
                        break;
                    }
                    r.received += n as u64;
                    left -= n as u64;
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    err = Some(format!("reading the transfer: {e}"));
                    break;
                }
            }
        }
        s.sync(&mut st).map_err(|e| e.to_string())?;
        r.have = st.offset();
        if let Some(e) = err {
            return Err(e);
        }
        if left > 0 {
            return Err(format!(
                "the transfer ended after {} of {len} bytes; {} of {size} are kept, resume from there",
                r.received, r.have
            ));
        }
        if st.offset() == size {
            let got = s.finish(st, Some(hash)).map_err(|e| e.to_string())?;
            r.stored = got == *hash;
        }
        Ok(())
    })();
    if let Err(e) = res {
        r.errors.push(e);
    }
    let ok = r.errors.len() == prio_errors;
    (r, ok)
}

fn active_info(s: &Store) -> Result<Option<ActiveShowInfo>, String> {
    Ok(s.active()
        .map_err(|e| e.to_string())?
        .map(|a| ActiveShowInfo {
            id: a.id.to_string(),
            name: a.name,
            files: a
                .files
                .into_iter()
                .map(|(k, v)| (k, v.to_string()))
                .collect(),
            since_unix_ms: a.since_unix_ms,
        }))
}

/// What the player's `/profile` says it plays.
pub fn player_show(url: &str) -> Result<Option<ShowInfo>, String> {
    Ok(player_profile(url)?.show)
}

/// The player's `/profile`.
fn player_profile(url: &str) -> Result<pfx_api::profile::ProfileDoc, String> {
    let body = crate::http::request("GET", url, &[], None, Duration::from_secs(2))
        .and_then(|r| r.ok_body(url))
        .map_err(|e| format!("player /profile: {e}"))?;
    serde_json::from_slice(&body)
        .map_err(|e| format!("{url}: not a pfx-player /profile document: {e}"))
}

/// Asks the player to read its show again.
fn reload_player(o: &ShowOpts) -> Result<(), String> {
    if let Some(pf) = &o.player_pidfile {
        let text = std::fs::read_to_string(pf).map_err(|e| format!("{}: {e}", pf.display()))?;
        let pid: i32 = text
            .trim()
            .parse()
            .map_err(|_| format!("{}: not a pid: {:?}", pf.display(), text.trim()))?;
        // SAFETY: sends SIGHUP to the pid the root-owned config points at.
        if pid <= 1 || unsafe { libc::kill(pid, libc::SIGHUP) } != 0 {
            return Err(format!(
                "SIGHUP to the player (pid {pid} from {}): {}",
                pf.display(),
                std::io::Error::last_os_error()
            ));
        }
        return Ok(());
    }
    if !o.systemd {
        return Err(
            "no way to reach the player: set player_pidfile or systemd: true in the agent config"
                .into(),
        );
    }
    let out = std::process::Command::new("systemctl")
        .args([
            "kill",
            "-s",
            "HUP",
            "--kill-whom=main",
            "pfx-player.service",
        ])
        .output()
        .map_err(|e| format!("systemctl: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "systemctl kill -s HUP pfx-player.service: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(())
}

fn plays(p: &Option<ShowInfo>, id: &str) -> bool {
    p.as_ref()
        .is_some_and(|p| p.source == ShowSource::Store && p.id.as_deref() == Some(id))
}

/// The check step: the manifest read from `input`, the show made of stored files and
/// checked closed and whole. `r.requested` is set once the show has its id.
fn make_checked_show(
    o: &ShowOpts,
    s: &Store,
    input: &mut dyn Read,
    r: &mut ShowReadback,
) -> Result<ShowId, String> {
    let m: ActivateRequest = serde_json::from_slice(&read_input(input)?)
        .map_err(|e| format!("the show manifest is not JSON {{name, show_yaml, files}}: {e}"))?;
    let mut files = BTreeMap::new();
    for (n, h) in &m.files {
        let h: Hash = h
            .parse()
            .map_err(|e: pfx_store::BadHash| format!("{n}: {e}"))?;
        files.insert(n.clone(), h);
    }
    let id = s
        .make_show(&m.name, m.show_yaml.as_bytes(), &files)
        .map_err(|e| e.to_string())?;
    r.requested = Some(id.to_string());
    // Closed: a pushed show may read only its own files and the image's profiles.
    s.check_pushed_show(&id, &o.player)
        .map_err(|e| e.to_string())?;
    // What the answer will claim: every file of the show has its hash, read back now
    // (a bad stored file is quarantined, so the next push sends it again).
    s.verify_show(&id).map_err(|e| e.to_string())?;
    Ok(id)
}

/// The confirm step: asks the player what it plays until it plays `id` (or the time is
/// up, or something failed), then reads the store's active show back.
fn confirm(o: &ShowOpts, s: &Store, id: &ShowId, r: &mut ShowReadback) {
    let deadline = Instant::now() + o.confirm_timeout;
    let mut last = Err("not asked yet".to_string());
    while r.errors.is_empty() {
        last = player_show(&o.profile_url);
        if matches!(&last, Ok(p) if plays(p, id.as_str())) || Instant::now() >= deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    match last {
        Ok(p) => r.player = p,
        Err(e) => r.errors.push(e),
    }
    r.active = active_info(s).unwrap_or_else(|e| {
        r.errors.push(e);
        None
    });
}

/// The answer's message once the switch is made: verified, or what the player said
/// instead, or that the store did not switch.
fn confirmed_message(o: &ShowOpts, id: &ShowId, r: &ShowReadback, active_ok: bool) -> String {
    if r.verified {
        format!(
            "show {} ({id}) active and playing",
            r.active.as_ref().map(|a| a.name.as_str()).unwrap_or("?")
        )
    } else if active_ok {
        let why = match &r.player {
            Some(p) if p.source == ShowSource::Config => format!(
                "it plays the config show: {}",
                p.reason.as_deref().unwrap_or("no reason given")
            ),
            Some(p) => format!("it plays {} ({})", p.name, p.id.as_deref().unwrap_or("-")),
            None => "it did not say".into(),
        };
        format!(
            "show {id} is active in the store, but the player did not confirm within {} s: {why}",
            o.confirm_timeout.as_secs()
        )
    } else {
        "the store's active show is not the one pushed".into()
    }
}

/// `show activate`: stdin is a [`ActivateRequest`]. The show is made, checked by the unit's
/// own `pfx-player run --check`, switched to atomically, and the player is asked to play
/// it; the answer is what the store and the player then say.
pub fn activate(o: &ShowOpts, input: &mut dyn Read) -> (ShowReadback, bool) {
    be_idle();
    let mut r = ShowReadback {
        unit: o.unit_id.clone(),
        ..Default::default()
    };
    let s = match open(o) {
        Ok(s) => s,
        Err(e) => {
            r.message = format!("refused: {e}");
            r.errors.push(e.to_string());
            r.read_at_unix_ms = now_ms();
            return (r, false);
        }
    };
    // 1. Check.
    let id = match make_checked_show(o, &s, input, &mut r) {
        Ok(id) => id,
        Err(e) => {
            r.message = format!("refused, the old show keeps playing: {e}");
            r.errors.push(e);
            r.active = active_info(&s).unwrap_or(None);
            r.player = player_show(&o.profile_url).unwrap_or(None);
            r.read_at_unix_ms = now_ms();
            return (r, false);
        }
    };
    // 2. Switch.
    if let Err(e) = s.activate(&id) {
        r.message = format!("activation failed, the old show keeps playing: {e}");
        r.errors.push(e.to_string());
        r.read_at_unix_ms = now_ms();
        return (r, false);
    }
    if let Err(e) = reload_player(o) {
        r.errors.push(e);
    }
    // 3. Confirm.
    confirm(o, &s, &id, &mut r);
    let active_ok = r.active.as_ref().is_some_and(|a| a.id == id.as_str());
    let playing = plays(&r.player, id.as_str());
    r.verified = active_ok && playing && r.errors.is_empty();
    r.message = confirmed_message(o, &id, &r, active_ok);
    if r.verified {
        // Keeps the active show and the one before it (`previous`, recorded by the
        // switch, so a resumed activation keeps it too).
        if let Err(e) = s.gc(&[]) {
            r.errors.push(format!("clean-up of old shows: {e}"));
        }
    }
    r.read_at_unix_ms = now_ms();
    let ok = r.verified;
    (r, ok)
}

/// `show status`: the store's active show and what the player plays.
pub fn status(o: &ShowOpts) -> (ShowReadback, bool) {
    let mut r = ShowReadback {
        unit: o.unit_id.clone(),
        ..Default::default()
    };
    match open(o)
        .map_err(|e| e.to_string())
        .and_then(|s| active_info(&s))
    {
        Ok(a) => r.active = a,
        Err(e) => r.errors.push(e),
    }
    match player_profile(&o.profile_url) {
        Ok(doc) => {
            r.player = doc.show;
            r.control = doc.control;
        }
        Err(e) => r.errors.push(e),
    }
    r.verified = match (&r.active, &r.player) {
        (Some(a), p) => plays(p, &a.id),
        _ => false,
    };
    r.message = match (&r.active, &r.player) {
        (_, Some(p)) if p.source == ShowSource::Store => {
            format!(
                "plays {} ({}) from the store",
                p.name,
                p.id.as_deref().unwrap_or("-")
            )
        }
        (_, Some(p)) => format!(
            "plays the config show {}{}",
            p.name,
            p.reason
                .as_ref()
                .map(|r| format!(": {r}"))
                .unwrap_or_default()
        ),
        (_, None) => "the player did not answer".into(),
    };
    // Stored files found bad are news the operator needs, but the show still plays.
    if let Ok(q) = pfx_store::quarantined(&o.root)
        && !q.is_empty()
    {
        r.message.push_str(&format!(
            "; {} stored file(s) did not match their names and are quarantined in {} (the next push sends them again)",
            q.len(),
            o.root.join(pfx_store::QUARANTINE).display()
        ));
    }
    r.read_at_unix_ms = now_ms();
    let ok = r.errors.is_empty();
    (r, ok)
}
