//! A show config an operator got wrong: the real binary says what was expected, in the
//! operator's words, with FILE:LINE:COLUMN, and exits 2 (pfx_api::exit).

use std::process::Command;

const SHOW: &str = "interface: lo\nfps: FPS\noutputs:\n  - name: a\n    profile: bench-ddp\ncontent:\n  playlist:\n    - pattern: id\n";

fn run_with_fps(fps: &str) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("show.yaml");
    std::fs::write(&path, SHOW.replace("FPS", fps)).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_pfx-player"))
        .args(["run", "--no-mdns", "--duration", "1", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).replace(path.to_str().unwrap(), "FILE");
    (out.status.code(), err)
}

#[test]
fn fps_fast_says_what_was_expected_where() {
    let (code, err) = run_with_fps("\"fast\"");
    assert_eq!(code, Some(2), "{err}");
    assert!(err.starts_with("pfx-player: error: FILE: "), "{err}");
    assert!(
        err.contains(
            "fps: expected a whole number of frames per second such as 40 or 60, found \"fast\""
        ),
        "{err}"
    );
    assert!(err.contains(" --> FILE:2:6"), "FILE:LINE:COLUMN: {err}");
    assert!(!err.contains("invalid u32"), "{err}");
    let (code, err) = run_with_fps("59.94");
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("found 59.94"), "{err}");
}

#[test]
fn help_gives_the_exit_codes() {
    let out = Command::new(env!("CARGO_BIN_EXE_pfx-player"))
        .arg("--help")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Exit status:"), "{text}");
    assert!(text.contains("  1     findings (doctor)"), "{text}");
    assert!(text.contains("  2     error: bad usage"), "{text}");
}
