//! Signals on the real binary: SIGTERM ends the show within 1 s with three
//! stream-terminated packets per sACN universe; SIGHUP reloads the config, and refuses a
//! bad one while the old show keeps playing.

mod common;

use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::time::{Duration, Instant};

use common::player::{Player, http_port};
use common::wait::wait_until;
use socket2::{Domain, Protocol, Socket, Type};

/// A raw listener on sACN universes' groups, sharing port 5568 with other tests. With
/// IP_MULTICAST_ALL (Linux's default) a socket on 5568 sees every group joined on the host,
/// so callers filter by universe.
fn listen(universes: &[u16]) -> UdpSocket {
    let s = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP)).unwrap();
    s.set_reuse_address(true).unwrap();
    s.set_reuse_port(true).unwrap();
    s.bind(&SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 5568).into())
        .unwrap();
    for u in universes {
        let group = Ipv4Addr::new(239, 255, (u >> 8) as u8, *u as u8);
        s.join_multicast_v4(&group, &Ipv4Addr::LOCALHOST).unwrap();
    }
    s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    s.into()
}

/// (universe, options byte, first slot) of an sACN data packet, or None.
fn parse(p: &[u8]) -> Option<(u16, u8, u8)> {
    (p.len() > 126 && &p[4..16] == b"ASC-E1.17\0\0\0")
        .then(|| (u16::from_be_bytes([p[113], p[114]]), p[112], p[126]))
}

fn profile(first: u16) -> String {
    format!(
        "name: t\nprotocol: sacn\npixels: 300\npixel_format: rgb8\ncolor_order: rgb\ndestination: 239.255.0.1:5568\nsacn:\n  first_universe: {first}\n"
    )
}

fn show(port: u16, color: &str) -> String {
    format!(
        "interface: lo\nmulticast_loop: true\nhttp: 127.0.0.1:{port}\nunit_id: sig\noutputs:\n  - name: legacy\n    profile: t\ncontent:\n  playlist:\n    - pattern: solid\n      color: \"{color}\"\n      seconds: 60\n"
    )
}

#[test]
fn sigterm_sends_three_terminated_packets_per_universe_and_exits_0_within_1s() {
    let first = 3301;
    let sock = listen(&[first, first + 1]);
    // Drain continuously so the receive buffer never overflows and drops the last packets.
    type Counts = std::collections::BTreeMap<u16, u32>;
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let counts = std::sync::Arc::new(std::sync::Mutex::new(Counts::new()));
    let reader = {
        let (done, counts) = (done.clone(), counts.clone());
        std::thread::spawn(move || {
            let mut buf = [0u8; 700];
            let count = |p: &[u8]| {
                if let Some((u, opts, _)) = parse(p)
                    && opts & 0x40 != 0
                {
                    *counts.lock().unwrap().entry(u).or_insert(0) += 1;
                }
            };
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                if let Ok(n) = sock.recv(&mut buf) {
                    count(&buf[..n]);
                }
            }
            // The player has exited: whatever it sent is queued here; read it all.
            sock.set_nonblocking(true).expect("nonblocking");
            while let Ok(n) = sock.recv(&mut buf) {
                count(&buf[..n]);
            }
        })
    };
    let port = http_port(3);
    let mut player = Player::start(&show(port, "#ff0000"), &[("t", &profile(first))], &[]);
    player.wait_playing(port);
    let t0 = Instant::now();
    player.signal(libc::SIGTERM);
    let status = player.wait_exit(Duration::from_secs(3));
    let took = t0.elapsed();
    assert!(status.success(), "exit status {status}");
    assert!(took < Duration::from_secs(1), "took {took:?}");
    let seen = |u: u16| counts.lock().unwrap().get(&u).copied().unwrap_or(0);
    wait_until(
        Duration::from_secs(5),
        "stream-terminated packets of both universes to be received",
        || seen(first) >= 3 && seen(first + 1) >= 3,
    );
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    reader.join().expect("reader");
    let terminated = counts.lock().unwrap().clone();
    assert_eq!(terminated.get(&first), Some(&3), "{terminated:?}");
    assert_eq!(terminated.get(&(first + 1)), Some(&3), "{terminated:?}");
}

fn first_slot_now(s: &UdpSocket) -> Option<u8> {
    // Packets keep coming at 60 fps: take the newest one after a short drain window.
    let mut buf = [0u8; 700];
    let end = Instant::now() + Duration::from_millis(300);
    let mut last = None;
    while Instant::now() < end {
        if let Ok(n) = s.recv(&mut buf)
            && let Some((u, _, v)) = parse(&buf[..n])
            && u == 3401
        {
            last = Some(v);
        }
    }
    last
}

#[test]
fn sighup_applies_a_good_config_and_refuses_a_bad_one_while_playing_on() {
    let first = 3401;
    let sock = listen(&[first]);
    let port = http_port(4);
    let mut player = Player::start(
        &show(port, "#110000"),
        &[("t", &profile(first))],
        &["--duration", "8"],
    );
    player.wait_playing(port);
    assert_eq!(first_slot_now(&sock), Some(0x11));

    std::fs::write(player.config_path(), "interface: lo\noutputs: [oops\n").unwrap();
    player.signal(libc::SIGHUP);
    player.wait_log("new config refused", Duration::from_secs(5));
    assert_eq!(
        first_slot_now(&sock),
        Some(0x11),
        "a bad config must not stop the show"
    );

    std::fs::write(player.config_path(), show(port, "#220000")).unwrap();
    player.signal(libc::SIGHUP);
    player.wait_log("SIGHUP: new show accepted", Duration::from_secs(5));
    wait_until(
        Duration::from_secs(5),
        "the good config's color on the wire",
        || first_slot_now(&sock) == Some(0x22),
    );

    player.signal(libc::SIGTERM);
    let (ok, stderr) = player.wait();
    assert!(ok, "{stderr}");
    assert!(
        stderr.contains("new config refused"),
        "the refusal is logged: {stderr}"
    );
    assert!(
        stderr.contains("show.yaml"),
        "the refusal names the file: {stderr}"
    );
}

fn send_helpers(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter(|e| {
                    std::fs::read_to_string(e.path().join("comm"))
                        .is_ok_and(|c| c.trim() == "pfx-send")
                })
                .count()
        })
        .unwrap_or(0)
}

/// An output large enough for a send helper thread (≥ 128 datagrams per frame): a reload
/// replaces the helper instead of adding one, and SIGTERM still exits 0 within 1 s.
#[test]
fn a_large_output_keeps_one_send_helper_across_reload_and_stops_within_1s() {
    let big = "name: t\nprotocol: sacn\npixels: 34000\npixel_format: rgb8\ncolor_order: rgb\ndestination: 239.255.0.1:5568\nsacn:\n  first_universe: 3601\n";
    let port = http_port(5);
    let mut player = Player::start(&show(port, "#00ff00"), &[("t", big)], &[]);
    let pid = player.child.id();
    player.wait_playing(port);
    assert_eq!(
        send_helpers(pid),
        1,
        "one helper for the 200-universe output"
    );
    player.signal(libc::SIGHUP);
    // The new show's output (and its helper) is open once the reload is accepted; the old
    // engine's helper goes when the loop has swapped and retired it.
    player.wait_log("SIGHUP: new show accepted", Duration::from_secs(5));
    wait_until(
        Duration::from_secs(5),
        "the reload to replace the send helper (one pfx-send thread, not two)",
        || send_helpers(pid) == 1,
    );
    let t0 = Instant::now();
    player.signal(libc::SIGTERM);
    let status = player.wait_exit(Duration::from_secs(3));
    assert!(status.success(), "exit status {status}");
    assert!(
        t0.elapsed() < Duration::from_secs(1),
        "took {:?}",
        t0.elapsed()
    );
}
