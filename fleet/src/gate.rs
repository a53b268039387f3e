//! The fallback gate, as a pure decision: open only when every unit of the site has a
//! verified PAUSE-off readback from the unit itself, fresher than the window.

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum UnitState {
    /// A push reached the unit's agent; no answer recorded (yet, or ever: interrupted).
    Started,
    /// Not reached (offline, timed out): try again.
    Pending,
    /// Reached, and the answer was not a verified PAUSE-off (or the unit was refused).
    Failed,
    /// The unit's own readback verified PAUSE-off.
    Done,
}

impl UnitState {
    pub fn as_str(&self) -> &'static str {
        match self {
            UnitState::Started => "started",
            UnitState::Pending => "pending",
            UnitState::Failed => "failed",
            UnitState::Done => "done",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "started" => UnitState::Started,
            "pending" => UnitState::Pending,
            "failed" => UnitState::Failed,
            "done" => UnitState::Done,
            _ => return None,
        })
    }
}

/// The latest recorded event of one unit.
#[derive(Debug, Clone, PartialEq)]
pub struct Latest {
    pub state: UnitState,
    pub recorded_ms: u64,
    pub reason: Option<String>,
    pub readback: Option<String>,
}

/// Whether a stored agent answer is a verified PAUSE-off: checked again here from the
/// unit's own readback, not from the state label alone.
/// Read as the agent's own type (pfx-api `ApplyReport`): a stored answer that is not one
/// (another release's agent, a renamed field) does not verify.
pub fn readback_verified(readback: &str) -> bool {
    let Ok(r) = serde_json::from_str::<pfx_api::agent::ApplyReport>(readback) else {
        return false;
    };
    r.verified
        && r.readback.and_then(|n| n.pause).is_some_and(|p| p.is_off())
        && r.persisted.is_some_and(|p| p.matches && p.lower_readonly)
}

/// A unit counts as verified-fresh: done, verified readback, recorded within the window.
pub fn fresh_verified(l: &Latest, now_ms: u64, max_age_ms: u64) -> Result<(), String> {
    match l.state {
        UnitState::Done => {}
        s => {
            return Err(format!(
                "last push {}{}",
                s.as_str(),
                l.reason
                    .as_ref()
                    .map(|r| format!(": {r}"))
                    .unwrap_or_default()
            ));
        }
    }
    if !l.readback.as_deref().is_some_and(readback_verified) {
        return Err("recorded done but its readback does not verify PAUSE-off".into());
    }
    let age = now_ms.saturating_sub(l.recorded_ms);
    if age > max_age_ms {
        return Err(format!(
            "readback is {} old, older than the {} window",
            human_age(age),
            human_age(max_age_ms)
        ));
    }
    Ok(())
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Blocker {
    pub unit: String,
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GateDecision {
    pub site: String,
    pub open: bool,
    pub units: usize,
    pub max_age_ms: u64,
    pub blockers: Vec<Blocker>,
}

pub fn decide(
    site: &str,
    units: &[(String, Option<Latest>)],
    now_ms: u64,
    max_age_ms: u64,
) -> GateDecision {
    let mut blockers = Vec::new();
    if units.is_empty() {
        blockers.push(Blocker {
            unit: "-".into(),
            reason: format!("site {site} has no known units: nothing can be verified"),
        });
    }
    for (u, l) in units {
        let r = match l {
            None => Err("never pushed".to_string()),
            Some(l) => fresh_verified(l, now_ms, max_age_ms),
        };
        if let Err(reason) = r {
            blockers.push(Blocker {
                unit: u.clone(),
                reason,
            });
        }
    }
    GateDecision {
        site: site.into(),
        open: blockers.is_empty(),
        units: units.len(),
        max_age_ms,
        blockers,
    }
}

pub fn human_age(ms: u64) -> String {
    let s = ms / 1000;
    if s < 120 {
        format!("{s}s")
    } else if s < 7200 {
        format!("{}m", s / 60)
    } else {
        format!("{:.1}h", s as f64 / 3600.0)
    }
}

/// `YYYY-MM-DD HH:MM:SS.uuuuuu UTC` of a Unix µs.
pub fn utc_us(us: u64) -> String {
    let s = utc(us / 1000);
    // utc says `...T12:34:56Z`.
    format!(
        "{}.{:06} UTC",
        s.trim_end_matches('Z').replacen('T', " ", 1),
        us % 1_000_000
    )
}

/// `2026-11-30T08:05:12Z` from unix milliseconds (UTC, no time-zone database needed).
pub fn utc(ms: u64) -> String {
    let secs = ms / 1000;
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Parses `24h`, `90m`, `30s`, `2d` into milliseconds.
pub fn parse_duration_ms(s: &str) -> Option<u64> {
    let s = s.trim();
    let (n, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit())?);
    let n: u64 = n.parse().ok()?;
    let mult = match unit {
        "ms" => 1,
        "s" => 1000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return None,
    };
    n.checked_mul(mult)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The agent's golden apply report (`api/tests/golden/agent-apply.json`, which the
    /// agent's own test writes), compact as the state database keeps it.
    pub fn good_readback() -> String {
        let v: serde_json::Value =
            serde_json::from_str(&pfx_api::golden::read("agent-apply.json")).unwrap();
        v.to_string()
    }

    fn latest(state: UnitState, at: u64, rb: Option<String>) -> Option<Latest> {
        Some(Latest {
            state,
            recorded_ms: at,
            reason: Some("why".into()),
            readback: rb,
        })
    }

    const H: u64 = 3_600_000;

    #[test]
    fn open_only_when_every_unit_is_done_verified_and_fresh() {
        let now = 100 * H;
        let all_good = vec![
            (
                "u1".to_string(),
                latest(UnitState::Done, now - H, Some(good_readback())),
            ),
            (
                "u2".to_string(),
                latest(UnitState::Done, now - 23 * H, Some(good_readback())),
            ),
        ];
        assert!(decide("s", &all_good, now, 24 * H).open);

        let mut stale = all_good.clone();
        stale[1].1 = latest(UnitState::Done, now - 25 * H, Some(good_readback()));
        let d = decide("s", &stale, now, 24 * H);
        assert!(!d.open);
        assert_eq!(d.blockers.len(), 1);
        assert!(
            d.blockers[0].reason.contains("older than"),
            "{:?}",
            d.blockers
        );

        for s in [UnitState::Started, UnitState::Pending, UnitState::Failed] {
            let mut v = all_good.clone();
            v[0].1 = latest(s, now, None);
            let d = decide("s", &v, now, 24 * H);
            assert!(!d.open, "{s:?} must block");
            assert_eq!(d.blockers[0].unit, "u1");
        }
        let mut never = all_good.clone();
        never.push(("u3".into(), None));
        assert!(!decide("s", &never, now, 24 * H).open);
    }

    #[test]
    fn a_done_label_without_a_verified_readback_blocks() {
        let now = 10 * H;
        let lying = good_readback().replace(r#""rx":false"#, r#""rx":true"#);
        let rw_lower =
            good_readback().replace(r#""lower_readonly":true"#, r#""lower_readonly":false"#);
        for rb in [lying.to_string(), rw_lower, "not json".into()] {
            let v = vec![("u1".to_string(), latest(UnitState::Done, now, Some(rb)))];
            assert!(!decide("s", &v, now, H).open);
        }
    }

    #[test]
    fn empty_site_is_closed() {
        let d = decide("s", &[], 0, H);
        assert!(!d.open);
        assert_eq!(d.blockers.len(), 1);
    }

    #[test]
    fn utc_dates() {
        assert_eq!(utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc(951_782_400_000), "2000-02-29T00:00:00Z");
        assert_eq!(utc(1_796_025_912_000), "2026-11-30T08:05:12Z");
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration_ms("24h"), Some(24 * H));
        assert_eq!(parse_duration_ms("90m"), Some(90 * 60_000));
        assert_eq!(parse_duration_ms("2d"), Some(48 * H));
        assert_eq!(parse_duration_ms("24"), None);
        assert_eq!(parse_duration_ms("h"), None);
        assert_eq!(human_age(25 * H), "25.0h");
    }
}
