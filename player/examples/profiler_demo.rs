//! Serves the profiler with live synthetic data: a 60 Hz loop on absolute deadlines feeds
//! FrameSamples (every `--slow-every`th frame has a slow wire_send, the seeds' shape), one
//! output's counters move, and `--fake-nic` publishes a made-up NIC reading whose source
//! says so. HTTP on `--http`; mDNS with `--mdns`. Used by scripts/tests.d/30-profiler.sh.
//!
//!   cargo run -p pfx-player --example profiler_demo -- --http 127.0.0.1:8080 --mdns

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use clap::Parser;
use pfx_player::engine::FrameSample;
use pfx_player::nic::{CounterReading, NicStatus, PauseSettings};
use pfx_player::output::counters::OutputCounters;
use pfx_player::profiler::{self, OutputInfo, ProfilerConfig, ProfilerHandle, SampleSink};

#[derive(Parser)]
struct Args {
    #[arg(long, default_value = "127.0.0.1:8080")]
    http: SocketAddr,
    #[arg(long, default_value = "profiler-demo")]
    unit_id: String,
    /// Advertise _pfx._tcp over mDNS.
    #[arg(long)]
    mdns: bool,
    #[arg(long, default_value_t = 60)]
    fps: u32,
    /// Every Nth frame's wire_send takes `--slow-ms`.
    #[arg(long, default_value_t = 20)]
    slow_every: u64,
    #[arg(long, default_value_t = 40)]
    slow_ms: u64,
    /// Publish a synthetic NIC reading (source "synthetic-demo"), ~130 PAUSE frames/s.
    #[arg(long)]
    fake_nic: bool,
    /// Stop after this many seconds (default: run until killed).
    #[arg(long)]
    seconds: Option<u64>,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let counters = Arc::new(OutputCounters::default());
    let outputs = vec![OutputInfo {
        name: "demo-ddp".into(),
        protocol: "ddp".into(),
        destination: "127.0.0.1:4048".into(),
        counters: counters.clone(),
    }];
    let (sink, handle) = profiler::start(
        ProfilerConfig {
            window: Duration::from_secs(5),
            fps: args.fps,
        },
        outputs,
    );

    // The synthetic render loop: absolute deadlines, the loop's own clock in at_ns.
    let (fps, slow_every, slow_ns) = (
        args.fps.max(1) as u64,
        args.slow_every.max(1),
        args.slow_ms * 1_000_000,
    );
    std::thread::Builder::new()
        .name("demo-loop".into())
        .spawn(move || synthetic_loop(sink, &counters, fps, slow_every, slow_ns))?;

    if args.fake_nic {
        let h = handle.clone();
        std::thread::spawn(move || fake_nic(h));
    }

    let _advert = if args.mdns {
        Some(pfx_player::mdns::advertise(
            &args.unit_id,
            args.http.port(),
            &["bench-ddp".to_string()],
            env!("CARGO_PKG_VERSION"),
        )?)
    } else {
        None
    };

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let listener = tokio::net::TcpListener::bind(args.http).await?;
        println!("listening on http://{}", listener.local_addr()?);
        let state = pfx_player::http::HttpState {
            profiler: handle,
            unit_id: args.unit_id.clone(),
            version: env!("CARGO_PKG_VERSION"),
            show: Default::default(),
            store: None,
            control: Default::default(),
        };
        let seconds = args.seconds;
        let shutdown = async move {
            match seconds {
                Some(s) => tokio::time::sleep(Duration::from_secs(s)).await,
                None => {
                    let _ = tokio::signal::ctrl_c().await;
                }
            }
        };
        pfx_player::http::serve(listener, state, shutdown).await?;
        anyhow::Ok(())
    })
}

/// The synthetic render loop: absolute deadlines, the loop's own clock in at_ns; every
/// `slow_every`th frame's wire_send takes `slow_ns` and its frame is counted dropped.
fn synthetic_loop(
    mut sink: SampleSink,
    counters: &OutputCounters,
    fps: u64,
    slow_every: u64,
    slow_ns: u64,
) {
    let start = Instant::now();
    let period = Duration::from_nanos(1_000_000_000 / fps);
    let mut rng: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut jitter = |range: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % range.max(1)
    };
    for tick in 0u64.. {
        let deadline = start + Duration::from_nanos(tick * period.as_nanos() as u64);
        if let Some(d) = deadline.checked_duration_since(Instant::now()) {
            std::thread::sleep(d);
        }
        let at = Instant::now();
        let wire = if tick % slow_every == slow_every / 2 {
            slow_ns
        } else {
            120_000 + jitter(60_000)
        };
        let stage_ns = [
            3_000 + jitter(2_000),
            40_000 + jitter(20_000),
            25_000 + jitter(10_000),
            wire,
        ];
        let frame_ns = stage_ns.iter().sum();
        counters.packets.fetch_add(3, Relaxed);
        counters.bytes.fetch_add(3 * 1450, Relaxed);
        if tick % slow_every == slow_every / 2 {
            counters.frames_dropped.fetch_add(1, Relaxed);
            counters.count_errno(libc::EAGAIN);
        } else {
            counters.frames_sent.fetch_add(1, Relaxed);
        }
        sink.push(FrameSample {
            tick,
            stage_ns,
            frame_ns,
            lateness_ns: at.saturating_duration_since(deadline).as_nanos() as u64,
            missed: frame_ns > period.as_nanos() as u64,
            skipped: 0,
            at_ns: at.duration_since(start).as_nanos() as u64,
            source: Default::default(),
        });
    }
}

/// `--fake-nic`: a made-up NIC reading once a second, its source saying so.
fn fake_nic(h: ProfilerHandle) {
    let t0 = Instant::now();
    loop {
        h.set_nic(fake_nic_reading(t0.elapsed().as_secs_f64()));
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// The synthetic NIC `s` seconds in: ~130 PAUSE frames/s received, 4 qdisc drops/s.
fn fake_nic_reading(s: f64) -> NicStatus {
    let rx = (s * 130.0) as u64;
    NicStatus {
        interface: "demo0".into(),
        host: "synthetic".into(),
        pause: Some(PauseSettings {
            autoneg: true,
            rx: true,
            tx: false,
        }),
        pause_rx_frames: CounterReading {
            source: "synthetic-demo".into(),
            total: Some(rx),
            per_s: Some(130.0),
        },
        pause_tx_frames: CounterReading {
            source: "unsupported".into(),
            total: None,
            per_s: None,
        },
        tx_timeouts: CounterReading {
            source: "synthetic-demo".into(),
            total: Some(0),
            per_s: Some(0.0),
        },
        speed_mbps: Some(1000),
        duplex: Some("full".into()),
        link: pfx_player::nic::link::LinkStats {
            carrier: Some(true),
            ..Default::default()
        },
        qdisc: Some("pfifo_head_drop".into()),
        qdisc_drops: Some((s * 4.0) as u64),
        ..Default::default()
    }
}
