//! The supervisor: starts a show, watches signals and the clock, reloads, stops. The
//! render loop runs on its own thread (`engine::frame_loop`); this thread only builds
//! engines, keeps the transmit queue in place and hands control messages over.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};

use super::RunOptions;
use super::build::{self, build_engine};
use super::control::{self as live_control, Pending};
use super::schedule::Follower;
use super::services::{self, Services};
use super::showpick;
use super::sync as multisync;
use super::tx_queue;
use crate::config::show::{Show, ShowConfig, SyncRole};
use crate::engine::frame_loop::{self, Engine, Exit, LiveMsg, OnEnd, SyncLink};
use crate::engine::live::{self, EngineChange};
use pfx_api::control::{ControlAnswer, ControlState};

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
    let (sync_prepared, link) = prepare_sync(&show, &services)?;
    let remote = is_remote(&show);
    if remote && !show.playlist.is_empty() {
        tracing::warn!(
            "{}: this unit is a sync remote; it plays what its master plays and ignores `content`",
            show.source.display()
        );
    }
    // A blackout a previous run kept holds from the first frame.
    let mut held = live_control::restore(opts.store.as_deref()).unwrap_or_default();
    live_control::publish(&opts.control_state, &held);
    let unit = build::unit_id(&show);
    let handle = frame_loop::spawn_live(
        engine,
        sink,
        on_end(&follower, &show),
        link,
        live::overlay_for(&held),
    )
    .context("cannot start the render thread")?;
    let (control_tx, control_rx) = std::sync::mpsc::channel::<Pending>();
    let _control = listen_control(&opts, &unit, control_tx);
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
                SIGHUP => sighup(
                    &opts,
                    &held,
                    &handle,
                    &mut show,
                    &mut follower,
                    &mut tx_queue,
                ),
                _ => {
                    tracing::info!("signal {sig}: stopping");
                    return Ok(finish(handle.stop(), services));
                }
            }
        }
        if let Some(q) = tx_queue.as_mut() {
            q.refresh(Instant::now());
        }
        follow_schedule(&mut follower, &held, &show, &opts, &handle);
        if opts.duration.is_some_and(|d| started.elapsed() >= d) {
            return Ok(finish(handle.stop(), services));
        }
        if handle.is_finished() {
            let mut handle = handle;
            return Ok(finish(handle.join(), services));
        }
        // Waits on the control channel instead of sleeping: an action is taken as soon
        // as it arrives, not at the next tick.
        if let Some(p) = next_request(&control_rx, TICK) {
            let answer = control(
                &p.request,
                &mut Supervised {
                    show: &show,
                    follower: &mut follower,
                    held: &mut held,
                    handle: &handle,
                    opts: &opts,
                    unit: &unit,
                },
            );
            let _ = p.answer.try_send(answer);
        }
    }
}

/// A MultiSync role's sockets, made before the render thread starts, and the render
/// loop's part in it; the profiler hears the sync status.
fn prepare_sync(
    show: &Show,
    services: &Services,
) -> anyhow::Result<(Option<multisync::Prepared>, SyncLink)> {
    Ok(match &show.sync {
        Some(s) => {
            let (p, link) = multisync::prepare(show, s)?;
            services.profiler.set_sync(p.status.clone(), s.role);
            (Some(p), link)
        }
        None => (None, SyncLink::Standalone),
    })
}

/// The live-control socket, when one is asked for. The show comes first: a socket that
/// cannot be made is logged, and the show plays.
fn listen_control(
    opts: &RunOptions,
    unit: &str,
    control_tx: std::sync::mpsc::Sender<Pending>,
) -> Option<live_control::ControlServer> {
    let p = opts.control_socket.as_ref()?;
    match live_control::listen(p, unit.to_string(), control_tx) {
        Ok(c) => {
            tracing::info!("live control on {}", p.display());
            Some(c)
        }
        Err(e) => {
            tracing::error!("live control off: cannot listen on {}: {e}", p.display());
            None
        }
    }
}

/// SIGHUP: the config read again and, when it loads and opens, taken in place of the
/// show playing; refused, the current show keeps playing.
fn sighup(
    opts: &RunOptions,
    held: &ControlState,
    handle: &frame_loop::LoopHandle,
    show: &mut Show,
    follower: &mut Option<Follower>,
    tx_queue: &mut Option<tx_queue::TxQueue>,
) {
    let Some(p) = &opts.config else {
        tracing::info!("SIGHUP: the demo has no config file to reload");
        return;
    };
    match reload(p, opts) {
        // A held play or stop keeps the engine: the new show is taken and plays at
        // `resume`.
        Ok((new_show, _, new_follower)) if live::holds_engine(held) => {
            *tx_queue = Some(tx_queue::apply(&new_show, tx_queue.take()));
            *show = new_show;
            *follower = new_follower;
            tracing::info!(
                "SIGHUP: new show accepted; it plays at `resume` (live control holds {})",
                held.summary()
            );
        }
        Ok((new_show, engine, new_follower)) => {
            *tx_queue = Some(tx_queue::apply(&new_show, tx_queue.take()));
            if on_end(&new_follower, &new_show) != on_end(follower, show) {
                handle.set_on_end(on_end(&new_follower, &new_show));
            }
            // FPP Connect's switch waits for the item's end.
            let graceful = crate::sys::host::take_graceful_reload();
            if graceful {
                handle.after_item(engine);
            } else {
                handle.reload(engine);
            }
            *show = new_show;
            *follower = new_follower;
            tracing::info!(
                config = %p.display(),
                "SIGHUP: new show accepted{}",
                if graceful { "; it starts when the current item ends" } else { "" }
            );
        }
        Err(e) => {
            tracing::error!("SIGHUP: new config refused, the current show keeps playing: {e:#}")
        }
    }
}

/// The schedule's switch when one is due. A held play or stop: the schedule waits for
/// `resume`.
fn follow_schedule(
    follower: &mut Option<Follower>,
    held: &ControlState,
    show: &Show,
    opts: &RunOptions,
    handle: &frame_loop::LoopHandle,
) {
    if let Some(f) = follower.as_mut().filter(|_| !live::holds_engine(held)) {
        let now_us = crate::sys::time::unix_micros() as i64;
        if let Some(switch) = f.poll(show, now_us, opts) {
            if switch.graceful {
                handle.after_item(switch.engine);
            } else {
                handle.reload(switch.engine);
            }
        }
    }
}

/// The next live-control request, waiting at most `tick`. Without a control socket (none
/// asked for, as in `demo`, or one that could not be made) the channel has no sender, and
/// `recv_timeout` returns at once: the wait must still take its tick, or the supervisor's
/// loop spins a core beside the show (measured: the main thread at 73 % of a core).
fn next_request(rx: &std::sync::mpsc::Receiver<Pending>, tick: Duration) -> Option<Pending> {
    use std::sync::mpsc::RecvTimeoutError;
    match rx.recv_timeout(tick) {
        Ok(p) => Some(p),
        Err(RecvTimeoutError::Timeout) => None,
        Err(RecvTimeoutError::Disconnected) => {
            std::thread::sleep(tick);
            None
        }
    }
}

/// What an action needs done to the engine: the engine to hand over (and whether it waits
/// for the item's end), the end-of-playlist rule, and the schedule follower that goes
/// with it (Some: replace the supervisor's).
type Built = (
    Option<(Box<Engine>, bool)>,
    Option<OnEnd>,
    Option<Option<Follower>>,
);

/// What a control request may change in the supervisor.
struct Supervised<'a> {
    show: &'a Show,
    follower: &'a mut Option<Follower>,
    held: &'a mut ControlState,
    handle: &'a frame_loop::LoopHandle,
    opts: &'a RunOptions,
    unit: &'a str,
}

/// Decides and carries out one live action; the answer says when it took effect, or why
/// not (and then nothing changed).
fn control(req: &pfx_api::control::ControlRequest, s: &mut Supervised<'_>) -> ControlAnswer {
    let by = format!("{}@{}", req.by, req.from);
    let now_ms = crate::sys::time::unix_micros() / 1000;
    let ctx = live_control::context(s.show, is_remote(s.show));
    let plan = match live::decide(s.held, &req.action, &ctx, &by, now_ms) {
        Ok(p) => p,
        Err(why) => {
            tracing::warn!(
                "live control: refused {} for {by}: {why}",
                req.action.describe()
            );
            return live_control::refused(s.unit, why);
        }
    };
    // An engine the action needs is built here, off the render thread; one that does not
    // open refuses the action and changes nothing.
    let built: anyhow::Result<Built> = (|| match &plan.engine {
        EngineChange::Keep => Ok((None, None, None)),
        EngineChange::Play(name) => {
            let items = live_control::playlist_items(s.show, name)
                .with_context(|| format!("no playlist `{name}`"))?;
            let e = build::build_engine_for(s.show, items, false, s.opts)?;
            Ok((Some((Box::new(e), false)), Some(OnEnd::Black), None))
        }
        EngineChange::StopAfterItem => {
            let e = build::build_engine_for(s.show, &[], false, s.opts)?;
            Ok((Some((Box::new(e), true)), Some(OnEnd::Black), None))
        }
        EngineChange::BackToSchedule => {
            let (f, e) = start(s.show, s.opts)?;
            let end = on_end(&f, s.show);
            Ok((Some((Box::new(e), false)), Some(end), Some(f)))
        }
    })();
    let (engine, end, new_follower) = match built {
        Ok(b) => b,
        Err(e) => {
            let why = format!("{}: cannot open it: {e:#}", req.action.describe());
            tracing::error!("live control: refused for {by}: {why}");
            return live_control::refused(s.unit, why);
        }
    };
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    let sent = s.handle.live(LiveMsg {
        overlay: plan.overlay.clone(),
        engine,
        on_end: end,
        reply: Some(tx),
    });
    if !sent {
        return live_control::refused(s.unit, "the render thread has stopped".into());
    }
    if let Some(f) = new_follower {
        *s.follower = f;
    }
    // Written while the render thread takes the override at its next frame.
    let (held_on_disk, note) =
        live_control::persist(s.opts.store.as_deref(), plan.persist, &plan.state);
    let effective_unix_us = live_control::wait_stamp(&rx, s.show.config.fps);
    *s.held = plan.state.clone();
    live_control::publish(&s.opts.control_state, s.held);
    tracing::info!(
        "live control: {} for {by} (now: {})",
        req.action.describe(),
        s.held.summary()
    );
    ControlAnswer {
        unit: s.unit.to_string(),
        accepted: true,
        error: None,
        reached_player: true,
        effective_unix_us,
        state: plan.state,
        held_on_disk,
        note: note.or_else(|| {
            effective_unix_us
                .is_none()
                .then(|| "taken, but the render thread did not confirm the frame in time".into())
        }),
        sync: sync_part(s.show),
    }
}

/// The show's part in MultiSync, as the control answer says it.
fn sync_part(show: &Show) -> Option<pfx_api::control::SyncPart> {
    match show.sync.as_ref()?.role {
        SyncRole::Master => Some(pfx_api::control::SyncPart::Master),
        SyncRole::Remote => Some(pfx_api::control::SyncPart::Remote),
        SyncRole::Standalone => None,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_control_socket_the_wait_still_takes_its_tick() {
        let (tx, rx) = std::sync::mpsc::channel::<Pending>();
        drop(tx); // no control socket: nobody holds the sender
        let tick = Duration::from_millis(40);
        let t = Instant::now();
        for _ in 0..3 {
            assert!(next_request(&rx, tick).is_none());
        }
        assert!(
            t.elapsed() >= tick * 3,
            "three waits took {:?}: the supervisor would spin",
            t.elapsed()
        );
    }
}
