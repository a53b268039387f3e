//! The render loop and its timing: `clock` (pure deadline arithmetic), `sample` (what
//! one frame's timing looks like), `frame_loop` (the thread that owns the outputs).

pub mod clock;
pub mod frame_loop;
pub mod playlist;
pub mod sample;

pub use sample::{FrameSample, STAGES, SourceStatus, Stage};
