//! The profiler's state machine: samples in, window / since-start / per-interval summaries
//! out. Owned by the profiler thread (see `mod.rs`); public so the benchmark can time the
//! per-sample cost without a thread.

use std::time::Duration;

use crate::engine::FrameSample;
use crate::output::counters::CountersSnapshot;

use super::window::{Summary, Totals, Window, fps_between, rate_per_s, summarize};
use super::{OutputRates, ProfilerConfig};

#[derive(Debug)]
pub struct Aggregator {
    window: Window,
    totals: Totals,
    /// Frames since the last history point (bounded: a runaway loop can't grow it).
    interval: Vec<FrameSample>,
    interval_cap: usize,
    /// Start of the last frame of the previous interval, so an interval's fps covers
    /// exactly its own frames.
    prev_interval_last_at: Option<u64>,
    last_at_ns: Option<u64>,
    scratch: Vec<u64>,
}

impl Aggregator {
    pub fn new(cfg: &ProfilerConfig) -> Self {
        let window = if cfg.window.is_zero() {
            Duration::from_secs(5)
        } else {
            cfg.window
        };
        let interval_cap = cfg.fps.max(1) as usize * 10 + 64;
        Aggregator {
            window: Window::new(window, cfg.fps),
            totals: Totals::new(),
            interval: Vec::with_capacity(interval_cap),
            interval_cap,
            prev_interval_last_at: None,
            last_at_ns: None,
            scratch: Vec::new(),
        }
    }

    /// Records one frame everywhere it counts. No allocation once the buffers have grown.
    #[inline]
    pub fn ingest(&mut self, s: FrameSample) {
        self.window.push(s);
        self.totals.record(&s);
        if self.interval.len() < self.interval_cap {
            self.interval.push(s);
        }
        self.last_at_ns = Some(s.at_ns);
    }

    pub fn window_span(&self) -> Duration {
        self.window.span()
    }

    /// Start of the newest frame on the loop's clock.
    pub fn last_at_ns(&self) -> Option<u64> {
        self.last_at_ns
    }

    /// The window as of `now_ns` on the loop's clock (frames older than the span leave).
    pub fn window_summary(&mut self, now_ns: u64) -> Summary {
        self.window.evict(now_ns);
        self.window.summary()
    }

    pub fn totals_summary(&self) -> Summary {
        self.totals.summary()
    }

    pub fn loop_span_s(&self) -> f64 {
        self.totals.loop_span_s()
    }

    /// Summarises the frames since the previous call and starts a new interval.
    pub fn close_interval(&mut self) -> Summary {
        let mut s = summarize(self.interval.iter(), &mut self.scratch);
        if let (Some(prev), Some(last)) = (self.prev_interval_last_at, self.interval.last()) {
            // n frames after the previous interval's last one: n intervals of the loop clock.
            s.fps = fps_between(s.frames + 1, prev, last.at_ns);
        }
        if let Some(last) = self.interval.last() {
            self.prev_interval_last_at = Some(last.at_ns);
        }
        self.interval.clear();
        s
    }
}

/// Per-second rates of one output's counters, from readings that each carry the time they
/// were taken (right after the counters). A backward step reads as 0 and re-bases.
#[derive(Debug, Default)]
pub struct RateTracker {
    prev: Option<(CountersSnapshot, f64)>,
    pub rates: Option<OutputRates>,
    /// Each datagram's frames at the previous reading, and when.
    slots_prev: Option<(Vec<u64>, f64)>,
    slowest: Option<(u64, f64)>,
}

impl RateTracker {
    pub fn update(&mut self, cur: &CountersSnapshot, t_s: f64) {
        if let Some((p, pt)) = &self.prev {
            let r = |a: u64, b: u64| rate_per_s(a, *pt, b, t_s);
            if let (
                Some(packets_per_s),
                Some(bytes_per_s),
                Some(sent),
                Some(dropped),
                Some(failed),
                Some(partial),
                Some(skipped),
            ) = (
                r(p.packets, cur.packets),
                r(p.bytes, cur.bytes),
                r(p.frames_sent, cur.frames_sent),
                r(p.frames_dropped, cur.frames_dropped),
                r(p.frames_failed, cur.frames_failed),
                r(p.frames_partial, cur.frames_partial),
                r(p.frames_skipped, cur.frames_skipped),
            ) {
                let (slowest_slot, slowest_slot_per_s) = match self.slowest {
                    Some((s, r)) => (Some(s), Some(r)),
                    None => (None, None),
                };
                self.rates = Some(OutputRates {
                    slowest_slot,
                    slowest_slot_per_s,
                    packets_per_s,
                    bytes_per_s,
                    frames_sent_per_s: sent,
                    frames_dropped_per_s: dropped,
                    frames_failed_per_s: failed,
                    frames_partial_per_s: partial,
                    frames_skipped_per_s: skipped,
                });
            } else {
                return;
            }
        }
        self.prev = Some((cur.clone(), t_s));
    }

    /// Each datagram's frames (`OutputCounters::slot_frames`) at `t_s`: the slowest
    /// datagram's rate since the previous reading, named `base + index`. Call before
    /// `update` with the same time.
    pub fn update_slots(&mut self, cur: &[u64], base: u64, t_s: f64) {
        if let Some((prev, pt)) = &self.slots_prev
            && prev.len() == cur.len()
            && t_s > *pt
        {
            self.slowest = cur
                .iter()
                .zip(prev)
                .enumerate()
                .map(|(i, (c, p))| (i, c.saturating_sub(*p) as f64 / (t_s - pt)))
                .min_by(|a, b| a.1.total_cmp(&b.1))
                .map(|(i, r)| (base + i as u64, r));
        }
        self.slots_prev = Some((cur.to_vec(), t_s));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> ProfilerConfig {
        ProfilerConfig {
            window: Duration::from_secs(5),
            fps: 60,
        }
    }

    fn at(i: u64, wire_ns: u64) -> FrameSample {
        FrameSample {
            tick: i,
            stage_ns: [1, 1, 1, wire_ns],
            at_ns: i * 1_000_000_000 / 60,
            ..Default::default()
        }
    }

    #[test]
    fn interval_fps_counts_only_its_own_frames() {
        let mut a = Aggregator::new(&cfg());
        for i in 0..60 {
            a.ingest(at(i, 100));
        }
        let first = a.close_interval();
        assert_eq!(first.frames, 60);
        assert!((first.fps.unwrap_or(0.0) - 60.0).abs() < 0.01);
        // next second the loop renders every other tick: 30 frames, 30 fps
        for i in (60..120).step_by(2) {
            a.ingest(at(i + 1, 100));
        }
        let second = a.close_interval();
        assert_eq!(second.frames, 30);
        assert!(
            (second.fps.unwrap_or(0.0) - 30.0).abs() < 0.6,
            "{:?}",
            second.fps
        );
        assert_eq!(a.close_interval().frames, 0);
    }

    #[test]
    fn window_and_since_start_diverge_after_rotation() {
        let mut a = Aggregator::new(&cfg());
        for i in 0..600 {
            a.ingest(at(i, if i < 300 { 50_000_000 } else { 100_000 }));
        }
        let now = a.last_at_ns().unwrap_or(0);
        let w = a.window_summary(now);
        let t = a.totals_summary();
        assert_eq!(w.stages[3].max_us, 100.0);
        assert_eq!(t.stages[3].max_us, 50_000.0);
        assert_eq!(t.frames, 600);
        assert!(w.frames <= 300 && w.frames >= 299, "{}", w.frames);
    }

    #[test]
    fn the_slowest_datagram_is_named_with_its_rate() {
        let mut r = RateTracker::default();
        let c = CountersSnapshot::default();
        r.update_slots(&[10, 10, 10], 1, 0.0);
        r.update(&c, 0.0);
        // Universes 1 and 3 got 20 frames in 2 s, universe 2 only 2.
        r.update_slots(&[30, 12, 30], 1, 2.0);
        r.update(&c, 2.0);
        let rates = r.rates.expect("rates after two readings");
        assert_eq!(rates.slowest_slot, Some(2));
        assert_eq!(rates.slowest_slot_per_s, Some(1.0));
    }

    #[test]
    fn rate_tracker_rebases_after_a_reset() {
        let mut r = RateTracker::default();
        let c = |n: u64| CountersSnapshot {
            packets: n,
            bytes: n * 100,
            frames_dropped: n / 10,
            ..Default::default()
        };
        r.update(&c(1000), 0.0);
        assert!(r.rates.is_none(), "no rate from one reading");
        r.update(&c(1600), 1.0);
        assert_eq!(r.rates.as_ref().map(|x| x.packets_per_s), Some(600.0));
        // counters reset (output re-created): 0/s, then rates from the new base
        r.update(&c(10), 2.0);
        assert_eq!(r.rates.as_ref().map(|x| x.packets_per_s), Some(0.0));
        r.update(&c(70), 2.5);
        assert_eq!(r.rates.as_ref().map(|x| x.packets_per_s), Some(120.0));
    }
}
