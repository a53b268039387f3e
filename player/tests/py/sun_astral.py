#!/usr/bin/env python3
"""Sun times from Python `astral` (the NOAA solar equations), an implementation pfx did
not write, for the schedule's cross-check (player/tests/sun_astral.rs).

Reads JSON from stdin: [[latitude, longitude, "Zone/Name", "YYYY-MM-DD"], ...].
Prints JSON: one object per query, {"dawn"|"sunrise"|"sunset"|"dusk": unix seconds or
null when the event does not happen that local day}. Dawn and dusk are civil (6°).
Exits 3 with "skipped: ..." on stderr when astral is not installed.
"""
import datetime
import json
import sys
import zoneinfo

try:
    from astral import Observer
    from astral import sun
except ImportError:
    print("skipped: Python astral is not installed (pip install astral; scripts/deps/schedule.pip)",
          file=sys.stderr)
    sys.exit(3)


def event(fn, obs, day, tz):
    try:
        return int(fn(obs, day, tzinfo=tz).timestamp())
    except ValueError:  # the sun never reaches that elevation on this day
        return None


def main():
    out = []
    for lat, lon, zone, day in json.load(sys.stdin):
        obs = Observer(latitude=lat, longitude=lon)
        tz = zoneinfo.ZoneInfo(zone)
        d = datetime.date.fromisoformat(day)
        out.append({
            "dawn": event(lambda o, d, tzinfo: sun.dawn(o, d, depression=6, tzinfo=tzinfo), obs, d, tz),
            "sunrise": event(sun.sunrise, obs, d, tz),
            "sunset": event(sun.sunset, obs, d, tz),
            "dusk": event(lambda o, d, tzinfo: sun.dusk(o, d, depression=6, tzinfo=tzinfo), obs, d, tz),
        })
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
