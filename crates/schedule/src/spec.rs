//! The schedule's words in a show config, parsed: times (`19:00`, `19:00:30`, `sunset`,
//! `sunset+15`, `dawn-30`), days (`everyday`, `weekdays`, `weekend`, `mon`..`sun`) and
//! dates (`2026-12-24`). Each error says what was expected.

use jiff::civil::{Date, Time, Weekday};

use super::{At, Days, SunEvent};

/// `HH:MM`, `HH:MM:SS`, or a sun event with an optional `+N`/`-N` minutes.
pub fn parse_at(s: &str) -> Result<At, String> {
    let s = s.trim();
    for event in [
        SunEvent::Dawn,
        SunEvent::Sunrise,
        SunEvent::Sunset,
        SunEvent::Dusk,
    ] {
        if let Some(rest) = s.strip_prefix(event.name()) {
            let rest: String = rest.chars().filter(|c| !c.is_whitespace()).collect();
            let offset_min = match rest.as_str() {
                "" => 0,
                r if r.starts_with('+') || r.starts_with('-') => {
                    let n: i32 = r[1..].parse().map_err(|_| {
                        format!(
                            "`{s}`: the offset after `{}` is whole minutes, e.g. `{}+15`",
                            event.name(),
                            event.name()
                        )
                    })?;
                    if n > 720 {
                        return Err(format!("`{s}`: an offset of more than 720 minutes"));
                    }
                    if r.starts_with('-') { -n } else { n }
                }
                _ => {
                    return Err(format!(
                        "`{s}`: after `{}` give `+N` or `-N` minutes",
                        event.name()
                    ));
                }
            };
            return Ok(At::Sun { event, offset_min });
        }
    }
    let parts: Vec<&str> = s.split(':').collect();
    let num = |p: &str, max: i8| -> Option<i8> {
        if p.is_empty() || p.len() > 2 || !p.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        p.parse::<i8>().ok().filter(|v| *v <= max)
    };
    let time = match parts.as_slice() {
        [h, m] => num(h, 23).zip(num(m, 59)).map(|(h, m)| (h, m, 0)),
        [h, m, sec] => num(h, 23)
            .zip(num(m, 59))
            .zip(num(sec, 59))
            .map(|((h, m), sec)| (h, m, sec)),
        _ => None,
    };
    match time {
        Some((h, m, sec)) => Time::new(h, m, sec, 0)
            .map(At::Clock)
            .map_err(|e| format!("`{s}`: {e}")),
        None => Err(format!(
            "`{s}` is not a time: give HH:MM (24-hour, quoted in YAML: \"19:00\"), HH:MM:SS, or sunrise, sunset, dawn or dusk with an optional +N/-N minutes"
        )),
    }
}

fn weekday(s: &str) -> Option<Weekday> {
    Some(match s.to_ascii_lowercase().as_str() {
        "mon" | "monday" => Weekday::Monday,
        "tue" | "tuesday" => Weekday::Tuesday,
        "wed" | "wednesday" => Weekday::Wednesday,
        "thu" | "thursday" => Weekday::Thursday,
        "fri" | "friday" => Weekday::Friday,
        "sat" | "saturday" => Weekday::Saturday,
        "sun" | "sunday" => Weekday::Sunday,
        _ => return None,
    })
}

/// One word (`everyday`, `weekdays`, `weekend`, or a day) or several days.
pub fn parse_days(words: &[String]) -> Result<Days, String> {
    if words.is_empty() {
        return Err("empty; give `everyday`, `weekdays`, `weekend` or day names".into());
    }
    let mut days = Days::NONE;
    for w in words {
        days = match w.to_ascii_lowercase().as_str() {
            "everyday" | "every day" | "daily" => Days::EVERY_DAY,
            "weekdays" => Days(days.0 | Days::WEEKDAYS.0),
            "weekend" => Days(days.0 | Days::WEEKEND.0),
            _ => match weekday(w) {
                Some(d) => days.with(d),
                None => {
                    return Err(format!(
                        "`{w}` is not `everyday`, `weekdays`, `weekend` or a day (mon, tue, wed, thu, fri, sat, sun)"
                    ));
                }
            },
        };
    }
    Ok(days)
}

/// `YYYY-MM-DD`.
pub fn parse_date(s: &str) -> Result<Date, String> {
    s.trim()
        .parse::<Date>()
        .map_err(|_| format!("`{s}` is not a date: give YYYY-MM-DD, e.g. 2026-12-24"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_and_sun_events_parse() {
        assert_eq!(
            parse_at("19:00"),
            Ok(At::Clock(Time::new(19, 0, 0, 0).unwrap()))
        );
        assert_eq!(
            parse_at("02:30:15"),
            Ok(At::Clock(Time::new(2, 30, 15, 0).unwrap()))
        );
        assert_eq!(
            parse_at("sunset+15"),
            Ok(At::Sun {
                event: SunEvent::Sunset,
                offset_min: 15
            })
        );
        assert_eq!(
            parse_at("dawn - 30"),
            Ok(At::Sun {
                event: SunEvent::Dawn,
                offset_min: -30
            })
        );
        assert_eq!(
            parse_at("dusk"),
            Ok(At::Sun {
                event: SunEvent::Dusk,
                offset_min: 0
            })
        );
        for bad in ["24:00", "7pm", "19:60", "sunset+", "sunset15", "1140", ""] {
            assert!(parse_at(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn days_parse() {
        let w = |v: &[&str]| parse_days(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(w(&["everyday"]), Ok(Days::EVERY_DAY));
        assert_eq!(w(&["weekend"]), Ok(Days::WEEKEND));
        let d = w(&["mon", "Friday"]).unwrap();
        assert!(d.contains(Weekday::Monday) && d.contains(Weekday::Friday));
        assert!(!d.contains(Weekday::Tuesday));
        assert!(w(&["someday"]).unwrap_err().contains("`someday`"));
        assert!(w(&[]).is_err());
    }
}
