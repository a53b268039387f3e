//! `pfx-fleet discover` end to end: a real mdns-sd advertiser (as the player registers
//! `_pfx._tcp`) on loopback only, on a private port; the binary records the unit with
//! the site from the config's subnet rule.

use mdns_sd::{IfKind, ServiceDaemon, ServiceInfo};
use std::process::Command;

#[test]
fn discover_records_units_with_sites_from_subnet_rules() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("fleet.yaml");
    std::fs::write(
        &cfg,
        "sites:\n  - name: bench-loop\n    subnets: [127.0.0.0/8]\n",
    )
    .unwrap();
    let port = 40000 + (std::process::id() % 20000) as u16;
    let d = ServiceDaemon::new_with_port(port).unwrap();
    d.disable_interface(IfKind::All).unwrap();
    d.enable_interface(IfKind::LoopbackV4).unwrap();
    let txt = [
        ("unit", "unit-42"),
        ("version", "0.1.0"),
        ("http_port", "8080"),
        ("profiles", "gen3,legacy"),
    ];
    let info = ServiceInfo::new(
        "_pfx._tcp.local.",
        "unit-42",
        "unit-42.local.",
        "127.0.0.1",
        8080,
        &txt[..],
    )
    .unwrap();
    d.register(info).unwrap();
    let db = dir.path().join("fleet.db");
    let out = Command::new(env!("CARGO_BIN_EXE_pfx-fleet"))
        .args([
            "--config",
            cfg.to_str().unwrap(),
            "--db",
            db.to_str().unwrap(),
        ])
        .args(["discover", "--timeout-s", "3", "--loopback-only", "--json"])
        .arg("--mdns-port")
        .arg(port.to_string())
        .output()
        .unwrap();
    let _ = d.shutdown();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let u = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["unit_id"] == "unit-42")
        .expect("unit-42 discovered");
    assert_eq!(u["site"], "bench-loop");
    assert_eq!(u["host"], "127.0.0.1");
    assert_eq!(u["version"], "0.1.0");
    assert_eq!(u["source"], "mdns");
    // Recorded: status (a separate process) sees it.
    let st = Command::new(env!("CARGO_BIN_EXE_pfx-fleet"))
        .args([
            "--config",
            cfg.to_str().unwrap(),
            "--db",
            db.to_str().unwrap(),
        ])
        .args(["status", "--site", "bench-loop", "--json"])
        .output()
        .unwrap();
    let st: serde_json::Value = serde_json::from_slice(&st.stdout).unwrap();
    assert_eq!(st[0]["unit"], "unit-42");
    assert_eq!(st[0]["state"], "never");
}
