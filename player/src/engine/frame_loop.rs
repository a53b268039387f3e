//! The render thread: owns the outputs and the sources, runs background → source →
//! geometry → wire_send once per tick on absolute deadlines, and never waits on the
//! network (sockets are non-blocking unless `--blocking-send` asked for the baseline).
//!
//! A large sACN output (≥ 128 datagrams per frame) renders in two halves by universe, one
//! on this thread and one on the output's helper (`output::halves`): each half fills its
//! channels from the source, maps them and encodes and sends its datagrams, and the frame
//! goes on when both are done. Those outputs run in the wire_send loop; the stages still
//! mean what they say, as wall time of the frame:
//! - source: this thread's source work for the other outputs, plus, for each output in
//!   halves, the longer of its two halves' source time;
//! - geometry: the same for geometry;
//! - wire_send: the rest of the send loop: encoding and sending, the halves' wait for
//!   each other included.
//!
//! Small shows (the demo's three poles) have no output in halves and run as before.

use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, Sender, SyncSender, TryRecvError, channel};
use std::thread::JoinHandle;

use super::clock::FrameClock;
use super::live::{Overlay, output_dark};
use super::playlist::{Entry, Now, Playlist};
use super::retire::Retirer;
use super::sample::{FrameSample, FrameSink, SourceStatus, Stage};
use crate::config::show::PatternItem;
use crate::geometry::{Brightness, PoleMap};
use crate::output::{Fill, HalfTimes, Output, RateLimit};
use crate::source::fseq::{Fetch, Prefetcher};
use crate::source::pattern;
use crate::sync::pace::{Pacer, Step};
use crate::sync::shared::{Published, Status, Timeline};
use crate::sys::sched::raise_priority;
use crate::sys::time::{mono_ns, sleep_until, unix_micros};

/// How often sACN universe discovery goes out (E1.31 §8: 10 s).
const DISCOVERY_INTERVAL_NS: u64 = 10_000_000_000;
/// At most one log line per source problem (late, decode error) this often; the line
/// says how many frames it stands for. A corrupt block hits every frame for seconds.
const SOURCE_LOG_EVERY_NS: u64 = 5_000_000_000;

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
    Pattern(PatternItem),
}

impl ItemSource {
    /// What the playlist's timing needs of this item.
    fn entry(&self) -> Entry {
        match self {
            ItemSource::Fseq {
                frames, step_ms, ..
            } => Entry::Fseq {
                frames: *frames,
                step_ms: *step_ms,
            },
            ItemSource::Pattern(p) => Entry::Pattern(*p),
        }
    }
}

/// How many frames a master's blackout waits for its remotes (docs/operator-guide.md,
/// "Show night"): the first frame's stop reaches them, the second is their margin.
pub const TELL_REMOTES_FRAMES: u32 = 2;

pub enum Control {
    /// Swap in a new show at the next frame boundary.
    Reload(Box<Engine>),
    /// Swap in a new show when the item playing now ends (a graceful stop); at once when
    /// nothing is playing. A later `After` replaces the waiting show; a `Reload` drops it.
    After(Box<Engine>),
    /// Swap in a new show at the first frame boundary at or after this CLOCK_MONOTONIC
    /// time (a remote's stop: the frame its blacked-out master goes black at). A `Reload`
    /// before then drops it.
    At(Box<Engine>, u64),
    /// From now on, the end of a playlist does this (a reload that adds or drops a
    /// schedule).
    OnEnd(OnEnd),
    /// A live override (`engine::live`): what every frame does from this frame boundary
    /// on, with the engine and the end-of-playlist rule that go with it, in one message
    /// so they take effect at the same frame.
    Live(Box<LiveMsg>),
    /// Send stream-terminated packets and end the thread.
    Stop,
}

/// A live override for the render thread.
pub struct LiveMsg {
    pub overlay: Overlay,
    /// An engine to swap in with it: at this frame, or (`true`) when the item playing
    /// ends, as `Control::After`.
    pub engine: Option<(Box<Engine>, bool)>,
    pub on_end: Option<OnEnd>,
    /// Hears the Unix µs stamp of the frame that first carried the override (the
    /// frame's datagrams carry the same stamp). `try_send`: the loop never waits on it.
    pub reply: Option<SyncSender<u64>>,
}

/// What the loop does when a playlist without `loop` (or with no items) ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnEnd {
    /// End the thread (`Exit::Finished`): a show config without a schedule.
    Exit,
    /// Send black frames until the next control message: the schedule decides what next,
    /// and an engine with no items is how it asks for black.
    Black,
}

/// How the loop ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exit {
    Stopped,
    /// A playlist without `loop` played to its end.
    Finished,
}

/// The loop's part in MultiSync.
pub enum SyncLink {
    Standalone,
    /// A master: after each frame's send, `Announce` hears what went out.
    Master(Box<dyn Announce>),
    /// A remote: its sequence's frames go out on the master's timeline.
    Remote(Box<RemoteLink>),
}

/// What a master does with each frame: the sync thread's sender, called on the render
/// thread right after the frame's wire_send, so a packet's departure tracks the frame's.
/// It must not block or allocate.
pub trait Announce: Send {
    /// `playing` is None when no sequence played this frame (a pattern, black, the end).
    fn frame_sent(&mut self, playing: Option<Playing<'_>>);
}

/// The sequence frame that just went out.
#[derive(Debug, Clone, Copy)]
pub struct Playing<'a> {
    /// Which show (engine) it belongs to: a reload is a new start.
    pub show: u64,
    /// The item's start on this unit's clock: a new lap of a looping playlist is a new
    /// start.
    pub item_start_ns: u64,
    /// The file's base name.
    pub name: &'a str,
    pub frame: u32,
    /// Position in the file when the frame went out.
    pub pos_ns: u64,
}

/// A remote's link: the master's timeline from the sync thread, and what the loop did
/// with it (for `/profile`).
pub struct RemoteLink {
    pub timeline: Arc<Timeline>,
    pub status: Arc<Status>,
    pacer: Pacer,
    last: Option<Published>,
    generation: u64,
}

impl RemoteLink {
    pub fn new(timeline: Arc<Timeline>, status: Arc<Status>) -> RemoteLink {
        RemoteLink {
            timeline,
            status,
            pacer: Pacer::default(),
            last: None,
            generation: u64::MAX,
        }
    }

    /// Where position 0 of the sequence is on this clock for the frame at `pos_ns`, after
    /// one pacing step; None without an estimate (the loop plays on its own clock).
    fn base_for(&mut self, pos_ns: i64, frame_ns: i64) -> Option<(i64, bool)> {
        if let Some(p) = self.timeline.read() {
            self.last = Some(p);
        }
        let p = self.last?;
        if p.generation != self.generation {
            self.generation = p.generation;
            self.pacer.reset();
        }
        let e = p.estimate?;
        let settling = e.samples < crate::sync::pace::SETTLED_SAMPLES;
        let step = self.pacer.step(e.base_at(pos_ns), frame_ns, settling);
        self.status
            .offset_ns
            .store(self.pacer.error_ns, Ordering::Relaxed);
        self.status
            .corrections
            .store(self.pacer.corrections, Ordering::Relaxed);
        self.status.jumps.store(self.pacer.jumps, Ordering::Relaxed);
        Some((self.pacer.base()?, step == Step::Jump))
    }
}

pub struct LoopHandle {
    control: Sender<Control>,
    thread: Option<JoinHandle<Exit>>,
}

impl LoopHandle {
    pub fn reload(&self, engine: Engine) -> bool {
        self.control.send(Control::Reload(Box::new(engine))).is_ok()
    }

    /// Hands over a live override (with its engine, if any) for the next frame.
    pub fn live(&self, msg: LiveMsg) -> bool {
        self.control.send(Control::Live(Box::new(msg))).is_ok()
    }

    /// Changes what the end of a playlist does.
    pub fn set_on_end(&self, on_end: OnEnd) -> bool {
        self.control.send(Control::OnEnd(on_end)).is_ok()
    }

    /// Hands over `engine` to start when the item playing now ends.
    pub fn after_item(&self, engine: Engine) -> bool {
        self.control.send(Control::After(Box::new(engine))).is_ok()
    }

    /// A sender for control messages from another thread (the sync thread swaps in the
    /// master's sequence).
    pub fn sender(&self) -> Sender<Control> {
        self.control.clone()
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
    spawn_with(engine, sink, OnEnd::Exit, SyncLink::Standalone)
}

/// `spawn`, choosing what the end of a playlist does and the loop's part in MultiSync.
pub fn spawn_with(
    engine: Engine,
    sink: impl FrameSink + 'static,
    on_end: OnEnd,
    sync: SyncLink,
) -> std::io::Result<LoopHandle> {
    spawn_live(engine, sink, on_end, sync, Overlay::default())
}

/// `spawn_with`, holding `overlay` from the first frame (a blackout kept across a
/// restart must not let one lit frame out).
pub fn spawn_live(
    engine: Engine,
    sink: impl FrameSink + 'static,
    on_end: OnEnd,
    sync: SyncLink,
    overlay: Overlay,
) -> std::io::Result<LoopHandle> {
    let (tx, rx) = channel();
    let thread = std::thread::Builder::new()
        .name("pfx-render".into())
        .spawn(move || {
            raise_priority("render thread");
            run(engine, sink, rx, on_end, sync, overlay)
        })?;
    Ok(LoopHandle {
        control: tx,
        thread: Some(thread),
    })
}

/// The show the render thread plays: its engine, playlist and channel buffers (not
/// `config::show::Show`, the parsed config it was built from).
struct LoadedShow {
    engine: Engine,
    layout: Vec<PoleMap>,
    channels: Vec<u8>,
    playlist: Playlist,
    late_log: RateLimit,
    error_log: RateLimit,
    /// The playlist has ended and the channels are black (`OnEnd::Black`).
    ended: bool,
    /// Per output: it fills and maps its own channels in halves (see `plan`).
    parallel: Vec<bool>,
    /// The channels this thread fills itself: all but the `parallel` outputs'.
    serial: Vec<Range<usize>>,
}

/// The live override as the loop applies it, with what it derives from the show playing
/// (rebuilt at each override and show change, never per frame).
struct LiveRender {
    overlay: Overlay,
    /// The show's brightness times the override's factor.
    scaled: Brightness,
    zero: Brightness,
    /// The output a test on one output is for, by index in the show playing.
    only: Option<usize>,
    /// When the test pattern began (its moving patterns start from there).
    test_start_ns: u64,
    reply: Option<SyncSender<u64>>,
}

impl LiveRender {
    fn new(overlay: Overlay, show: &LoadedShow, now_ns: u64) -> LiveRender {
        let mut l = LiveRender {
            overlay,
            scaled: Brightness::new(1.0),
            zero: Brightness::new(0.0),
            only: None,
            test_start_ns: now_ns,
            reply: None,
        };
        l.rebind(show);
        l
    }

    fn rebind(&mut self, show: &LoadedShow) {
        self.scaled = show.engine.brightness.scaled(self.overlay.factor);
        self.only = self
            .overlay
            .test
            .as_ref()
            .and_then(|t| t.output.as_deref())
            .and_then(|name| show.engine.outputs.iter().position(|o| o.name == name));
    }

    /// Whether the override decides what the outputs show (the end of a playlist then
    /// holds black rather than ending the player).
    fn holds(&self) -> bool {
        self.overlay.black || self.overlay.test.is_some()
    }

    fn brightness(&self, index: usize) -> &Brightness {
        if output_dark(&self.overlay, self.only, index) {
            &self.zero
        } else {
            &self.scaled
        }
    }
}

/// A frame's channel data into the show's buffer. Channels past the frame's end are
/// black: a sequence shorter than the layout (or than the previous item) must not leave
/// the previous item's light on the poles it does not cover.
fn fill_channels(channels: &mut [u8], data: &[u8]) {
    let n = data.len().min(channels.len());
    channels[..n].copy_from_slice(&data[..n]);
    channels[n..].fill(0);
}

/// `fill_channels` for the channel ranges `ranges` of the buffer only (the rest belongs
/// to outputs that fill their own).
fn fill_ranges(channels: &mut [u8], data: &[u8], ranges: &[Range<usize>]) {
    for r in ranges {
        let end = r.end.min(channels.len());
        let Some(dst) = channels.get_mut(r.start..end) else {
            continue;
        };
        fill_channels(dst, data.get(r.start..).unwrap_or(&[]));
    }
}

/// An output's channels in the show's buffer.
fn channel_range(m: &PoleMap) -> Range<usize> {
    m.start..m.start + m.channels()
}

/// Which outputs fill and map their own channels in halves: those that can (`can`, a
/// large sACN output), unless another output shares any of their channels. A mirrored
/// pole reads the same channels, and with a pattern the later pole's colours win in the
/// shared buffer, an order only a single thread keeps; such an output maps on this
/// thread and only encodes and sends in halves.
fn plan(layout: &[PoleMap], can: &[bool]) -> Vec<bool> {
    let overlap = |a: &Range<usize>, b: &Range<usize>| a.start < b.end && b.start < a.end;
    (0..layout.len())
        .map(|i| {
            let mine = channel_range(&layout[i]);
            can.get(i).copied().unwrap_or(false)
                && !layout
                    .iter()
                    .enumerate()
                    .any(|(j, m)| j != i && overlap(&mine, &channel_range(m)))
        })
        .collect()
}

/// The channel buffer (`len` bytes) less the channels of the `parallel` outputs, as
/// ranges in ascending order.
fn serial_ranges(len: usize, layout: &[PoleMap], parallel: &[bool]) -> Vec<Range<usize>> {
    let mut taken: Vec<Range<usize>> = layout
        .iter()
        .zip(parallel)
        .filter(|(_, p)| **p)
        .map(|(m, _)| channel_range(m))
        .collect();
    taken.sort_by_key(|r| r.start);
    let mut out = Vec::new();
    let mut at = 0;
    for r in taken {
        if r.start > at {
            out.push(at..r.start.min(len));
        }
        at = at.max(r.end);
    }
    if at < len {
        out.push(at..len);
    }
    out.retain(|r| !r.is_empty());
    out
}

/// A pattern into the channels of the outputs this thread fills (`serial`; the others
/// render their own): what `pattern::render` leaves there.
fn render_serial(
    frame: &pattern::Frame,
    layout: &[PoleMap],
    parallel: &[bool],
    serial: &[Range<usize>],
    channels: &mut [u8],
) {
    for r in serial {
        channels[r.clone()].fill(0);
    }
    for (index, pole) in layout.iter().enumerate() {
        if parallel.get(index).copied().unwrap_or(false) {
            continue;
        }
        let end = (pole.start + pole.channels()).min(channels.len());
        if let Some(buf) = channels.get_mut(pole.start..end) {
            frame.render_pixels(index, pole, 0, buf);
        }
    }
}

/// What the source had for a sequence frame.
fn source_status(f: &Fetch<'_>) -> SourceStatus {
    match f {
        Fetch::Ready(_) => SourceStatus::Fresh,
        Fetch::Late(_) => SourceStatus::Late,
        Fetch::Failed(_) => SourceStatus::Error,
        Fetch::OutOfRange => SourceStatus::PastEnd,
    }
}

impl LoadedShow {
    fn new(mut engine: Engine, start_ns: u64) -> LoadedShow {
        // The same integer period FrameClock uses.
        let period_ns = 1_000_000_000 / u64::from(engine.fps.max(1));
        for o in &mut engine.outputs {
            o.set_frame_period(period_ns);
        }
        let layout: Vec<PoleMap> = engine.outputs.iter().map(|o| o.map().clone()).collect();
        let mut len = layout
            .iter()
            .map(|m| m.start + m.channels())
            .max()
            .unwrap_or(0);
        let mut entries = Vec::with_capacity(engine.items.len());
        for item in &engine.items {
            if let ItemSource::Fseq { frame_len, .. } = item {
                len = len.max(*frame_len);
            }
            entries.push(item.entry());
        }
        let playlist = Playlist::new(entries, engine.looped, start_ns);
        let can: Vec<bool> = engine
            .outputs
            .iter()
            .map(Output::renders_in_halves)
            .collect();
        let parallel = plan(&layout, &can);
        let serial = serial_ranges(len, &layout, &parallel);
        LoadedShow {
            engine,
            layout,
            channels: vec![0; len],
            playlist,
            late_log: source_log(),
            error_log: source_log(),
            ended: false,
            parallel,
            serial,
        }
    }
}

/// A remote following the master: the sequence's position 0 on this clock, and the tick
/// the loop plans next on the grid of its own frame period laid from there. A master with
/// the same `fps` lays the same grid from its item's start, so both send a frame at the
/// same tick.
#[derive(Debug, Clone, Copy)]
struct Followed {
    base_ns: i64,
    tick: u64,
    period_ns: u64,
    /// The sequence frame that tick shows.
    frame: u32,
    /// This tick jumped onto the master's timeline (ticks passed over are not skips).
    jumped: bool,
}

impl Followed {
    fn deadline(&self) -> u64 {
        let at = i64::try_from(self.tick.saturating_mul(self.period_ns)).unwrap_or(i64::MAX);
        self.base_ns.saturating_add(at).max(0) as u64
    }
}

/// The file's base name for sync packets (FPP remotes look sequences up by it).
fn base_name(p: &std::path::Path) -> &str {
    p.file_name().and_then(|n| n.to_str()).unwrap_or("")
}

/// A remote plays the one sequence its engine holds on the master's timeline: the next
/// tick (after `tick`, or the one due now when late) and its deadline, or None when there
/// is no estimate or no sequence (the loop keeps its own clock).
fn follow_next(
    remote: &mut RemoteLink,
    show: &LoadedShow,
    tick: Option<u64>,
    now_ns: u64,
) -> Option<Followed> {
    if show.ended {
        return None;
    }
    let Some(ItemSource::Fseq { step_ms, .. }) = show.engine.items.first() else {
        return None;
    };
    let step_ns = u64::from((*step_ms).max(1)) * 1_000_000;
    // The period FrameClock uses, so a master's and a remote's grids agree to the ns.
    let period_ns = 1_000_000_000 / u64::from(show.engine.fps.max(1));
    let next = tick.map_or(0, |t| t + 1);
    // Saturating: the estimate comes from the network (the sync thread bounds positions,
    // and this stays defined whatever it publishes).
    let pos = i64::try_from(next.saturating_mul(period_ns)).unwrap_or(i64::MAX);
    let (base, jumped) = remote.base_for(pos, step_ns as i64)?;
    let due = (now_ns as i64)
        .saturating_sub(base)
        .div_euclid(period_ns as i64)
        .max(0) as u64;
    // A jump (a start, a skip, a restart) goes to the tick due now, back or ahead;
    // otherwise the ticks go on in order and a late loop skips to the one due.
    let tick = if jumped {
        jump_tick(now_ns as i64 - base, period_ns)
    } else {
        due.max(next)
    };
    Some(Followed {
        base_ns: base,
        tick,
        period_ns,
        // The master takes the frame at the moment it woke, a little after its tick;
        // a tick that falls on a frame boundary to within the integer period's rounding
        // (3 × 16_666_666 ns vs. 2 × 25 ms) must show the frame the master shows.
        frame: u32::try_from(
            tick.saturating_mul(period_ns)
                .saturating_add((period_ns / 4).min(1_000_000))
                / step_ns,
        )
        .unwrap_or(u32::MAX),
        jumped,
    })
}

/// The tick a jump onto the master's timeline lands on, `since_base_ns` after the
/// timeline's position 0: the one due now, unless more than half of its period is already
/// gone. Its frame would then go out most of a frame late, a moment before the next
/// one: every remote that hears of a new sequence just after the master's first tick
/// would flash that tick's frame a frame behind the master. It waits for the next tick
/// instead, which it shows with the master. Pure.
fn jump_tick(since_base_ns: i64, period_ns: u64) -> u64 {
    let period = period_ns.max(1) as i64;
    let due = since_base_ns.div_euclid(period).max(0);
    let late = since_base_ns - due * period;
    (if late > period / 2 { due + 1 } else { due }) as u64
}

/// What the render thread keeps from one frame to the next: the show playing, what waits
/// to replace it, the live override and the tick plan. Each part of a frame is a step of
/// its own; `run` keeps only the deadline and the order of the stages.
struct RenderLoop {
    control: Receiver<Control>,
    on_end: OnEnd,
    sync: SyncLink,
    show: LoadedShow,
    /// Old shows are dropped on a thread of their own (their decode threads are joined
    /// and their buffers freed there), never inside a frame.
    retire: Retirer,
    live: LiveRender,
    /// Which show plays, for a master's announces (a reload is a new start).
    show_gen: u64,
    /// A show waiting for the current item to end, and when that is.
    pending: Option<(Box<Engine>, u64)>,
    next_discovery: u64,
    /// A master's blackout waits TELL_REMOTES_FRAMES frames: their announces tell the
    /// remotes nothing plays, and the remotes go black at the frame the master does
    /// (`app::sync::stop_at`). The frames still to wait are kept with the message.
    deferred: Option<(Box<LiveMsg>, u32)>,
    ticks: Ticks,
}

/// Which tick plays next and when it is due: on the unit's own clock, or, for a remote
/// following its master, on the master's timeline.
struct Ticks {
    clock: FrameClock,
    /// The frame count the samples carry.
    tick: u64,
    /// The clock's own tick (it restarts when a remote stops following).
    ctick: u64,
    skipped: u64,
    /// A remote's plan for this frame, and the sequence frame it played last.
    followed: Option<Followed>,
    last_tick: Option<u64>,
    /// A frame went out on the master's timeline since the unit's own clock was last
    /// laid: that clock stood still meanwhile, and going back to it restarts it from now
    /// (its ticks passed while following were played, not skipped). A reload between the
    /// two (the master's stop hands over a black show) must not hide that.
    own_clock_stale: bool,
}

impl Ticks {
    fn new(clock: FrameClock) -> Ticks {
        Ticks {
            clock,
            tick: 0,
            ctick: 0,
            skipped: 0,
            followed: None,
            last_tick: None,
            own_clock_stale: false,
        }
    }

    /// When the frame planned next is due.
    fn deadline(&self) -> u64 {
        self.followed
            .map_or_else(|| self.clock.deadline(self.ctick), |f| f.deadline())
    }

    fn period_ns(&self) -> u64 {
        self.followed
            .map_or(self.clock.period_ns(), |f| f.period_ns)
    }

    /// A new show: a remote finds its place on the master's timeline afresh.
    fn new_show(&mut self) {
        self.followed = None;
        self.last_tick = None;
    }

    /// The frame planned went out: remember it when it was on the master's timeline.
    fn sent(&mut self) {
        if let Some(f) = self.followed {
            self.last_tick = Some(f.tick);
            self.own_clock_stale = true;
        }
    }

    /// The next frame's tick, `now` being the end of the frame that went out: the one
    /// `followed` planned on the master's timeline, or else the unit's own clock's (laid
    /// again from now when the unit was following).
    fn advance(&mut self, followed: Option<Followed>, fps: u32, now: u64) {
        self.followed = followed;
        match followed {
            Some(f) => {
                let planned = self.last_tick.map_or(0, |l| l + 1);
                self.skipped = if f.jumped {
                    0
                } else {
                    f.tick.saturating_sub(planned)
                };
                self.tick += 1 + self.skipped;
            }
            None => {
                if self.own_clock_stale {
                    // Back on the unit's own clock: it starts again from now.
                    self.clock = FrameClock::new(now, fps);
                    self.ctick = 0;
                    self.skipped = 0;
                    self.tick += 1;
                    self.own_clock_stale = false;
                } else {
                    let next = self.clock.next(self.ctick, now);
                    self.tick += next.tick - self.ctick;
                    self.ctick = next.tick;
                    self.skipped = next.skipped;
                }
            }
        }
    }
}

/// A frame's view of the show, the sources kept apart: the sequence frame a source hands
/// out is read while the channels and the outputs are written.
struct Parts<'a> {
    outputs: &'a mut [Output],
    channels: &'a mut [u8],
    layout: &'a [PoleMap],
    parallel: &'a [bool],
    serial: &'a [Range<usize>],
}

impl LoadedShow {
    fn parts(&mut self) -> (&mut [ItemSource], Parts<'_>) {
        (
            &mut self.engine.items,
            Parts {
                outputs: &mut self.engine.outputs,
                channels: &mut self.channels,
                layout: &self.layout,
                parallel: &self.parallel,
                serial: &self.serial,
            },
        )
    }
}

/// What the source stage had for a frame.
struct Sourced<'a> {
    status: SourceStatus,
    /// The sequence frame that played: (item, frame).
    played: Option<(usize, u32)>,
    /// What the outputs in halves fill their channels from, in wire_send.
    data: Option<&'a [u8]>,
    pattern: Option<pattern::Frame>,
}

impl Sourced<'_> {
    /// What output `index`, in halves, fills its channels (from `start` on) from: the
    /// pattern drawn this frame, else the sequence frame, else what they hold.
    fn fill(&self, index: usize, start: usize) -> Fill<'_> {
        match (&self.pattern, self.data) {
            (Some(f), _) => Fill::Pattern(f, index),
            (None, Some(d)) => Fill::Frame(d.get(start..).unwrap_or(&[])),
            (None, None) => Fill::Keep,
        }
    }
}

impl Parts<'_> {
    /// The source stage for this thread's channels: the sequence frame or the pattern
    /// `now` asks for (the end of a playlist is `RenderLoop::playlist_ended`'s).
    fn source<'d>(&mut self, items: &'d mut [ItemSource], now: Now) -> Sourced<'d> {
        let mut s = Sourced {
            status: SourceStatus::Fresh,
            played: None,
            data: None,
            pattern: None,
        };
        match now {
            Now::Fseq { item, frame } => {
                s.played = Some((item, frame));
                if let Some(ItemSource::Fseq { prefetch, .. }) = items.get_mut(item) {
                    // Late or failed: the newest earlier frame (or what the buffer holds)
                    // goes out again, and the profiler and the journal hear of it.
                    let fetched = prefetch.fetch(frame);
                    s.status = source_status(&fetched);
                    s.data = fetched.data();
                    if let Some(data) = s.data {
                        fill_ranges(self.channels, data, self.serial);
                    }
                }
            }
            Now::Pattern { kind, color, t, .. } => {
                // One path for every show: with no output in halves, `serial` is the
                // whole buffer and this is `pattern::render`.
                let f = s.pattern.insert(pattern::Frame::new(kind, color, t));
                render_serial(f, self.layout, self.parallel, self.serial, self.channels);
            }
            Now::Finished => {}
        }
        s
    }

    /// A live test pattern in place of whatever the show has now (which goes on
    /// underneath: its frames are still fetched, so it resumes where it is).
    fn test_pattern(&mut self, live: &LiveRender, t0: u64, pattern: &mut Option<pattern::Frame>) {
        if let Some(tr) = &live.overlay.test {
            let t = t0.saturating_sub(live.test_start_ns) as f64 / 1e9;
            let f = pattern.insert(pattern::Frame::new(tr.kind, tr.color, t));
            render_serial(f, self.layout, self.parallel, self.serial, self.channels);
        }
    }

    /// The geometry stage: each pole's wire pixels (the outputs in halves map their own),
    /// at the show's brightness under the live override's.
    fn geometry(&mut self, live: &LiveRender) {
        for (i, (o, parallel)) in self.outputs.iter_mut().zip(self.parallel).enumerate() {
            if !parallel {
                o.map_from(self.channels, live.brightness(i));
            }
        }
    }

    /// The wire_send stage. The first output of each frame goes first on the wire; when
    /// the link cannot carry the show, whoever goes first gets through. Taking turns
    /// shares the loss. The outputs in halves fill and map their own channels here: their
    /// source and geometry time comes back, to be moved to those stages.
    fn wire_send(
        &mut self,
        src: &Sourced<'_>,
        live: &LiveRender,
        tick: u64,
        stamp: u64,
    ) -> HalfTimes {
        let n = self.outputs.len();
        let mut halves = HalfTimes::default();
        for k in 0..n {
            let i = (tick as usize).wrapping_add(k) % n;
            let o = &mut self.outputs[i];
            if !self.parallel[i] {
                o.send_frame(stamp);
                continue;
            }
            let range = channel_range(&self.layout[i]);
            let fill = src.fill(i, range.start);
            let t = o.render_and_send(&mut self.channels[range], fill, live.brightness(i));
            halves.source_ns += t.source_ns;
            halves.geometry_ns += t.geometry_ns;
        }
        halves
    }

    /// The dashboard's copy of what went out, only when a viewer asked (counted in
    /// wire_send: it is part of what a frame costs while someone watches).
    fn offer_pixels(&self, stamp: u64) {
        crate::pixels::BOARD.offer(
            stamp,
            self.outputs
                .iter()
                .map(|o| (o.name.as_str(), o.map(), o.pixels())),
        );
    }
}

/// The clock read at each stage boundary of a frame.
struct Stamps {
    t0: u64,
    t1: u64,
    t2: u64,
    t3: u64,
    t4: u64,
}

impl Stamps {
    /// Each stage's wall time, the outputs in halves' source and geometry time moved
    /// out of wire_send into those stages.
    fn stage_ns(&self, halves: &HalfTimes) -> [u64; Stage::COUNT] {
        let mut s = [0; Stage::COUNT];
        s[Stage::Background as usize] = self.t1 - self.t0;
        s[Stage::Source as usize] = self.t2 - self.t1 + halves.source_ns;
        s[Stage::Geometry as usize] = self.t3 - self.t2 + halves.geometry_ns;
        s[Stage::WireSend as usize] =
            (self.t4 - self.t3).saturating_sub(halves.source_ns + halves.geometry_ns);
        s
    }
}

impl RenderLoop {
    fn new(
        engine: Engine,
        control: Receiver<Control>,
        on_end: OnEnd,
        sync: SyncLink,
        overlay: Overlay,
        loop_start: u64,
    ) -> RenderLoop {
        let clock = FrameClock::new(loop_start, engine.fps);
        let show = LoadedShow::new(engine, clock.start_ns());
        let retire = Retirer::new();
        let live = LiveRender::new(overlay, &show, loop_start);
        RenderLoop {
            control,
            on_end,
            sync,
            show,
            retire,
            live,
            show_gen: 0,
            pending: None,
            next_discovery: clock.start_ns(),
            deferred: None,
            ticks: Ticks::new(clock),
        }
    }

    /// The background stage: control messages, the waiting show, discovery, a remote's
    /// start on the master's timeline, interface upkeep. Ok(true): this frame is one a
    /// master's blackout waits for its remotes; Err: the thread ends.
    fn background(&mut self, t0: u64, tick_ns: u64) -> Result<bool, Exit> {
        let telling_remotes = self.control_message(t0, tick_ns)?;
        self.start_pending(t0);
        self.send_discovery(t0);
        self.start_following(t0);
        for o in &mut self.show.engine.outputs {
            o.maintain(t0);
        }
        Ok(telling_remotes)
    }

    /// One control message, if any: a deferred blackout whose wait is over, else the
    /// channel's next. Ok(true) while a master's blackout waits; Err: the thread ends.
    /// `tick_ns` is this tick's deadline: a show started now starts there.
    fn control_message(&mut self, t0: u64, tick_ns: u64) -> Result<bool, Exit> {
        let mut telling_remotes = false;
        let mut due = None;
        match self.deferred.take() {
            Some((m, 0)) => due = Some(Ok(Control::Live(m))),
            Some((m, left)) => {
                self.deferred = Some((m, left - 1));
                telling_remotes = true;
            }
            None => {}
        }
        let was_deferred = due.is_some();
        match due.unwrap_or_else(|| self.control.try_recv()) {
            Ok(Control::Live(msg))
                if !was_deferred
                    && matches!(self.sync, SyncLink::Master(_))
                    && msg.overlay.black
                    && !self.live.overlay.black =>
            {
                telling_remotes = true;
                self.deferred = Some((msg, TELL_REMOTES_FRAMES - 1));
            }
            Ok(Control::At(new, at)) => self.retire.retire_some(self.pending.replace((new, at))),
            Ok(Control::Reload(new)) => self.reload(new, t0, tick_ns),
            Ok(Control::After(new)) => self.after_item(new, t0),
            Ok(Control::OnEnd(e)) => self.on_end = e,
            Ok(Control::Live(msg)) => self.apply_live(*msg, t0, tick_ns),
            Ok(Control::Stop) | Err(TryRecvError::Disconnected) => {
                terminate(&mut self.show, &mut self.sync);
                return Err(Exit::Stopped);
            }
            Err(TryRecvError::Empty) => {}
        }
        Ok(telling_remotes)
    }

    /// `new` in place of the show playing, its playlist starting at `start_ns`; the old
    /// show goes to the retire thread. A show started at a tick starts at that tick's
    /// deadline, never at the moment the thread woke: its positions at later ticks are
    /// then whole frames (plus each tick's own wake-up delay), so each tick shows the next
    /// frame. From the woken time, a tick that wakes a little earlier in its period than
    /// the first one did reads a position just short of its frame: that frame again, then
    /// a skip.
    fn swap_show(&mut self, new: Engine, start_ns: u64, t0: u64) {
        self.retire.retire(std::mem::replace(
            &mut self.show,
            LoadedShow::new(new, start_ns),
        ));
        self.show_gen += 1;
        self.ticks.new_show();
        self.next_discovery = t0;
    }

    fn reload(&mut self, new: Box<Engine>, t0: u64, tick_ns: u64) {
        if new.fps != self.show.engine.fps {
            tracing::warn!(
                "fps changes take effect on restart; keeping {} fps",
                self.show.engine.fps
            );
        }
        // A reload restarts the playlist now.
        self.swap_show(*new, tick_ns.min(t0), t0);
        self.retire.retire_some(self.pending.take());
        self.live.rebind(&self.show);
        tracing::info!("show reloaded");
    }

    /// `new` to start when the item playing now ends (when the show already waiting was
    /// to start, or at once when nothing plays).
    fn after_item(&mut self, new: Box<Engine>, t0: u64) {
        let at = match &self.pending {
            Some((_, at)) => *at,
            None if self.show.ended => t0,
            None => self.show.playlist.item_end_ns().unwrap_or(t0),
        };
        self.retire.retire_some(self.pending.replace((new, at)));
    }

    fn apply_live(&mut self, msg: LiveMsg, t0: u64, tick_ns: u64) {
        let LiveMsg {
            overlay,
            engine,
            on_end,
            reply,
        } = msg;
        if let Some(e) = on_end {
            self.on_end = e;
        }
        match engine {
            Some((new, false)) => {
                self.swap_show(*new, tick_ns.min(t0), t0);
                self.retire.retire_some(self.pending.take());
            }
            Some((new, true)) => self.after_item(new, t0),
            None => {}
        }
        if overlay.test != self.live.overlay.test {
            self.live.test_start_ns = tick_ns.min(t0);
        }
        // An ended playlist's channels were blackened once; a pattern drawn into them
        // since must not stay when it is lifted.
        if self.show.ended {
            self.show.channels.fill(0);
        }
        self.live.overlay = overlay;
        self.live.reply = reply;
        self.live.rebind(&self.show);
        tracing::info!("live control: a new override from this frame");
    }

    /// The waiting show, once its time has come.
    fn start_pending(&mut self, t0: u64) {
        if self.pending.as_ref().is_some_and(|(_, at)| t0 >= *at)
            && let Some((new, at)) = self.pending.take()
        {
            // The next show starts where the item ended, not when this tick noticed.
            self.swap_show(*new, at.min(t0), t0);
            self.live.rebind(&self.show);
            tracing::info!("the item ended; the next show starts");
        }
    }

    fn send_discovery(&mut self, t0: u64) {
        if t0 >= self.next_discovery {
            self.next_discovery = t0 + DISCOVERY_INTERVAL_NS;
            for o in &mut self.show.engine.outputs {
                o.send_discovery();
            }
        }
    }

    /// A remote's new show starts at the master's frame, not at its own frame 0.
    fn start_following(&mut self, t0: u64) {
        if self.ticks.followed.is_none()
            && let SyncLink::Remote(r) = &mut self.sync
        {
            self.ticks.followed = follow_next(r, &self.show, None, t0);
        }
    }

    /// What plays at `t0`: a remote's frame comes from the master's timeline, not its own
    /// start.
    fn now_playing(&mut self, t0: u64) -> Now {
        match self.ticks.followed {
            Some(f) => match self.show.engine.items.first() {
                Some(ItemSource::Fseq { frames, .. }) if f.frame < *frames => Now::Fseq {
                    item: 0,
                    frame: f.frame,
                },
                _ => Now::Finished,
            },
            None => self.show.playlist.at(t0),
        }
    }

    /// The playlist has ended: Some when that ends the thread, else the channels go (and
    /// stay) black. A held override keeps the player up (black or the pattern) when an
    /// unscheduled show ends.
    fn playlist_ended(&mut self) -> Option<Exit> {
        match self.on_end {
            OnEnd::Exit if !self.live.holds() => {
                terminate(&mut self.show, &mut self.sync);
                Some(Exit::Finished)
            }
            OnEnd::Exit | OnEnd::Black => {
                if !self.show.ended {
                    self.show.channels.fill(0);
                    self.show.ended = true;
                }
                None
            }
        }
    }

    /// After the frame is in the kernel: the override's reply, the source's journal line,
    /// a master's announce.
    fn after_send(
        &mut self,
        played: Option<(usize, u32)>,
        source: SourceStatus,
        stamp: u64,
        t0: u64,
        telling_remotes: bool,
    ) {
        // The override's first frame is in the kernel: say when it went.
        if let Some(r) = self.live.reply.take() {
            let _ = r.try_send(stamp);
        }
        if let Some((item, frame)) = played
            && let Some(ItemSource::Fseq { prefetch, .. }) = self.show.engine.items.get(item)
        {
            log_source(
                &mut self.show.late_log,
                &mut self.show.error_log,
                source,
                prefetch,
                frame,
                t0,
            );
        }
        self.announce(played, telling_remotes);
    }

    /// A master's announce of the frame that just went out.
    fn announce(&mut self, played: Option<(usize, u32)>, telling_remotes: bool) {
        if let SyncLink::Master(a) = &mut self.sync {
            let show = &self.show;
            let item_start_ns = show.playlist.item_start_ns();
            let playing = played.and_then(|(item, frame)| match show.engine.items.get(item) {
                Some(ItemSource::Fseq { prefetch, .. }) => Some(Playing {
                    show: self.show_gen,
                    item_start_ns,
                    name: base_name(prefetch.path()),
                    frame,
                    pos_ns: mono_ns().saturating_sub(item_start_ns),
                }),
                _ => None,
            });
            // A blacked-out master plays on unseen and tells its remotes nothing plays:
            // they stop at their next frame (docs/operator-guide.md, "Show night").
            a.frame_sent(playing.filter(|_| !self.live.overlay.black && !telling_remotes));
        }
    }

    /// MultiSync following: the next frame's tick, `now` being the end of this one.
    fn plan_next(&mut self, now: u64) {
        self.ticks.sent();
        let followed = match &mut self.sync {
            SyncLink::Remote(r) => follow_next(r, &self.show, self.ticks.last_tick, now),
            _ => None,
        };
        self.ticks.advance(followed, self.show.engine.fps, now);
    }
}

fn run(
    engine: Engine,
    mut sink: impl FrameSink,
    control: Receiver<Control>,
    on_end: OnEnd,
    sync: SyncLink,
    overlay: Overlay,
) -> Exit {
    let loop_start = mono_ns();
    let mut lp = RenderLoop::new(engine, control, on_end, sync, overlay, loop_start);
    loop {
        let deadline = lp.ticks.deadline();
        sleep_until(deadline);
        let t0 = mono_ns();

        // background: control messages, discovery, interface upkeep.
        let telling_remotes = match lp.background(t0, deadline) {
            Ok(telling) => telling,
            Err(exit) => return exit,
        };
        let t1 = mono_ns();

        // source: the channel data for this moment.
        let now_playing = lp.now_playing(t0);
        if matches!(now_playing, Now::Finished)
            && let Some(exit) = lp.playlist_ended()
        {
            return exit;
        }
        let (items, mut parts) = lp.show.parts();
        let mut src = parts.source(items, now_playing);
        parts.test_pattern(&lp.live, t0, &mut src.pattern);
        let t2 = mono_ns();

        // geometry
        parts.geometry(&lp.live);
        let t3 = mono_ns();

        // wire_send
        let stamp = unix_micros();
        let halves = parts.wire_send(&src, &lp.live, lp.ticks.tick, stamp);
        parts.offer_pixels(stamp);
        let t4 = mono_ns();
        let (played, source) = (src.played, src.status);
        lp.after_send(played, source, stamp, t0, telling_remotes);

        let period_ns = lp.ticks.period_ns();
        let stamps = Stamps { t0, t1, t2, t3, t4 };
        sink.push(FrameSample {
            tick: lp.ticks.tick,
            stage_ns: stamps.stage_ns(&halves),
            frame_ns: t4 - t0,
            lateness_ns: t0.saturating_sub(deadline),
            missed: t4 > deadline + period_ns,
            skipped: lp.ticks.skipped as u32,
            at_ns: t0 - loop_start,
            source,
        });
        let now = mono_ns();
        lp.plan_next(now);
    }
}

/// The rate-limited journal line for a frame the source did not have, naming the file and
/// the frame. Cold: it runs only on a late or failed frame, and formats only when due.
fn log_source(
    late_log: &mut RateLimit,
    error_log: &mut RateLimit,
    source: SourceStatus,
    prefetch: &Prefetcher,
    frame: u32,
    now_ns: u64,
) {
    match source {
        SourceStatus::Fresh => {}
        SourceStatus::Late => {
            if let Some(n) = late_log.check(now_ns).map(|n| n + 1) {
                tracing::warn!(
                    "{}: frame {frame} was not decoded in time, the previous frame went out again ({n} late frame(s) since this was last logged; a slow SD card or CPU?)",
                    prefetch.path().display()
                );
            }
        }
        SourceStatus::PastEnd => {
            if let Some(n) = error_log.check(now_ns).map(|n| n + 1) {
                tracing::error!(
                    "{}: frame {frame} is past the sequence's last frame ({} frames), the previous frame went out again ({n} such frame(s) since this was last logged)",
                    prefetch.path().display(),
                    prefetch.frames()
                );
            }
        }
        SourceStatus::Error => {
            if let Some(n) = error_log.check(now_ns).map(|n| n + 1) {
                tracing::error!(
                    "{}: frame {frame} cannot be decoded, the previous frame went out again ({n} frame(s) lost to decode errors since this was last logged): {}",
                    prefetch.path().display(),
                    prefetch.error().unwrap_or_else(|| "no detail".into())
                );
            }
        }
    }
}

/// The source's warnings: one line per `SOURCE_LOG_EVERY_NS`, saying how many frames it
/// covers (the ones held back and its own).
fn source_log() -> RateLimit {
    RateLimit::new(std::time::Duration::from_nanos(SOURCE_LOG_EVERY_NS))
}

fn terminate(show: &mut LoadedShow, sync: &mut SyncLink) {
    if let SyncLink::Master(a) = sync {
        a.frame_sent(None);
    }
    for o in &mut show.engine.outputs {
        o.terminate();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_jump_lands_on_the_tick_due_unless_most_of_it_is_gone() {
        let p = 25_000_000u64; // 40 fps
        // Heard 0.3 ms after position 0: tick 0 goes out at once, with the master's.
        assert_eq!(jump_tick(300_000, p), 0);
        // Heard 12 ms in: still tick 0 (under half a period late).
        assert_eq!(jump_tick(12_000_000, p), 0);
        // Heard 24.7 ms in (the master's first tick passed, its second not yet): tick 0
        // would go out 24.7 ms late, right before tick 1; the jump waits for tick 1.
        assert_eq!(jump_tick(24_700_000, p), 1);
        assert_eq!(jump_tick(12_500_001, p), 1);
        // A jump ahead into a sequence: the same rule at every tick.
        assert_eq!(jump_tick(100 * 25_000_000 + 1_000_000, p), 100);
        assert_eq!(jump_tick(100 * 25_000_000 + 20_000_000, p), 101);
        // Before position 0 (the timeline starts ahead of now): tick 0, waited for.
        assert_eq!(jump_tick(-5_000_000, p), 0);
        // 60 fps: the integer period (16_666_666 ns).
        assert_eq!(jump_tick(16_666_666 + 9_000_000, 16_666_666), 2);
        assert_eq!(jump_tick(16_666_666 + 8_000_000, 16_666_666), 1);
    }

    #[test]
    fn the_source_log_lets_one_line_through_per_interval_covering_the_rest() {
        let mut r = source_log();
        let s = SOURCE_LOG_EVERY_NS;
        let mut hit = |t| r.check(t).map(|n| n + 1);
        assert_eq!(hit(10), Some(1), "the first event logs at once");
        assert_eq!(hit(20), None);
        assert_eq!(hit(s), None);
        assert_eq!(hit(s + 10), Some(3), "covers the two held back and itself");
        assert_eq!(hit(s + 11), None);
    }

    #[test]
    fn a_frame_past_the_sequence_end_is_not_counted_fresh() {
        assert_eq!(source_status(&Fetch::OutOfRange), SourceStatus::PastEnd);
        assert!(source_status(&Fetch::OutOfRange).is_error());
        assert_eq!(source_status(&Fetch::Ready(&[1])), SourceStatus::Fresh);
        assert_eq!(source_status(&Fetch::Late(None)), SourceStatus::Late);
        assert_eq!(source_status(&Fetch::Failed(None)), SourceStatus::Error);
    }

    fn pole(start: usize, pixels: usize) -> PoleMap {
        PoleMap {
            start,
            pixels,
            format: crate::config::PixelFormat::Rgb8,
            order: crate::config::ColorOrder::Rgb,
        }
    }

    #[test]
    fn an_output_in_halves_fills_its_own_channels_and_the_render_thread_the_rest() {
        // 0..30, 30..60 (can), 60..90 (can, but pole 3 mirrors part of it), 75..105.
        let layout = [pole(0, 10), pole(30, 10), pole(60, 10), pole(75, 10)];
        let parallel = plan(&layout, &[false, true, true, false]);
        assert_eq!(parallel, [false, true, false, false]);
        assert_eq!(serial_ranges(120, &layout, &parallel), [0..30, 60..120]);
        // Nothing in halves: the whole buffer, as before.
        assert_eq!(
            serial_ranges(120, &layout, &[false; 4]),
            vec![Range { start: 0, end: 120 }]
        );
        assert_eq!(
            serial_ranges(90, &layout, &[true, true, true, false]),
            Vec::<Range<usize>>::new()
        );
    }

    /// Every pattern: the one-thread render of `layout` against render_serial over its
    /// serial ranges plus what `halves` fills (the outputs in halves' own part).
    fn assert_serial_render_is_the_whole(
        layout: &[PoleMap],
        parallel: &[bool],
        halves: impl Fn(&pattern::Frame, &mut [u8]),
    ) {
        use crate::config::show::PatternKind;
        let serial = serial_ranges(200, layout, parallel);
        for kind in [PatternKind::Rainbow, PatternKind::Id, PatternKind::Chase] {
            let mut one = vec![0xa5; 200];
            pattern::render(kind, [1, 2, 3], 0.4, layout, &mut one);
            let mut two = vec![0xa5; 200];
            let f = pattern::Frame::new(kind, [1, 2, 3], 0.4);
            render_serial(&f, layout, parallel, &serial, &mut two);
            halves(&f, &mut two);
            assert_eq!(one, two, "{kind:?}");
        }
    }

    #[test]
    fn with_no_output_in_halves_the_serial_render_is_the_whole_render() {
        let layout = [pole(0, 10), pole(30, 40), pole(150, 5)];
        let parallel = [false; 3];
        let serial = serial_ranges(200, &layout, &parallel);
        assert_eq!(serial, vec![0..200]);
        assert_serial_render_is_the_whole(&layout, &parallel, |_, _| {});
        let data: Vec<u8> = (0..170).map(|i| i as u8).collect();
        let (mut one, mut two) = (vec![0xa5; 200], vec![0xa5; 200]);
        fill_channels(&mut one, &data);
        fill_ranges(&mut two, &data, &serial);
        assert_eq!(one, two);
    }

    #[test]
    fn the_serial_fill_and_the_halves_together_are_the_one_thread_fill() {
        let layout = [pole(0, 10), pole(30, 40), pole(150, 5)];
        let parallel = [false, true, false];
        let serial = serial_ranges(200, &layout, &parallel);
        // Pole 1's own fill, as its halves do it.
        assert_serial_render_is_the_whole(&layout, &parallel, |f, two| {
            f.render_pixels(1, &layout[1], 0, &mut two[30..150])
        });
        let data: Vec<u8> = (0..170).map(|i| i as u8).collect();
        let mut one = vec![0xa5; 200];
        fill_channels(&mut one, &data);
        let mut two = vec![0xa5; 200];
        fill_ranges(&mut two, &data, &serial);
        two[30..150].copy_from_slice(&one[30..150]);
        assert_eq!(one, two);
    }

    #[test]
    fn channels_past_a_short_frame_are_black() {
        let mut ch = [7u8; 6];
        fill_channels(&mut ch, &[1, 2]);
        assert_eq!(ch, [1, 2, 0, 0, 0, 0]);
        fill_channels(&mut ch, &[9; 8]);
        assert_eq!(ch, [9; 6]);
    }
}
