//! Issue 25: a pushed show is closed. The real binary's `run --check --pushed` (what the
//! unit's agent runs on a show that came over the network) on shows made in a real store:
//! only the show's own files and the image's named profiles may be read; `profiles_dir`,
//! absolute and `..` paths, files the show does not hold and a `sync.sequences` outside
//! it are refused, each with the key's line. The same shows without `--pushed` (a
//! config an operator wrote on the unit) still load, so the refusal is the flag's.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::fseq_writer;
use pfx_store::{Hash, Store};

const BASE: &str = "interface: lo\noutputs:\n  - name: a\n    profile: PROFILE\n    destination: 127.0.0.1:9\ncontent:\n  playlist:\n    - fseq: FSEQ\n";

struct Fixture {
    _dir: tempfile::TempDir,
    store: Store,
    /// A real sequence outside the store.
    outside: PathBuf,
    fseq: Hash,
    profile: Hash,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("data");
    std::fs::create_dir(&root).unwrap();
    std::fs::write(root.join(pfx_store::MARKER), b"").unwrap();
    let store = Store::open(&root).unwrap().with_reserve(0);
    let bytes = fseq_writer::write(&fseq_writer::Spec::default(), &fseq_writer::frames(10, 30));
    let outside = dir.path().join("outside.fseq");
    std::fs::write(&outside, &bytes).unwrap();
    let fseq = store.put_bytes("f", &bytes).unwrap();
    let prof =
        std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("../profiles/bench-ddp.yaml"))
            .unwrap();
    let profile = store.put_bytes("p", &prof).unwrap();
    Fixture {
        _dir: dir,
        store,
        outside,
        fseq,
        profile,
    }
}

/// Makes the show in the store and checks it; (exit status, output).
fn check(f: &Fixture, yaml: &str, files: &[(&str, Hash)], pushed: bool) -> (bool, String) {
    let files: BTreeMap<String, Hash> = files.iter().map(|(n, h)| (n.to_string(), *h)).collect();
    let id = f.store.make_show("t", yaml.as_bytes(), &files).unwrap();
    let cfg = f.store.show_dir(&id).join("show.yaml");
    let mut c = Command::new(env!("CARGO_BIN_EXE_pfx-player"));
    c.args(["run", "--check", "--no-mdns"]);
    if pushed {
        c.arg("--pushed");
    }
    let out = c.arg("--config").arg(&cfg).output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

fn show(profile: &str, fseq: &str) -> String {
    BASE.replace("PROFILE", profile).replace("FSEQ", fseq)
}

#[test]
fn a_pushed_show_reads_only_its_own_files_and_the_images_profiles() {
    let f = fixture();
    let own = [("songs/a.fseq", f.fseq)];
    let good = show("bench-ddp", "songs/a.fseq");
    let (ok, out) = check(&f, &good, &own, true);
    assert!(ok && out.contains(": ok: 1 outputs"), "{out}");
    let with_profile = [("songs/a.fseq", f.fseq), ("mine.yaml", f.profile)];
    let (ok, out) = check(&f, &show("mine.yaml", "songs/a.fseq"), &with_profile, true);
    assert!(ok, "a profile file of the show: {out}");
    let shipped = [
        ("songs/a.fseq", f.fseq),
        ("profiles/bench-ddp.yaml", f.profile),
    ];
    let (ok, out) = check(&f, &good, &shipped, true);
    assert!(ok, "a named profile the show ships: {out}");

    let outside = f.outside.display().to_string();
    let refused: Vec<(String, &str)> = vec![
        (
            format!("profiles_dir: /etc\n{good}"),
            "profiles_dir: /etc is refused in a pushed show",
        ),
        (
            format!("profiles_dir: profiles\n{good}"),
            "profiles_dir: profiles is refused",
        ),
        (show("bench-ddp", &outside), "content.playlist[0].fseq: `/"),
        (
            show("bench-ddp", "../../../outside.fseq"),
            "has an empty, `.` or `..` component",
        ),
        (show("bench-ddp", "songs/../songs/a.fseq"), "`..` component"),
        (
            show("bench-ddp", "other.fseq"),
            "`other.fseq` is not a file of this show",
        ),
        (
            show("/usr/share/pfx/profiles/bench-ddp.yaml", "songs/a.fseq"),
            "outputs[0].profile: `/usr/share",
        ),
        (
            show("../../../../profiles/bench-ddp.yaml", "songs/a.fseq"),
            "outputs[0].profile",
        ),
        (
            show("mine.yaml", "songs/a.fseq"),
            "`mine.yaml` is not a file of this show",
        ),
        (
            format!(
                "{}sync:\n  role: remote\n  sequences: /etc\n",
                show("bench-ddp", "songs/a.fseq")
            ),
            "sync.sequences: `/etc` must be relative",
        ),
        (
            format!(
                "{}sync:\n  role: remote\n  sequences: ..\n",
                show("bench-ddp", "songs/a.fseq")
            ),
            "sync.sequences: `..`",
        ),
    ];
    for (yaml, want) in &refused {
        let (ok, out) = check(&f, yaml, &own, true);
        assert!(!ok, "accepted as a pushed show:\n{yaml}\n{out}");
        assert!(out.contains(want), "{want:?} not in:\n{out}\nfor:\n{yaml}");
        assert!(out.contains("show.yaml:"), "no FILE:LINE: {out}");
    }
    // Not pushed: the absolute path outside and profiles_dir load (an operator's own
    // config may name them), so the refusals above are the pushed check's.
    let (ok, out) = check(&f, &show("bench-ddp", &outside), &own, false);
    assert!(ok, "{out}");
    let (ok, out) = check(
        &f,
        &format!("profiles_dir: /usr/share/pfx/profiles\n{good}"),
        &own,
        false,
    );
    assert!(ok, "{out}");
    // A file the show does not hold, put into its directory by hand: not its own.
    let files: BTreeMap<String, Hash> = own.iter().map(|(n, h)| (n.to_string(), *h)).collect();
    let id = f
        .store
        .make_show("t", show("bench-ddp", "extra.fseq").as_bytes(), &files)
        .unwrap();
    std::fs::copy(&f.outside, f.store.show_dir(&id).join("extra.fseq")).unwrap();
    let (ok, out) = check(&f, &show("bench-ddp", "extra.fseq"), &own, true);
    assert!(
        !ok && out.contains("`extra.fseq` is not a file of this show"),
        "{out}"
    );
}

#[test]
fn pushed_needs_a_show_of_a_store() {
    let d = tempfile::tempdir().unwrap();
    let cfg = d.path().join("show.yaml");
    std::fs::write(&cfg, show("bench-ddp", "a.fseq")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_pfx-player"))
        .args(["run", "--check", "--pushed", "--config"])
        .arg(&cfg)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("not a show of a store"), "{err}");
}
