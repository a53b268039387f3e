//! Where frames come from: xLights sequences (`fseq`) and test patterns (`pattern`).

pub mod fseq;
pub mod pattern;
