/// The timed stages of one frame, in the order they run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Housekeeping between frames: playlist advance, config swap, discovery packets.
    Background = 0,
    /// Reading (or computing) the frame's channel data.
    Source = 1,
    /// Channels to each output's pixel buffer: colour order, brightness.
    Geometry = 2,
    /// Encoding and handing datagrams to the kernel.
    WireSend = 3,
}

pub const STAGES: [Stage; 4] = [
    Stage::Background,
    Stage::Source,
    Stage::Geometry,
    Stage::WireSend,
];

impl Stage {
    pub const COUNT: usize = 4;

    pub fn name(self) -> &'static str {
        match self {
            Stage::Background => "background",
            Stage::Source => "source",
            Stage::Geometry => "geometry",
            Stage::WireSend => "wire_send",
        }
    }
}

/// What the source stage had for the frame. Anything but `Fresh` means the poles showed
/// an older frame again (or black), so the profiler counts it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SourceStatus {
    /// The frame the show asked for (or a computed pattern).
    #[default]
    Fresh,
    /// Decode-ahead had not decoded the frame yet.
    Late,
    /// The decoder failed on this part of the file (a corrupt block).
    Error,
    /// The frame asked for lies past the sequence's last frame (the playlist and the file
    /// disagree on its length): nothing new to show, the channels keep the last frame.
    /// Waiting will not bring it, so the profiler counts it with the errors.
    PastEnd,
}

impl SourceStatus {
    /// The profiler's `source_errors`: the source could not give this frame at all.
    pub fn is_error(self) -> bool {
        matches!(self, SourceStatus::Error | SourceStatus::PastEnd)
    }
}

/// One frame's timing, as the render thread measured it. Plain data: it is copied into a
/// wait-free ring for the profiler thread, so recording costs no lock and no allocation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FrameSample {
    /// Loop tick n; its deadline is start + n × period.
    pub tick: u64,
    /// Duration of each stage, indexed by `Stage as usize`, in nanoseconds.
    pub stage_ns: [u64; Stage::COUNT],
    /// Whole frame: start of background to end of wire_send.
    pub frame_ns: u64,
    /// How far after its deadline the frame started.
    pub lateness_ns: u64,
    /// The frame's work ended after the next tick's deadline.
    pub missed: bool,
    /// Ticks skipped (never rendered) just before this one, because the loop was late.
    pub skipped: u32,
    /// Frame start, nanoseconds since the loop started (the loop's own clock).
    pub at_ns: u64,
    /// Whether the source stage had this frame's data.
    pub source: SourceStatus,
}

/// Where the render loop hands each frame's sample: the profiler's wait-free ring in the
/// player (`profiler::SampleSink`), a plain recorder in a test. `push` runs on the render
/// thread once per frame, so an implementation must not block or allocate.
pub trait FrameSink: Send {
    fn push(&mut self, sample: FrameSample);
}
