//! `pfx-player doctor` in a testbed this test builds: a Linux bridge as the venue switch,
//! the doctor's host on one port, a flood source in another namespace sending UDP
//! multicast to 239.1.2.3 at a known rate. Root only.
//!
//! - unmanaged switch (mcast_snooping 0) + flood: `multicast-flood` found, its Mbit/s
//!   within 20% of the rate sent (both counted at the Ethernet frame boundary);
//! - managed switch (mcast_snooping 1 + mcast_querier 1, nobody subscribed) + flood: not found;
//! - unmanaged switch, flood off: healthy, exit 0.

mod netns_util;
#[path = "common/wait.rs"]
mod wait;

use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use clap::Parser;
use netns_util::{Netns, child_args, child_stdout, need_root};
use pfx_player::cli::doctor::{DoctorArgs, run_code};
use wait::wait_until;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    doctor: DoctorArgs,
}

#[test]
#[ignore = "a re-exec trampoline: runs only as a namespace test's child (netns_util::run_child)"]
fn child_doctor_cli() {
    let Some(args) = child_args() else { return };
    let cli = Cli::parse_from(std::iter::once("doctor".to_string()).chain(args));
    let code = run_code(cli.doctor).unwrap_or_else(|e| {
        eprintln!("error: {e:#}");
        2
    });
    use std::io::Write;
    let _ = std::io::stdout().flush();
    std::process::exit(code.into());
}

const PAYLOAD: usize = 1000;
/// Ethernet header + IPv4 + UDP + payload: what a packet socket sees of each datagram.
const FRAME: usize = 14 + 20 + 8 + PAYLOAD;
const GROUP: Ipv4Addr = Ipv4Addr::new(239, 1, 2, 3);

struct Testbed {
    sw: Netns,
    doc: Netns,
    flood: Netns,
}

fn testbed() -> Testbed {
    let sw = Netns::new("sw");
    let doc = Netns::new("doc");
    let flood = Netns::new("fl");
    sw.ip(&[
        "link",
        "add",
        "br0",
        "type",
        "bridge",
        "mcast_snooping",
        "0",
    ]);
    sw.ip(&["link", "set", "br0", "up"]);
    for (ns, port, inner, addr) in [
        (&doc, "pd", "d0", "10.78.0.1/24"),
        (&flood, "pf", "f0", "10.78.0.2/24"),
    ] {
        sw.ip(&["link", "add", port, "type", "veth", "peer", "name", inner]);
        sw.ip(&["link", "set", inner, "netns", &ns.name]);
        sw.ip(&["link", "set", port, "master", "br0"]);
        sw.ip(&["link", "set", port, "up"]);
        ns.ip(&["addr", "add", addr, "dev", inner]);
        ns.ip(&["link", "set", inner, "up"]);
    }
    Testbed { sw, doc, flood }
}

/// Sends PAYLOAD-byte datagrams to GROUP at `mbit` (frame bytes) from inside `ns`, on
/// absolute deadlines. Returns the frame-boundary rate actually sent.
struct Flood {
    stop: Arc<AtomicBool>,
    /// Datagrams sent so far.
    sent: Arc<AtomicU64>,
    thread: Option<JoinHandle<f64>>,
}

impl Flood {
    fn start(ns: &str, mbit: f64) -> Flood {
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let sent = Arc::new(AtomicU64::new(0));
        let sent2 = sent.clone();
        let path = format!("/run/netns/{ns}");
        let thread = std::thread::spawn(move || {
            let f = std::fs::File::open(&path).expect("open netns");
            // SAFETY: setns on this thread only; the socket below is created after it.
            let rc = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
            assert_eq!(rc, 0, "setns: {}", std::io::Error::last_os_error());
            let sock = UdpSocket::bind("10.78.0.2:0").expect("bind in flood ns");
            let payload = [0x5au8; PAYLOAD];
            let per_s = mbit * 1e6 / 8.0 / FRAME as f64;
            let period = Duration::from_secs_f64(1.0 / per_s);
            let start = Instant::now();
            let mut n: u32 = 0;
            while !stop2.load(Ordering::Relaxed) {
                let due = start + period * n;
                let now = Instant::now();
                if due > now {
                    // Pacing, not ordering: the flood's rate is what the doctor measures.
                    std::thread::sleep(due - now);
                }
                sock.send_to(&payload, SocketAddrV4::new(GROUP, 5000))
                    .expect("send multicast");
                n += 1;
                sent2.store(u64::from(n), Ordering::Relaxed);
            }
            n as f64 * FRAME as f64 * 8.0 / start.elapsed().as_secs_f64() / 1e6
        });
        Flood {
            stop,
            sent,
            thread: Some(thread),
        }
    }

    fn finish(mut self) -> f64 {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .take()
            .map(|t| t.join().expect("flood thread"))
            .unwrap_or(0.0)
    }
}

impl Drop for Flood {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn doctor(tb: &Testbed) -> (i32, serde_json::Value, String) {
    let out = tb.doc.run_child(
        "child_doctor_cli",
        &["--iface", "d0", "--seconds", "3", "--json"],
    );
    let stdout = child_stdout(&out);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let v: serde_json::Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("doctor JSON ({e}): {stdout}\nstderr: {stderr}"));
    (out.status.code().unwrap_or(-1), v, stderr)
}

fn finding<'a>(v: &'a serde_json::Value, id: &str) -> Option<&'a serde_json::Value> {
    v["findings"].as_array()?.iter().find(|f| f["id"] == id)
}

/// `cmd ARGS...` run inside `ns` (`ip netns exec`); its stdout.
fn in_ns(ns: &Netns, cmd: &[&str]) -> String {
    let out = std::process::Command::new("ip")
        .args(["netns", "exec", &ns.name])
        .args(cmd)
        .output()
        .expect("ip netns exec");
    assert!(
        out.status.success(),
        "{cmd:?} in {}: {}",
        ns.name,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Packets `dev` in `ns` has received.
fn rx_packets(ns: &Netns, dev: &str) -> u64 {
    let j: serde_json::Value =
        serde_json::from_str(&in_ns(ns, &["ip", "-s", "-j", "link", "show", "dev", dev]))
            .expect("ip -j link JSON");
    j[0]["stats64"]["rx"]["packets"].as_u64().unwrap_or(0)
}

/// The switch's ports forward, every link is up, and no IPv6 address is tentative.
fn settled(tb: &Testbed) -> bool {
    let ports: serde_json::Value =
        serde_json::from_str(&in_ns(&tb.sw, &["bridge", "-j", "link", "show"]))
            .expect("bridge -j JSON");
    let forwarding = ports
        .as_array()
        .is_some_and(|p| p.len() == 2 && p.iter().all(|x| x["state"] == "forwarding"));
    let up = [(&tb.doc, "d0"), (&tb.flood, "f0")]
        .iter()
        .all(|(ns, dev)| {
            in_ns(ns, &["ip", "-j", "link", "show", "dev", dev]).contains("\"operstate\":\"UP\"")
        });
    let tentative = [&tb.sw, &tb.doc, &tb.flood].iter().any(|ns| {
        !in_ns(ns, &["ip", "-6", "addr", "show", "tentative"])
            .trim()
            .is_empty()
    });
    forwarding && up && !tentative
}

/// `ip link set br0 type bridge OPTS...` on the switch.
fn set_bridge(tb: &Testbed, opts: &[&str]) {
    let mut args = vec!["link", "set", "br0", "type", "bridge"];
    args.extend_from_slice(opts);
    tb.sw.ip(&args);
}

/// One doctor measurement while the flood source sends 12 Mbit/s; also what it sent.
fn doctor_during_flood(tb: &Testbed, cell: &str) -> (i32, serde_json::Value, String, f64) {
    let flood = Flood::start(&tb.flood.name, 12.0);
    // The flood is on the wire: its datagrams reach the switch's port before the doctor
    // starts counting (whether the switch forwards them is what the cell is about).
    let at_switch = rx_packets(&tb.sw, "pf");
    wait_until(
        Duration::from_secs(10),
        "the flood's datagrams to reach the switch port pf",
        || flood.sent.load(Ordering::Relaxed) >= 10 && rx_packets(&tb.sw, "pf") >= at_switch + 10,
    );
    let (code, v, stderr) = doctor(tb);
    let sent = flood.finish();
    eprintln!(
        "{cell}: sent {sent:.2} Mbit/s; doctor: {}",
        v["checks"][3]["evidence"]
    );
    (code, v, stderr, sent)
}

#[test]
fn doctor_finds_the_flood_only_on_the_unmanaged_switch() {
    if !need_root("doctor_finds_the_flood_only_on_the_unmanaged_switch") {
        return;
    }
    let tb = testbed();
    // The links settled before measuring: bridge ports forwarding, no IPv6 address still
    // tentative (DAD), links up.
    wait_until(
        Duration::from_secs(20),
        "the testbed's links to settle (ports forwarding, links up, no tentative IPv6)",
        || settled(&tb),
    );

    // 1. Unmanaged switch, flood on.
    let (code, v, stderr, sent) = doctor_during_flood(&tb, "unmanaged+flood");
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(v["interface"], "d0");
    assert!(v["host"].is_string());
    let f = finding(&v, "multicast-flood").expect("multicast-flood finding");
    assert_eq!(f["verdict"], "problem");
    assert!(f["fix"].as_str().unwrap_or("").contains("IGMP snooping"));
    let got = f["evidence"]["unsubscribed_mbit_per_s"].as_f64().unwrap();
    assert!(
        (got - sent).abs() <= 0.2 * sent,
        "doctor saw {got} Mbit/s, flood sent {sent} Mbit/s"
    );
    assert_eq!(f["evidence"]["top_groups"][0]["group"], "239.1.2.3");
    assert!(f["evidence"]["share_of_link_pct_floor"].is_number());
    for f in v["findings"].as_array().unwrap() {
        assert!(f["verdict"].is_string() && f["evidence"].is_object() && f["fix"].is_string());
    }

    // 2. Managed switch: snooping with a querier, nobody subscribed; flood on.
    // The bridge keeps flooding unregistered groups for one query response interval
    // after its querier starts (default 10 s); shorten it to 1 s for the test.
    set_bridge(&tb, &["mcast_query_response_interval", "100"]);
    set_bridge(&tb, &["mcast_snooping", "1", "mcast_querier", "1"]);
    // A kernel timer, not an ordering: the bridge floods unregistered groups for one
    // query response interval (1 s) after its querier starts, and shows no state that
    // says it has passed; wait it out with margin.
    std::thread::sleep(Duration::from_secs(2));
    let (code, v, stderr, sent) = doctor_during_flood(&tb, "managed+flood");
    assert!(sent > 8.0, "the flood must really run in this cell: {sent}");
    assert!(finding(&v, "multicast-flood").is_none(), "{v}");
    assert_eq!(code, 0, "{stderr}");

    // 3. Unmanaged switch, flood off.
    set_bridge(&tb, &["mcast_snooping", "0"]);
    let (code, v, stderr) = doctor(&tb);
    eprintln!(
        "unmanaged, no flood: doctor: {}",
        v["checks"][3]["evidence"]
    );
    assert!(finding(&v, "multicast-flood").is_none(), "{v}");
    assert_eq!(code, 0, "healthy must exit 0: {v} {stderr}");
}

#[test]
fn doctor_cannot_measure_unknown_interface_exit_2() {
    if !need_root("doctor_cannot_measure_unknown_interface_exit_2") {
        return;
    }
    let ns = Netns::new("dx");
    let out = ns.run_child("child_doctor_cli", &["--iface", "eth9", "--json"]);
    let stdout = child_stdout(&out);
    assert_eq!(out.status.code(), Some(2), "{stdout}");
    let v: serde_json::Value = serde_json::from_str(&stdout).expect("json");
    assert!(v["error"].as_str().unwrap_or("").contains("eth9"), "{v}");
    // A fresh namespace has no default route: the doctor asks for --iface.
    let out = ns.run_child("child_doctor_cli", &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--iface"));
}
