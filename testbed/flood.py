#!/usr/bin/env python3
"""Multicast flood source: another player's traffic that no pole subscribed to.

    flood.py --mbps 16.8 --iface-addr 10.77.0.2 --seconds 20 --report flood.json

Rate is counted in IP datagram bits (UDP payload + 28 bytes of UDP/IP header), the bits a switch
port must carry before Ethernet's 38 bytes of header, preamble and gap. Paced on absolute 1 ms
ticks; the report states what was really sent, measured as bytes / elapsed time.
"""

from __future__ import annotations

import argparse
import errno
import json
import signal
import socket
import sys
import time
from pathlib import Path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mbps", type=float, required=True)
    ap.add_argument("--size", type=int, default=1372, help="UDP payload bytes (default: 1400-byte IP datagrams)")
    ap.add_argument("--group-base", default="239.1.0.1", help="first group; --groups consecutive groups")
    ap.add_argument("--groups", type=int, default=4)
    ap.add_argument("--port", type=int, default=6000)
    ap.add_argument("--iface-addr", required=True)
    ap.add_argument("--seconds", type=float, default=3600.0)
    ap.add_argument("--report")
    a = ap.parse_args(argv)

    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 1)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(a.iface_addr))
    s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 0)
    s.setblocking(False)
    base = int.from_bytes(socket.inet_aton(a.group_base), "big")
    groups = [(socket.inet_ntoa((base + i).to_bytes(4, "big")), a.port) for i in range(a.groups)]
    payload = bytes(a.size)
    wire_bytes = a.size + 28
    pps = a.mbps * 1e6 / 8 / wire_bytes

    stop = {"flag": False}
    signal.signal(signal.SIGTERM, lambda *_: stop.update(flag=True))
    signal.signal(signal.SIGINT, lambda *_: stop.update(flag=True))
    start = time.monotonic()
    sent = dropped = 0
    tick = 0.001
    k = 0
    while not stop["flag"]:
        now = time.monotonic()
        el = now - start
        if el >= a.seconds:
            break
        due = int(el * pps) - sent - dropped
        for _ in range(max(0, due)):
            try:
                s.sendto(payload, groups[k % len(groups)])
                sent += 1
            except OSError as e:
                if e.errno not in (errno.EAGAIN, errno.ENOBUFS):
                    raise
                dropped += 1
            k += 1
        nxt = start + (int(el / tick) + 1) * tick
        time.sleep(max(0.0, nxt - time.monotonic()))
    elapsed = time.monotonic() - start
    rep = {
        "target_mbps": a.mbps,
        "sent_datagrams": sent,
        "dropped_eagain": dropped,
        "elapsed_s": round(elapsed, 3),
        "sent_mbps": round(sent * wire_bytes * 8 / elapsed / 1e6, 3) if elapsed > 0 else 0.0,
        "groups": [g for g, _ in groups],
        "datagram_bytes_ip": wire_bytes,
    }
    if a.report:
        Path(a.report).write_text(json.dumps(rep, indent=1) + "\n")
    else:
        print(json.dumps(rep))
    return 0


if __name__ == "__main__":
    sys.exit(main())
