//! The render thread: owns the outputs and the sources, runs background → source →
//! geometry → wire_send once per tick on absolute deadlines, and never waits on the
//! network (sockets are non-blocking unless `--blocking-send` asked for the baseline).

use std::sync::mpsc::{Receiver, Sender, TryRecvError, channel};
use std::thread::JoinHandle;
use std::time::Instant;

use super::clock::FrameClock;
use super::playlist::{Entry, Now, Playlist};
use super::sample::{FrameSample, FrameSink, Stage};
use crate::geometry::{Brightness, PoleMap};
use crate::output::Output;
use crate::source::fseq::Prefetcher;
use crate::source::pattern;
use crate::sys::sched::raise_priority;
use crate::sys::time::{mono_ns, sleep_until, unix_micros};

/// How often sACN universe discovery goes out (E1.31 §8: 10 s).
const DISCOVERY_INTERVAL_NS: u64 = 10_000_000_000;

/// Everything one show needs on the render thread. Built off the thread (sockets opened,
/// files opened and decoding ahead), then handed over whole: a reload swaps it between
/// two frames.
pub struct Engine {
    pub outputs: Vec<Output>,
    pub brightness: Brightness,
    pub fps: u32,
    pub looped: bool,
    pub items: Vec<ItemSource>,
}

pub enum ItemSource {
    Fseq {
        prefetch: Box<Prefetcher>,
        frames: u32,
        step_ms: u32,
        frame_len: usize,
    },
    Pattern {
        kind: crate::config::show::PatternKind,
        color: [u8; 3],
        seconds: f64,
    },
}

pub enum Control {
    /// Swap in a new show at the next frame boundary.
    Reload(Box<Engine>),
    /// Send stream-terminated packets and end the thread.
    Stop,
}

/// How the loop ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exit {
    Stopped,
    /// A playlist without `loop` played to its end.
    Finished,
}

pub struct LoopHandle {
    control: Sender<Control>,
    thread: Option<JoinHandle<Exit>>,
}

impl LoopHandle {
    pub fn reload(&self, engine: Engine) -> bool {
        self.control.send(Control::Reload(Box::new(engine))).is_ok()
    }

    pub fn is_finished(&self) -> bool {
        self.thread.as_ref().is_none_or(|t| t.is_finished())
    }

    /// Asks the loop to stop and waits for it (it terminates the streams first).
    pub fn stop(mut self) -> Exit {
        let _ = self.control.send(Control::Stop);
        self.join()
    }

    pub fn join(&mut self) -> Exit {
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(e)) => e,
            Some(Err(_)) => {
                tracing::error!("render thread panicked");
                Exit::Stopped
            }
            None => Exit::Stopped,
        }
    }
}

pub fn spawn(engine: Engine, sink: impl FrameSink + 'static) -> std::io::Result<LoopHandle> {
    let (tx, rx) = channel();
    let thread = std::thread::Builder::new()
        .name("pfx-render".into())
        .spawn(move || {
            raise_priority("render thread");
            run(engine, sink, rx)
        })?;
    Ok(LoopHandle {
        control: tx,
        thread: Some(thread),
    })
}

struct Show {
    engine: Engine,
    layout: Vec<PoleMap>,
    channels: Vec<u8>,
    playlist: Playlist,
}

impl Show {
    fn new(engine: Engine, start_ns: u64) -> Show {
        let layout: Vec<PoleMap> = engine.outputs.iter().map(|o| o.map().clone()).collect();
        let mut len = layout
            .iter()
            .map(|m| m.start + m.channels())
            .max()
            .unwrap_or(0);
        let mut entries = Vec::with_capacity(engine.items.len());
        for item in &engine.items {
            entries.push(match item {
                ItemSource::Fseq {
                    frames,
                    step_ms,
                    frame_len,
                    ..
                } => {
                    len = len.max(*frame_len);
                    Entry::Fseq {
                        frames: *frames,
                        step_ms: *step_ms,
                    }
                }
                ItemSource::Pattern {
                    kind,
                    color,
                    seconds,
                } => Entry::Pattern {
                    kind: *kind,
                    color: *color,
                    seconds: *seconds,
                },
            });
        }
        let playlist = Playlist::new(entries, engine.looped, start_ns);
        Show {
            engine,
            layout,
            channels: vec![0; len],
            playlist,
        }
    }
}

fn run(engine: Engine, mut sink: impl FrameSink, control: Receiver<Control>) -> Exit {
    let clock = FrameClock::new(mono_ns(), engine.fps);
    let mut show = Show::new(engine, clock.start_ns());
    let mut tick = 0u64;
    let mut skipped = 0u64;
    let mut next_discovery = clock.start_ns();
    loop {
        let deadline = clock.deadline(tick);
        sleep_until(deadline);
        let t0 = mono_ns();

        // background: control messages, discovery, interface upkeep.
        match control.try_recv() {
            Ok(Control::Reload(new)) => {
                if new.fps != show.engine.fps {
                    tracing::warn!(
                        "fps changes take effect on restart; keeping {} fps",
                        show.engine.fps
                    );
                }
                // A reload restarts the playlist now.
                show = Show::new(*new, t0);
                next_discovery = t0;
                tracing::info!("show reloaded");
            }
            Ok(Control::Stop) | Err(TryRecvError::Disconnected) => {
                terminate(&mut show);
                return Exit::Stopped;
            }
            Err(TryRecvError::Empty) => {}
        }
        if t0 >= next_discovery {
            next_discovery = t0 + DISCOVERY_INTERVAL_NS;
            for o in &mut show.engine.outputs {
                o.send_discovery();
            }
        }
        let now = Instant::now();
        for o in &mut show.engine.outputs {
            o.maintain(now);
        }
        let t1 = mono_ns();

        // source: the channel data for this moment.
        match show.playlist.at(t0) {
            Now::Fseq { item, frame } => {
                if let Some(ItemSource::Fseq { prefetch, .. }) = show.engine.items.get_mut(item)
                    && let Some(data) = prefetch.get(frame)
                {
                    let n = data.len().min(show.channels.len());
                    show.channels[..n].copy_from_slice(&data[..n]);
                }
            }
            Now::Pattern { kind, color, t, .. } => {
                pattern::render(kind, color, t, &show.layout, &mut show.channels)
            }
            Now::Finished => {
                terminate(&mut show);
                return Exit::Finished;
            }
        }
        let t2 = mono_ns();

        // geometry: each pole's wire pixels.
        for o in &mut show.engine.outputs {
            o.map_from(&show.channels, &show.engine.brightness);
        }
        let t3 = mono_ns();

        // wire_send
        // The first output of each frame goes first on the wire; when the link cannot carry
        // the show, whoever goes first gets through. Taking turns shares the loss.
        let stamp = unix_micros();
        let n = show.engine.outputs.len();
        for k in 0..n {
            let i = (tick as usize).wrapping_add(k) % n;
            show.engine.outputs[i].send_frame(stamp);
        }
        let t4 = mono_ns();

        sink.push(FrameSample {
            tick,
            stage_ns: {
                let mut s = [0; Stage::COUNT];
                s[Stage::Background as usize] = t1 - t0;
                s[Stage::Source as usize] = t2 - t1;
                s[Stage::Geometry as usize] = t3 - t2;
                s[Stage::WireSend as usize] = t4 - t3;
                s
            },
            frame_ns: t4 - t0,
            lateness_ns: t0.saturating_sub(deadline),
            missed: clock.missed(tick, t4),
            skipped: skipped as u32,
            at_ns: t0 - clock.start_ns(),
        });
        let next = clock.next(tick, mono_ns());
        tick = next.tick;
        skipped = next.skipped;
    }
}

fn terminate(show: &mut Show) {
    for o in &mut show.engine.outputs {
        o.terminate();
    }
}
