//! The supervisor: starts a show, watches signals and the clock, reloads, stops. The
//! render loop runs on its own thread (`engine::frame_loop`); this thread only builds
//! engines, keeps the transmit queue in place and hands control messages over.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};

use super::RunOptions;
use super::build::{self, build_engine};
use super::schedule::Follower;
use super::services::{self, Services};
use super::showpick;
use super::sync as multisync;
use super::tx_queue;
use crate::config::show::{Show, ShowConfig, SyncRole};
use crate::engine::frame_loop::{self, Engine, Exit, OnEnd, SyncLink};

/// How often the supervisor looks at signals, the deadline and the render thread.
const TICK: Duration = Duration::from_millis(20);

/// Plays `show` until a signal stops it, `opts.duration` passes, or a playlist without
/// `loop` ends. SIGHUP reads `opts.config` again and swaps the show in at a frame boundary;
/// a config that does not load or open is refused and the current show keeps playing.
///
/// A show with a `schedule:` plays what the schedule says now and follows it (`schedule`);
/// its playlists end in black rather than ending the player.
pub fn play(mut show: Show, opts: RunOptions) -> anyhow::Result<Exit> {
    let mut signals = signal_hook::iterator::Signals::new([SIGTERM, SIGINT, SIGHUP])
        .context("cannot install signal handlers")?;
    let (mut follower, engine) = start(&show, &opts)?;
    let mut tx_queue = Some(tx_queue::apply(&show, None));
    let mut services = services::start(&show, &engine, &opts)?;
    let sink = services
        .sink
        .take()
        .context("profiler sink already taken")?;
    let (sync_prepared, link) = match &show.sync {
        Some(s) => {
            let (p, link) = multisync::prepare(&show, s)?;
            services.profiler.set_sync(p.status.clone(), s.role);
            (Some(p), link)
        }
        None => (None, SyncLink::Standalone),
    };
    let remote = is_remote(&show);
    if remote && !show.playlist.is_empty() {
        tracing::warn!(
            "{}: this unit is a sync remote; it plays what its master plays and ignores `content`",
            show.source.display()
        );
    }
    let handle = frame_loop::spawn_with(engine, sink, on_end(&follower, &show), link)
        .context("cannot start the render thread")?;
    let _sync = match sync_prepared {
        Some(p) => Some(p.start(&show, &opts, handle.sender())?),
        None => None,
    };
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
                SIGHUP if remote => tracing::info!(
                    "SIGHUP: a sync remote plays what its master plays; restart the player to apply a new config"
                ),
                SIGHUP => match &opts.config {
                    Some(p) => match reload(p, &opts) {
                        Ok((new_show, engine, new_follower)) => {
                            tx_queue = Some(tx_queue::apply(&new_show, tx_queue.take()));
                            if on_end(&new_follower, &new_show) != on_end(&follower, &show) {
                                handle.set_on_end(on_end(&new_follower, &new_show));
                            }
                            // FPP Connect's switch waits for the item's end.
                            let graceful = crate::sys::host::take_graceful_reload();
                            if graceful {
                                handle.after_item(engine);
                            } else {
                                handle.reload(engine);
                            }
                            show = new_show;
                            follower = new_follower;
                            tracing::info!(
                                config = %p.display(),
                                "SIGHUP: new show accepted{}",
                                if graceful { "; it starts when the current item ends" } else { "" }
                            );
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
        if let Some(f) = follower.as_mut() {
            let now_us = crate::sys::time::unix_micros() as i64;
            if let Some(switch) = f.poll(&show, now_us, &opts) {
                if switch.graceful {
                    handle.after_item(switch.engine);
                } else {
                    handle.reload(switch.engine);
                }
            }
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

fn is_remote(show: &Show) -> bool {
    show.sync
        .as_ref()
        .is_some_and(|s| s.role == SyncRole::Remote)
}

/// The engine to start `show` with, and the schedule follower when it has a schedule. A
/// sync remote starts black and plays what its master starts.
fn start(show: &Show, opts: &RunOptions) -> anyhow::Result<(Option<Follower>, Engine)> {
    if is_remote(show) {
        return Ok((None, build::build_engine_for(show, &[], false, opts)?));
    }
    match show.schedule {
        Some(_) => {
            let now_us = crate::sys::time::unix_micros() as i64;
            let (f, engine) = Follower::start(show, now_us, opts)?;
            Ok((Some(f), engine))
        }
        None => Ok((None, build_engine(show, opts)?)),
    }
}

/// A scheduled show (and a sync remote, between its master's sequences) goes black at a
/// playlist's end; an unscheduled one ends there.
fn on_end(follower: &Option<Follower>, show: &Show) -> OnEnd {
    match follower {
        Some(_) => OnEnd::Black,
        None if is_remote(show) => OnEnd::Black,
        None => OnEnd::Exit,
    }
}

/// The config at `path`, loaded and opened: the new show, its engine and its schedule
/// follower, or why not.
/// With a store, the store's active show when it loads and opens, else the config's.
fn reload(path: &Path, opts: &RunOptions) -> anyhow::Result<(Show, Engine, Option<Follower>)> {
    if opts.store.is_none() {
        let show = ShowConfig::load(path)?;
        let (follower, engine) = start(&show, opts)?;
        showpick::set(&opts.show_state, showpick::config_info(path, None));
        return Ok((show, engine, follower));
    }
    let (show, info, (follower, engine)) =
        showpick::pick(path, opts.store.as_deref(), |s| start(s, opts))?;
    showpick::set(&opts.show_state, info);
    Ok((show, engine, follower))
}
