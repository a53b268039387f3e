//! `pfx-agent`: run on a unit over SSH by `pfx-fleet`. See docs/fleet.md.

use clap::{Parser, Subcommand, ValueEnum};
use pfx_api::exit;
use pfx_fleet::agent::{self, AgentOpts};
use pfx_fleet::nic::{MockBackend, NicBackend, PlayerBackend};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

#[derive(Clone, Copy, ValueEnum)]
enum NicBackendKind {
    /// `pfx-player nic ... --json` (the real NIC, through ethtool netlink).
    Player,
    /// File-backed NIC for tests (veth has no PAUSE): state in --mock-nic-dir. Test
    /// (debug) builds only: a release build, as on every image, refuses it.
    Mock,
}

#[derive(Parser)]
#[command(
    name = "pfx-agent",
    version,
    about = "pfx unit-side agent: apply and verify PAUSE-off",
    after_help = pfx_api::exit::help(
        "apply: not verified; status: the report has errors",
        &[("128+N", "interrupted by signal N (the rw window is closed first)")],
    )
)]
struct Cli {
    /// The unit's Ethernet interface.
    #[arg(long, default_value = "eth0", global = true)]
    iface: String,
    /// The read-only lower root (overlayroot's).
    #[arg(long, default_value = "/media/root-ro", global = true)]
    lower: PathBuf,
    /// How to read and set the NIC.
    #[arg(long, value_enum, default_value = "player", global = true)]
    nic_backend: NicBackendKind,
    /// The player binary the `player` backend runs.
    #[arg(long, default_value = "/usr/bin/pfx-player", global = true)]
    player: PathBuf,
    /// Where the `mock` backend keeps its NIC state (tests).
    #[arg(long, default_value = "/run/pfx-agent/mock-nic", global = true)]
    mock_nic_dir: PathBuf,
    /// Unit id; default: /etc/pfx/unit-id, else the host name.
    #[arg(long, global = true)]
    unit_id: Option<String>,
    /// The file holding the image version reported in `status`.
    #[arg(long, default_value = "/etc/pfx/image-version", global = true)]
    image_version_file: PathBuf,
    /// The player's /profile, read for its fps in `status`.
    #[arg(long, default_value = "http://127.0.0.1:8080/profile", global = true)]
    profile_url: String,
    /// Do not ask systemd over D-Bus (the oneshot is then reported unknown).
    #[arg(long, global = true)]
    no_systemd: bool,
    /// Answer JSON on stdout (the only format pfx-fleet reads).
    #[arg(long, global = true)]
    json: bool,
    /// TEST ONLY: stay half-way through the write, inside the rw window, this long.
    #[arg(long, hide = true, global = true)]
    test_hold_in_write_ms: Option<u64>,
    /// TEST ONLY: write our pid here when holding.
    #[arg(long, hide = true, global = true)]
    test_hold_pidfile: Option<PathBuf>,
    #[command(subcommand)]
    cmd: Cmd,
}

/// What `apply` sets.
#[derive(Clone, Copy, ValueEnum)]
enum ApplyWhat {
    /// Ethernet PAUSE off on --iface, now and in the lower root's nic.d.
    PauseOff,
}

#[derive(Subcommand)]
enum Cmd {
    /// Apply a setting now and persist it through the read-only root.
    Apply {
        /// The setting to apply.
        #[arg(value_enum)]
        what: ApplyWhat,
    },
    /// PAUSE state and frames/s, the oneshot, player fps, image version, unit id.
    Status {
        /// Milliseconds between the two counter reads the PAUSE frames/s come from.
        #[arg(long, default_value_t = 1000)]
        rate_interval_ms: u64,
    },
    /// The fleet account's forced command: runs one verb from SSH_ORIGINAL_COMMAND
    /// (`apply pause-off`, `status`, `show missing|put|activate|status`), every setting
    /// from the root-owned --config; refuses anything else (exit 126) and logs it.
    #[command(long_about = pfx_fleet::dispatch::VERBS_HELP)]
    Dispatch {
        #[arg(long, default_value = pfx_fleet::dispatch::DEFAULT_CONFIG)]
        config: PathBuf,
    },
    /// Internal: keeps the lower root read-only if the agent dies inside the rw window.
    #[command(hide = true)]
    GuardRo {},
    /// The boot environment that chooses the root slot (pfxenv.a, pfxenv.b on the FAT boot
    /// partition): RAUC's custom bootloader backend, print, init.
    ///
    /// U-Boot's boot script reads both copies on every boot, uses the newest valid one, boots
    /// the first slot of BOOT_ORDER with attempts left and writes the count down into the
    /// other copy. Every write here also goes into the copy that is not the newest, so a
    /// power cut during a write leaves the state from before it.
    Bootenv(pfx_fleet::bootenv::BootenvArgs),
    /// A/B updates on this unit, run by systemd as root (never over SSH; the fleet's
    /// update verbs go through `dispatch`). Every setting comes from the root-owned
    /// --config. See docs/update.md.
    Update {
        #[command(subcommand)]
        cmd: UpdateCmd,
    },
}

#[derive(Subcommand)]
enum UpdateCmd {
    /// The boot's health check (pfx-update-health.service): the player's first frame and
    /// /health ok for health_ok_s, the data partition, PAUSE off, sshd, `pfx-agent
    /// status`. Pass: `rauc status mark-good`; a trial boot that fails or runs out of
    /// health_deadline_s: `rauc status mark-bad` and a reboot into the other slot.
    /// Writes <store_root>/update/health.json and prints it. Exit 0 healthy, 1 not.
    HealthCommit {
        #[arg(long, default_value = pfx_fleet::dispatch::DEFAULT_CONFIG)]
        config: PathBuf,
    },
    /// Internal: a pending switch's timer fired (`update switch idle|at`).
    #[command(hide = true)]
    SwitchDue {
        #[arg(long, default_value = pfx_fleet::dispatch::DEFAULT_CONFIG)]
        config: PathBuf,
        /// The request (its time, Unix ms) the timer was set for.
        #[arg(long)]
        token: u64,
    },
}

fn unit_id(cli: &Cli) -> String {
    cli.unit_id
        .clone()
        .unwrap_or_else(pfx_fleet::dispatch::default_unit_id)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Cmd::GuardRo {} = cli.cmd {
        return ExitCode::from(pfx_fleet::mountguard::run_guardian(&cli.lower) as u8);
    }
    let stop = Arc::new(AtomicUsize::new(0));
    for sig in [
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGHUP,
    ] {
        if let Err(e) = signal_hook::flag::register_usize(sig, Arc::clone(&stop), sig as usize) {
            return fail(
                anyhow::Error::new(e).context(format!("installing the handler for signal {sig}")),
            );
        }
    }
    if let Cmd::Dispatch { config } = &cli.cmd {
        let argv: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
        return ExitCode::from(pfx_fleet::dispatch::run(&argv, config, stop));
    }
    if let Cmd::Update { cmd } = &cli.cmd {
        return ExitCode::from(update_local(cmd));
    }
    let test_only = matches!(cli.nic_backend, NicBackendKind::Mock)
        || cli.test_hold_in_write_ms.is_some()
        || cli.test_hold_pidfile.is_some();
    if test_only && !pfx_fleet::dispatch::TEST_BACKENDS {
        eprintln!(
            "pfx-agent: --nic-backend mock and --test-* work only in a test (debug) build; this is a release build"
        );
        return ExitCode::from(2);
    }
    let backend: Box<dyn NicBackend> = match cli.nic_backend {
        NicBackendKind::Player => Box::new(PlayerBackend {
            player: cli.player.clone(),
        }),
        NicBackendKind::Mock => Box::new(MockBackend {
            dir: cli.mock_nic_dir.clone(),
        }),
    };
    let guardian_exe = match std::env::current_exe() {
        Ok(p) => p,
        Err(e) => {
            return fail(
                anyhow::Error::new(e).context("finding our own executable for the guardian"),
            );
        }
    };
    let (hold, pidfile) = (
        cli.test_hold_in_write_ms.map(Duration::from_millis),
        cli.test_hold_pidfile.clone(),
    );
    let opts = AgentOpts {
        iface: cli.iface.clone(),
        lower: cli.lower.clone(),
        backend,
        unit_id: unit_id(&cli),
        image_version_file: cli.image_version_file.clone(),
        guardian_exe,
        systemd: !cli.no_systemd,
        profile_url: cli.profile_url.clone(),
        stop: Arc::clone(&stop),
        hold_in_write: hold,
        hold_pidfile: pidfile,
    };
    let (text, good) = match &cli.cmd {
        Cmd::Apply { .. } => {
            let r = agent::apply_pause_off(&opts);
            let human = format!("{}: {}: {}", r.unit, r.interface, r.message);
            let text = if cli.json {
                serde_json::to_string_pretty(&r)
            } else {
                Ok(human)
            };
            (text, r.verified)
        }
        Cmd::Status { rate_interval_ms } => {
            let r = agent::status(&opts, Duration::from_millis(*rate_interval_ms));
            let good = r.errors.is_empty();
            (serde_json::to_string_pretty(&r), good)
        }
        Cmd::Bootenv(args) => return pfx_fleet::bootenv::run(args, cli.json),
        Cmd::GuardRo {} | Cmd::Dispatch { .. } | Cmd::Update { .. } => return ExitCode::SUCCESS,
    };
    match text {
        Ok(t) => println!("{t}"),
        Err(e) => return fail(anyhow::Error::new(e).context("encoding the answer")),
    }
    let sig = stop.load(std::sync::atomic::Ordering::SeqCst);
    if sig != 0 {
        return ExitCode::from(exit::signal(sig));
    }
    ExitCode::from(if good { exit::SUCCESS } else { exit::NO })
}

/// `pfx-agent update ...` on the unit itself.
fn update_local(cmd: &UpdateCmd) -> u8 {
    let (UpdateCmd::HealthCommit { config } | UpdateCmd::SwitchDue { config, .. }) = cmd;
    let cfg = match pfx_fleet::dispatch::load_config(config) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("pfx-agent update: agent config refused: {e}");
            return exit::ERROR;
        }
    };
    let unit = cfg
        .unit_id
        .clone()
        .unwrap_or_else(pfx_fleet::dispatch::default_unit_id);
    match cmd {
        UpdateCmd::HealthCommit { .. } => {
            let o = pfx_fleet::health::HealthOpts::from_config(&cfg, config, &unit);
            let (r, code) = pfx_fleet::health::commit(&o);
            match serde_json::to_string_pretty(&r) {
                Ok(t) => println!("{t}"),
                Err(e) => eprintln!("pfx-agent update health-commit: encoding the report: {e}"),
            }
            code
        }
        UpdateCmd::SwitchDue { token, .. } => {
            let o = pfx_fleet::dispatch::update_opts(&cfg, config, &unit);
            pfx_fleet::updateagent::switch_due(&o, *token)
        }
    }
}

fn fail(e: anyhow::Error) -> ExitCode {
    exit::report("pfx-agent", e.as_ref())
}
