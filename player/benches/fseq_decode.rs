//! FSEQ decode throughput. Not a timed test: prints numbers for docs/perf/fseq.md. Without
//! a FILE it decodes the generated corpus file shaped like a wide xLights export (46,712
//! channels, 15-frame zstd blocks); give a real export as FILE to measure that instead.
//!
//!   cargo bench -p pfx-player --bench fseq_decode [-- FILE]

#[path = "../tests/common/fseq_writer.rs"]
mod fseq_writer;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use pfx_player::source::fseq::{self, Prefetcher};

const MIN_TIME: Duration = Duration::from_secs(3);

fn main() {
    // `cargo bench` passes `--bench`; any other argument is the file to read.
    let arg = std::env::args().skip(1).find(|a| !a.starts_with("--"));
    let corpus_dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let path = match arg {
        Some(p) => PathBuf::from(p),
        None => fseq_writer::write_corpus_file(corpus_dir.path(), "xl-46712ch-300f.fseq"),
    };
    let f = fseq::open(&path).unwrap_or_else(|e| panic!("{e}"));
    let (frames, len) = (f.frames(), f.frame_len());
    println!(
        "file {} : {} frames x {} bytes, {} blocks, {}",
        path.display(),
        frames,
        len,
        f.header().blocks.len(),
        f.header().compression.name()
    );

    // 1. read_frame, sequential, on this thread: each block decoded once per pass.
    let mut f = f;
    let mut buf = vec![0u8; len];
    let mut done = 0u64;
    let t = Instant::now();
    while t.elapsed() < MIN_TIME {
        for n in 0..frames {
            f.read_frame(n, &mut buf).unwrap_or_else(|e| panic!("{e}"));
        }
        done += frames as u64;
    }
    let s = t.elapsed().as_secs_f64();
    report("read_frame sequential", done, s, len);

    // 2. Open + first frame (start of a show / loop to a new file).
    let t = Instant::now();
    let reps = 200;
    for _ in 0..reps {
        let mut g = fseq::open(&path).unwrap_or_else(|e| panic!("{e}"));
        g.read_frame(0, &mut buf).unwrap_or_else(|e| panic!("{e}"));
    }
    println!(
        "{:<34} {:>10.1} us",
        "open + frame 0",
        t.elapsed().as_secs_f64() * 1e6 / reps as f64
    );

    // 3. Prefetcher: decoder thread ahead, consumer takes every frame as soon as ready.
    let g = fseq::open(&path).unwrap_or_else(|e| panic!("{e}"));
    let mut p = Prefetcher::spawn(g, 16);
    let mut done = 0u64;
    let (mut hit_time, mut hits, mut misses) = (Duration::ZERO, 0u64, 0u64);
    let t = Instant::now();
    while t.elapsed() < MIN_TIME {
        for n in 0..frames {
            // Spin on the non-blocking get; time the calls that return frame n (the
            // render thread's cost when decode keeps up).
            loop {
                let before = p.stats().delivered;
                let g0 = Instant::now();
                let _ = p.get(n);
                let dt = g0.elapsed();
                if p.stats().delivered > before {
                    hit_time += dt;
                    hits += 1;
                    break;
                }
                misses += 1;
                std::hint::spin_loop();
            }
        }
        done += frames as u64;
    }
    let s = t.elapsed().as_secs_f64();
    report("Prefetcher (ahead 16) sequential", done, s, len);
    println!(
        "{:<34} {:>10.0} ns per call that returns the frame ({hits} calls; {misses} calls found it not yet decoded)",
        "Prefetcher::get on render thread",
        hit_time.as_nanos() as f64 / hits.max(1) as f64,
    );
    drop(p);

    // 4. Paced like a render loop (one get per 1 ms tick, the decoder well ahead): the
    // cost the render thread really pays per frame.
    let g = fseq::open(&path).unwrap_or_else(|e| panic!("{e}"));
    let mut p = Prefetcher::spawn(g, 16);
    let _ = p.wait_for(0, Duration::from_secs(5));
    std::thread::sleep(Duration::from_millis(20));
    let mut times = Vec::with_capacity(frames as usize);
    let tick = Duration::from_millis(1);
    let start = Instant::now();
    for n in 0..frames.min(3000) {
        let due = start + tick * n;
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let g0 = Instant::now();
        let hit = p.get(n).is_some();
        times.push(g0.elapsed());
        assert!(hit || n == 0, "frame {n} not ready at 1 kHz pacing");
    }
    times.sort();
    let pct = |q: f64| times[((times.len() - 1) as f64 * q) as usize].as_nanos();
    println!(
        "{:<34} {:>10} ns median, p99 {} ns, max {} ns ({} gets at 1 kHz, {} late)",
        "Prefetcher::get paced",
        pct(0.5),
        pct(0.99),
        pct(1.0),
        times.len(),
        p.stats().late
    );
    if let Some(e) = p.error() {
        panic!("{e}");
    }
}

fn report(what: &str, frames: u64, secs: f64, len: usize) {
    let fps = frames as f64 / secs;
    println!(
        "{what:<34} {fps:>10.0} frames/s  ({:.0} MB/s of channel data, {frames} frames in {secs:.2} s)",
        fps * len as f64 / 1e6
    );
}
