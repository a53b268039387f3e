//! Each golden file reads into its type and writes back to the same bytes: the types'
//! Deserialize and Serialize agree with each other and with the wire. The files themselves
//! are produced by the player's and the agent's own tests (see `pfx_api::golden`).

use pfx_api::agent::{ApplyReport, StatusReport};
use pfx_api::golden;
use pfx_api::nic::NicStatus;
use pfx_api::profile::ProfileDoc;
use pfx_api::update::{BundleInfo, InstallReport, SwitchReport, UpdatePutReport, UpdateStatus};
use serde::Serialize;
use serde::de::DeserializeOwned;

fn round_trip<T: DeserializeOwned + Serialize>(name: &str) -> T {
    let text = golden::read(name);
    let v: T = match serde_json::from_str(&text) {
        Ok(v) => v,
        Err(e) => panic!("{name} does not read as its type: {e}"),
    };
    let again = serde_json::to_string_pretty(&v).unwrap() + "\n";
    assert_eq!(again, text, "{name} does not write back to the same bytes");
    v
}

#[test]
fn profile() {
    let d: ProfileDoc = round_trip("profile.json");
    assert_eq!(d.unit, "gen3-7");
    assert_eq!(d.snapshot.stages["wire_send"].p95_us, 80_000.0);
    assert_eq!(d.snapshot.outputs[0].counters.errors["EAGAIN"], 10);
    assert_eq!(d.snapshot.nic.as_ref().and_then(|n| n.qdisc_drops), Some(7));
}

#[test]
fn nic() {
    let n: NicStatus = round_trip("nic.json");
    assert_eq!(n.link.tx_errors, Some(2));
    assert_eq!(n.pause_tx_frames.total, None);
}

#[test]
fn agent_reports() {
    let a: ApplyReport = round_trip("agent-apply.json");
    assert!(a.verified && a.readback.and_then(|r| r.pause).is_some_and(|p| p.is_off()));
    let s: StatusReport = round_trip("agent-status.json");
    assert_eq!(s.player.fps, Some(60.0));
}

#[test]
fn update_answers() {
    let s: UpdateStatus = round_trip("update-status.json");
    assert_eq!(
        s.booted_slot_info().and_then(|b| b.version.as_deref()),
        Some("2.0.0")
    );
    assert!(s.health.is_some_and(|h| h.passed));
    let p: UpdatePutReport = round_trip("update-put.json");
    assert!(!p.stored);
    let i: InstallReport = round_trip("update-install.json");
    assert!(i.installed);
    let w: SwitchReport = round_trip("update-switch.json");
    assert!(w.scheduled);
    let b: BundleInfo = round_trip("bundle.json");
    assert_eq!(b.compatible, "pfx-rpi4-arm64");
}
