//! Sun times for one place and one local date, from the `sunrise` crate (the sunrise
//! equation; dawn and dusk are civil twilight, the sun 6° below the horizon). Pure.

use jiff::Timestamp;
use jiff::civil::Date;

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

impl Place {
    /// A place, or None when the coordinates are out of range.
    pub fn new(latitude: f64, longitude: f64) -> Option<Place> {
        sunrise::Coordinates::new(latitude, longitude)?;
        Some(Place {
            latitude,
            longitude,
        })
    }

    /// When `event` happens on the solar day around local noon of `date` at this place;
    /// None when it does not happen that day (polar day or night: the sun never sets, or
    /// never rises, or never gets 6° below the horizon).
    pub fn event(&self, date: Date, event: SunEvent) -> Option<Timestamp> {
        let coord = sunrise::Coordinates::new(self.latitude, self.longitude)?;
        let day = chrono::NaiveDate::from_ymd_opt(
            i32::from(date.year()),
            u32::try_from(date.month()).ok()?,
            u32::try_from(date.day()).ok()?,
        )?;
        use sunrise::{DawnType, SolarEvent};
        let ev = match event {
            SunEvent::Dawn => SolarEvent::Dawn(DawnType::Civil),
            SunEvent::Sunrise => SolarEvent::Sunrise,
            SunEvent::Sunset => SolarEvent::Sunset,
            SunEvent::Dusk => SolarEvent::Dusk(DawnType::Civil),
        };
        let t = sunrise::SolarDay::new(coord, day).event_time(ev)?;
        Timestamp::from_second(t.timestamp()).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jiff::civil::date;
    use jiff::tz::TimeZone;

    fn local(place: Place, d: Date, ev: SunEvent, tz: &str) -> String {
        let tz = TimeZone::get(tz).unwrap();
        let t = place.event(d, ev).unwrap();
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
        assert_eq!(tromso.event(date(2026, 6, 21), SunEvent::Sunset), None);
        assert_eq!(tromso.event(date(2026, 6, 21), SunEvent::Dusk), None);
        assert_eq!(tromso.event(date(2026, 12, 21), SunEvent::Sunrise), None);
        // The polar night still has civil twilight at noon in Tromsø.
        assert!(tromso.event(date(2026, 12, 21), SunEvent::Dawn).is_some());
    }

    #[test]
    fn out_of_range_coordinates_are_refused() {
        assert!(Place::new(91.0, 0.0).is_none());
        assert!(Place::new(0.0, -181.0).is_none());
    }
}
