//! The exit convention of pfx-fleet and pfx-agent (pfx_api::exit), on the real binaries:
//! errors as `NAME: error: ...` with status 2, a clean "no" as 1, the codes in --help.

use std::process::{Command, Output};

fn run(bin: &str, args: &[&str]) -> (Option<i32>, String, String) {
    let out: Output = Command::new(bin).args(args).output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

const FLEET: &str = env!("CARGO_BIN_EXE_pfx-fleet");
const AGENT: &str = env!("CARGO_BIN_EXE_pfx-agent");

#[test]
fn fleet_config_error_is_one_line_with_the_file_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-fleet.yaml");
    let (code, _, err) = run(FLEET, &["--config", missing.to_str().unwrap(), "status"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.starts_with("pfx-fleet: error: "), "{err}");
    assert!(
        err.contains(missing.to_str().unwrap()),
        "names the file: {err}"
    );
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
}

#[test]
fn fleet_gate_closed_is_1_and_usage_is_2() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("fleet.yaml");
    std::fs::write(
        &cfg,
        "sites:\n  - name: hall\n    units:\n      - id: u1\n        host: 127.0.0.1\n",
    )
    .unwrap();
    let db = dir.path().join("fleet.db");
    let base = [
        "--config",
        cfg.to_str().unwrap(),
        "--db",
        db.to_str().unwrap(),
    ];
    let gate = [&base[..], &["gate", "fallback", "--site", "hall"]].concat();
    let (code, out, err) = run(FLEET, &gate);
    assert_eq!(code, Some(1), "a closed gate is a clean no: {out}{err}");
    assert!(out.contains("CLOSED"), "{out}");
    let bad = [&base[..], &["gate", "sideways", "--site", "hall"]].concat();
    let (code, _, err) = run(FLEET, &bad);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("fallback"), "lists the possible values: {err}");
}

#[test]
fn fleet_and_agent_help_give_the_codes_and_every_flag_a_line() {
    for (bin, extra) in [(FLEET, "3 "), (AGENT, "128+N")] {
        let (code, out, _) = run(bin, &["--help"]);
        assert_eq!(code, Some(0));
        assert!(out.contains("Exit status:"), "{out}");
        assert!(out.contains("  2     error: bad usage"), "{out}");
        assert!(out.contains(extra), "{out}");
    }
    // Every flag of every subcommand has a help line: the text after the flag, and on the
    // lines under it, without clap's own `[default: ..]` and `[possible values: ..]`.
    let subs: &[(&str, &[&str])] = &[
        (
            FLEET,
            &["discover", "status", "push", "gate", "rollout", "history"],
        ),
        (AGENT, &["apply", "status"]),
    ];
    for (bin, subs) in subs {
        for sub in *subs {
            let (_, out, _) = run(bin, &[sub, "-h"]);
            let lines: Vec<&str> = out.lines().collect();
            for (i, l) in lines.iter().enumerate() {
                let t = l.trim_start();
                if !t.starts_with("--") || t.starts_with("--help") || t.starts_with("--version") {
                    continue;
                }
                let mut text = t.split_once("  ").map(|x| x.1).unwrap_or("").to_string();
                for n in &lines[i + 1..] {
                    let n = n.trim_start();
                    if n.is_empty() || n.starts_with('-') {
                        break;
                    }
                    text.push(' ');
                    text.push_str(n);
                }
                let words = strip_brackets(&text);
                assert!(
                    !words.trim().is_empty(),
                    "{bin} {sub}: {t:?} has no help text:\n{out}"
                );
            }
        }
    }
}

fn strip_brackets(s: &str) -> String {
    let mut out = String::new();
    let mut depth = 0;
    for c in s.chars() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

#[test]
fn agent_not_verified_is_1() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let (code, out, err) = run(
        AGENT,
        &[
            "--nic-backend",
            "mock",
            "--mock-nic-dir",
            &format!("{d}/no-nic"),
            "--lower",
            &format!("{d}/no-lower"),
            "--no-systemd",
            "--unit-id",
            "t1",
            "--profile-url",
            "http://127.0.0.1:9/profile",
            "--json",
            "status",
            "--rate-interval-ms",
            "10",
        ],
    );
    assert_eq!(
        code,
        Some(1),
        "a report with errors is a clean no: {out}{err}"
    );
    let (code, _, err) = run(AGENT, &["apply", "pause-on"]);
    assert_eq!(code, Some(2), "usage: {err}");
}
