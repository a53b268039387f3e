//! `pfx-player`: plays LED shows to bigPacket, sACN and DDP poles at a steady frame rate.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use pfx_player::cli;

/// Plays xLights sequences and test patterns to LED poles (bigPacket, sACN/E1.31, DDP) at a
/// steady frame rate, and shows per-stage timing so you can see why frames drop.
#[derive(Parser, Debug)]
#[command(
    name = "pfx-player",
    version,
    about,
    long_about = None,
    max_term_width = 100,
    after_help = after_help()
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Play a show from its config (what the systemd service runs).
    Run(cli::run::RunArgs),
    /// Play the built-in demo: test patterns to one pole of each kind on loopback
    /// multicast, dashboard on http://127.0.0.1:8080/. No root, no files.
    Demo(cli::run::DemoArgs),
    /// Look inside xLights sequence files (.fseq).
    Seq(cli::seq::SeqArgs),
    /// Show interface: PAUSE settings and counters, link, stats (`status`); turn PAUSE off (`pause-off`).
    Nic(cli::nic::NicArgs),
    /// Find out why frames drop: PAUSE frames, tx timeouts, 10 Mbit/s link, multicast flood.
    Doctor(cli::doctor::DoctorArgs),
    /// Per-stage timing percentiles and NIC PAUSE counters of a running unit.
    Profile(cli::profile::ProfileArgs),
    /// List a show's upcoming scheduled starts and stops, and which entry wins.
    Schedule(cli::schedule::ScheduleArgs),
    /// xLights FPP Connect: make the password hash for the show config.
    FppConnect(cli::fppconnect::FppConnectArgs),
}

fn after_help() -> String {
    format!(
        "\
Signals (run, demo): SIGTERM/SIGINT stop within a second, after sACN stream-terminated packets;
SIGHUP reloads the config (a bad one is refused, the current show keeps playing).

Files: /etc/pfx/show.yaml (docs/show-config.md), /usr/share/pfx/profiles/*.yaml (docs/profiles.md).
Logs go to stderr (the journal under systemd); PFX_LOG=debug for more.
HTTP (read-only): /, /profile, /metrics, /health, /history.

{}",
        pfx_api::exit::help("findings (doctor), or the driver refused (nic)", &[])
    )
}

fn main() -> ExitCode {
    init_logging();
    let cli = Cli::parse();
    let result = match cli.cmd {
        Cmd::Run(a) => cli::run::run(a),
        Cmd::Demo(a) => cli::run::demo(a),
        Cmd::Seq(a) => cli::seq::run(a),
        Cmd::Profile(a) => cli::profile::run(a),
        Cmd::Nic(a) => cli::nic::run(a),
        Cmd::Doctor(a) => cli::doctor::run(a),
        Cmd::Schedule(a) => cli::schedule::run(a),
        Cmd::FppConnect(a) => cli::fppconnect::run(a),
    };
    match result {
        Ok(code) => code,
        Err(e) => pfx_api::exit::report("pfx-player", e.as_ref()),
    }
}

fn init_logging() {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_env("PFX_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    use std::io::IsTerminal;
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .init();
}
