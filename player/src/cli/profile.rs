//! `pfx-player profile`: fetch a unit's `/profile` and print the per-stage table and the
//! NIC/PAUSE lines. One request per refresh through pfx-api's HTTP client; the document is
//! read as the typed `ProfileDoc` the unit serves.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use pfx_api::http::{self, HttpError, Timeouts};
use pfx_api::nic::{CounterReading, NicStatus};
use pfx_api::profile::ProfileDoc;

use crate::profiler::window::SERIES;

pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
pub const READ_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, Clone, clap::Args)]
pub struct ProfileArgs {
    /// The unit's HTTP address.
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    pub url: String,
    /// Refresh every second until interrupted.
    #[arg(long)]
    pub watch: bool,
    /// Print the unit's JSON as it came.
    #[arg(long)]
    pub json: bool,
}

/// GET `path` (e.g. "/profile") under the unit's `url`; the body on a 200.
pub fn get(url: &str, path: &str) -> Result<Vec<u8>, HttpError> {
    let t = Timeouts {
        connect: CONNECT_TIMEOUT,
        io: READ_TIMEOUT,
    };
    http::request_path("GET", url, path, &[], None, t)?.ok_body(url)
}

/// The error as the operator reads it: a refused connection most often means the player
/// is not running there or has no HTTP address.
pub fn explain(e: &HttpError) -> String {
    match e {
        HttpError::Connect { .. } => {
            format!("{e}; is pfx-player running there with HTTP enabled?")
        }
        _ => e.to_string(),
    }
}

fn counter_line(name: &str, r: &CounterReading) -> String {
    let source = &r.source;
    match (r.total, r.per_s) {
        (None, _) => format!("{name}: unsupported by the driver"),
        (Some(t), Some(p)) => format!("{name}: {t} total, {p:.1}/s ({source})"),
        (Some(t), None) => format!("{name}: {t} total, rate pending ({source})"),
    }
}

fn opt(v: Option<u64>) -> String {
    v.map(|x| x.to_string()).unwrap_or_else(|| "-".into())
}

/// NIC/PAUSE lines for the `nic` object of /profile. Shorter than `nic status`'s block
/// (`cli::nic::render_status`): one line per counter and one for the link, under the table.
pub fn nic_lines(n: &NicStatus) -> Vec<String> {
    let host = if n.host.is_empty() {
        String::new()
    } else {
        format!(" on {}", n.host)
    };
    let pause = match (&n.pause, &n.pause_error) {
        (Some(p), _) => p.to_string(),
        (None, Some(e)) => format!("settings unknown ({e})"),
        (None, None) => "settings unknown".into(),
    };
    let l = &n.link;
    vec![
        format!("NIC {}{host}: PAUSE {pause}", n.interface),
        format!("  {}", counter_line("PAUSE rx frames", &n.pause_rx_frames)),
        format!("  {}", counter_line("PAUSE tx frames", &n.pause_tx_frames)),
        format!("  {}", counter_line("tx_timeouts", &n.tx_timeouts)),
        format!(
            "  link {} {}, carrier {} (changes {}), tx_dropped {}, tx_errors {}, queue {} drops {}",
            n.speed_mbps
                .map(|s| format!("{s} Mb/s"))
                .unwrap_or_else(|| "speed ?".into()),
            n.duplex.as_deref().unwrap_or("duplex ?"),
            match l.carrier {
                Some(true) => "up",
                Some(false) => "DOWN",
                None => "?",
            },
            opt(l.carrier_changes),
            opt(l.tx_dropped),
            opt(l.tx_errors),
            n.qdisc.as_deref().unwrap_or("?"),
            opt(n.qdisc_drops),
        ),
    ]
}

/// The human-readable report for one /profile document.
pub fn render(d: &ProfileDoc) -> String {
    let v = &d.snapshot;
    let mut out = String::new();
    out += &format!(
        "unit {}  version {}  health: {}\n",
        d.unit, d.version, d.health
    );
    out += &format!(
        "window {:.0} s: {} frames, {:.1} fps (target {}), {} deadline misses, {} skipped ticks\n",
        v.window_s, v.frames, v.fps, v.fps_target, v.deadline_misses, v.skipped_ticks,
    );
    let ss = &v.since_start;
    out += &format!(
        "since start: {} frames, {:.1} fps, {} deadline misses, {} skipped ticks, {} samples lost\n\n",
        ss.frames, ss.fps, ss.deadline_misses, ss.skipped_ticks, v.samples_lost,
    );
    out += &format!(
        "{:<12} {:>10} {:>10} {:>10} {:>10} {:>8}\n",
        "stage", "p50 µs", "p95 µs", "p99 µs", "max µs", "count"
    );
    for name in SERIES {
        let Some(st) = v.stages.get(name) else {
            continue;
        };
        out += &format!(
            "{:<12} {:>10} {:>10} {:>10} {:>10} {:>8}\n",
            name,
            format!("{:.1}", st.p50_us),
            format!("{:.1}", st.p95_us),
            format!("{:.1}", st.p99_us),
            format!("{:.1}", st.max_us),
            st.count
        );
    }
    out += "\n";
    match &v.nic {
        Some(n) => {
            for l in nic_lines(n) {
                out += &l;
                out += "\n";
            }
        }
        None => out += "NIC: no reading (PAUSE counters unknown)\n",
    }
    for o in &v.outputs {
        let c = &o.counters;
        let errs = c
            .errors
            .iter()
            .map(|(k, n)| format!("{k}={n}"))
            .collect::<Vec<_>>()
            .join(" ");
        out += &format!(
            "output {} ({} → {}): {} frames sent whole, {} in part, {} skipped, {} dropped ({}/s), {} failed{}\n",
            o.name,
            o.protocol,
            o.destination,
            c.frames_sent,
            c.frames_partial,
            c.frames_skipped,
            c.frames_dropped,
            o.rates
                .as_ref()
                .map(|r| format!("{:.1}", r.frames_dropped_per_s))
                .unwrap_or_else(|| "-".into()),
            c.frames_failed,
            if errs.is_empty() {
                String::new()
            } else {
                format!(", errors {errs}")
            },
        );
    }
    if let Some(l) = v.sync.as_ref().and_then(sync_line) {
        out += &l;
        out += "\n";
    }
    out
}

/// One line for a unit in MultiSync; none for a standalone one (or an older player).
pub fn sync_line(y: &pfx_api::profile::SyncStatus) -> Option<String> {
    let ms = |v: Option<f64>, signed: bool| match (v, signed) {
        (Some(v), true) => format!("{v:+.2} ms"),
        (Some(v), false) => format!("{v:.2} ms"),
        (None, _) => "-".into(),
    };
    match y.role.as_str() {
        "master" => Some(format!(
            "sync: master, {} packets sent, {} refused",
            y.packets_sent, y.send_errors
        )),
        "remote" => Some(format!(
            "sync: remote {} {} from {}, offset {}, jitter {}, last packet {} ago, {} corrections, {} jumps, {} packets ({} dropped)",
            y.state,
            y.sequence.as_deref().unwrap_or("-"),
            y.master.as_deref().unwrap_or("no master yet"),
            ms(y.offset_ms, true),
            ms(y.jitter_ms, false),
            ms(y.last_packet_age_ms, false),
            y.corrections,
            y.jumps,
            y.packets_received,
            y.packets_dropped,
        )),
        _ => None,
    }
}

pub fn run(args: ProfileArgs) -> anyhow::Result<ExitCode> {
    loop {
        let result = get(&args.url, "/profile");
        let text = match result {
            Ok(body) if args.json => String::from_utf8_lossy(&body).into_owned(),
            Ok(body) => {
                let d: ProfileDoc = serde_json::from_slice(&body).with_context(|| {
                    format!(
                        "{}/profile did not answer JSON",
                        args.url.trim_end_matches('/')
                    )
                })?;
                render(&d)
            }
            Err(e) if args.watch => format!("{}\n", explain(&e)),
            Err(e) => return Err(anyhow::anyhow!(explain(&e))).context("pfx-player profile"),
        };
        if !args.watch {
            print!("{text}");
            if args.json && !text.ends_with('\n') {
                println!();
            }
            return Ok(ExitCode::SUCCESS);
        }
        // clear the screen and redraw
        print!("\x1b[2J\x1b[H{text}");
        if args.json && !text.ends_with('\n') {
            println!();
        }
        let _ = std::io::stdout().flush();
        std::thread::sleep(Duration::from_secs(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pfx_api::nic::PauseSettings;
    use pfx_api::profile::{OutputRates, OutputStats, StageStats};

    #[test]
    fn unreachable_unit_names_the_url() {
        // a port nobody listens on: bind, learn the port, close
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let url = format!("http://127.0.0.1:{port}");
        let e = get(&url, "/profile").unwrap_err();
        assert!(matches!(e, HttpError::Connect { .. }), "{e}");
        assert!(e.to_string().contains(&url), "{e}");
        let r = run(ProfileArgs {
            url: url.clone(),
            watch: false,
            json: false,
        });
        let msg = format!("{:#}", r.unwrap_err());
        assert!(msg.contains(&url), "{msg}");
        assert!(
            msg.ends_with("; is pfx-player running there with HTTP enabled?"),
            "{msg}"
        );
    }

    #[test]
    fn renders_table_and_pause_lines() {
        let mut d = ProfileDoc {
            unit: "u1".into(),
            version: "0.1.0".into(),
            health: "ok".into(),
            ..Default::default()
        };
        let s = &mut d.snapshot;
        (s.window_s, s.frames, s.fps, s.fps_target) = (5.0, 300, 60.0, 60);
        (s.since_start.frames, s.since_start.fps) = (900, 60.0);
        (s.since_start.deadline_misses, s.since_start.skipped_ticks) = (1, 2);
        s.stages.insert(
            "wire_send".into(),
            StageStats {
                p50_us: 151.0,
                p95_us: 113727.0,
                p99_us: 136984.0,
                max_us: 140000.0,
                count: 300,
            },
        );
        let mut o = OutputStats {
            name: "pole-1".into(),
            protocol: "sacn".into(),
            destination: "239.255.0.1:5568".into(),
            rates: Some(OutputRates {
                frames_dropped_per_s: 2.0,
                ..Default::default()
            }),
            ..Default::default()
        };
        (o.counters.frames_sent, o.counters.frames_dropped) = (290, 10);
        o.counters.errors.insert("EAGAIN".into(), 10);
        s.outputs.push(o);
        // The NIC report is the golden one (`api/tests/golden/nic.json`), with the PAUSE
        // settings this render checks.
        let mut n: NicStatus = serde_json::from_str(&pfx_api::golden::read("nic.json")).unwrap();
        n.host = "pi".into();
        n.pause = Some(PauseSettings {
            autoneg: true,
            rx: true,
            tx: false,
        });
        s.nic = Some(n);
        let t = render(&d);
        assert!(t.contains("queue pfifo_head_drop drops 7"), "{t}");
        assert!(
            t.contains("wire_send         151.0   113727.0   136984.0   140000.0      300"),
            "{t}"
        );
        assert!(
            t.contains("NIC eth0 on pi: PAUSE autoneg on rx on tx off"),
            "{t}"
        );
        assert!(
            t.contains("PAUSE rx frames: 2400000 total, 130.0/s (standard)"),
            "{t}"
        );
        assert!(
            t.contains("PAUSE tx frames: unsupported by the driver"),
            "{t}"
        );
        assert!(t.contains("output pole-1 (sacn → 239.255.0.1:5568): 290 frames sent whole, 0 in part, 0 skipped, 10 dropped (2.0/s), 0 failed, errors EAGAIN=10"), "{t}");
    }

    #[test]
    fn a_sync_remote_and_master_get_a_line_a_standalone_unit_none() {
        use pfx_api::profile::SyncStatus;
        let r = SyncStatus {
            role: "remote".into(),
            state: "playing".into(),
            sequence: Some("show.fseq".into()),
            master: Some("10.0.0.1".into()),
            offset_ms: Some(0.25),
            jitter_ms: Some(0.5),
            last_packet_age_ms: Some(120.0),
            corrections: 3,
            jumps: 1,
            packets_received: 40,
            ..Default::default()
        };
        assert_eq!(
            sync_line(&r).unwrap(),
            "sync: remote playing show.fseq from 10.0.0.1, offset +0.25 ms, jitter 0.50 ms, last packet 120.00 ms ago, 3 corrections, 1 jumps, 40 packets (0 dropped)"
        );
        let m = SyncStatus {
            role: "master".into(),
            packets_sent: 9,
            ..Default::default()
        };
        assert_eq!(
            sync_line(&m).unwrap(),
            "sync: master, 9 packets sent, 0 refused"
        );
        let s = SyncStatus {
            role: "standalone".into(),
            ..Default::default()
        };
        assert_eq!(sync_line(&s), None);
    }

    /// The whole report for the document the server produces (`api/tests/golden/profile.json`,
    /// written by `http::tests::profile_json_matches_the_golden_file`).
    #[test]
    fn renders_the_golden_profile() {
        let d: ProfileDoc = serde_json::from_str(&pfx_api::golden::read("profile.json")).unwrap();
        let want = "\
unit gen3-7  version 0.1.0  health: ok
window 5 s: 60 frames, 60.0 fps (target 60), 0 deadline misses, 0 skipped ticks
since start: 60 frames, 60.0 fps, 0 deadline misses, 0 skipped ticks, 0 samples lost

stage            p50 µs     p95 µs     p99 µs     max µs    count
background          1.0        1.0        1.0        1.0       60
source             10.0       10.0       10.0       10.0       60
geometry           20.0       20.0       20.0       20.0       60
wire_send         150.0    80000.0    80000.0    80000.0       60
frame             200.0      200.0      200.0      200.0       60
lateness            0.0        0.0        0.0        0.0       60

NIC eth0 on gen3-7: PAUSE autoneg off rx off tx on
  PAUSE rx frames: 2400000 total, 130.0/s (standard)
  PAUSE tx frames: unsupported by the driver
  tx_timeouts: 0 total, 0.0/s (sysfs)
  link 1000 Mb/s full, carrier up (changes 1), tx_dropped 0, tx_errors 2, queue pfifo_head_drop drops 7
output poles-a (sacn → 239.255.0.1:5568): 215990 frames sent whole, 0 in part, 0 skipped, 10 dropped (0.0/s), 0 failed, errors EAGAIN=10 other=1
";
        assert_eq!(render(&d), want);
    }
}
