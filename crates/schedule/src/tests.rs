//! The schedule on a fixed clock: daylight-saving dates in New York and Berlin (2026),
//! precedence, days, date ranges, entries past midnight, polar days.

use jiff::Timestamp;
use jiff::civil::{Date, date};
use jiff::tz::TimeZone;

use super::spec::parse_at;
use super::*;

fn entry(name: &str, start: &str, end: &str) -> Entry {
    Entry {
        name: name.into(),
        playlist: name.into(),
        days: Days::EVERY_DAY,
        start: parse_at(start).unwrap(),
        end: parse_at(end).unwrap(),
        dates: Vec::new(),
        repeat: true,
        stop: Stop::Hard,
    }
}

fn schedule(tz: &str, entries: Vec<Entry>) -> Schedule {
    Schedule {
        tz: TimeZone::get(tz).unwrap(),
        place: None,
        idle: Idle::Black,
        entries,
    }
}

fn utc(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn start_on(s: &Schedule, d: Date) -> Timestamp {
    s.occurrence(0, d).unwrap().start
}

#[test]
fn a_19_00_start_is_19_00_local_on_both_sides_of_new_york_spring_forward() {
    // DST starts 2026-03-08 02:00 EST → 03:00 EDT.
    let s = schedule("America/New_York", vec![entry("evening", "19:00", "23:00")]);
    assert_eq!(start_on(&s, date(2026, 3, 7)), utc("2026-03-08T00:00:00Z")); // EST, -5
    assert_eq!(start_on(&s, date(2026, 3, 8)), utc("2026-03-08T23:00:00Z")); // EDT, -4
    assert_eq!(start_on(&s, date(2026, 3, 9)), utc("2026-03-09T23:00:00Z"));
}

#[test]
fn a_19_00_start_is_19_00_local_on_both_sides_of_berlin_fall_back() {
    // DST ends 2026-10-25 03:00 CEST → 02:00 CET.
    let s = schedule("Europe/Berlin", vec![entry("evening", "19:00", "23:00")]);
    assert_eq!(
        start_on(&s, date(2026, 10, 24)),
        utc("2026-10-24T17:00:00Z")
    );
    assert_eq!(
        start_on(&s, date(2026, 10, 25)),
        utc("2026-10-25T18:00:00Z")
    );
}

#[test]
fn a_start_in_the_skipped_hour_moves_forward_by_the_gap() {
    // New York 2026-03-08 and Berlin 2026-03-29: 02:30 does not exist; it happens at 03:30.
    let s = schedule("America/New_York", vec![entry("night", "02:30", "04:00")]);
    let o = s.occurrence(0, date(2026, 3, 8)).unwrap();
    assert_eq!(o.start, utc("2026-03-08T07:30:00Z")); // 03:30 EDT
    assert_eq!(o.end, utc("2026-03-08T08:00:00Z")); // 04:00 EDT: 30 minutes long
    let s = schedule("Europe/Berlin", vec![entry("night", "02:30", "04:00")]);
    assert_eq!(start_on(&s, date(2026, 3, 29)), utc("2026-03-29T01:30:00Z")); // 03:30 CEST
    // The day before and after: plain 02:30.
    assert_eq!(start_on(&s, date(2026, 3, 28)), utc("2026-03-28T01:30:00Z")); // CET
    assert_eq!(start_on(&s, date(2026, 3, 30)), utc("2026-03-30T00:30:00Z")); // CEST
}

#[test]
fn a_start_in_the_repeated_hour_happens_once_at_its_first_occurrence() {
    // New York 2026-11-01: 01:00–02:00 happens twice (EDT, then EST).
    let s = schedule("America/New_York", vec![entry("night", "01:30", "03:00")]);
    let o = s.occurrence(0, date(2026, 11, 1)).unwrap();
    assert_eq!(o.start, utc("2026-11-01T05:30:00Z")); // 01:30 EDT, the first
    assert_eq!(o.end, utc("2026-11-01T08:00:00Z")); // 03:00 EST: 2 h 30 long
    // At the second 01:30 it is still the same occurrence, not a second start.
    let changes = s.changes(utc("2026-11-01T00:00:00Z"), utc("2026-11-01T12:00:00Z"));
    assert_eq!(changes.len(), 2, "{changes:?}");
    // Berlin 2026-10-25: 02:00–03:00 twice; 02:30 is the CEST one.
    let s = schedule("Europe/Berlin", vec![entry("night", "02:30", "05:00")]);
    assert_eq!(
        start_on(&s, date(2026, 10, 25)),
        utc("2026-10-25T00:30:00Z")
    );
}

#[test]
fn an_entry_across_midnight_over_fall_back_lasts_the_real_time() {
    // 00:00–03:00 local on the night the clocks go back lasts four hours.
    let s = schedule("America/New_York", vec![entry("late", "00:00", "03:00")]);
    let o = s.occurrence(0, date(2026, 11, 1)).unwrap();
    assert_eq!(o.end.duration_since(o.start).as_hours(), 4);
    // 22:00–01:00 ends on the next day.
    let s = schedule("Europe/Berlin", vec![entry("late", "22:00", "01:00")]);
    let o = s.occurrence(0, date(2026, 3, 28)).unwrap();
    assert_eq!(o.end, utc("2026-03-29T00:00:00Z"));
    assert_eq!(
        s.at(utc("2026-03-28T23:30:00Z")).map(|o| o.entry),
        Some(0),
        "00:30 on Sunday is still Saturday's occurrence"
    );
}

#[test]
fn the_earlier_entry_wins_and_the_later_one_resumes_around_it() {
    let s = schedule(
        "Europe/Berlin",
        vec![
            entry("special", "19:00", "20:00"),
            entry("base", "18:00", "22:00"),
        ],
    );
    let day = |h: &str| utc(&format!("2026-07-01T{h}Z")); // CEST: local = UTC + 2
    assert_eq!(s.at(day("15:59:59")), None);
    assert_eq!(s.at(day("16:00:00")).map(|o| o.entry), Some(1));
    assert_eq!(s.at(day("17:00:00")).map(|o| o.entry), Some(0));
    assert_eq!(s.at(day("18:00:00")).map(|o| o.entry), Some(1));
    assert_eq!(s.at(day("20:00:00")), None);
    let c = s.changes(day("12:00:00"), day("23:00:00"));
    let got: Vec<_> = c.iter().map(|c| (c.from, c.to)).collect();
    assert_eq!(
        got,
        [
            (None, Some(1)),
            (Some(1), Some(0)),
            (Some(0), Some(1)),
            (Some(1), None)
        ]
    );
    // The later entry listed first: it wins the whole evening, the short one never shows.
    let s = schedule(
        "Europe/Berlin",
        vec![
            entry("base", "18:00", "22:00"),
            entry("special", "19:00", "20:00"),
        ],
    );
    assert_eq!(s.at(day("17:30:00")).map(|o| o.entry), Some(0));
    assert_eq!(s.changes(day("12:00:00"), day("23:00:00")).len(), 2);
}

#[test]
fn date_ranges_and_days_choose_the_start_date() {
    let mut e = entry("xmas", "18:00", "23:00");
    e.dates = vec![DateRange {
        from: date(2026, 12, 1),
        to: date(2026, 12, 24),
    }];
    let mut weekend = entry("weekend", "12:00", "13:00");
    weekend.days = Days::WEEKEND;
    let s = schedule("America/New_York", vec![e, weekend]);
    assert!(s.occurrence(0, date(2026, 11, 30)).is_none());
    assert!(s.occurrence(0, date(2026, 12, 1)).is_some());
    assert!(s.occurrence(0, date(2026, 12, 24)).is_some(), "inclusive");
    assert!(s.occurrence(0, date(2026, 12, 25)).is_none());
    // 2026-12-05 is a Saturday, 2026-12-07 a Monday.
    assert!(s.occurrence(1, date(2026, 12, 5)).is_some());
    assert!(s.occurrence(1, date(2026, 12, 6)).is_some());
    assert!(s.occurrence(1, date(2026, 12, 7)).is_none());
}

#[test]
fn sun_entries_follow_the_sun_and_skip_a_polar_day() {
    let mut s = schedule("Europe/Oslo", vec![entry("dusk", "sunset+15", "23:00")]);
    s.place = Place::new(69.6492, 18.9553); // Tromsø
    // Midsummer: the sun does not set, so the entry does not occur.
    assert!(s.occurrence(0, date(2026, 6, 21)).is_none());
    // The spring equinox: sunset + 15 minutes, early evening local time.
    let o = s.occurrence(0, date(2026, 3, 20)).unwrap();
    let sunset = s
        .resolve(
            At::Sun {
                event: SunEvent::Sunset,
                offset_min: 0,
            },
            date(2026, 3, 20),
        )
        .unwrap();
    assert_eq!(o.start.duration_since(sunset).as_mins(), 15);
    let local = s.tz.to_datetime(o.start);
    assert!((17..20).contains(&local.hour()), "{local}");
}

#[test]
fn next_boundary_is_the_next_start_or_end() {
    let s = schedule("America/New_York", vec![entry("evening", "19:00", "23:00")]);
    assert_eq!(
        s.next_boundary(utc("2026-03-08T12:00:00Z")),
        Some(utc("2026-03-08T23:00:00Z"))
    );
    assert_eq!(
        s.next_boundary(utc("2026-03-08T23:00:00Z")),
        Some(utc("2026-03-09T03:00:00Z"))
    );
}
