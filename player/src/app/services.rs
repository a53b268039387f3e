//! The services around the render loop: profiler, HTTP, mDNS, NIC monitor, FPP Connect. Everything
//! here runs off the render thread; dropping `Services` stops them.

use std::net::SocketAddr;
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::Context;

use super::RunOptions;
use crate::config::show::Show;
use crate::engine::frame_loop::Engine;
use crate::profiler::{self, OutputInfo, ProfilerConfig, ProfilerHandle, SampleSink};

pub const VERSION: &str = env!("CARGO_PKG_VERSION");

pub struct Services {
    pub sink: Option<SampleSink>,
    pub profiler: ProfilerHandle,
    _http: Option<HttpThread>,
    _mdns: Option<crate::mdns::MdnsAdvert>,
    _nic: Option<crate::nic::MonitorHandle>,
    _fpp: Option<crate::fppconnect::FppConnect>,
}

struct HttpThread {
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for HttpThread {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

pub fn start(show: &Show, engine: &Engine, opts: &RunOptions) -> anyhow::Result<Services> {
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
    let (sink, handle) = profiler::start(
        ProfilerConfig {
            window: Duration::from_secs(u64::from(show.config.profile_window_s)),
            fps: show.config.fps,
        },
        outputs,
    );
    let unit = super::build::unit_id(show);
    let addr = opts.http.unwrap_or(show.config.http);
    let http = start_http(
        addr,
        handle.clone(),
        unit.clone(),
        opts.show_state.clone(),
        opts.store.clone(),
        opts.control_state.clone(),
    )?;
    let fpp_cfg = show.config.fpp_connect.clone().filter(|f| f.enabled);
    let mut mdns = if !opts.mdns {
        None
    } else {
        let mut profiles: Vec<String> = show
            .outputs
            .iter()
            .map(|o| o.profile.name.clone())
            .collect();
        profiles.sort();
        profiles.dedup();
        match crate::mdns::advertise(&unit, addr.port(), &profiles, VERSION) {
            Ok(a) => Some(a),
            Err(e) => {
                tracing::warn!("mDNS advertisement off: {e}");
                None
            }
        }
    };
    if let (Some(a), Some(_)) = (mdns.as_mut(), &fpp_cfg)
        && let Err(e) = a.add_fppd(&unit)
    {
        tracing::warn!("mDNS _fppd._udp off: {e}");
    }
    // FPP Connect that cannot start (no data partition, port 80 taken) is logged; the
    // show plays regardless.
    let fpp = match &fpp_cfg {
        None => None,
        Some(f) => match crate::fppconnect::start(
            f,
            show,
            crate::fppconnect::unit_info(show, &unit, VERSION),
            handle.clone(),
            opts.config.clone(),
            opts.store.clone(),
        ) {
            Ok(f) => Some(f),
            Err(e) => {
                tracing::error!("{e:#}");
                None
            }
        },
    };
    let nic = {
        let h = handle.clone();
        crate::nic::spawn_monitor(
            show.config.interface.clone(),
            Duration::from_secs(1),
            move |s| h.set_nic(s),
        )
    };
    Ok(Services {
        sink: Some(sink),
        profiler: handle,
        _http: Some(http),
        _mdns: mdns,
        _nic: Some(nic),
        _fpp: fpp,
    })
}

/// Binds first, on this thread, so "address in use" is an error at start, not a log line.
fn start_http(
    addr: SocketAddr,
    profiler: ProfilerHandle,
    unit_id: String,
    show: super::showpick::ShowState,
    store: Option<std::path::PathBuf>,
    control: super::control::ControlShared,
) -> anyhow::Result<HttpThread> {
    let std_listener = std::net::TcpListener::bind(addr).with_context(|| {
        format!("cannot serve HTTP on {addr}; choose another address with --http ADDR:PORT")
    })?;
    std_listener.set_nonblocking(true)?;
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::Builder::new()
        .name("pfx-http".into())
        .spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    tracing::error!("HTTP runtime: {e}");
                    return;
                }
            };
            rt.block_on(async move {
                let listener = match tokio::net::TcpListener::from_std(std_listener) {
                    Ok(l) => l,
                    Err(e) => {
                        tracing::error!("HTTP listener: {e}");
                        return;
                    }
                };
                let state = crate::http::HttpState {
                    profiler,
                    unit_id,
                    version: VERSION,
                    show,
                    store,
                    control,
                };
                if let Err(e) = crate::http::serve(listener, state, async move {
                    let _ = rx.await;
                })
                .await
                {
                    tracing::error!("HTTP server stopped: {e}");
                }
            });
        })?;
    tracing::info!("HTTP on http://{addr}/ (dashboard, /profile, /metrics, /health)");
    Ok(HttpThread {
        shutdown: Some(tx),
        thread: Some(thread),
    })
}

/// One line for the journal when the show stops, and the whole snapshot as JSON for
/// scripts (`--summary FILE`).
pub fn summarize(profiler: &ProfilerHandle, path: Option<&std::path::Path>) {
    // Let the profiler thread drain the last frames.
    std::thread::sleep(profiler::DRAIN_EVERY * 2);
    let s = profiler.snapshot();
    let ss = &s.since_start;
    let ws = ss.stages.get("wire_send");
    tracing::info!(
        frames = ss.frames,
        fps = format!("{:.2}", ss.fps),
        deadline_misses = ss.deadline_misses,
        skipped_ticks = ss.skipped_ticks,
        wire_send_p50_us = ws.map(|w| w.p50_us).unwrap_or(0.0),
        wire_send_p99_us = ws.map(|w| w.p99_us).unwrap_or(0.0),
        dropped = s
            .outputs
            .iter()
            .map(|o| o.counters.frames_dropped)
            .sum::<u64>(),
        "show stopped"
    );
    if let Some(p) = path {
        match serde_json::to_vec_pretty(&s) {
            Ok(b) => {
                if let Err(e) = std::fs::write(p, b) {
                    tracing::error!("cannot write summary {}: {e}", p.display());
                }
            }
            Err(e) => tracing::error!("summary: {e}"),
        }
    }
}
