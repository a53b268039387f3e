//! What the `pfx-fleet` binary prints: the tables and one-line summaries of each command,
//! and its JSON. Kept apart from `main.rs`, which decides what to do, so that a change of
//! wording never hides in a change of behaviour (and the reverse). Part of the binary, not
//! of the library: nothing else prints these.

use anyhow::Result;
use pfx_fleet::controlpush::ControlSummary;
use pfx_fleet::db::{HistoryRow, UnitRow};
use pfx_fleet::gate::{self, GateDecision, human_age};
use pfx_fleet::push::PushSummary;
use pfx_fleet::rollout::RolloutSummary;
use pfx_fleet::showpush::{ShowPushSummary, ShowsRow};
use pfx_fleet::updatepush::UpdatePushSummary;
use std::path::Path;

/// One row of `pfx-fleet status --json`. The fields are in alphabetical order because that
/// is the order the JSON has always had (it was a sorted `serde_json` map); `readback` is
/// the agent's answer as recorded, possibly from an older agent, so it stays untyped.
#[derive(serde::Serialize)]
pub struct StatusRow {
    pub host: String,
    pub port: u16,
    pub readback: Option<serde_json::Value>,
    pub reason: Option<String>,
    pub recorded_ms: Option<u64>,
    pub site: Option<String>,
    /// The unit's software version (its booted slot's) as it last read back to `push
    /// update`, None when no update has reached it.
    pub software: Option<String>,
    pub source: String,
    pub state: String,
    pub unit: String,
    pub verified_fresh: bool,
    pub version: Option<String>,
}

pub fn json<T: serde::Serialize>(v: &T) -> Result<()> {
    println!("{}", serde_json::to_string_pretty(v)?);
    Ok(())
}

pub fn discover(rows: &[UnitRow]) {
    println!("{} units found over mDNS", rows.len());
    for r in rows {
        println!(
            "  {:<16} {:<15} site={} version={}",
            r.unit_id,
            r.host,
            r.site
                .as_deref()
                .unwrap_or("(none: add it or a subnet rule)"),
            r.version.as_deref().unwrap_or("?")
        );
    }
}

pub fn status(rows: &[StatusRow], now: u64) {
    println!(
        "{:<16} {:<10} {:<21} {:<12} {:<8} {:<6} {:<8} reason",
        "unit", "site", "host", "software", "state", "fresh", "age"
    );
    for r in rows {
        let age = r
            .recorded_ms
            .map(|t| human_age(now.saturating_sub(t)))
            .unwrap_or_else(|| "-".into());
        println!(
            "{:<16} {:<10} {:<21} {:<12} {:<8} {:<6} {:<8} {}",
            r.unit,
            r.site.as_deref().unwrap_or("-"),
            format!("{}:{}", r.host, r.port),
            r.software.as_deref().unwrap_or("-"),
            r.state,
            if r.verified_fresh { "yes" } else { "no" },
            age,
            r.reason.as_deref().unwrap_or("")
        );
    }
}

pub fn push_show(sum: &ShowPushSummary) {
    println!(
        "push show {} run {}: {} files ({} bytes), {} targets, {} done, {} pending, {} failed",
        sum.show, sum.run_id, sum.files, sum.bytes, sum.targets, sum.done, sum.pending, sum.failed
    );
}

pub fn push_update(sum: &UpdatePushSummary) {
    println!(
        "push update {} run {}: {} targets in waves {:?}, {} already done, {} done, {} pending, {} failed{}",
        sum.version,
        sum.run_id,
        sum.targets,
        sum.waves,
        sum.skipped_done,
        sum.done,
        sum.pending,
        sum.failed,
        sum.stopped_at
            .as_ref()
            .map(|u| format!(
                "; STOPPED at {u}: {}",
                sum.stop_reason.as_deref().unwrap_or("")
            ))
            .unwrap_or_default()
    );
}

pub fn push_pause_off(sum: &PushSummary) {
    println!(
        "push pause-off run {}: {} targets, {} skipped (fresh), {} done, {} pending, {} failed",
        sum.run_id, sum.targets, sum.skipped_fresh, sum.done, sum.pending, sum.failed
    );
}

pub fn control(sum: &ControlSummary) {
    println!(
        "control {} run {}: {} units, {} taken, {} not taken, {} not reached",
        sum.action, sum.run_id, sum.targets, sum.done, sum.failed, sum.pending
    );
}

/// The last column of `shows`: what the unit holds (as `top` says it), then the reason.
fn shows_note(r: &ShowsRow) -> String {
    match (&r.held, &r.reason) {
        (Some(h), Some(why)) => format!("OVERRIDE {h}; {why}"),
        (Some(h), None) => format!("OVERRIDE {h}"),
        (None, why) => why.clone().unwrap_or_default(),
    }
}

pub fn shows(rows: &[ShowsRow], now: u64) {
    println!(
        "{:<16} {:<10} {:<24} {:<17} {:<7} {:<9} note",
        "unit", "site", "playing", "id", "source", "since"
    );
    for r in rows {
        println!(
            "{:<16} {:<10} {:<24} {:<17} {:<7} {:<9} {}",
            r.unit,
            r.site.as_deref().unwrap_or("-"),
            r.playing
                .as_deref()
                .unwrap_or(if r.answered { "?" } else { "-" }),
            r.show_id.as_deref().unwrap_or("-"),
            r.source.as_deref().unwrap_or("-"),
            r.since_unix_ms
                .map(|t| human_age(now.saturating_sub(t)) + " ago")
                .unwrap_or_else(|| "-".into()),
            shows_note(r)
        );
    }
}

pub fn gate(d: &GateDecision) {
    if d.open {
        println!(
            "gate fallback site {}: OPEN ({} units verified within {})",
            d.site,
            d.units,
            human_age(d.max_age_ms)
        );
    } else {
        println!(
            "gate fallback site {}: CLOSED ({} blockers of {} units)",
            d.site,
            d.blockers.len(),
            d.units
        );
        for b in &d.blockers {
            println!("  {}: {}", b.unit, b.reason);
        }
    }
}

pub fn rollout(site: &str, sum: &RolloutSummary) {
    println!(
        "rollout fallback site {site} run {}: {} poles, {} already done, {} done now{}",
        sum.run_id,
        sum.poles,
        sum.skipped_done,
        sum.done,
        sum.stopped_at
            .as_ref()
            .map(|p| format!("; STOPPED at {p}: {}", sum.reason.as_deref().unwrap_or("")))
            .unwrap_or_default()
    );
}

pub fn history(h: &[HistoryRow], db: &Path) {
    if h.is_empty() {
        println!("no pushes or rollouts recorded yet in {}", db.display());
    }
    for r in h {
        println!(
            "{} run {} {} by {}: {} {} ({}) -> {}{}",
            gate::utc(r.recorded_ms),
            r.run_id,
            r.kind,
            r.operator,
            r.target_kind,
            r.target,
            r.site.as_deref().unwrap_or("-"),
            r.state,
            r.reason
                .as_ref()
                .map(|x| format!(": {x}"))
                .unwrap_or_default()
        );
    }
}

/// One line of `hold`: `HH:MM:SS UTC unit: event[: reason][; again in N s]`.
pub fn hold_event(e: &pfx_fleet::held::HoldEvent) -> String {
    let t = gate::utc(e.at_unix_ms);
    let clock = t.get(11..19).unwrap_or(&t);
    format!(
        "{clock} UTC {}: {}{}{}",
        e.unit,
        e.event,
        e.reason
            .as_ref()
            .map(|r| format!(": {r}"))
            .unwrap_or_default(),
        e.retry_in_s
            .map(|s| format!("; again in {s} s"))
            .unwrap_or_default()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `status --json` keeps the key order it had as a sorted map.
    #[test]
    fn status_row_keys_are_in_the_old_sorted_order() {
        let row = StatusRow {
            host: "10.0.0.1".into(),
            port: 22,
            readback: Some(serde_json::json!({"verified": true})),
            reason: Some("applied and verified".into()),
            recorded_ms: Some(1),
            site: Some("hall-a".into()),
            software: Some("2.0.0".into()),
            source: "config".into(),
            state: "done".into(),
            unit: "u1".into(),
            verified_fresh: true,
            version: None,
        };
        let typed = serde_json::to_string(&row).unwrap();
        let sorted = serde_json::to_value(&row).unwrap().to_string();
        assert_eq!(typed, sorted);
    }
}
