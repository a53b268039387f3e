//! `pfx-player run` and `pfx-player demo`: their arguments and what they print. Playing
//! the show (engine, services, transmit queue, signals, reload) is `app`'s.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use crate::app::{self, Exit, RunOptions};
use crate::config::show::ShowConfig;

#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// Show config (YAML). See docs/show-config.md.
    #[arg(long, short, value_name = "FILE", default_value = "/etc/pfx/show.yaml")]
    pub config: PathBuf,
    #[command(flatten)]
    pub common: CommonArgs,
    /// Check the config (profiles, files, interface) and exit without playing.
    #[arg(long)]
    pub check: bool,
    /// The show store (the unit's data partition, e.g. /var/lib/pfx): play its active show
    /// when it has a valid one, else the --config show; /profile and /health say which
    /// and why. SIGHUP looks again.
    #[arg(long, value_name = "DIR")]
    pub store: Option<PathBuf>,
    /// The config is a pushed show (`shows/<id>/show.yaml` in a store, its manifest.json
    /// beside it): refuse `profiles_dir`, absolute and `..` paths, and any file that is
    /// not one of the show's own; named profiles come only from the show's own
    /// `profiles/` and the image's. What the unit's agent checks a pushed show with.
    #[arg(long, conflicts_with = "store")]
    pub pushed: bool,
}

#[derive(clap::Args, Debug)]
pub struct DemoArgs {
    #[command(flatten)]
    pub common: CommonArgs,
}

#[derive(clap::Args, Debug, Clone)]
pub struct CommonArgs {
    /// Serve HTTP (dashboard, /profile, /metrics, /health) here instead of the config's
    /// `http:` address.
    #[arg(long, value_name = "ADDR:PORT")]
    pub http: Option<SocketAddr>,
    /// Measured baseline only: blocking sockets, as a naive player has. A stalled switch
    /// then stalls the whole render loop.
    #[arg(long)]
    pub blocking_send: bool,
    /// Measured baseline only: send every frame as far as the socket takes it, as pfx did
    /// before whole frames at the link's rate. On a link slower than the show the tail of
    /// each frame is lost and the last universes freeze (docs/nic.md, "Whole frames").
    #[arg(long)]
    pub send_every_frame: bool,
    /// Stop after this many seconds (tests, benchmarks). Default: play until signalled.
    #[arg(long, value_name = "SECONDS")]
    pub duration: Option<f64>,
    /// Socket send buffer (SO_SNDBUF) per output, in bytes. Default: about two frames of
    /// that pole, so a stalled link queues at most a frame or two of stale data.
    #[arg(long, value_name = "BYTES")]
    pub send_buffer: Option<usize>,
    /// Do not advertise the unit over mDNS.
    #[arg(long)]
    pub no_mdns: bool,
    /// When the show stops, write the profiler's final snapshot (the `/profile` JSON) here.
    #[arg(long, value_name = "FILE")]
    pub summary: Option<PathBuf>,
    /// Live control (blackout, play, test patterns, ...; `pfx-fleet control`) on this
    /// local Unix socket, mode 0600, for root and the player's own user only. Default for
    /// `run`: /run/pfx-player/control.sock (the service's runtime directory); `demo`
    /// has none unless given.
    #[arg(long, value_name = "PATH", conflicts_with = "no_control")]
    pub control_socket: Option<PathBuf>,
    /// No live control socket.
    #[arg(long)]
    pub no_control: bool,
}

/// Where `run` listens for live control unless told otherwise.
pub const DEFAULT_CONTROL_SOCKET: &str = "/run/pfx-player/control.sock";

impl CommonArgs {
    fn options(
        self,
        config: Option<PathBuf>,
        store: Option<PathBuf>,
        default_control: Option<PathBuf>,
    ) -> anyhow::Result<RunOptions> {
        let duration = match self.duration {
            None => None,
            Some(s) => Some(Duration::try_from_secs_f64(s).map_err(|_| {
                anyhow::anyhow!("--duration {s}: give a number of seconds, 0 or more")
            })?),
        };
        Ok(RunOptions {
            http: self.http,
            blocking_send: self.blocking_send,
            send_every_frame: self.send_every_frame,
            duration,
            send_buffer: self.send_buffer,
            mdns: !self.no_mdns,
            summary: self.summary,
            config,
            store,
            show_state: Default::default(),
            control_socket: if self.no_control {
                None
            } else {
                self.control_socket.or(default_control)
            },
            control_state: Default::default(),
        })
    }
}

pub fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    let opts = args.common.options(
        Some(args.config.clone()),
        args.store.clone(),
        Some(DEFAULT_CONTROL_SOCKET.into()),
    )?;
    let show = match &args.store {
        None => {
            let show = if args.pushed {
                ShowConfig::load_pushed(&args.config)?
            } else {
                ShowConfig::load(&args.config)?
            };
            app::showpick::set(
                &opts.show_state,
                app::showpick::config_info(&args.config, None),
            );
            show
        }
        // The store's show counts only when it opens as the check would open it.
        Some(root) => {
            let (show, info, _) =
                app::showpick::pick(&args.config, Some(root), |s| app::check(s, &opts))?;
            if let Some(r) = &info.reason {
                eprintln!(
                    "pfx-player: playing the config show {}: {r}",
                    args.config.display()
                );
            }
            app::showpick::set(&opts.show_state, info);
            show
        }
    };
    if args.check {
        let checked = app::check(&show, &opts)?;
        println!(
            "{}: ok: {} outputs, {} playlist items, interface {}; {}",
            show.source.display(),
            checked.outputs,
            checked.items,
            show.config.interface,
            checked.tx_queue,
        );
        return Ok(ExitCode::SUCCESS);
    }
    Ok(exit_code(app::play(show, opts)?))
}

pub fn demo(args: DemoArgs) -> anyhow::Result<ExitCode> {
    let mut opts = args.common.options(None, None, None)?;
    if opts.http.is_none() {
        opts.http = Some(SocketAddr::from(([127, 0, 0, 1], 8080)));
    }
    let show = crate::demo::demo_show()?;
    app::showpick::set(
        &opts.show_state,
        pfx_api::show::ShowInfo {
            name: "demo".into(),
            since_unix_ms: Some(crate::sys::time::unix_micros() / 1000),
            ..Default::default()
        },
    );
    eprintln!(
        "pfx-player demo: {} poles on loopback multicast ({}); dashboard on http://{}/ ; Ctrl-C stops",
        show.outputs.len(),
        show.outputs
            .iter()
            .map(|o| format!("{} → {}", o.name, o.destination))
            .collect::<Vec<_>>()
            .join(", "),
        opts.http.map(|a| a.to_string()).unwrap_or_default(),
    );
    Ok(exit_code(app::play(show, opts)?))
}

/// A stop by signal or deadline and a playlist that played to its end are both success.
fn exit_code(exit: Exit) -> ExitCode {
    match exit {
        Exit::Stopped | Exit::Finished => ExitCode::SUCCESS,
    }
}
