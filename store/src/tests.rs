//! Real files in temporary directories. The crash tests stop the store at each durable
//! step in turn (the step fails as a power cut there would: nothing after it happens),
//! then open the store again and check that the active show is the old or the new one,
//! whole.

use super::*;

fn root() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    fs::write(d.path().join(MARKER), b"").unwrap();
    d
}

fn files(pairs: &[(&str, Hash)]) -> BTreeMap<String, Hash> {
    pairs.iter().map(|(n, h)| (n.to_string(), *h)).collect()
}

impl Store {
    fn crash_at_step(&self, n: u64) {
        self.steps.store(0, Ordering::SeqCst);
        self.crash_at.store(n, Ordering::SeqCst);
    }
}

/// Sets a file's or directory's modification time `by` into the past.
fn age(p: &Path, by: Duration) {
    let f = File::open(p).unwrap();
    f.set_modified(std::time::SystemTime::now() - by).unwrap();
}

/// Stages `bytes` under its hash in chunks, as a transfer would.
fn send(s: &Store, bytes: &[u8]) -> Result<Hash> {
    let h = Hash::of(bytes);
    let mut st = s.begin(&h.to_string(), bytes.len() as u64)?;
    let from = st.offset() as usize;
    for c in bytes[from..].chunks(1000) {
        s.write(&mut st, c)?;
    }
    s.finish(st, Some(&h))
}

#[test]
fn open_needs_the_marker() {
    let d = tempfile::tempdir().unwrap();
    let e = Store::open(d.path()).unwrap_err();
    assert!(
        e.to_string()
            .contains("the data partition is not mounted at"),
        "{e}"
    );
    let e = active_show_yaml(d.path()).unwrap_err();
    assert!(matches!(e, StoreError::NotMounted { .. }), "{e}");
    fs::write(d.path().join(MARKER), b"").unwrap();
    Store::open(d.path()).unwrap();
    let e = active_show_yaml(d.path()).unwrap_err();
    assert!(matches!(e, StoreError::NoActive { .. }), "{e}");
}

#[test]
fn make_activate_and_read_back() {
    let d = root();
    let s = Store::open(d.path()).unwrap();
    let a = send(&s, b"sequence a").unwrap();
    let b = send(&s, b"sequence b").unwrap();
    assert!(s.has(&a) && s.has(&b));
    let m = files(&[("a.fseq", a), ("songs/b.fseq", b)]);
    let id = s.make_show("evening", b"interface: lo\n", &m).unwrap();
    assert_eq!(
        id,
        s.make_show("evening", b"interface: lo\n", &m).unwrap(),
        "same content, same show"
    );
    assert_eq!(s.active().unwrap(), None);
    s.activate(&id).unwrap();
    let act = s.active().unwrap().unwrap();
    assert_eq!((act.id.clone(), act.name.as_str()), (id.clone(), "evening"));
    assert_eq!(act.files, m);
    assert!(act.since_unix_ms > 0);
    assert_eq!(
        fs::read(act.show_yaml.parent().unwrap().join("songs/b.fseq")).unwrap(),
        b"sequence b"
    );
    assert_eq!(active_show_yaml(d.path()).unwrap().id, id);
    s.verify_show(&id).unwrap();
}

#[test]
fn a_show_needs_its_files_and_safe_names() {
    let d = root();
    let s = Store::open(d.path()).unwrap();
    let a = send(&s, b"x").unwrap();
    let e = s
        .make_show("x", b"", &files(&[("a.fseq", Hash::of(b"other"))]))
        .unwrap_err();
    assert!(matches!(e, StoreError::MissingBlob { .. }), "{e}");
    for bad in [
        "../a.fseq",
        "/etc/passwd",
        "a/../../b",
        ".hidden",
        "a//b",
        "show.yaml",
        "manifest.json",
        "a\0b",
        "",
    ] {
        assert!(check_name(bad).is_err(), "{bad:?}");
        assert!(
            s.make_show("x", b"", &files(&[(bad, a)])).is_err(),
            "{bad:?}"
        );
    }
    for good in ["a.fseq", "Songs/My Song (2).fseq", "profiles/p.yaml"] {
        check_name(good).unwrap();
    }
    assert!(
        s.make_show("x", b"", &files(&[("a", a), ("a/b", a)]))
            .is_err()
    );
    assert!(s.make_show("", b"", &files(&[])).is_err());
    assert!(matches!(s.begin("../x", 1), Err(StoreError::BadKey(_))));
}

#[test]
fn an_interrupted_transfer_resumes_where_it_stopped() {
    let d = root();
    let s = Store::open(d.path()).unwrap();
    let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
    let h = Hash::of(&data);
    let mut st = s.begin(&h.to_string(), data.len() as u64).unwrap();
    s.write(&mut st, &data[..40_000]).unwrap();
    s.sync(&mut st).unwrap();
    drop(st); // the connection went away
    let miss = s.missing(&[(h, data.len() as u64)]).unwrap();
    assert_eq!(
        miss,
        vec![Missing {
            hash: h,
            size: 100_000,
            offset: 40_000
        }]
    );
    let e = s.finish(s.begin(&h.to_string(), 100_000).unwrap(), Some(&h));
    assert!(matches!(
        e,
        Err(StoreError::Incomplete { have: 40_000, .. })
    ));
    let mut st = s.begin(&h.to_string(), data.len() as u64).unwrap();
    assert_eq!(st.offset(), 40_000);
    s.write(&mut st, &data[40_000..]).unwrap();
    assert!(s.write(&mut st, b"one too many").is_err());
    assert_eq!(s.finish(st, Some(&h)).unwrap(), h);
    assert!(s.missing(&[(h, 100_000)]).unwrap().is_empty());
    assert_eq!(hash_file(&s.blob_path(&h)).unwrap(), h);
}

#[test]
fn a_resumed_file_is_hashed_whole_so_a_bad_prefix_is_caught() {
    let d = root();
    let s = Store::open(d.path()).unwrap();
    let data = vec![5u8; 10_000];
    let h = Hash::of(&data);
    let mut st = s.begin(&h.to_string(), 10_000).unwrap();
    s.write(&mut st, &data[..4000]).unwrap();
    drop(st);
    // The staged prefix goes bad while the transfer is interrupted.
    let part = d.path().join("staging").join(format!("{h}.part"));
    let mut bytes = fs::read(&part).unwrap();
    bytes[10] ^= 0xff;
    fs::write(&part, bytes).unwrap();
    let mut st = s.begin(&h.to_string(), 10_000).unwrap();
    s.write(&mut st, &data[4000..]).unwrap();
    let e = s.finish(st, Some(&h)).unwrap_err();
    assert!(matches!(e, StoreError::HashMismatch { .. }), "{e}");
    assert!(!s.has(&h));
}

#[test]
fn a_wrong_hash_is_dropped_not_stored() {
    let d = root();
    let s = Store::open(d.path()).unwrap();
    let want = Hash::of(b"right");
    let mut st = s.begin(&want.to_string(), 5).unwrap();
    s.write(&mut st, b"wrong").unwrap();
    let e = s.finish(st, Some(&want)).unwrap_err();
    assert!(matches!(e, StoreError::HashMismatch { .. }), "{e}");
    assert!(!s.has(&want) && !s.has(&Hash::of(b"wrong")));
    assert_eq!(s.staged_len(&want.to_string()).unwrap(), 0);
}

/// Power cut at every durable step of a whole push (two sequences, the show, the
/// activation): after each, the store opens with the old show or the new one active and
/// whole, and the push completes when it is run again.
#[test]
fn a_crash_at_any_step_leaves_the_old_show_or_the_new_one_whole() {
    let new_a: Vec<u8> = vec![7u8; 5000];
    let new_b: Vec<u8> = b"second sequence".repeat(100);
    let mut saw_old = 0;
    let mut saw_new = 0;
    for n in 1.. {
        let d = root();
        let s = Store::open(d.path()).unwrap();
        let old = send(&s, b"old sequence").unwrap();
        let old_id = s
            .make_show("old", b"old: yes\n", &files(&[("a.fseq", old)]))
            .unwrap();
        s.activate(&old_id).unwrap();

        let push = |s: &Store| -> Result<ShowId> {
            let a = send(s, &new_a)?;
            let b = send(s, &new_b)?;
            let id = s.make_show(
                "new",
                b"new: yes\n",
                &files(&[("a.fseq", a), ("x/b.fseq", b)]),
            )?;
            s.activate(&id)?;
            Ok(id)
        };
        s.crash_at_step(n);
        let crashed = match push(&s) {
            Err(StoreError::Crash(_)) => true,
            Err(e) => panic!("step {n}: {e}"),
            Ok(_) => false,
        };
        drop(s);
        let s = Store::open(d.path()).unwrap();
        let act = s.active().unwrap().expect("an active show");
        s.verify_show(&act.id).unwrap();
        match act.name.as_str() {
            "old" => saw_old += 1,
            "new" => saw_new += 1,
            other => panic!("{other}"),
        }
        assert!(
            fs::read_dir(d.path().join("staging"))
                .unwrap()
                .flatten()
                .all(|e| !e.file_name().to_string_lossy().ends_with(".tmp")),
            "leftover temporaries after reopening"
        );
        // Run the push again: it completes from whatever the crash left.
        let id = push(&s).unwrap();
        assert_eq!(s.active().unwrap().unwrap().id, id);
        s.verify_show(&id).unwrap();
        if !crashed {
            assert!(n > 10, "only {n} steps: the failpoints are not reached");
            break;
        }
    }
    assert!(saw_old > 5 && saw_new >= 1, "old {saw_old} new {saw_new}");
}

/// Found by tests/state_fuzz.rs: a manifest edited to name `/etc/passwd` (or `../x`,
/// `.hidden`) was accepted, and `verify_show` read and hashed that file outside the show.
#[test]
fn a_manifest_naming_a_file_outside_the_show_is_corrupt() {
    let d = root();
    let s = Store::open(d.path()).unwrap().with_reserve(0);
    let h = s.put_bytes("a", b"one").unwrap();
    let id = s
        .make_show("s", b"x: 1\n", &files(&[("a.fseq", h)]))
        .unwrap();
    let p = s.show_dir(&id).join("manifest.json");
    let good = fs::read_to_string(&p).unwrap();
    for bad in ["/etc/passwd", "../../etc/passwd", ".hidden", "show.yaml"] {
        fs::write(&p, good.replace("\"a.fseq\"", &format!("{bad:?}"))).unwrap();
        let e = s.manifest(&id).unwrap_err().to_string();
        assert!(e.contains("names the file"), "{bad}: {e}");
        assert!(s.verify_show(&id).is_err(), "{bad}");
    }
    fs::write(&p, good).unwrap();
    s.verify_show(&id).unwrap();
}

#[test]
fn gc_keeps_the_active_show_and_its_files() {
    let d = root();
    let s = Store::open(d.path()).unwrap();
    let a = send(&s, b"a").unwrap();
    let b = send(&s, b"b").unwrap();
    let one = s.make_show("one", b"1", &files(&[("a.fseq", a)])).unwrap();
    let two = s.make_show("two", b"2", &files(&[("b.fseq", b)])).unwrap();
    s.activate(&two).unwrap();
    // Young shows are kept (a push may be about to activate one): make `one` old.
    age(&s.show_dir(&one), SHOW_GRACE * 2);
    let r = s.gc(&[]).unwrap();
    assert_eq!(r.shows, 1);
    assert!(s.manifest(&one).is_err());
    s.verify_show(&two).unwrap();
    // `a` is unreferenced but young: kept for a push that may be about to name it.
    assert!(s.has(&a) && s.has(&b));
}

#[test]
fn a_transfer_larger_than_the_room_above_the_reserve_is_refused_before_writing() {
    let d = root();
    let s = Store::open(d.path()).unwrap().with_reserve(u64::MAX / 2);
    let e = s.begin(&Hash::of(b"x").to_string(), 10).unwrap_err();
    assert!(matches!(e, StoreError::NoRoom { .. }), "{e}");
    assert!(e.to_string().contains("remove old shows"), "{e}");
    assert_eq!(s.staged_len(&Hash::of(b"x").to_string()).unwrap(), 0);
}

/// On a small real file system (tmpfs): a big upload stops at the reserve and the
/// active show stays whole.
#[test]
fn the_store_never_fills_the_partition() {
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: needs root (mounts a 16 MiB tmpfs)");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let mnt = d.path().join("data");
    fs::create_dir(&mnt).unwrap();
    let ok = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=16m", "pfx-store-test"])
        .arg(&mnt)
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    assert!(ok, "mount tmpfs");
    let result = std::panic::catch_unwind(|| {
        fs::write(mnt.join(MARKER), b"").unwrap();
        let s = Store::open(&mnt).unwrap().with_reserve(4 << 20);
        let old = send(&s, &vec![1u8; 2 << 20]).unwrap();
        let id = s
            .make_show("old", b"x", &files(&[("a.fseq", old)]))
            .unwrap();
        s.activate(&id).unwrap();
        // 20 MiB cannot fit at all: refused up front.
        assert!(matches!(
            s.begin("big", 20 << 20),
            Err(StoreError::NoRoom { .. })
        ));
        // Claims 9 MiB (fits when asked) but the partition fills up meanwhile (another
        // writer takes 4 MiB): the write stops at the reserve.
        let mut st = s.begin("big", 9 << 20).unwrap();
        fs::write(mnt.join("other"), vec![0u8; 4 << 20]).unwrap();
        let chunk = vec![2u8; 1 << 20];
        let mut err = None;
        for _ in 0..9 {
            if let Err(e) = s.write(&mut st, &chunk) {
                err = Some(e);
                break;
            }
        }
        assert!(matches!(err, Some(StoreError::NoRoom { .. })), "{err:?}");
        let (avail, _) = s.statvfs().unwrap();
        assert!(avail >= 4 << 20, "only {avail} bytes left");
        s.verify_show(&id).unwrap();
        assert_eq!(s.active().unwrap().unwrap().id, id);
    });
    let _ = Command::new("umount").arg(&mnt).status();
    if let Err(p) = result {
        std::panic::resume_unwind(p);
    }
}

/// The real player cannot be a dependency of the store, so a shell script stands in for
/// it here; the fleet suite runs the real one.
#[test]
fn check_show_reports_the_refusal_with_a_mock_player() {
    let d = root();
    let s = Store::open(d.path()).unwrap();
    let id = s.make_show("x", b"fps: 1000\n", &files(&[])).unwrap();
    let player = d.path().join("player.sh");
    fs::write(
        &player,
        "#!/bin/sh\ngrep -q 'fps: 1000' \"$4\" && { echo \"$4: fps: 1000 is outside 1..=240\" >&2; exit 2; }\necho ok\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&player, fs::Permissions::from_mode(0o755)).unwrap();
    let e = s.check_show(&id, &player).unwrap_err();
    assert!(e.to_string().contains("outside 1..=240"), "{e}");
    let good = s.make_show("y", b"fps: 60\n", &files(&[])).unwrap();
    assert_eq!(s.check_show(&good, &player).unwrap(), "ok");
}

#[test]
fn the_default_reserve_is_five_percent_within_its_bounds() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join(crate::MARKER), b"").unwrap();
    let s = crate::Store::open(d.path()).unwrap();
    let r = s.reserve().unwrap();
    assert!(
        (crate::MIN_RESERVE..=crate::MAX_DEFAULT_RESERVE).contains(&r),
        "{r}"
    );
    assert_eq!(s.with_reserve(5).reserve().unwrap(), 5);
}

/// Issue 25: two `show put`s of the same new file at once appended to one `.part` and the
/// store kept both copies under the file's hash. Now the second writer is refused while
/// the first holds the file, and is let in once the first is done.
#[test]
fn a_staged_file_has_one_writer_at_a_time() {
    let d = root();
    let s = Store::open(d.path()).unwrap();
    let data = vec![9u8; 3000];
    let h = Hash::of(&data);
    let key = h.to_string();
    let mut first = s.resume(&key, 3000, 0).unwrap();
    s.write(&mut first, &data[..1000]).unwrap();
    for e in [
        s.resume(&key, 3000, 0).unwrap_err(),
        s.resume(&key, 3000, 1000).unwrap_err(),
        s.begin(&key, 3000).unwrap_err(),
    ] {
        assert!(matches!(e, StoreError::Busy { .. }), "{e}");
        assert!(e.to_string().contains("another transfer"), "{e}");
    }
    // A second store handle (another process's) is refused the same way.
    let other = Store::open(d.path()).unwrap();
    assert!(matches!(
        other.resume(&key, 3000, 0),
        Err(StoreError::Busy { .. })
    ));
    s.sync(&mut first).unwrap();
    drop(first);
    let e = other.resume(&key, 3000, 0).unwrap_err();
    assert!(
        matches!(
            e,
            StoreError::WrongOffset {
                have: 1000,
                offset: 0,
                ..
            }
        ),
        "{e}"
    );
    let mut second = other.resume(&key, 3000, 1000).unwrap();
    other.write(&mut second, &data[1000..]).unwrap();
    assert_eq!(other.finish(second, Some(&h)).unwrap(), h);
    assert_eq!(hash_file(&s.blob_path(&h)).unwrap(), h);
    assert_eq!(fs::metadata(s.blob_path(&h)).unwrap().len(), 3000);
}

/// The hash that decides is the whole file's on disk: bytes another writer slipped in
/// (one that ignores the lock) make the file fail, though this writer's own bytes hash
/// right.
#[test]
fn a_file_is_stored_only_when_the_whole_file_on_disk_has_its_hash() {
    let d = root();
    let s = Store::open(d.path()).unwrap();
    let data = b"exactly these bytes".to_vec();
    let h = Hash::of(&data);
    let mut st = s.resume(&h.to_string(), data.len() as u64, 0).unwrap();
    s.write(&mut st, &data[..5]).unwrap();
    // Another writer appends past the lock; then this one writes the rest.
    let part = d.path().join("staging").join(format!("{h}.part"));
    let mut sneaky = OpenOptions::new().append(true).open(&part).unwrap();
    sneaky.write_all(b"XX").unwrap();
    drop(sneaky);
    s.write(&mut st, &data[5..data.len() - 2]).unwrap();
    let e = s.finish(st, Some(&h)).unwrap_err();
    assert!(matches!(e, StoreError::HashMismatch { .. }), "{e}");
    assert!(!s.has(&h), "stored a file whose content is not its name");
    assert!(!part.exists());
}

/// Issue 25: a put refused for its OFFSET with nothing staged left an empty `.part`.
#[test]
fn a_resume_refused_for_its_offset_makes_no_file() {
    let d = root();
    let s = Store::open(d.path()).unwrap();
    let h = Hash::of(b"abc").to_string();
    let e = s.resume(&h, 3, 2).unwrap_err();
    assert!(
        matches!(
            e,
            StoreError::WrongOffset {
                have: 0,
                offset: 2,
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("ask `show missing` again"), "{e}");
    assert_eq!(fs::read_dir(d.path().join("staging")).unwrap().count(), 0);
    // Refused for room: no file either.
    let tight = Store::open(d.path()).unwrap().with_reserve(u64::MAX / 2);
    assert!(matches!(
        tight.resume(&h, 3, 0),
        Err(StoreError::NoRoom { .. })
    ));
    assert_eq!(fs::read_dir(d.path().join("staging")).unwrap().count(), 0);
}

/// A stored file whose content does not match its name (as a double append
/// left one) is found by `open`, quarantined, asked for again, and the show that held it
/// is repaired by the next push of the file.
#[test]
fn open_quarantines_a_stored_file_that_does_not_match_its_name_and_a_push_repairs_the_show() {
    let d = root();
    let s = Store::open(d.path()).unwrap();
    let good = b"the right sequence".to_vec();
    let h = send(&s, &good).unwrap();
    let id = s
        .make_show("x", b"x: 1\n", &files(&[("a.fseq", h)]))
        .unwrap();
    s.activate(&id).unwrap();
    // What the race left: both copies under the one name (the same inode as the show's).
    let blob = s.blob_path(&h);
    OpenOptions::new()
        .append(true)
        .open(&blob)
        .unwrap()
        .write_all(&good)
        .unwrap();
    assert!(quarantined(d.path()).unwrap().is_empty());
    let s = Store::open(d.path()).unwrap();
    assert!(!s.has(&h), "the bad file is still served under its name");
    let q = quarantined(d.path()).unwrap();
    assert_eq!(q.len(), 1, "{q:?}");
    assert_eq!(q[0].hash, h.to_string());
    assert!(q[0].why.contains("hashes to"), "{q:?}");
    assert_eq!(fs::read(&q[0].path).unwrap().len(), 2 * good.len());
    assert_eq!(s.missing(&[(h, good.len() as u64)]).unwrap().len(), 1);
    // The show still links the bad file: verify says so, and no activation may claim it.
    let e = s.verify_show(&id).unwrap_err();
    assert!(e.to_string().contains("push the show again"), "{e}");
    // The push sends it again and makes the show again: the show is whole.
    send(&s, &good).unwrap();
    assert_eq!(
        s.make_show("x", b"x: 1\n", &files(&[("a.fseq", h)]))
            .unwrap(),
        id
    );
    s.verify_show(&id).unwrap();
    assert_eq!(s.manifest(&id).unwrap().sizes["a.fseq"], good.len() as u64);
    // Another open finds nothing more.
    Store::open(d.path()).unwrap();
    assert_eq!(quarantined(d.path()).unwrap().len(), 1);
}

/// `verify_show` finds a bad stored file that `open` does not look at again (changed in
/// place with its size and time kept: the record says it was hashed), and quarantines it;
/// `verify` reads every stored file.
#[test]
fn verify_reads_everything_and_quarantines_what_is_bad() {
    let d = root();
    let s = Store::open(d.path()).unwrap();
    let a = send(&s, b"aaaa").unwrap();
    let b = send(&s, b"bbbb").unwrap();
    let id = s.make_show("x", b"x", &files(&[("a.fseq", a)])).unwrap();
    let rot = |h: &Hash| {
        let p = s.blob_path(h);
        let t = fs::metadata(&p).unwrap().modified().unwrap();
        let f = OpenOptions::new().write(true).open(&p).unwrap();
        f.write_at(b"Z", 0).unwrap();
        f.set_modified(t).unwrap();
    };
    rot(&a);
    rot(&b);
    let s = Store::open(d.path()).unwrap();
    assert!(
        s.has(&a) && s.has(&b),
        "open re-hashed a file its record covers"
    );
    let e = s.verify_show(&id).unwrap_err();
    assert!(matches!(e, StoreError::Quarantined { .. }), "{e}");
    assert!(!s.has(&a));
    let r = s.verify().unwrap();
    assert_eq!((r.files, r.quarantined.len()), (1, 1), "{r:?}");
    assert!(!s.has(&b));
    assert_eq!(quarantined(d.path()).unwrap().len(), 2);
    // A stored "file" that is a link (to anything) is no stored file.
    let c = Hash::of(b"c");
    std::os::unix::fs::symlink("/etc/hostname", s.blob_path(&c)).unwrap();
    let s = Store::open(d.path()).unwrap();
    assert!(!s.has(&c));
    assert_eq!(quarantined(d.path()).unwrap().len(), 3);
}

#[test]
fn the_record_of_hashed_files_reads_back_and_skips_junk() {
    let mut m = BTreeMap::new();
    m.insert(
        Hash::of(b"1"),
        Seen {
            ino: 7,
            size: 9,
            mtime_ns: -5,
        },
    );
    let text = render_checked(&m);
    assert_eq!(parse_checked(&text), m);
    let junk = format!(
        "{text}x y z\n\n{} 1 2\n{} a 2 3\n\0",
        Hash::of(b"2"),
        Hash::of(b"3")
    );
    assert_eq!(parse_checked(&junk), m);
}

/// Issue 25: a push killed after the switch and resumed removed the show before it (the
/// resumed activation took the new show for "the one before"). `previous` records it.
#[test]
fn a_resumed_activation_keeps_the_show_before_it() {
    let d = root();
    let s = Store::open(d.path()).unwrap();
    let a = send(&s, b"a").unwrap();
    let b = send(&s, b"b").unwrap();
    let old = s.make_show("old", b"1", &files(&[("a.fseq", a)])).unwrap();
    let new = s.make_show("new", b"2", &files(&[("b.fseq", b)])).unwrap();
    s.activate(&old).unwrap();
    assert_eq!(s.previous_id().unwrap(), None);
    s.activate(&new).unwrap();
    assert_eq!(s.previous_id().unwrap(), Some(old.clone()));
    // The resumed push activates the same show again, then cleans up.
    s.activate(&new).unwrap();
    assert_eq!(s.previous_id().unwrap(), Some(old.clone()));
    age(&s.show_dir(&old), SHOW_GRACE * 2);
    age(&s.show_dir(&new), SHOW_GRACE * 2);
    assert_eq!(s.gc(&[]).unwrap().shows, 0);
    s.verify_show(&old).unwrap();
    // A third show: the oldest goes.
    let c = s
        .make_show("third", b"3", &files(&[("a.fseq", a)]))
        .unwrap();
    s.activate(&c).unwrap();
    assert_eq!(s.gc(&[]).unwrap().shows, 1);
    assert!(s.manifest(&old).is_err());
    s.verify_show(&new).unwrap();
    // `previous` unreadable: every show is kept.
    fs::remove_file(d.path().join("previous")).unwrap();
    fs::write(d.path().join("previous"), b"junk").unwrap();
    age(&s.show_dir(&new), SHOW_GRACE * 2);
    assert_eq!(s.gc(&[]).unwrap().shows, 0);
}

/// Found by 71-store.sh's two pushes at once: one push's clean-up removed the (old) show
/// the other was about to activate, whose switch then left `active` naming no show. A
/// show made again is young again, and `activate` looks for the show under the lock
/// that clean-ups take.
#[test]
fn a_show_made_again_is_kept_by_another_pushs_clean_up() {
    let d = root();
    let s = Store::open(d.path()).unwrap();
    let a = send(&s, b"a").unwrap();
    let b = send(&s, b"b").unwrap();
    let x = s.make_show("x", b"1", &files(&[("a.fseq", a)])).unwrap();
    let y = s.make_show("y", b"2", &files(&[("b.fseq", b)])).unwrap();
    s.activate(&y).unwrap();
    age(&s.show_dir(&x), SHOW_GRACE * 2);
    // The second push makes x again (it exists), then the first push cleans up.
    assert_eq!(s.make_show("x", b"1", &files(&[("a.fseq", a)])).unwrap(), x);
    assert_eq!(s.gc(&[]).unwrap().shows, 0);
    s.activate(&x).unwrap();
    s.verify_show(&s.active().unwrap().unwrap().id).unwrap();
    // A show that is gone is refused, and `active` stays on a show that exists.
    age(&s.show_dir(&y), SHOW_GRACE * 2);
    fs::remove_file(d.path().join("previous")).unwrap();
    assert_eq!(s.gc(&[]).unwrap().shows, 1);
    assert!(matches!(s.activate(&y), Err(StoreError::NoSuchShow(_))));
    assert_eq!(s.active_id().unwrap(), Some(x));
}

/// The rate cap holds: 256 KiB at 1 MiB/s cannot take less than a quarter second, and no
/// cap (None, or 0) never sleeps. A lower bound only: sleeping is the guarantee, a busy
/// host can only make it slower.
#[test]
fn byte_rate_paces_io_to_its_cap_and_none_is_unpaced() {
    let t = std::time::Instant::now();
    let mut r = ByteRate::new(Some(1 << 20));
    for _ in 0..4 {
        r.account(64 << 10);
    }
    assert!(
        t.elapsed() >= std::time::Duration::from_millis(249),
        "{:?}",
        t.elapsed()
    );
    for cap in [None, Some(0)] {
        let t = std::time::Instant::now();
        let mut r = ByteRate::new(cap);
        r.account(1 << 30);
        assert!(
            t.elapsed() < std::time::Duration::from_secs(1),
            "{cap:?}: {:?}",
            t.elapsed()
        );
    }
}
