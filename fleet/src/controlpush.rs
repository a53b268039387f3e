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
use crate::gate::UnitState;
use crate::showpush::{answer, remote};
use crate::ssh;
use crate::store::{Event, EventKind, Store, StoreError, UnitRow};

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

/// `YYYY-MM-DD HH:MM:SS.uuuuuu UTC` of a Unix µs.
pub fn utc_us(us: u64) -> String {
    let s = crate::gate::utc(us / 1000);
    // gate::utc says `...T12:34:56Z`.
    format!(
        "{}.{:06} UTC",
        s.trim_end_matches('Z').replacen('T', " ", 1),
        us % 1_000_000
    )
}

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

/// Sends `action` to every target at once and records each answer as it comes.
pub fn control(
    store: &Store,
    cfg: &FleetConfig,
    targets: Vec<UnitRow>,
    action: &Action,
    o: &ControlOpts,
    mut each: impl FnMut(&ControlRow),
) -> Result<ControlSummary, StoreError> {
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
    let (tx, rx) = mpsc::channel();
    let workers = crate::pool::spawn(targets, o.parallel, None, None, move |i, u: UnitRow, _| {
        let prefix = prefixes.get(&u.unit_id).cloned().unwrap_or_default();
        let remote = remote(&prefix, &verb);
        let socket = held
            .as_ref()
            .and_then(|h| h.live(&ssh_cfg, &u.host, u.port));
        let args = match &socket {
            Some(s) => ssh::ssh_args_held(&ssh_cfg, &u.host, u.port, &remote, s),
            None => ssh::ssh_args(&ssh_cfg, &u.host, u.port, &remote),
        };
        let raw = ssh::run_on(
            &ssh_cfg.ssh,
            &args,
            None,
            Duration::from_secs(ssh_cfg.command_timeout_s),
            socket.as_deref(),
        );
        let got = answer::<ControlAnswer>(&raw, &u.unit_id, "control", ssh_cfg.command_timeout_s);
        let r = ControlRow {
            held_connection: socket.is_some(),
            ..row(&u, got)
        };
        tx.send((i, r)).is_ok()
    });
    let mut rows: Vec<(usize, ControlRow)> = Vec::with_capacity(n);
    for (i, r) in rx {
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
                    action: &what,
                    effective_unix_us: r.effective_unix_us,
                },
                crate::agent::now_ms(),
            )
        })?;
        // Printed only after the commit: whatever this says is on disk.
        each(&r);
        rows.push((i, r));
    }
    workers.join();
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
        crate::store::tests::unit("u1", "hall-a")
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
