//! The render loop's counters mean what docs/profile-api.md says, on a standalone unit, a
//! MultiSync master and a MultiSync remote: each played with a known number of stalls,
//! and the samples the loop hands over say exactly that many skipped ticks, and no more.
//!
//! The loop runs on its real thread with a real sequence (decode-ahead) and no outputs.
//! The sink that records the samples stands in for the profiler's ring and can hold the
//! render thread for a set time at a set frame (`StallingSink`, a test double: the real
//! ring never blocks). A remote follows a timeline published here as the sync thread
//! publishes it (the estimate of a master that started at a known moment).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[path = "common/fseq_writer.rs"]
mod fseq_writer;
#[path = "common/wait.rs"]
mod wait;

use pfx_player::engine::frame_loop::{
    self, Announce, Engine, ItemSource, OnEnd, Playing, RemoteLink, SyncLink,
};
use pfx_player::engine::{FrameSample, FrameSink};
use pfx_player::geometry::Brightness;
use pfx_player::source::fseq::{FseqFile, Prefetcher};
use pfx_player::sync::estimator::Estimate;
use pfx_player::sync::shared::{Status, Timeline};

/// Test double for the profiler's ring: records every sample, and at the frames in
/// `stalls` holds the render thread for that long (a stalled `sendto()`, as the loop sees
/// it: the frame's work ends, the next deadlines pass).
#[derive(Clone)]
struct StallingSink {
    samples: Arc<Mutex<Vec<FrameSample>>>,
    /// (after this many samples, hold for this long).
    stalls: Arc<Vec<(usize, Duration)>>,
}

impl FrameSink for StallingSink {
    fn push(&mut self, s: FrameSample) {
        let n = {
            let Ok(mut v) = self.samples.lock() else {
                return;
            };
            v.push(s);
            v.len()
        };
        if let Some((_, d)) = self.stalls.iter().find(|(at, _)| *at == n) {
            // The stall itself: how long the render thread is held is what is tested.
            std::thread::sleep(*d);
        }
    }
}

const FPS: u32 = 20;
/// The black show arrives after this many frames, and 30 more follow it.
const RELOAD_AT: usize = 50;
const WANTED: usize = 80;
const PERIOD: Duration = Duration::from_millis(50);

fn engine(frames: usize) -> Engine {
    let spec = fseq_writer::Spec {
        step_ms: 50,
        ..fseq_writer::Spec::default()
    };
    let bytes = fseq_writer::write(&spec, &fseq_writer::frames(frames, 30));
    let file = FseqFile::open_bytes("counters.fseq", bytes).expect("written file opens");
    let (frames, step_ms, frame_len) = (
        file.frames(),
        u32::from(file.header().step_ms),
        file.frame_len(),
    );
    let mut prefetch = Box::new(Prefetcher::spawn(file, 16));
    assert!(prefetch.wait_for(0, Duration::from_secs(5)).is_some());
    Engine {
        outputs: Vec::new(),
        brightness: Brightness::new(1.0),
        fps: FPS,
        looped: false,
        items: vec![ItemSource::Fseq {
            prefetch,
            frames,
            step_ms,
            frame_len,
        }],
    }
}

/// A master's announcer that only counts what it was told (the sockets are the sync
/// suite's): frames that played a sequence.
struct CountingAnnouncer(Arc<std::sync::atomic::AtomicU64>);

impl Announce for CountingAnnouncer {
    fn frame_sent(&mut self, playing: Option<Playing<'_>>) {
        if playing.is_some() {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// What the sync thread hands the loop when the master stops: a show with no items
/// (black).
fn black() -> Engine {
    Engine {
        outputs: Vec::new(),
        brightness: Brightness::new(1.0),
        fps: FPS,
        looped: false,
        items: Vec::new(),
    }
}

/// Plays a long sequence with `stalls`; after `RELOAD_AT` samples swaps in a black show
/// (as a remote's sync thread does at the master's stop), and returns the first `wanted`
/// samples.
fn play(sync: SyncLink, stalls: Vec<(usize, Duration)>, wanted: usize) -> Vec<FrameSample> {
    let samples = Arc::new(Mutex::new(Vec::new()));
    let sink = StallingSink {
        samples: samples.clone(),
        stalls: Arc::new(stalls),
    };
    let h = frame_loop::spawn_with(engine(2000), sink, OnEnd::Black, sync).expect("loop");
    let count = || samples.lock().map(|v| v.len()).unwrap_or(0);
    let mut reloaded = false;
    wait::wait_until(
        Duration::from_secs(60),
        &format!("the loop to hand over {wanted} samples (the black show after {RELOAD_AT})"),
        || {
            if !reloaded && count() >= RELOAD_AT {
                assert!(h.reload(black()), "the loop takes the black show");
                reloaded = true;
            }
            count() >= wanted
        },
    );
    h.stop();
    let v = samples.lock().expect("samples").clone();
    v[..wanted].to_vec()
}

fn skipped(s: &[FrameSample]) -> u64 {
    s.iter().map(|x| u64::from(x.skipped)).sum()
}

/// Two stalls of 4.5 and 2.5 periods: 3 and 1 ticks skipped (the loop wakes half a period
/// after the last tick it passed over, so scheduling noise below that changes nothing).
fn stalls() -> Vec<(usize, Duration)> {
    vec![(20, PERIOD * 9 / 2), (40, PERIOD * 5 / 2)]
}

fn check(what: &str, s: &[FrameSample]) {
    let per: Vec<(u64, u32)> = s
        .iter()
        .filter(|x| x.skipped > 0)
        .map(|x| (x.tick, x.skipped))
        .collect();
    assert_eq!(skipped(s), 4, "{what}: skipped ticks {per:?}");
    // The frames right after each stall started late (half a period); no other frame
    // did, and none ended after the next deadline.
    let late = s
        .iter()
        .filter(|x| x.lateness_ns > PERIOD.as_nanos() as u64 * 2 / 5)
        .count();
    assert_eq!(late, 2, "{what}: late frames");
    assert_eq!(
        s.iter().filter(|x| x.missed).count(),
        0,
        "{what}: deadline misses"
    );
    for pair in s.windows(2) {
        assert_eq!(
            pair[1].tick,
            pair[0].tick + 1 + u64::from(pair[1].skipped),
            "{what}: ticks go on in order, the skipped ones counted"
        );
    }
}

#[test]
fn a_standalone_unit_counts_the_ticks_it_skipped() {
    let s = play(SyncLink::Standalone, stalls(), WANTED);
    check("standalone", &s);
}

#[test]
fn a_master_counts_the_ticks_it_skipped() {
    let n = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let s = play(
        SyncLink::Master(Box::new(CountingAnnouncer(n.clone()))),
        stalls(),
        60,
    );
    check("master", &s);
    let played = n.load(Ordering::Relaxed);
    assert!(
        (RELOAD_AT as u64..RELOAD_AT as u64 + 3).contains(&played),
        "the frames before the black show played the sequence: {played}"
    );
}

/// A remote following a master that started 10 s ago, on a steady estimate: it plays
/// every tick after the first, and its skipped ticks are only the stalls' (not the
/// master's frames it joined after, nor one per frame).
#[test]
fn a_remote_counts_the_ticks_it_skipped_and_not_the_frames_it_followed() {
    let timeline = Arc::new(Timeline::default());
    let status = Arc::new(Status::default());
    let base = pfx_player::sys::time::mono_ns() as i64 - 10_000_000_000;
    let stop = Arc::new(AtomicBool::new(false));
    let publisher = {
        let (timeline, stop) = (timeline.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let e = Estimate {
                    base_ns: base,
                    rate: 0.0,
                    at_pos_ns: 0,
                    jitter_ns: 0,
                    samples: 16,
                };
                timeline.publish(1, Some(e));
                // Pacing, not ordering: the sync thread publishes about this often.
                std::thread::sleep(Duration::from_millis(100));
            }
        })
    };
    wait::wait_until(
        Duration::from_secs(10),
        "the first estimate on the timeline",
        || timeline.read().is_some(),
    );
    let link = SyncLink::Remote(Box::new(RemoteLink::new(timeline, status.clone())));
    let s = play(link, stalls(), WANTED);
    stop.store(true, Ordering::Relaxed);
    let _ = publisher.join();
    check("remote", &s);
    assert_eq!(
        status.jumps.load(Ordering::Relaxed),
        1,
        "one jump: the join"
    );
    assert_eq!(
        status.corrections.load(Ordering::Relaxed),
        0,
        "a steady estimate needs no slewing"
    );
}
