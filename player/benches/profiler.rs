//! Cost of profiling: `SampleSink::push` on the render thread, the profiler thread's
//! per-sample record (ring pop + window + since-start histograms + interval), the 50 ms
//! publish, and the profiler's share of a 60 fps frame. One attempt per cell; a cell whose
//! guard fails prints UNMEASURABLE with the reason.
//!
//!   cargo bench -p pfx-player --bench profiler

use std::hint::black_box;
use std::time::{Duration, Instant};

use pfx_player::engine::FrameSample;
use pfx_player::profiler::aggregator::Aggregator;
use pfx_player::profiler::window::N_SERIES;
use pfx_player::profiler::{self, DRAIN_EVERY, ProfilerConfig, RING_SLOTS};

const N: u64 = 300_000;

fn sample(i: u64) -> FrameSample {
    let j = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40;
    FrameSample {
        tick: i,
        stage_ns: [
            3_000 + j % 2_000,
            40_000 + j % 20_000,
            25_000 + j % 9_000,
            if i % 20 == 7 {
                40_000_000
            } else {
                120_000 + j % 60_000
            },
        ],
        frame_ns: 200_000 + j % 90_000,
        lateness_ns: 30_000 + j % 50_000,
        missed: i % 20 == 7,
        skipped: 0,
        at_ns: i * 1_000_000_000 / 60,
        source: Default::default(),
    }
}

fn cfg() -> ProfilerConfig {
    ProfilerConfig {
        window: Duration::from_secs(5),
        fps: 60,
    }
}

/// Render-thread cost: push with the real profiler thread draining behind it. Batches fit
/// in the ring, with a pause for the drain, so no push takes the ring-full path.
fn cell_push() -> Result<f64, String> {
    let (mut sink, _h) = profiler::start(cfg(), vec![]);
    let batch = (RING_SLOTS / 2) as u64;
    let mut spent = Duration::ZERO;
    let mut i = 0;
    while i < N {
        let t = Instant::now();
        for k in i..i + batch {
            sink.push(black_box(sample(k)));
        }
        spent += t.elapsed();
        i += batch;
        std::thread::sleep(DRAIN_EVERY * 2);
    }
    if sink.lost != 0 {
        return Err(format!(
            "guard: {} samples hit a full ring (the drain fell behind)",
            sink.lost
        ));
    }
    if spent < Duration::from_millis(1) {
        return Err(format!(
            "guard: total {spent:?} is below 1 ms, too short to time"
        ));
    }
    Ok(spent.as_nanos() as f64 / i as f64)
}

/// Push + pop + `Aggregator::ingest`, single-threaded: the whole per-sample path.
fn cell_push_record() -> Result<f64, String> {
    let (mut prod, mut cons) = rtrb::RingBuffer::<FrameSample>::new(RING_SLOTS);
    let mut agg = Aggregator::new(&cfg());
    // warm up: let the histograms and the window reach their steady size
    for k in 0..2_000 {
        agg.ingest(sample(k));
    }
    agg.close_interval();
    let t = Instant::now();
    let mut k = 2_000;
    while k < 2_000 + N {
        for j in k..k + 60 {
            if prod.push(sample(j)).is_err() {
                return Err("guard: ring full".into());
            }
        }
        while let Ok(s) = cons.pop() {
            agg.ingest(s);
        }
        agg.close_interval(); // one history interval per 60 frames, as in 1 s at 60 fps
        k += 60;
    }
    let spent = t.elapsed();
    black_box(&agg);
    Ok(spent.as_nanos() as f64 / N as f64)
}

/// One publish: window (exact, 300 frames) + since-start summaries.
fn cell_publish() -> Result<f64, String> {
    let mut agg = Aggregator::new(&cfg());
    for k in 0..10_000 {
        agg.ingest(sample(k));
    }
    let now = sample(9_999).at_ns;
    let reps = 2_000u32;
    let t = Instant::now();
    for _ in 0..reps {
        black_box(agg.window_summary(black_box(now)));
        black_box(agg.totals_summary());
    }
    Ok(t.elapsed().as_nanos() as f64 / reps as f64)
}

/// The real profiler thread fed at 60 Hz for `secs`: its own CPU time per frame.
fn cell_thread_cpu(secs: u64) -> Result<(f64, f64), String> {
    let (mut sink, h) = profiler::start(cfg(), vec![]);
    let start = Instant::now();
    let frames = secs * 60;
    for i in 0..frames {
        let deadline = start + Duration::from_nanos(i * 1_000_000_000 / 60);
        if let Some(d) = deadline.checked_duration_since(Instant::now()) {
            std::thread::sleep(d);
        }
        sink.push(sample(i));
    }
    std::thread::sleep(DRAIN_EVERY * 3);
    let s = h.snapshot();
    if s.since_start.frames != frames {
        return Err(format!(
            "guard: profiler saw {} of {frames} frames",
            s.since_start.frames
        ));
    }
    let wall = start.elapsed().as_secs_f64();
    Ok((
        s.profiler_cpu_s / frames as f64 * 1e9,
        s.profiler_cpu_s / wall,
    ))
}

fn main() {
    let frame_ns = 1e9 / 60.0;
    println!(
        "profiler benchmark: {N} samples per cell, {N_SERIES} series per sample, 5 s window at 60 fps"
    );
    let push = cell_push();
    match &push {
        Ok(ns) => println!("SampleSink::push (render thread)          {ns:8.1} ns/frame"),
        Err(e) => println!("SampleSink::push (render thread)          UNMEASURABLE: {e}"),
    }
    let rec = cell_push_record();
    match &rec {
        Ok(ns) => println!(
            "push + pop + ingest, per frame            {ns:8.1} ns/frame = {:.1} ns per stage sample (target < 100: {})",
            ns / N_SERIES as f64,
            if ns / (N_SERIES as f64) < 100.0 {
                "met"
            } else {
                "NOT met"
            }
        ),
        Err(e) => println!("push + pop + ingest                       UNMEASURABLE: {e}"),
    }
    let publish = cell_publish();
    match &publish {
        Ok(ns) => println!(
            "publish (window + since-start summaries)  {:8.1} µs/publish, every {} ms",
            ns / 1000.0,
            DRAIN_EVERY.as_millis()
        ),
        Err(e) => println!("publish                                   UNMEASURABLE: {e}"),
    }
    if let (Ok(p), Ok(r), Ok(pb)) = (&push, &rec, &publish) {
        let per_frame = r + pb * (DRAIN_EVERY.as_secs_f64() * 60.0).recip();
        println!(
            "computed share of a 60 fps frame: render thread {:.4} %, profiler thread {:.3} % ({:.0} ns per frame)",
            100.0 * p / frame_ns,
            100.0 * per_frame / frame_ns,
            per_frame
        );
    }
    match cell_thread_cpu(5) {
        Ok((ns, share)) => println!(
            "measured: profiler thread CPU {:.1} µs per frame = {:.3} % of a 60 fps frame ({:.3} % of one core), 5 s at 60 Hz",
            ns / 1000.0,
            100.0 * ns / frame_ns,
            100.0 * share
        ),
        Err(e) => println!("measured profiler thread CPU               UNMEASURABLE: {e}"),
    }
}
