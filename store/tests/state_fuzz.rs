//! Fuzzes what the show store reads back from the data partition, on stable Rust: a unit
//! can lose power mid-write and the partition is writable by the fleet account's group, so
//! a corrupt, cut or hand-edited file must give an error, never a panic, and must never
//! make the store remove or read what it should not. Deterministic seeds; the failing
//! input is printed. About 1 s together in a debug build with /dev/shm (see `tmp`).
//!
//! - `manifest.json`: every prefix of a real one (a write cut short), then 3 000 mutations
//!   (JSON's delimiters, bytes flipped, values swapped for edge numbers, hostile file
//!   names). Read through `manifest`, `active`, `verify_show`, `active_show_yaml` and
//!   (every 4th time) `gc`. An accepted manifest is the show's own and names only files `make_show` would
//!   write; the active show survives `gc` whatever its manifest says.
//! - The `active` link: 1 500 targets (other shows, no show, paths out of the store,
//!   bytes that are no id). Read through `active_id`, `active` and `gc`.
//! - `staging/`: 1 500 rounds of names a dead writer may have left. `Store::open` cleans
//!   `*.tmp` without touching a resumable `*.part` or anything outside `staging/`.
//! - `store/checked`: 400 rounds of junk records of hashed files. `Store::open` neither
//!   refuses nor quarantines a stored file whose content is its name.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use pfx_store::{Hash, MARKER, ShowId, Store, check_name};

#[path = "../../fuzz/rng.rs"]
#[allow(dead_code)] // each test uses what it needs of it
mod rng;
use rng::Rng;

/// In memory when the machine has /dev/shm: `gc` and `open` fsync directories, which on
/// a disk makes thousands of rounds take minutes; what is read back is the same.
fn tmp() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    let d = if shm.is_dir() {
        tempfile::tempdir_in(shm)
    } else {
        tempfile::tempdir()
    };
    d.expect("tmp")
}

/// A store with one active show of two files; returns its root, id and the show's dir.
fn store_with_a_show() -> (tempfile::TempDir, Store, ShowId, PathBuf) {
    let d = tmp();
    fs::write(d.path().join(MARKER), b"").expect("marker");
    let s = Store::open(d.path()).expect("open").with_reserve(0);
    let a = s.put_bytes("a", b"sequence one").expect("put");
    let b = s.put_bytes("b", b"sequence two").expect("put");
    let files: BTreeMap<String, Hash> = [("a.fseq".to_string(), a), ("sub/b.fseq".into(), b)]
        .into_iter()
        .collect();
    let id = s
        .make_show("fuzz", b"interface: eth0\n", &files)
        .expect("show");
    s.activate(&id).expect("activate");
    let dir = s.show_dir(&id);
    (d, s, id, dir)
}

/// Reads the show back every way the store does, checking what an answer may hold.
fn read_back(s: &Store, id: &ShowId, dir: &Path, input: &str, gc: bool) {
    let what = |e: &dyn std::fmt::Display| {
        let m = e.to_string();
        assert!(!m.trim().is_empty(), "empty error for {input}");
    };
    match std::panic::catch_unwind(|| s.manifest(id)) {
        Err(_) => panic!("manifest() panicked on {input}"),
        Ok(Err(e)) => what(&e),
        Ok(Ok(m)) => {
            assert_eq!(&m.id, id, "accepted a manifest of another show: {input}");
            for n in m.files.keys() {
                assert!(
                    check_name(n).is_ok(),
                    "accepted a manifest naming {n:?}, which no show may hold: {input}"
                );
            }
        }
    }
    for r in [
        std::panic::catch_unwind(|| s.active().map(|_| ())),
        std::panic::catch_unwind(|| s.verify_show(id)),
        std::panic::catch_unwind(|| pfx_store::active_show_yaml(s.root()).map(|_| ())),
    ] {
        match r {
            Err(_) => panic!("reading the show back panicked on {input}"),
            Ok(Err(e)) => what(&e),
            Ok(Ok(())) => {}
        }
    }
    match std::panic::catch_unwind(|| if gc { s.gc(&[]).map(|_| ()) } else { Ok(()) }) {
        Err(_) => panic!("gc panicked on {input}"),
        Ok(Err(e)) => what(&e),
        Ok(Ok(())) => {}
    }
    // Whatever the manifest says, the active show is not collected.
    assert!(
        dir.join("show.yaml").is_file() && dir.join("a.fseq").is_file(),
        "the active show lost files after {input}"
    );
}

/// What JSON mutations splice in.
const JSON_BITS: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    ":",
    ",",
    "\"",
    "\\",
    "\\u0000",
    "\\ud800",
    "null",
    "true",
    "0",
    "-1",
    "1e309",
    "18446744073709551615",
    "18446744073709551616",
    "NaN",
    "\n",
    " ",
    "\0",
    "\u{feff}",
    "é",
    "\"../../etc/passwd\"",
    "\"/etc/shadow\"",
    "\"show.yaml\"",
    "\"manifest.json\"",
    "\".hidden\"",
    "\"a//b\"",
    "\"\"",
    "\"0123456789abcdef\"",
    "\"0123456789ABCDEF\"",
];

fn mutate_json(rng: &mut Rng, good: &[u8], hash: &str) -> Vec<u8> {
    let text = String::from_utf8_lossy(good).into_owned();
    match rng.below(6) {
        0 => {
            let mut b = good.to_vec();
            for _ in 0..=rng.below(4) {
                let i = rng.below(b.len());
                b[i] = rng.next() as u8;
            }
            b
        }
        1 => {
            let mut b = good.to_vec();
            let i = rng.below(b.len() + 1);
            let bit = JSON_BITS[rng.below(JSON_BITS.len())];
            b.splice(i..i, bit.bytes());
            b
        }
        2 => {
            let mut b = good.to_vec();
            let i = rng.below(b.len());
            let n = rng.below(b.len() - i + 1);
            b.drain(i..i + n);
            b
        }
        3 => {
            // A file renamed to a hostile name, keeping its hash.
            let names = [
                "../../etc/passwd",
                "/etc/shadow",
                "show.yaml",
                "manifest.json",
                ".hidden",
                "a//b",
                "",
                "a\\\\b",
                "a\\u0001",
                "sub/../../x",
                ".",
            ];
            let n = names[rng.below(names.len())];
            text.replacen("a.fseq", n, 1).into_bytes()
        }
        4 => {
            // A hash, an id or a number swapped for a value at an edge.
            let (from, to) = match rng.below(4) {
                0 => (hash.to_string(), "0".repeat(63)),
                1 => (hash.to_string(), hash.to_uppercase()),
                2 => ("12".into(), "18446744073709551616".into()),
                _ => ("\"fuzz\"".into(), "null".into()),
            };
            text.replacen(&from, &to, 1).into_bytes()
        }
        _ => {
            let mut b = good.to_vec();
            b.truncate(rng.below(b.len() + 1));
            b
        }
    }
}

#[test]
fn a_cut_or_mutated_manifest_gives_an_error_not_a_panic() {
    let (_d, s, id, dir) = store_with_a_show();
    let path = dir.join("manifest.json");
    let good = fs::read(&path).expect("manifest");
    let hash = s.manifest(&id).expect("good manifest").files["a.fseq"].to_string();
    // Every write cut short: all refused (only trailing white space may go).
    for n in 0..good.len() {
        fs::write(&path, &good[..n]).expect("write");
        let input = format!("the manifest cut to {n} of {} bytes", good.len());
        read_back(&s, &id, &dir, &input, n % 4 == 0);
        if !good[n..].iter().all(u8::is_ascii_whitespace) {
            assert!(s.manifest(&id).is_err(), "accepted {input}");
        }
    }
    let mut rng = Rng(0x3a11_f357);
    for k in 0..3_000 {
        let mut b = good.clone();
        for _ in 0..=rng.below(2) {
            b = mutate_json(&mut rng, &b, &hash);
        }
        fs::write(&path, &b).expect("write");
        let input = format!("{:?}", String::from_utf8_lossy(&b));
        read_back(&s, &id, &dir, &input, k % 4 == 0);
    }
    fs::write(&path, &good).expect("write");
    s.verify_show(&id).expect("restored");
}

#[test]
fn a_corrupt_active_link_gives_an_error_not_a_panic() {
    let (d, s, id, dir) = store_with_a_show();
    let active = d.path().join("active");
    let targets = [
        format!("shows/{id}"),
        format!("shows/{id}/"),
        format!("shows/{id}/.."),
        format!("shows/./{id}"),
        format!("/shows/{id}"),
        format!("{}", dir.display()),
        "shows/0123456789abcdef".into(),
        "shows/0123456789ABCDEF".into(),
        "shows/../../etc".into(),
        "shows".into(),
        "shows/".into(),
        "".into(),
        ".".into(),
        "active".into(),
        "/".into(),
        "shows/0123456789abcdef0".into(),
        "shows/\u{fffd}".into(),
    ];
    let mut rng = Rng(0xac71_7e00);
    for k in 0..1_500 {
        let mut t = targets[k % targets.len()].clone();
        if k >= targets.len() {
            // One character replaced or dropped.
            let mut cs: Vec<char> = t.chars().collect();
            if !cs.is_empty() {
                let i = rng.below(cs.len());
                let c = ['/', '.', '0', 'f', 'g', 'A', '\n', ' ', '\\'][rng.below(9)];
                if rng.below(2) == 0 {
                    cs[i] = c;
                } else {
                    cs.remove(i);
                }
            }
            t = cs.into_iter().collect();
        }
        let _ = fs::remove_file(&active);
        if t.is_empty() {
            // symlink(2) refuses an empty target; a regular file stands in for a link
            // the power cut left as something else.
            fs::write(&active, b"").expect("file");
        } else {
            std::os::unix::fs::symlink(&t, &active).expect("symlink");
        }
        let input = format!("active -> {t:?}");
        for r in [
            std::panic::catch_unwind(|| s.active_id().map(|_| ())),
            std::panic::catch_unwind(|| s.active().map(|_| ())),
        ] {
            match r {
                Err(_) => panic!("reading the active show panicked on {input}"),
                Ok(Err(e)) => assert!(!e.to_string().is_empty(), "{input}"),
                Ok(Ok(())) => {}
            }
        }
        if let Ok(Some(got)) = s.active_id() {
            assert!(
                got.as_str().len() == 16 && s.show_dir(&got).starts_with(d.path()),
                "{input} read as {got}"
            );
        }
        // gc only runs when the link reads as our show: anything else must make it stop
        // (an error) or keep every show, never remove the one that plays.
        if matches!(s.active_id(), Ok(Some(ref g)) if *g == id) || s.active_id().is_err() {
            let _ = s.gc(&[]);
            assert!(
                dir.join("manifest.json").is_file(),
                "gc removed the show: {input}"
            );
        }
    }
}

#[test]
fn open_cleans_dead_leftovers_and_nothing_else() {
    let (d, _s, id, dir) = store_with_a_show();
    let staging = d.path().join("staging");
    let outside = d.path().join("outside");
    fs::create_dir(&outside).expect("dir");
    fs::write(outside.join("keep"), b"keep").expect("file");
    let names = [
        "0.x.tmp",
        "1.0.show.tmp",
        "-1.0.gc.tmp",
        "999999999.0.active.tmp",
        "4294967296.0.show.tmp",
        ".tmp",
        "..tmp",
        "a.tmp",
        "tmp",
        "x.tmp.part",
        "key.part",
        "0123456789abcdef.part",
    ];
    let mut rng = Rng(0x57a9_1e55);
    for round in 0..1_500 {
        let mut made = Vec::new();
        for _ in 0..=rng.below(3) {
            let mut n = names[rng.below(names.len())].to_string();
            if rng.below(3) == 0 {
                n.insert(0, ['1', '-', '.', 'z', ' '][rng.below(5)]);
            }
            let p = staging.join(&n);
            if p.exists() || p.is_symlink() {
                continue;
            }
            match rng.below(3) {
                0 => fs::write(&p, b"half").expect("file"),
                1 => {
                    fs::create_dir(&p).expect("dir");
                    fs::write(p.join("inner"), b"x").expect("file");
                }
                // A leftover that is a link to something outside staging: the link may
                // go, what it points at must stay.
                _ => std::os::unix::fs::symlink(&outside, &p).expect("link"),
            }
            made.push(n);
        }
        let input = format!("round {round}: staging held {made:?}");
        match std::panic::catch_unwind(|| Store::open(d.path())) {
            Err(_) => panic!("Store::open panicked: {input}"),
            Ok(Err(e)) => panic!("Store::open refused: {e}: {input}"),
            Ok(Ok(_)) => {}
        }
        for n in &made {
            if n.ends_with(".part") {
                assert!(
                    staging.join(n).exists(),
                    "a resumable {n} was removed: {input}"
                );
            }
        }
        assert!(
            outside.join("keep").is_file(),
            "{input} removed a file outside"
        );
        assert!(
            dir.join("manifest.json").is_file(),
            "{input} removed the show"
        );
        // Start each round clean, so the names recur.
        for e in fs::read_dir(&staging).expect("staging").flatten() {
            let p = e.path();
            if p.is_dir() && !p.is_symlink() {
                fs::remove_dir_all(&p).expect("rm");
            } else {
                fs::remove_file(&p).expect("rm");
            }
        }
    }
    let _ = id;
}

/// `store/checked` (the record of stored files already hashed) is a cache anyone in the
/// data partition's group can write: whatever it holds, `open` never panics, never
/// refuses, and never quarantines a stored file whose content is its name.
#[test]
fn a_junk_record_of_hashed_files_never_costs_a_good_file() {
    let (d, s, id, _dir) = store_with_a_show();
    let rec = d.path().join("store/checked");
    let good = fs::read_to_string(&rec).unwrap_or_default();
    let hashes: Vec<String> = fs::read_dir(d.path().join("store/sha256"))
        .expect("dir")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    let mut rng = Rng(0xc4ec_4ed0);
    let words = [
        "0",
        "1",
        "-1",
        "18446744073709551615",
        "x",
        "",
        " ",
        "\n",
        "\0",
    ];
    for round in 0..400 {
        let mut text = if rng.below(2) == 0 {
            good.clone()
        } else {
            String::new()
        };
        for _ in 0..rng.below(6) {
            let h = match rng.below(3) {
                0 => hashes[rng.below(hashes.len())].clone(),
                1 => "f".repeat(64),
                _ => words[rng.below(words.len())].to_string(),
            };
            let mut line = h;
            for _ in 0..rng.below(5) {
                line.push(' ');
                line.push_str(words[rng.below(words.len())]);
            }
            text.push_str(&line);
            text.push('\n');
        }
        if rng.below(4) == 0 && !text.is_empty() {
            text.truncate(rng.below(text.len()));
        }
        fs::write(&rec, &text).expect("write");
        let input = format!("round {round}: store/checked = {text:?}");
        match std::panic::catch_unwind(|| Store::open(d.path())) {
            Err(_) => panic!("Store::open panicked: {input}"),
            Ok(Err(e)) => panic!("Store::open refused: {e}: {input}"),
            Ok(Ok(_)) => {}
        }
        s.verify_show(&id)
            .unwrap_or_else(|e| panic!("{e}: {input}"));
        assert!(
            pfx_store::quarantined(d.path()).expect("q").is_empty(),
            "a good file was quarantined: {input}"
        );
    }
}
