//! The services around the render loop: profiler, HTTP, mDNS, NIC monitor. Everything
//! here runs off the render thread.

use crate::cli::run::CommonArgs;
use crate::config::show::Show;
use crate::engine::frame_loop::Engine;
use crate::profiler::{self, OutputInfo, ProfilerConfig, SampleSink};

pub struct Services {
    pub sink: SampleSink,
    /// Dropping these stops the services.
    pub guards: Vec<Box<dyn Send>>,
}

pub fn start(show: &Show, engine: &Engine, _common: &CommonArgs) -> anyhow::Result<Services> {
    let outputs = engine
        .outputs
        .iter()
        .map(|o| OutputInfo {
            name: o.name.clone(),
            protocol: format!("{:?}", o.protocol).to_lowercase(),
            destination: o.destination.to_string(),
            counters: o.counters(),
        })
        .collect();
    let (sink, _handle) = profiler::start(
        ProfilerConfig { window: std::time::Duration::from_secs(u64::from(show.config.profile_window_s)), fps: show.config.fps },
        outputs,
    );
    Ok(Services { sink, guards: Vec::new() })
}
