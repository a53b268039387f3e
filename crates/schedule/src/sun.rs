//! Sun times for one place and one local day, from the `solar-positioning` crate (NREL's
//! SPA, with a numerical search for the moment the sun crosses a given elevation). Dawn
//! and dusk are civil twilight, the sun's centre 6° below the horizon; sunrise and sunset
//! allow for refraction and the sun's radius. Pure: the day is passed in.

use jiff::Timestamp;
use solar_positioning::{Horizon, Location, SolarEvents, delta_t};

/// Where the unit stands, in degrees (north and east positive).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Place {
    pub latitude: f64,
    pub longitude: f64,
}

/// The four sun events a schedule can start or end on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SunEvent {
    /// Civil dawn: the sun 6° below the horizon, rising.
    Dawn,
    Sunrise,
    Sunset,
    /// Civil dusk: the sun 6° below the horizon, setting.
    Dusk,
}

impl SunEvent {
    pub fn name(self) -> &'static str {
        match self {
            SunEvent::Dawn => "dawn",
            SunEvent::Sunrise => "sunrise",
            SunEvent::Sunset => "sunset",
            SunEvent::Dusk => "dusk",
        }
    }
}

/// The Julian date (UT) of the Unix epoch.
const UNIX_EPOCH_JD: f64 = 2_440_587.5;

fn julian(t: Timestamp) -> f64 {
    t.as_second() as f64 / 86_400.0 + UNIX_EPOCH_JD
}

impl Place {
    /// A place, or None when the coordinates are out of range.
    pub fn new(latitude: f64, longitude: f64) -> Option<Place> {
        let ok = (-90.0..=90.0).contains(&latitude) && (-180.0..=180.0).contains(&longitude);
        ok.then_some(Place {
            latitude,
            longitude,
        })
    }

    /// The first moment `event` happens from `day_start` (included) to `day_end` (the
    /// local day, midnight to midnight); None when it does not happen in that day (polar
    /// day or night: the sun never sets, never rises, or never gets 6° below the horizon).
    pub fn event(
        &self,
        day_start: Timestamp,
        day_end: Timestamp,
        event: SunEvent,
    ) -> Option<Timestamp> {
        let location = Location {
            latitude: self.latitude,
            longitude: self.longitude,
        };
        let (start, end) = (julian(day_start), julian(day_end));
        let year = 2000.0 + (start - 2_451_545.0) / 365.25;
        let dt = delta_t::estimate(year).ok()?;
        let events = SolarEvents::new();
        // The search excludes its start; a hair earlier includes midnight itself.
        let from = start - 1e-7;
        let found = match event {
            SunEvent::Dawn => {
                events.next_rise_from_julian(from, end, location, dt, Horizon::CivilTwilight)
            }
            SunEvent::Sunrise => {
                events.next_rise_from_julian(from, end, location, dt, Horizon::SunriseSunset)
            }
            SunEvent::Sunset => {
                events.next_set_from_julian(from, end, location, dt, Horizon::SunriseSunset)
            }
            SunEvent::Dusk => {
                events.next_set_from_julian(from, end, location, dt, Horizon::CivilTwilight)
            }
        };
        let jd = found.ok()??;
        let unix = ((jd - UNIX_EPOCH_JD) * 86_400.0).round();
        Timestamp::from_second(unix as i64).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jiff::civil::{Date, date};
    use jiff::tz::TimeZone;

    /// Midnight to midnight of `d` in `tz`.
    fn day(d: Date, tz: &TimeZone) -> (Timestamp, Timestamp) {
        let m = |d: Date| {
            tz.to_timestamp(d.to_datetime(jiff::civil::Time::midnight()))
                .unwrap()
        };
        (m(d), m(d.tomorrow().unwrap()))
    }

    fn at(place: Place, d: Date, ev: SunEvent, tz: &str) -> Option<Timestamp> {
        let tz = TimeZone::get(tz).unwrap();
        let (a, b) = day(d, &tz);
        place.event(a, b, ev)
    }

    fn local(place: Place, d: Date, ev: SunEvent, tz: &str) -> String {
        let t = at(place, d, ev, tz).unwrap();
        let tz = TimeZone::get(tz).unwrap();
        tz.to_datetime(t).time().strftime("%H:%M").to_string()
    }

    /// Published almanac values (rounded to the minute, as the almanacs print them); the
    /// equation must be within 2 minutes of each. The independent comparison across three
    /// places and four dates is `tests/py/sun_times.py` (Python `astral`).
    #[test]
    fn sun_times_match_published_almanac_values_within_two_minutes() {
        let within = |got: &str, want: &str| {
            let m = |s: &str| {
                let (h, m) = s.split_once(':').unwrap();
                h.parse::<i32>().unwrap() * 60 + m.parse::<i32>().unwrap()
            };
            (m(got) - m(want)).abs() <= 2
        };
        // New York City (Central Park), 2026-06-21: sunrise 05:25, sunset 20:31 EDT.
        let nyc = Place::new(40.7829, -73.9654).unwrap();
        let d = date(2026, 6, 21);
        let got = local(nyc, d, SunEvent::Sunrise, "America/New_York");
        assert!(within(&got, "05:25"), "NYC sunrise {got}");
        let got = local(nyc, d, SunEvent::Sunset, "America/New_York");
        assert!(within(&got, "20:31"), "NYC sunset {got}");
        // Berlin, 2026-12-21: sunrise 08:15, sunset 15:54 CET.
        let berlin = Place::new(52.52, 13.405).unwrap();
        let d = date(2026, 12, 21);
        let got = local(berlin, d, SunEvent::Sunrise, "Europe/Berlin");
        assert!(within(&got, "08:15"), "Berlin sunrise {got}");
        let got = local(berlin, d, SunEvent::Sunset, "Europe/Berlin");
        assert!(within(&got, "15:54"), "Berlin sunset {got}");
    }

    #[test]
    fn polar_day_and_night_have_no_sunset_or_sunrise() {
        let tromso = Place::new(69.6492, 18.9553).unwrap();
        let oslo = "Europe/Oslo";
        assert_eq!(at(tromso, date(2026, 6, 21), SunEvent::Sunset, oslo), None);
        assert_eq!(at(tromso, date(2026, 6, 21), SunEvent::Dusk, oslo), None);
        assert_eq!(
            at(tromso, date(2026, 12, 21), SunEvent::Sunrise, oslo),
            None
        );
        // The polar night still has civil twilight around noon in Tromsø.
        assert!(at(tromso, date(2026, 12, 21), SunEvent::Dawn, oslo).is_some());
    }

    #[test]
    fn out_of_range_coordinates_are_refused() {
        assert!(Place::new(91.0, 0.0).is_none());
        assert!(Place::new(0.0, -181.0).is_none());
    }
}
