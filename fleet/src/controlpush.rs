//! `pfx-fleet control ACTION --site S | --unit U ...`: one live action on every unit at
//! once (docs/operator-guide.md, "Show night"). Each unit gets `control WORDS --by
//! OPERATOR` over SSH from the one worker pool (`pool`), all in parallel up to
//! `--parallel`; each answer is recorded (`control_events`, shown by `history`) and then
//! printed with the unit's own stamp of the frame boundary where its poles were told. A
//! unit that does not answer is reported with the reason and holds up nobody.

use std::sync::mpsc;
use std::time::Duration;

use pfx_api::control::{Action, ControlAnswer};

use crate::config::FleetConfig;
use crate::db::{DbError, Event, EventKind, FleetDb, UnitRow};
use crate::gate::UnitState;
use crate::showpush::{answer, remote};
use crate::ssh;

/// How `control` runs.
pub struct ControlOpts {
    pub parallel: usize,
    pub operator: String,
    pub args: String,
    pub site: Option<String>,
    /// The connections `pfx-fleet hold` keeps (`crate::held`): a unit whose held
    /// connection answers gets its action over it, the others over a new one.
    pub held: Option<crate::held::Held>,
}

/// One unit's result.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ControlRow {
    pub unit: String,
    pub site: Option<String>,
    /// `done` (taken), `failed` (refused, or the player not reached), `pending` (the unit
    /// not reached over SSH).
    pub state: String,
    pub accepted: bool,
    /// The unit's clock at the frame boundary where its poles were told (Unix µs), and
    /// the same in UTC.
    pub effective_unix_us: Option<u64>,
    pub effective_utc: Option<String>,
    pub held_on_disk: Option<bool>,
    /// Why not, or what else the unit said.
    pub reason: Option<String>,
    pub answer: Option<ControlAnswer>,
    /// It went over a connection `pfx-fleet hold` keeps (no handshake of its own).
    #[serde(default)]
    pub held_connection: bool,
}

/// The run's result.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ControlSummary {
    pub run_id: i64,
    pub action: String,
    pub targets: usize,
    pub done: usize,
    pub failed: usize,
    pub pending: usize,
    pub units: Vec<ControlRow>,
}

use crate::gate::utc_us;

/// What one unit's answer comes to. Pure.
pub fn row(u: &UnitRow, got: Result<ControlAnswer, (UnitState, String)>) -> ControlRow {
    match got {
        Ok(a) => {
            let reason = match (&a.error, &a.note) {
                (Some(e), Some(n)) => Some(format!("{e}; {n}")),
                (Some(e), None) => Some(e.clone()),
                (None, n) => n.clone(),
            };
            ControlRow {
                unit: u.unit_id.clone(),
                site: u.site.clone(),
                state: if a.accepted { "done" } else { "failed" }.into(),
                accepted: a.accepted,
                effective_unix_us: a.effective_unix_us,
                effective_utc: a.effective_unix_us.map(utc_us),
                held_on_disk: a.held_on_disk,
                reason,
                answer: Some(a),
                held_connection: false,
            }
        }
        Err((state, why)) => ControlRow {
            unit: u.unit_id.clone(),
            site: u.site.clone(),
            state: match state {
                UnitState::Failed => "failed",
                _ => "pending",
            }
            .into(),
            accepted: false,
            effective_unix_us: None,
            effective_utc: None,
            held_on_disk: None,
            reason: Some(why),
            answer: None,
            held_connection: false,
        },
    }
}

/// The line printed for a unit (after its result is recorded).
pub fn line(action: &Action, r: &ControlRow) -> String {
    let what = action.describe();
    match (r.accepted, &r.effective_utc) {
        (true, Some(t)) => format!(
            "{}: {what}: its poles were told at {t} (the unit's clock, at the frame boundary){}{}",
            r.unit,
            r.reason
                .as_ref()
                .map(|n| format!("; {n}"))
                .unwrap_or_default(),
            if r.held_connection {
                "; over the held connection"
            } else {
                ""
            }
        ),
        (true, None) => format!(
            "{}: {what}: taken; {}",
            r.unit,
            r.reason.as_deref().unwrap_or("no frame stamp came back")
        ),
        (false, _) if r.state == "pending" => format!(
            "{}: {what}: NOT REACHED: {}",
            r.unit,
            r.reason.as_deref().unwrap_or("no answer")
        ),
        (false, _) => format!(
            "{}: {what}: NOT TAKEN: {}",
            r.unit,
            r.reason.as_deref().unwrap_or("refused")
        ),
    }
}

/// Units of one wave, each with its index in the run's targets.
pub type Wave = Vec<(usize, UnitRow)>;

/// One wave's workers: `send` for each unit, `parallel` at a time.
fn start_wave<F>(units: Wave, parallel: usize, send: &std::sync::Arc<F>) -> crate::pool::Workers
where
    F: Fn(usize, (usize, UnitRow), Option<std::path::PathBuf>) -> bool + Send + Sync + 'static,
{
    let send = std::sync::Arc::clone(send);
    crate::pool::spawn(units, parallel, None, None, move |i, j, s| send(i, j, s))
}

/// How long the second wave waits for the first at most (see [`waves`]).
pub const SECOND_WAVE_WAIT: Duration = Duration::from_millis(1000);

/// Which units are told first. A MultiSync master carries a blackout, stop, play or
/// resume to its remotes, which change at its frame; a remote's own copy arriving first
/// would change that remote earlier, as spread as the SSH connections are. So for those
/// actions the units known (from their last answer) to be remotes are told second, once
/// every other unit answered; the others, and every unit for any other action, first.
/// Each keeps its index in `targets`. Pure.
pub fn waves(
    targets: Vec<UnitRow>,
    parts: &std::collections::BTreeMap<String, pfx_api::control::SyncPart>,
    action: &Action,
) -> (Wave, Wave) {
    let relayed = action.carried_by_sync();
    targets.into_iter().enumerate().partition(|(_, u)| {
        !(relayed && parts.get(&u.unit_id) == Some(&pfx_api::control::SyncPart::Remote))
    })
}

/// Sends one unit its command (over its held connection when one answers) and reads
/// the answer.
fn one_unit(
    ssh_cfg: &crate::config::SshConfig,
    held: Option<&crate::held::Held>,
    remote: &str,
    u: &UnitRow,
) -> ControlRow {
    let socket = held.and_then(|h| h.live(ssh_cfg, &u.host, u.port));
    let raw = ssh::run_for(
        ssh_cfg,
        &u.host,
        u.port,
        remote,
        ssh::Via::held(socket.as_deref()),
        None,
        Duration::from_secs(ssh_cfg.command_timeout_s),
    );
    let got = answer::<ControlAnswer>(&raw, &u.unit_id, "control", ssh_cfg.command_timeout_s);
    ControlRow {
        held_connection: socket.is_some(),
        ..row(u, got)
    }
}

/// Records one unit's answer in the run's history.
fn record(store: &FleetDb, run_id: i64, what: &str, r: &ControlRow) -> Result<(), DbError> {
    let state = match r.state.as_str() {
        "done" => UnitState::Done,
        "failed" => UnitState::Failed,
        _ => UnitState::Pending,
    };
    let readback = r
        .answer
        .as_ref()
        .and_then(|a| serde_json::to_string(a).ok());
    let reason = match (&r.effective_utc, &r.reason) {
        (Some(t), Some(x)) => Some(format!("{what} at {t}; {x}")),
        (Some(t), None) => Some(format!("{what} at {t}")),
        (None, x) => x.as_ref().map(|x| format!("{what}: {x}")),
    };
    store.record(&Event {
        reason: reason.as_deref(),
        readback: readback.as_deref(),
        ..Event::new(
            run_id,
            &r.unit,
            r.site.as_deref(),
            state,
            EventKind::Control {
                action: what,
                effective_unix_us: r.effective_unix_us,
            },
            crate::agent::now_ms(),
        )
    })
}

/// Sends `action` to every target at once and records each answer as it comes.
pub fn control(
    store: &FleetDb,
    cfg: &FleetConfig,
    targets: Vec<UnitRow>,
    action: &Action,
    o: &ControlOpts,
    mut each: impl FnMut(&ControlRow),
) -> Result<ControlSummary, DbError> {
    let what = action.describe();
    let run_id = store.begin_run(
        &format!("control {what}"),
        o.site.as_deref(),
        &o.operator,
        &o.args,
        crate::agent::now_ms(),
    )?;
    let verb = crate::controlagent::render(action, &crate::controlagent::by_word(&o.operator));
    let ssh_cfg = cfg.ssh.clone();
    let prefixes: std::collections::BTreeMap<String, String> = targets
        .iter()
        .map(|u| (u.unit_id.clone(), cfg.unit_agent_command(&u.unit_id)))
        .collect();
    let n = targets.len();
    let held = o.held.clone();
    let (first, second) = waves(targets, &store.sync_parts()?, action);
    let (tx, rx) = mpsc::channel();
    let send = move |_: usize, (i, u): (usize, UnitRow), _| {
        let prefix = prefixes.get(&u.unit_id).cloned().unwrap_or_default();
        let r = one_unit(&ssh_cfg, held.as_ref(), &remote(&prefix, &verb), &u);
        tx.send((i, r)).is_ok()
    };
    let send = std::sync::Arc::new(send);
    let first_n = first.len();
    let mut workers = vec![start_wave(first, o.parallel, &send)];
    // The second wave starts when the first has answered, or after SECOND_WAVE_WAIT at
    // the latest: an unreachable master holds its remotes' own copies up no longer.
    let second_at = std::time::Instant::now() + SECOND_WAVE_WAIT;
    let mut second = (!second.is_empty()).then_some(second);
    let mut send = Some(send);
    let mut rows: Vec<(usize, ControlRow)> = Vec::with_capacity(n);
    loop {
        if rows.len() >= first_n || std::time::Instant::now() >= second_at {
            if let (Some(units), Some(s)) = (second.take(), &send) {
                workers.push(start_wave(units, o.parallel, s));
            }
            // Every sender is a worker's now: the channel ends when the last one does.
            send = None;
        }
        let got = if send.is_some() {
            let left = second_at.saturating_duration_since(std::time::Instant::now());
            match rx.recv_timeout(left) {
                Ok(x) => x,
                Err(mpsc::RecvTimeoutError::Timeout) => continue,
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
        } else {
            match rx.recv() {
                Ok(x) => x,
                Err(_) => break,
            }
        };
        let (i, r) = got;
        record(store, run_id, &what, &r)?;
        // Printed only after the commit: whatever this says is on disk.
        each(&r);
        rows.push((i, r));
    }
    for w in workers {
        w.join();
    }
    rows.sort_by_key(|(i, _)| *i);
    let units: Vec<ControlRow> = rows.into_iter().map(|(_, r)| r).collect();
    let count = |s: &str| units.iter().filter(|r| r.state == s).count();
    let sum = ControlSummary {
        run_id,
        action: what,
        targets: n,
        done: count("done"),
        failed: count("failed"),
        pending: count("pending"),
        units,
    };
    store.finish_run(
        run_id,
        &format!(
            "{} of {} taken, {} not taken, {} not reached",
            sum.done, sum.targets, sum.failed, sum.pending
        ),
        crate::agent::now_ms(),
    )?;
    Ok(sum)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit() -> UnitRow {
        crate::db::tests::unit("u1", "hall-a")
    }

    #[test]
    fn known_remotes_are_told_second_only_for_what_their_master_carries() {
        use pfx_api::control::SyncPart;
        let us = ["m", "r1", "solo", "new", "r2"].map(|id| crate::db::tests::unit(id, "hall-a"));
        let parts = [
            ("m", SyncPart::Master),
            ("r1", SyncPart::Remote),
            ("r2", SyncPart::Remote),
        ]
        .map(|(u, p)| (u.to_string(), p))
        .into_iter()
        .collect();
        let ids = |w: &[(usize, UnitRow)]| {
            w.iter()
                .map(|(i, u)| format!("{i}:{}", u.unit_id))
                .collect::<Vec<_>>()
        };
        for a in [
            Action::Blackout,
            Action::Stop,
            Action::Resume,
            Action::Play {
                playlist: "x".into(),
            },
        ] {
            let (first, second) = waves(us.to_vec(), &parts, &a);
            // A unit whose part is unknown goes first: acting late is worse than out of step.
            assert_eq!(ids(&first), ["0:m", "2:solo", "3:new"], "{a:?}");
            assert_eq!(ids(&second), ["1:r1", "4:r2"], "{a:?}");
        }
        // Brightness and tests stay on each unit: nobody waits.
        let (first, second) = waves(us.to_vec(), &parts, &Action::Brightness { factor: 0.5 });
        assert_eq!(first.len(), 5);
        assert!(second.is_empty());
    }

    #[test]
    fn a_unit_s_answer_becomes_its_row_and_line() {
        let ok = ControlAnswer {
            unit: "u1".into(),
            accepted: true,
            reached_player: true,
            effective_unix_us: Some(1_767_225_600_123_456),
            held_on_disk: Some(true),
            ..Default::default()
        };
        let r = row(&unit(), Ok(ok));
        assert_eq!(r.state, "done");
        assert_eq!(
            r.effective_utc.as_deref(),
            Some("2026-01-01 00:00:00.123456 UTC")
        );
        assert!(
            line(&Action::Blackout, &r)
                .contains("u1: blackout: its poles were told at 2026-01-01 00:00:00.123456 UTC")
        );
        let refused = ControlAnswer {
            unit: "u1".into(),
            error: Some("play: no playlist \"x\"; its playlists are `a`".into()),
            reached_player: true,
            ..Default::default()
        };
        let r = row(&unit(), Ok(refused));
        assert_eq!(r.state, "failed");
        let a = Action::Play {
            playlist: "x".into(),
        };
        assert!(line(&a, &r).contains("NOT TAKEN: play: no playlist"));
        let r = row(
            &unit(),
            Err((UnitState::Pending, "control: timed out after 10 s".into())),
        );
        assert_eq!(r.state, "pending");
        assert!(line(&Action::Blackout, &r).contains("NOT REACHED: control: timed out"));
    }
}
