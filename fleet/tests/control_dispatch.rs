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
        assert_eq!((s[0].by.as_str(), s[0].from.as_str()), ("alice", "10.0.0.5"));
    }
    let (code, out, _) = dispatch(&u, "control test walk --output pole-3 --by alice");
    assert_eq!(code, 0);
    assert!(answer(&out).accepted);

    // Refused by the dispatcher: exit 126, the choices named, nothing reaches the player.
    for (cmd, want) in [
        ("control blackout; id", "unknown action \"blackout;\""),
        ("control dim", "the actions are blackout, stop, play PLAYLIST"),
        ("control test rainbow", "`id`, `walk`, `red`, `green`, `blue` or `white`"),
        ("control brightness 9", "from 0 to 4"),
        ("control brightness 0.5e1", "from 0 to 4"),
        ("control play ../../etc/passwd", "a name of 1 to 64"),
        ("control blackout --by root;id", "--by"),
        ("control --socket /tmp/x blackout", "unknown action"),
        ("control blackout --by alice --by bob", "--by"),
    ] {
        let (code, out, err) = dispatch(&u, cmd);
        assert_eq!(code, 126, "{cmd}: {out} {err}");
        assert!(err.contains("refused") && err.contains(want), "{cmd}: {err}");
    }
    assert_eq!(seen.lock().unwrap().len(), 2, "no refused request reached the player");

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
    assert!(answer(&out).note.unwrap().contains("starts with its schedule"));
    assert!(!pfx_store::held::path(&u.data).exists());
    drop(u.dir);
}
