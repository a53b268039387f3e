//! `pfx-player nic` against real veth interfaces in a network namespace the test creates.
//! Root only; prints "skipped: needs root" otherwise.

mod netns_util;

use clap::Parser;
use netns_util::{Netns, child_args, child_stdout, need_root};
use pfx_player::cli::nic::{NicArgs, run_code};

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    nic: NicArgs,
}

/// Runs `pfx-player nic ARGS` when re-executed inside a namespace; a no-op otherwise.
#[test]
#[ignore = "a re-exec trampoline: runs only as a namespace test's child (netns_util::run_child)"]
fn child_nic_cli() {
    let Some(args) = child_args() else { return };
    let cli = Cli::parse_from(std::iter::once("nic".to_string()).chain(args));
    let code = run_code(cli.nic).unwrap_or_else(|e| {
        eprintln!("error: {e:#}");
        1
    });
    use std::io::Write;
    let _ = std::io::stdout().flush();
    std::process::exit(code.into());
}

fn veth_ns() -> Netns {
    let ns = Netns::new("nic");
    ns.ip(&["link", "add", "va", "type", "veth", "peer", "name", "vb"]);
    ns.ip(&["link", "set", "va", "up"]);
    ns.ip(&["link", "set", "vb", "up"]);
    ns.ip(&["addr", "add", "10.77.0.1/24", "dev", "va"]);
    ns.ip(&["addr", "add", "10.77.0.2/24", "dev", "vb"]);
    ns
}

#[test]
fn status_on_veth_reports_pause_unsupported_not_zero() {
    if !need_root("status_on_veth_reports_pause_unsupported_not_zero") {
        return;
    }
    let ns = veth_ns();
    ns.exec(&[
        "tc", "qdisc", "add", "dev", "va", "root", "tbf", "rate", "1mbit", "burst", "5kb", "limit",
        "100kb",
    ]);
    // Some traffic out of va (multicast via va's address; unicast to vb's address would
    // be local delivery and never touch va), so the counters are not all zero.
    ns.exec(&[
        "python3",
        "-c",
        "import socket; s=socket.socket(2,2); \
         s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton('10.77.0.1')); \
         [s.sendto(b'x',('239.7.7.7',9)) for _ in range(5)]",
    ]);
    let out = ns.run_child("child_nic_cli", &["status", "va", "--json"]);
    let stdout = child_stdout(&out);
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout {stdout} stderr {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_str(&stdout).expect("status JSON");
    assert_eq!(v["interface"], "va");
    assert_eq!(v["driver"], "veth");
    for c in ["pause_rx_frames", "pause_tx_frames"] {
        assert_eq!(v[c]["source"], "unsupported", "{c}: {v}");
        assert!(v[c]["total"].is_null(), "{c} must be null, not 0: {v}");
    }
    assert!(v["pause"].is_null());
    let perr = v["pause_error"].as_str().unwrap_or("");
    assert!(
        perr.contains("EOPNOTSUPP") && perr.contains("veth"),
        "{perr}"
    );
    assert_eq!(v["speed_mbps"], 10000, "{v}");
    assert_eq!(v["carrier"], true);
    assert!(v["tx_packets"].as_u64().unwrap_or(0) >= 5, "{v}");
    assert!(v["carrier_changes"].is_u64());
    assert!(
        v["qdisc_drops"].is_u64() && v["qdisc_backlog_bytes"].is_u64(),
        "{v}"
    );
    assert_eq!(v["qdisc"], "tbf", "{v}");
}

#[test]
fn unknown_interface_is_a_clear_error() {
    if !need_root("unknown_interface_is_a_clear_error") {
        return;
    }
    let ns = veth_ns();
    let out = ns.run_child("child_nic_cli", &["status", "eht0"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("\"eht0\""), "{stderr}");
    assert!(
        stderr.contains("va") && stderr.contains("vb"),
        "lists interfaces: {stderr}"
    );
}

#[test]
fn pause_off_on_veth_returns_the_driver_error() {
    if !need_root("pause_off_on_veth_returns_the_driver_error") {
        return;
    }
    let ns = veth_ns();
    let t0 = std::time::Instant::now();
    let out = ns.run_child("child_nic_cli", &["pause-off", "va", "--wait", "5"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("Operation not supported (EOPNOTSUPP) from driver veth"),
        "{stderr}"
    );
    // EOPNOTSUPP is final: no waiting out the 5 s.
    assert!(t0.elapsed().as_secs_f64() < 4.0, "took {:?}", t0.elapsed());
}

/// Runs `qdisc::apply IFACE PARENT LIMIT` or `qdisc::remove IFACE` inside a namespace and
/// prints the outcome's Debug form; a no-op in a normal run.
#[test]
#[ignore = "a re-exec trampoline: runs only as a namespace test's child (netns_util::run_child)"]
fn child_tx_queue() {
    use pfx_player::nic::qdisc;
    use pfx_player::nic::txqueue::Parent;
    let Some(args) = child_args() else { return };
    let out = match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["apply", iface, parent, limit] => {
            let parent = Parent::parse(parent).expect("parent");
            format!(
                "{:?}",
                qdisc::apply(iface, parent, limit.parse().expect("limit"))
            )
        }
        ["remove", iface] => format!("{:?}", qdisc::remove(iface)),
        _ => panic!("child_tx_queue: bad args {args:?}"),
    };
    println!("{out}");
    use std::io::Write;
    let _ = std::io::stdout().flush();
    std::process::exit(0);
}

fn tc_show(ns: &Netns) -> String {
    let out = std::process::Command::new("tc")
        .args(["-n", &ns.name, "qdisc", "show", "dev", "va"])
        .output()
        .expect("tc");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn tx_queue_installs_keeps_resizes_removes_and_leaves_a_shaper_alone() {
    if !need_root("tx_queue_installs_keeps_resizes_removes_and_leaves_a_shaper_alone") {
        return;
    }
    let ns = veth_ns();
    let run = |args: &[&str]| child_stdout(&ns.run_child("child_tx_queue", args));

    // veth's default is noqueue; ours replaces it at the root.
    let out = run(&["apply", "va", "root", "7"]);
    assert!(
        out.contains("Installed") && out.contains("noqueue"),
        "{out}"
    );
    let tc = tc_show(&ns);
    assert!(
        tc.contains("pfifo_head_drop") && tc.contains("limit 7p"),
        "{tc}"
    );
    // Idempotent, then resized when the show changes.
    assert!(run(&["apply", "va", "root", "7"]).contains("Unchanged"));
    assert!(run(&["apply", "va", "root", "9"]).contains("Installed"));
    assert!(tc_show(&ns).contains("limit 9p"), "{}", tc_show(&ns));
    // Removing gives the kernel's default back.
    assert!(run(&["remove", "va"]).contains("Ok(true)"));
    assert!(
        !tc_show(&ns).contains("pfifo_head_drop"),
        "{}",
        tc_show(&ns)
    );

    // Someone's shaper at the root is left alone at the root, and ours goes under its class
    // when the config names it.
    ns.exec(&[
        "tc", "qdisc", "replace", "dev", "va", "root", "handle", "1:", "htb", "default", "1",
    ]);
    ns.exec(&[
        "tc", "class", "add", "dev", "va", "parent", "1:", "classid", "1:1", "htb", "rate", "1gbit",
    ]);
    let out = run(&["apply", "va", "root", "7"]);
    assert!(out.contains("LeftForeign(\"htb\")"), "{out}");
    assert!(run(&["remove", "va"]).contains("Ok(false)"));
    let out = run(&["apply", "va", "1:1", "5"]);
    assert!(out.contains("Installed"), "{out}");
    let tc = tc_show(&ns);
    assert!(
        tc.contains("htb 1: root") && tc.contains("pfifo_head_drop") && tc.contains("parent 1:1"),
        "{tc}"
    );

    // An unknown interface is named in the error.
    let out = run(&["apply", "eht0", "root", "7"]);
    assert!(out.contains("eht0") && out.contains("Err"), "{out}");
}
