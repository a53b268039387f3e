//! `pfx-agent bootenv` as RAUC and an operator run it: the real binary on real files.
//! RAUC 1.8 reads a `get-` call's stdout (stripped of white space) and every call's exit
//! status, so stdout must hold the answer and nothing else, and a failure must be non-zero.

use std::path::Path;
use std::process::Command;

const AGENT: &str = env!("CARGO_BIN_EXE_pfx-agent");

fn agent(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(AGENT)
        .arg("bootenv")
        .arg("--dir")
        .arg(dir)
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn rauc_calls_answer_on_stdout_only() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    assert_eq!(agent(dir, &["init"]).0, 0);
    assert_eq!(
        agent(dir, &["rauc", "get-primary"]),
        (0, "A\n".into(), String::new())
    );
    assert_eq!(
        agent(dir, &["rauc", "get-state", "A"]),
        (0, "good\n".into(), String::new())
    );
    assert_eq!(
        agent(dir, &["rauc", "get-state", "B"]),
        (0, "bad\n".into(), String::new())
    );
    // A set prints nothing on stdout; its log line goes to stderr (RAUC's journal).
    let (code, out, err) = agent(dir, &["rauc", "set-primary", "B"]);
    assert_eq!((code, out.as_str()), (0, ""), "{err}");
    assert!(err.contains("wrote pfxenv.b PFX_SEQ=2"), "{err}");
    assert_eq!(agent(dir, &["rauc", "get-primary"]).1, "B\n");
    assert_eq!(agent(dir, &["rauc", "set-state", "B", "bad"]).0, 0);
    assert_eq!(agent(dir, &["rauc", "set-state", "A", "bad"]).0, 0);
    // Neither bootable: get-primary fails, with the reason on stderr and nothing on stdout.
    let (code, out, err) = agent(dir, &["rauc", "get-primary"]);
    assert_eq!((code, out.as_str()), (2, ""));
    assert!(err.starts_with("pfx-agent: error: "), "{err}");
    assert!(err.contains("neither A nor B"), "{err}");
}

#[test]
fn bad_calls_fail_with_one_line_saying_what_is_expected() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    assert_eq!(agent(dir, &["init"]).0, 0);
    for args in [
        &["rauc"][..],
        &["rauc", "get-state"][..],
        &["rauc", "set-state", "A", "maybe"][..],
        &["rauc", "set-primary", "rootfs.1"][..],
        &["rauc", "mark-good"][..],
    ] {
        let (code, out, err) = agent(dir, args);
        assert_eq!((code, out.as_str()), (2, ""), "{args:?}: {err}");
        assert!(err.starts_with("pfx-agent: error: "), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
    }
    // A directory that is not there: named, with what to do.
    let (code, _, err) = agent(&dir.join("nope"), &["rauc", "get-primary"]);
    assert_eq!(code, 2);
    assert!(err.contains("nope") && err.contains("--dir"), "{err}");
}

#[test]
fn print_json_and_init_force() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    // Nothing there yet: print shows the fallback and what the next boot does.
    let (code, out, _) = agent(dir, &["print", "--json"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["newest"], serde_json::Value::Null);
    assert_eq!(v["copies"][0]["error"], "missing");
    assert_eq!(v["next_boot"]["slot"], "A");
    assert_eq!(v["next_boot"]["write"]["file"], "pfxenv.a");
    assert_eq!(agent(dir, &["init"]).0, 0);
    assert_eq!(agent(dir, &["rauc", "set-primary", "B"]).0, 0);
    let (code, _, err) = agent(dir, &["init"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("--force") && err.contains("BOOT_ORDER=B A"),
        "{err}"
    );
    assert_eq!(agent(dir, &["init", "--force"]).0, 0);
    let v: serde_json::Value = serde_json::from_str(&agent(dir, &["print", "--json"]).1).unwrap();
    assert_eq!(v["state"]["from"], "pfxenv.a");
    assert_eq!(v["state"]["seq"], 1);
    assert_eq!(v["next_boot"]["left_before"], 3);
    assert_eq!(v["next_boot"]["trial"], false);
    let (code, text, _) = agent(dir, &["print"]);
    assert_eq!(code, 0);
    assert!(
        text.contains("next boot: slot A, attempt 3 -> 2 left"),
        "{text}"
    );
}
