#!/usr/bin/env python3
"""Stand-in sender for the testbed (not the player): bigPacket, sACN and DDP at a fixed frame
rate, encoded from the specs (wire.py), on absolute deadlines, like the player's loop.

    send_test.py --bigpacket 239.255.80.1:5599 --sacn multicast --ddp 239.255.70.1:4048 \
        --iface-addr 10.77.0.1 --fps 60 --seconds 20 --report sender.json [--blocking]

Frame n's pixels: bytes 0..3 = n (big-endian), byte i >= 4 = (n + i) & 0xFF, so a pole's
--dump-frames can be checked end to end (`expected_pixels`).

Non-blocking (default): EAGAIN/ENOBUFS drops the rest of that output's frame and is counted.
--blocking: a plain blocking sendto, the naive baseline.
"""

from __future__ import annotations

import argparse
import errno
import json
import math
import os
import signal
import socket
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import tracker  # noqa: E402
import wire  # noqa: E402


def expected_pixels(n: int, length: int) -> bytes:
    head = (n & 0xFFFFFFFF).to_bytes(4, "big")
    body = bytes((n + i) & 0xFF for i in range(4, length))
    return (head + body)[:length]


def hostport(s: str, default_port: int) -> tuple[str, int]:
    if ":" in s:
        h, p = s.rsplit(":", 1)
        return h, int(p)
    return s, default_port


class Output:
    def __init__(self, name: str, sock: socket.socket):
        self.name = name
        self.sock = sock
        self.frames = 0
        self.datagrams = 0
        self.dropped_frames = 0  # frames cut short by EAGAIN/ENOBUFS
        self.errors: dict[str, int] = {}

    def send_all(self, packets: list[tuple[bytes, tuple[str, int]]]) -> None:
        for pkt, dest in packets:
            try:
                self.sock.sendto(pkt, dest)
                self.datagrams += 1
            except OSError as e:
                name = errno.errorcode.get(e.errno, str(e.errno))
                self.errors[name] = self.errors.get(name, 0) + 1
                if e.errno in (errno.EAGAIN, errno.ENOBUFS):
                    self.dropped_frames += 1
                    return  # drop the rest of this output's frame
                return
        self.frames += 1

    def report(self) -> dict:
        return {
            "frames_sent": self.frames,
            "datagrams": self.datagrams,
            "frames_cut": self.dropped_frames,
            "errors": self.errors,
        }


def make_socket(a) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_UDP)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 1)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 0)
    if a.iface_addr:
        s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(a.iface_addr))
    if a.sndbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, a.sndbuf)
    s.setblocking(a.blocking)
    return s


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bigpacket", metavar="HOST:PORT")
    ap.add_argument("--sacn", metavar="multicast|HOST[:PORT]")
    ap.add_argument("--ddp", metavar="HOST:PORT")
    ap.add_argument("--pixels", type=int, default=300)
    ap.add_argument("--pole-id", type=int, default=0)
    ap.add_argument("--first-universe", type=int, default=1)
    ap.add_argument("--universe-size", type=int, default=510)
    ap.add_argument("--fps", type=float, default=60.0)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--iface-addr", help="IP_MULTICAST_IF: the local address of the show interface")
    ap.add_argument("--blocking", action="store_true", help="blocking sendto (the naive baseline)")
    ap.add_argument("--sndbuf", type=int, help="SO_SNDBUF bytes (default: the kernel's)")
    ap.add_argument("--report", help="JSON report at exit")
    a = ap.parse_args(argv)

    outputs: list[tuple[Output, object]] = []
    if a.bigpacket:
        dest = hostport(a.bigpacket, wire.BP_PORT)

        bp_state = {"seq": 0}

        def bp_packets(n, px, ts, dest=dest):
            # The frame sequence counts frames sent to the pole (a skipped deadline is not a gap).
            seq = bp_state["seq"]
            bp_state["seq"] = (seq + 1) & 0xFFFFFFFF
            return [(wire.encode_bigpacket(a.pole_id, seq, ts, px), dest)]

        outputs.append((Output("bigpacket", make_socket(a)), bp_packets))
    if a.sacn:
        universes = max(1, math.ceil(a.pixels * 3 / a.universe_size))
        if a.sacn == "multicast":
            dests = [
                (wire.sacn_multicast_group(u), wire.SACN_PORT)
                for u in range(a.first_universe, a.first_universe + universes)
            ]
        else:
            dests = [hostport(a.sacn, wire.SACN_PORT)] * universes

        sacn_state = {"seq": 0}

        def sacn_packets(n, px, ts, dests=dests):
            us = a.universe_size
            seq = sacn_state["seq"]  # one counter per universe, all stepping together
            sacn_state["seq"] = (seq + 1) & 0xFF
            return [
                (wire.encode_sacn(a.first_universe + k, seq, px[k * us : (k + 1) * us]), d)
                for k, d in enumerate(dests)
            ]

        outputs.append((Output("sacn", make_socket(a)), sacn_packets))
    if a.ddp:
        dest = hostport(a.ddp, wire.DDP_PORT)
        state = {"seq": 1}

        def ddp_packets(n, px, ts, dest=dest):
            pk = wire.encode_ddp_frame(px, state["seq"])
            state["seq"] = wire.ddp_next_sequence(state["seq"], len(pk))
            return [(p, dest) for p in pk]

        outputs.append((Output("ddp", make_socket(a)), ddp_packets))
    if not outputs:
        ap.error("give at least one of --bigpacket, --sacn, --ddp")

    stop = {"flag": False}
    signal.signal(signal.SIGTERM, lambda s, f: stop.update(flag=True))
    signal.signal(signal.SIGINT, lambda s, f: stop.update(flag=True))

    period = 1.0 / a.fps
    start = time.monotonic()
    n = 0
    loop_frames = 0
    deadline_misses = 0
    send_us: list[float] = []
    length = a.pixels * 3
    while not stop["flag"]:
        target = start + n * period
        now = time.monotonic()
        if now - start >= a.seconds:
            break
        if target > now:
            time.sleep(target - now)
        elif now - target > period:
            # Late by more than a frame: count it and skip to the current frame, no backlog.
            missed = int((now - target) / period)
            deadline_misses += missed
            n += missed
        px = expected_pixels(n, length)
        ts = time.time_ns() // 1000
        batches = [(out, build(n, px, ts)) for out, build in outputs]
        t0 = time.monotonic()  # wire_send: the sends only, as in the player's stage
        for out, packets in batches:
            out.send_all(packets)
        send_us.append((time.monotonic() - t0) * 1e6)
        loop_frames += 1
        n += 1
    elapsed = time.monotonic() - start
    rep = {
        "sender": "send_test.py (stand-in, not the player)",
        "blocking": a.blocking,
        "fps_target": a.fps,
        "loop_frames": loop_frames,
        "elapsed_s": round(elapsed, 3),
        "fps": round(loop_frames / elapsed, 3) if elapsed > 0 else 0.0,
        "deadline_misses": deadline_misses,
        "wire_send_us": tracker.summary(send_us),
        "outputs": {o.name: o.report() for o, _ in outputs},
        "pid": os.getpid(),
    }
    if a.report:
        Path(a.report).write_text(json.dumps(rep, indent=1) + "\n")
    else:
        print(json.dumps(rep, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
