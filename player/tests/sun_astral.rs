//! The schedule's sun times against Python `astral` (NOAA's equations, not the sunrise
//! equation the player uses): three places, one far north, four dates, four events, each
//! within 2 minutes, and agreement on which events do not happen (polar day and night).
//! Skips loudly when astral is not installed (`scripts/deps/schedule.pip`).

use std::io::Write;
use std::process::{Command, Stdio};

use jiff::civil::date;
use pfx_player::schedule::{Place, SunEvent};

const PLACES: [(&str, f64, f64, &str); 3] = [
    ("Tromsø", 69.6492, 18.9553, "Europe/Oslo"),
    ("New York", 40.7128, -74.0060, "America/New_York"),
    ("Sydney", -33.8688, 151.2093, "Australia/Sydney"),
];

#[test]
fn sun_times_agree_with_astral_within_two_minutes() {
    let dates = [
        date(2026, 3, 20),
        date(2026, 6, 21),
        date(2026, 9, 23),
        date(2026, 12, 21),
    ];
    let mut queries = Vec::new();
    for (_, lat, lon, tz) in PLACES {
        for d in dates {
            queries.push(serde_json::json!([lat, lon, tz, d.to_string()]));
        }
    }
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/py/sun_astral.py");
    let mut child = match Command::new("python3")
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!("skipped: cannot run python3: {e}");
            return;
        }
    };
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(serde_json::to_string(&queries).expect("json").as_bytes())
        .expect("write queries");
    let out = child.wait_with_output().expect("python3");
    if out.status.code() == Some(3) {
        eprintln!("{}", String::from_utf8_lossy(&out.stderr).trim());
        return;
    }
    assert!(
        out.status.success(),
        "sun_astral.py: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let astral: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).expect("json");
    let mut compared = 0;
    let mut worst = 0i64;
    let mut k = 0;
    for (name, lat, lon, tz) in PLACES {
        let place = Place::new(lat, lon).expect("place");
        let zone = jiff::tz::TimeZone::get(tz).expect("zone");
        for d in dates {
            let want = &astral[k];
            k += 1;
            for ev in [
                SunEvent::Dawn,
                SunEvent::Sunrise,
                SunEvent::Sunset,
                SunEvent::Dusk,
            ] {
                let midnight = |d: jiff::civil::Date| {
                    zone.to_timestamp(d.to_datetime(jiff::civil::Time::midnight()))
                        .expect("midnight")
                };
                let ours = place
                    .event(midnight(d), midnight(d.tomorrow().expect("date")), ev)
                    .map(|t| t.as_second());
                let theirs = want[ev.name()].as_i64();
                match (ours, theirs) {
                    (Some(a), Some(b)) => {
                        let diff = (a - b).abs();
                        worst = worst.max(diff);
                        assert!(
                            diff <= 120,
                            "{name} {d} {}: ours {a}, astral {b}: {diff} s apart",
                            ev.name()
                        );
                        compared += 1;
                    }
                    (None, None) => {}
                    _ => panic!(
                        "{name} {d} {}: ours {ours:?}, astral {theirs:?}: one says it does not happen",
                        ev.name()
                    ),
                }
            }
        }
    }
    // Tromsø has no sunset at midsummer and no sunrise at midwinter: fewer than 48.
    assert!(compared >= 40, "only {compared} events compared");
    eprintln!("sun times: {compared} events within {worst} s of astral");
}
