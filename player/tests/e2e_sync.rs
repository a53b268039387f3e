//! MultiSync end to end: a real master and two real remotes (`pfx-player run`), in a
//! network namespace the test creates, talking over FPP's multicast group on its
//! loopback. Each unit sends DDP to its own port; the sequence's pixels carry the frame
//! number, so the receiver knows which frame each unit sent when. One remote is up before
//! the master starts, the other joins mid-sequence: both must play the master's frame at
//! the master's time, and both must go black when the master is stopped mid-sequence.

mod common;
mod netns_util;

use std::net::UdpSocket;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::fseq_writer::{self, Spec};
use common::player::Player;
use netns_util::{Netns, child_args, child_stdout, need_root};

const FRAMES: usize = 480; // 12 s at 40 fps
const CHANNELS: usize = 30;

fn profile(port: u16) -> String {
    format!(
        "name: p{port}\nprotocol: ddp\npixels: 10\npixel_format: rgb8\ncolor_order: rgb\ndestination: 127.0.0.1:{port}\n"
    )
}

/// Frame f: channels 0 and 1 are f in big-endian plus one (so frame 0 is not black),
/// the rest a constant.
fn sequence() -> Vec<u8> {
    let frames: Vec<Vec<u8>> = (0..FRAMES)
        .map(|f| {
            let n = f as u16 + 1;
            let mut v = vec![0x40u8; CHANNELS];
            v[0] = (n >> 8) as u8;
            v[1] = n as u8;
            v
        })
        .collect();
    let spec = Spec {
        step_ms: 25,
        ..Spec::default()
    };
    fseq_writer::write(&spec, &frames)
}

fn show(port: u16, http: u16, sync: &str, content: bool) -> String {
    let content = if content {
        "content:\n  loop: false\n  playlist:\n    - fseq: show.fseq\n"
    } else {
        ""
    };
    format!(
        "interface: lo\nfps: 40\nhttp: 127.0.0.1:{http}\nunit_id: u{port}\noutputs:\n  - name: a\n    profile: p{port}\n{content}sync:\n{sync}"
    )
}

/// (arrival, frame number or None for black) of every DDP packet on `port`.
fn receiver(
    port: u16,
    stop: Arc<AtomicBool>,
    t0: Instant,
) -> std::thread::JoinHandle<Vec<(f64, Option<u32>)>> {
    let sock = UdpSocket::bind(("127.0.0.1", port)).expect("bind receiver");
    sock.set_read_timeout(Some(Duration::from_millis(50)))
        .expect("timeout");
    std::thread::spawn(move || {
        let mut got = Vec::new();
        let mut buf = [0u8; 2048];
        while !stop.load(Ordering::Relaxed) {
            if let Ok(n) = sock.recv(&mut buf) {
                let at = t0.elapsed().as_secs_f64();
                // DDP: 10-byte header, then the channels.
                let frame = (n >= 12 && buf[10..n].iter().any(|b| *b != 0))
                    .then(|| (u32::from(buf[10]) << 8 | u32::from(buf[11])).saturating_sub(1));
                got.push((at, frame));
            }
        }
        got
    })
}

fn start(show_text: &str, port: u16, seq: &[u8]) -> Player {
    let p = Player::start(show_text, &[(&format!("p{port}"), &profile(port))], &[]);
    std::fs::write(p.dir.path().join("show.fseq"), seq).expect("write fseq");
    p
}

#[test]
fn a_remote_follows_a_master_in_a_namespace() {
    if !need_root("a_remote_follows_a_master_in_a_namespace") {
        return;
    }
    let ns = Netns::new("sync");
    ns.ip(&["link", "set", "lo", "multicast", "on"]);
    let out = ns.run_child("child_master_and_remotes", &[]);
    let stdout = child_stdout(&out);
    eprintln!("{stdout}");
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The arrival time of each frame number (its first packet).
fn firsts(got: &[(f64, Option<u32>)]) -> std::collections::BTreeMap<u32, f64> {
    let mut m = std::collections::BTreeMap::new();
    for (t, f) in got {
        if let Some(f) = f {
            m.entry(*f).or_insert(*t);
        }
    }
    m
}

#[test]
fn child_master_and_remotes() {
    if child_args().is_none() {
        return;
    }
    let seq = sequence();
    let t0 = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let (pm, pa, pb) = (46101u16, 46102u16, 46103u16);
    let rx: Vec<_> = [pm, pa, pb]
        .iter()
        .map(|p| receiver(*p, stop.clone(), t0))
        .collect();
    let remote = "  role: remote\n";
    // The remote's config folder holds the sequence (the default `sequences`); the file
    // is written right after the player starts, before any master names it.
    let a = start(&show(pa, 46201, remote, false), pa, &seq);
    std::thread::sleep(Duration::from_millis(1500));
    // The master's config names show.fseq beside it (checked at load): write it first.
    let mdir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(mdir.path().join("profiles")).expect("profiles");
    std::fs::write(
        mdir.path().join("profiles").join(format!("p{pm}.yaml")),
        profile(pm),
    )
    .expect("profile");
    std::fs::write(mdir.path().join("show.fseq"), &seq).expect("fseq");
    std::fs::write(
        mdir.path().join("show.yaml"),
        show(pm, 46200, "  role: master\n", true),
    )
    .expect("show");
    let mut master = std::process::Command::new(env!("CARGO_BIN_EXE_pfx-player"))
        .args(["run", "--no-mdns", "--config"])
        .arg(mdir.path().join("show.yaml"))
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("master");
    let master_started = t0.elapsed().as_secs_f64();
    std::thread::sleep(Duration::from_secs(4));
    let b = start(&show(pb, 46202, remote, false), pb, &seq);
    let b_started = t0.elapsed().as_secs_f64();
    std::thread::sleep(Duration::from_secs(3));
    // Stop the master mid-sequence (about 7 s of 12): it sends stop.
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(master.id() as i32, libc::SIGTERM) };
    let stopped = t0.elapsed().as_secs_f64();
    let _ = master.wait();
    std::thread::sleep(Duration::from_secs(1));
    stop.store(true, Ordering::Relaxed);
    let got: Vec<_> = rx
        .into_iter()
        .map(|h| h.join().expect("receiver"))
        .collect();
    drop((a, b));

    let fm = firsts(&got[0]);
    assert!(fm.len() > 200, "the master played {} frames", fm.len());
    for (name, g, joined) in [
        ("remote a", &got[1], master_started),
        ("remote b", &got[2], b_started),
    ] {
        let fr = firsts(g);
        // Frames both sent, while both played: the remote's arrival minus the master's.
        let mut d: Vec<f64> = fr
            .iter()
            .filter_map(|(f, t)| fm.get(f).map(|m| (t - m) * 1000.0))
            .collect();
        assert!(d.len() > 100, "{name}: only {} frames in common", d.len());
        // The first frame it lit, in time order.
        let first = g.iter().find_map(|(_, f)| *f).expect("lit frames");
        let worst: Vec<String> = fr
            .iter()
            .filter_map(|(f, t)| fm.get(f).map(|m| (f, (t - m) * 1000.0, *t)))
            .filter(|(_, d, _)| d.abs() > 2.0)
            .take(8)
            .map(|(f, d, t)| format!("frame {f} at {t:.3}: {d:.2} ms"))
            .collect();
        println!("{name}: off by more than 2 ms: {worst:?}");
        let master_then = fm
            .range(..)
            .find(|(_, t)| **t >= joined)
            .map(|(f, _)| *f)
            .unwrap_or(0);
        // Skip the first second after joining (the estimate converges); then compare.
        let settled: Vec<f64> = fr
            .iter()
            .filter(|(_, t)| **t > joined + 1.5)
            .filter_map(|(f, t)| fm.get(f).map(|m| (t - m) * 1000.0))
            .collect();
        d.sort_by(f64::total_cmp);
        let mut s = settled.clone();
        s.sort_by(f64::total_cmp);
        let p50 = s[s.len() / 2];
        let p90 = s[s.len() * 9 / 10];
        let max = s.iter().fold(0f64, |a, b| a.max(b.abs()));
        println!(
            "{name}: first frame {first} (master at {master_then} when it joined), {} frames in common, settled p50 {p50:.3} ms p90 {p90:.3} ms max |{max:.3}| ms",
            d.len()
        );
        if name == "remote b" {
            assert!(
                first > 100,
                "{name} joined mid-sequence but started at frame {first}"
            );
        } else {
            assert!(
                first < 10,
                "{name} was waiting but started at frame {first}"
            );
        }
        assert!(p50.abs() < 3.0, "{name}: median offset {p50:.3} ms");
        assert!(p90.abs() < 10.0, "{name}: p90 offset {p90:.3} ms");
        // Black after the master stopped, long before the sequence's own end.
        let lit_after = g
            .iter()
            .filter(|(t, f)| *t > stopped + 0.5 && f.is_some())
            .count();
        let black_after = g
            .iter()
            .filter(|(t, f)| *t > stopped + 0.5 && f.is_none())
            .count();
        assert_eq!(lit_after, 0, "{name} kept playing after the master stopped");
        assert!(black_after > 5, "{name} sent no black after the stop");
    }
}
