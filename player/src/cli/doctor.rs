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
    match measured {
        Ok(report) => {
            if args.json {
                let mut v = serde_json::to_value(&report)?;
                if let Some(m) = v.as_object_mut() {
                    m.insert("show".into(), serde_json::to_value(&show)?);
                    m.insert("store_quarantined".into(), serde_json::to_value(&store)?);
                }
                println!("{}", serde_json::to_string_pretty(&v)?);
            } else {
                print!(
                    "{}{}{}",
                    render(&report),
                    show_text(&show),
                    store_text(&store)
                );
            }
            // A stored file found bad is a finding: the unit is not as pushed.
            Ok(if store.is_empty() {
                report.exit_code()
            } else {
                report.exit_code().max(1)
            })
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
                });
                println!("{}", serde_json::to_string_pretty(&v)?);
            }
            eprint!("{}{}", show_text(&show), store_text(&store));
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
