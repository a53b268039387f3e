"""What a pole simulator counts, as pure state machines: datagram bytes and a receive time in,
counters out. No sockets and no clock here (the caller passes the kernel's receive time), so the
unit tests drive them with hand-made packets.

Frame definitions (also in docs/testbed.md):
- bigPacket: one valid datagram for this pole id is one frame.
- DDP: a packet with PUSH completes a frame. It is counted in `frames` when the packets since the
  previous PUSH covered every byte of the pole ([0, pixels x bytes per pixel)); otherwise it is a
  `torn_frames` (the pole would show a mix of old and new pixels).
- sACN: the pole owns universes first..first+n-1. A packet for the pole's LAST universe completes a
  frame; it is counted in `frames` when every one of the pole's universes arrived since the
  previous completion (else `torn_frames`). Senders send a frame's universes in ascending order
  (the player and every sender we know do).
"""

from __future__ import annotations

import math
from collections import Counter

import wire

# An inter-frame interval longer than this is a stall; the age of the first frame after it says
# whether the pole got a current frame or a backlog when the stall lifted.
STALL_INTERVAL_MS = 50.0
# Frames arriving within this time of the first one after a stall are one burst (what the link's
# queues released at once); the last of them is what the pole shows until the next frame.
BURST_MS = 2.0


def percentile(values: list[float], p: float) -> float | None:
    """Nearest-rank percentile (the smallest value with at least p% of the data at or below it)."""
    if not values:
        return None
    s = sorted(values)
    k = max(1, math.ceil(p / 100.0 * len(s)))
    return s[k - 1]


def summary(values: list[float]) -> dict:
    if not values:
        return {"count": 0, "p50": None, "p95": None, "p99": None, "max": None}
    return {
        "count": len(values),
        "p50": round(percentile(values, 50), 3),
        "p95": round(percentile(values, 95), 3),
        "p99": round(percentile(values, 99), 3),
        "max": round(max(values), 3),
    }


class Tracker:
    """State common to every protocol."""

    protocol = "?"

    def __init__(self, pixels: int):
        self.pixels = pixels
        self.reset()

    def reset(self) -> None:
        self.datagrams = 0
        self.bytes = 0
        self.frames = 0
        self.torn_frames = 0
        self.lost = 0  # sequence numbers skipped (packets or frames, per protocol)
        self.gap_events = 0
        self.backwards = 0
        self.checksum_failures = 0
        self.malformed: Counter[str] = Counter()
        self.ignored: Counter[str] = Counter()
        self.intervals_ms: list[float] = []
        self.ages_ms: list[float] = []
        self.ages_after_stall_ms: list[float] = []
        self.ages_shown_after_stall_ms: list[float] = []
        self._burst: tuple[int, float] | None = None  # (first frame's rx time, last age)
        self.last_frame_us: int | None = None
        self.first_frame_us: int | None = None
        self.last_pixels: bytes | None = None

    def _frame_done(self, rx_us: int, pixels: bytes, age_ms: float | None) -> None:
        self.frames += 1
        stalled = False
        if self.last_frame_us is not None:
            dt = (rx_us - self.last_frame_us) / 1000.0
            self.intervals_ms.append(dt)
            stalled = dt > STALL_INTERVAL_MS
        else:
            self.first_frame_us = rx_us
        self.last_frame_us = rx_us
        self.last_pixels = pixels
        if age_ms is not None:
            self.ages_ms.append(age_ms)
            if self._burst is not None and (rx_us - self._burst[0]) / 1000.0 <= BURST_MS and not stalled:
                self._burst = (self._burst[0], age_ms)
            else:
                self._end_burst()
                if stalled:
                    self.ages_after_stall_ms.append(age_ms)
                    self._burst = (rx_us, age_ms)

    def _end_burst(self) -> None:
        if self._burst is not None:
            self.ages_shown_after_stall_ms.append(self._burst[1])
            self._burst = None

    def report(self) -> dict:
        shown_pending = [self._burst[1]] if self._burst is not None else []
        r = {
            "protocol": self.protocol,
            "frames": self.frames,
            "torn_frames": self.torn_frames,
            "datagrams": self.datagrams,
            "bytes": self.bytes,
            "sequence": {"lost": self.lost, "gap_events": self.gap_events, "backwards": self.backwards},
            "interval_ms": summary(self.intervals_ms),
            "frame_age_ms": summary(self.ages_ms) if self.protocol == "bigpacket" else None,
            "frame_age_after_stall_ms": summary(self.ages_after_stall_ms) if self.protocol == "bigpacket" else None,
            # The age of the last frame of the burst that ended the stall: what the pole shows.
            "frame_age_shown_after_stall_ms": summary(self.ages_shown_after_stall_ms + shown_pending)
            if self.protocol == "bigpacket"
            else None,
            "checksum_failures": self.checksum_failures,
            "malformed": dict(self.malformed),
            "ignored": dict(self.ignored),
        }
        if self.frames == 0:
            # A harness must fail the cell, never read zeros as a result.
            r["ok"] = False
            r["reason"] = "no frames received"
        else:
            r["ok"] = True
            r["reason"] = None
        return r


class BigPacketTracker(Tracker):
    protocol = "bigpacket"

    def __init__(self, pixels: int, pole_id: int | None):
        self.pole_id = pole_id  # None: accept any pole id
        super().__init__(pixels)

    def reset(self) -> None:
        super().reset()
        self.last_seq: int | None = None
        self.other_pole = 0
        self.end_frames = 0
        self.pixel_count_mismatch = 0

    def on_datagram(self, data: bytes, rx_us: int):
        self.datagrams += 1
        self.bytes += len(data)
        try:
            p = wire.parse_bigpacket(data)
        except wire.ChecksumFailure:
            self.checksum_failures += 1
            return None
        except wire.Malformed as e:
            self.malformed[e.reason] += 1
            return None
        if self.pole_id is not None and p.pole_id != self.pole_id:
            self.other_pole += 1
            return None
        if p.pixel_count != self.pixels:
            self.pixel_count_mismatch += 1
        if self.last_seq is not None:
            delta = (p.sequence - self.last_seq) & 0xFFFFFFFF
            if delta == 0 or delta >= 0x80000000:
                self.backwards += 1
            elif delta > 1:
                self.gap_events += 1
                self.lost += delta - 1
        self.last_seq = p.sequence
        if p.end:
            self.end_frames += 1
        self._frame_done(rx_us, p.payload, (rx_us - p.sender_ts_us) / 1000.0)
        return p

    def report(self) -> dict:
        r = super().report()
        r["bigpacket"] = {
            "other_pole_id": self.other_pole,
            "end_frames": self.end_frames,
            "pixel_count_mismatch": self.pixel_count_mismatch,
            "last_sequence": self.last_seq,
        }
        return r


class DdpTracker(Tracker):
    protocol = "ddp"

    def reset(self) -> None:
        super().reset()
        self.last_seq: int | None = None
        self.data_types: Counter[int] = Counter()
        self.offsets: set[int] = set()
        self.push_packets = 0
        self.out_of_range = 0
        self.bpp = 3
        self.buffer = bytearray(self.pixels * 4)
        self.covered: list[tuple[int, int]] = []

    def _covers_pole(self) -> bool:
        need = self.pixels * self.bpp
        reach = 0
        for start, end in sorted(self.covered):
            if start > reach:
                return False
            reach = max(reach, end)
        return reach >= need

    def on_datagram(self, data: bytes, rx_us: int):
        self.datagrams += 1
        self.bytes += len(data)
        try:
            p = wire.parse_ddp(data)
        except wire.Malformed as e:
            self.malformed[e.reason] += 1
            return None
        if p.query or p.reply:
            self.ignored["query or reply"] += 1
            return None
        if p.sequence != 0:  # 0 = sender does not number packets
            if self.last_seq is not None:
                delta = (p.sequence - self.last_seq) % 15
                if delta == 0:
                    self.backwards += 1  # duplicate (the spec lets a display ignore it)
                elif delta > 1:
                    self.gap_events += 1
                    self.lost += delta - 1
            self.last_seq = p.sequence
        self.data_types[p.data_type] += 1
        self.offsets.add(p.offset)
        self.bpp = wire.ddp_bytes_per_pixel(p.data_type)
        end = p.offset + len(p.data)
        if end > self.pixels * self.bpp:
            self.out_of_range += 1
        else:
            self.buffer[p.offset : end] = p.data
            self.covered.append((p.offset, end))
        if p.push:
            self.push_packets += 1
            if self._covers_pole():
                self._frame_done(rx_us, bytes(self.buffer[: self.pixels * self.bpp]), None)
            else:
                self.torn_frames += 1
            self.covered = []
        return p

    def report(self) -> dict:
        r = super().report()
        r["ddp"] = {
            "data_types": {f"0x{t:02x}": n for t, n in sorted(self.data_types.items())},
            "offsets": sorted(self.offsets)[:64],
            "push_packets": self.push_packets,
            "data_beyond_pole": self.out_of_range,
        }
        return r


class SacnTracker(Tracker):
    protocol = "sacn"

    def __init__(self, pixels: int, first_universe: int, universes: int, universe_size: int = 510):
        self.first_universe = first_universe
        self.universes = universes
        self.universe_size = universe_size
        super().__init__(pixels)

    def reset(self) -> None:
        super().reset()
        self.per_universe = {
            u: {"packets": 0, "lost": 0, "out_of_order": 0, "last_seq": None}
            for u in range(self.first_universe, self.first_universe + self.universes)
        }
        self.seen_since_frame: set[int] = set()
        self.channels: dict[int, bytes] = {}
        self.other_universe = 0
        self.terminated = 0
        self.preview = 0
        self.non_zero_start_code = 0

    def on_datagram(self, data: bytes, rx_us: int):
        self.datagrams += 1
        self.bytes += len(data)
        try:
            p = wire.parse_sacn(data)
        except wire.SacnIgnored as e:
            self.ignored[e.reason] += 1
            return None
        except wire.Malformed as e:
            self.malformed[e.reason] += 1
            return None
        u = self.per_universe.get(p.universe)
        if u is None:
            self.other_universe += 1
            return None
        if p.preview:
            self.preview += 1
            return None
        if p.start_code != 0:
            self.non_zero_start_code += 1
            return None
        u["packets"] += 1
        if u["last_seq"] is not None:
            # E1.31-2018 6.7.2: a difference in (-20, 0] (as a signed byte) is out of order.
            d = (p.sequence - u["last_seq"]) & 0xFF
            signed = d - 256 if d > 127 else d
            if -20 < signed <= 0:
                u["out_of_order"] += 1
                self.backwards += 1
                return None
            if d > 1:
                u["lost"] += d - 1
                self.lost += d - 1
                self.gap_events += 1
        u["last_seq"] = p.sequence
        if p.terminated:
            self.terminated += 1
            return p
        self.channels[p.universe] = p.channels
        self.seen_since_frame.add(p.universe)
        if p.universe == self.first_universe + self.universes - 1:
            if len(self.seen_since_frame) == self.universes:
                pixels = b"".join(self.channels[x] for x in sorted(self.channels))
                self._frame_done(rx_us, pixels[: self.pixels * 3], None)
            else:
                self.torn_frames += 1
            self.seen_since_frame = set()
        return p

    def report(self) -> dict:
        r = super().report()
        r["sacn"] = {
            "universes": {
                str(k): {kk: vv for kk, vv in v.items() if kk != "last_seq"} for k, v in self.per_universe.items()
            },
            "other_universe": self.other_universe,
            "stream_terminated": self.terminated,
            "preview": self.preview,
            "non_zero_start_code": self.non_zero_start_code,
            "frame_definition": "all of the pole's universes received since the previous frame, completed by the last universe",
        }
        return r
