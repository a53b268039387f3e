//! `pfx-fleet push show DIR` and `pfx-fleet shows`: a show directory to the units' show
//! stores over the same SSH trust as `push pause-off`. Per unit: ask what it lacks (by
//! hash), send only that in chunks from where an interrupted transfer stopped, then ask it
//! to check and switch; its readback is recorded. Workers run the SSH commands; the main
//! thread alone writes the database, one committed event at a time.

use crate::agent::now_ms;
use crate::config::{FleetConfig, SshConfig};
use crate::db::{Counts, DbError, Event, EventKind, Finished, FleetDb, UnitRow};
use crate::gate::UnitState;
use crate::ssh;
use pfx_api::show::{ActivateRequest, MissingReport, PutReport, ShowReadback, WantedFile};
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, mpsc};
use std::time::Duration;

/// One file of the show on the operator's disk.
#[derive(Debug, Clone, PartialEq)]
pub struct LocalFile {
    pub name: String,
    pub path: PathBuf,
    pub hash: String,
    pub size: u64,
}

/// A show directory, read and hashed.
#[derive(Debug, Clone)]
pub struct LocalShow {
    pub name: String,
    pub show_yaml: String,
    pub files: Vec<LocalFile>,
}

#[derive(Debug, thiserror::Error)]
pub enum ShowDirError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: {why}", path.display())]
    Invalid { path: PathBuf, why: String },
}

/// The files a show.yaml names, each once: every `fseq:` and every
/// `profile:` that is a path (has a `/` or ends in `.yaml`). Pure.
pub fn named_files(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                if let serde_json::Value::String(s) = x {
                    let is_path = k == "fseq"
                        || (k == "profile" && (s.contains('/') || s.ends_with(".yaml")));
                    if is_path && !out.contains(s) {
                        out.push(s.clone());
                    }
                } else {
                    named_files(x, out);
                }
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|x| named_files(x, out)),
        _ => {}
    }
}

/// Reads DIR: its show.yaml and the files it names, hashed. The name of the show is
/// `name`, else DIR's own name.
pub fn read_show_dir(dir: &Path, name: Option<&str>) -> Result<LocalShow, ShowDirError> {
    let yaml_path = dir.join("show.yaml");
    let show_yaml = std::fs::read_to_string(&yaml_path).map_err(|source| ShowDirError::Io {
        path: yaml_path.clone(),
        source,
    })?;
    let v: serde_json::Value =
        serde_saphyr::from_str(&show_yaml).map_err(|e| ShowDirError::Invalid {
            path: yaml_path.clone(),
            why: format!("not YAML: {e}"),
        })?;
    if v.get("profiles_dir").is_some() {
        return Err(ShowDirError::Invalid {
            path: yaml_path,
            why: "profiles_dir: a pushed show names its profiles one by one (`profile: NAME` for the unit's, or `profile: file.yaml` in the show directory)".into(),
        });
    }
    let mut names = Vec::new();
    named_files(&v, &mut names);
    let mut files = Vec::new();
    for n in names {
        pfx_store::check_name(&n).map_err(|why| ShowDirError::Invalid {
            path: yaml_path.clone(),
            why: format!("{n:?} {why}; a pushed show names files inside its directory"),
        })?;
        let path = dir.join(&n);
        let meta = std::fs::metadata(&path).map_err(|source| ShowDirError::Io {
            path: path.clone(),
            source,
        })?;
        if !meta.is_file() {
            return Err(ShowDirError::Invalid {
                path,
                why: "not a regular file".into(),
            });
        }
        let hash = pfx_store::hash_file(&path)
            .map_err(|e| ShowDirError::Invalid {
                path: path.clone(),
                why: e.to_string(),
            })?
            .to_string();
        files.push(LocalFile {
            name: n,
            path,
            hash,
            size: meta.len(),
        });
    }
    let name = match name {
        Some(n) => n.to_string(),
        None => std::fs::canonicalize(dir)
            .ok()
            .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_else(|| "show".into()),
    };
    Ok(LocalShow {
        name,
        show_yaml,
        files,
    })
}

pub struct ShowPushOpts {
    pub parallel: usize,
    pub chunk_bytes: u64,
    pub operator: String,
    pub args: String,
    pub site: Option<String>,
    /// Draw progress bars (a terminal) or print plain lines.
    pub bars: bool,
}

#[derive(Debug, Default, serde::Serialize)]
pub struct UnitResult {
    pub unit: String,
    pub state: String,
    pub reason: Option<String>,
    pub bytes_sent: u64,
    pub show_id: Option<String>,
}

#[derive(Debug, Default, serde::Serialize)]
pub struct ShowPushSummary {
    pub run_id: i64,
    pub show: String,
    pub files: usize,
    pub bytes: u64,
    pub targets: usize,
    pub done: usize,
    pub pending: usize,
    pub failed: usize,
    pub units: Vec<UnitResult>,
}

/// What one unit's push came to.
#[derive(Debug, Clone, PartialEq)]
pub struct UnitOutcome {
    pub state: UnitState,
    pub reason: Option<String>,
    pub readback: Option<String>,
    pub bytes_sent: u64,
}

/// The raw result of one SSH command.
type Raw = ssh::Raw;

/// The unit's answer as `T`, or what went wrong on the way, in words, and whether trying
/// again later may help (unreachable, timed out).
pub(crate) fn answer<T: serde::de::DeserializeOwned>(
    raw: &Raw,
    unit: &str,
    what: &str,
    timeout_s: u64,
) -> Result<T, (UnitState, String)> {
    let line = raw.stdout.trim().lines().last().unwrap_or("");
    match serde_json::from_str::<serde_json::Value>(line) {
        Ok(v) if v.get("unit").is_some() => {
            let who = v.get("unit").and_then(|u| u.as_str()).unwrap_or("");
            if who != unit {
                return Err((
                    UnitState::Failed,
                    format!(
                        "{what}: answered as unit {who:?}, expected {unit:?}: wrong host in the fleet config?"
                    ),
                ));
            }
            serde_json::from_value(v).map_err(|e| {
                (
                    UnitState::Failed,
                    format!("{what}: the agent's answer is not what this pfx-fleet expects ({e}): update the unit's image"),
                )
            })
        }
        _ => {
            // Not an answer: the transport's reasons (host key, unreachable, timeout).
            let o = ssh::classify(raw, unit, timeout_s);
            let mut reason = o.reason.unwrap_or_else(|| "no answer".into());
            // The verb group (`show`, `update`) this unit's agent does not know.
            let group = what.split(' ').next().unwrap_or(what);
            if raw.stderr.contains("is not an agent verb")
                || raw.stderr.contains(&format!("{group}: use"))
            {
                reason = format!(
                    "the unit's agent does not know `{group}` verbs: update its image ({reason})"
                );
            }
            Err((o.state, format!("{what}: {reason}")))
        }
    }
}

/// A file slice `offset..offset+len` as a reader.
pub(crate) fn slice(path: &Path, offset: u64, len: u64) -> std::io::Result<std::io::Take<File>> {
    let mut f = File::open(path)?;
    f.seek(SeekFrom::Start(offset))?;
    Ok(f.take(len))
}

pub(crate) fn human_bytes(b: u64) -> String {
    if b >= 1 << 20 {
        format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64)
    } else {
        format!("{b} B")
    }
}

/// Everything a worker needs to push to one unit.
struct UnitJob {
    ssh: SshConfig,
    /// The unit's socket in the run's control directory: its commands share one
    /// connection (the first makes it, host key checked).
    socket: Option<PathBuf>,
    agent_prefix: String,
    show: Arc<LocalShow>,
    chunk: u64,
}

enum Msg {
    Started(UnitRow),
    /// bytes to send in all (after asking the unit)
    Planned(String, u64),
    Progress(String, u64),
    Finished(UnitRow, UnitOutcome),
}

/// The remote command, built in `config` (here for the callers that import it from here).
pub(crate) use crate::config::remote_command as remote;

/// Why a unit's push ended early: the state to record and the reason.
type Early = (UnitState, String);

/// One unit's push as it goes: the job, the unit, and where its progress goes.
struct UnitPush<'a> {
    job: &'a UnitJob,
    u: &'a UnitRow,
    tx: &'a mpsc::Sender<Msg>,
}

impl UnitPush<'_> {
    /// One command to the unit's agent, on the unit's shared connection when there is one.
    fn go(&self, verb: &str, input: &mut dyn Read, sent: &AtomicU64, timeout: Duration) -> Raw {
        let (job, u) = (self.job, self.u);
        let remote = remote(&job.agent_prefix, verb);
        let input = ssh::Input { from: input, sent };
        ssh::run_for(
            &job.ssh,
            &u.host,
            u.port,
            &remote,
            ssh::Via::shared(job.socket.as_deref()),
            Some(input),
            timeout,
        )
    }

    /// Step 1: what the unit lacks (planned as the bytes to send), refused when the
    /// unit has not the room for it.
    fn missing(&self) -> Result<MissingReport, Early> {
        let t = self.job.ssh.command_timeout_s;
        let wanted: Vec<WantedFile> = self
            .job
            .show
            .files
            .iter()
            .map(|f| WantedFile {
                hash: f.hash.clone(),
                size: f.size,
            })
            .collect();
        let body = serde_json::to_vec(&wanted).unwrap_or_default();
        let raw = self.go(
            "show missing",
            &mut body.as_slice(),
            &AtomicU64::new(0),
            Duration::from_secs(t),
        );
        let miss: MissingReport = answer(&raw, &self.u.unit_id, "show missing", t)?;
        if !miss.errors.is_empty() {
            return Err((
                UnitState::Failed,
                format!("show missing: {}", miss.errors.join("; ")),
            ));
        }
        let need: u64 = miss
            .missing
            .iter()
            .map(|m| m.size - m.offset.min(m.size))
            .sum();
        let _ = self.tx.send(Msg::Planned(self.u.unit_id.clone(), need));
        if need > miss.free_bytes {
            return Err((
                UnitState::Failed,
                format!(
                    "the unit's data partition has {} free above its reserve, the show needs {} more: remove old shows there or push a smaller one",
                    human_bytes(miss.free_bytes),
                    human_bytes(need)
                ),
            ));
        }
        Ok(miss)
    }

    /// Step 2: sends what the unit lacks, file by file, each from where it stands.
    fn send_missing(&self, miss: &MissingReport, bytes_sent: &mut u64) -> Result<(), Early> {
        for m in &miss.missing {
            let Some(f) = self.job.show.files.iter().find(|f| f.hash == m.hash) else {
                return Err((
                    UnitState::Failed,
                    format!(
                        "show missing: the unit asked for {} which this show does not have",
                        m.hash
                    ),
                ));
            };
            self.send_file(f, m.offset.min(f.size), bytes_sent)?;
        }
        Ok(())
    }

    /// One file, chunk by chunk from `offset`, until the unit has stored it whole.
    fn send_file(&self, f: &LocalFile, mut offset: u64, bytes_sent: &mut u64) -> Result<(), Early> {
        loop {
            let len = self.job.chunk.min(f.size - offset);
            let rep = self.put_chunk(f, offset, len, bytes_sent)?;
            // Only the transfer's own errors count; a refused priority is only noted.
            let errs: Vec<&String> = rep
                .errors
                .iter()
                .filter(|e| !e.starts_with("could not lower"))
                .collect();
            if !errs.is_empty() {
                return Err((
                    UnitState::Failed,
                    format!(
                        "show put {}: {}; run the push again to resume",
                        f.name,
                        errs.iter()
                            .map(|e| e.as_str())
                            .collect::<Vec<_>>()
                            .join("; ")
                    ),
                ));
            }
            if rep.stored {
                return Ok(());
            }
            if rep.have != offset + len || rep.have >= f.size {
                return Err((
                    UnitState::Failed,
                    format!(
                        "show put {}: the unit holds {} bytes, expected {}; run the push again",
                        f.name,
                        rep.have,
                        offset + len
                    ),
                ));
            }
            offset = rep.have;
        }
    }

    /// One `show put` of `len` bytes of `f` at `offset`, its progress reported while it
    /// goes; what it sent is added to `bytes_sent` whatever the answer.
    fn put_chunk(
        &self,
        f: &LocalFile,
        offset: u64,
        len: u64,
        bytes_sent: &mut u64,
    ) -> Result<PutReport, Early> {
        let t = self.job.ssh.command_timeout_s;
        let mut input = slice(&f.path, offset, len)
            .map_err(|e| (UnitState::Failed, format!("{}: {e}", f.path.display())))?;
        let sent = Arc::new(AtomicU64::new(0));
        let timeout = Duration::from_secs(t + len / (64 * 1024));
        let verb = format!("show put {} {} {offset} {len}", f.hash, f.size);
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let watcher = watch_progress(
            Arc::clone(&sent),
            Arc::clone(&done),
            self.tx.clone(),
            self.u.unit_id.clone(),
        );
        let raw = self.go(&verb, &mut input, &sent, timeout);
        done.store(true, Ordering::Relaxed);
        let _ = watcher.join();
        *bytes_sent += sent.load(Ordering::Relaxed);
        answer(&raw, &self.u.unit_id, "show put", t).map_err(|(state, why)| {
            (
                state,
                format!(
                    "{why} (sending {} at {offset} of {}); run the push again to resume",
                    f.name, f.size
                ),
            )
        })
    }

    /// Step 3: asks the unit to check the show and switch to it; done only on the
    /// unit's own word.
    fn activate(&self, out: &mut UnitOutcome) -> Result<(), Early> {
        let (job, t) = (self.job, self.job.ssh.command_timeout_s);
        let manifest = ActivateRequest {
            name: job.show.name.clone(),
            show_yaml: job.show.show_yaml.clone(),
            files: job
                .show
                .files
                .iter()
                .map(|f| (f.name.clone(), f.hash.clone()))
                .collect::<BTreeMap<_, _>>(),
        };
        let body = serde_json::to_vec(&manifest).unwrap_or_default();
        // The unit reads every file of the show back before it switches: allow for that
        // at a slow card's 4 MiB/s, on top of the player's check and confirmation.
        let show_bytes: u64 = job.show.files.iter().map(|f| f.size).sum();
        let raw = self.go(
            "show activate",
            &mut body.as_slice(),
            &AtomicU64::new(0),
            Duration::from_secs(t + 90 + show_bytes / (4 << 20)),
        );
        let rb: ShowReadback =
            answer(&raw, &self.u.unit_id, "show activate", t).map_err(|(state, why)| {
                (
                    state,
                    format!("{why}; the unit may have switched: run `pfx-fleet shows` to see"),
                )
            })?;
        out.readback = serde_json::to_string(&rb).ok();
        // Done only on the unit's own word: its store's active show has exactly these
        // hashes and its player says it plays it.
        let hashes_match = rb
            .active
            .as_ref()
            .is_some_and(|a| a.files == manifest.files && Some(&a.id) == rb.requested.as_ref());
        if rb.verified && hashes_match && raw.exit == Some(0) {
            out.state = UnitState::Done;
            out.reason = Some(rb.message);
        } else {
            out.reason = Some(if rb.errors.is_empty() {
                rb.message
            } else {
                format!("{} ({})", rb.message, rb.errors.join("; "))
            });
        }
        Ok(())
    }

    /// The steps in order: missing, put chunks, activate.
    fn steps(&self, out: &mut UnitOutcome) -> Result<(), Early> {
        let miss = self.missing()?;
        self.send_missing(&miss, &mut out.bytes_sent)?;
        self.activate(out)
    }
}

/// Reports a chunk's progress while it goes: every 100 ms what `sent` gained, and the
/// rest once `done` is set.
fn watch_progress(
    sent: Arc<AtomicU64>,
    done: Arc<std::sync::atomic::AtomicBool>,
    tx: mpsc::Sender<Msg>,
    unit: String,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut last = 0;
        while !done.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(100));
            let now = sent.load(Ordering::Relaxed);
            if now > last {
                let _ = tx.send(Msg::Progress(unit.clone(), now - last));
                last = now;
            }
        }
        let now = sent.load(Ordering::Relaxed);
        if now > last {
            let _ = tx.send(Msg::Progress(unit, now - last));
        }
    })
}

/// Pushes the show to one unit. Pure of the database: the caller records the outcome.
fn push_unit(job: &UnitJob, u: &UnitRow, tx: &mpsc::Sender<Msg>) -> UnitOutcome {
    let mut out = UnitOutcome {
        state: UnitState::Failed,
        reason: None,
        readback: None,
        bytes_sent: 0,
    };
    if let Err((state, why)) = (UnitPush { job, u, tx }).steps(&mut out) {
        out.state = state;
        out.reason = Some(why);
    }
    out
}

/// The pool: one [`push_unit`] per unit, each reporting its start, plan, progress and
/// outcome to `tx`.
fn spawn_workers(
    cfg: &FleetConfig,
    show: Arc<LocalShow>,
    targets: Vec<UnitRow>,
    o: &ShowPushOpts,
    reuse: Option<Arc<ssh::ControlDir>>,
    tx: mpsc::Sender<Msg>,
) -> crate::pool::Workers {
    let agents = cfg.agent_commands();
    let (ssh_cfg, chunk) = (cfg.ssh.clone(), o.chunk_bytes);
    crate::pool::spawn(
        targets,
        o.parallel,
        reuse,
        None,
        move |_slot, u: UnitRow, socket| {
            if tx.send(Msg::Started(u.clone())).is_err() {
                return false;
            }
            let job = UnitJob {
                ssh: ssh_cfg.clone(),
                agent_prefix: agents.prefix(&u.unit_id).to_string(),
                show: Arc::clone(&show),
                chunk,
                socket,
            };
            let out = push_unit(&job, &u, &tx);
            tx.send(Msg::Finished(u, out)).is_ok()
        },
    )
}

/// Without bars, a line per this many bytes sent to a unit.
pub(crate) const PLAIN_STEP: u64 = 16 << 20;

/// Each unit's transfer as a progress bar on a terminal, else as plain lines (one per
/// [`PLAIN_STEP`] sent). `push show` and `push update` both draw with it.
pub(crate) struct Bars {
    multi: indicatif::MultiProgress,
    style: Option<indicatif::ProgressStyle>,
    /// The unit's bar, bytes sent so far and bytes to send.
    bars: BTreeMap<String, (indicatif::ProgressBar, u64, u64)>,
    pub draw: bool,
}

impl Bars {
    pub fn new(draw: bool) -> Bars {
        let multi = indicatif::MultiProgress::with_draw_target(if draw {
            indicatif::ProgressDrawTarget::stderr()
        } else {
            indicatif::ProgressDrawTarget::hidden()
        });
        let style = indicatif::ProgressStyle::with_template(
            "{prefix:<12} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} {msg}",
        )
        .map(|s| s.progress_chars("=> "))
        .ok();
        Bars {
            multi,
            style,
            bars: BTreeMap::new(),
            draw,
        }
    }

    /// A line to the operator, above the bars when there are any.
    pub fn say(&self, line: String) {
        if self.draw {
            let _ = self.multi.println(line);
        } else {
            eprintln!("{line}");
        }
    }

    /// A bar for `unit`, which is to be sent `total` bytes.
    pub fn planned(&mut self, unit: String, total: u64) {
        let pb = self.multi.add(indicatif::ProgressBar::new(total));
        if let Some(s) = self.style.clone() {
            pb.set_style(s);
        }
        pb.set_prefix(unit.clone());
        if !self.draw {
            eprintln!("{unit}: {} to send", human_bytes(total));
        }
        self.bars.insert(unit, (pb, 0, total));
    }

    /// Counts `n` more bytes sent to `unit` on its bar: the bytes sent before and
    /// after, and the bytes to send; None when the unit has no bar.
    pub fn advance(&mut self, unit: &str, n: u64) -> Option<(u64, u64, u64)> {
        let (pb, sent, total) = self.bars.get_mut(unit)?;
        pb.inc(n);
        let before = *sent;
        *sent += n;
        Some((before, *sent, *total))
    }

    /// Drops every bar left (the end of a wave: its bars end with it).
    pub fn clear(&mut self) {
        self.bars.clear();
    }

    /// The unit's transfer is over: its bar goes.
    pub fn finished(&mut self, unit: &str) {
        if let Some((pb, _, _)) = self.bars.remove(unit) {
            pb.finish_and_clear();
        }
    }
}

/// The main thread's side: records every message as it arrives, the only writer of the
/// database, and draws the transfers.
fn record_all(
    store: &FleetDb,
    run: &crate::push::OpenRun,
    rx: mpsc::Receiver<Msg>,
    bars: &mut Bars,
    sum: &mut ShowPushSummary,
) -> Result<(), DbError> {
    for m in rx {
        match m {
            Msg::Started(u) => {
                store.record(&Event::new(
                    run.run_id,
                    &u.unit_id,
                    u.site.as_deref(),
                    UnitState::Started,
                    EventKind::Show { bytes_sent: 0 },
                    now_ms(),
                ))?;
            }
            Msg::Planned(unit, total) => bars.planned(unit, total),
            Msg::Progress(unit, n) => {
                if let Some((before, after, total)) = bars.advance(&unit, n)
                    && !bars.draw
                    && after / PLAIN_STEP > before / PLAIN_STEP
                {
                    eprintln!(
                        "{unit}: {} of {} sent",
                        human_bytes(after),
                        human_bytes(total)
                    );
                }
            }
            // Closing on a signal: nothing more is recorded (see OpenRun::closing).
            Msg::Finished(..) if run.closing() => {}
            Msg::Finished(u, out) => {
                let finished = Finished {
                    state: out.state,
                    reason: out.reason.as_deref(),
                    readback: out.readback.as_deref(),
                    kind: EventKind::Show {
                        bytes_sent: out.bytes_sent,
                    },
                    recorded_ms: now_ms(),
                };
                let counts = Counts {
                    done: &mut sum.done,
                    pending: &mut sum.pending,
                    failed: &mut sum.failed,
                };
                store.record_result(run.run_id, &u, finished, counts)?;
                bars.finished(&u.unit_id);
                // Printed only after the commit: whatever this line reports is on disk.
                bars.say(format!(
                    "recorded {} {}: {} ({} sent)",
                    u.unit_id,
                    out.state.as_str(),
                    out.reason.as_deref().unwrap_or(""),
                    human_bytes(out.bytes_sent)
                ));
                sum.units.push(unit_result(u, out));
            }
        }
    }
    Ok(())
}

/// A unit's line of the summary, with the show id it was asked to switch to.
fn unit_result(u: UnitRow, out: UnitOutcome) -> UnitResult {
    let show_id = out
        .readback
        .as_deref()
        .and_then(|r| serde_json::from_str::<ShowReadback>(r).ok())
        .and_then(|r| r.requested);
    UnitResult {
        unit: u.unit_id,
        state: out.state.as_str().into(),
        reason: out.reason,
        bytes_sent: out.bytes_sent,
        show_id,
    }
}

/// Pushes `show` to `targets`, `o.parallel` at a time.
pub fn push_show(
    store: &FleetDb,
    cfg: &FleetConfig,
    show: LocalShow,
    targets: Vec<UnitRow>,
    o: &ShowPushOpts,
) -> Result<ShowPushSummary, DbError> {
    let run = crate::push::open_run(
        store,
        cfg,
        &crate::push::RunInfo {
            kind: "push show",
            site: o.site.as_deref(),
            operator: &o.operator,
            args: &o.args,
        },
        targets.len(),
    )?;
    let mut sum = ShowPushSummary {
        run_id: run.run_id,
        show: show.name.clone(),
        files: show.files.len(),
        bytes: show.files.iter().map(|f| f.size).sum(),
        targets: targets.len(),
        ..Default::default()
    };
    let (tx, rx) = mpsc::channel::<Msg>();
    let workers = spawn_workers(cfg, Arc::new(show), targets, o, run.reuse.clone(), tx);
    let mut bars = Bars::new(o.bars);
    record_all(store, &run, rx, &mut bars, &mut sum)?;
    workers.join();
    run.finish(store, &sum)?;
    Ok(sum)
}

/// One row of `pfx-fleet shows`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ShowsRow {
    pub unit: String,
    pub site: Option<String>,
    /// The unit answered `show status` just now.
    pub answered: bool,
    /// What its player plays: the show's name (None when it did not say).
    pub playing: Option<String>,
    pub show_id: Option<String>,
    /// store or config.
    pub source: Option<String>,
    pub since_unix_ms: Option<u64>,
    /// Why the player plays the config show, or why the unit did not answer.
    pub reason: Option<String>,
    /// The store's active show (it differs from `playing` while a switch is under way or
    /// when the player refused it).
    pub active: Option<String>,
    /// The live action the unit holds (`control`), as `top` shows it: what, by whom,
    /// since when; None when it holds none (or did not say).
    #[serde(rename = "override")]
    pub held: Option<String>,
    pub readback: Option<ShowReadback>,
}

/// Asks each unit `show status`, `parallel` at a time.
pub fn shows(cfg: &FleetConfig, units: Vec<UnitRow>, parallel: usize) -> Vec<ShowsRow> {
    let (tx, rx) = mpsc::channel();
    let ssh_cfg = cfg.ssh.clone();
    let agents = cfg.agent_commands();
    let workers = crate::pool::spawn(units, parallel, None, None, move |i, u: UnitRow, _| {
        let remote = agents.remote(&u.unit_id, "show status");
        let raw = ssh::run_for(
            &ssh_cfg,
            &u.host,
            u.port,
            &remote,
            ssh::Via::Own,
            None,
            Duration::from_secs(ssh_cfg.command_timeout_s),
        );
        let row = shows_row(
            &u,
            answer::<ShowReadback>(&raw, &u.unit_id, "show status", ssh_cfg.command_timeout_s),
        );
        tx.send((i, row)).is_ok()
    });
    let mut rows: Vec<(usize, ShowsRow)> = rx.into_iter().collect();
    workers.join();
    rows.sort_by_key(|(i, _)| *i);
    rows.into_iter().map(|(_, r)| r).collect()
}

/// One row of `shows` from what `show status` came to.
fn shows_row(u: &UnitRow, got: Result<ShowReadback, (UnitState, String)>) -> ShowsRow {
    match got {
        Ok(rb) => ShowsRow {
            unit: u.unit_id.clone(),
            site: u.site.clone(),
            answered: true,
            playing: rb.player.as_ref().map(|p| p.name.clone()),
            show_id: rb.player.as_ref().and_then(|p| p.id.clone()),
            source: rb.player.as_ref().map(|p| {
                match p.source {
                    pfx_api::show::ShowSource::Store => "store",
                    pfx_api::show::ShowSource::Config => "config",
                }
                .to_string()
            }),
            since_unix_ms: rb.player.as_ref().and_then(|p| p.since_unix_ms),
            reason: rb
                .player
                .as_ref()
                .and_then(|p| p.reason.clone())
                .or_else(|| (!rb.errors.is_empty()).then(|| rb.errors.join("; "))),
            active: rb.active.as_ref().map(|a| format!("{} ({})", a.name, a.id)),
            held: rb.control.as_ref().and_then(crate::top::override_text),
            readback: Some(rb),
        },
        Err((_, why)) => ShowsRow {
            unit: u.unit_id.clone(),
            site: u.site.clone(),
            answered: false,
            playing: None,
            show_id: None,
            source: None,
            since_unix_ms: None,
            reason: Some(why),
            active: None,
            held: None,
            readback: None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shows_says_what_a_unit_holds_as_top_does() {
        let u = crate::db::tests::unit("u1", "hall-a");
        let held = pfx_api::control::ControlState {
            content: Some(pfx_api::control::Action::Blackout),
            content_since_unix_ms: Some(1_767_225_600_000),
            content_by: Some("alice@10.20.0.5".into()),
            ..Default::default()
        };
        let rb = |control| ShowReadback {
            unit: "u1".into(),
            control,
            ..Default::default()
        };
        let r = shows_row(&u, Ok(rb(Some(held.clone()))));
        assert_eq!(
            r.held.as_deref(),
            Some("blackout by alice@10.20.0.5 since 2026-01-01 00:00:00 UTC")
        );
        assert_eq!(r.held, crate::top::override_text(&held));
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["override"], serde_json::json!(r.held));
        // Nothing held, or an agent too old to say: no override.
        for c in [Some(Default::default()), None] {
            assert_eq!(shows_row(&u, Ok(rb(c))).held, None);
        }
    }

    #[test]
    fn named_files_are_the_fseqs_and_profile_paths() {
        let v: serde_json::Value = serde_saphyr::from_str(
            "outputs:\n  - {name: a, profile: gen3-bigpacket}\n  - {name: b, profile: mine.yaml}\ncontent:\n  playlist:\n    - fseq: songs/a.fseq\n    - pattern: id\n    - fseq: songs/a.fseq\nplaylists:\n  x:\n    - fseq: b.fseq\n",
        )
        .unwrap();
        let mut out = Vec::new();
        named_files(&v, &mut out);
        out.sort();
        assert_eq!(out, ["b.fseq", "mine.yaml", "songs/a.fseq"]);
    }

    #[test]
    fn a_show_dir_is_read_and_hashed_and_bad_names_refused() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(
            d.path().join("show.yaml"),
            "interface: eth0\noutputs: []\ncontent:\n  playlist:\n    - fseq: a.fseq\n",
        )
        .unwrap();
        let e = read_show_dir(d.path(), None).unwrap_err();
        assert!(e.to_string().contains("a.fseq"), "{e}");
        std::fs::write(d.path().join("a.fseq"), b"abc").unwrap();
        let s = read_show_dir(d.path(), Some("evening")).unwrap();
        assert_eq!(s.name, "evening");
        assert_eq!(s.files.len(), 1);
        assert_eq!(
            s.files[0].hash,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        std::fs::write(
            d.path().join("show.yaml"),
            "content:\n  playlist:\n    - fseq: ../x.fseq\n",
        )
        .unwrap();
        let e = read_show_dir(d.path(), None).unwrap_err();
        assert!(e.to_string().contains("inside its directory"), "{e}");
    }
}
