//! `pfx-fleet rollout fallback`: turns on the poles' automatic 10BASE-T fallback through
//! the pole management API (docs/pole-api.md), canary first, each verified by a fresh
//! GET, stopping at the first pole that does not read back the new state.

use crate::agent::now_ms;
use crate::config::{PoleConfig, SiteConfig};
use crate::db::{DbError, Event, EventKind, FleetDb};
use crate::gate::UnitState;
use crate::http;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum RolloutError {
    #[error(transparent)]
    FleetDb(#[from] DbError),
    #[error("site {site}: no token_file in the fleet config; the pole API needs the site's token")]
    NoToken { site: String },
    #[error("site {site}: reading the token file {path}: {detail}")]
    Token {
        site: String,
        path: String,
        detail: String,
    },
}

/// The site's token, trimmed. The value never leaves this process except in the
/// Authorization header.
pub fn read_token(site: &SiteConfig) -> Result<String, RolloutError> {
    let p = site
        .token_file
        .as_ref()
        .ok_or_else(|| RolloutError::NoToken {
            site: site.name.clone(),
        })?;
    {
        use std::os::unix::fs::MetadataExt;
        if let Ok(m) = std::fs::metadata(p)
            && m.mode() & 0o077 != 0
        {
            eprintln!(
                "pfx-fleet: warning: token file {} is readable by group or others (mode {:o}); chmod 600 it",
                p.display(),
                m.mode() & 0o777
            );
        }
    }
    let t = std::fs::read_to_string(p).map_err(|e| RolloutError::Token {
        site: site.name.clone(),
        path: p.display().to_string(),
        detail: e.kind().to_string(),
    })?;
    let t = t.trim().to_string();
    if t.is_empty() {
        return Err(RolloutError::Token {
            site: site.name.clone(),
            path: p.display().to_string(),
            detail: "empty".into(),
        });
    }
    Ok(t)
}

/// Canary poles first, then the rest, each group in config order.
pub fn order(poles: &[PoleConfig]) -> Vec<&PoleConfig> {
    let mut v: Vec<&PoleConfig> = poles.iter().filter(|p| p.canary).collect();
    v.extend(poles.iter().filter(|p| !p.canary));
    v
}

fn base(url: &str) -> &str {
    url.trim_end_matches('/')
}

/// `Ok(readback json)` when the pole's status says fallback.enabled = true.
fn get_status(p: &PoleConfig, timeout: Duration) -> Result<serde_json::Value, String> {
    let url = format!("{}/api/v1/status", base(&p.url));
    let r = http::request("GET", &url, &[], None, timeout).map_err(|e| e.to_string())?;
    if r.status != 200 {
        return Err(format!(
            "GET {url}: HTTP {}: {}",
            r.status,
            String::from_utf8_lossy(&r.body).trim()
        ));
    }
    serde_json::from_slice(&r.body).map_err(|e| format!("GET {url}: not JSON: {e}"))
}

fn enabled(v: &serde_json::Value) -> Option<bool> {
    v.pointer("/fallback/enabled").and_then(|b| b.as_bool())
}

/// One pole: returns Ok(readback) or Err(reason). Never trusts the PUT's own answer.
pub fn enable_one(
    p: &PoleConfig,
    token: &str,
    timeout: Duration,
) -> Result<(serde_json::Value, bool), String> {
    let before = get_status(p, timeout)?;
    let mut changed = false;
    if enabled(&before) != Some(true) {
        let url = format!("{}/api/v1/config/fallback", base(&p.url));
        let auth = format!("Bearer {token}");
        let r = http::request(
            "PUT",
            &url,
            &[("Authorization", auth.as_str())],
            Some(br#"{"enabled": true}"#),
            timeout,
        )
        .map_err(|e| e.to_string())?;
        if r.status != 200 {
            return Err(format!(
                "PUT {url}: HTTP {}: {}",
                r.status,
                String::from_utf8_lossy(&r.body).trim()
            ));
        }
        changed = true;
    }
    let after = get_status(p, timeout)?;
    match enabled(&after) {
        Some(true) => Ok((after, changed)),
        other => Err(format!(
            "readback after the change says fallback.enabled = {}: the pole did not take it",
            other
                .map(|b| b.to_string())
                .unwrap_or_else(|| "missing".into())
        )),
    }
}

#[derive(Debug, Default, serde::Serialize)]
pub struct RolloutSummary {
    pub run_id: i64,
    pub poles: usize,
    pub skipped_done: usize,
    pub done: usize,
    pub stopped_at: Option<String>,
    pub reason: Option<String>,
}

pub fn rollout(
    store: &FleetDb,
    site: &SiteConfig,
    token: &str,
    operator: &str,
    args: &str,
    timeout: Duration,
) -> Result<RolloutSummary, RolloutError> {
    let run_id = store.begin_run(
        "rollout fallback",
        Some(&site.name),
        operator,
        args,
        now_ms(),
    )?;
    let mut sum = RolloutSummary {
        run_id,
        poles: site.poles.len(),
        ..Default::default()
    };
    for p in order(&site.poles) {
        if let Some((state, _)) = store.latest_pole(&site.name, &p.id)?
            && state == "done"
        {
            eprintln!("skip {}: fallback already verified enabled", p.id);
            sum.skipped_done += 1;
            continue;
        }
        let pole = |state| {
            Event::new(
                run_id,
                &p.id,
                Some(&site.name),
                state,
                EventKind::Pole,
                now_ms(),
            )
        };
        store.record(&pole(UnitState::Started))?;
        match enable_one(p, token, timeout) {
            Ok((rb, changed)) => {
                let reason = if changed {
                    "enabled; readback verified"
                } else {
                    "already enabled; readback verified"
                };
                store.record(&Event {
                    reason: Some(reason),
                    readback: Some(&rb.to_string()),
                    ..pole(UnitState::Done)
                })?;
                eprintln!(
                    "recorded pole {} done: {reason}{}",
                    p.id,
                    if p.canary { " (canary)" } else { "" }
                );
                sum.done += 1;
            }
            Err(reason) => {
                store.record(&Event {
                    reason: Some(&reason),
                    ..pole(UnitState::Failed)
                })?;
                eprintln!("recorded pole {} failed: {reason}; rollout stopped", p.id);
                sum.stopped_at = Some(p.id.clone());
                sum.reason = Some(reason);
                break;
            }
        }
    }
    store.finish_run(
        run_id,
        &serde_json::to_string(&sum).unwrap_or_default(),
        now_ms(),
    )?;
    Ok(sum)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canary_first_then_config_order() {
        let p = |id: &str, canary| PoleConfig {
            id: id.into(),
            url: "http://x".into(),
            canary,
        };
        let poles = vec![p("a", false), p("b", true), p("c", false)];
        let ids: Vec<&str> = order(&poles).iter().map(|p| p.id.as_str()).collect();
        assert_eq!(ids, ["b", "a", "c"]);
    }
}
