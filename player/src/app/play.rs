//! The supervisor: starts a show, watches signals and the clock, reloads, stops. The
//! render loop runs on its own thread (`engine::frame_loop`); this thread only builds
//! engines, keeps the transmit queue in place and hands control messages over.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};

use super::RunOptions;
use super::build::build_engine;
use super::services::{self, Services};
use super::tx_queue;
use crate::config::show::{Show, ShowConfig};
use crate::engine::frame_loop::{self, Engine, Exit};

/// How often the supervisor looks at signals, the deadline and the render thread.
const TICK: Duration = Duration::from_millis(20);

/// Plays `show` until a signal stops it, `opts.duration` passes, or a playlist without
/// `loop` ends. SIGHUP reads `opts.config` again and swaps the show in at a frame boundary;
/// a config that does not load or open is refused and the current show keeps playing.
pub fn play(show: Show, opts: RunOptions) -> anyhow::Result<Exit> {
    let mut signals = signal_hook::iterator::Signals::new([SIGTERM, SIGINT, SIGHUP])
        .context("cannot install signal handlers")?;
    let engine = build_engine(&show, &opts)?;
    let mut tx_queue = Some(tx_queue::apply(&show, None));
    let mut services = services::start(&show, &engine, &opts)?;
    let sink = services
        .sink
        .take()
        .context("profiler sink already taken")?;
    let handle = frame_loop::spawn(engine, sink).context("cannot start the render thread")?;
    let finish = |exit: Exit, services: Services| {
        services::summarize(&services.profiler, opts.summary.as_deref());
        drop(services);
        exit
    };
    tracing::info!(
        outputs = show.outputs.len(),
        fps = show.config.fps,
        interface = %show.config.interface,
        blocking_send = opts.blocking_send,
        "playing"
    );
    let started = Instant::now();
    loop {
        for sig in signals.pending() {
            match sig {
                SIGHUP => match &opts.config {
                    Some(p) => match reload(p, &opts) {
                        Ok((new_show, engine)) => {
                            tx_queue = Some(tx_queue::apply(&new_show, tx_queue.take()));
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
        if opts.duration.is_some_and(|d| started.elapsed() >= d) {
            return Ok(finish(handle.stop(), services));
        }
        if handle.is_finished() {
            let mut handle = handle;
            return Ok(finish(handle.join(), services));
        }
        std::thread::sleep(TICK);
    }
}

/// The config at `path`, loaded and opened: the new show and its engine, or why not.
fn reload(path: &Path, opts: &RunOptions) -> anyhow::Result<(Show, Engine)> {
    let show = ShowConfig::load(path)?;
    let engine = build_engine(&show, opts)?;
    Ok((show, engine))
}
