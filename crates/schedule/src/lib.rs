//! The show schedule: which entry plays at a given instant, and when that changes. Pure:
//! every question takes the time as an argument; nothing here reads a clock.
//!
//! An entry occurs on each local date its days and date ranges allow, from its start to
//! its end (an end at or before the start is on the next day). Among the entries whose
//! occurrence holds an instant, the earliest in the list wins. Clock times are local
//! times in the schedule's zone: 19:00 is 19:00 on both sides of a daylight-saving change.
//! A local time that does not exist (skipped by spring-forward) happens as far after the
//! change as it would have been after the hour before it (02:30 → 03:30 on a one-hour
//! change); a local time that exists twice (fall-back) happens at its first occurrence.
//! A sun event is its first moment in the local day (midnight to midnight); one that does
//! not happen on a date (polar day or night) means the entry does not occur on that date.
//!
//! - `sun`: sun times for a place and date.
//! - `spec`: parsing the config's words (`sunset+15`, `weekdays`, `mon`).

pub mod spec;
pub mod sun;

use jiff::Timestamp;
use jiff::civil::{Date, Time, Weekday};
use jiff::tz::TimeZone;

pub use sun::{Place, SunEvent};

/// A start or an end: a local clock time, or a sun event plus or minus minutes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum At {
    Clock(Time),
    Sun { event: SunEvent, offset_min: i32 },
}

/// The days of the week an entry may start on, one bit per day (Monday = bit 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Days(u8);

impl Days {
    pub const EVERY_DAY: Days = Days(0b111_1111);
    pub const WEEKDAYS: Days = Days(0b001_1111);
    pub const WEEKEND: Days = Days(0b110_0000);
    pub const NONE: Days = Days(0);

    pub fn with(self, day: Weekday) -> Days {
        Days(self.0 | 1 << (day.to_monday_zero_offset()))
    }

    pub fn contains(self, day: Weekday) -> bool {
        self.0 & (1 << day.to_monday_zero_offset()) != 0
    }
}

/// How an entry ends: `Graceful` lets the item playing finish, `Hard` cuts at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    Graceful,
    Hard,
}

impl Stop {
    pub fn name(self) -> &'static str {
        match self {
            Stop::Graceful => "graceful",
            Stop::Hard => "hard",
        }
    }
}

/// An inclusive range of local dates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DateRange {
    pub from: Date,
    pub to: Date,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// Shown by `pfx-player schedule` and in the journal.
    pub name: String,
    /// The playlist it plays, by name (the show config checks it exists).
    pub playlist: String,
    pub days: Days,
    pub start: At,
    pub end: At,
    /// Empty: every date. Otherwise the start date must be in one of them.
    pub dates: Vec<DateRange>,
    /// Loop the playlist until the end; false plays it once, then black until the end.
    pub repeat: bool,
    pub stop: Stop,
}

/// What the poles show outside every entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Idle {
    Black,
    Playlist(String),
}

#[derive(Debug, Clone)]
pub struct Schedule {
    pub tz: TimeZone,
    /// Needed only when an entry uses a sun event (the config checks that).
    pub place: Option<Place>,
    pub idle: Idle,
    pub entries: Vec<Entry>,
}

/// One occurrence of an entry: it holds `[start, end)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Occurrence {
    pub entry: usize,
    pub start: Timestamp,
    pub end: Timestamp,
}

/// A change of the winning entry (None: idle) at an instant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub at: Timestamp,
    pub from: Option<usize>,
    pub to: Option<usize>,
}

impl Schedule {
    /// The local date of an instant in the schedule's zone.
    pub fn local_date(&self, t: Timestamp) -> Date {
        self.tz.to_datetime(t).date()
    }

    /// The instant `at` resolves to on local date `date`, or None when a sun event does
    /// not happen then. Clock times go through the zone's compatible disambiguation
    /// (skipped times move forward by the gap, repeated times take the earlier instant).
    pub fn resolve(&self, at: At, date: Date) -> Option<Timestamp> {
        match at {
            At::Clock(time) => self.tz.to_timestamp(date.to_datetime(time)).ok(),
            At::Sun { event, offset_min } => {
                let midnight = |d: Date| self.tz.to_timestamp(d.to_datetime(Time::midnight())).ok();
                let (start, end) = (midnight(date)?, midnight(date.tomorrow().ok()?)?);
                let t = self.place?.event(start, end, event)?;
                t.checked_add(jiff::SignedDuration::from_mins(i64::from(offset_min)))
                    .ok()
            }
        }
    }

    /// The occurrence of entry `i` that starts on local date `date`, if it has one.
    pub fn occurrence(&self, i: usize, date: Date) -> Option<Occurrence> {
        let e = self.entries.get(i)?;
        if !e.days.contains(date.weekday()) {
            return None;
        }
        if !e.dates.is_empty() && !e.dates.iter().any(|r| r.from <= date && date <= r.to) {
            return None;
        }
        let start = self.resolve(e.start, date)?;
        let mut end = self.resolve(e.end, date)?;
        if end <= start {
            // 19:00–01:00, or sunset–dawn: the end is on the next day.
            end = self.resolve(e.end, date.tomorrow().ok()?)?;
        }
        (end > start).then_some(Occurrence {
            entry: i,
            start,
            end,
        })
    }

    /// Every occurrence that starts on a local date from `first` to `last`, inclusive.
    pub fn occurrences(&self, first: Date, last: Date) -> Vec<Occurrence> {
        let mut out = Vec::new();
        let mut d = first;
        while d <= last {
            for i in 0..self.entries.len() {
                out.extend(self.occurrence(i, d));
            }
            match d.tomorrow() {
                Ok(n) => d = n,
                Err(_) => break,
            }
        }
        out
    }

    /// The occurrences that can hold `t`: those starting the local day before through the
    /// day after (an occurrence lasts under two days; the day after covers a zone's date
    /// being behind UTC's).
    fn around(&self, t: Timestamp) -> Vec<Occurrence> {
        let d = self.local_date(t);
        let first = d.yesterday().unwrap_or(d);
        let last = d.tomorrow().unwrap_or(d);
        self.occurrences(first, last)
    }

    /// The winning occurrence at `t`: the earliest entry in the list whose occurrence
    /// holds `t`; None is idle.
    pub fn at(&self, t: Timestamp) -> Option<Occurrence> {
        self.around(t)
            .into_iter()
            .filter(|o| o.start <= t && t < o.end)
            .min_by_key(|o| (o.entry, o.start))
    }

    /// The next instant after `t` at which the winner may change, within three days.
    pub fn next_boundary(&self, t: Timestamp) -> Option<Timestamp> {
        let d = self.local_date(t);
        let first = d.yesterday().unwrap_or(d);
        let last = d.checked_add(jiff::Span::new().days(3)).unwrap_or(d);
        self.occurrences(first, last)
            .iter()
            .flat_map(|o| [o.start, o.end])
            .filter(|b| *b > t)
            .min()
    }

    /// The changes of the winner from `from` (excluded) to `until`, in order.
    pub fn changes(&self, from: Timestamp, until: Timestamp) -> Vec<Change> {
        let first = self
            .local_date(from)
            .yesterday()
            .unwrap_or(self.local_date(from));
        let mut bounds: Vec<Timestamp> = self
            .occurrences(first, self.local_date(until))
            .iter()
            .flat_map(|o| [o.start, o.end])
            .filter(|b| *b > from && *b <= until)
            .collect();
        bounds.sort();
        bounds.dedup();
        let mut out = Vec::new();
        let mut current = self.at(from).map(|o| o.entry);
        for b in bounds {
            let next = self.at(b).map(|o| o.entry);
            if next != current {
                out.push(Change {
                    at: b,
                    from: current,
                    to: next,
                });
                current = next;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests;
