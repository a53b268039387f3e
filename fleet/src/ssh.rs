//! Reaching a unit's agent with the OpenSSH client: host keys only from the fleet's
//! known_hosts (unknown or changed keys are refused, never learned), keys only, no
//! prompts; and turning what came back into a recorded state.

use crate::config::SshConfig;
use crate::gate::UnitState;
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The full `ssh` argument list (without the program).
pub fn ssh_args(c: &SshConfig, host: &str, port: u16, remote: &str) -> Vec<String> {
    let kh = c.known_hosts.display().to_string();
    let mut a: Vec<String> = vec![
        "-F".into(),
        "/dev/null".into(),
        "-o".into(),
        "BatchMode=yes".into(),
        "-o".into(),
        "StrictHostKeyChecking=yes".into(),
        "-o".into(),
        format!("UserKnownHostsFile={kh}"),
        "-o".into(),
        "GlobalKnownHostsFile=/dev/null".into(),
        "-o".into(),
        "UpdateHostKeys=no".into(),
        "-o".into(),
        "CheckHostIP=no".into(),
        "-o".into(),
        "PasswordAuthentication=no".into(),
        "-o".into(),
        "KbdInteractiveAuthentication=no".into(),
        "-o".into(),
        format!("ConnectTimeout={}", c.connect_timeout_s),
        "-o".into(),
        "ServerAliveInterval=5".into(),
        "-o".into(),
        "ServerAliveCountMax=3".into(),
        "-o".into(),
        "LogLevel=ERROR".into(),
    ];
    if let Some(id) = &c.identity {
        a.extend([
            "-o".into(),
            "IdentitiesOnly=yes".into(),
            "-i".into(),
            id.display().to_string(),
        ]);
    }
    a.extend([
        "-p".into(),
        port.to_string(),
        "-l".into(),
        c.user.clone(),
        host.into(),
        "--".into(),
        remote.into(),
    ]);
    a
}

#[derive(Debug, Clone, PartialEq)]
pub struct Raw {
    pub exit: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub timed_out: bool,
}

/// Runs a command with a hard deadline, reading both pipes concurrently.
pub fn run(program: &Path, args: &[String], timeout: Duration) -> Raw {
    let mut child = match Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => {
            return Raw {
                exit: None,
                stdout: String::new(),
                stderr: format!("cannot run {}: {e}", program.display()),
                timed_out: false,
            };
        }
    };
    let reader = |p: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut s = Vec::new();
            if let Some(mut p) = p {
                let _ = p.read_to_end(&mut s);
            }
            String::from_utf8_lossy(&s).into_owned()
        })
    };
    let out = reader(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let err = reader(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let deadline = Instant::now() + timeout;
    let mut timed_out = false;
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) if Instant::now() >= deadline => {
                timed_out = true;
                let _ = child.kill();
                break child.wait().ok();
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(_) => break None,
        }
    };
    Raw {
        exit: status.and_then(|s| s.code()),
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
        timed_out,
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub state: UnitState,
    pub reason: Option<String>,
    /// The agent's JSON answer, verbatim (compact), when there was one.
    pub readback: Option<String>,
    pub unit_read_ms: Option<u64>,
}

fn tail(s: &str) -> String {
    let t = s.trim();
    let lines: Vec<&str> = t.lines().rev().take(2).collect();
    lines.into_iter().rev().collect::<Vec<_>>().join(" | ")
}

/// What a push's SSH run means for the unit. Pure.
pub fn classify(raw: &Raw, expected_unit: &str, timeout_s: u64) -> Outcome {
    let o = |state, reason: String| Outcome {
        state,
        reason: Some(reason),
        readback: None,
        unit_read_ms: None,
    };
    if raw.timed_out {
        return o(
            UnitState::Pending,
            format!(
                "no answer within {timeout_s}s (unit offline or stuck); the agent may have applied, re-run to verify"
            ),
        );
    }
    let err = &raw.stderr;
    if raw.exit == Some(255) {
        if err.contains("Host key verification failed")
            || err.contains("REMOTE HOST IDENTIFICATION HAS CHANGED")
            || err.contains("No ED25519 host key is known")
            || err.contains("host key is known")
        {
            return o(
                UnitState::Failed,
                format!(
                    "host key refused: not in the fleet known_hosts or changed ({})",
                    tail(err)
                ),
            );
        }
        if err.contains("Permission denied") {
            return o(
                UnitState::Failed,
                format!("ssh authentication refused: {}", tail(err)),
            );
        }
        for w in [
            "Connection refused",
            "timed out",
            "No route to host",
            "Network is unreachable",
            "Could not resolve",
            "Connection closed by",
            "Connection reset",
        ] {
            if err.contains(w) && !raw.stdout.contains('{') {
                return o(UnitState::Pending, format!("unreachable: {}", tail(err)));
            }
        }
    }
    let v = match serde_json::from_str::<serde_json::Value>(raw.stdout.trim()) {
        Ok(v) if v.get("verified").is_some() => v,
        _ => {
            return o(
                UnitState::Failed,
                format!(
                    "no answer from the agent (exit {}): {}",
                    raw.exit
                        .map(|c| c.to_string())
                        .unwrap_or_else(|| "by signal".into()),
                    if err.trim().is_empty() {
                        "no stderr".into()
                    } else {
                        tail(err)
                    }
                ),
            );
        }
    };
    let compact = v.to_string();
    let unit = v.get("unit").and_then(|u| u.as_str()).unwrap_or("");
    let read_ms = v.get("read_at_unix_ms").and_then(|x| x.as_u64());
    let mut out = Outcome {
        state: UnitState::Failed,
        reason: None,
        readback: Some(compact.clone()),
        unit_read_ms: read_ms,
    };
    if unit != expected_unit {
        out.reason = Some(format!(
            "answered as unit {unit:?}, expected {expected_unit:?}: wrong host in the config?"
        ));
        return out;
    }
    if crate::gate::readback_verified(&compact) && raw.exit == Some(0) {
        out.state = UnitState::Done;
        out.reason = v
            .get("message")
            .and_then(|m| m.as_str())
            .map(str::to_string);
    } else {
        out.reason = Some(
            v.get("message")
                .and_then(|m| m.as_str())
                .unwrap_or("not verified")
                .to_string()
                + &v.get("errors")
                    .and_then(|e| e.as_array())
                    .filter(|a| !a.is_empty())
                    .map(|a| format!(" ({})", serde_json::Value::Array(a.clone())))
                    .unwrap_or_default(),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::tests::good_readback;

    fn raw(exit: Option<i32>, stdout: &str, stderr: &str) -> Raw {
        Raw {
            exit,
            stdout: stdout.into(),
            stderr: stderr.into(),
            timed_out: false,
        }
    }

    fn answer(unit: &str) -> String {
        good_readback().replacen(
            '{',
            &format!("{{\"unit\":\"{unit}\",\"message\":\"applied and verified\","),
            1,
        )
    }

    #[test]
    fn args_pin_host_keys_and_never_prompt() {
        let c = SshConfig {
            known_hosts: "/k".into(),
            identity: Some("/id".into()),
            ..Default::default()
        };
        let a = ssh_args(&c, "10.0.0.1", 2222, "pfx-agent apply pause-off --json").join(" ");
        for want in [
            "BatchMode=yes",
            "StrictHostKeyChecking=yes",
            "UserKnownHostsFile=/k",
            "GlobalKnownHostsFile=/dev/null",
            "-i /id",
            "-p 2222",
            "-l pfx 10.0.0.1 -- pfx-agent apply pause-off --json",
        ] {
            assert!(a.contains(want), "{want} missing in {a}");
        }
        assert!(!a.contains("accept-new") && !a.contains("StrictHostKeyChecking=no"));
    }

    #[test]
    fn verified_answer_is_done() {
        let o = classify(&raw(Some(0), &answer("u1"), ""), "u1", 60);
        assert_eq!(o.state, UnitState::Done, "{o:?}");
        assert!(o.readback.is_some());
    }

    #[test]
    fn failures_are_never_done() {
        let cases = [
            (
                raw(Some(255), "", "Host key verification failed.\n"),
                UnitState::Failed,
                "host key",
            ),
            (
                raw(
                    Some(255),
                    "",
                    "ssh: connect to host 10.0.0.1 port 22: Connection refused\n",
                ),
                UnitState::Pending,
                "unreachable",
            ),
            (
                raw(
                    Some(255),
                    "",
                    "root@10.0.0.1: Permission denied (publickey).\n",
                ),
                UnitState::Failed,
                "authentication",
            ),
            (
                raw(Some(255), "{\"unit\":", ""),
                UnitState::Failed,
                "no answer",
            ),
            (raw(None, "", ""), UnitState::Failed, "by signal"),
            (
                raw(Some(0), &answer("u2"), ""),
                UnitState::Failed,
                "expected \"u1\"",
            ),
            (
                raw(
                    Some(1),
                    &answer("u1").replace("\"verified\":true", "\"verified\":false"),
                    "",
                ),
                UnitState::Failed,
                "applied",
            ),
            // A verified JSON with a non-zero exit is not trusted either.
            (raw(Some(1), &answer("u1"), ""), UnitState::Failed, ""),
        ];
        for (r, want, word) in cases {
            let o = classify(&r, "u1", 60);
            assert_eq!(o.state, want, "{r:?} -> {o:?}");
            assert!(
                o.reason.as_deref().unwrap_or("").contains(word),
                "{o:?} lacks {word}"
            );
        }
        let mut t = raw(None, "", "");
        t.timed_out = true;
        assert_eq!(classify(&t, "u1", 60).state, UnitState::Pending);
    }

    #[test]
    fn run_enforces_the_deadline() {
        let t0 = Instant::now();
        let r = run(
            Path::new("sleep"),
            &["5".into()],
            Duration::from_millis(200),
        );
        assert!(r.timed_out);
        assert!(t0.elapsed() < Duration::from_secs(3));
        let r = run(
            Path::new("sh"),
            &["-c".into(), "echo out; echo err >&2; exit 3".into()],
            Duration::from_secs(5),
        );
        assert_eq!(
            (r.exit, r.stdout.as_str(), r.stderr.as_str()),
            (Some(3), "out\n", "err\n")
        );
    }
}
