//! The unit side of A/B updates against the RAUC TEST DOUBLE (`tests/rauc_double.py`;
//! the real RAUC is proved by the VM suite): `update put` (resumable, hash-checked),
//! `update install` (refusals before a byte is written, the force file), `update switch`,
//! `update status`, and `pfx-agent update health-commit` against real local sockets: a
//! real HTTP server for `/profile` and `/health`, a real TCP listener greeting as sshd,
//! and the real `pfx-agent status` binary.

use pfx_api::update::{HealthAction, SwitchMode};
use pfx_fleet::dispatch::AgentConfig;
use pfx_fleet::health::{self, HealthOpts};
use pfx_fleet::updateagent::{self, SwitchWhen, UpdateOpts};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::Duration;

const DOUBLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/rauc_double.py");

struct Unit {
    _dir: tempfile::TempDir,
    root: PathBuf,
    state: PathBuf,
    o: UpdateOpts,
    cfg: AgentConfig,
    cfg_path: PathBuf,
}

fn sh(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn double(state: &Path, args: &[&str]) {
    let st = std::process::Command::new("python3")
        .arg(DOUBLE)
        .arg("--state")
        .arg(state)
        .args(args)
        .status()
        .unwrap();
    assert!(st.success(), "rauc double {args:?}");
}

fn state(u: &Unit) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(u.state.join("state.json")).unwrap()).unwrap()
}

/// A unit: a data partition (its marker), the double's state (slot A booted at 1.0.0),
/// a wrapper `rauc` and `reboot`, a slot-carry stand-in that logs its calls, a mock NIC.
fn unit(extra: &str) -> Unit {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let root = d.join("data");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join(".pfx-data"), "").unwrap();
    let state = d.join("rauc");
    double(&state, &["init", "pfx-vm-arm64", "1.0.0"]);
    double(
        &state,
        &["set", "force_file", d.join("force").to_str().unwrap()],
    );
    double(
        &state,
        &["set", "cmdline", d.join("cmdline").to_str().unwrap()],
    );
    std::fs::write(d.join("cmdline"), "rauc.slot=A\n").unwrap();
    sh(
        &d.join("rauc-wrapper"),
        &format!(
            "#!/bin/sh\nexec python3 {DOUBLE} --state {} \"$@\"\n",
            state.display()
        ),
    );
    sh(
        &d.join("reboot"),
        &format!(
            "#!/bin/sh\nexec python3 {DOUBLE} --state {} reboot\n",
            state.display()
        ),
    );
    sh(
        &d.join("carry"),
        &format!("#!/bin/sh\necho \"$@\" >> {}/carry.log\n", d.display()),
    );
    std::fs::create_dir_all(d.join("nic")).unwrap();
    std::fs::write(
        d.join("nic/eth0.json"),
        r#"{"pause":{"autoneg":false,"rx":false,"tx":false},"pause_rx_frames":0}"#,
    )
    .unwrap();
    std::fs::create_dir_all(d.join("lower")).unwrap();
    let text = format!(
        "unit_id: u1\nstore_root: {root}\nrauc: {d}/rauc-wrapper\nslot_carry: {d}/carry\nupdate_force_file: {d}/force\n\
         test_reboot_command: {d}/reboot\ntest_cmdline_file: {d}/cmdline\nnic_backend: mock\nmock_nic_dir: {d}/nic\n\
         lower: {d}/lower\nsystemd: false\nstore_reserve_bytes: 1048576\nstore_rate_bytes_per_s: 104857600\n\
         image_version_file: {d}/image-version\n{extra}",
        root = root.display(),
        d = d.display()
    );
    let cfg_path = d.join("agent.yaml");
    std::fs::write(&cfg_path, &text).unwrap();
    let cfg = AgentConfig::parse(&text, true).unwrap();
    let mut o = pfx_fleet::dispatch::update_opts(&cfg, &cfg_path, "u1");
    o.agent_exe = env!("CARGO_BIN_EXE_pfx-agent").into();
    Unit {
        _dir: dir,
        root,
        state,
        o,
        cfg,
        cfg_path,
    }
}

/// A bundle the double reads: its header line, then `size` bytes of filler.
fn bundle(
    dir: &Path,
    name: &str,
    version: &str,
    compatible: &str,
    signed: bool,
    size: usize,
) -> (PathBuf, pfx_store::Hash) {
    let p = dir.join(name);
    let mut b = format!(
        "{{\"compatible\":\"{compatible}\",\"version\":\"{version}\",\"signed\":{signed}}}\n"
    )
    .into_bytes();
    let mut x: u32 = 2463534242;
    while b.len() < size {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        b.push(x as u8);
    }
    std::fs::write(&p, &b).unwrap();
    (p, pfx_store::Hash::of(&b))
}

fn send_all(u: &Unit, path: &Path, h: &pfx_store::Hash) {
    let data = std::fs::read(path).unwrap();
    let size = data.len() as u64;
    let (r, ok) = updateagent::put(&u.o, h, size, 0, size, &mut data.as_slice());
    assert!(ok && r.stored, "{r:?}");
}

#[test]
fn a_bundle_arrives_resumably_and_only_whole() {
    let u = unit("");
    let (p, h) = bundle(
        u.root.parent().unwrap(),
        "b.raucb",
        "2.0.0",
        "pfx-vm-arm64",
        true,
        3 << 20,
    );
    let data = std::fs::read(&p).unwrap();
    let size = data.len() as u64;
    // The first piece, cut short by the sender: what came is kept.
    let (r, ok) = updateagent::put(&u.o, &h, size, 0, 1 << 20, &mut &data[..700_000]);
    assert!(!ok && r.have == 700_000 && !r.stored, "{r:?}");
    assert!(
        r.errors[r.errors.len() - 1].contains("resume from there"),
        "{r:?}"
    );
    let st = updateagent::status(&u.o);
    assert_eq!(st.staged[0].have, 700_000, "{st:?}");
    // From the wrong offset: refused, nothing written.
    let (r, ok) = updateagent::put(&u.o, &h, size, 0, 10, &mut &data[..10]);
    assert!(!ok && r.have == 700_000, "{r:?}");
    assert!(r.errors.iter().any(|e| e.contains("not 0")), "{r:?}");
    // The rest from where it stood: stored, the staging gone.
    let (r, ok) = updateagent::put(
        &u.o,
        &h,
        size,
        700_000,
        size - 700_000,
        &mut &data[700_000..],
    );
    assert!(ok && r.stored && r.have == size, "{r:?}");
    assert!(u.root.join(format!("update/{h}.raucb")).is_file());
    let st = updateagent::status(&u.o);
    assert_eq!(st.ready.as_deref(), Some(h.to_string().as_str()));
    assert!(st.staged.is_empty(), "{st:?}");
    // Sent again: nothing to do.
    let (r, ok) = updateagent::put(&u.o, &h, size, 0, 0, &mut &b""[..]);
    assert!(ok && r.stored && r.received == 0, "{r:?}");
    // A bundle whose bytes do not hash to what was claimed: dropped, not kept.
    let wrong: pfx_store::Hash = "c".repeat(64).parse().unwrap();
    let (r, ok) = updateagent::put(&u.o, &wrong, size, 0, size, &mut data.as_slice());
    assert!(!ok && !r.stored && r.have == 0, "{r:?}");
    assert!(
        r.errors.iter().any(|e| e.contains("corrupted on the way")),
        "{r:?}"
    );
    assert!(!u.root.join(format!("update/{wrong}.raucb")).exists());
    assert!(!u.root.join(format!("update/staging/{wrong}.part")).exists());
    // The older bundle goes when a newer one is complete.
    let (p2, h2) = bundle(
        u.root.parent().unwrap(),
        "c.raucb",
        "2.0.1",
        "pfx-vm-arm64",
        true,
        5000,
    );
    send_all(&u, &p2, &h2);
    assert!(!u.root.join(format!("update/{h}.raucb")).exists());
    // No data partition (its marker): refused before a byte.
    std::fs::remove_file(u.root.join(".pfx-data")).unwrap();
    let (r, ok) = updateagent::put(&u.o, &h, size, 0, 10, &mut &data[..10]);
    assert!(
        !ok && r
            .errors
            .iter()
            .any(|e| e.contains("not mounted") || e.contains(".pfx-data")),
        "{r:?}"
    );
}

#[test]
fn install_refuses_before_writing_and_forces_only_when_asked() {
    let u = unit("");
    let dir = u.root.parent().unwrap().to_path_buf();
    let calls = || std::fs::read_to_string(u.state.join("calls.log")).unwrap_or_default();
    // Not sent yet.
    let (_, h0) = bundle(&dir, "x.raucb", "2.0.0", "pfx-vm-arm64", true, 100);
    let (r, ok) = updateagent::install(&u.o, &h0, false);
    assert!(!ok && r.message.contains("send it first"), "{r:?}");
    // A bad signature: rauc info refuses; no install is attempted.
    let (p, h) = bundle(&dir, "bad.raucb", "2.0.0", "pfx-vm-arm64", false, 1000);
    send_all(&u, &p, &h);
    let (r, ok) = updateagent::install(&u.o, &h, false);
    assert!(
        !ok && r.message.contains("signature verification failed"),
        "{r:?}"
    );
    // Another target's bundle.
    let (p, h) = bundle(&dir, "pi.raucb", "2.0.0", "pfx-rpi4-arm64", true, 1000);
    send_all(&u, &p, &h);
    let (r, ok) = updateagent::install(&u.o, &h, false);
    assert!(
        !ok && r
            .message
            .contains("the bundle is for pfx-rpi4-arm64, this unit is pfx-vm-arm64"),
        "{r:?}"
    );
    // Older than the booted 1.0.0.
    let (p, h) = bundle(&dir, "old.raucb", "0.9", "pfx-vm-arm64", true, 1000);
    send_all(&u, &p, &h);
    let (r, ok) = updateagent::install(&u.o, &h, false);
    assert!(
        !ok && r.message.contains("older than the booted 1.0.0"),
        "{r:?}"
    );
    assert!(!calls().contains("install "), "an install ran: {}", calls());
    // Forced: the force file exists for the install (the double saw it), then is gone.
    let (r, ok) = updateagent::install(&u.o, &h, true);
    assert!(ok && r.installed && r.forced, "{r:?}");
    assert_eq!(state(&u)["installs"][0]["forced"], true);
    assert!(!u.o.force_file.exists());
    // A newer one installs into B, read back with its version; nothing switches.
    let (p, h) = bundle(&dir, "new.raucb", "2.0.0", "pfx-vm-arm64", true, 1000);
    send_all(&u, &p, &h);
    let (r, ok) = updateagent::install(&u.o, &h, false);
    assert!(ok && r.installed && !r.forced, "{r:?}");
    let t = r.target.unwrap();
    assert_eq!(
        (t.bootname.as_deref(), t.version.as_deref()),
        (Some("B"), Some("2.0.0"))
    );
    assert_eq!(state(&u)["installs"][1]["forced"], false);
    let st = updateagent::status(&u.o);
    assert_eq!(
        (st.booted.as_deref(), st.boot_primary.as_deref()),
        (Some("A"), Some("A"))
    );
    assert_eq!(st.installed_bundle.as_deref(), Some(h.to_string().as_str()));
    // An install that fails in RAUC: reported with RAUC's words, nothing recorded as installed.
    double(&u.state, &["set", "fail_install", "true"]);
    let (r, ok) = updateagent::install(&u.o, &h, false);
    assert!(!ok && r.message.contains("failed to write image"), "{r:?}");
    assert_eq!(updateagent::status(&u.o).installed_bundle, None);
}

/// A player stand-in on a real socket: `/profile` (the golden document, frames > 0) and
/// `/health` answering `status`.
fn player(status: Arc<AtomicU16>) -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let a = l.local_addr().unwrap();
    let profile = pfx_api::golden::read("profile.json");
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            let mut buf = [0u8; 2048];
            let n = s.read(&mut buf).unwrap_or(0);
            let req = String::from_utf8_lossy(&buf[..n]);
            let (code, body) = if req.starts_with("GET /profile") {
                (200, profile.clone())
            } else {
                let c = status.load(Ordering::SeqCst);
                (
                    c,
                    if c == 200 {
                        "ok\n".into()
                    } else {
                        "frame loop late\n".into()
                    },
                )
            };
            let _ = write!(
                s,
                "HTTP/1.1 {code} X\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    format!("http://{a}/profile")
}

fn sshd_banner() -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let a = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            let mut s = s;
            let _ = s.write_all(b"SSH-2.0-OpenSSH_10.0p2 test\r\n");
        }
    });
    a.to_string()
}

fn health_opts(u: &Unit) -> HealthOpts {
    let mut h = HealthOpts::from_config(&u.cfg, &u.cfg_path, "u1");
    h.status_cmd[0] = env!("CARGO_BIN_EXE_pfx-agent").into();
    h.poll = Duration::from_millis(100);
    // The host's own systemd knows no pfx-player.service of this test unit.
    h.player_unit = None;
    h
}

#[test]
fn a_switch_then_a_healthy_trial_boot_is_committed() {
    let st = Arc::new(AtomicU16::new(200));
    let url = player(Arc::clone(&st));
    let u = unit(&format!(
        "profile_url: {url}\nhealth_ok_s: 1\nhealth_deadline_s: 20\nhealth_ssh_addr: {}\n",
        sshd_banner()
    ));
    // Nothing installed: no switch.
    let (r, ok) = updateagent::switch(&u.o, SwitchWhen::Now);
    assert!(!ok && r.message.contains("install a bundle first"), "{r:?}");
    let (p, h) = bundle(
        u.root.parent().unwrap(),
        "b.raucb",
        "2.0.0",
        "pfx-vm-arm64",
        true,
        4000,
    );
    send_all(&u, &p, &h);
    assert!(updateagent::install(&u.o, &h, false).1);
    let (r, ok) = updateagent::switch(&u.o, SwitchWhen::Now);
    assert!(
        ok && r.rebooting && r.to_slot.as_deref() == Some("B"),
        "{r:?}"
    );
    assert_eq!(r.mode, SwitchMode::Now);
    let carry = std::fs::read_to_string(u.root.parent().unwrap().join("carry.log")).unwrap();
    assert_eq!(
        carry.trim(),
        "switch",
        "the identity is carried before the switch"
    );
    assert_eq!(updateagent::status(&u.o).boot_primary.as_deref(), Some("B"));
    // The boot: B's one trial.
    double(&u.state, &["reboot"]);
    let s = updateagent::status(&u.o);
    assert!(s.trial && s.booted.as_deref() == Some("B"), "{s:?}");
    assert_eq!(
        s.booted_slot_info().unwrap().boot_status.as_deref(),
        Some("bad"),
        "trial: LEFT 0 until committed"
    );
    let (hr, code) = health::commit(&health_opts(&u));
    assert_eq!(code, 0, "{hr:#?}");
    assert!(
        hr.passed && hr.trial && hr.action == HealthAction::MarkedGood,
        "{hr:#?}"
    );
    assert_eq!(
        hr.checks
            .iter()
            .map(|c| (c.name.as_str(), c.ok))
            .collect::<Vec<_>>(),
        [
            ("first_frame", true),
            ("health_ok", true),
            ("data_mounted", true),
            ("pause_off", true),
            ("sshd", true),
            ("agent_status", true)
        ]
    );
    assert_eq!(hr.version.as_deref(), Some("2.0.0"));
    let s = updateagent::status(&u.o);
    assert_eq!(s.booted_version.as_deref(), Some("2.0.0"));
    assert_eq!(
        s.booted_slot_info().unwrap().boot_status.as_deref(),
        Some("good")
    );
    assert!(
        s.health
            .as_ref()
            .is_some_and(|h| h.passed && h.finished_unix_ms > 0),
        "{s:?}"
    );
    assert_eq!(s.last_trial.as_ref().map(|h| h.passed), Some(true));
}

#[test]
fn a_trial_boot_that_stays_unhealthy_is_marked_bad_and_the_old_slot_boots() {
    let st = Arc::new(AtomicU16::new(503));
    let url = player(Arc::clone(&st));
    let u = unit(&format!(
        "profile_url: {url}\nhealth_ok_s: 1\nhealth_deadline_s: 2\nhealth_ssh_addr: {}\n",
        sshd_banner()
    ));
    let (p, h) = bundle(
        u.root.parent().unwrap(),
        "b.raucb",
        "2.0.0",
        "pfx-vm-arm64",
        true,
        4000,
    );
    send_all(&u, &p, &h);
    assert!(updateagent::install(&u.o, &h, false).1);
    assert!(updateagent::switch(&u.o, SwitchWhen::Now).1);
    double(&u.state, &["reboot"]);
    let (hr, code) = health::commit(&health_opts(&u));
    assert_eq!(code, 1);
    assert!(
        !hr.passed && hr.action == HealthAction::MarkedBadRebooting,
        "{hr:#?}"
    );
    assert!(hr.message.contains("frame loop late"), "{}", hr.message);
    // The commit rebooted (the double's boot script): A again, B bad.
    let s = updateagent::status(&u.o);
    assert_eq!(
        (s.booted.as_deref(), s.boot_primary.as_deref(), s.trial),
        (Some("A"), Some("A"), false),
        "{s:?}"
    );
    let b = s
        .slots
        .iter()
        .find(|x| x.bootname.as_deref() == Some("B"))
        .unwrap();
    assert_eq!(b.boot_status.as_deref(), Some("bad"));
    assert_eq!(
        s.last_trial.as_ref().map(|h| (h.slot.clone(), h.passed)),
        Some((Some("B".into()), false))
    );
    // On A, not a trial: an unhealthy boot is only recorded, never marked bad.
    let (hr, _) = health::commit(&health_opts(&u));
    assert!(
        !hr.passed && !hr.trial && hr.action == HealthAction::RecordedOnly,
        "{hr:#?}"
    );
    assert_eq!(
        state(&u)["left"]["A"],
        2,
        "A untouched by the unhealthy non-trial boot"
    );
    // Healthy again: A marked good.
    st.store(200, Ordering::SeqCst);
    let (hr, code) = health::commit(&health_opts(&u));
    assert!(
        code == 0 && hr.action == HealthAction::MarkedGood,
        "{hr:#?}"
    );
    assert_eq!(state(&u)["left"]["A"], 3);
}

#[test]
fn a_switch_at_a_time_is_pending_with_its_waiter_and_replaced_when_asked_again() {
    let u = unit("");
    let (p, h) = bundle(
        u.root.parent().unwrap(),
        "b.raucb",
        "2.0.0",
        "pfx-vm-arm64",
        true,
        4000,
    );
    send_all(&u, &p, &h);
    assert!(updateagent::install(&u.o, &h, false).1);
    let at = pfx_fleet::agent::now_ms() / 1000 + 3600;
    let (r, ok) = updateagent::switch(&u.o, SwitchWhen::Unix(at));
    assert!(
        ok && r.scheduled && !r.rebooting && r.at_unix_ms == Some(at * 1000),
        "{r:?}"
    );
    let s = updateagent::status(&u.o);
    let p = s.pending_switch.as_ref().unwrap();
    assert!(
        p.armed && p.mode == SwitchMode::At && p.to_slot == "B" && p.at_unix_ms == at * 1000,
        "{p:?}"
    );
    assert_eq!(s.boot_primary.as_deref(), Some("A"), "nothing switched yet");
    let pid: i32 = std::fs::read_to_string(u.root.join("update/switch.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // Asked again for now: the pending one is gone and its waiter finds nothing to do.
    let (r, ok) = updateagent::switch(&u.o, SwitchWhen::Now);
    assert!(ok && r.rebooting, "{r:?}");
    assert!(updateagent::status(&u.o).pending_switch.is_none());
    // SAFETY: the waiter this test started.
    unsafe { libc::kill(pid, libc::SIGKILL) };
}
