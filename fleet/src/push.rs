//! `pfx-fleet push pause-off`: a bounded pool of SSH runs; the main thread is the only
//! writer of the state database and commits each result the moment it arrives.

use crate::agent::now_ms;
use crate::config::FleetConfig;
use crate::db::{Counts, DbError, Event, EventKind, Finished, FleetDb, UnitRow};
use crate::gate::{self, UnitState};
use crate::ssh;
use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

pub struct PushOpts {
    pub parallel: usize,
    /// Units with a verified readback fresher than this are skipped (resume).
    pub max_age_ms: u64,
    pub force: bool,
    pub operator: String,
    pub args: String,
    pub site: Option<String>,
}

#[derive(Debug, Default, serde::Serialize)]
pub struct PushSummary {
    pub run_id: i64,
    pub targets: usize,
    pub skipped_fresh: usize,
    pub done: usize,
    pub pending: usize,
    pub failed: usize,
}

enum Msg {
    Started(UnitRow),
    Finished(UnitRow, ssh::Outcome),
}

/// The verb `push pause-off` sends: `apply` answers with its own readback.
const VERB: &str = "apply pause-off --json";

/// A run as both pushes open it: its row in `runs` and, when there is a unit to reach,
/// one private directory of SSH control sockets for the run (each unit's commands share
/// one connection) that a signal closes. Without a usable directory every command makes
/// its own connection, as checked as ever.
pub(crate) struct OpenRun {
    pub run_id: i64,
    pub reuse: Option<Arc<ssh::ControlDir>>,
    signals: Option<signal_hook::iterator::Handle>,
}

/// What a run is recorded as.
pub(crate) struct RunInfo<'a> {
    pub kind: &'a str,
    pub site: Option<&'a str>,
    pub operator: &'a str,
    pub args: &'a str,
}

/// Opens a run on `units` units (see [`OpenRun`]).
pub(crate) fn open_run(
    store: &FleetDb,
    cfg: &FleetConfig,
    info: &RunInfo<'_>,
    units: usize,
) -> Result<OpenRun, DbError> {
    let run_id = store.begin_run(info.kind, info.site, info.operator, info.args, now_ms())?;
    let reuse = if units == 0 {
        None
    } else {
        match ssh::ControlDir::create(&cfg.ssh.ssh) {
            Ok(d) => Some(Arc::new(d)),
            Err(e) => {
                eprintln!("pfx-fleet: warning: {e}; pushing without SSH connection reuse");
                None
            }
        }
    };
    let signals = reuse.as_ref().and_then(|d| close_on_signal(Arc::clone(d)));
    Ok(OpenRun {
        run_id,
        reuse,
        signals,
    })
}

impl OpenRun {
    /// Whether a signal is closing the run: nothing more is started, and a command cut
    /// short by the closing is not the unit's result (the process ends in a moment).
    pub fn closing(&self) -> bool {
        self.reuse.as_ref().is_some_and(|d| d.closed())
    }

    /// Ends the run's shared connections and records its summary.
    pub fn finish(self, store: &FleetDb, summary: &impl serde::Serialize) -> Result<(), DbError> {
        if let Some(h) = self.signals {
            h.close();
        }
        if let Some(d) = &self.reuse {
            d.close();
        }
        let text = serde_json::to_string(summary).unwrap_or_default();
        store.finish_run(self.run_id, &text, now_ms())
    }
}

/// The targets still to push: a unit with a fresh verified readback is skipped (and
/// counted) unless forced.
fn not_fresh(
    store: &FleetDb,
    targets: Vec<UnitRow>,
    o: &PushOpts,
    sum: &mut PushSummary,
) -> Result<Vec<UnitRow>, DbError> {
    let now = now_ms();
    let mut todo = Vec::new();
    for u in targets {
        let fresh = match store.latest_unit(&u.unit_id)? {
            Some(l) => gate::fresh_verified(&l, now, o.max_age_ms).is_ok(),
            None => false,
        };
        if fresh && !o.force {
            eprintln!("skip {}: verified PAUSE-off readback is fresh", u.unit_id);
            sum.skipped_fresh += 1;
        } else {
            todo.push(u);
        }
    }
    Ok(todo)
}

fn progress_bar(n: usize) -> indicatif::ProgressBar {
    let pb = indicatif::ProgressBar::with_draw_target(
        Some(n as u64),
        indicatif::ProgressDrawTarget::stderr(),
    );
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{spinner} push pause-off [{bar:30}] {pos}/{len} units {elapsed_precise} {msg}",
    ) {
        pb.set_style(style.progress_chars("=> "));
    }
    pb
}

/// The pool: one `apply` per unit, each reporting its start and its outcome to `tx`.
fn spawn_workers(
    cfg: &FleetConfig,
    todo: Vec<UnitRow>,
    parallel: usize,
    reuse: Option<Arc<ssh::ControlDir>>,
    tx: mpsc::Sender<Msg>,
) -> crate::pool::Workers {
    // Each unit's remote command, resolved once here (units without their own
    // agent_command, such as discovered ones, get the fleet-wide one).
    let agents = cfg.agent_commands();
    let jobs: Vec<(String, UnitRow)> = todo
        .into_iter()
        .map(|u| (agents.remote(&u.unit_id, VERB), u))
        .collect();
    let ssh_cfg = cfg.ssh.clone();
    crate::pool::spawn(
        jobs,
        parallel,
        reuse,
        None,
        move |_slot, (remote, u): (String, UnitRow), socket| {
            if tx.send(Msg::Started(u.clone())).is_err() {
                return false;
            }
            // One command per unit: `apply` answers with its own readback, so no
            // second round trip reads it.
            let raw = ssh::run_for(
                &ssh_cfg,
                &u.host,
                u.port,
                &remote,
                ssh::Via::shared(socket.as_deref()),
                None,
                Duration::from_secs(ssh_cfg.command_timeout_s),
            );
            let out = ssh::classify(&raw, &u.unit_id, ssh_cfg.command_timeout_s);
            tx.send(Msg::Finished(u, out)).is_ok()
        },
    )
}

/// The main thread's side: records every message as it arrives, the only writer of the
/// database.
fn record_all(
    store: &FleetDb,
    run: &OpenRun,
    rx: mpsc::Receiver<Msg>,
    pb: &indicatif::ProgressBar,
    sum: &mut PushSummary,
) -> Result<(), DbError> {
    for m in rx {
        match m {
            Msg::Started(u) => {
                store.record(&Event::new(
                    run.run_id,
                    &u.unit_id,
                    u.site.as_deref(),
                    UnitState::Started,
                    EventKind::PauseOff { unit_read_ms: None },
                    now_ms(),
                ))?;
            }
            // Closing on a signal: nothing more is recorded (see OpenRun::closing).
            _ if run.closing() => {}
            Msg::Finished(u, out) => {
                let finished = Finished {
                    state: out.state,
                    reason: out.reason.as_deref(),
                    readback: out.readback.as_deref(),
                    kind: EventKind::PauseOff {
                        unit_read_ms: out.unit_read_ms,
                    },
                    recorded_ms: now_ms(),
                };
                let counts = Counts {
                    done: &mut sum.done,
                    pending: &mut sum.pending,
                    failed: &mut sum.failed,
                };
                store.record_result(run.run_id, &u, finished, counts)?;
                // Printed only after the commit: whatever this line reports is on disk.
                pb.suspend(|| {
                    eprintln!(
                        "recorded {} {}: {}",
                        u.unit_id,
                        out.state.as_str(),
                        out.reason.as_deref().unwrap_or("")
                    )
                });
                pb.inc(1);
            }
        }
    }
    Ok(())
}

pub fn push_pause_off(
    store: &FleetDb,
    cfg: &FleetConfig,
    targets: Vec<UnitRow>,
    o: &PushOpts,
) -> Result<PushSummary, DbError> {
    let mut sum = PushSummary {
        targets: targets.len(),
        ..Default::default()
    };
    let todo = not_fresh(store, targets, o, &mut sum)?;
    let n = todo.len();
    let run = open_run(
        store,
        cfg,
        &RunInfo {
            kind: "push pause-off",
            site: o.site.as_deref(),
            operator: &o.operator,
            args: &o.args,
        },
        n,
    )?;
    sum.run_id = run.run_id;
    let pb = progress_bar(n);
    let (tx, rx) = mpsc::channel::<Msg>();
    let workers = spawn_workers(cfg, todo, o.parallel, run.reuse.clone(), tx);
    record_all(store, &run, rx, &pb, &mut sum)?;
    pb.finish_and_clear();
    workers.join();
    run.finish(store, &sum)?;
    Ok(sum)
}

/// SIGINT, SIGTERM, SIGHUP during the run: end the shared connections and remove their
/// directory, then die of the signal as before (a unit in flight stays `started`).
fn close_on_signal(dir: Arc<ssh::ControlDir>) -> Option<signal_hook::iterator::Handle> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let mut signals = match signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP]) {
        Ok(s) => s,
        Err(e) => {
            eprintln!(
                "pfx-fleet: warning: no signal handler ({e}): if interrupted, the SSH control directory {} stays until removed",
                dir.path().display()
            );
            return None;
        }
    };
    let handle = signals.handle();
    std::thread::spawn(move || {
        if let Some(sig) = signals.forever().next() {
            dir.close();
            let _ = signal_hook::low_level::emulate_default_handler(sig);
        }
    });
    Some(handle)
}

#[cfg(test)]
mod tests {
    #[test]
    fn remote_command_is_the_bare_verb_by_default() {
        use crate::config::remote_command;
        assert_eq!(remote_command("", super::VERB), "apply pause-off --json");
        assert_eq!(
            remote_command("/usr/bin/pfx-agent ", super::VERB),
            "/usr/bin/pfx-agent apply pause-off --json"
        );
    }
}
