//! A show config an operator got wrong: the real binary says what was expected, in the
//! operator's words, with FILE:LINE:COLUMN, and exits 2 (pfx_api::exit).

use std::process::Command;

const SHOW: &str = "interface: lo\nfps: FPS\noutputs:\n  - name: a\n    profile: bench-ddp\ncontent:\n  playlist:\n    - pattern: id\n";

fn run_with_fps(fps: &str) -> (Option<i32>, String) {
    run_show(&SHOW.replace("FPS", fps))
}

fn run_show(text: &str) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("show.yaml");
    std::fs::write(&path, text).unwrap();
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
fn brightness_and_the_other_numbers_say_what_was_expected() {
    // Sneaks the field in beside fps (which stays valid).
    for (line, want) in [
        (
            "brightness: bright",
            "brightness: expected a number from 0.0 (dark) to 1.0 (full) such as 0.8, found \"bright\"",
        ),
        (
            "multicast_ttl: many",
            "multicast_ttl: expected a whole number of router hops",
        ),
        (
            "profile_window_s: 2.5",
            "profile_window_s: expected a whole number of seconds such as 10, found 2.5",
        ),
    ] {
        let (code, err) = run_with_fps(&format!("60\n{line}"));
        assert_eq!(code, Some(2), "{err}");
        assert!(err.contains(want), "{line}: {err}");
        assert!(err.contains(" --> FILE:3:"), "{line}: {err}");
    }
    // A whole number is a fine brightness: parsing passes it on to the range checks (a
    // window of 0 stops the run there, before any show starts).
    let (code, err) = run_with_fps("60\nbrightness: 1\nprofile_window_s: 0");
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("profile_window_s: 0 is outside"), "{err}");
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

#[test]
fn a_value_out_of_range_names_its_line() {
    // Parsed fine, refused by the config's own checks: still FILE:LINE:COLUMN.
    let (code, err) = run_with_fps("1000");
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.starts_with("pfx-player: error: FILE:2:1: fps: 1000 is outside 1..=240"),
        "{err}"
    );
    // A profile that does not exist: the line of `profile:` under that output.
    let (code, err) = run_show(&SHOW.replace("FPS", "60").replace("bench-ddp", "nope"));
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.starts_with(
            "pfx-player: error: FILE:5:5: outputs[0].profile: nope: no profile named `nope`"
        ),
        "{err}"
    );
    // Nothing to point at (no `content:` at all): the file alone, no made-up line.
    let cut = SHOW.replace("FPS", "60");
    let (code, err) = run_show(&cut[..cut.find("content:").unwrap()]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.starts_with("pfx-player: error: FILE: content"), "{err}");
}
