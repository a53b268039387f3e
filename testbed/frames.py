"""What a large output's receiver saw, phase by phase: complete frames per second, each
universe's frame rate, frame age, and how soon frames were whole again after a rate limit was
lifted. Pure: records (frame_rx.py) and times in, numbers out.

Definitions (docs/testbed.md, "Rate limit"):
- A frame is the sequence frame a datagram's mark names (marked_show.py); marks wrap every
  `seq_frames` frames, so they are unwrapped against the frame most recently seen.
- A frame is *complete* when every universe of the output arrived with its mark; its completion
  time is the arrival of the last of them. A frame with some universes but not all is *torn*.
- Frame f was due at `base + f × period`; `base` is the earliest any datagram arrived relative
  to that grid in the first phase (the sender's tick plus the shortest path), so a frame's *age*
  is how long after its own tick it was complete.
- A universe's fps in a phase: distinct frames of it that arrived in the phase, per second.
"""

from __future__ import annotations

import math


def percentile(values: list[float], p: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    return s[max(1, math.ceil(p / 100.0 * len(s))) - 1]


def unwrap(marks, seq_frames: int) -> list[int]:
    out = []
    cur = None
    for f in marks:
        if cur is None:
            u = f
        else:
            u = f + seq_frames * round((cur - f) / seq_frames)
        out.append(u)
        if cur is None or u > cur:
            cur = u
    return out


def analyse(records, universes: int, first_universe: int, period_us: float, seq_frames: int,
            phases: dict[str, tuple[int, int]], lift_us: int | None = None) -> dict:
    """`records`: (rx_us, universe, value, kind) arrays; `phases`: name → (start_us, end_us),
    the first of them the baseline that fixes `base`."""
    rx, uni, val, kind = records
    data = [i for i in range(len(rx)) if kind[i] == 0]
    frames = unwrap([val[i] for i in data], seq_frames)
    first_phase = next(iter(phases.values()))
    base = None
    for i, f in zip(data, frames):
        if first_phase[0] <= rx[i] < first_phase[1]:
            b = rx[i] - f * period_us
            if base is None or b < base:
                base = b
    if base is None:
        return {"error": "no datagram in the first phase"}
    # frame -> {universe: first arrival}
    got: dict[int, dict[int, int]] = {}
    for i, f in zip(data, frames):
        d = got.setdefault(f, {})
        u = uni[i]
        if u not in d:
            d[u] = rx[i]
    complete = {f: max(d.values()) for f, d in got.items() if len(d) == universes}
    # Each sync packet against the newest frame that had begun to arrive before it: a sync
    # after a frame of which some universes never came makes a receiver that waits for sync
    # show a torn frame.
    sync_after_torn: list[int] = []
    newest = None
    seen_of: dict[int, int] = {}
    for i, f in zip(range(len(rx)), _frames_by_record(kind, data, frames)):
        if kind[i] == 0:
            seen_of[f] = seen_of.get(f, 0) + 1
            if newest is None or f > newest:
                newest = f
        elif newest is not None and seen_of.get(newest, 0) < universes:
            sync_after_torn.append(rx[i])
    out = {"base_us": base}
    for name, (t0, t1) in phases.items():
        dur = (t1 - t0) / 1e6
        done = [f for f, t in complete.items() if t0 <= t < t1]
        ages = [(complete[f] - (base + f * period_us)) / 1000.0 for f in done]
        touched = {f for f, d in got.items() if t0 <= min(d.values()) < t1}
        torn = [f for f in touched if f not in complete]
        per_u = {u: 0 for u in range(first_universe, first_universe + universes)}
        for f, d in got.items():
            for u, t in d.items():
                if t0 <= t < t1 and u in per_u:
                    per_u[u] += 1
        rates = {u: n / dur for u, n in per_u.items()}
        mean = sum(rates.values()) / len(rates) if rates else 0.0
        worst = sorted(rates.items(), key=lambda kv: kv[1])[:5]
        syncs = [i for i in range(len(rx)) if kind[i] == 1 and t0 <= rx[i] < t1]
        out[name] = {
            "seconds": round(dur, 3),
            "complete_fps": round(len(done) / dur, 2),
            "torn_frames": len(torn),
            "universe_fps_mean": round(mean, 2),
            "universe_fps_min": round(min(rates.values()), 2) if rates else None,
            "universe_fps_max": round(max(rates.values()), 2) if rates else None,
            "min_over_mean": round(min(rates.values()) / mean, 3) if mean else None,
            "worst_universes": [[u, round(r, 2)] for u, r in worst],
            "age_ms_p50": _r(percentile(ages, 50)),
            "age_ms_p99": _r(percentile(ages, 99)),
            "age_ms_max": _r(max(ages) if ages else None),
            "sync_packets_per_s": round(len(syncs) / dur, 2),
            "syncs_after_torn_frame": sum(1 for t in sync_after_torn if t0 <= t < t1),
        }
    if lift_us is not None:
        # The first frame due after the lift from which every later frame (to the end of the
        # records' last phase) is complete; a frame nobody sent counts as not complete. This
        # strict figure is reported; 55-stall judges the one below.
        end = max(t1 for _, t1 in phases.values())
        due = lambda f: base + f * period_us  # noqa: E731
        lo = math.ceil((lift_us - base) / period_us)
        hi = math.floor((end - 4 * period_us - base) / period_us)
        after = [f for f in range(lo, hi + 1) if due(f) >= lift_us]
        ms = lambda f: None if f is None else _r((due(f) - lift_us) / 1000.0)  # noqa: E731
        out["recovered_ms"] = ms(_recovered(after, lambda f: f in complete))
        # The same, with a frame of which no datagram arrived passed over: a loop that wakes
        # a period late skips that tick (`skipped_ticks` in /profile) and sends nothing for
        # it, which is the host's doing, not the link's. The caller holds the count of such
        # absent frames against the ticks the loop says it skipped in the window.
        sent = _recovered(after, lambda f: f in complete or f not in got)
        # ... and from the first of them that arrived: frames left unsent at the lift itself
        # were the admission's last skips, inside the recovery this measures.
        sent = next((f for f in after if sent is not None and f >= sent and f in complete), None)
        out["recovered_ms_sent"] = ms(sent)
        out["absent_after_recovered"] = None if sent is None else sum(1 for f in after if f >= sent and f not in got)
        out["torn_after_lift"] = sum(1 for f in after if f in got and f not in complete)
    return out


def _recovered(after, whole):
    """The first frame of `after` from which every later one is `whole`; None when the last
    of them is not."""
    recovered = None
    for f in reversed(after):
        if not whole(f):
            break
        recovered = f
    return recovered


def _frames_by_record(kind, data, frames):
    """The unwrapped frame of every record (None for sync packets), in record order."""
    it = iter(frames)
    di = iter(data)
    nxt = next(di, None)
    for i in range(len(kind)):
        if i == nxt:
            yield next(it)
            nxt = next(di, None)
        else:
            yield None


def _r(v):
    return None if v is None else round(v, 2)
