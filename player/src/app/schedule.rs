//! Playing by the schedule: on the supervisor thread, once a second and at each start or
//! end, ask the schedule which entry wins now; when that changes, build the engine for it
//! (off the render thread) and hand it over. An entry ending with `stop: graceful` lets
//! the item playing finish (`Control::After`); `hard`, and every start from idle, switch
//! at the next frame (`Control::Reload`).

use anyhow::Context;
use jiff::Timestamp;

use super::RunOptions;
use super::build::build_engine_for;
use crate::config::show::Show;
use crate::engine::frame_loop::Engine;
use crate::schedule::{Idle, Schedule, Stop};

/// How often the schedule is asked even when no start or end is near (a wall-clock step
/// by NTP is noticed within this).
const CHECK_EVERY_US: i64 = 1_000_000;
/// After an engine for a switch fails to build, try again this much later.
const RETRY_US: i64 = 10_000_000;

/// An engine to hand over, and how.
pub struct Switch {
    pub engine: Engine,
    /// Wait for the item playing now to end.
    pub graceful: bool,
}

/// Follows one show's schedule. `current` is the entry playing (None: idle).
pub struct Follower {
    pub current: Option<usize>,
    next_check_us: i64,
}

/// The winner at `now_us` (Unix microseconds).
pub fn wanted(schedule: &Schedule, now_us: i64) -> Option<usize> {
    Timestamp::from_microsecond(now_us)
        .ok()
        .and_then(|t| schedule.at(t))
        .map(|o| o.entry)
}

/// Whether the change away from `from` waits for the item to end: only an entry that
/// ends with `stop: graceful` does; idle gives way at once.
pub fn graceful(schedule: &Schedule, from: Option<usize>) -> bool {
    from.and_then(|i| schedule.entries.get(i))
        .is_some_and(|e| e.stop == Stop::Graceful)
}

/// In words, for the journal.
pub fn describe(schedule: &Schedule, entry: Option<usize>) -> String {
    match entry.and_then(|i| schedule.entries.get(i)) {
        Some(e) => format!("entry `{}` (playlist `{}`)", e.name, e.playlist),
        None => match &schedule.idle {
            Idle::Black => "idle (black)".into(),
            Idle::Playlist(p) => format!("idle (playlist `{p}`)"),
        },
    }
}

/// The engine for `entry` of `show`'s schedule: its playlist, looping when it repeats;
/// idle is black (no items) or the idle playlist, looping.
pub fn engine_for(show: &Show, entry: Option<usize>, opts: &RunOptions) -> anyhow::Result<Engine> {
    let schedule = show.schedule.as_ref().context("the show has no schedule")?;
    let (name, looped) = match entry.and_then(|i| schedule.entries.get(i)) {
        Some(e) => (Some(e.playlist.as_str()), e.repeat),
        None => match &schedule.idle {
            Idle::Black => (None, true),
            Idle::Playlist(p) => (Some(p.as_str()), true),
        },
    };
    let items = match name {
        None => &[][..],
        Some(n) => show
            .playlists
            .get(n)
            .with_context(|| format!("no playlist named `{n}`"))?
            .as_slice(),
    };
    build_engine_for(show, items, looped, opts)
}

impl Follower {
    /// Starts following `show`'s schedule at `now_us`: the follower and the engine to
    /// start with.
    pub fn start(
        show: &Show,
        now_us: i64,
        opts: &RunOptions,
    ) -> anyhow::Result<(Follower, Engine)> {
        let schedule = show.schedule.as_ref().context("the show has no schedule")?;
        let current = wanted(schedule, now_us);
        let engine = engine_for(show, current, opts)?;
        tracing::info!("schedule: {} plays now", describe(schedule, current));
        let mut f = Follower {
            current,
            next_check_us: now_us,
        };
        f.plan_next(schedule, now_us);
        Ok((f, engine))
    }

    fn plan_next(&mut self, schedule: &Schedule, now_us: i64) {
        let boundary = Timestamp::from_microsecond(now_us)
            .ok()
            .and_then(|t| schedule.next_boundary(t))
            .map(|b| b.as_microsecond());
        self.next_check_us = (now_us + CHECK_EVERY_US).min(boundary.unwrap_or(i64::MAX));
    }

    /// Called every supervisor tick: a switch when the winner changed.
    pub fn poll(&mut self, show: &Show, now_us: i64, opts: &RunOptions) -> Option<Switch> {
        if now_us < self.next_check_us {
            return None;
        }
        let schedule = show.schedule.as_ref()?;
        self.plan_next(schedule, now_us);
        let want = wanted(schedule, now_us);
        if want == self.current {
            return None;
        }
        let graceful = graceful(schedule, self.current);
        match engine_for(show, want, opts) {
            Ok(engine) => {
                tracing::info!(
                    "schedule: {} ends{}, {} plays",
                    describe(schedule, self.current),
                    if graceful {
                        " after the item playing"
                    } else {
                        ""
                    },
                    describe(schedule, want)
                );
                self.current = want;
                Some(Switch { engine, graceful })
            }
            Err(e) => {
                tracing::error!(
                    "schedule: cannot open {}, {} keeps playing; trying again in 10 s: {e:#}",
                    describe(schedule, want),
                    describe(schedule, self.current)
                );
                self.next_check_us = now_us + RETRY_US;
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::config::show::ShowConfig;

    fn scheduled(stop: &str) -> Show {
        let text = format!(
            "interface: lo\noutputs:\n  - name: a\n    profile: bench-ddp\n    destination: 127.0.0.1:9\nplaylists:\n  early:\n    - pattern: id\n  late:\n    - pattern: rainbow\nschedule:\n  timezone: UTC\n  entries:\n    - playlist: late\n      start: \"19:30\"\n      end: \"21:00\"\n      stop: {stop}\n    - playlist: early\n      start: \"19:00\"\n      end: \"20:00\"\n      repeat: false\n"
        );
        ShowConfig::from_str(&text, Path::new("s.yaml")).unwrap()
    }

    fn opts() -> RunOptions {
        RunOptions {
            http: None,
            blocking_send: false,
            send_every_frame: false,
            duration: None,
            send_buffer: None,
            mdns: false,
            summary: None,
            config: None,
            store: None,
            show_state: Default::default(),
            control_socket: None,
            control_state: Default::default(),
        }
    }

    /// Unix microseconds of 2026-07-01 at `h:m` UTC.
    fn at(h: i64, m: i64) -> i64 {
        (1_782_864_000 + h * 3600 + m * 60) * 1_000_000
    }

    #[test]
    fn the_follower_switches_at_each_change_and_the_outgoing_entry_decides_how() {
        let graceful_show = scheduled("graceful");
        let show = &graceful_show;
        let opts = opts();
        let (mut f, engine) = Follower::start(show, at(18, 59), &opts).unwrap();
        assert_eq!((f.current, engine.items.len()), (None, 0), "idle is black");
        // 19:00: `early` starts, from idle: at once; it plays once.
        let s = f.poll(show, at(19, 0), &opts).expect("a switch at 19:00");
        assert!(!s.graceful);
        assert!(!s.engine.looped);
        assert_eq!(f.current, Some(1));
        assert!(f.poll(show, at(19, 0) + 500_000, &opts).is_none());
        // 19:30: `late`, listed first, takes over; `early` ends gracefully by default.
        let s = f.poll(show, at(19, 30), &opts).expect("a switch at 19:30");
        assert!(s.graceful && s.engine.looped);
        assert_eq!(f.current, Some(0));
        // 20:00 changes nothing: `late` still wins. 21:00: idle, `late` stops gracefully.
        assert!(f.poll(show, at(20, 0), &opts).is_none());
        let s = f.poll(show, at(21, 0), &opts).expect("a switch at 21:00");
        assert!(s.graceful);
        assert_eq!((f.current, s.engine.items.len()), (None, 0));
        // With `stop: hard` the same end switches at once.
        let hard = scheduled("hard");
        let (mut f, _) = Follower::start(&hard, at(20, 59), &opts).unwrap();
        let s = f.poll(&hard, at(21, 0), &opts).expect("a switch at 21:00");
        assert!(!s.graceful);
    }
}
