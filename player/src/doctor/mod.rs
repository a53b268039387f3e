//! `pfx-player doctor`: why frames drop, from the NIC and a multicast sniff.
//!
//! This module is the pure part: `diagnose` turns measured `Evidence` into checks and
//! findings. `measure` gathers the evidence (one measurement, no retries) and `sniff`
//! counts multicast at the Ethernet frame boundary.

pub mod measure;
pub mod sniff;

use std::net::Ipv4Addr;

use serde::Serialize;
use serde_json::json;

use crate::nic::NicStatus;
use pfx_api::profile::SyncStatus;
use sniff::{SniffResult, is_link_local_group};

/// Unsubscribed multicast at or above this rate is a finding. A 10BASE-T pole on an
/// unmanaged switch gets a copy of all of it; 1 Mbit/s is a tenth of such a port.
pub const FLOOD_MBIT_THRESHOLD: f64 = 1.0;
pub const TOP_GROUPS: usize = 5;

/// Everything one doctor run measured.
#[derive(Debug, Clone)]
pub struct Evidence {
    pub interface: String,
    pub host: String,
    /// NIC readings before and after the sniff window (the second carries the rates).
    pub nic_before: NicStatus,
    pub nic_after: NicStatus,
    pub sniff: SniffResult,
    /// Groups this host joined on the interface (/proc/net/igmp).
    pub joined: Vec<Ipv4Addr>,
    /// NETDEV WATCHDOG lines for this interface, or why the kernel log could not be read.
    pub watchdog_lines: Result<Vec<String>, String>,
    /// (interface, IPv4 address, prefix length) of every non-loopback address.
    pub addresses: Vec<(String, Ipv4Addr, u8)>,
    /// The local player's MultiSync status and its frame rate (from its `/profile`), or
    /// why it could not be read (no player running there).
    pub sync: Result<(SyncStatus, u32), String>,
    /// The local player's output counters at the start and end of the window, or why
    /// they could not be read.
    pub outputs: Result<OutputWindow, String>,
}

/// Two readings of the local player's outputs, `seconds` apart.
#[derive(Debug, Clone, Default)]
pub struct OutputWindow {
    pub before: Vec<pfx_api::profile::OutputStats>,
    pub after: Vec<pfx_api::profile::OutputStats>,
    pub fps: u32,
    pub seconds: f64,
}

/// Bytes a datagram carries on the wire beside its payload: UDP, IPv4 and Ethernet
/// headers (no preamble or gap, so a link rate derived from it is a floor).
const WIRE_OVERHEAD: u64 = 8 + 20 + 14;

/// A remote that heard nothing for this long while it plays has lost its master (FPP's
/// master sends at least every 10 frames, twice a second at 20 fps).
pub const SYNC_SILENT_MS: f64 = 2_000.0;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Ok,
    Warning,
    Problem,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Check {
    pub id: &'static str,
    pub verdict: Verdict,
    pub evidence: serde_json::Value,
    pub fix: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    pub interface: String,
    pub host: String,
    /// Checks whose verdict is not ok.
    pub findings: Vec<Check>,
    /// Every check made, including the healthy ones with their evidence.
    pub checks: Vec<Check>,
}

impl Report {
    /// 0 healthy, 1 findings. (2, could not measure, is decided before there is a report.)
    pub fn exit_code(&self) -> u8 {
        if self.findings.is_empty() { 0 } else { 1 }
    }
}

pub fn diagnose(e: &Evidence) -> Report {
    let checks = vec![
        pause_frames(e),
        tx_timeout(e),
        link_10m(e),
        multicast_flood(e),
        dual_homed(e),
        sync_packets(e),
        sync_jitter(e),
        whole_frames(e),
    ];
    Report {
        interface: e.interface.clone(),
        host: e.host.clone(),
        findings: checks
            .iter()
            .filter(|c| c.verdict != Verdict::Ok)
            .cloned()
            .collect(),
        checks,
    }
}

fn delta(before: Option<u64>, after: Option<u64>) -> Option<u64> {
    Some(after?.saturating_sub(before?))
}

fn pause_frames(e: &Evidence) -> Check {
    let (b, a) = (&e.nic_before, &e.nic_after);
    let rx = delta(b.pause_rx_frames.total, a.pause_rx_frames.total);
    let tx = delta(b.pause_tx_frames.total, a.pause_tx_frames.total);
    let honours = a.pause.map(|p| p.rx || p.autoneg);
    let verdict = if rx.unwrap_or(0) > 0 || tx.unwrap_or(0) > 0 {
        Verdict::Problem
    } else if honours == Some(true) {
        Verdict::Warning
    } else {
        Verdict::Ok
    };
    Check {
        id: "pause-frames",
        verdict,
        evidence: json!({
            "settings": a.pause,
            "settings_error": a.pause_error,
            "rx_frames_in_window": rx,
            "tx_frames_in_window": tx,
            "rx_per_s": a.pause_rx_frames.per_s,
            "tx_per_s": a.pause_tx_frames.per_s,
            "rx_total": a.pause_rx_frames.total,
            "tx_total": a.pause_tx_frames.total,
            "rx_source": a.pause_rx_frames.source,
            "tx_source": a.pause_tx_frames.source,
            "note": match verdict {
                Verdict::Problem => "PAUSE frames during the measurement: the switch is stalling this NIC's transmit queue",
                Verdict::Warning => "PAUSE is honoured (rx or autoneg on): one slow port on the switch can stall this host's sends",
                Verdict::Ok => "no PAUSE frames in the window, and PAUSE is off or not supported",
            },
        }),
        fix: format!("pfx-player nic pause-off {}", e.interface),
    }
}

fn tx_timeout(e: &Evidence) -> Check {
    let grew = delta(
        e.nic_before.tx_timeouts.total,
        e.nic_after.tx_timeouts.total,
    );
    let (lines, log_error) = match &e.watchdog_lines {
        Ok(l) => (l.clone(), None),
        Err(err) => (Vec::new(), Some(err.clone())),
    };
    let verdict = if grew.unwrap_or(0) > 0 || !lines.is_empty() {
        Verdict::Problem
    } else {
        Verdict::Ok
    };
    let last: Vec<&String> = lines.iter().rev().take(3).collect();
    Check {
        id: "tx-timeout",
        verdict,
        evidence: json!({
            "tx_timeout_total": e.nic_after.tx_timeouts.total,
            "tx_timeout_growth_in_window": grew,
            "tx_timeout_source": e.nic_after.tx_timeouts.source,
            "watchdog_lines_since_boot": lines.len(),
            "last_watchdog_lines": last,
            "kernel_log_error": log_error,
        }),
        fix: format!(
            "The transmit queue of {} stopped draining for seconds (NETDEV WATCHDOG). Usually PAUSE from the switch: pfx-player nic pause-off {}; otherwise check the cable and switch port",
            e.interface, e.interface
        ),
    }
}

fn link_10m(e: &Evidence) -> Check {
    let speed = e.nic_after.speed_mbps;
    Check {
        id: "link-10m",
        verdict: if speed == Some(10) {
            Verdict::Problem
        } else {
            Verdict::Ok
        },
        evidence: json!({
            "speed_mbps": speed,
            "duplex": e.nic_after.duplex,
            "carrier": e.nic_after.link.carrier,
            "carrier_changes": e.nic_after.link.carrier_changes,
        }),
        fix: "The link negotiated 10 Mbit/s (10BASE-T fallback): replace the cable or move to another switch port, and check the port's speed setting".into(),
    }
}

#[derive(Debug, Clone, Serialize)]
struct GroupRate {
    group: Ipv4Addr,
    mbit_per_s: f64,
    packets_per_s: f64,
    subscribed: bool,
}

fn multicast_flood(e: &Evidence) -> Check {
    let s = &e.sniff;
    let secs = if s.seconds > 0.0 { s.seconds } else { f64::NAN };
    let mut rates: Vec<GroupRate> = s
        .groups
        .iter()
        .filter(|(g, _)| !is_link_local_group(**g))
        .map(|(g, c)| GroupRate {
            group: *g,
            mbit_per_s: c.bytes as f64 * 8.0 / secs / 1e6,
            packets_per_s: c.frames as f64 / secs,
            subscribed: e.joined.contains(g),
        })
        .collect();
    rates.sort_by(|a, b| b.mbit_per_s.total_cmp(&a.mbit_per_s));
    let unsub: Vec<&GroupRate> = rates.iter().filter(|r| !r.subscribed).collect();
    let mbit: f64 = unsub.iter().map(|r| r.mbit_per_s).sum();
    let pps: f64 = unsub.iter().map(|r| r.packets_per_s).sum();
    let link_local_mbit: f64 = s
        .groups
        .iter()
        .filter(|(g, _)| is_link_local_group(**g))
        .map(|(_, c)| c.bytes as f64 * 8.0 / secs / 1e6)
        .sum();
    let share = e
        .nic_after
        .speed_mbps
        .map(|sp| round2(mbit / sp as f64 * 100.0));
    Check {
        id: "multicast-flood",
        verdict: if mbit >= FLOOD_MBIT_THRESHOLD {
            Verdict::Problem
        } else {
            Verdict::Ok
        },
        evidence: json!({
            "seconds": round2(s.seconds),
            "unsubscribed_mbit_per_s": round2(mbit),
            "unsubscribed_packets_per_s": round2(pps),
            "unsubscribed_groups": unsub.len(),
            "link_speed_mbps": e.nic_after.speed_mbps,
            "share_of_link_pct_floor": share,
            "counted_at": "Ethernet frame boundary (header + payload; preamble, inter-frame gap and FCS not counted, so the share is a floor)",
            "top_groups": rates.iter().take(TOP_GROUPS).map(|r| json!({
                "group": r.group.to_string(),
                "mbit_per_s": round2(r.mbit_per_s),
                "packets_per_s": round2(r.packets_per_s),
                "subscribed": r.subscribed,
            })).collect::<Vec<_>>(),
            "link_local_224_0_0_x_mbit_per_s": round2(link_local_mbit),
            "threshold_mbit_per_s": FLOOD_MBIT_THRESHOLD,
            "kernel_drops": s.kernel_drops,
        }),
        fix: "Unsubscribed multicast is flooded to this port: turn on IGMP snooping with an IGMP querier on the switch (an unmanaged switch floods every group to every port, and a 10 Mbit/s pole cannot drain it)".into(),
    }
}

fn round2(v: f64) -> f64 {
    // + 0.0 turns the -0.0 of an empty float sum into 0.0.
    (v * 100.0).round() / 100.0 + 0.0
}

/// Pairs of interfaces with addresses in one IPv4 subnet. Pure.
pub fn same_subnet_pairs(addrs: &[(String, Ipv4Addr, u8)]) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    for (i, (ia, aa, pa)) in addrs.iter().enumerate() {
        for (ib, ab, pb) in &addrs[i + 1..] {
            if ia == ib || aa.is_loopback() || ab.is_loopback() {
                continue;
            }
            let p = (*pa).min(*pb).min(32);
            let mask = if p == 0 { 0 } else { u32::MAX << (32 - p) };
            let na = u32::from(*aa) & mask;
            if na == u32::from(*ab) & mask {
                let pair = (
                    ia.clone(),
                    ib.clone(),
                    format!("{}/{p}", Ipv4Addr::from(na)),
                );
                if !out.contains(&pair) {
                    out.push(pair);
                }
            }
        }
    }
    out
}

fn dual_homed(e: &Evidence) -> Check {
    let pairs = same_subnet_pairs(&e.addresses);
    let involves_measured = pairs
        .iter()
        .any(|(a, b, _)| *a == e.interface || *b == e.interface);
    Check {
        id: "dual-homed",
        verdict: if pairs.is_empty() {
            Verdict::Ok
        } else {
            Verdict::Warning
        },
        evidence: json!({
            "measured_interface": e.interface,
            "same_subnet": pairs.iter().map(|(a, b, net)| json!({"interfaces": [a, b], "subnet": net})).collect::<Vec<_>>(),
            "measured_interface_involved": involves_measured,
            "note": "a capture on the wrong interface testifies about a wire it is not on",
        }),
        fix: "Two interfaces share a subnet: make sure the measurement used the interface that carries the show (--iface), or move one interface to another subnet".into(),
    }
}

/// A remote whose sync packets stopped while it plays (or that never heard one).
fn sync_packets(e: &Evidence) -> Check {
    let ok = |evidence| Check {
        id: "sync-packets",
        verdict: Verdict::Ok,
        evidence,
        fix: String::new(),
    };
    let (s, _) = match &e.sync {
        Err(why) => return ok(json!({"player": why})),
        Ok(v) => v,
    };
    if s.role != "remote" {
        return ok(json!({"role": s.role}));
    }
    let evidence = json!({
        "role": s.role,
        "state": s.state,
        "master": s.master,
        "last_packet_age_ms": s.last_packet_age_ms,
        "packets_received": s.packets_received,
        "packets_dropped": s.packets_dropped,
    });
    let playing = s.state == "playing" || s.state == "lost";
    match s.last_packet_age_ms {
        Some(age) if playing && age > SYNC_SILENT_MS => Check {
            id: "sync-packets",
            verdict: Verdict::Problem,
            evidence,
            fix: format!(
                "This remote plays but has heard no sync packet for {:.1} s: check that the master runs and reaches it (same network, port 32320); behind a switch or router with broken IGMP snooping, give the master `transport: unicast` and list this unit under `remotes`",
                age / 1000.0
            ),
        },
        None => Check {
            id: "sync-packets",
            verdict: Verdict::Warning,
            evidence,
            fix: "This remote has not heard any sync packet since it started: if its master is playing, check the master's `sync.interface` and port, and multicast on the switch (or use `transport: unicast` on the master)".into(),
        },
        _ => ok(evidence),
    }
}

/// A remote whose packets wander by more than a frame cannot hold phase by them.
fn sync_jitter(e: &Evidence) -> Check {
    let ok = |evidence| Check {
        id: "sync-jitter",
        verdict: Verdict::Ok,
        evidence,
        fix: String::new(),
    };
    let (s, fps) = match &e.sync {
        Err(why) => return ok(json!({"player": why})),
        Ok(v) => v,
    };
    if s.role != "remote" {
        return ok(json!({"role": s.role}));
    }
    let frame_ms = 1000.0 / f64::from((*fps).max(1));
    let evidence =
        json!({"jitter_ms": s.jitter_ms, "frame_ms": frame_ms, "offset_ms": s.offset_ms});
    match s.jitter_ms {
        Some(j) if j > frame_ms => Check {
            id: "sync-jitter",
            verdict: Verdict::Problem,
            evidence,
            fix: format!(
                "Sync packets arrive with {j:.1} ms of jitter, more than a frame ({frame_ms:.1} ms): the path from the master is congested or wireless; put master and remotes on a wired switch, or keep show traffic off that path"
            ),
        },
        _ => ok(evidence),
    }
}

/// An output that could not send every frame whole in the window: which one, how many
/// frames went whole, in part and not at all, and why — what its link carried against
/// what the show needs from it.
fn whole_frames(e: &Evidence) -> Check {
    let ok = |evidence| Check {
        id: "whole-frames",
        verdict: Verdict::Ok,
        evidence,
        fix: String::new(),
    };
    let w = match &e.outputs {
        Err(why) => return ok(json!({"player": why})),
        Ok(w) => w,
    };
    let secs = w.seconds.max(1e-3);
    let mut short = Vec::new();
    let mut all = Vec::new();
    for a in &w.after {
        let Some(b) = w.before.iter().find(|b| b.name == a.name) else {
            continue;
        };
        let (ca, cb) = (&a.counters, &b.counters);
        let d = |x: u64, y: u64| x.saturating_sub(y) as f64 / secs;
        let whole = d(ca.frames_sent, cb.frames_sent);
        let partial = d(ca.frames_partial, cb.frames_partial);
        let skipped = d(ca.frames_skipped, cb.frames_skipped);
        let carried =
            (d(ca.bytes, cb.bytes) + WIRE_OVERHEAD as f64 * d(ca.packets, cb.packets)) * 8.0 / 1e6;
        let need =
            (ca.frame_bytes + WIRE_OVERHEAD * ca.frame_datagrams) as f64 * 8.0 * f64::from(w.fps)
                / 1e6;
        let slowest = a
            .rates
            .as_ref()
            .and_then(|r| Some((r.slowest_slot?, r.slowest_slot_per_s?)));
        let v = json!({
            "output": a.name,
            "slowest_slot": slowest.map(|s| s.0),
            "slowest_slot_per_s": slowest.map(|s| round2(s.1)),
            "whole_per_s": round2(whole),
            "partial_per_s": round2(partial),
            "skipped_per_s": round2(skipped),
            "fps": w.fps,
            "link_mbit_s": round2(carried),
            "needs_mbit_s": round2(need),
        });
        if partial + skipped > 0.0 {
            short.push((
                a.name.clone(),
                whole,
                partial,
                skipped,
                carried,
                need,
                slowest,
            ));
        }
        all.push(v);
    }
    let evidence = json!({"seconds": round2(secs), "outputs": all});
    if short.is_empty() {
        return ok(evidence);
    }
    let lines: Vec<String> = short
        .iter()
        .map(|(name, whole, partial, skipped, carried, need, slowest)| {
            // Frames sent in part leave some universes behind: name the one that got least.
            let behind = match slowest {
                Some((slot, per_s)) if *partial > 0.0 => {
                    format!("; its slowest datagram (universe {slot}) got {per_s:.1} frames/s")
                }
                _ => String::new(),
            };
            format!(
                "output {name} sent {whole:.1} whole frames/s of {fps} ({partial:.1}/s in part, {skipped:.1}/s skipped{behind}): its link carried {carried:.1} Mbit/s where it needs {need:.1} Mbit/s at {fps} fps",
                fps = w.fps
            )
        })
        .collect();
    Check {
        id: "whole-frames",
        verdict: Verdict::Problem,
        evidence,
        fix: format!(
            "{}. The link is slower than the show: look for PAUSE frames (`pfx-player nic pause-off`), a 100 Mbit/s or shared switch port, or another sender on it; or lower the show's fps or split the output over links",
            lines.join("; ")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nic::{CounterReading, PauseSettings};
    use sniff::GroupCount;

    fn counter(total: Option<u64>, source: &str) -> CounterReading {
        CounterReading {
            source: source.into(),
            total,
            per_s: None,
        }
    }

    fn healthy() -> Evidence {
        let nic = NicStatus {
            interface: "eth0".into(),
            host: "unit-1".into(),
            pause: Some(PauseSettings::OFF),
            pause_rx_frames: counter(Some(0), "driver:rx_pause"),
            pause_tx_frames: counter(Some(0), "driver:tx_pause"),
            tx_timeouts: counter(Some(0), "sysfs"),
            speed_mbps: Some(1000),
            ..Default::default()
        };
        Evidence {
            interface: "eth0".into(),
            host: "unit-1".into(),
            nic_before: nic.clone(),
            nic_after: nic,
            sniff: SniffResult {
                interface: "eth0".into(),
                seconds: 5.0,
                ..Default::default()
            },
            joined: vec![],
            watchdog_lines: Ok(vec![]),
            addresses: vec![("eth0".into(), Ipv4Addr::new(10, 0, 0, 5), 24)],
            sync: Err("no player answered at http://127.0.0.1:8080".into()),
            outputs: Err("no player answered at http://127.0.0.1:8080".into()),
        }
    }

    fn output(name: &str, sent: u64, skipped: u64, packets: u64) -> pfx_api::profile::OutputStats {
        pfx_api::profile::OutputStats {
            name: name.into(),
            counters: pfx_api::profile::CountersSnapshot {
                frames_sent: sent,
                frames_skipped: skipped,
                packets,
                bytes: packets * 636,
                frame_bytes: 170 * 636,
                frame_datagrams: 170,
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn an_output_whose_link_is_too_slow_is_named_with_both_rates() {
        let mut e = healthy();
        // 5 s at 40 fps: 100 whole frames and 100 skipped; 100 × 170 datagrams.
        e.outputs = Ok(OutputWindow {
            before: vec![output("big", 1000, 0, 170_000), output("small", 10, 0, 10)],
            after: vec![
                output("big", 1100, 100, 187_000),
                output("small", 210, 0, 210),
            ],
            fps: 40,
            seconds: 5.0,
        });
        let r = diagnose(&e);
        assert_eq!(ids(&r), vec!["whole-frames"]);
        let fix = &r.findings[0].fix;
        assert!(
            fix.contains("output big sent 20.0 whole frames/s of 40"),
            "{fix}"
        );
        assert!(fix.contains("20.0/s skipped"), "{fix}");
        // 3,400 datagrams/s × 678 bytes = 18.4 Mbit/s; 170 × 678 × 40 = 36.9 Mbit/s.
        assert!(
            fix.contains("carried 18.4 Mbit/s where it needs 36.9 Mbit/s"),
            "{fix}"
        );
        assert!(!fix.contains("output small"), "{fix}");
        // Every frame whole: no finding.
        e.outputs = Ok(OutputWindow {
            before: vec![output("big", 1000, 0, 170_000)],
            after: vec![output("big", 1200, 0, 204_000)],
            fps: 40,
            seconds: 5.0,
        });
        assert!(ids(&diagnose(&e)).is_empty());
    }

    fn remote(
        state: &str,
        age: Option<f64>,
        jitter: Option<f64>,
    ) -> Result<(SyncStatus, u32), String> {
        Ok((
            SyncStatus {
                role: "remote".into(),
                state: state.into(),
                master: Some("10.0.0.1".into()),
                last_packet_age_ms: age,
                jitter_ms: jitter,
                ..Default::default()
            },
            40,
        ))
    }

    #[test]
    fn a_remote_whose_packets_stop_is_a_problem() {
        let mut e = healthy();
        e.sync = remote("playing", Some(150.0), Some(0.2));
        assert!(diagnose(&e).findings.is_empty());
        e.sync = remote("playing", Some(2_500.0), Some(0.2));
        let r = diagnose(&e);
        assert_eq!(ids(&r), vec!["sync-packets"]);
        assert_eq!(r.findings[0].verdict, Verdict::Problem);
        assert!(
            r.findings[0].fix.contains("unicast"),
            "{}",
            r.findings[0].fix
        );
        // Idle between shows: a master sends nothing, that is not a loss.
        e.sync = remote("idle", Some(60_000.0), None);
        assert!(diagnose(&e).findings.is_empty());
        // Never heard one: a warning.
        e.sync = remote("idle", None, None);
        let r = diagnose(&e);
        assert_eq!(ids(&r), vec!["sync-packets"]);
        assert_eq!(r.findings[0].verdict, Verdict::Warning);
    }

    #[test]
    fn jitter_beyond_a_frame_is_a_problem() {
        let mut e = healthy();
        // 40 fps: a frame is 25 ms.
        e.sync = remote("playing", Some(100.0), Some(24.0));
        assert!(diagnose(&e).findings.is_empty());
        e.sync = remote("playing", Some(100.0), Some(26.0));
        let r = diagnose(&e);
        assert_eq!(ids(&r), vec!["sync-jitter"]);
        assert!(r.findings[0].fix.contains("more than a frame"));
    }

    #[test]
    fn masters_and_standalone_units_have_no_sync_findings() {
        let mut e = healthy();
        for role in ["master", "standalone"] {
            e.sync = Ok((
                SyncStatus {
                    role: role.into(),
                    last_packet_age_ms: None,
                    jitter_ms: Some(99.0),
                    ..Default::default()
                },
                40,
            ));
            assert!(diagnose(&e).findings.is_empty(), "{role}");
        }
    }

    fn ids(r: &Report) -> Vec<&str> {
        r.findings.iter().map(|f| f.id).collect()
    }

    #[test]
    fn healthy_host_has_no_findings_and_exit_0() {
        let r = diagnose(&healthy());
        assert!(r.findings.is_empty(), "{:?}", r.findings);
        assert_eq!(r.checks.len(), 8);
        assert_eq!(r.exit_code(), 0);
    }

    #[test]
    fn mock_bcmgenet_pause_frames_in_window_are_a_problem() {
        let mut e = healthy();
        e.nic_after.pause = Some(PauseSettings {
            autoneg: true,
            rx: true,
            tx: true,
        });
        e.nic_before.pause_rx_frames = counter(Some(2_400_000), "driver:rx_pause");
        e.nic_after.pause_rx_frames = counter(Some(2_400_650), "driver:rx_pause");
        let r = diagnose(&e);
        assert_eq!(ids(&r), vec!["pause-frames"]);
        assert_eq!(r.findings[0].verdict, Verdict::Problem);
        assert_eq!(r.findings[0].evidence["rx_frames_in_window"], 650);
        assert_eq!(r.findings[0].fix, "pfx-player nic pause-off eth0");
        assert_eq!(r.exit_code(), 1);
    }

    #[test]
    fn mock_pi4_default_settings_without_frames_is_a_warning() {
        let mut e = healthy();
        e.nic_after.pause = Some(PauseSettings {
            autoneg: true,
            rx: true,
            tx: true,
        });
        let r = diagnose(&e);
        assert_eq!(ids(&r), vec!["pause-frames"]);
        assert_eq!(r.findings[0].verdict, Verdict::Warning);
    }

    #[test]
    fn unsupported_pause_counters_are_not_a_finding_nor_zero() {
        let mut e = healthy();
        e.nic_before.pause = None;
        e.nic_after.pause = None;
        e.nic_before.pause_rx_frames = CounterReading::unsupported();
        e.nic_after.pause_rx_frames = CounterReading::unsupported();
        let r = diagnose(&e);
        assert!(ids(&r).is_empty());
        let c = &r.checks[0];
        assert!(c.evidence["rx_frames_in_window"].is_null());
        assert_eq!(c.evidence["rx_source"], "unsupported");
    }

    #[test]
    fn tx_timeout_growth_or_watchdog_lines() {
        let mut e = healthy();
        e.nic_after.tx_timeouts = counter(Some(2), "sysfs");
        assert_eq!(ids(&diagnose(&e)), vec!["tx-timeout"]);
        let mut e = healthy();
        e.watchdog_lines = Ok(vec![
            "NETDEV WATCHDOG: eth0 (bcmgenet): transmit queue 1 timed out 5000 ms".into(),
        ]);
        assert_eq!(ids(&diagnose(&e)), vec!["tx-timeout"]);
        // An unreadable kernel log alone is not a finding; it is said in the evidence.
        let mut e = healthy();
        e.watchdog_lines = Err("permission denied".into());
        let r = diagnose(&e);
        assert!(ids(&r).is_empty());
        assert_eq!(
            r.checks[1].evidence["kernel_log_error"],
            "permission denied"
        );
    }

    #[test]
    fn link_at_10_mbit_is_flagged() {
        let mut e = healthy();
        e.nic_after.speed_mbps = Some(10);
        assert_eq!(ids(&diagnose(&e)), vec!["link-10m"]);
        e.nic_after.speed_mbps = Some(100);
        assert!(ids(&diagnose(&e)).is_empty());
    }

    #[test]
    fn unsubscribed_flood_is_found_with_rate_share_and_top_groups() {
        let mut e = healthy();
        e.nic_after.speed_mbps = Some(100);
        // 16.79 Mbit/s over 5 s (the incident's flood) in one group, plus a subscribed
        // group and mDNS that must not count.
        let bytes = (16.79e6 / 8.0 * 5.0) as u64;
        e.sniff.groups.insert(
            Ipv4Addr::new(239, 255, 0, 1),
            GroupCount {
                frames: bytes / 1042,
                bytes,
            },
        );
        e.sniff.groups.insert(
            Ipv4Addr::new(239, 9, 9, 9),
            GroupCount {
                frames: 5000,
                bytes: 5_000_000,
            },
        );
        e.sniff.groups.insert(
            Ipv4Addr::new(224, 0, 0, 251),
            GroupCount {
                frames: 5000,
                bytes: 5_000_000,
            },
        );
        e.joined = vec![Ipv4Addr::new(239, 9, 9, 9)];
        let r = diagnose(&e);
        assert_eq!(ids(&r), vec!["multicast-flood"]);
        let ev = &r.findings[0].evidence;
        assert_eq!(ev["unsubscribed_mbit_per_s"], 16.79);
        assert_eq!(ev["share_of_link_pct_floor"], 16.79);
        assert_eq!(ev["top_groups"][0]["group"], "239.255.0.1");
        assert_eq!(ev["top_groups"][1]["subscribed"], true);
        assert!(r.findings[0].fix.contains("IGMP snooping"));
    }

    #[test]
    fn small_or_subscribed_multicast_is_not_a_flood() {
        let mut e = healthy();
        e.sniff.groups.insert(
            Ipv4Addr::new(239, 1, 2, 3),
            GroupCount {
                frames: 100,
                bytes: 100_000,
            },
        ); // 0.16 Mbit/s
        e.sniff.groups.insert(
            Ipv4Addr::new(239, 9, 9, 9),
            GroupCount {
                frames: 50_000,
                bytes: 50_000_000,
            },
        );
        e.joined = vec![Ipv4Addr::new(239, 9, 9, 9)];
        assert!(ids(&diagnose(&e)).is_empty());
    }

    #[test]
    fn dual_homed_pairs() {
        let a = |i: &str, ip: [u8; 4], p| (i.to_string(), Ipv4Addr::from(ip), p);
        let pairs = same_subnet_pairs(&[
            a("eth0", [192, 168, 1, 10], 24),
            a("wlan0", [192, 168, 1, 23], 24),
            a("eth1", [10, 0, 0, 1], 8),
            a("lo", [127, 0, 0, 1], 8),
        ]);
        assert_eq!(
            pairs,
            vec![("eth0".into(), "wlan0".into(), "192.168.1.0/24".into())]
        );
        assert!(
            same_subnet_pairs(&[
                a("eth0", [192, 168, 1, 10], 24),
                a("eth1", [192, 168, 2, 10], 24)
            ])
            .is_empty()
        );
        let mut e = healthy();
        e.addresses.push(a("wlan0", [10, 0, 0, 77], 24));
        let r = diagnose(&e);
        assert_eq!(ids(&r), vec!["dual-homed"]);
        assert_eq!(r.findings[0].verdict, Verdict::Warning);
        assert_eq!(r.findings[0].evidence["measured_interface_involved"], true);
    }
}
