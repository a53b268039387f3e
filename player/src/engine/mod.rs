//! The render loop and its timing: `clock` (pure deadline arithmetic), `sample` (what
//! one frame's timing looks like, and the `FrameSink` the loop hands it to),
//! `frame_loop` (the thread that owns the outputs), `retire` (drops old shows off the
//! render thread). The OS clocks and the thread priority
//! are in `sys`; the profiler implements `FrameSink`, so the engine does not know it.

pub mod clock;
pub mod frame_loop;
pub mod live;
pub mod playlist;
pub mod retire;
pub mod sample;

pub use sample::{FrameSample, FrameSink, STAGES, SourceStatus, Stage};
