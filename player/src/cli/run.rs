//! `pfx-player run` and `pfx-player demo`: the I/O shell around the render loop. Opens
//! sockets and files, starts the profiler, HTTP, mDNS and the NIC monitor, and turns
//! signals into loop control (SIGTERM/SIGINT stop, SIGHUP reloads the config).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context;

use crate::config::show::{Item, Show, ShowConfig};
use crate::engine::frame_loop::{self, Engine, Exit, ItemSource};
use crate::geometry::Brightness;
use crate::output::{Output, OutputOptions, SocketOptions};
use crate::source::fseq::{FseqFile, Prefetcher};

#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// Show config (YAML). See docs/show-config.md.
    #[arg(long, short, value_name = "FILE", default_value = "/etc/pfx/show.yaml")]
    pub config: PathBuf,
    #[command(flatten)]
    pub common: CommonArgs,
    /// Check the config (profiles, files, interface) and exit without playing.
    #[arg(long)]
    pub check: bool,
}

#[derive(clap::Args, Debug)]
pub struct DemoArgs {
    #[command(flatten)]
    pub common: CommonArgs,
}

#[derive(clap::Args, Debug, Clone)]
pub struct CommonArgs {
    /// Serve HTTP (dashboard, /profile, /metrics, /health) here instead of the config's
    /// `http:` address.
    #[arg(long, value_name = "ADDR:PORT")]
    pub http: Option<SocketAddr>,
    /// Measured baseline only: blocking sockets, as a naive player has. A stalled switch
    /// then stalls the whole render loop.
    #[arg(long)]
    pub blocking_send: bool,
    /// Stop after this many seconds (tests, benchmarks). Default: play until signalled.
    #[arg(long, value_name = "SECONDS")]
    pub duration: Option<f64>,
    /// Socket send buffer (SO_SNDBUF) per output, in bytes. Default: about two frames of
    /// that pole, so a stalled link queues at most a frame or two of stale data.
    #[arg(long, value_name = "BYTES")]
    pub send_buffer: Option<usize>,
    /// Do not advertise the unit over mDNS.
    #[arg(long)]
    pub no_mdns: bool,
    /// When the show stops, write the profiler's final snapshot (the `/profile` JSON) here.
    #[arg(long, value_name = "FILE")]
    pub summary: Option<PathBuf>,
}

pub fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    let show = ShowConfig::load(&args.config)?;
    if args.check {
        let engine = build_engine(&show, &args.common)?;
        println!(
            "{}: ok: {} outputs, {} playlist items, interface {}; {}",
            args.config.display(),
            engine.outputs.len(),
            engine.items.len(),
            show.config.interface,
            crate::cli::tx_queue::describe(&show),
        );
        return Ok(ExitCode::SUCCESS);
    }
    play(show, args.common, Some(args.config))
}

pub fn demo(args: DemoArgs) -> anyhow::Result<ExitCode> {
    let mut common = args.common;
    if common.http.is_none() {
        common.http = Some(SocketAddr::from(([127, 0, 0, 1], 8080)));
    }
    let show = crate::demo::demo_show()?;
    eprintln!(
        "pfx-player demo: {} poles on loopback multicast ({}); dashboard on http://{}/ ; Ctrl-C stops",
        show.outputs.len(),
        show.outputs
            .iter()
            .map(|o| format!("{} → {}", o.name, o.destination))
            .collect::<Vec<_>>()
            .join(", "),
        common.http.map(|a| a.to_string()).unwrap_or_default(),
    );
    play(show, common, None)
}

/// A stable sACN CID for this unit: the same unit id always gives the same CID, so
/// receivers keep treating a restarted player as the same source.
fn unit_cid(unit: &str) -> uuid::Uuid {
    const NAMESPACE: uuid::Uuid = uuid::Uuid::from_bytes(*b"pfx-sacn-cid-ns!");
    uuid::Uuid::new_v5(&NAMESPACE, unit.as_bytes())
}

pub fn unit_id(show: &Show) -> String {
    show.config.unit_id.clone().unwrap_or_else(|| {
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "pfx-unit".into())
    })
}

/// Opens everything a show needs, off the render thread.
pub fn build_engine(show: &Show, common: &CommonArgs) -> anyhow::Result<Engine> {
    let unit = unit_id(show);
    let opts = OutputOptions {
        socket: SocketOptions {
            interface: show.config.interface.clone(),
            multicast_ttl: show.config.multicast_ttl,
            multicast_loop: show.config.multicast_loop,
            blocking: common.blocking_send,
            send_buffer: common.send_buffer,
        },
        cid: unit_cid(&unit),
        source_name: format!("pfx {unit}"),
    };
    let mut outputs = Vec::with_capacity(show.outputs.len());
    for o in &show.outputs {
        outputs.push(Output::open(o, &opts).with_context(|| format!("{}", show.source.display()))?);
    }
    let mut items = Vec::with_capacity(show.playlist.len());
    for item in &show.playlist {
        items.push(match item {
            Item::Fseq(path) => {
                let file = FseqFile::open(path)?;
                let h = file.header();
                let (frames, step_ms) = (h.frames, u32::from(h.step_ms));
                let frame_len = file.frame_len();
                // About a second of frames ahead at 20 fps, bounded in memory.
                let ahead = (4 << 20) / frame_len.max(1);
                let mut prefetch = Box::new(Prefetcher::spawn(file, ahead.clamp(4, 64)));
                // The show starts on a decoded frame, never on a blank buffer.
                if prefetch.wait_for(0, Duration::from_secs(5)).is_none() {
                    anyhow::bail!(
                        "{}: cannot decode frame 0: {}",
                        path.display(),
                        prefetch.error().unwrap_or_else(|| "timed out".into())
                    );
                }
                ItemSource::Fseq {
                    prefetch,
                    frames,
                    step_ms,
                    frame_len,
                }
            }
            Item::Pattern {
                kind,
                seconds,
                color,
            } => ItemSource::Pattern {
                kind: *kind,
                color: *color,
                seconds: *seconds,
            },
        });
    }
    Ok(Engine {
        outputs,
        brightness: Brightness::new(show.config.brightness),
        fps: show.config.fps,
        looped: show.config.content.looped,
        items,
    })
}

fn play(show: Show, common: CommonArgs, config_path: Option<PathBuf>) -> anyhow::Result<ExitCode> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGTERM, SIGINT, SIGHUP])
        .context("cannot install signal handlers")?;
    let engine = build_engine(&show, &common)?;
    let mut tx_queue = Some(crate::cli::tx_queue::apply(&show, None));
    let mut services = crate::cli::services::start(&show, &engine, &common)?;
    let sink = services
        .sink
        .take()
        .context("profiler sink already taken")?;
    let handle = frame_loop::spawn(engine, sink).context("cannot start the render thread")?;
    let finish = |exit: Exit, services: crate::cli::services::Services| {
        crate::cli::services::summarize(&services.profiler, common.summary.as_deref());
        drop(services);
        exit_code(exit)
    };
    tracing::info!(
        outputs = show.outputs.len(),
        fps = show.config.fps,
        interface = %show.config.interface,
        blocking_send = common.blocking_send,
        "playing"
    );
    let started = Instant::now();
    let deadline = common.duration.map(Duration::from_secs_f64);
    loop {
        for sig in signals.pending() {
            match sig {
                SIGHUP => match &config_path {
                    Some(p) => match ShowConfig::load(p)
                        .map_err(anyhow::Error::from)
                        .and_then(|s| build_engine(&s, &common).map(|e| (s, e)))
                    {
                        Ok((new_show, engine)) => {
                            tx_queue =
                                Some(crate::cli::tx_queue::apply(&new_show, tx_queue.take()));
                            handle.reload(engine);
                            tracing::info!(config = %p.display(), "SIGHUP: new config accepted");
                        }
                        Err(e) => tracing::error!(
                            "SIGHUP: new config refused, the current show keeps playing: {e:#}"
                        ),
                    },
                    None => tracing::info!("SIGHUP: the demo has no config file to reload"),
                },
                _ => {
                    tracing::info!("signal {sig}: stopping");
                    return Ok(finish(handle.stop(), services));
                }
            }
        }
        if let Some(q) = tx_queue.as_mut() {
            q.refresh(Instant::now());
        }
        if deadline.is_some_and(|d| started.elapsed() >= d) {
            return Ok(finish(handle.stop(), services));
        }
        if handle.is_finished() {
            let mut handle = handle;
            return Ok(finish(handle.join(), services));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn exit_code(_: Exit) -> ExitCode {
    ExitCode::SUCCESS
}
