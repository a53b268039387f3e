//! `pfx-fleet`: the operator side. See docs/fleet.md.

use anyhow::{Context, Result, bail};
use clap::parser::ValueSource;
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};
use pfx_fleet::agent::now_ms;
use pfx_fleet::config::FleetConfig;
use pfx_fleet::db::{FleetDb, UnitRow};
use pfx_fleet::gate;
use pfx_fleet::{discover, push, rollout, showpush};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

mod print;

#[derive(Parser)]
#[command(
    name = "pfx-fleet",
    version,
    about = "pfx fleet tool: push PAUSE-off, verify it, gate the poles' fallback",
    after_help = pfx_api::exit::help(
        "push: a unit is pending or failed; gate: closed; rollout: stopped at a pole",
        &[("3", "rollout refused: the gate of the site is closed (nothing was changed)")],
    )
)]
struct Cli {
    /// The fleet config: sites, their units and poles, SSH settings (docs/fleet.md).
    #[arg(long, default_value = "/etc/pfx/fleet/fleet.yaml", global = true)]
    config: PathBuf,
    /// State database (default: the config's state_db, else /var/lib/pfx-fleet/fleet.db).
    #[arg(long, global = true)]
    db: Option<PathBuf>,
    #[command(subcommand)]
    cmd: Cmd,
}

/// What `push` sets on the units.
#[derive(Clone, Copy, ValueEnum)]
enum PushWhat {
    /// Ethernet PAUSE off on the unit's interface, now and across reboots.
    PauseOff,
    /// A show directory (DIR: a show.yaml and the files it names) into the units' show
    /// stores: only what a unit lacks is sent (by hash), an interrupted transfer resumes,
    /// and the unit checks the show with its own player before it switches.
    Show,
    /// New software (BUNDLE: a signed RAUC bundle from `pfx-image bundle`) in waves: a
    /// canary, then a share, then the rest. Each unit gets the bundle (resumable, at idle
    /// priority), installs it into its other slot, switches when --switch says, and must
    /// read back on the new slot, marked good, healthy, at the bundle's version before the
    /// next wave starts. Stops at the first unit that rolls back or does not come back.
    Update,
}

/// When `push update` lets each unit switch to its new slot.
#[derive(Clone, Debug)]
enum SwitchArg {
    Now,
    Idle,
    At(String),
}

fn parse_switch(s: &str) -> Result<SwitchArg, String> {
    match s {
        "now" => Ok(SwitchArg::Now),
        "idle" => Ok(SwitchArg::Idle),
        _ => match s.strip_prefix("at ").or_else(|| s.strip_prefix("at=")) {
            Some(t) => Ok(SwitchArg::At(t.trim().to_string())),
            None => Err(format!(
                "{s:?}: give now, idle, or \"at TIME\" (TIME: HH:MM local, or 2026-12-03T02:30:00+01:00)"
            )),
        },
    }
}

/// What `gate` and `rollout` act on.
#[derive(Clone, Copy, ValueEnum)]
enum PoleWhat {
    /// The poles' 10BASE-T fallback.
    Fallback,
}

#[derive(Subcommand)]
enum Cmd {
    /// Find units over mDNS (_pfx._tcp) and record them with their site.
    Discover {
        /// Seconds to listen for answers.
        #[arg(long, default_value_t = 3)]
        timeout_s: u64,
        /// UDP port to browse on (5353 is mDNS; tests use another).
        #[arg(long, default_value_t = 5353)]
        mdns_port: u16,
        /// Browse on loopback only (tests).
        #[arg(long)]
        loopback_only: bool,
        /// SSH port recorded for discovered units.
        #[arg(long)]
        ssh_port: Option<u16>,
        /// Print the units found as JSON.
        #[arg(long)]
        json: bool,
    },
    /// One row per unit: its latest recorded state.
    Status {
        /// Only the units of this site.
        #[arg(long)]
        site: Option<String>,
        /// A readback older than this is not fresh (a number with ms, s, m, h or d).
        #[arg(long, default_value = "24h", value_parser = parse_max_age)]
        max_age: u64,
        /// Print the rows as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Push a setting to units over SSH and record each unit's own readback.
    Push {
        /// The setting to push.
        #[arg(value_enum)]
        what: PushWhat,
        /// push show: the show directory; push update: the bundle (BUNDLE.raucb).
        #[arg(value_name = "DIR|BUNDLE")]
        dir: Option<PathBuf>,
        /// push update: when each unit switches to its new slot: `idle` (its schedule's
        /// next idle, black window; the default, which never darkens a playing show),
        /// `now`, or `at TIME` (HH:MM on this machine's clock, or RFC 3339 with an offset).
        #[arg(long, value_name = "now|idle|at TIME", default_value = "idle", value_parser = parse_switch)]
        switch: SwitchArg,
        /// push update: units in the first wave (the canary).
        #[arg(long, value_name = "N", default_value_t = 1)]
        canary: usize,
        /// push update: the second wave, in percent of the units (the third is the rest).
        #[arg(long, value_name = "PCT", default_value_t = 25, value_parser = clap::value_parser!(u32).range(1..=100))]
        wave: u32,
        /// push update: how long a unit may take from its switch to reading back
        /// committed (a number with s, m or h).
        #[arg(long, value_name = "DUR", default_value = "15m")]
        timeout: String,
        /// push update: verify the bundle's signature here with this CA certificate
        /// (with rauc installed here; the unit verifies it in any case).
        #[arg(long, value_name = "PEM")]
        keyring: Option<PathBuf>,
        /// push update: seconds between two read-backs of a switching unit.
        #[arg(long, value_name = "S", default_value_t = 5.0, hide = true)]
        poll_s: f64,
        /// push show: the show's name on the units (default: DIR's name).
        #[arg(long)]
        name: Option<String>,
        /// push show: MiB per transfer command; an interrupted one is sent again at most
        /// this much.
        #[arg(long, default_value_t = 16)]
        chunk_mib: u64,
        /// Every unit of this site.
        #[arg(long, conflicts_with = "unit")]
        site: Option<String>,
        /// This unit (repeat for more); default: every known unit.
        #[arg(long)]
        unit: Vec<String>,
        /// How many units to push to at once. 32 by default: enough to overlap what each
        /// unit does on its own (remount, write, sync, read back) and the network, while the
        /// operator's own cost, about one SSH handshake per unit (~0.1 s of CPU with OpenSSH
        /// 9.2's default key exchange), keeps each handshake well inside connect_timeout_s
        /// even on a 2-core machine. Much more only queues on the operator's CPU.
        #[arg(long, default_value_t = 32)]
        parallel: usize,
        /// Units verified more recently than this are skipped (resume).
        #[arg(long, default_value = "24h", value_parser = parse_max_age)]
        max_age: u64,
        /// pause-off: push even to units already verified fresh; update: install even a
        /// bundle older than a unit's booted version (going back on purpose).
        #[arg(long)]
        force: bool,
        /// Print the run's summary as JSON.
        #[arg(long)]
        json: bool,
    },
    /// A live action on every unit now, in parallel, each at a frame boundary:
    /// `blackout`, `stop`, `play PLAYLIST`, `brightness F`, `test PATTERN [--output
    /// NAME]` (id, walk, red, green, blue, white), `resume`. It holds until `resume` or
    /// another action; a blackout survives a restart and a reboot. Prints, per unit, when
    /// its poles were told (the unit's clock at the frame boundary).
    Control {
        /// The action and its argument: `blackout`, `stop`, `play PLAYLIST`,
        /// `brightness F`, `test PATTERN`, `resume`.
        #[arg(value_name = "ACTION", required = true, num_args = 1..=2)]
        action: Vec<String>,
        /// test: only this output shows the pattern (the others are black).
        #[arg(long, value_name = "NAME")]
        output: Option<String>,
        /// Every unit of this site.
        #[arg(long, conflicts_with = "unit")]
        site: Option<String>,
        /// This unit (repeat for more).
        #[arg(long)]
        unit: Vec<String>,
        /// How many units to act on at once (all of a site by default, up to 64).
        #[arg(long, default_value_t = 64)]
        parallel: usize,
        /// Print the run's result as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Hold one SSH connection open to each unit until stopped (Ctrl-C), so that
    /// `control` acts without a key exchange per unit. Start it before the doors open.
    #[command(long_about = HOLD_LONG)]
    Hold {
        /// Every unit of this site.
        #[arg(long, conflicts_with = "unit")]
        site: Option<String>,
        /// This unit (repeat for more).
        #[arg(long)]
        unit: Vec<String>,
        /// Print each change as one JSON object per line.
        #[arg(long)]
        json: bool,
    },
    /// What each unit plays (asked over SSH now) and since when.
    Shows {
        /// Only the units of this site.
        #[arg(long)]
        site: Option<String>,
        /// How many units to ask at once.
        #[arg(long, default_value_t = 16)]
        parallel: usize,
        /// Print the rows as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Open only when every unit of the site has a fresh verified PAUSE-off readback.
    Gate {
        /// The gate to decide.
        #[arg(value_enum)]
        what: PoleWhat,
        /// The site whose units must all be verified.
        #[arg(long)]
        site: String,
        /// A readback older than this does not count (a number with ms, s, m, h or d).
        #[arg(long, default_value = "24h", value_parser = parse_max_age)]
        max_age: u64,
        /// Print the decision and its blockers as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Enable the poles' 10BASE-T fallback (gate must be open), canary first.
    Rollout {
        /// What to roll out.
        #[arg(value_enum)]
        what: PoleWhat,
        /// The site whose poles to change.
        #[arg(long)]
        site: String,
        /// The gate's window: a readback older than this does not count.
        #[arg(long, default_value = "24h", value_parser = parse_max_age)]
        max_age: u64,
        /// Seconds to wait for each pole's HTTP answer.
        #[arg(long, default_value_t = 10)]
        timeout_s: u64,
        /// Print the run's summary as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Live view of a site: one row per unit from its read-only /profile, refreshed in place.
    #[command(long_about = TOP_LONG, after_help = top_after())]
    Top {
        /// The site whose units to show (its units in the fleet config and those discover
        /// recorded for it).
        #[arg(long)]
        site: String,
        /// Only this unit of the site (repeat for more); default: every unit of the site.
        #[arg(long, value_name = "U")]
        unit: Vec<String>,
        /// Seconds between refreshes (decimals allowed, e.g. 0.5).
        #[arg(long, value_name = "N", default_value_t = 2.0)]
        interval_s: f64,
        /// Seconds to wait for one unit: to connect, and then for each read. A unit that
        /// does not answer in time shows as "timed out"; the others do not wait for it.
        #[arg(long, value_name = "N", default_value_t = 1.5)]
        timeout_s: f64,
        /// How many units to ask at once.
        #[arg(long, value_name = "N", default_value_t = 16)]
        parallel: usize,
        /// The player's HTTP port on every unit, overriding the port a unit announced over
        /// mDNS (`http_port=` in its TXT record) and the default 8080.
        #[arg(long, value_name = "PORT")]
        http_port: Option<u16>,
        /// Stop after this many refreshes (default: until q, Ctrl-C or SIGTERM).
        #[arg(long, value_name = "N")]
        count: Option<u64>,
        /// Print one snapshot as a JSON array of rows and exit (1 when a unit did not answer).
        #[arg(long)]
        json: bool,
    },
    /// What was pushed where, when, by whom, and what came back.
    History {
        /// At most this many records, newest first.
        #[arg(long, default_value_t = 200)]
        limit: usize,
        /// Print the records as JSON.
        #[arg(long)]
        json: bool,
    },
}

const TOP_LONG: &str = "\
Live view of a site: one row per unit, read from each unit's read-only GET /profile over
HTTP (the player's port: --http-port, else the http_port the unit announced over mDNS, else
8080). Units are asked in parallel (--parallel at once), each bounded by --timeout-s, so a
dead unit never delays the others.

Columns:
  unit      the unit's id in the fleet config (or as discovered)
  state     up, or DOWN followed by why: connection refused, timed out, not a pfx
            /profile document, HTTP status, or unreachable, with the client's message
  playing   the show the unit plays (its /profile's show name), (config) after it when
            the player fell back to its config show; - from a player that does not say
  fps       frames per second over the player's rolling window
  misses    deadline misses in that window
  wire p99  99th percentile of the wire_send stage in that window
  PAUSE/s   PAUSE frames received per second on the show interface (- when the NIC
            monitor has no rate yet or the driver does not count them)
  sync off  offset from the sync master; /profile has no sync section yet, so -
  software  the unit's software version (its booted slot's) as it last read back to
            `push update` (from the state database; - when no update reached it)
  health    ok, or why the loop is not on time; (answers as X) when another unit answered

On a terminal the table is redrawn in place every --interval-s; q or Ctrl-C quits and puts
the terminal back. Otherwise (a pipe, a file) one table per interval is printed, each
preceded by a line with the time and how many units answered. --json prints one snapshot
and exits.";

/// `top --help`'s exit codes (the shared convention) and examples.
fn top_after() -> String {
    format!(
        "{}\n\nExamples:\n  pfx-fleet top --site hall-a\n  \
         pfx-fleet top --site hall-a --unit u1 --unit u2 --interval-s 1\n  \
         pfx-fleet top --site hall-a --json | jq '.[] | select(.answered | not)'",
        pfx_api::exit::help(
            "--json: a unit did not answer (its row says why); never in the live view",
            &[],
        )
    )
}

/// `top`: the units of the site to ask, in the order shown.
fn top_units(
    store: &FleetDb,
    site: &str,
    only: &[String],
    http_port: Option<u16>,
) -> Result<Vec<pfx_fleet::top::TopUnit>> {
    let all = store.units(Some(site))?;
    if all.is_empty() {
        bail!(
            "site {site} has no units: list them under the site in the fleet config or run discover"
        );
    }
    let chosen: Vec<UnitRow> = if only.is_empty() {
        all
    } else {
        let mut v = Vec::new();
        for id in only {
            match all.iter().find(|u| &u.unit_id == id) {
                Some(u) => v.push(u.clone()),
                None => bail!(
                    "unit {id} is not in site {site}: units there are {}",
                    all.iter()
                        .map(|u| u.unit_id.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            }
        }
        v
    };
    let mut software = std::collections::HashMap::new();
    for u in &chosen {
        software.insert(
            u.unit_id.clone(),
            store.software(&u.unit_id)?.map(|(v, _)| v),
        );
    }
    Ok(chosen
        .into_iter()
        .map(|u| pfx_fleet::top::TopUnit {
            software: software.remove(&u.unit_id).flatten(),
            http_port: http_port.unwrap_or_else(|| {
                pfx_fleet::top::http_port_from_txt(
                    u.txt.as_deref(),
                    pfx_fleet::top::DEFAULT_HTTP_PORT,
                )
            }),
            unit: u.unit_id,
            host: u.host,
        })
        .collect())
}

fn seconds(flag: &str, v: f64) -> Result<Duration> {
    if !(v.is_finite() && v > 0.0 && v <= 86_400.0) {
        bail!("{flag} {v}: give a number of seconds above 0 (e.g. 2 or 0.5)");
    }
    Ok(Duration::from_secs_f64(v))
}

struct TopOpts {
    site: String,
    interval: Duration,
    timeout: Duration,
    parallel: usize,
    count: Option<u64>,
}

/// The live loop: a redraw in place on a terminal, one table per interval elsewhere.
fn top_live(units: &[pfx_fleet::top::TopUnit], o: &TopOpts) -> Result<u8> {
    use pfx_fleet::top::{self, term};
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;
    use std::time::Instant;
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(&stop))
            .context("installing the SIGINT/SIGTERM handler")?;
    }
    let screen = term::is_tty(1).then(term::Screen::enter);
    let mut n = 0u64;
    loop {
        let t0 = Instant::now();
        let rows = top::poll(units, o.parallel, o.timeout);
        n += 1;
        let up = rows.iter().filter(|r| r.answered).count();
        let head = format!(
            "pfx-fleet top: site {}, {} UTC, {up} of {} units answered",
            o.site,
            gate::utc(now_ms()),
            rows.len()
        );
        let table = top::render(&rows);
        match &screen {
            Some(s) => s.draw(&format!(
                "{head} (every {} s; q quits)\n\n{table}",
                o.interval.as_secs_f64()
            )),
            None => {
                use std::io::Write;
                let mut out = std::io::stdout().lock();
                writeln!(out, "{head}\n{table}\n")?;
                out.flush()?;
            }
        }
        if o.count.is_some_and(|c| n >= c) {
            break;
        }
        let quit = match &screen {
            Some(s) => s.wait(t0 + o.interval, &stop),
            None => term::wait_until(t0 + o.interval, &stop, false),
        };
        if quit {
            break;
        }
    }
    drop(screen);
    if term::is_tty(1) {
        println!();
    }
    Ok(0)
}

/// Who is pushing: the human behind sudo first, then the login, then the uid's name.
fn operator() -> String {
    for v in ["SUDO_USER", "USER", "LOGNAME"] {
        if let Ok(u) = std::env::var(v)
            && !u.is_empty()
        {
            return u;
        }
    }
    // SAFETY: getuid cannot fail; getpwuid returns NULL or a pointer to static storage
    // that we copy out at once (single-threaded here).
    unsafe {
        let uid = libc::getuid();
        let pw = libc::getpwuid(uid);
        if !pw.is_null() && !(*pw).pw_name.is_null() {
            return std::ffi::CStr::from_ptr((*pw).pw_name)
                .to_string_lossy()
                .into_owned();
        }
        format!("uid {uid}")
    }
}

/// `--max-age`, checked when the arguments are read, so a bad window is refused before
/// the database or any unit is touched.
fn parse_max_age(s: &str) -> Result<u64, String> {
    gate::parse_duration_ms(s)
        .ok_or_else(|| format!("{s:?}: use a number with ms, s, m, h or d (e.g. 24h)"))
}

/// Writes the config's explicit units into the database, so every command sees them.
/// `seen` is whether this command reaches units (SSH, HTTP or mDNS): only then is each
/// unit's `seen_ms` moved to now; a command that reads the database alone (`status`,
/// `gate`, `rollout`, `history`) leaves the recorded time as it was.
fn sync_config_units(store: &FleetDb, cfg: &FleetConfig, seen: bool) -> Result<()> {
    let seen_ms = if seen { now_ms() } else { 0 };
    for s in &cfg.sites {
        for u in &s.units {
            store.upsert_unit(&UnitRow {
                unit_id: u.id.clone(),
                site: Some(s.name.clone()),
                host: u.host.clone(),
                port: u.port.unwrap_or(cfg.ssh.port),
                source: "config".into(),
                version: None,
                txt: None,
                seen_ms,
            })?;
        }
    }
    Ok(())
}

impl Cmd {
    /// Whether the command talks to units (and so may say when each was seen).
    fn reaches_units(&self) -> bool {
        match self {
            Cmd::Discover { .. }
            | Cmd::Push { .. }
            | Cmd::Control { .. }
            | Cmd::Hold { .. }
            | Cmd::Shows { .. }
            | Cmd::Top { .. } => true,
            Cmd::Status { .. } | Cmd::Gate { .. } | Cmd::Rollout { .. } | Cmd::History { .. } => {
                false
            }
        }
    }
}

fn gate_decision(store: &FleetDb, site: &str, max_age_ms: u64) -> Result<gate::GateDecision> {
    let units = store.units(Some(site))?;
    let mut v = Vec::new();
    for u in units {
        let l = store.latest_unit(&u.unit_id)?;
        v.push((u.unit_id, l));
    }
    Ok(gate::decide(site, &v, now_ms(), max_age_ms))
}

/// The units a push goes to: `--unit`s (each must be known), else the site's, else all.
fn push_targets(store: &FleetDb, site: Option<&str>, unit: &[String]) -> Result<Vec<UnitRow>> {
    let all = store.units(site)?;
    let targets: Vec<UnitRow> = if unit.is_empty() {
        all
    } else {
        let mut t = Vec::new();
        for id in unit {
            match all.iter().find(|u| &u.unit_id == id) {
                Some(u) => t.push(u.clone()),
                None => {
                    bail!("unit {id} is not known: list it in the fleet config or run discover")
                }
            }
        }
        t
    };
    if targets.is_empty() {
        bail!(
            "no units to push to{}",
            site.map(|s| format!(" in site {s}")).unwrap_or_default()
        );
    }
    Ok(targets)
}

/// What every command is handed: the config, the open database and the command line as
/// recorded with each run.
struct Ctx {
    cfg: FleetConfig,
    config_path: PathBuf,
    db: PathBuf,
    store: FleetDb,
    /// The command line, as JSON, for the runs table.
    args: String,
}

/// Flags given on the command line that not every form of a command takes; clap cannot
/// tell a default from a given value, so `main` asks the matches.
#[derive(Default)]
struct Given {
    chunk_mib: bool,
}

/// Flags one form of `push` takes and another does not are refused before anything is
/// opened or any unit is asked, so an operator never believes a flag did something.
fn refuse_ignored_flags(cmd: &Cmd, given: &Given) -> Result<()> {
    match cmd {
        Cmd::Push {
            what: PushWhat::Show,
            force: true,
            ..
        } => bail!(
            "push show takes no --force: a show is sent only where a unit lacks it by hash and checked there before it switches, so there is nothing to force; drop --force"
        ),
        Cmd::Push {
            what: PushWhat::PauseOff,
            ..
        } if given.chunk_mib => bail!(
            "push pause-off takes no --chunk-mib: it sends one small command per unit, nothing in chunks; --chunk-mib is for push show and push update"
        ),
        _ => Ok(()),
    }
}

fn run(cli: Cli, given: &Given) -> Result<u8> {
    refuse_ignored_flags(&cli.cmd, given)?;
    let cfg = FleetConfig::load(&cli.config)?;
    let db = cli
        .db
        .clone()
        .or_else(|| cfg.state_db.clone())
        .unwrap_or_else(|| "/var/lib/pfx-fleet/fleet.db".into());
    let store = FleetDb::open(&db)?;
    sync_config_units(&store, &cfg, cli.cmd.reaches_units())?;
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let cx = Ctx {
        cfg,
        config_path: cli.config,
        db,
        store,
        args: serde_json::to_string(&argv)?,
    };
    run_cmd(&cx, cli.cmd)
}

/// The command, with the config and the database open.
fn run_cmd(cx: &Ctx, cmd: Cmd) -> Result<u8> {
    match cmd {
        Cmd::Discover {
            timeout_s,
            mdns_port,
            loopback_only,
            ssh_port,
            json,
        } => discover_cmd(cx, timeout_s, mdns_port, loopback_only, ssh_port, json),
        Cmd::Status {
            site,
            max_age,
            json,
        } => status_cmd(cx, site.as_deref(), max_age, json),
        Cmd::Push {
            what: PushWhat::Show,
            dir,
            name,
            chunk_mib,
            site,
            unit,
            parallel,
            json,
            ..
        } => {
            let dir = dir.context("push show needs the show directory: pfx-fleet push show DIR")?;
            push_show_cmd(
                cx,
                &dir,
                name.as_deref(),
                chunk_mib,
                site,
                &unit,
                parallel,
                json,
            )
        }
        c @ Cmd::Push {
            what: PushWhat::Update,
            ..
        } => push_update_from(cx, c),
        Cmd::Control {
            action,
            output,
            site,
            unit,
            parallel,
            json,
        } => control_cmd(cx, &action, output.as_deref(), site, &unit, parallel, json),
        Cmd::Shows {
            site,
            parallel,
            json,
        } => shows_cmd(cx, site, parallel, json),
        Cmd::Hold { site, unit, json } => hold_cmd(cx, site, &unit, json),
        c @ Cmd::Push {
            what: PushWhat::PauseOff,
            ..
        } => push_pause_off_from(cx, c),
        Cmd::Gate {
            what: _,
            site,
            max_age,
            json,
        } => {
            let d = gate_decision(&cx.store, &site, max_age)?;
            if json {
                print::json(&d)?
            } else {
                print::gate(&d)
            }
            Ok(if d.open { 0 } else { 1 })
        }
        Cmd::Rollout {
            what: _,
            site,
            max_age,
            timeout_s,
            json,
        } => rollout_cmd(cx, &site, max_age, timeout_s, json),
        c @ Cmd::Top { .. } => top_from(cx, c),
        Cmd::History { limit, json } => {
            let h = cx.store.history(limit)?;
            if json {
                print::json(&h)?;
            } else {
                print::history(&h, &cx.db);
            }
            Ok(0)
        }
    }
}

/// `push update BUNDLE`: its flags checked and turned into the push's options.
fn push_update_from(cx: &Ctx, cmd: Cmd) -> Result<u8> {
    let Cmd::Push {
        what: PushWhat::Update,
        dir,
        chunk_mib,
        site,
        unit,
        parallel,
        force,
        json,
        switch,
        canary,
        wave,
        timeout,
        keyring,
        poll_s,
        ..
    } = cmd
    else {
        bail!("push_update_from was handed another command");
    };
    let path =
        dir.context("push update needs the bundle: pfx-fleet push update BUNDLE --site S")?;
    let chunk_bytes = chunk_bytes(chunk_mib)?;
    let timeout = gate::parse_duration_ms(&timeout)
        .filter(|t| *t >= 1000)
        .with_context(|| format!("--timeout {timeout:?}: a number with s, m or h (e.g. 15m)"))?;
    let opts = pfx_fleet::updatepush::UpdatePushOpts {
        parallel,
        chunk_bytes,
        canary,
        wave_pct: wave,
        switch: update_switch(&switch)?,
        timeout: Duration::from_millis(timeout),
        force,
        poll: seconds("--poll-s", poll_s)?,
        operator: operator(),
        args: cx.args.clone(),
        site,
        bars: pfx_fleet::top::term::is_tty(2) && !json,
        json,
    };
    push_update_cmd(cx, &path, keyring.as_deref(), &unit, opts)
}

/// `top`: the live view, or one JSON snapshot.
fn top_from(cx: &Ctx, cmd: Cmd) -> Result<u8> {
    let Cmd::Top {
        site,
        unit,
        interval_s,
        timeout_s,
        parallel,
        http_port,
        count,
        json,
    } = cmd
    else {
        bail!("top_from was handed another command");
    };
    let o = TopOpts {
        interval: seconds("--interval-s", interval_s)?,
        timeout: seconds("--timeout-s", timeout_s)?,
        parallel: parallel.max(1),
        count,
        site,
    };
    let units = top_units(&cx.store, &o.site, &unit, http_port)?;
    if json {
        let rows = pfx_fleet::top::poll(&units, o.parallel, o.timeout);
        print::json(&rows)?;
        Ok(if rows.iter().all(|r| r.answered) {
            0
        } else {
            1
        })
    } else {
        top_live(&units, &o)
    }
}

/// `push pause-off`.
fn push_pause_off_from(cx: &Ctx, cmd: Cmd) -> Result<u8> {
    let Cmd::Push {
        what: PushWhat::PauseOff,
        site,
        unit,
        parallel,
        max_age,
        force,
        json,
        ..
    } = cmd
    else {
        bail!("push_pause_off_from was handed another command");
    };
    let targets = push_targets(&cx.store, site.as_deref(), &unit)?;
    let opts = push::PushOpts {
        parallel,
        max_age_ms: max_age,
        force,
        operator: operator(),
        args: cx.args.clone(),
        site,
    };
    let sum = push::push_pause_off(&cx.store, &cx.cfg, targets, &opts)?;
    if json {
        print::json(&sum)?;
    } else {
        print::push_pause_off(&sum);
    }
    Ok(if sum.pending + sum.failed == 0 { 0 } else { 1 })
}

/// `--chunk-mib` in bytes, within 1..=256 MiB.
fn chunk_bytes(chunk_mib: u64) -> Result<u64> {
    if !(1..=256).contains(&chunk_mib) {
        bail!("--chunk-mib {chunk_mib}: give 1..=256");
    }
    Ok(chunk_mib << 20)
}

fn discover_cmd(
    cx: &Ctx,
    timeout_s: u64,
    mdns_port: u16,
    loopback_only: bool,
    ssh_port: Option<u16>,
    json: bool,
) -> Result<u8> {
    let found = discover::browse(Duration::from_secs(timeout_s), mdns_port, loopback_only)?;
    let mut rows = Vec::new();
    for f in &found {
        let site = cx.cfg.site_for(&f.unit, f.addr);
        let Some(addr) = f.addr else { continue };
        let in_config = cx
            .cfg
            .sites
            .iter()
            .any(|s| s.units.iter().any(|u| u.id == f.unit));
        let row = UnitRow {
            unit_id: f.unit.clone(),
            site: site.clone(),
            host: addr.to_string(),
            port: ssh_port.unwrap_or(cx.cfg.ssh.port),
            source: if in_config { "config" } else { "mdns" }.into(),
            version: f.version.clone(),
            txt: serde_json::to_string(f).ok(),
            seen_ms: now_ms(),
        };
        cx.store.upsert_unit(&row)?;
        rows.push(row);
    }
    if json {
        print::json(&rows)?;
    } else {
        print::discover(&rows);
    }
    Ok(0)
}

fn status_cmd(cx: &Ctx, site: Option<&str>, max_age_ms: u64, json: bool) -> Result<u8> {
    let now = now_ms();
    let mut out = Vec::new();
    for u in cx.store.units(site)? {
        let l = cx.store.latest_unit(&u.unit_id)?;
        let verified = l.as_ref().map(|l| gate::fresh_verified(l, now, max_age_ms));
        out.push(print::StatusRow {
            host: u.host,
            port: u.port,
            readback: l
                .as_ref()
                .and_then(|l| l.readback.as_deref())
                .and_then(|r| serde_json::from_str(r).ok()),
            reason: l.as_ref().and_then(|l| l.reason.clone()),
            recorded_ms: l.as_ref().map(|l| l.recorded_ms),
            site: u.site,
            software: cx.store.software(&u.unit_id)?.map(|(v, _)| v),
            source: u.source,
            state: l
                .as_ref()
                .map(|l| l.state.as_str())
                .unwrap_or("never")
                .into(),
            unit: u.unit_id,
            verified_fresh: matches!(verified, Some(Ok(()))),
            version: u.version,
        });
    }
    if json {
        print::json(&out)?;
    } else {
        print::status(&out, now);
    }
    Ok(0)
}

#[allow(clippy::too_many_arguments)]
fn push_show_cmd(
    cx: &Ctx,
    dir: &std::path::Path,
    name: Option<&str>,
    chunk_mib: u64,
    site: Option<String>,
    unit: &[String],
    parallel: usize,
    json: bool,
) -> Result<u8> {
    let chunk_bytes = chunk_bytes(chunk_mib)?;
    let show = showpush::read_show_dir(dir, name)
        .with_context(|| format!("reading the show in {}", dir.display()))?;
    let targets = push_targets(&cx.store, site.as_deref(), unit)?;
    let opts = showpush::ShowPushOpts {
        parallel,
        chunk_bytes,
        operator: operator(),
        args: cx.args.clone(),
        site,
        bars: pfx_fleet::top::term::is_tty(2) && !json,
    };
    let sum = showpush::push_show(&cx.store, &cx.cfg, show, targets, &opts)?;
    if json {
        print::json(&sum)?;
    } else {
        print::push_show(&sum);
    }
    Ok(if sum.pending + sum.failed == 0 { 0 } else { 1 })
}

/// `--switch` as `push update` takes it; a time must still be ahead.
fn update_switch(switch: &SwitchArg) -> Result<pfx_fleet::updatepush::Switch> {
    let now_s = (now_ms() / 1000) as i64;
    Ok(match switch {
        SwitchArg::Now => pfx_fleet::updatepush::Switch::Now,
        SwitchArg::Idle => pfx_fleet::updatepush::Switch::Idle,
        SwitchArg::At(t) => {
            let at =
                pfx_fleet::updatepush::parse_switch_time(t, now_s).map_err(anyhow::Error::msg)?;
            if at <= now_s {
                bail!("--switch at {t}: that time has passed; give a later one, or --switch now");
            }
            pfx_fleet::updatepush::Switch::At(at)
        }
    })
}

fn push_update_cmd(
    cx: &Ctx,
    path: &std::path::Path,
    keyring: Option<&std::path::Path>,
    unit: &[String],
    opts: pfx_fleet::updatepush::UpdatePushOpts,
) -> Result<u8> {
    let rauc = pfx_fleet::updatepush::find_on_path("rauc");
    let bundle = pfx_fleet::updatepush::read_bundle(path, keyring, rauc.as_deref())
        .map_err(anyhow::Error::msg)
        .with_context(|| format!("reading the bundle {}", path.display()))?;
    let targets = push_targets(&cx.store, opts.site.as_deref(), unit)?;
    eprintln!(
        "push update: {} {} for {} ({} bytes, sha256 {}, read with {}) to {} units",
        path.display(),
        bundle.info.version,
        bundle.info.compatible,
        bundle.info.size,
        bundle.info.sha256,
        bundle.source,
        targets.len()
    );
    let json = opts.json;
    let sum = pfx_fleet::updatepush::push_update(&cx.store, &cx.cfg, bundle, targets, &opts)?;
    if json {
        println!("{}", serde_json::to_string(&sum)?);
    } else {
        print::push_update(&sum);
    }
    let all = sum.skipped_done + sum.done == sum.targets;
    Ok(if all { 0 } else { 1 })
}

const HOLD_LONG: &str = "\
Holds one SSH connection open to each unit (site or units given) until stopped with
Ctrl-C (SIGINT, SIGTERM or SIGHUP), so that `pfx-fleet control`, run in another
terminal, acts on the units without a key exchange each: a new connection costs the
fleet host about 0.1 s of CPU per unit, a command on a held one a few milliseconds.

A connection is OpenSSH's own shared connection (ControlMaster), made with the same
pins as every other command (the fleet's known_hosts only, keys only, no prompts). Its
socket is in a directory only this user can enter: $PFX_FLEET_HELD_DIR if set, else
$XDG_RUNTIME_DIR/pfx-fleet-held, else /tmp/pfx-fleet-held-UID (made 0700; refused if it
is not this user's with mode 0700). Each socket's name is a digest of the user, host,
port, identity and known_hosts: when known_hosts changes, the old connections are
ended and new ones made.

A connection that ends (the unit rebooted, the network went) is made again after 2, 4,
8, 16, then every 30 s. Each change is printed: `held`, `lost` with ssh's reason and
when it is tried again, `elsewhere` (another `hold` of this user holds it), and
`closed` at the end. When `hold` is killed, its connections end with it.

`control` uses a held connection when one answers for the unit and a new connection
otherwise; its answer says `over the held connection` (`held_connection` in --json).
Other commands make their own connections.";

fn hold_cmd(cx: &Ctx, site: Option<String>, unit: &[String], json: bool) -> Result<u8> {
    if site.is_none() && unit.is_empty() {
        bail!("hold: say which units: --site S, or --unit U (repeatable)");
    }
    let targets = push_targets(&cx.store, site.as_deref(), unit)?;
    if targets.is_empty() {
        bail!(
            "hold: no units{}: list them in the fleet config or run discover",
            site.as_deref()
                .map(|s| format!(" in site {s}"))
                .unwrap_or_default()
        );
    }
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    for sig in [
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ] {
        signal_hook::flag::register(sig, std::sync::Arc::clone(&stop))
            .context("hold: installing the signal handlers")?;
    }
    let held = pfx_fleet::held::Held::open(&cx.cfg.ssh, true)?
        .context("hold: the held-connection directory was not made")?;
    if !json {
        println!(
            "hold: holding a connection to each of {} units in {}; pfx-fleet control rides on them; Ctrl-C ends them",
            targets.len(),
            held.dir.display()
        );
    }
    let n = pfx_fleet::held::hold(held, &cx.cfg.ssh, targets, &stop, |e| {
        if json {
            if let Ok(line) = serde_json::to_string(e) {
                println!("{line}");
            }
        } else {
            println!("{}", print::hold_event(e));
        }
    });
    if !json {
        println!("hold: closed {n} connections");
    }
    Ok(0)
}

fn control_cmd(
    cx: &Ctx,
    action: &[String],
    output: Option<&str>,
    site: Option<String>,
    unit: &[String],
    parallel: usize,
    json: bool,
) -> Result<u8> {
    let mut words: Vec<&str> = action.iter().map(String::as_str).collect();
    if let Some(o) = output {
        words.extend(["--output", o]);
    }
    // Bad words are refused here, before any unit hears of them.
    let action = pfx_api::control::Action::from_words(&words)
        .map_err(|e| anyhow::anyhow!("control: {e}"))?;
    if site.is_none() && unit.is_empty() {
        bail!("control: say which units: --site S, or --unit U (repeatable)");
    }
    let targets = push_targets(&cx.store, site.as_deref(), unit)?;
    if targets.is_empty() {
        bail!(
            "control: no units{}: list them in the fleet config or run discover",
            site.as_deref()
                .map(|s| format!(" in site {s}"))
                .unwrap_or_default()
        );
    }
    // Riding on `hold`'s connections is only a speed-up: without them (none held, or a
    // directory that is not private) each unit gets a new connection as before.
    let held = match pfx_fleet::held::Held::open(&cx.cfg.ssh, false) {
        Ok(h) => h,
        Err(e) => {
            eprintln!("control: not using held connections: {e}");
            None
        }
    };
    let opts = pfx_fleet::controlpush::ControlOpts {
        parallel: parallel.clamp(1, 256),
        operator: operator(),
        args: cx.args.clone(),
        site,
        held,
    };
    let sum = pfx_fleet::controlpush::control(&cx.store, &cx.cfg, targets, &action, &opts, |r| {
        if !json {
            println!("{}", pfx_fleet::controlpush::line(&action, r));
        }
    })?;
    if json {
        print::json(&sum)?;
    } else {
        print::control(&sum);
    }
    Ok(if sum.done == sum.targets { 0 } else { 1 })
}

fn shows_cmd(cx: &Ctx, site: Option<String>, parallel: usize, json: bool) -> Result<u8> {
    let units = cx.store.units(site.as_deref())?;
    if units.is_empty() {
        bail!(
            "no units{}: list them in the fleet config or run discover",
            site.map(|s| format!(" in site {s}")).unwrap_or_default()
        );
    }
    let rows = showpush::shows(&cx.cfg, units, parallel);
    if json {
        print::json(&rows)?;
    } else {
        print::shows(&rows, now_ms());
    }
    Ok(if rows.iter().all(|r| r.answered) {
        0
    } else {
        1
    })
}

fn rollout_cmd(cx: &Ctx, site: &str, max_age_ms: u64, timeout_s: u64, json: bool) -> Result<u8> {
    let sc = cx
        .cfg
        .site(site)
        .with_context(|| format!("site {site} is not in {}", cx.config_path.display()))?;
    let d = gate_decision(&cx.store, site, max_age_ms)?;
    if !d.open {
        print::gate(&d);
        eprintln!("pfx-fleet: rollout fallback refused: the gate for site {site} is closed");
        return Ok(3);
    }
    let token = rollout::read_token(sc)?;
    let sum = rollout::rollout(
        &cx.store,
        sc,
        &token,
        &operator(),
        &cx.args,
        Duration::from_secs(timeout_s),
    )?;
    if json {
        print::json(&sum)?;
    } else {
        print::rollout(site, &sum);
    }
    Ok(if sum.stopped_at.is_some() { 1 } else { 0 })
}

fn main() -> ExitCode {
    let matches = Cli::command().get_matches();
    let given = Given {
        chunk_mib: matches
            .subcommand_matches("push")
            .and_then(|m| m.value_source("chunk_mib"))
            == Some(ValueSource::CommandLine),
    };
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(c) => c,
        Err(e) => e.exit(),
    };
    match run(cli, &given) {
        Ok(c) => ExitCode::from(c),
        Err(e) => pfx_api::exit::report("pfx-fleet", e.as_ref()),
    }
}
