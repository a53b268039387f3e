//! Prometheus text exposition (format 0.0.4) of a profiler snapshot. Pure: snapshot in,
//! text out. Every family has HELP and TYPE lines and its samples together; counters end
//! in `_total`; a NIC counter the driver does not have is left out (and listed in
//! `pfx_nic_counter_supported` as 0), never exported as 0.

use std::fmt::Write;

use crate::nic::CounterReading;
use crate::profiler::{Snapshot, StageStats, window::SERIES};

struct Family {
    name: &'static str,
    help: &'static str,
    kind: &'static str,
    samples: Vec<(String, f64)>,
}

/// Quotes a label value: backslash, double quote and newline are escaped.
pub fn escape_label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn labels(pairs: &[(&str, &str)]) -> String {
    if pairs.is_empty() {
        return String::new();
    }
    let inner: Vec<String> = pairs
        .iter()
        .map(|(k, v)| format!("{k}=\"{}\"", escape_label(v)))
        .collect();
    format!("{{{}}}", inner.join(","))
}

fn num(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        }
    } else {
        format!("{v}")
    }
}

fn fam(name: &'static str, kind: &'static str, help: &'static str) -> Family {
    Family {
        name,
        help,
        kind,
        samples: Vec::new(),
    }
}

fn stage_samples(f: &mut Family, stages: &std::collections::BTreeMap<String, StageStats>) {
    for stage in SERIES {
        let Some(s) = stages.get(stage) else { continue };
        for (q, us) in [
            ("0.5", s.p50_us),
            ("0.95", s.p95_us),
            ("0.99", s.p99_us),
            ("1", s.max_us),
        ] {
            f.samples.push((
                labels(&[("stage", stage), ("quantile", q)]),
                (us * 1000.0).round() / 1e9,
            ));
        }
    }
}

/// The whole exposition. `healthy` is `ProfilerHandle::health().is_ok()`.
///
/// One piece on purpose (over 100 lines, allowed in `scripts/long-functions`): it is the
/// `/metrics` document itself, one family after another in the order scrapers and the
/// golden test read them, a flat list rather than steps; split, the order would live in
/// one place and the families in another.
pub fn render(s: &Snapshot, unit: &str, version: &str, healthy: bool) -> String {
    let mut fams: Vec<Family> = Vec::new();

    let mut f = fam(
        "pfx_info",
        "gauge",
        "Unit identity: always 1, labelled with unit id and version.",
    );
    f.samples
        .push((labels(&[("unit", unit), ("version", version)]), 1.0));
    fams.push(f);

    let mut f = fam(
        "pfx_healthy",
        "gauge",
        "1 while the render loop runs on time (GET /health is 200), else 0.",
    );
    f.samples
        .push((String::new(), if healthy { 1.0 } else { 0.0 }));
    fams.push(f);

    let mut f = fam(
        "pfx_stage_seconds",
        "gauge",
        "Per-stage duration over the rolling window: quantile 0.5/0.95/0.99, and 1 = max (exact, nearest rank).",
    );
    stage_samples(&mut f, &s.stages);
    fams.push(f);

    let mut f = fam(
        "pfx_stage_since_start_seconds",
        "gauge",
        "Per-stage duration since the profiler started: quantile 0.5/0.95/0.99 (HDR histogram, 0.1 % resolution), 1 = max.",
    );
    stage_samples(&mut f, &s.since_start.stages);
    fams.push(f);

    let g = |name, help, v: f64| {
        let mut f = fam(name, "gauge", help);
        f.samples.push((String::new(), v));
        f
    };
    let c = |name, help, v: f64| {
        let mut f = fam(name, "counter", help);
        f.samples.push((String::new(), v));
        f
    };
    fams.push(g(
        "pfx_window_seconds",
        "Span of the rolling window.",
        s.window_s,
    ));
    fams.push(g(
        "pfx_window_frames",
        "Frames that started within the rolling window.",
        s.frames as f64,
    ));
    fams.push(g(
        "pfx_window_deadline_misses",
        "Frames within the rolling window whose work ended after the next deadline.",
        s.deadline_misses as f64,
    ));
    fams.push(g(
        "pfx_window_skipped_ticks",
        "Ticks skipped (never rendered) within the rolling window.",
        s.skipped_ticks as f64,
    ));
    fams.push(g(
        "pfx_fps",
        "Frames per second over the rolling window, on the render loop's own clock.",
        s.fps,
    ));
    fams.push(g(
        "pfx_fps_target",
        "The render loop's target frame rate.",
        s.fps_target as f64,
    ));
    fams.push(c(
        "pfx_frames_total",
        "Frames rendered since the profiler started.",
        s.since_start.frames as f64,
    ));
    fams.push(c(
        "pfx_deadline_misses_total",
        "Deadline misses since the profiler started.",
        s.since_start.deadline_misses as f64,
    ));
    fams.push(c(
        "pfx_skipped_ticks_total",
        "Ticks skipped since the profiler started.",
        s.since_start.skipped_ticks as f64,
    ));
    fams.push(c(
        "pfx_samples_lost_total",
        "Frame samples the profiler never saw (its ring was full).",
        s.samples_lost as f64,
    ));
    fams.push(c(
        "pfx_source_late_total",
        "Frames whose sequence data was not decoded in time, so the previous frame went out again.",
        s.source_late as f64,
    ));
    fams.push(c(
        "pfx_source_errors_total",
        "Frames lost to a sequence decode error (a corrupt block), so the previous frame went out again.",
        s.source_errors as f64,
    ));
    fams.push(c(
        "pfx_profiler_cpu_seconds_total",
        "CPU time used by the profiler thread.",
        s.profiler_cpu_s,
    ));
    if let Some(age) = s.last_frame_age_ms {
        fams.push(g(
            "pfx_last_frame_age_seconds",
            "Wall time since the profiler last received a frame.",
            age / 1000.0,
        ));
    }

    // Per output.
    let mut packets = fam(
        "pfx_output_packets_total",
        "counter",
        "Datagrams the kernel accepted, per output.",
    );
    let mut bytes = fam(
        "pfx_output_bytes_total",
        "counter",
        "Bytes the kernel accepted, per output.",
    );
    let mut sent = fam(
        "pfx_output_frames_sent_total",
        "counter",
        "Frames whose every datagram the kernel accepted, per output.",
    );
    let mut dropped = fam(
        "pfx_output_frames_dropped_total",
        "counter",
        "Frames cut short because the socket would block (EAGAIN/ENOBUFS), per output.",
    );
    let mut failed = fam(
        "pfx_output_frames_failed_total",
        "counter",
        "Frames cut short by any other send error, per output.",
    );
    let mut partial = fam(
        "pfx_output_frames_partial_total",
        "counter",
        "Frames of which some datagrams went but not all (torn on the pole), per output.",
    );
    let mut skipped = fam(
        "pfx_output_frames_skipped_total",
        "counter",
        "Frames of which nothing went: the link could not carry them in time, or the socket refused the first datagram, per output.",
    );
    let mut whole_rate = fam(
        "pfx_output_frames_sent_per_second",
        "gauge",
        "Frames sent whole per second over the last ~1 s, per output.",
    );
    let mut skip_rate = fam(
        "pfx_output_frames_skipped_per_second",
        "gauge",
        "Frames skipped per second over the last ~1 s, per output.",
    );
    let mut partial_rate = fam(
        "pfx_output_frames_partial_per_second",
        "gauge",
        "Frames sent in part per second over the last ~1 s, per output.",
    );
    let mut slowest = fam(
        "pfx_output_slowest_datagram_frames_per_second",
        "gauge",
        "The datagram of a frame that went out least often over the last ~1 s and its frames per second (for sACN `datagram` is the universe), per output: after frames sent in part it names the pole rows that froze.",
    );
    let mut errors = fam(
        "pfx_output_errors_total",
        "counter",
        "Send errors by errno, per output.",
    );
    let mut drop_rate = fam(
        "pfx_output_frames_dropped_per_second",
        "gauge",
        "Frames dropped per second over the last ~1 s, per output.",
    );
    for o in &s.outputs {
        let l = [
            ("output", o.name.as_str()),
            ("protocol", o.protocol.as_str()),
            ("destination", o.destination.as_str()),
        ];
        let ls = labels(&l);
        packets
            .samples
            .push((ls.clone(), o.counters.packets as f64));
        bytes.samples.push((ls.clone(), o.counters.bytes as f64));
        sent.samples
            .push((ls.clone(), o.counters.frames_sent as f64));
        dropped
            .samples
            .push((ls.clone(), o.counters.frames_dropped as f64));
        failed
            .samples
            .push((ls.clone(), o.counters.frames_failed as f64));
        partial
            .samples
            .push((ls.clone(), o.counters.frames_partial as f64));
        skipped
            .samples
            .push((ls.clone(), o.counters.frames_skipped as f64));
        for (errno, n) in &o.counters.errors {
            errors.samples.push((
                labels(&[("output", o.name.as_str()), ("errno", errno.as_str())]),
                *n as f64,
            ));
        }
        if let Some(r) = &o.rates {
            drop_rate.samples.push((ls.clone(), r.frames_dropped_per_s));
            whole_rate.samples.push((ls.clone(), r.frames_sent_per_s));
            partial_rate
                .samples
                .push((ls.clone(), r.frames_partial_per_s));
            skip_rate.samples.push((ls, r.frames_skipped_per_s));
            if let (Some(slot), Some(per_s)) = (r.slowest_slot, r.slowest_slot_per_s) {
                let slot = slot.to_string();
                slowest.samples.push((
                    labels(&[
                        ("output", o.name.as_str()),
                        ("protocol", o.protocol.as_str()),
                        ("datagram", slot.as_str()),
                    ]),
                    per_s,
                ));
            }
        }
    }
    fams.extend([
        packets,
        bytes,
        sent,
        dropped,
        failed,
        partial,
        skipped,
        errors,
        drop_rate,
        whole_rate,
        partial_rate,
        skip_rate,
        slowest,
    ]);

    if let Some(n) = &s.nic {
        let iface = n.interface.as_str();
        let mut sup = fam(
            "pfx_nic_counter_supported",
            "gauge",
            "1 if the driver reports this NIC counter, 0 if unsupported (then its series is absent, not 0).",
        );
        let mut counter =
            |name: &'static str, help: &'static str, r: &CounterReading, key: &str| {
                sup.samples.push((
                    labels(&[("interface", iface), ("counter", key)]),
                    r.total.is_some() as u8 as f64,
                ));
                let mut v = Vec::new();
                if let Some(t) = r.total {
                    let mut f = fam(name, "counter", help);
                    f.samples.push((
                        labels(&[("interface", iface), ("source", r.source.as_str())]),
                        t as f64,
                    ));
                    v.push(f);
                }
                v
            };
        let mut nic_fams = Vec::new();
        nic_fams.extend(counter(
            "pfx_nic_pause_rx_frames_total",
            "802.3x PAUSE frames received by the show interface.",
            &n.pause_rx_frames,
            "pause_rx_frames",
        ));
        nic_fams.extend(counter(
            "pfx_nic_pause_tx_frames_total",
            "802.3x PAUSE frames sent by the show interface.",
            &n.pause_tx_frames,
            "pause_tx_frames",
        ));
        nic_fams.extend(counter(
            "pfx_nic_tx_timeouts_total",
            "Transmit timeouts of the show interface (sysfs).",
            &n.tx_timeouts,
            "tx_timeouts",
        ));
        let mut rate = fam(
            "pfx_nic_pause_frames_per_second",
            "gauge",
            "PAUSE frames per second, by direction.",
        );
        for (dir, r) in [("rx", &n.pause_rx_frames), ("tx", &n.pause_tx_frames)] {
            if let Some(v) = r.per_s {
                rate.samples
                    .push((labels(&[("interface", iface), ("direction", dir)]), v));
            }
        }
        nic_fams.push(rate);
        if let Some(p) = n.pause {
            let mut f = fam(
                "pfx_nic_pause_enabled",
                "gauge",
                "PAUSE settings of the show interface: 1 = on (autoneg, rx, tx).",
            );
            for (k, on) in [("autoneg", p.autoneg), ("rx", p.rx), ("tx", p.tx)] {
                f.samples.push((
                    labels(&[("interface", iface), ("setting", k)]),
                    on as u8 as f64,
                ));
            }
            nic_fams.push(f);
        }
        let opt_g = |name, help, v: Option<f64>| {
            let mut f = fam(name, "gauge", help);
            if let Some(v) = v {
                f.samples.push((labels(&[("interface", iface)]), v));
            }
            f
        };
        let opt_c = |name, help, v: Option<u64>| {
            let mut f = fam(name, "counter", help);
            if let Some(v) = v {
                f.samples.push((labels(&[("interface", iface)]), v as f64));
            }
            f
        };
        nic_fams.push(opt_g(
            "pfx_nic_speed_mbps",
            "Link speed of the show interface.",
            n.speed_mbps.map(f64::from),
        ));
        nic_fams.push(opt_g(
            "pfx_nic_full_duplex",
            "1 if the link is full duplex.",
            n.duplex.as_ref().map(|d| (d == "full") as u8 as f64),
        ));
        nic_fams.push(opt_g(
            "pfx_nic_carrier",
            "1 while the show interface has carrier.",
            n.link.carrier.map(|c| c as u8 as f64),
        ));
        nic_fams.push(opt_c(
            "pfx_nic_carrier_changes_total",
            "Carrier changes of the show interface.",
            n.link.carrier_changes,
        ));
        nic_fams.push(opt_c(
            "pfx_nic_tx_packets_total",
            "Packets sent by the show interface.",
            n.link.tx_packets,
        ));
        nic_fams.push(opt_c(
            "pfx_nic_tx_bytes_total",
            "Bytes sent by the show interface.",
            n.link.tx_bytes,
        ));
        nic_fams.push(opt_c(
            "pfx_nic_tx_dropped_total",
            "Packets the show interface dropped on transmit.",
            n.link.tx_dropped,
        ));
        nic_fams.push(opt_c(
            "pfx_nic_tx_errors_total",
            "Transmit errors of the show interface.",
            n.link.tx_errors,
        ));
        nic_fams.push(opt_c(
            "pfx_nic_qdisc_drops_total",
            "Packets dropped by the show interface's root qdisc.",
            n.qdisc_drops,
        ));
        nic_fams.push(opt_g(
            "pfx_nic_qdisc_backlog_bytes",
            "Bytes queued in the show interface's root qdisc.",
            n.qdisc_backlog_bytes.map(|b| b as f64),
        ));
        fams.push(sup);
        fams.extend(nic_fams);
    }

    if let Some(y) = &s.sync {
        let mut f = fam(
            "pfx_sync_info",
            "gauge",
            "MultiSync: always 1, labelled with the role (master, remote, standalone), the state, the master's address and the sequence a remote plays.",
        );
        f.samples.push((
            labels(&[
                ("role", &y.role),
                ("state", &y.state),
                ("master", y.master.as_deref().unwrap_or("")),
                ("sequence", y.sequence.as_deref().unwrap_or("")),
            ]),
            1.0,
        ));
        fams.push(f);
        let opt_g = |name, help, v: Option<f64>| {
            let mut f = fam(name, "gauge", help);
            if let Some(v) = v {
                f.samples.push((String::new(), v));
            }
            f
        };
        fams.push(opt_g(
            "pfx_sync_offset_seconds",
            "A remote: how far its frame deadlines are from its estimate of the master's (positive: behind).",
            y.offset_ms.map(|v| v / 1000.0),
        ));
        fams.push(opt_g(
            "pfx_sync_jitter_seconds",
            "A remote: mean delay of the sync packets above the network's floor.",
            y.jitter_ms.map(|v| v / 1000.0),
        ));
        fams.push(opt_g(
            "pfx_sync_last_packet_age_seconds",
            "A remote: time since the last sync packet.",
            y.last_packet_age_ms.map(|v| v / 1000.0),
        ));
        if y.role != "standalone" {
            for (name, help, v) in [
                (
                    "pfx_sync_corrections_total",
                    "A remote: frames whose deadline was moved gently toward the master.",
                    y.corrections,
                ),
                (
                    "pfx_sync_jumps_total",
                    "A remote: jumps onto the master's timeline (a start, a skip, far off).",
                    y.jumps,
                ),
                (
                    "pfx_sync_packets_received_total",
                    "A remote: sync packets received.",
                    y.packets_received,
                ),
                (
                    "pfx_sync_packets_dropped_total",
                    "Datagrams on the sync port dropped as malformed.",
                    y.packets_dropped,
                ),
                (
                    "pfx_sync_packets_sent_total",
                    "A master: sync packets sent.",
                    y.packets_sent,
                ),
                (
                    "pfx_sync_send_errors_total",
                    "A master: sync sends the kernel refused.",
                    y.send_errors,
                ),
            ] {
                fams.push(c(name, help, v as f64));
            }
        }
    }

    let mut out = String::with_capacity(8192);
    for f in fams.iter().filter(|f| !f.samples.is_empty()) {
        let _ = writeln!(out, "# HELP {} {}", f.name, f.help);
        let _ = writeln!(out, "# TYPE {} {}", f.name, f.kind);
        for (l, v) in &f.samples {
            let _ = writeln!(out, "{}{} {}", f.name, l, num(*v));
        }
    }
    out
}

/// The live override as metrics: `pfx_control_override` is 1 while one is held
/// (labelled with the layer, the action and who set it) and 0 with `action="none"` when
/// the schedule plays; its `_since_seconds` is when it was set (Unix seconds);
/// `pfx_control_brightness_factor` the factor on the show's brightness (1 without one).
/// Pure.
pub fn render_control(state: Option<&pfx_api::control::ControlState>) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# HELP pfx_control_override A live override (pfx-fleet control) held now: 1, labelled with its layer (content, brightness), action and who set it; 0 (labelled action none) when the schedule plays."
    );
    let _ = writeln!(out, "# TYPE pfx_control_override gauge");
    let mut since = Vec::new();
    let st = state.cloned().unwrap_or_default();
    if let Some(c) = &st.content {
        let _ = writeln!(
            out,
            "pfx_control_override{} 1",
            labels(&[
                ("layer", "content"),
                ("action", &c.describe()),
                ("by", st.content_by.as_deref().unwrap_or("")),
            ])
        );
        since.push(("content", st.content_since_unix_ms));
    }
    if let Some(f) = st.brightness {
        let _ = writeln!(
            out,
            "pfx_control_override{} 1",
            labels(&[
                ("layer", "brightness"),
                (
                    "action",
                    &format!("brightness {}", pfx_api::control::format_factor(f))
                ),
                ("by", st.brightness_by.as_deref().unwrap_or("")),
            ])
        );
        since.push(("brightness", st.brightness_since_unix_ms));
    }
    if st.is_clear() {
        let _ = writeln!(
            out,
            "pfx_control_override{} 0",
            labels(&[("action", "none")])
        );
    }
    let _ = writeln!(
        out,
        "# HELP pfx_control_override_since_seconds When the held override was set (Unix seconds)."
    );
    let _ = writeln!(out, "# TYPE pfx_control_override_since_seconds gauge");
    for (layer, ms) in since {
        if let Some(ms) = ms {
            let _ = writeln!(
                out,
                "pfx_control_override_since_seconds{} {}",
                labels(&[("layer", layer)]),
                num(ms as f64 / 1000.0)
            );
        }
    }
    let _ = writeln!(
        out,
        "# HELP pfx_control_brightness_factor The live brightness factor on the show's own brightness (1: none)."
    );
    let _ = writeln!(out, "# TYPE pfx_control_brightness_factor gauge");
    let _ = writeln!(
        out,
        "pfx_control_brightness_factor {}",
        num(st.brightness.unwrap_or(1.0))
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nic::{CounterReading, NicStatus};

    #[test]
    fn a_remote_exports_its_sync_section() {
        let s = Snapshot {
            sync: Some(pfx_api::profile::SyncStatus {
                role: "remote".into(),
                master: Some("10.0.0.1".into()),
                state: "playing".into(),
                sequence: Some("show.fseq".into()),
                offset_ms: Some(0.25),
                jitter_ms: Some(1.5),
                last_packet_age_ms: Some(120.0),
                corrections: 7,
                jumps: 1,
                packets_received: 40,
                ..Default::default()
            }),
            ..Default::default()
        };
        let text = render(&s, "u", "0.1.0", true);
        assert!(text.contains("pfx_sync_info{role=\"remote\",state=\"playing\",master=\"10.0.0.1\",sequence=\"show.fseq\"} 1"), "{text}");
        assert!(text.contains("pfx_sync_offset_seconds 0.00025\n"), "{text}");
        assert!(text.contains("pfx_sync_jitter_seconds 0.0015\n"), "{text}");
        assert!(text.contains("pfx_sync_corrections_total 7\n"), "{text}");
        assert!(text.contains("pfx_sync_jumps_total 1\n"), "{text}");
        // A standalone unit says so, and has no sync counters.
        let s = Snapshot {
            sync: Some(pfx_api::profile::SyncStatus {
                role: "standalone".into(),
                state: "standalone".into(),
                ..Default::default()
            }),
            ..Default::default()
        };
        let text = render(&s, "u", "0.1.0", true);
        assert!(text.contains("role=\"standalone\""), "{text}");
        assert!(!text.contains("pfx_sync_jumps_total"), "{text}");
        assert!(!text.contains("pfx_sync_offset_seconds"), "{text}");
    }

    /// Every frame due is counted once per output, as whole, in part or skipped,
    /// with rates, and the universe that got least is named with its rate.
    #[test]
    fn an_output_exports_frames_whole_in_part_and_skipped_and_its_slowest_universe() {
        let s = Snapshot {
            outputs: vec![pfx_api::profile::OutputStats {
                name: "rows".into(),
                protocol: "sacn".into(),
                destination: "239.255.0.1:5568".into(),
                counters: pfx_api::profile::CountersSnapshot {
                    frames_sent: 1200,
                    frames_partial: 30,
                    frames_skipped: 570,
                    ..Default::default()
                },
                rates: Some(pfx_api::profile::OutputRates {
                    frames_sent_per_s: 20.0,
                    frames_partial_per_s: 1.5,
                    frames_skipped_per_s: 18.5,
                    slowest_slot: Some(7),
                    slowest_slot_per_s: Some(1.25),
                    ..Default::default()
                }),
            }],
            ..Default::default()
        };
        let t = render(&s, "u", "0.1.0", true);
        let l = "{output=\"rows\",protocol=\"sacn\",destination=\"239.255.0.1:5568\"}";
        for (name, v) in [
            ("pfx_output_frames_sent_total", "1200"),
            ("pfx_output_frames_partial_total", "30"),
            ("pfx_output_frames_skipped_total", "570"),
            ("pfx_output_frames_sent_per_second", "20"),
            ("pfx_output_frames_partial_per_second", "1.5"),
            ("pfx_output_frames_skipped_per_second", "18.5"),
        ] {
            assert!(t.contains(&format!("{name}{l} {v}\n")), "{name}: {t}");
        }
        assert!(
            t.contains("pfx_output_slowest_datagram_frames_per_second{output=\"rows\",protocol=\"sacn\",datagram=\"7\"} 1.25\n"),
            "{t}"
        );
        // Before two readings there is no rate and no slowest datagram (absent, not 0).
        let mut s = s;
        s.outputs[0].rates = None;
        let t = render(&s, "u", "0.1.0", true);
        assert!(
            !t.contains("pfx_output_slowest_datagram_frames_per_second{"),
            "{t}"
        );
    }

    #[test]
    fn escapes_label_values() {
        assert_eq!(escape_label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }

    #[test]
    fn unsupported_nic_counter_is_absent_not_zero() {
        let s = Snapshot {
            nic: Some(NicStatus {
                interface: "eth0".into(),
                pause_rx_frames: CounterReading {
                    source: "unsupported".into(),
                    total: None,
                    per_s: None,
                },
                pause_tx_frames: CounterReading {
                    source: "driver:tx_pause".into(),
                    total: Some(7),
                    per_s: Some(0.5),
                },
                ..Default::default()
            }),
            ..Default::default()
        };
        let t = render(&s, "u1", "0.1.0", true);
        assert!(!t.contains("pfx_nic_pause_rx_frames_total"), "{t}");
        assert!(t.contains(
            "pfx_nic_counter_supported{interface=\"eth0\",counter=\"pause_rx_frames\"} 0"
        ));
        assert!(t.contains(
            "pfx_nic_pause_tx_frames_total{interface=\"eth0\",source=\"driver:tx_pause\"} 7"
        ));
        assert!(
            t.contains("pfx_nic_pause_frames_per_second{interface=\"eth0\",direction=\"tx\"} 0.5")
        );
    }

    #[test]
    fn every_family_has_help_and_type_before_its_samples() {
        let t = render(&Snapshot::default(), "u", "v", false);
        let mut declared = std::collections::HashSet::new();
        for line in t.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                declared.insert(rest.split(' ').next().unwrap_or("").to_string());
            } else if !line.starts_with('#') {
                let name = line.split(['{', ' ']).next().unwrap_or("");
                assert!(declared.contains(name), "sample before TYPE: {line}");
            }
        }
        assert!(t.contains("pfx_healthy 0"));
        assert!(num(f64::NAN) == "NaN" && num(f64::INFINITY) == "+Inf" && num(1e-7) == "0.0000001");
    }

    #[test]
    fn the_live_override_is_a_metric_with_who_and_since() {
        use pfx_api::control::{Action, ControlState};
        let none = render_control(None);
        assert!(
            none.contains("pfx_control_override{action=\"none\"} 0"),
            "{none}"
        );
        assert!(none.contains("pfx_control_brightness_factor 1\n"), "{none}");
        let st = ControlState {
            content: Some(Action::Blackout),
            content_by: Some("alice@10.0.0.5".into()),
            content_since_unix_ms: Some(1_700_000_000_000),
            brightness: Some(0.5),
            ..Default::default()
        };
        let t = render_control(Some(&st));
        assert!(
            t.contains("pfx_control_override{layer=\"content\",action=\"blackout\",by=\"alice@10.0.0.5\"} 1"),
            "{t}"
        );
        assert!(
            t.contains("pfx_control_override_since_seconds{layer=\"content\"} 1700000000\n"),
            "{t}"
        );
        assert!(t.contains("pfx_control_brightness_factor 0.5"), "{t}");
        assert!(!t.contains("{action=\"none\"}"));
    }
}
