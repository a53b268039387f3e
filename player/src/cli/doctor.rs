//! `pfx-player doctor [--iface IF] [--seconds N] [--json] [--store DIR]`: one measurement,
//! no retries, and which show the store gives (or why the config show plays).
//! Exit 0 healthy, 1 findings, 2 could not measure (the reason is printed).

use std::process::ExitCode;
use std::time::Duration;

use crate::doctor::{self, Report, Verdict, measure};

#[derive(clap::Args, Debug)]
pub struct DoctorArgs {
    /// Interface to examine (default: the interface of the default route).
    #[arg(long, value_name = "IF")]
    pub iface: Option<String>,
    /// How long to count multicast and PAUSE frames.
    #[arg(long, default_value_t = 5.0, value_name = "N")]
    pub seconds: f64,
    /// Print {"interface", "host", "findings": [{"id", "verdict", "evidence", "fix"}], "checks"}.
    #[arg(long)]
    pub json: bool,
    /// The local player's HTTP address, for its MultiSync status (`/profile`).
    #[arg(long, default_value = "http://127.0.0.1:8080", value_name = "URL")]
    pub player: String,
    /// The show store (the data partition) whose active show the player would play.
    #[arg(long, value_name = "DIR", default_value = pfx_store::DEFAULT_ROOT)]
    pub store: std::path::PathBuf,
    /// Also read every stored file back and quarantine each whose content does not
    /// match its name (slow: reads the whole store; a push then sends those again).
    #[arg(long)]
    pub verify_store: bool,
}

/// Which show `pfx-player run --store` would play, and why not the store's: the store's
/// active show when it loads, else the config show with the reason.
pub fn store_show(root: &std::path::Path) -> pfx_api::show::ShowInfo {
    use pfx_api::show::{ShowInfo, ShowSource};
    let config = |reason: String| ShowInfo {
        name: "config".into(),
        source: ShowSource::Config,
        reason: Some(reason),
        ..Default::default()
    };
    match pfx_store::active_show_yaml(root) {
        Ok(a) => match crate::config::show::ShowConfig::load(&a.show_yaml) {
            Ok(_) => ShowInfo {
                name: a.name,
                id: Some(a.id.to_string()),
                source: ShowSource::Store,
                since_unix_ms: Some(a.since_unix_ms),
                reason: None,
            },
            Err(e) => config(format!(
                "the active show {} ({}) failed to load: {e}",
                a.name, a.id
            )),
        },
        Err(e) => config(e.to_string()),
    }
}

/// What FPP Connect left beside the show (docs/fpp-connect.md 2.7, 2.8): media it kept
/// and does not play, and where xLights' posted output table disagrees with the active
/// show's outputs. Lines to print, and whether any of them is a finding.
pub fn fpp_connect_text(root: &std::path::Path) -> (String, serde_json::Value, bool) {
    use crate::fppconnect::{outputs, store};
    let media = store::kept_media(root);
    let mut text = store::media_line(&media);
    let table = store::universe_outputs_path(root);
    let mut found = false;
    let mut lines: Vec<String> = Vec::new();
    let mut state = "none posted";
    if let Ok(bytes) = std::fs::read(&table) {
        let posted = serde_json::from_slice::<serde_json::Value>(&bytes)
            .map_err(|e| e.to_string())
            .and_then(|v| outputs::posted_pieces(&v));
        let ours = pfx_store::active_show_yaml(root)
            .map_err(|e| e.to_string())
            .and_then(|a| {
                crate::config::show::ShowConfig::load(&a.show_yaml).map_err(|e| e.to_string())
            });
        match (posted, ours) {
            (Err(e), _) => {
                state = "unreadable";
                lines.push(format!("{}: {e}", table.display()));
                found = true;
            }
            (_, Err(e)) => {
                state = "not compared";
                lines.push(format!("no store show to compare it with: {e}"));
            }
            (Ok(p), Ok(show)) => {
                lines = outputs::disagreements(&outputs::our_pieces(&show.outputs), &p);
                found = !lines.is_empty();
                state = if found { "disagrees" } else { "agrees" };
            }
        }
        text.push_str(&format!(
            "fpp-connect: xLights' output table ({}) {state} with the show's outputs; it is never applied\n",
            table.display()
        ));
        for l in lines.iter().take(20) {
            text.push_str(&format!("  {l}\n"));
        }
        if lines.len() > 20 {
            text.push_str(&format!("  ... and {} more\n", lines.len() - 20));
        }
        if found {
            text.push_str("  fix: change the show's outputs, or the controllers in xLights, so both send the same channels to the same poles\n");
        }
    }
    let json = serde_json::json!({
        "media_kept": media,
        "plays_audio": false,
        "universe_outputs": {"file": table, "state": state, "disagreements": lines},
    });
    (text, json, found)
}

/// The store's quarantined files (stored files whose content did not match their names),
/// one sentence each, for doctor's text and JSON.
pub fn store_findings(root: &std::path::Path) -> Vec<String> {
    match pfx_store::quarantined(root) {
        Ok(q) => q
            .iter()
            .map(|f| {
                format!(
                    "{} was quarantined: {}; push the show again to resend it",
                    f.path.display(),
                    f.why
                )
            })
            .collect(),
        Err(e) => vec![format!("cannot read the store's quarantine: {e}")],
    }
}

/// When, in UTC, for a Unix ms.
fn utc_ms(ms: Option<u64>) -> String {
    ms.and_then(|m| jiff::Timestamp::from_millisecond(m as i64).ok())
        .map(|t| t.strftime("%Y-%m-%d %H:%M:%S UTC").to_string())
        .unwrap_or_else(|| "?".into())
}

/// The live override: what the running player holds (its `/profile` at `player`), and a
/// blackout kept on the data partition at `store` (which a restart applies). Text and
/// JSON.
pub fn control_text(player: &str, store: &std::path::Path) -> (String, serde_json::Value) {
    use pfx_api::control::ControlState;
    let live: Result<Option<ControlState>, String> =
        pfx_api::http::request_path("GET", player, "/profile", &[], None, Duration::from_secs(2))
            .map_err(|e| e.to_string())
            .and_then(|r| {
                serde_json::from_slice::<pfx_api::profile::ProfileDoc>(&r.body)
                    .map(|d| d.control)
                    .map_err(|e| format!("not a player's /profile: {e}"))
            });
    let held: Result<Option<ControlState>, String> = pfx_store::held::read(store)
        .map_err(|e| e.to_string())
        .and_then(|b| match b {
            None => Ok(None),
            Some(b) => serde_json::from_slice(&b)
                .map(Some)
                .map_err(|e| format!("unreadable ({e}): the player holds black to be safe")),
        });
    let mut text = String::new();
    match &live {
        Ok(None) => text.push_str("control: no live override: the schedule plays\n"),
        Ok(Some(c)) => {
            text.push_str(&format!("control: LIVE OVERRIDE: {}\n", c.summary()));
            if c.content.is_some() {
                text.push_str(&format!(
                    "  content since {}\n",
                    utc_ms(c.content_since_unix_ms)
                ));
            }
            if c.brightness.is_some() {
                text.push_str(&format!(
                    "  brightness since {}\n",
                    utc_ms(c.brightness_since_unix_ms)
                ));
            }
            text.push_str(
                "  fix: `pfx-fleet control resume --unit U` gives the unit back to its schedule\n",
            );
        }
        Err(e) => text.push_str(&format!(
            "control: the player's override is not known: {e}\n"
        )),
    }
    match &held {
        Ok(None) => {}
        Ok(Some(c)) => text.push_str(&format!(
            "control: a blackout is kept on the data partition ({}; {} since {}): a restarted player starts black\n",
            pfx_store::held::path(store).display(),
            c.summary(),
            utc_ms(c.content_since_unix_ms)
        )),
        Err(e) => text.push_str(&format!(
            "control: the held override {} is {e}\n",
            pfx_store::held::path(store).display()
        )),
    }
    let json = serde_json::json!({
        "live": live.as_ref().ok().cloned().flatten(),
        "live_error": live.as_ref().err(),
        "held": held.as_ref().ok().cloned().flatten(),
        "held_error": held.as_ref().err(),
    });
    (text, json)
}

fn store_text(findings: &[String]) -> String {
    findings.iter().map(|f| format!("store: {f}\n")).collect()
}

fn show_text(s: &pfx_api::show::ShowInfo) -> String {
    match &s.reason {
        None => format!(
            "show: the store's active show {} ({}) plays\n",
            s.name,
            s.id.as_deref().unwrap_or("-")
        ),
        Some(r) => format!("show: the config show plays: {r}\n"),
    }
}

pub fn run(args: DoctorArgs) -> anyhow::Result<ExitCode> {
    Ok(ExitCode::from(run_code(args)?))
}

/// Like `run`, with the exit code as a number.
pub fn run_code(args: DoctorArgs) -> anyhow::Result<u8> {
    let host = crate::nic::monitor::hostname();
    let measured = (|| {
        if !(args.seconds.is_finite() && args.seconds > 0.0 && args.seconds <= 3600.0) {
            return Err(measure::CannotMeasure(format!(
                "--seconds must be between 0 and 3600, got {}",
                args.seconds
            )));
        }
        let iface = match &args.iface {
            Some(i) => i.clone(),
            None => measure::default_iface()?,
        };
        let ev = measure::measure(&iface, Duration::from_secs_f64(args.seconds), &args.player)?;
        Ok(doctor::diagnose(&ev))
    })();
    let show = store_show(&args.store);
    let (fpp_text, fpp_json, fpp_found) = fpp_connect_text(&args.store);
    if args.verify_store {
        let r = pfx_store::Store::open(&args.store).and_then(|s| s.verify());
        match r {
            Ok(r) => eprintln!(
                "store: read {} stored files ({} bytes) back, {} quarantined",
                r.files,
                r.bytes,
                r.quarantined.len()
            ),
            Err(e) => eprintln!("store: --verify-store: {e}"),
        }
    }
    let store = store_findings(&args.store);
    let (control_text, control_json) = control_text(&args.player, &args.store);
    match measured {
        Ok(report) => {
            if args.json {
                let mut v = serde_json::to_value(&report)?;
                if let Some(m) = v.as_object_mut() {
                    m.insert("show".into(), serde_json::to_value(&show)?);
                    m.insert("fpp_connect".into(), fpp_json);
                    m.insert("store_quarantined".into(), serde_json::to_value(&store)?);
                    m.insert("control".into(), control_json);
                }
                println!("{}", serde_json::to_string_pretty(&v)?);
            } else {
                print!(
                    "{}{}{control_text}{fpp_text}{}",
                    render(&report),
                    show_text(&show),
                    store_text(&store)
                );
            }
            // A stored file found bad is a finding: the unit is not as pushed.
            let store_found = !store.is_empty();
            Ok(report
                .exit_code()
                .max(u8::from(fpp_found))
                .max(u8::from(store_found)))
        }
        Err(e) => {
            if args.json {
                let v = serde_json::json!({
                    "interface": args.iface,
                    "host": host,
                    "error": e.to_string(),
                    "findings": [],
                    "show": show,
                    "store_quarantined": store,
                    "control": control_json,
                });
                println!("{}", serde_json::to_string_pretty(&v)?);
            }
            eprint!(
                "{}{control_text}{fpp_text}{}",
                show_text(&show),
                store_text(&store)
            );
            eprintln!("pfx-player doctor: could not measure: {e}");
            Ok(2)
        }
    }
}

pub fn render(r: &Report) -> String {
    let mut out = format!("doctor: interface {} on host {}\n", r.interface, r.host);
    for c in &r.checks {
        let v = match c.verdict {
            Verdict::Ok => "ok",
            Verdict::Warning => "WARNING",
            Verdict::Problem => "PROBLEM",
        };
        out.push_str(&format!("  {:<16} {v:<8} {}\n", c.id, c.evidence));
    }
    if r.findings.is_empty() {
        out.push_str("healthy: no findings\n");
    } else {
        out.push_str("fixes:\n");
        for f in &r.findings {
            out.push_str(&format!("  {}: {}\n", f.id, f.fix));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doctor_names_a_held_blackout_who_and_since() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join(pfx_store::MARKER), b"").unwrap();
        let (text, json) = control_text("http://127.0.0.1:1", d.path());
        assert!(text.contains("override is not known"), "{text}");
        assert!(json["held"].is_null());
        let st = pfx_api::control::ControlState {
            content: Some(pfx_api::control::Action::Blackout),
            content_by: Some("alice@10.0.0.5".into()),
            content_since_unix_ms: Some(1_767_225_600_000),
            ..Default::default()
        };
        pfx_store::held::write(d.path(), &serde_json::to_vec(&st).unwrap()).unwrap();
        let (text, json) = control_text("http://127.0.0.1:1", d.path());
        assert!(
            text.contains("a blackout is kept on the data partition")
                && text.contains("blackout by alice@10.0.0.5")
                && text.contains("since 2026-01-01 00:00:00 UTC"),
            "{text}"
        );
        assert_eq!(json["held"]["content"]["action"], "blackout");
    }

    #[test]
    fn unknown_interface_cannot_be_measured_exit_2() {
        let code = run_code(DoctorArgs {
            iface: Some("pfx-nope0".into()),
            seconds: 1.0,
            json: true,
            player: "http://127.0.0.1:1".into(),
            store: "/nonexistent".into(),
            verify_store: false,
        })
        .unwrap();
        assert_eq!(code, 2);
    }

    #[test]
    fn bad_seconds_cannot_be_measured_exit_2() {
        let code = run_code(DoctorArgs {
            iface: Some("lo".into()),
            seconds: -1.0,
            json: false,
            player: "http://127.0.0.1:1".into(),
            store: "/nonexistent".into(),
            verify_store: false,
        })
        .unwrap();
        assert_eq!(code, 2);
    }

    #[test]
    fn doctor_names_where_xlights_table_disagrees_and_the_media_it_does_not_play() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join(pfx_store::MARKER), b"").unwrap();
        let st = pfx_store::Store::open(d.path()).unwrap();
        let profiles = concat!(env!("CARGO_MANIFEST_DIR"), "/../profiles");
        let yaml = format!(
            "interface: lo\nprofiles_dir: {profiles}\noutputs:\n  - {{name: a, profile: bench-ddp, destination: \"10.0.0.5:4048\"}}\ncontent:\n  playlist:\n    - pattern: id\n"
        );
        let id = st
            .make_show("evening", yaml.as_bytes(), &Default::default())
            .unwrap();
        st.activate(&id).unwrap();
        let (text, _, found) = fpp_connect_text(d.path());
        assert!(
            !found && text.is_empty(),
            "nothing posted, nothing kept: {text}"
        );
        std::fs::create_dir_all(d.path().join("fpp-connect/media/music")).unwrap();
        std::fs::write(d.path().join("fpp-connect/media/music/song.mp3"), b"ID3").unwrap();
        let table = serde_json::json!({"channelOutputs": [{"type": "universes", "enabled": 1, "universes": [
            {"active": 1, "description": "Pole A", "startChannel": 1, "channelCount": 900, "type": 5, "address": "10.0.0.6"}]}]});
        std::fs::write(
            crate::fppconnect::store::universe_outputs_path(d.path()),
            table.to_string(),
        )
        .unwrap();
        let (text, json, found) = fpp_connect_text(d.path());
        assert!(found, "{text}");
        assert!(
            text.contains("music/song.mp3") && text.contains("pfx plays no audio"),
            "{text}"
        );
        assert!(text.contains("disagrees"), "{text}");
        assert!(
            text.contains("`a` sends channels 1-900 (DDP to 10.0.0.5); xLights' table says channels 1-900 (DDP to 10.0.0.6, `Pole A`)"),
            "{text}"
        );
        assert_eq!(json["plays_audio"], false);
        assert_eq!(json["universe_outputs"]["state"], "disagrees");
    }

    #[test]
    fn doctor_says_which_show_the_store_gives_and_why() {
        let d = tempfile::tempdir().unwrap();
        let s = store_show(d.path());
        assert!(
            s.reason
                .unwrap()
                .contains("the data partition is not mounted at")
        );
        std::fs::write(d.path().join(pfx_store::MARKER), b"").unwrap();
        let st = pfx_store::Store::open(d.path()).unwrap();
        let id = st
            .make_show(
                "evening",
                b"interface: lo\noutputs:\n  - {name: a, profile: bench-ddp}\ncontent:\n  playlist:\n    - pattern: id\n",
                &Default::default(),
            )
            .unwrap();
        st.activate(&id).unwrap();
        let s = store_show(d.path());
        assert_eq!((s.name.as_str(), s.reason), ("evening", None));
        assert!(show_text(&store_show(d.path())).contains("evening"));
        assert!(store_findings(d.path()).is_empty());
        // A stored file that does not match its name: found by the store, told by doctor.
        let h = st.put_bytes("k", b"right").unwrap();
        std::fs::write(st.blob_path(&h), b"wrong").unwrap();
        pfx_store::Store::open(d.path()).unwrap();
        let f = store_findings(d.path());
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(
            f[0].contains("was quarantined") && f[0].contains("hashes to"),
            "{f:?}"
        );
        assert!(store_text(&f).starts_with("store: "));
    }
}
