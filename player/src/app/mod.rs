//! The application: what turns a show config into light and keeps it going. It builds the
//! engine from a `Show` (sockets, files, decode-ahead), starts and stops the services
//! around the render loop (profiler, HTTP, mDNS, NIC monitor), keeps the transmit-queue
//! policy on the show interface, and turns signals into loop control (SIGTERM/SIGINT stop,
//! SIGHUP reloads the config).
//!
//! It takes a plain `RunOptions`; it never sees the command line (`cli` parses and prints).
//! This is where the parts that start, switch and supervise shows belong: the scheduler,
//! sync across units and show switching go here, next to `play`.
//!
//! - `build`: `Show` → `Engine`, off the render thread; the unit's identity.
//! - `services`: the threads beside the render loop; dropping them stops them.
//! - `tx_queue`: the head-drop queue on the show interface, put in place and removed.
//! - `play`: the supervisor loop (signals, reload, stop).
//! - `showpick`: the store's active show or the config's, and why.
//! - `control`: live control's local socket and the supervisor's part in it (blackout,
//!   stop, play, brightness, test patterns, resume).
//! - `schedule`: follows the show's schedule, switching engines at its starts and ends.
//! - `sync`: MultiSync's sockets and threads: a master announces what it plays, a remote
//!   follows the master's timeline and plays its sequences.

pub mod build;
pub mod control;
pub mod play;
pub mod schedule;
pub mod services;
pub mod showpick;
pub mod sync;
pub mod tx_queue;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// How `play` ended: stopped (signal, `duration`) or a playlist without `loop` played out.
pub use crate::engine::frame_loop::Exit;
pub use build::{build_engine, unit_id};
pub use play::play;

/// How to run a show, beside what its config says. Built by `cli` from the command line,
/// or by a test.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Serve HTTP here instead of the config's `http:` address.
    pub http: Option<SocketAddr>,
    /// Measured baseline only: blocking sockets, as a naive player has.
    pub blocking_send: bool,
    /// Measured baseline only: every frame sent as far as the socket takes it, without the
    /// whole-frame rule.
    pub send_every_frame: bool,
    /// Stop after this long; None plays until signalled (or a non-looping playlist ends).
    pub duration: Option<Duration>,
    /// SO_SNDBUF per output; None sizes it to about two frames of that pole.
    pub send_buffer: Option<usize>,
    /// Advertise the unit over mDNS.
    pub mdns: bool,
    /// When the show stops, write the profiler's final snapshot (the `/profile` JSON) here.
    pub summary: Option<PathBuf>,
    /// The config file SIGHUP reads again; None when there is none (the demo).
    pub config: Option<PathBuf>,
    /// The show store's root (the data partition): its active show plays when valid.
    pub store: Option<PathBuf>,
    /// What plays now, for `/profile` and `/health`.
    pub show_state: showpick::ShowState,
    /// Live control's local socket (`app::control`); None: no live control.
    pub control_socket: Option<PathBuf>,
    /// The live override held now, for `/profile` and the dashboard.
    pub control_state: control::ControlShared,
}

/// What `run --check` found: the show opens, and what it would do to the interface.
#[derive(Debug, Clone)]
pub struct Checked {
    pub outputs: usize,
    pub items: usize,
    /// The transmit-queue plan, in words.
    pub tx_queue: String,
}

/// Opens everything the show needs (sockets, files, first frames) and closes it again.
pub fn check(show: &crate::config::show::Show, opts: &RunOptions) -> anyhow::Result<Checked> {
    if let Some(s) = &show.sync
        && crate::sys::net::interface_index(&s.interface).is_none()
    {
        anyhow::bail!(
            "{}: sync.interface: no interface `{}`; name the interface the other units are on",
            show.source.display(),
            s.interface
        );
    }
    let engine = build_engine(show, opts)?;
    let mut items = engine.items.len();
    drop(engine);
    // A scheduled show opens every playlist it may play, one at a time.
    if show.schedule.is_some() {
        for list in show.playlists.values() {
            items += build::build_engine_for(show, list, true, opts)?.items.len();
        }
    }
    Ok(Checked {
        outputs: show.outputs.len(),
        items,
        tx_queue: tx_queue::describe(show),
    })
}
