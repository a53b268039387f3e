//! The schedule end to end: the real player binary, a DDP pole on 127.0.0.1 received by
//! a plain UDP socket. The schedule starts the show a few seconds from now and stops it
//! later; the receiver sees black before, light during, black after. A hard stop cuts at
//! the end; a graceful one lets the item playing finish. A SIGHUP applies a new schedule.

mod common;

use std::net::UdpSocket;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::player::{Player, http_port};

const PROFILE: &str = "name: p\nprotocol: ddp\npixels: 50\npixel_format: rgb8\ncolor_order: rgb\ndestination: 127.0.0.1:4048\n";

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_secs_f64()
}

/// `HH:MM:SS` in UTC of a Unix second.
fn hms(unix: u64) -> String {
    let s = unix % 86_400;
    format!("{:02}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}

fn show(port: u16, http: u16, start: u64, end: u64, stop: &str, seconds: u32) -> String {
    format!(
        "interface: lo\nfps: 40\nhttp: 127.0.0.1:{http}\nunit_id: e2e-schedule\noutputs:\n  - name: a\n    profile: p\n    destination: 127.0.0.1:{port}\nplaylists:\n  show:\n    - pattern: solid\n      color: \"#ffffff\"\n      seconds: {seconds}\nschedule:\n  timezone: UTC\n  entries:\n    - playlist: show\n      start: \"{}\"\n      end: \"{}\"\n      stop: {stop}\n",
        hms(start),
        hms(end)
    )
}

/// (arrival in Unix seconds, any channel lit) for every DDP packet until `until`.
fn receive(sock: &UdpSocket, until: f64) -> Vec<(f64, bool)> {
    sock.set_read_timeout(Some(Duration::from_millis(100)))
        .expect("timeout");
    let mut got = Vec::new();
    let mut buf = [0u8; 2048];
    while unix_now() < until {
        if let Ok(n) = sock.recv(&mut buf) {
            let lit = n > 10 && buf[10..n].iter().any(|b| *b != 0);
            got.push((unix_now(), lit));
        }
    }
    got
}

/// Checks that the packets are black before `on`, lit from `on` to `off`, black after,
/// with `slack` seconds either side of each change for scheduling and delivery.
fn assert_window(got: &[(f64, bool)], on: f64, off: f64, slack: f64, stderr: &str) {
    let before: Vec<_> = got.iter().filter(|(t, _)| *t < on - slack).collect();
    let during: Vec<_> = got
        .iter()
        .filter(|(t, _)| *t > on + slack && *t < off - slack)
        .collect();
    let after: Vec<_> = got.iter().filter(|(t, _)| *t > off + slack).collect();
    assert!(
        before.len() > 40,
        "{} packets before the start: {stderr}",
        before.len()
    );
    assert!(
        during.len() > 40,
        "{} packets during the show: {stderr}",
        during.len()
    );
    assert!(
        after.len() > 40,
        "{} packets after the stop: {stderr}",
        after.len()
    );
    assert!(
        before.iter().all(|(_, lit)| !lit),
        "light before the start: {stderr}"
    );
    assert!(
        during.iter().all(|(_, lit)| *lit),
        "black during the show: {stderr}"
    );
    assert!(
        after.iter().all(|(_, lit)| !lit),
        "light after the stop: {stderr}"
    );
    let first_lit = got.iter().find(|(_, lit)| *lit).map(|(t, _)| *t);
    assert!(
        first_lit.is_some_and(|t| (t - on).abs() <= slack),
        "first light at {first_lit:?}, scheduled {on}"
    );
}

fn receiver() -> (UdpSocket, u16) {
    let sock = UdpSocket::bind("127.0.0.1:0").expect("bind");
    let port = sock.local_addr().expect("addr").port();
    (sock, port)
}

#[test]
fn the_schedule_starts_the_show_in_5_s_and_a_hard_stop_ends_it_10_s_later() {
    let (sock, port) = receiver();
    let start = unix_now().ceil() as u64 + 5;
    let end = start + 10;
    let cfg = show(port, http_port(40), start, end, "hard", 60);
    let player = Player::start(&cfg, &[("p", PROFILE)], &["--duration", "20"]);
    let got = receive(&sock, end as f64 + 3.0);
    let (ok, stderr) = player.wait();
    assert!(ok, "player failed: {stderr}");
    assert_window(&got, start as f64, end as f64, 0.3, &stderr);
}

#[test]
fn a_graceful_stop_lets_the_item_playing_finish() {
    // Items of 4 s from the start: the entry ends 6 s in, inside the second lap, which
    // ends 8 s in; the light stays until then.
    let (sock, port) = receiver();
    let start = unix_now().ceil() as u64 + 4;
    let end = start + 6;
    let cfg = show(port, http_port(41), start, end, "graceful", 4);
    let player = Player::start(&cfg, &[("p", PROFILE)], &["--duration", "16"]);
    let got = receive(&sock, start as f64 + 11.0);
    let (ok, stderr) = player.wait();
    assert!(ok, "player failed: {stderr}");
    assert_window(&got, start as f64, start as f64 + 8.0, 0.3, &stderr);
}

#[test]
fn sighup_applies_a_new_schedule_without_restarting() {
    // The first schedule's show is hours away; the reloaded one starts 4 s from now.
    let (sock, port) = receiver();
    let far = unix_now() as u64 + 6 * 3600;
    let cfg = show(port, http_port(42), far, far + 60, "hard", 60);
    let mut player = Player::start(&cfg, &[("p", PROFILE)], &["--duration", "14"]);
    // Its first config loaded and its signal handlers installed (both come before HTTP).
    player.wait_playing(http_port(42));
    let start = unix_now().ceil() as u64 + 4;
    let end = start + 4;
    std::fs::write(
        player.config_path(),
        show(port, http_port(42), start, end, "hard", 60),
    )
    .expect("rewrite config");
    player.signal(libc::SIGHUP);
    let got = receive(&sock, end as f64 + 3.0);
    let (ok, stderr) = player.wait();
    assert!(ok, "player failed: {stderr}");
    assert!(stderr.contains("SIGHUP: new show accepted"), "{stderr}");
    // Packets from before the SIGHUP and after the reload's black both count as before.
    assert_window(&got, start as f64, end as f64, 0.3, &stderr);
}

#[test]
fn the_schedule_subcommand_lists_starts_and_stops_across_a_dst_change() {
    // Berlin, the weekend the clocks go forward (2026-03-29): a 19:00 start is 19:00 CET
    // on Saturday and 19:00 CEST on Sunday; a sunset start moves with the sun, an hour
    // later on the clock. The first entry wins over the second from 19:00.
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = dir.path().join("show.yaml");
    std::fs::write(
        &cfg,
        "interface: lo\noutputs:\n  - name: a\n    profile: bench-ddp\nplaylists:\n  show:\n    - pattern: rainbow\nschedule:\n  timezone: Europe/Berlin\n  latitude: 52.52\n  longitude: 13.405\n  entries:\n    - name: evening\n      playlist: show\n      start: \"19:00\"\n      end: \"22:00\"\n      stop: hard\n    - name: dusk\n      playlist: show\n      start: sunset-60\n      end: \"19:00\"\n",
    )
    .expect("write");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_pfx-player"))
        .args(["schedule", "--config"])
        .arg(&cfg)
        .args(["--from", "2026-03-28", "--days", "2", "--json"])
        .output()
        .expect("run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let changes: Vec<(String, String)> = doc["changes"]
        .as_array()
        .expect("changes")
        .iter()
        .map(|c| {
            (
                c["at"].as_str().expect("at").to_string(),
                c["to"]["entry"].as_str().unwrap_or("idle").to_string(),
            )
        })
        .collect();
    let at: Vec<&str> = changes.iter().map(|(a, _)| a.as_str()).collect();
    let to: Vec<&str> = changes.iter().map(|(_, t)| t.as_str()).collect();
    assert_eq!(
        to,
        ["dusk", "evening", "idle", "dusk", "evening", "idle"],
        "{at:?}"
    );
    assert_eq!(at[1], "2026-03-28T19:00:00+01:00");
    assert_eq!(at[2], "2026-03-28T22:00:00+01:00");
    assert_eq!(at[4], "2026-03-29T19:00:00+02:00");
    // An hour before sunset: about 17:30 CET on the 28th, 18:30 CEST on the 29th.
    assert!(at[0].starts_with("2026-03-28T17:"), "{at:?}");
    assert!(at[3].starts_with("2026-03-29T18:"), "{at:?}");
    let text = std::process::Command::new(env!("CARGO_BIN_EXE_pfx-player"))
        .args(["schedule", "--config"])
        .arg(&cfg)
        .args(["--from", "2026-03-28", "--days", "1"])
        .output()
        .expect("run");
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("2026-03-28 Sat 19:00:00 CET  start evening (playlist show, repeat, stop hard), over dusk"),
        "{text}"
    );
}
