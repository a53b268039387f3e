//! pfx-image's exit convention (pfx_api::exit) and its tool list, on the real binary.

use std::process::Command;

const IMAGE: &str = env!("CARGO_BIN_EXE_pfx-image");

fn run(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(IMAGE).args(args).output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn errors_are_2_a_failed_verify_is_1() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("missing.yaml");
    let (code, _, err) = run(&["show-config", cfg.to_str().unwrap()]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.starts_with("pfx-image: error: "), "{err}");
    assert!(err.contains("missing.yaml"), "{err}");

    let img = dir.path().join("missing.img");
    let (code, _, err) = run(&["verify", img.to_str().unwrap(), "--target", "vm-amd64"]);
    assert_eq!(code, Some(2), "an image that cannot be opened: {err}");
    assert!(err.contains("opening the image"), "{err}");

    let junk = dir.path().join("junk.img");
    std::fs::write(&junk, vec![0u8; 4096]).unwrap();
    let (code, _, err) = run(&["verify", junk.to_str().unwrap(), "--target", "vm-amd64"]);
    assert_eq!(code, Some(1), "an image that does not verify: {err}");
    assert!(err.starts_with("pfx-image: error: "), "{err}");

    let (code, _, err) = run(&["verify", junk.to_str().unwrap(), "--target", "pi5"]);
    assert_eq!(code, Some(2), "usage: {err}");

    let (code, out, _) = run(&["--help"]);
    assert_eq!(code, Some(0));
    assert!(
        out.contains("Exit status:") && out.contains("  1     the image did not verify"),
        "{out}"
    );
}

#[test]
fn tools_lists_arch_test_for_a_foreign_root() {
    let (code, out, err) = run(&["tools", "--json"]);
    assert_eq!(code, Some(0), "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let rows = v.as_array().unwrap();
    let has = |target: &str, cmd: &str| {
        rows.iter()
            .any(|r| r["target"] == target && r["command"] == cmd)
    };
    assert!(has("vm-amd64", "mmdebstrap"));
    if std::env::consts::ARCH == "x86_64" {
        assert!(has("rpi4-arm64", "arch-test"), "{out}");
        assert!(has("vm-arm64", "arch-test"), "{out}");
        assert!(!has("vm-amd64", "arch-test"), "{out}");
    }
}
