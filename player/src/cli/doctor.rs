//! `pfx-player doctor [--iface IF] [--seconds N] [--json]`: one measurement, no retries.
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
    match measured {
        Ok(report) => {
            if args.json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                print!("{}", render(&report));
            }
            Ok(report.exit_code())
        }
        Err(e) => {
            if args.json {
                let v = serde_json::json!({
                    "interface": args.iface,
                    "host": host,
                    "error": e.to_string(),
                    "findings": [],
                });
                println!("{}", serde_json::to_string_pretty(&v)?);
            }
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
        })
        .unwrap();
        assert_eq!(code, 2);
    }
}
