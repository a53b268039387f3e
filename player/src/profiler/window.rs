//! Pure percentile math: a rolling window of the last frames (exact, nearest-rank), the
//! since-start totals (HDR histograms: unbounded count, ±0.1 % bucket error) and the
//! per-interval summaries behind the dashboard's chart. Time is always an argument (the
//! loop's own clock, `FrameSample::at_ns`); nothing here reads a clock or spawns a thread.
//!
//! Why exact for the window: at 60 fps a 5 s window is 300 samples per series, so sorting
//! a copy costs a few µs, the numbers are the observed ones (p99 of 300 frames is the 297th
//! value, not a bucket edge), and memory is bounded by window × fps. The since-start series
//! grow without bound, which is what HDR histograms are for.

use std::collections::VecDeque;
use std::time::Duration;

use hdrhistogram::Histogram;

use crate::engine::{FrameSample, SourceStatus, Stage};

use super::StageStats;

/// Every timed series, in the order the dashboard and the CLI show them: the four stages,
/// the whole frame, and how late the frame started against its deadline.
pub const SERIES: [&str; 6] = [
    "background",
    "source",
    "geometry",
    "wire_send",
    "frame",
    "lateness",
];
pub const N_SERIES: usize = SERIES.len();

/// The six values of one sample, in nanoseconds, in `SERIES` order.
#[inline]
pub fn series_ns(s: &FrameSample) -> [u64; N_SERIES] {
    [
        s.stage_ns[Stage::Background as usize],
        s.stage_ns[Stage::Source as usize],
        s.stage_ns[Stage::Geometry as usize],
        s.stage_ns[Stage::WireSend as usize],
        s.frame_ns,
        s.lateness_ns,
    ]
}

/// Nearest-rank percentile of sorted data: the smallest value with at least `q` of the
/// data at or below it (rank ⌈q·n⌉, 1-based). 0 for no data.
pub fn nearest_rank(sorted: &[u64], q: f64) -> u64 {
    let n = sorted.len();
    if n == 0 {
        return 0;
    }
    let rank = (q * n as f64).ceil() as usize;
    sorted[rank.clamp(1, n) - 1]
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

/// Exact p50/p95/p99/max/count of `values` (sorted in place).
pub fn exact_stats(values: &mut [u64]) -> StageStats {
    values.sort_unstable();
    StageStats {
        p50_us: us(nearest_rank(values, 0.50)),
        p95_us: us(nearest_rank(values, 0.95)),
        p99_us: us(nearest_rank(values, 0.99)),
        max_us: us(values.last().copied().unwrap_or(0)),
        count: values.len() as u64,
    }
}

/// Frames per second from the loop's own clock: (n − 1) frame intervals over the time
/// between the first and the last frame start. None below two frames.
pub fn fps_between(frames: u64, first_at_ns: u64, last_at_ns: u64) -> Option<f64> {
    if frames < 2 || last_at_ns <= first_at_ns {
        return None;
    }
    Some((frames - 1) as f64 * 1e9 / (last_at_ns - first_at_ns) as f64)
}

/// What a set of frames looked like: the per-series stats and the frame counts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Summary {
    pub stages: [StageStats; N_SERIES],
    pub frames: u64,
    pub deadline_misses: u64,
    pub skipped_ticks: u64,
    /// Frames the source had not decoded in time (an older frame went out again).
    pub source_late: u64,
    /// Frames lost to a decode error (an older frame went out again).
    pub source_errors: u64,
    /// None below two frames.
    pub fps: Option<f64>,
}

/// Summarises `samples` exactly, reusing `scratch` (no allocation once it has grown).
pub fn summarize<'a>(
    samples: impl Iterator<Item = &'a FrameSample> + Clone,
    scratch: &mut Vec<u64>,
) -> Summary {
    let mut out = Summary::default();
    for (i, st) in out.stages.iter_mut().enumerate() {
        scratch.clear();
        scratch.extend(samples.clone().map(|s| series_ns(s)[i]));
        *st = exact_stats(scratch);
    }
    let (mut first, mut last) = (u64::MAX, 0u64);
    for s in samples {
        out.frames += 1;
        out.deadline_misses += s.missed as u64;
        out.skipped_ticks += s.skipped as u64;
        out.source_late += (s.source == SourceStatus::Late) as u64;
        out.source_errors += s.source.is_error() as u64;
        first = first.min(s.at_ns);
        last = last.max(s.at_ns);
    }
    out.fps = fps_between(out.frames, first, last);
    out
}

/// The frames that started within the last `span` of the loop's clock.
#[derive(Debug)]
pub struct Window {
    span_ns: u64,
    cap: usize,
    samples: VecDeque<FrameSample>,
    scratch: Vec<u64>,
}

impl Window {
    /// `fps` sizes the buffer: twice the frames the window should ever hold, so a loop that
    /// runs fast never makes it grow without bound (the oldest frames go first).
    pub fn new(span: Duration, fps: u32) -> Self {
        let cap = (span.as_secs_f64() * fps.max(1) as f64 * 2.0) as usize + 256;
        Window {
            span_ns: span.as_nanos().min(u64::MAX as u128) as u64,
            cap,
            samples: VecDeque::with_capacity(cap),
            scratch: Vec::with_capacity(cap),
        }
    }

    pub fn span(&self) -> Duration {
        Duration::from_nanos(self.span_ns)
    }

    pub fn len(&self) -> usize {
        self.samples.len()
    }

    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    #[inline]
    pub fn push(&mut self, s: FrameSample) {
        if self.samples.len() == self.cap {
            self.samples.pop_front();
        }
        self.samples.push_back(s);
    }

    /// Drops frames that started at or before `now_ns − span` (loop clock).
    pub fn evict(&mut self, now_ns: u64) {
        let cutoff = now_ns.saturating_sub(self.span_ns);
        while self
            .samples
            .front()
            .is_some_and(|s| s.at_ns <= cutoff && now_ns >= self.span_ns)
        {
            self.samples.pop_front();
        }
    }

    pub fn summary(&mut self) -> Summary {
        summarize(self.samples.iter(), &mut self.scratch)
    }
}

/// Since start: one HDR histogram per series (ns, 3 significant digits, grows as needed)
/// plus the exact max and the frame counts.
pub struct Totals {
    hists: [Histogram<u64>; N_SERIES],
    max_ns: [u64; N_SERIES],
    pub frames: u64,
    pub deadline_misses: u64,
    pub skipped_ticks: u64,
    pub source_late: u64,
    pub source_errors: u64,
    first_at_ns: u64,
    last_at_ns: u64,
}

impl std::fmt::Debug for Totals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Totals")
            .field("frames", &self.frames)
            .finish_non_exhaustive()
    }
}

impl Default for Totals {
    fn default() -> Self {
        Self::new()
    }
}

impl Totals {
    pub fn new() -> Self {
        let h = || match Histogram::<u64>::new(3) {
            Ok(h) => h,
            // 3 significant digits is always a valid configuration.
            Err(e) => unreachable!("hdrhistogram rejected sigfig 3: {e:?}"),
        };
        Totals {
            hists: [h(), h(), h(), h(), h(), h()],
            max_ns: [0; N_SERIES],
            frames: 0,
            deadline_misses: 0,
            skipped_ticks: 0,
            source_late: 0,
            source_errors: 0,
            first_at_ns: 0,
            last_at_ns: 0,
        }
    }

    #[inline]
    pub fn record(&mut self, s: &FrameSample) {
        for (i, v) in series_ns(s).into_iter().enumerate() {
            if self.hists[i].record(v).is_err() {
                self.hists[i].saturating_record(v);
            }
            self.max_ns[i] = self.max_ns[i].max(v);
        }
        if self.frames == 0 {
            self.first_at_ns = s.at_ns;
        }
        self.frames += 1;
        self.deadline_misses += s.missed as u64;
        self.skipped_ticks += s.skipped as u64;
        self.source_late += (s.source == SourceStatus::Late) as u64;
        self.source_errors += s.source.is_error() as u64;
        self.last_at_ns = s.at_ns;
    }

    pub fn summary(&self) -> Summary {
        let mut out = Summary::default();
        for (i, st) in out.stages.iter_mut().enumerate() {
            let h = &self.hists[i];
            let max = self.max_ns[i];
            // value_at_quantile returns the bucket's highest equivalent value: never report
            // a percentile above the exact max.
            let q = |q: f64| {
                us(if h.is_empty() {
                    0
                } else {
                    h.value_at_quantile(q).min(max)
                })
            };
            *st = StageStats {
                p50_us: q(0.50),
                p95_us: q(0.95),
                p99_us: q(0.99),
                max_us: us(max),
                count: h.len(),
            };
        }
        out.frames = self.frames;
        out.deadline_misses = self.deadline_misses;
        out.skipped_ticks = self.skipped_ticks;
        out.source_late = self.source_late;
        out.source_errors = self.source_errors;
        out.fps = fps_between(self.frames, self.first_at_ns, self.last_at_ns);
        out
    }

    /// Loop-clock time between the first and the last frame seen.
    pub fn loop_span_s(&self) -> f64 {
        self.last_at_ns.saturating_sub(self.first_at_ns) as f64 / 1e9
    }
}

/// Per-second rate of a counter from two readings, each taken with its own time (read
/// right after the counter). A counter that stepped backward (reset) gives 0, not a huge
/// or negative rate; the caller then re-bases on the new reading.
pub fn rate_per_s(prev: u64, prev_t_s: f64, cur: u64, cur_t_s: f64) -> Option<f64> {
    let dt = cur_t_s - prev_t_s;
    if dt <= 0.0 {
        return None;
    }
    Some(cur.saturating_sub(prev) as f64 / dt)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(at_ms: u64, wire_us: u64) -> FrameSample {
        FrameSample {
            tick: at_ms,
            stage_ns: [1_000, 2_000, 3_000, wire_us * 1000],
            frame_ns: 6_000 + wire_us * 1000,
            lateness_ns: 500,
            missed: false,
            skipped: 0,
            at_ns: at_ms * 1_000_000,
            source: SourceStatus::Fresh,
        }
    }

    #[test]
    fn nearest_rank_on_data_where_median_mean_and_max_differ() {
        let mut v = vec![200, 10, 10, 10];
        let s = exact_stats(&mut v);
        // mean would be 57.5; the median is 10, the tail is 200.
        assert_eq!(s.p50_us, 0.010);
        assert_eq!(s.p95_us, 0.200);
        assert_eq!(s.p99_us, 0.200);
        assert_eq!(s.max_us, 0.200);
        assert_eq!(s.count, 4);

        // 100 values 1..=100: p50 = 50, p95 = 95, p99 = 99, max = 100.
        let mut v: Vec<u64> = (1..=100).rev().map(|x| x * 1000).collect();
        let s = exact_stats(&mut v);
        assert_eq!(
            (s.p50_us, s.p95_us, s.p99_us, s.max_us),
            (50.0, 95.0, 99.0, 100.0)
        );

        assert_eq!(nearest_rank(&[], 0.5), 0);
        assert_eq!(nearest_rank(&[7], 0.99), 7);
    }

    #[test]
    fn seeds_shape_low_p50_high_tail() {
        // 94 ordinary sends of 150 µs and 6 stalls of 110 ms: p50 stays low, p95+ is the stall.
        let mut w = Window::new(Duration::from_secs(5), 60);
        for i in 0..100u64 {
            w.push(sample(i * 16, if i % 16 == 7 { 110_000 } else { 150 }));
        }
        let s = w.summary();
        let ws = &s.stages[3];
        assert_eq!(ws.p50_us, 150.0);
        assert_eq!(ws.p95_us, 110_000.0);
        assert_eq!(ws.max_us, 110_000.0);
        assert_eq!(s.stages[0].p99_us, 1.0, "other stages stay ordinary");
    }

    #[test]
    fn window_rotation_drops_frames_older_than_the_span() {
        let mut w = Window::new(Duration::from_secs(5), 60);
        // 10 s at 10 fps; the first 5 s have slow wire_send, the last 5 s fast.
        for i in 0..100u64 {
            w.push(sample(i * 100, if i < 50 { 9_000 } else { 100 }));
        }
        w.evict(9_900 * 1_000_000);
        let s = w.summary();
        // frames that started after 4.9 s: 5.0 .. 9.9 → 50 frames, all fast.
        assert_eq!(s.frames, 50);
        assert_eq!(s.stages[3].max_us, 100.0);
        // an idle loop empties the window as its clock moves on
        w.evict(30_000 * 1_000_000);
        assert!(w.is_empty());
        assert_eq!(w.summary().fps, None);
    }

    #[test]
    fn window_never_grows_past_its_cap() {
        let mut w = Window::new(Duration::from_secs(1), 10);
        for i in 0..10_000u64 {
            w.push(sample(i, 1));
        }
        assert!(w.len() <= 10 * 2 + 256);
    }

    #[test]
    fn since_start_keeps_what_the_window_forgot() {
        let mut w = Window::new(Duration::from_secs(5), 60);
        let mut t = Totals::new();
        for i in 0..100u64 {
            let s = sample(i * 100, if i < 50 { 9_000 } else { 100 });
            w.push(s);
            t.record(&s);
        }
        w.evict(9_900 * 1_000_000);
        let (ws, ts) = (w.summary(), t.summary());
        assert_eq!(ws.stages[3].max_us, 100.0);
        assert_eq!(ts.stages[3].max_us, 9_000.0);
        assert_eq!(ts.frames, 100);
        // since start: half slow, half fast; HDR is within 0.1 %.
        assert!(
            (ts.stages[3].p95_us - 9_000.0).abs() <= 9.0,
            "{:?}",
            ts.stages[3]
        );
        assert!(
            (ts.stages[3].p50_us - 100.0).abs() <= 0.1,
            "{:?}",
            ts.stages[3]
        );
        assert_eq!(ts.stages[3].count, 100);
    }

    #[test]
    fn hdr_percentiles_on_10_10_10_200() {
        let mut t = Totals::new();
        for (i, v) in [10u64, 10, 10, 200].into_iter().enumerate() {
            let mut s = sample(i as u64 * 16, 0);
            s.stage_ns[0] = v * 1000;
            t.record(&s);
        }
        let s = &t.summary().stages[0];
        assert!((s.p50_us - 10.0).abs() < 0.011, "{s:?}");
        assert!((s.p99_us - 200.0).abs() < 0.2, "{s:?}");
        assert_eq!(s.max_us, 200.0);
    }

    #[test]
    fn fps_from_the_loops_clock() {
        // 61 frames 1/60 s apart: 60 fps, whatever the wall clock did while draining.
        let mut w = Window::new(Duration::from_secs(5), 60);
        for i in 0..61u64 {
            let mut s = sample(0, 1);
            s.at_ns = i * 1_000_000_000 / 60;
            w.push(s);
        }
        let fps = w.summary().fps.unwrap_or(0.0);
        assert!((fps - 60.0).abs() < 0.01, "{fps}");
        // a loop that skips every other tick renders 30 fps
        assert_eq!(fps_between(31, 0, 1_000_000_000), Some(30.0));
        assert_eq!(fps_between(1, 0, 0), None);
    }

    #[test]
    fn counts_misses_and_skips() {
        let mut a = sample(0, 1);
        a.missed = true;
        a.skipped = 3;
        let b = sample(16, 1);
        let s = summarize([a, b].iter(), &mut Vec::new());
        assert_eq!((s.frames, s.deadline_misses, s.skipped_ticks), (2, 1, 3));
    }

    #[test]
    fn counts_late_and_failed_source_frames_in_window_and_totals() {
        let mut t = Totals::new();
        let mut v = Vec::new();
        for (i, st) in [
            SourceStatus::Fresh,
            SourceStatus::Late,
            SourceStatus::Error,
            SourceStatus::Error,
            SourceStatus::Fresh,
        ]
        .into_iter()
        .enumerate()
        {
            let mut s = sample(i as u64 * 16, 1);
            s.source = st;
            t.record(&s);
            v.push(s);
        }
        let w = summarize(v.iter(), &mut Vec::new());
        assert_eq!((w.source_late, w.source_errors), (1, 2));
        let ts = t.summary();
        assert_eq!((ts.source_late, ts.source_errors), (1, 2));
    }

    #[test]
    fn a_frame_past_the_sequence_end_counts_as_a_source_error_not_as_fresh() {
        let mut t = Totals::new();
        let mut s = sample(0, 1);
        s.source = SourceStatus::PastEnd;
        t.record(&s);
        let w = summarize([s].iter(), &mut Vec::new());
        assert_eq!((w.source_late, w.source_errors), (0, 1));
        assert_eq!(t.summary().source_errors, 1);
    }

    #[test]
    fn rates_clamp_a_backward_step() {
        assert_eq!(rate_per_s(100, 0.0, 230, 1.0), Some(130.0));
        assert_eq!(rate_per_s(100, 0.0, 130, 0.5), Some(60.0));
        // driver reset: counter went from 1000 to 5: not negative, not huge.
        assert_eq!(rate_per_s(1000, 1.0, 5, 2.0), Some(0.0));
        assert_eq!(rate_per_s(1, 2.0, 5, 2.0), None);
    }
}
