#!/usr/bin/env python3
"""Pole simulator: receives bigPacket, sACN or DDP like a pole, counts what the network did to
the frames, serves the pole management API, and reports JSON.

    pole_sim.py --protocol bigpacket --group 239.255.80.1 --iface-addr 10.77.0.11 \
        --pixels 300 --pole-id 0 --report /tmp/pole.json [--api-port 8081 --token-file F]

The report is rewritten every second and on SIGTERM/SIGINT. SIGUSR1 restarts the measurement
(the frames before it are counted as excluded warm-up, not lost). A report with `"frames": 0`
always says `"ok": false, "reason": "no frames received"`.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import select
import signal
import socket
import struct
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import pole_api  # noqa: E402
import tracker  # noqa: E402
import wire  # noqa: E402

SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
DEFAULT_PORTS = {"bigpacket": wire.BP_PORT, "sacn": wire.SACN_PORT, "ddp": wire.DDP_PORT}
DEFAULT_GROUPS = {"bigpacket": ["239.255.80.1"], "ddp": ["239.255.70.1"], "sacn": []}


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--protocol", required=True, choices=["bigpacket", "sacn", "ddp"])
    ap.add_argument("--listen", default="0.0.0.0", help="bind address (default 0.0.0.0)")
    ap.add_argument("--port", type=int, help="UDP port (default 5599 / 5568 / 4048)")
    ap.add_argument(
        "--group",
        action="append",
        default=None,
        help="multicast group to join (repeatable; sACN default: 239.255.hi.lo of each universe; "
        "'none' joins nothing, for unicast)",
    )
    ap.add_argument("--iface-addr", default="0.0.0.0", help="local address of the interface to join on")
    ap.add_argument("--pixels", type=int, default=300)
    ap.add_argument("--first-universe", type=int, default=1)
    ap.add_argument("--universes", type=int, help="sACN universes of this pole (default: pixels x 3 / 510, rounded up)")
    ap.add_argument("--universe-size", type=int, default=510)
    ap.add_argument("--pole-id", type=int, default=0, help="bigPacket pole id to accept (-1: any)")
    ap.add_argument("--name", help="pole id string in the API (default pole-<pole-id>)")
    ap.add_argument("--api-port", type=int, help="serve the pole management API on this TCP port")
    ap.add_argument("--api-listen", default="0.0.0.0")
    ap.add_argument("--token-file", help="file holding the site token (changes need it)")
    ap.add_argument("--firmware", default="3.4.1")
    ap.add_argument("--model", default="gen3")
    ap.add_argument("--link-speed", type=int, default=100, help="Mbit/s the API reports")
    ap.add_argument("--fallback-enabled", action="store_true")
    ap.add_argument("--config-revision", type=int, default=1)
    ap.add_argument("--refuse-fallback", action="store_true", help="fault: answer 409 to a fallback change")
    ap.add_argument(
        "--ignore-fallback-write", action="store_true", help="fault: answer 200 to a change but keep the old state"
    )
    ap.add_argument("--report", help="JSON report, rewritten every second and at exit")
    ap.add_argument("--dump-frames", help="append each complete frame as a JSON line {frame, seq, rx_us, pixels(hex)}")
    ap.add_argument("--rcvbuf", type=int, default=4 << 20)
    ap.add_argument("--duration", type=float, help="stop after this many seconds")
    a = ap.parse_args(argv)
    if a.port is None:
        a.port = DEFAULT_PORTS[a.protocol]
    if a.universes is None:
        a.universes = max(1, math.ceil(a.pixels * 3 / a.universe_size))
    if a.group is None:
        if a.protocol == "sacn":
            a.group = [wire.sacn_multicast_group(u) for u in range(a.first_universe, a.first_universe + a.universes)]
        else:
            a.group = list(DEFAULT_GROUPS[a.protocol])
    a.group = [g for g in a.group if g != "none"]
    return a


def make_tracker(a) -> tracker.Tracker:
    if a.protocol == "bigpacket":
        return tracker.BigPacketTracker(a.pixels, None if a.pole_id < 0 else a.pole_id)
    if a.protocol == "ddp":
        return tracker.DdpTracker(a.pixels)
    return tracker.SacnTracker(a.pixels, a.first_universe, a.universes, a.universe_size)


def open_socket(a) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_UDP)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, a.rcvbuf)
    # Kernel receive time: frame age and intervals must not include this process's scheduling.
    s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    s.bind((a.listen, a.port))
    for g in a.group:
        mreq = socket.inet_aton(g) + socket.inet_aton(a.iface_addr)
        s.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, mreq)
    s.setblocking(False)
    return s


def rx_time_us(ancdata) -> int:
    for level, typ, data in ancdata:
        if level == socket.SOL_SOCKET and typ == SO_TIMESTAMPNS and len(data) >= 16:
            sec, nsec = struct.unpack("qq", data[:16])
            return sec * 1_000_000 + nsec // 1000
    return time.time_ns() // 1000


def write_json_atomic(path: str, obj: dict) -> None:
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1, sort_keys=True)
        f.write("\n")
    os.replace(tmp, path)


class PoleSim:
    def __init__(self, a):
        self.a = a
        self.tracker = make_tracker(a)
        self.started = time.time()
        self.window_started = self.started
        self.excluded_frames = 0
        self.resets = 0
        self.dump = open(a.dump_frames, "a") if a.dump_frames else None
        self.dump_index = 0
        self.api_state = None
        if a.api_port is not None:
            token = None
            if a.token_file:
                token = Path(a.token_file).read_text().strip() or None
            self.api_state = pole_api.PoleState(
                pole_id=a.name or f"pole-{a.pole_id}",
                model=a.model,
                firmware=a.firmware,
                link_speed=a.link_speed,
                fallback_enabled=a.fallback_enabled,
                config_revision=a.config_revision,
                token=token,
                refuse_fallback=a.refuse_fallback,
                ignore_fallback_write=a.ignore_fallback_write,
            )
            pole_api.serve(self.api_state, a.api_listen, a.api_port)

    def reset(self) -> None:
        self.excluded_frames += self.tracker.frames
        self.resets += 1
        self.tracker.reset()
        self.window_started = time.time()

    def report(self) -> dict:
        r = self.tracker.report()
        now = time.time()
        r.update(
            {
                "pole": self.a.name or f"pole-{self.a.pole_id}",
                "pole_id": self.a.pole_id,
                "pixels": self.a.pixels,
                "listen": f"{self.a.listen}:{self.a.port}",
                "groups": self.a.group,
                "iface_addr": self.a.iface_addr,
                "host": socket.gethostname(),
                "pid": os.getpid(),
                "started_at": self.started,
                "window_started_at": self.window_started,
                "updated_at": now,
                "window_s": round(now - self.window_started, 3),
                "excluded_warmup_frames": self.excluded_frames,
                "resets": self.resets,
            }
        )
        if self.api_state is not None:
            r["api"] = {"status": self.api_state.status(), **self.api_state.counters()}
        return r

    def write_report(self) -> None:
        if self.a.report:
            write_json_atomic(self.a.report, self.report())

    def on_frame(self, pkt, rx_us: int) -> None:
        if self.dump is None:
            return
        seq = getattr(pkt, "sequence", None)
        self.dump.write(
            json.dumps({"frame": self.dump_index, "seq": seq, "rx_us": rx_us, "pixels": self.tracker.last_pixels.hex()})
            + "\n"
        )
        self.dump_index += 1

    def read_one(self, sock: socket.socket) -> bool:
        """Takes one queued datagram; False when none is queued."""
        try:
            data, anc, _flags, _addr = sock.recvmsg(65536, 256)
        except (BlockingIOError, InterruptedError):
            return False
        rx = rx_time_us(anc)
        frames_before = self.tracker.frames
        pkt = self.tracker.on_datagram(data, rx)
        if self.tracker.frames != frames_before:
            self.on_frame(pkt, rx)
        return True

    def run(self, sock: socket.socket) -> None:
        stop = {"flag": False}

        def on_stop(signum, frame):
            stop["flag"] = True

        signal.signal(signal.SIGTERM, on_stop)
        signal.signal(signal.SIGINT, on_stop)
        want_reset = {"flag": False}
        # Handled in the loop, never inside a tracker call.
        signal.signal(signal.SIGUSR1, lambda s, f: want_reset.update(flag=True))
        # The first report is the sign of life callers wait for: written only once the
        # handlers are in, so a SIGTERM or SIGUSR1 sent on seeing it is never fatal.
        self.write_report()
        next_report = time.monotonic() + 1.0
        deadline = time.monotonic() + self.a.duration if self.a.duration else None
        while not stop["flag"]:
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                break
            if want_reset["flag"]:
                want_reset["flag"] = False
                self.reset()
            if now >= next_report:
                self.write_report()
                next_report += 1.0
                if next_report < now:
                    next_report = now + 1.0
            try:
                r, _, _ = select.select([sock], [], [], max(0.0, min(next_report - now, 0.2)))
            except InterruptedError:
                continue
            if not r:
                continue
            for _ in range(256):  # drain, but come back to the report clock
                if not self.read_one(sock):
                    break
        if stop["flag"]:
            # What had arrived before the stop counts: a sender that finished, then the
            # stop, must find every datagram it sent in the report (the socket is
            # non-blocking; this reads what is queued, no more).
            while self.read_one(sock):
                pass
        self.write_report()
        if self.dump is not None:
            self.dump.close()


def main(argv=None) -> int:
    a = parse_args(argv)
    try:
        sock = open_socket(a)
    except OSError as e:
        print(f"pole_sim: cannot listen on {a.listen}:{a.port} / join {a.group} on {a.iface_addr}: {e}", file=sys.stderr)
        return 2
    sim = PoleSim(a)
    sim.run(sock)
    return 0


if __name__ == "__main__":
    sys.exit(main())
