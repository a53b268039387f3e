//! `pfx-player nic status IFACE [--json]` and `pfx-player nic pause-off IFACE [--wait S] [--json]`.
//!
//! Exit codes: 0 done; 1 the device cannot do it (the driver's own error is printed) or
//! the wait ran out; 2 the interface does not exist.

use std::process::ExitCode;
use std::time::Duration;

use crate::nic::{self, CounterReading, NicError, NicStatus};

#[derive(clap::Args, Debug)]
pub struct NicArgs {
    #[command(subcommand)]
    pub command: NicCommand,
}

#[derive(clap::Subcommand, Debug)]
pub enum NicCommand {
    /// PAUSE settings and counters, link speed, carrier, stats64, qdisc drops, tx_timeout.
    Status {
        /// Interface, e.g. eth0.
        iface: String,
        /// Print the reading as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Turn 802.3x PAUSE off (autoneg, rx, tx): read first, set only when different,
    /// wait for carrier, read back.
    PauseOff {
        /// Interface, e.g. eth0.
        iface: String,
        /// Seconds to keep retrying while the driver says "not yet" (bcmgenet refuses
        /// with ENODEV until the interface is first brought up).
        #[arg(long, default_value_t = 30.0, value_name = "SECONDS")]
        wait: f64,
        /// Print the outcome as JSON.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(args: NicArgs) -> anyhow::Result<ExitCode> {
    Ok(ExitCode::from(run_code(args)?))
}

/// Like `run`, with the exit code as a number (for tests and callers that exit themselves).
pub fn run_code(args: NicArgs) -> anyhow::Result<u8> {
    match args.command {
        NicCommand::Status { iface, json } => Ok(match nic::read_status(&iface) {
            Ok(s) => {
                if json {
                    println!("{}", serde_json::to_string_pretty(&s)?);
                } else {
                    print!("{}", render_status(&s));
                }
                0
            }
            Err(e) => fail("status", &e, json),
        }),
        NicCommand::PauseOff { iface, wait, json } => {
            if !(wait.is_finite() && wait >= 0.0) {
                anyhow::bail!("--wait must be a number of seconds >= 0, got {wait}");
            }
            Ok(
                match nic::pause_off(&iface, Duration::from_secs_f64(wait)) {
                    Ok(o) => {
                        if json {
                            println!("{}", serde_json::to_string_pretty(&o)?);
                        } else {
                            let what = if o.changed {
                                format!("PAUSE set off (was {})", o.before)
                            } else {
                                "PAUSE already off; nothing sent".to_string()
                            };
                            println!(
                                "{}: {what}; read back: {} (driver {}, {:.1} s, {} retries)",
                                o.interface, o.after, o.driver, o.waited_s, o.retries
                            );
                            if let Some(n) = &o.note {
                                println!("{}: note: {n}", o.interface);
                            }
                        }
                        0
                    }
                    Err(e) => fail("pause-off", &e, json),
                },
            )
        }
    }
}

fn fail(cmd: &str, e: &NicError, json: bool) -> u8 {
    let code = match e {
        NicError::UnknownInterface { .. } => 2,
        _ => 1,
    };
    if json {
        let v = serde_json::json!({ "error": e.to_string(), "errno": e.errno() });
        println!("{v}");
    }
    eprintln!("pfx-player nic {cmd}: {e}");
    code
}

fn counter(c: &CounterReading) -> String {
    match c.total {
        None => "unsupported by the driver".to_string(),
        Some(t) => match c.per_s {
            Some(r) => format!("{t} ({r:.1}/s) [{}]", c.source),
            None => format!("{t} [{}]", c.source),
        },
    }
}

fn opt<T: std::fmt::Display>(v: &Option<T>) -> String {
    v.as_ref().map_or("unknown".into(), |v| v.to_string())
}

pub fn render_status(s: &NicStatus) -> String {
    let pause = match (&s.pause, &s.pause_error) {
        (Some(p), _) => p.to_string(),
        (None, Some(e)) => format!("unavailable: {e}"),
        (None, None) => "unavailable".into(),
    };
    let speed = s
        .speed_mbps
        .map_or("unknown".to_string(), |v| format!("{v} Mbit/s"));
    format!(
        "interface {} on {} (driver {})\n\
         pause            {pause}\n\
         pause rx frames  {}\n\
         pause tx frames  {}\n\
         tx_timeout       {}\n\
         link             {speed}, duplex {}, carrier {}, carrier changes {}\n\
         packets          rx {} tx {}\n\
         bytes            rx {} tx {}\n\
         tx dropped       {} errors {}\n\
         qdisc            {} drops {} backlog {} B\n",
        s.interface,
        s.host,
        opt(&s.driver),
        counter(&s.pause_rx_frames),
        counter(&s.pause_tx_frames),
        counter(&s.tx_timeouts),
        opt(&s.duplex),
        s.link
            .carrier
            .map_or("unknown", |c| if c { "up" } else { "down" }),
        opt(&s.link.carrier_changes),
        opt(&s.link.rx_packets),
        opt(&s.link.tx_packets),
        opt(&s.link.rx_bytes),
        opt(&s.link.tx_bytes),
        opt(&s.link.tx_dropped),
        opt(&s.link.tx_errors),
        opt(&s.qdisc),
        opt(&s.qdisc_drops),
        opt(&s.qdisc_backlog_bytes),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct T {
        #[command(flatten)]
        a: NicArgs,
    }

    #[test]
    fn parses_pause_off_with_default_wait() {
        let t = T::try_parse_from(["x", "pause-off", "eth0"]).unwrap();
        match t.a.command {
            NicCommand::PauseOff { iface, wait, json } => {
                assert_eq!((iface.as_str(), wait, json), ("eth0", 30.0, false))
            }
            _ => panic!("wrong subcommand"),
        }
        let t = T::try_parse_from(["x", "pause-off", "eth0", "--wait", "5", "--json"]).unwrap();
        assert!(
            matches!(t.a.command, NicCommand::PauseOff { wait, json: true, .. } if wait == 5.0)
        );
    }

    #[test]
    fn unsupported_counter_renders_as_unsupported_not_zero() {
        let s = NicStatus {
            interface: "eth0".into(),
            pause_rx_frames: CounterReading::unsupported(),
            ..Default::default()
        };
        let out = render_status(&s);
        assert!(out.contains("pause rx frames  unsupported"), "{out}");
        assert!(!out.contains("pause rx frames  0"), "{out}");
    }
}
