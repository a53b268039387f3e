//! Per-stage timing percentiles over a rolling window and since start.
//!
//! The render thread pushes one `FrameSample` per frame into a wait-free ring
//! (`SampleSink::push`: no lock, no allocation). A profiler thread drains it every 50 ms
//! into the window (exact percentiles), the since-start histograms and the per-second
//! history, and publishes `Snapshot`s for HTTP and the CLI.

pub mod aggregator;
pub mod health;
pub mod window;

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::engine::FrameSample;
use crate::nic::NicStatus;
use crate::output::counters::OutputCounters;

/// The snapshot types are the `/profile` contract, defined once in pfx-api.
pub use pfx_api::profile::{OutputRates, OutputStats, SinceStart, Snapshot, StageStats};

use aggregator::{Aggregator, RateTracker};
use window::{N_SERIES, SERIES, Summary};

/// How often the profiler thread drains the ring and publishes.
pub const DRAIN_EVERY: Duration = Duration::from_millis(50);
/// Per-second history points kept for the dashboard's chart (5 minutes).
pub const HISTORY_POINTS: usize = 300;
/// Ring slots: 4096 frames is over a minute at 60 fps, far more than one 50 ms drain.
pub const RING_SLOTS: usize = 4096;

/// What the profiler needs to know about each output.
#[derive(Debug, Clone)]
pub struct OutputInfo {
    pub name: String,
    pub protocol: String,
    pub destination: String,
    pub counters: Arc<OutputCounters>,
}

#[derive(Debug, Clone)]
pub struct ProfilerConfig {
    /// Rolling window (0 means the default, 5 s).
    pub window: Duration,
    /// The loop's target frame rate (health compares against it).
    pub fps: u32,
}

/// The render thread's end of the sample ring.
pub struct SampleSink {
    producer: rtrb::Producer<FrameSample>,
    /// Samples lost because the profiler thread fell behind.
    pub lost: u64,
    lost_shared: Arc<AtomicU64>,
}

impl SampleSink {
    /// Wait-free: one ring slot write; on a full ring a counter (no lock, no allocation).
    #[inline]
    pub fn push(&mut self, s: FrameSample) {
        if self.producer.push(s).is_err() {
            self.lost += 1;
            self.lost_shared.store(self.lost, Relaxed);
        }
    }
}

impl crate::engine::FrameSink for SampleSink {
    #[inline]
    fn push(&mut self, s: FrameSample) {
        SampleSink::push(self, s)
    }
}

/// p50/p95/p99/max of one series over one history interval, in µs.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PointStats {
    pub p50_us: f64,
    pub p95_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
}

/// One point of the dashboard's chart: the frames of about one second.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct HistoryPoint {
    /// Wall clock when the interval closed.
    pub unix_ms: u64,
    pub stages: BTreeMap<String, PointStats>,
    pub frames: u64,
    pub fps: Option<f64>,
    pub deadline_misses: u64,
    pub skipped_ticks: u64,
    pub pause_rx_per_s: Option<f64>,
    pub pause_tx_per_s: Option<f64>,
    /// Output name → frames dropped per second.
    pub dropped_per_s: BTreeMap<String, f64>,
}

struct Shared {
    started: Instant,
    fps_target: u32,
    latest: Mutex<Snapshot>,
    history: Mutex<VecDeque<HistoryPoint>>,
    nic: Mutex<Option<NicStatus>>,
    sync: Mutex<
        Option<(
            Arc<crate::sync::shared::Status>,
            crate::config::show::SyncRole,
        )>,
    >,
    /// Nanoseconds after `started` when a frame last arrived; 0 = never.
    last_frame_ns: AtomicU64,
    lost: Arc<AtomicU64>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

#[derive(Clone)]
pub struct ProfilerHandle {
    shared: Arc<Shared>,
}

impl ProfilerHandle {
    /// The latest published snapshot, with the frame age and NIC reading as of now.
    pub fn snapshot(&self) -> Snapshot {
        let mut s = lock(&self.shared.latest).clone();
        s.last_frame_age_ms = self.last_frame_age().map(|d| d.as_secs_f64() * 1000.0);
        s.uptime_s = self.shared.started.elapsed().as_secs_f64();
        s.samples_lost = self.shared.lost.load(Relaxed);
        s.nic = lock(&self.shared.nic).clone();
        s.sync = Some(self.sync_status());
        s
    }

    /// The sync thread's status; shown in snapshots from now on.
    pub fn set_sync(
        &self,
        status: Arc<crate::sync::shared::Status>,
        role: crate::config::show::SyncRole,
    ) {
        *lock(&self.shared.sync) = Some((status, role));
    }

    fn sync_status(&self) -> pfx_api::profile::SyncStatus {
        use crate::config::show::SyncRole;
        let standalone = || pfx_api::profile::SyncStatus {
            role: "standalone".into(),
            state: "standalone".into(),
            ..Default::default()
        };
        let Some((st, role)) = lock(&self.shared.sync).clone() else {
            return standalone();
        };
        let ms = |ns: f64| ns / 1e6;
        match role {
            SyncRole::Standalone => standalone(),
            SyncRole::Master => pfx_api::profile::SyncStatus {
                role: "master".into(),
                state: "sending".into(),
                packets_sent: st.sent.load(Relaxed),
                send_errors: st.send_errors.load(Relaxed),
                packets_dropped: st.dropped.load(Relaxed),
                ..Default::default()
            },
            SyncRole::Remote => {
                let t = st.text();
                let last = st.last_packet_ns.load(Relaxed);
                let heard = last != 0;
                pfx_api::profile::SyncStatus {
                    role: "remote".into(),
                    master: t.master,
                    state: t.state,
                    sequence: t.sequence,
                    offset_ms: heard.then(|| ms(st.offset_ns.load(Relaxed) as f64)),
                    jitter_ms: heard.then(|| ms(st.jitter_ns.load(Relaxed) as f64)),
                    last_packet_age_ms: heard
                        .then(|| ms(crate::sys::time::mono_ns().saturating_sub(last) as f64)),
                    corrections: st.corrections.load(Relaxed),
                    jumps: st.jumps.load(Relaxed),
                    packets_received: st.received.load(Relaxed),
                    packets_dropped: st.dropped.load(Relaxed),
                    ..Default::default()
                }
            }
        }
    }

    /// Per-second points, oldest first; only those after `since_unix_ms` when given.
    pub fn history(&self, since_unix_ms: Option<u64>) -> Vec<HistoryPoint> {
        let h = lock(&self.shared.history);
        h.iter()
            .filter(|p| since_unix_ms.is_none_or(|t| p.unix_ms > t))
            .cloned()
            .collect()
    }

    /// The NIC collector's latest reading; shown in snapshots and history from now on.
    pub fn set_nic(&self, nic: NicStatus) {
        *lock(&self.shared.nic) = Some(nic);
    }

    /// Ok while the loop runs on time; Err with the reason otherwise (see `health`).
    pub fn health(&self) -> Result<(), String> {
        let s = lock(&self.shared.latest).clone();
        let since_frame = self
            .last_frame_age()
            .unwrap_or_else(|| self.shared.started.elapsed());
        health::evaluate(&health::Inputs {
            since_last_frame: since_frame,
            window_frames: s.frames,
            window_misses: s.deadline_misses,
            window_fps: s.fps,
            window_s: s.window_s,
            fps_target: self.shared.fps_target,
        })
    }

    fn last_frame_age(&self) -> Option<Duration> {
        match self.shared.last_frame_ns.load(Relaxed) {
            0 => None,
            ns => Some(
                self.shared
                    .started
                    .elapsed()
                    .saturating_sub(Duration::from_nanos(ns)),
            ),
        }
    }
}

/// Starts the profiler thread. It stops once the `SampleSink` and every `ProfilerHandle`
/// are gone.
pub fn start(cfg: ProfilerConfig, outputs: Vec<OutputInfo>) -> (SampleSink, ProfilerHandle) {
    let (producer, consumer) = rtrb::RingBuffer::new(RING_SLOTS);
    let lost = Arc::new(AtomicU64::new(0));
    let agg = Aggregator::new(&cfg);
    let shared = Arc::new(Shared {
        started: Instant::now(),
        fps_target: cfg.fps,
        latest: Mutex::new(Snapshot {
            window_s: agg.window_span().as_secs_f64(),
            fps_target: cfg.fps,
            ..Default::default()
        }),
        history: Mutex::new(VecDeque::with_capacity(HISTORY_POINTS)),
        nic: Mutex::new(None),
        sync: Mutex::new(None),
        last_frame_ns: AtomicU64::new(0),
        lost: lost.clone(),
    });
    let handle = ProfilerHandle {
        shared: shared.clone(),
    };
    let weak = Arc::downgrade(&shared);
    drop(shared);
    let spawned = std::thread::Builder::new()
        .name("pfx-profiler".into())
        .spawn(move || run(consumer, agg, weak, outputs, cfg.fps));
    if let Err(e) = spawned {
        tracing::error!("profiler: cannot start its thread ({e}); /profile will show no frames");
    }
    (
        SampleSink {
            producer,
            lost: 0,
            lost_shared: lost,
        },
        handle,
    )
}

fn thread_cpu_s() -> f64 {
    crate::sys::time::thread_cpu_ns() as f64 / 1e9
}

fn stage_map(stages: &[StageStats; N_SERIES]) -> BTreeMap<String, StageStats> {
    SERIES
        .iter()
        .zip(stages)
        .map(|(n, s)| (n.to_string(), s.clone()))
        .collect()
}

/// Each output's counters, each reading timed right after it was taken; on a history
/// point, its rates too (`slots` is the scratch for the per-slot frame counts).
fn output_stats(
    outputs: &[OutputInfo],
    rates: &mut [RateTracker],
    slots: &mut Vec<u64>,
    sh: &Shared,
    point_due: bool,
) -> Vec<OutputStats> {
    let mut outs = Vec::with_capacity(outputs.len());
    for (o, r) in outputs.iter().zip(rates.iter_mut()) {
        let counters = o.counters.snapshot();
        let t_s = sh.started.elapsed().as_secs_f64();
        if point_due {
            o.counters.slot_frames(slots);
            r.update_slots(slots, o.counters.slot_base, t_s);
            r.update(&counters, t_s);
        }
        outs.push(OutputStats {
            name: o.name.clone(),
            protocol: o.protocol.clone(),
            destination: o.destination.clone(),
            counters,
            rates: r.rates.clone(),
        });
    }
    outs
}

/// The history's point for the interval `p` just closed.
fn history_point(p: &Summary, sh: &Shared, outs: &[OutputStats]) -> HistoryPoint {
    let nic = lock(&sh.nic).clone();
    HistoryPoint {
        unix_ms: crate::sys::time::unix_ms(),
        stages: SERIES
            .iter()
            .zip(&p.stages)
            .map(|(n, s)| {
                (
                    n.to_string(),
                    PointStats {
                        p50_us: s.p50_us,
                        p95_us: s.p95_us,
                        p99_us: s.p99_us,
                        max_us: s.max_us,
                    },
                )
            })
            .collect(),
        frames: p.frames,
        fps: p.fps,
        deadline_misses: p.deadline_misses,
        skipped_ticks: p.skipped_ticks,
        pause_rx_per_s: nic.as_ref().and_then(|n| n.pause_rx_frames.per_s),
        pause_tx_per_s: nic.as_ref().and_then(|n| n.pause_tx_frames.per_s),
        dropped_per_s: outs
            .iter()
            .filter_map(|o| {
                o.rates
                    .as_ref()
                    .map(|r| (o.name.clone(), r.frames_dropped_per_s))
            })
            .collect(),
    }
}

/// The snapshot `/profile` serves: the window ending at `loop_now` (on the loop's clock)
/// and the totals since the start.
fn snapshot(
    agg: &mut Aggregator,
    loop_now: u64,
    fps_target: u32,
    sh: &Shared,
    outs: Vec<OutputStats>,
) -> Snapshot {
    let w: Summary = agg.window_summary(loop_now);
    let t: Summary = agg.totals_summary();
    Snapshot {
        window_s: agg.window_span().as_secs_f64(),
        stages: stage_map(&w.stages),
        frames: w.frames,
        deadline_misses: w.deadline_misses,
        skipped_ticks: w.skipped_ticks,
        fps: w.fps.unwrap_or(0.0),
        fps_target,
        since_start: SinceStart {
            stages: stage_map(&t.stages),
            frames: t.frames,
            deadline_misses: t.deadline_misses,
            skipped_ticks: t.skipped_ticks,
            fps: t.fps.unwrap_or(0.0),
            loop_s: agg.loop_span_s(),
        },
        samples_lost: sh.lost.load(Relaxed),
        source_late: t.source_late,
        source_errors: t.source_errors,
        last_frame_age_ms: None,
        uptime_s: sh.started.elapsed().as_secs_f64(),
        profiler_cpu_s: thread_cpu_s(),
        outputs: outs,
        nic: None,
        sync: None,
    }
}

fn run(
    mut consumer: rtrb::Consumer<FrameSample>,
    mut agg: Aggregator,
    shared: std::sync::Weak<Shared>,
    outputs: Vec<OutputInfo>,
    fps_target: u32,
) {
    let mut rates: Vec<RateTracker> = outputs.iter().map(|_| RateTracker::default()).collect();
    let mut slots: Vec<u64> = Vec::new();
    let mut last_point = Instant::now();
    // Loop clock ↔ wall clock: the newest frame's at_ns and when we received it, so the
    // window keeps rotating on the loop's clock while the loop is stalled.
    let mut last_rx: Option<(u64, Instant)> = None;
    loop {
        std::thread::sleep(DRAIN_EVERY);
        let Some(sh) = shared.upgrade() else { return };
        let mut got = 0usize;
        while let Ok(s) = consumer.pop() {
            agg.ingest(s);
            got += 1;
        }
        let now = Instant::now();
        if got > 0 {
            if let Some(at) = agg.last_at_ns() {
                last_rx = Some((at, now));
            }
            let ns = now.duration_since(sh.started).as_nanos().max(1) as u64;
            sh.last_frame_ns.store(ns, Relaxed);
        }
        let point_due = now.duration_since(last_point) >= Duration::from_secs(1);
        let loop_now = last_rx
            .map(|(at, t)| at + now.duration_since(t).as_nanos() as u64)
            .unwrap_or(0);

        let outs = output_stats(&outputs, &mut rates, &mut slots, &sh, point_due);
        if point_due {
            last_point = now;
            let p = agg.close_interval();
            let point = history_point(&p, &sh, &outs);
            let mut h = lock(&sh.history);
            if h.len() == HISTORY_POINTS {
                h.pop_front();
            }
            h.push_back(point);
        }
        let snap = snapshot(&mut agg, loop_now, fps_target, &sh, outs);
        *lock(&sh.latest) = snap;

        // The render loop is gone and everything it sent is in: one last publish, then stop.
        if consumer.is_abandoned() && consumer.is_empty() && got == 0 {
            return;
        }
    }
}

#[cfg(test)]
mod tests;
