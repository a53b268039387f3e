//! The render loop driven through `app::build_engine` with the built-in demo show (real
//! sockets on loopback), and its samples taken by a recording `FrameSink` in place of the
//! profiler's ring, so the test sees every sample the loop produced.

#[path = "common/wait.rs"]
mod wait;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use pfx_player::app::{self, RunOptions};
use pfx_player::engine::frame_loop::{self, Exit};
use pfx_player::engine::{FrameSample, FrameSink, STAGES};

/// Test double for the profiler's sample ring: keeps every sample.
#[derive(Clone)]
struct RecordingSink(Arc<Mutex<Vec<FrameSample>>>);

impl FrameSink for RecordingSink {
    fn push(&mut self, s: FrameSample) {
        if let Ok(mut v) = self.0.lock() {
            v.push(s);
        }
    }
}

fn options() -> RunOptions {
    RunOptions {
        http: None,
        blocking_send: false,
        send_every_frame: false,
        duration: None,
        send_buffer: None,
        mdns: false,
        summary: None,
        config: None,
        store: None,
        show_state: Default::default(),
        control_socket: None,
        control_state: Default::default(),
    }
}

#[test]
fn recording_sink_sees_every_frame_with_consistent_ticks_and_stages() {
    let show = pfx_player::demo::demo_show().expect("built-in demo show");
    let engine = app::build_engine(&show, &options()).expect("demo engine on lo");
    let recorded = Arc::new(Mutex::new(Vec::with_capacity(1024)));
    let handle = frame_loop::spawn(engine, RecordingSink(recorded.clone())).expect("spawn");
    // Half a second of frames at 60 fps.
    wait::wait_until(Duration::from_secs(30), "30 frames recorded", || {
        recorded.lock().map(|v| v.len() >= 30).unwrap_or(false)
    });
    assert_eq!(handle.stop(), Exit::Stopped);
    let samples = recorded.lock().expect("samples").clone();
    assert!(samples.len() >= 30, "{} frames", samples.len());
    assert_eq!(samples[0].tick, 0);
    for pair in samples.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        // The next tick is the one after, or the current one with the passed-over ones
        // counted as skipped: never a backlog, never a repeat.
        assert_eq!(
            b.tick,
            a.tick + 1 + u64::from(b.skipped),
            "{a:?} then {b:?}"
        );
        assert!(b.at_ns > a.at_ns, "{a:?} then {b:?}");
    }
    for s in &samples {
        let stages: u64 = STAGES.iter().map(|&st| s.stage_ns[st as usize]).sum();
        assert_eq!(stages, s.frame_ns, "the stages add up to the frame: {s:?}");
    }
}
