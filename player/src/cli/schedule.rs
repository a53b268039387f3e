//! `pfx-player schedule`: the upcoming starts and stops of a show's schedule, and which
//! entry wins at each, in the schedule's time zone.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use jiff::Timestamp;

use crate::config::show::ShowConfig;
use crate::schedule::{Idle, Schedule, spec};

#[derive(clap::Args, Debug)]
pub struct ScheduleArgs {
    /// Show config (YAML) with a `schedule:` section. See docs/show-config.md.
    #[arg(long, short, value_name = "FILE", default_value = "/etc/pfx/show.yaml")]
    pub config: PathBuf,
    /// First day to list, YYYY-MM-DD in the schedule's zone. Default: today there.
    #[arg(long, value_name = "DATE")]
    pub from: Option<String>,
    /// How many days to list.
    #[arg(long, default_value_t = 7, value_name = "N")]
    pub days: u16,
    /// One JSON document instead of text.
    #[arg(long)]
    pub json: bool,
}

fn name(s: &Schedule, entry: Option<usize>) -> String {
    match entry.and_then(|i| s.entries.get(i)) {
        Some(e) => e.name.clone(),
        None => match &s.idle {
            Idle::Black => "idle (black)".into(),
            Idle::Playlist(p) => format!("idle (playlist {p})"),
        },
    }
}

fn entry_json(s: &Schedule, entry: Option<usize>) -> serde_json::Value {
    match entry.and_then(|i| s.entries.get(i)) {
        Some(e) => serde_json::json!({
            "entry": e.name,
            "index": entry,
            "playlist": e.playlist,
            "repeat": e.repeat,
            "stop": e.stop.name(),
        }),
        None => serde_json::json!({
            "entry": null,
            "idle": match &s.idle { Idle::Black => "black".to_string(), Idle::Playlist(p) => p.clone() },
        }),
    }
}

pub fn run(args: ScheduleArgs) -> anyhow::Result<ExitCode> {
    let show = ShowConfig::load(&args.config)?;
    let Some(s) = show.schedule.as_ref() else {
        println!(
            "{}: no `schedule:`; `content.playlist` plays from start, always",
            args.config.display()
        );
        return Ok(ExitCode::SUCCESS);
    };
    if args.days == 0 || args.days > 366 {
        anyhow::bail!("--days {}: give 1 to 366", args.days);
    }
    let first = match &args.from {
        Some(d) => spec::parse_date(d).map_err(|m| anyhow::anyhow!("--from: {m}"))?,
        None => s.local_date(Timestamp::now()),
    };
    let last = first
        .checked_add(jiff::Span::new().days(i64::from(args.days)))
        .context("--days reaches past the calendar")?;
    let from =
        s.tz.to_timestamp(first.to_datetime(jiff::civil::Time::midnight()))
            .context("--from: no midnight in that zone")?;
    let until =
        s.tz.to_timestamp(last.to_datetime(jiff::civil::Time::midnight()))
            .context("--days: no midnight in that zone")?;
    // The first instant counts as a change from nothing, so what plays at the start shows.
    let at_start = s.at(from).map(|o| o.entry);
    let changes = s.changes(from, until);
    let local = |t: Timestamp| t.to_zoned_datetime(s.tz.clone());
    if args.json {
        let doc = serde_json::json!({
            "config": args.config.display().to_string(),
            "timezone": s.tz.iana_name(),
            "from": first.to_string(),
            "days": args.days,
            "at_start": entry_json(s, at_start),
            "changes": changes.iter().map(|c| serde_json::json!({
                "at": local(c.at).strftime("%Y-%m-%dT%H:%M:%S%:z").to_string(),
                "unix": c.at.as_second(),
                "from": entry_json(s, c.from),
                "to": entry_json(s, c.to),
                "graceful": c.from.and_then(|i| s.entries.get(i)).is_some_and(|e| e.stop == crate::schedule::Stop::Graceful),
            })).collect::<Vec<_>>(),
        });
        println!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "schedule of {} in {}, {} day(s) from {first}",
        args.config.display(),
        s.tz.iana_name().unwrap_or("?"),
        args.days
    );
    println!("{first} 00:00  {} plays", name(s, at_start));
    if changes.is_empty() {
        println!("(no starts or stops in these days)");
    }
    for c in &changes {
        let what = match (c.from, c.to) {
            (_, Some(i)) => {
                let e = &s.entries[i];
                format!(
                    "start {} (playlist {}, {}, stop {}){}",
                    e.name,
                    e.playlist,
                    if e.repeat { "repeat" } else { "once" },
                    e.stop.name(),
                    c.from
                        .map(|f| format!(", over {}", name(s, Some(f))))
                        .unwrap_or_default()
                )
            }
            (Some(f), None) => format!("stop {} → {}", name(s, Some(f)), name(s, None)),
            (None, None) => continue,
        };
        println!(
            "{}  {what}",
            local(c.at).strftime("%Y-%m-%d %a %H:%M:%S %Z")
        );
    }
    Ok(ExitCode::SUCCESS)
}
