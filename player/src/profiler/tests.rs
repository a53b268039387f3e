//! The profiler thread end to end: real ring, real thread, real clocks.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use super::*;
use crate::nic::{CounterReading, NicStatus};

fn frame(i: u64, wire_ns: u64) -> FrameSample {
    FrameSample {
        tick: i,
        stage_ns: [2_000, 30_000, 40_000, wire_ns],
        frame_ns: 72_000 + wire_ns,
        lateness_ns: 50_000,
        missed: false,
        skipped: 0,
        at_ns: i * 1_000_000_000 / 60,
        source: Default::default(),
    }
}

fn wait_for(h: &ProfilerHandle, mut ok: impl FnMut(&Snapshot) -> bool) -> Snapshot {
    for _ in 0..100 {
        let s = h.snapshot();
        if ok(&s) {
            return s;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    h.snapshot()
}

#[test]
fn thread_publishes_window_and_since_start() {
    let counters = Arc::new(OutputCounters::default());
    let outputs = vec![OutputInfo {
        name: "pole-1".into(),
        protocol: "ddp".into(),
        destination: "127.0.0.1:4048".into(),
        counters: counters.clone(),
    }];
    let (mut sink, h) = start(
        ProfilerConfig {
            window: Duration::from_secs(5),
            fps: 60,
        },
        outputs,
    );
    // 2 s of frames, every 10th with a 100 ms wire_send (the seeds' shape)
    for i in 0..120 {
        sink.push(frame(i, if i % 10 == 5 { 100_000_000 } else { 150_000 }));
    }
    counters.packets.fetch_add(10, Relaxed);
    let s = wait_for(&h, |s| s.since_start.frames == 120);
    assert_eq!(s.since_start.frames, 120);
    assert_eq!(s.frames, 120);
    let w = &s.stages["wire_send"];
    assert_eq!(w.p50_us, 150.0);
    assert_eq!(w.p95_us, 100_000.0);
    assert_eq!(s.stages["source"].p99_us, 30.0);
    assert!((s.fps - 60.0).abs() < 0.01, "{}", s.fps);
    assert_eq!(s.outputs[0].counters.packets, 10);
    assert_eq!(s.fps_target, 60);
    assert_eq!(s.window_s, 5.0);
    assert!(s.last_frame_age_ms.is_some());
    assert_eq!(h.health(), Ok(()), "60 fps, no misses, fresh frames");
    drop(sink);
}

#[test]
fn lost_samples_are_counted_not_blocking() {
    let (mut sink, h) = start(
        ProfilerConfig {
            window: Duration::from_secs(5),
            fps: 60,
        },
        vec![],
    );
    // Faster than any drain: the ring fills and the rest is counted.
    for i in 0..(RING_SLOTS as u64 + 100) {
        sink.push(frame(i, 1000));
    }
    assert!(sink.lost >= 1);
    let s = h.snapshot();
    assert_eq!(s.samples_lost, sink.lost);
}

#[test]
fn health_goes_stalled_then_back() {
    let (mut sink, h) = start(
        ProfilerConfig {
            window: Duration::from_secs(2),
            fps: 60,
        },
        vec![],
    );
    assert_eq!(h.health(), Ok(()), "fresh profiler within its first second");
    for i in 0..120 {
        sink.push(frame(i, 1000));
    }
    wait_for(&h, |s| s.frames == 120);
    assert_eq!(h.health(), Ok(()));
    std::thread::sleep(Duration::from_millis(1200));
    let e = h.health().unwrap_err();
    assert!(e.starts_with("render loop stalled: no frame for "), "{e}");
    // the window rotates on the loop's clock even while stalled
    let s = wait_for(&h, |s| s.frames < 120);
    assert!(
        s.frames < 120,
        "window should have shed old frames: {}",
        s.frames
    );
    // loop resumes, with deadline misses in 10 % of its frames
    for i in 1000..1120 {
        let mut f = frame(i, 1000);
        f.missed = i % 10 == 0;
        sink.push(f);
    }
    wait_for(&h, |s| s.since_start.frames == 240);
    let e = h.health().unwrap_err();
    assert!(e.starts_with("deadline misses: "), "{e}");
}

#[test]
fn history_and_nic_reach_readers() {
    let (mut sink, h) = start(
        ProfilerConfig {
            window: Duration::from_secs(5),
            fps: 60,
        },
        vec![],
    );
    h.set_nic(NicStatus {
        interface: "eth0".into(),
        pause_rx_frames: CounterReading {
            source: "standard".into(),
            total: Some(2_400_000),
            per_s: Some(130.0),
        },
        ..Default::default()
    });
    for i in 0..60 {
        sink.push(frame(i, 1000));
    }
    let mut pts = Vec::new();
    for _ in 0..40 {
        pts = h.history(None);
        if !pts.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!pts.is_empty(), "a history point within ~1 s");
    assert_eq!(pts[0].pause_rx_per_s, Some(130.0));
    assert_eq!(pts[0].frames, 60);
    assert!(h.history(Some(pts[pts.len() - 1].unix_ms)).is_empty());
    assert_eq!(
        h.snapshot().nic.map(|n| n.interface),
        Some("eth0".to_string())
    );
}
