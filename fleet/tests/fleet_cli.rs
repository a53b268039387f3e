//! `pfx-fleet`'s arguments and its bookkeeping, end to end through the binary and a real
//! SQLite database: a bad `--max-age` is refused while the arguments are read (before the
//! database exists), flags one form of `push` ignores are refused, and only a command that
//! reaches units moves a unit's `seen_ms`.

use std::path::Path;
use std::process::{Command, Output};

fn fleet(cfg: &Path, db: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pfx-fleet"))
        .arg("--config")
        .arg(cfg)
        .arg("--db")
        .arg(db)
        .args(args)
        .output()
        .expect("running pfx-fleet")
}

fn seen_ms(db: &Path) -> i64 {
    let c = rusqlite::Connection::open(db).unwrap();
    c.query_row("SELECT seen_ms FROM units WHERE unit_id = 'u1'", [], |r| {
        r.get(0)
    })
    .unwrap()
}

fn config(dir: &Path) -> std::path::PathBuf {
    let cfg = dir.join("fleet.yaml");
    // Port 1 on loopback: nothing listens, so `top` is answered "refused" at once.
    std::fs::write(
        &cfg,
        "sites:\n  - name: s\n    units:\n      - {id: u1, host: 127.0.0.1}\n",
    )
    .unwrap();
    cfg
}

#[test]
fn max_age_is_refused_when_the_arguments_are_read() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    let db = dir.path().join("fleet.db");
    for args in [
        &["status", "--max-age", "3x"][..],
        &["gate", "fallback", "--site", "s", "--max-age", "24"],
        &["push", "pause-off", "--max-age", "h"],
    ] {
        let out = fleet(&cfg, &db, args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("--max-age") && err.contains("ms, s, m, h or d"),
            "{err}"
        );
        // Refused by clap: the database was never opened.
        assert!(!db.exists(), "{args:?} opened the database before refusing");
    }
    let out = fleet(&cfg, &db, &["status", "--max-age", "90m", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn flags_a_push_would_ignore_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    let db = dir.path().join("fleet.db");
    let show = dir.path().join("show");
    std::fs::create_dir(&show).unwrap();
    for (args, want) in [
        (
            &["push", "pause-off", "--chunk-mib", "4"][..],
            "push pause-off takes no --chunk-mib",
        ),
        (
            &["push", "show", show.to_str().unwrap(), "--force"],
            "push show takes no --force",
        ),
    ] {
        let out = fleet(&cfg, &db, args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(!db.exists(), "{args:?} opened the database before refusing");
    }
}

#[test]
fn only_commands_that_reach_units_move_seen_ms() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    let db = dir.path().join("fleet.db");
    let out = fleet(&cfg, &db, &["history"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(seen_ms(&db), 0, "history reached no unit, yet set seen_ms");
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute("UPDATE units SET seen_ms = 123", [])
        .unwrap();
    for args in [
        &["history"][..],
        &["status", "--json"],
        &["gate", "fallback", "--site", "s", "--json"],
    ] {
        let out = fleet(&cfg, &db, args);
        assert!(out.status.code().is_some(), "{args:?}");
        assert_eq!(
            seen_ms(&db),
            123,
            "{args:?} reached no unit, yet moved seen_ms"
        );
    }
    let out = fleet(
        &cfg,
        &db,
        &[
            "top",
            "--site",
            "s",
            "--json",
            "--http-port",
            "1",
            "--timeout-s",
            "1",
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        seen_ms(&db) > 1_700_000_000_000,
        "top asked the unit, seen_ms stayed"
    );
}
