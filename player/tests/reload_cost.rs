//! A reload of a large show costs the render loop no deadline: the old engine (a
//! decode-ahead thread per playlist item, each holding a pool of 510 KB frames) is dropped
//! off the render thread (`engine::retire`).
//!
//! Real parts: the loop on its own thread, real sequences decoded ahead, a reload through
//! the loop's control channel. The sink only records samples (it never blocks).

use std::sync::{Arc, Mutex};
use std::time::Duration;

#[path = "common/fseq_writer.rs"]
mod fseq_writer;
#[path = "common/wait.rs"]
mod wait;

use pfx_player::engine::frame_loop::{self, Engine, ItemSource};
use pfx_player::engine::{FrameSample, FrameSink};
use pfx_player::geometry::Brightness;
use pfx_player::source::fseq::{FseqFile, Prefetcher};

#[derive(Clone)]
struct Recorder(Arc<Mutex<Vec<FrameSample>>>);

impl FrameSink for Recorder {
    fn push(&mut self, s: FrameSample) {
        if let Ok(mut v) = self.0.lock() {
            v.push(s);
        }
    }
}

const FPS: u32 = 40;
const PERIOD: Duration = Duration::from_millis(25);
/// 1,000 universes of 510 channels.
const CHANNELS: usize = 510_000;
const ITEMS: usize = 24;
const AHEAD: usize = 16;
const RELOAD_AT: usize = 40;
const WANTED: usize = 100;

/// A playlist of `ITEMS` sequences, each decoding ahead into its own pool of frames.
fn large(bytes: &[u8]) -> Engine {
    let items = (0..ITEMS)
        .map(|i| {
            let file = FseqFile::open_bytes(&format!("item{i}.fseq"), bytes.to_vec())
                .expect("written file opens");
            let (frames, step_ms, frame_len) = (
                file.frames(),
                u32::from(file.header().step_ms),
                file.frame_len(),
            );
            let mut prefetch = Box::new(Prefetcher::spawn(file, AHEAD));
            assert!(prefetch.wait_for(0, Duration::from_secs(10)).is_some());
            ItemSource::Fseq {
                prefetch,
                frames,
                step_ms,
                frame_len,
            }
        })
        .collect();
    Engine {
        outputs: Vec::new(),
        brightness: Brightness::new(1.0),
        fps: FPS,
        looped: true,
        items,
    }
}

#[test]
fn a_reload_of_a_large_show_costs_no_deadline() {
    let spec = fseq_writer::Spec {
        step_ms: 25,
        ..fseq_writer::Spec::default()
    };
    let bytes = fseq_writer::write(&spec, &fseq_writer::frames(40, CHANNELS));
    // Every item's decoder fills its pool before the loop starts, so the old engine holds
    // ITEMS × (AHEAD + 2) frames when it is dropped.
    let first = large(&bytes);
    let second = large(&bytes);
    // The decoders of both engines fill their pools (and go idle) before the loop runs, so
    // they do not compete with it for the CPU.
    for (name, e) in [("first", &first), ("second", &second)] {
        for (i, item) in e.items.iter().enumerate() {
            if let ItemSource::Fseq { prefetch, .. } = item {
                wait::wait_until(
                    Duration::from_secs(30),
                    &format!("the {name} show's item {i} to fill its pool of decoded frames"),
                    || prefetch.is_full(),
                );
            }
        }
    }
    let samples = Arc::new(Mutex::new(Vec::new()));
    let h = frame_loop::spawn(first, Recorder(samples.clone())).expect("loop");
    let count = || samples.lock().map(|v| v.len()).unwrap_or(0);
    let mut second = Some(second);
    let mut reload_tick = None;
    wait::wait_until(
        Duration::from_secs(60),
        &format!("the loop to hand over {WANTED} samples (the reload after {RELOAD_AT})"),
        || {
            if count() >= RELOAD_AT
                && let Some(s) = second.take()
            {
                reload_tick = samples.lock().ok().and_then(|v| v.last().map(|x| x.tick));
                assert!(h.reload(s), "the loop takes the new show");
            }
            count() >= WANTED
        },
    );
    h.stop();
    let s = samples.lock().expect("samples").clone();
    let at = reload_tick.expect("reloaded");
    let around: Vec<&FrameSample> = s
        .iter()
        .filter(|x| x.tick > at && x.tick <= at + 10)
        .collect();
    let worst = around.iter().map(|x| x.frame_ns).max().unwrap_or(0);
    eprintln!(
        "the reload's frames: worst {:.2} ms of a {} ms period; misses {}, ticks skipped {}",
        worst as f64 / 1e6,
        PERIOD.as_millis(),
        around.iter().filter(|x| x.missed).count(),
        around.iter().map(|x| u64::from(x.skipped)).sum::<u64>()
    );
    assert!(!around.is_empty(), "no frame after the reload was recorded");
    assert_eq!(
        around.iter().filter(|x| x.missed).count(),
        0,
        "deadline misses after the reload"
    );
    assert_eq!(
        around.iter().map(|x| u64::from(x.skipped)).sum::<u64>(),
        0,
        "ticks skipped after the reload"
    );
    assert!(
        worst < PERIOD.as_nanos() as u64 / 2,
        "a frame after the reload took {:.2} ms (need < half the {} ms period)",
        worst as f64 / 1e6,
        PERIOD.as_millis()
    );
}
