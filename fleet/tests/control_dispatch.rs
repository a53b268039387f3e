//! The `control ...` verbs through the real `pfx-agent dispatch`, as the fleet account's
//! forced command runs them: the request in SSH_ORIGINAL_COMMAND, the client in
//! SSH_CLIENT, a root-owned agent.yaml, and a stand-in for the player's control socket
//! that records what reached it and answers as the player does. (The real player's side
//! is `player/tests/live_control.rs`.)
//!
//! Root only (the dispatcher trusts only a root-owned config); skipped otherwise.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

use pfx_api::control::{Action, ControlAnswer, ControlRequest, ControlState};

struct Unit {
    dir: tempfile::TempDir,
    cfg: PathBuf,
    sock: PathBuf,
    data: PathBuf,
    audit: PathBuf,
}

fn root() -> bool {
    // SAFETY: geteuid(2) cannot fail.
    unsafe { libc::geteuid() == 0 }
}

fn unit() -> Unit {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let data = d.join("data");
    std::fs::create_dir(&data).unwrap();
    std::fs::write(data.join(pfx_store::MARKER), b"").unwrap();
    let sock = d.join("control.sock");
    let audit = d.join("audit.log");
    let cfg = d.join("agent.yaml");
    std::fs::write(
        &cfg,
        format!(
            "iface: lo\nunit_id: u1\nsystemd: false\nstore_root: {}\ncontrol_socket: {}\naudit_log: {}\n",
            data.display(),
            sock.display(),
            audit.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&cfg, std::fs::Permissions::from_mode(0o644)).unwrap();
    Unit {
        dir,
        cfg,
        sock,
        data,
        audit,
    }
}

/// A stand-in for the player: answers each request (accepting all but `play encore`)
/// and keeps what it was asked.
fn player(sock: &Path) -> Arc<Mutex<Vec<ControlRequest>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let l = UnixListener::bind(sock).unwrap();
    let s2 = Arc::clone(&seen);
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(mut c) = c else { continue };
            let mut line = String::new();
            if BufReader::new(&c).read_line(&mut line).is_err() {
                continue;
            }
            let Ok(req) = serde_json::from_str::<ControlRequest>(&line) else {
                continue;
            };
            let refuse = req.action
                == Action::Play {
                    playlist: "encore".into(),
                };
            let a = ControlAnswer {
                unit: "the-player".into(),
                accepted: !refuse,
                error: refuse.then(|| {
                    "play: no playlist \"encore\"; its playlists are `evening` or `sponsor`".into()
                }),
                reached_player: true,
                effective_unix_us: (!refuse).then_some(1_767_225_600_000_042),
                state: ControlState {
                    content: (!refuse).then(|| req.action.clone()),
                    content_by: Some(format!("{}@{}", req.by, req.from)),
                    ..Default::default()
                },
                ..Default::default()
            };
            s2.lock().unwrap().push(req);
            let _ = c.write_all(format!("{}\n", serde_json::to_string(&a).unwrap()).as_bytes());
        }
    });
    seen
}

/// `pfx-agent dispatch --config CFG` with `cmd` as the SSH request: (exit, stdout, stderr).
fn dispatch(u: &Unit, cmd: &str) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_pfx-agent"))
        .args(["dispatch", "--config"])
        .arg(&u.cfg)
        .env("SSH_ORIGINAL_COMMAND", cmd)
        .env("SSH_CLIENT", "10.0.0.5 50000 22")
        .env("SUDO_USER", "pfx")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn answer(stdout: &str) -> ControlAnswer {
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

#[test]
fn control_verbs_reach_the_player_checked_word_by_word_and_logged() {
    if !root() {
        eprintln!("skipped: the dispatcher trusts only a root-owned config (run as root)");
        return;
    }
    let u = unit();
    let seen = player(&u.sock);

    let (code, out, err) = dispatch(&u, "control blackout --by alice");
    assert_eq!(code, 0, "{err}");
    let a = answer(&out);
    assert!(a.accepted && a.reached_player);
    assert_eq!(a.unit, "u1", "the agent answers with the unit's id");
    assert_eq!(a.effective_unix_us, Some(1_767_225_600_000_042));
    {
        let s = seen.lock().unwrap();
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].action, Action::Blackout);
        assert_eq!(
            (s[0].by.as_str(), s[0].from.as_str()),
            ("alice", "10.0.0.5")
        );
    }
    let (code, out, _) = dispatch(&u, "control test walk --output pole-3 --by alice");
    assert_eq!(code, 0);
    assert!(answer(&out).accepted);

    // Refused by the dispatcher: exit 126, the choices named, nothing reaches the player.
    for (cmd, want) in [
        ("control blackout; id", "unknown action \"blackout;\""),
        (
            "control dim",
            "the actions are blackout, stop, play PLAYLIST",
        ),
        (
            "control test rainbow",
            "`id`, `walk`, `red`, `green`, `blue` or `white`",
        ),
        ("control brightness 9", "from 0 to 4"),
        ("control brightness 0.5e1", "from 0 to 4"),
        ("control play ../../etc/passwd", "a name of 1 to 64"),
        ("control blackout --by root;id", "--by"),
        ("control --socket /tmp/x blackout", "unknown action"),
        ("control blackout --by alice --by bob", "--by"),
    ] {
        let (code, out, err) = dispatch(&u, cmd);
        assert_eq!(code, 126, "{cmd}: {out} {err}");
        assert!(
            err.contains("refused") && err.contains(want),
            "{cmd}: {err}"
        );
    }
    assert_eq!(
        seen.lock().unwrap().len(),
        2,
        "no refused request reached the player"
    );

    // Refused by the player (a playlist its show does not have): exit 1, its reason.
    let (code, out, _) = dispatch(&u, "control play encore --by alice");
    assert_eq!(code, 1);
    let a = answer(&out);
    assert!(!a.accepted && a.reached_player);
    assert!(a.error.unwrap().contains("`evening` or `sponsor`"));

    // Logged like every verb, with the client's address.
    let log = std::fs::read_to_string(&u.audit).unwrap();
    assert!(
        log.contains("accepted \"control blackout --by alice\" for pfx from 10.0.0.5 50000 22"),
        "{log}"
    );
    assert!(log.contains("refused \"control test rainbow\""), "{log}");

    // No player: reported as not reached, and the blackout is still kept on the data
    // partition so the player starts black.
    std::fs::remove_file(&u.sock).unwrap();
    let (code, out, _) = dispatch(&u, "control blackout --by alice");
    assert_eq!(code, 1);
    let a = answer(&out);
    assert!(!a.accepted && !a.reached_player);
    assert!(a.error.unwrap().contains("does not answer"));
    assert_eq!(a.held_on_disk, Some(true));
    assert!(pfx_store::held::path(&u.data).is_file());
    let (_, out, _) = dispatch(&u, "control resume --by alice");
    assert!(
        answer(&out)
            .note
            .unwrap()
            .contains("starts with its schedule")
    );
    assert!(!pfx_store::held::path(&u.data).exists());
    drop(u.dir);
}

/// `pfx-fleet control` end to end on three units: two whose "ssh" (a stand-in program
/// named by the fleet config's `ssh.ssh`) runs the real `pfx-agent dispatch` with the
/// request in SSH_ORIGINAL_COMMAND, each with its own player stand-in, and one that is
/// unreachable (ssh exits 255, "Connection refused").
#[test]
fn pfx_fleet_control_acts_on_every_unit_reports_the_silent_one_and_records_it() {
    if !root() {
        eprintln!("skipped: the dispatcher trusts only a root-owned config (run as root)");
        return;
    }
    let u1 = unit();
    let u2 = unit();
    let seen1 = player(&u1.sock);
    let seen2 = player(&u2.sock);
    // Each unit's config says its own id.
    for (u, id) in [(&u1, "u1"), (&u2, "u2")] {
        let t = std::fs::read_to_string(&u.cfg).unwrap();
        std::fs::write(&u.cfg, t.replace("unit_id: u1", &format!("unit_id: {id}"))).unwrap();
    }
    let d = tempfile::tempdir().unwrap();
    let ssh = d.path().join("ssh");
    std::fs::write(
        &ssh,
        format!(
            "#!/bin/sh\n# ssh ... HOST -- WORDS: the host before `--`, the remote command after it.\nprev=; cmd=; after=\nfor a; do\n  if [ -n \"$after\" ]; then cmd=\"$cmd${{cmd:+ }}$a\"; elif [ \"$a\" = -- ]; then after=1; host=$prev; else prev=$a; fi\ndone\ncase \"$host\" in\n  *127.0.0.1) cfg={};;\n  *127.0.0.2) cfg={};;\n  *) echo \"ssh: connect to host $host port 22: Connection refused\" >&2; exit 255;;\nesac\nSSH_ORIGINAL_COMMAND=\"$cmd\" SSH_CLIENT='10.9.9.9 40000 22' SUDO_USER=pfx exec {} dispatch --config \"$cfg\"\n",
            u1.cfg.display(),
            u2.cfg.display(),
            env!("CARGO_BIN_EXE_pfx-agent")
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&ssh, std::fs::Permissions::from_mode(0o755)).unwrap();
    let fleet = d.path().join("fleet.yaml");
    std::fs::write(
        &fleet,
        format!(
            "ssh:\n  ssh: {}\n  known_hosts: {}/known_hosts\n  command_timeout_s: 20\nsites:\n  - name: hall-a\n    units:\n      - {{id: u1, host: 127.0.0.1}}\n      - {{id: u2, host: 127.0.0.2}}\n      - {{id: u3, host: 127.0.0.3}}\n",
            ssh.display(),
            d.path().display()
        ),
    )
    .unwrap();
    let db = d.path().join("fleet.db");
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_pfx-fleet"))
            .arg("--config")
            .arg(&fleet)
            .arg("--db")
            .arg(&db)
            .args(args)
            .env("USER", "Alice.Smith")
            .env_remove("SUDO_USER")
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };

    // Bad input: refused before any unit is asked, naming the choices.
    for (args, want) in [
        (
            &["control", "dim", "--site", "hall-a"][..],
            "the actions are blackout",
        ),
        (
            &["control", "test", "rainbow", "--site", "hall-a"],
            "`id`, `walk`, `red`, `green`, `blue` or `white`",
        ),
        (
            &["control", "brightness", "7", "--site", "hall-a"],
            "from 0 to 4",
        ),
        (&["control", "blackout"], "--site S, or --unit U"),
    ] {
        let (code, _, err) = run(args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
    assert!(seen1.lock().unwrap().is_empty() && seen2.lock().unwrap().is_empty());

    let (code, out, err) = run(&["control", "blackout", "--site", "hall-a", "--json"]);
    assert_eq!(code, 1, "u3 did not answer: {out} {err}");
    let sum: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (sum["done"].as_u64(), sum["pending"].as_u64()),
        (Some(2), Some(1))
    );
    let units = sum["units"].as_array().unwrap();
    for (i, id) in ["u1", "u2"].into_iter().enumerate() {
        assert_eq!(units[i]["unit"], id);
        assert_eq!(units[i]["state"], "done");
        assert_eq!(units[i]["effective_unix_us"], 1_767_225_600_000_042u64);
        assert_eq!(units[i]["effective_utc"], "2026-01-01 00:00:00.000042 UTC");
    }
    assert_eq!(units[2]["state"], "pending");
    assert!(
        units[2]["reason"]
            .as_str()
            .unwrap()
            .contains("Connection refused"),
        "{}",
        units[2]
    );
    for seen in [&seen1, &seen2] {
        let s = seen.lock().unwrap();
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].action, Action::Blackout);
        assert_eq!(
            (s[0].by.as_str(), s[0].from.as_str()),
            ("alice-smith", "10.9.9.9")
        );
    }

    // Without --json: one line per unit, when its poles were told.
    let (code, out, _) = run(&[
        "control", "test", "id", "--output", "pole-3", "--unit", "u1",
    ]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(
            "u1: test id --output pole-3: its poles were told at 2026-01-01 00:00:00.000042 UTC"
        ),
        "{out}"
    );

    // history: who, what, when.
    let (_, out, _) = run(&["history", "--json"]);
    let h: serde_json::Value = serde_json::from_str(&out).unwrap();
    let rows: Vec<&serde_json::Value> = h
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["kind"].as_str().is_some_and(|k| k.starts_with("control")))
        .collect();
    assert_eq!(rows.len(), 4, "{h}");
    assert!(rows.iter().all(|r| r["operator"] == "Alice.Smith"));
    assert!(rows.iter().any(|r| r["kind"] == "control blackout"
        && r["target"] == "u3"
        && r["state"] == "pending"));
    assert!(
        rows.iter()
            .any(|r| r["kind"] == "control test id --output pole-3"
                && r["target"] == "u1"
                && r["state"] == "done"
                && r["recorded_ms"].as_u64().is_some())
    );
}
