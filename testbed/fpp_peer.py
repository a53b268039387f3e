#!/usr/bin/env python3
"""FPP MultiSync peers written from FPP's packet layouts (docs/sync-bench.md), not from pfx's
encoder: a master, a receiver that decodes and checks what a master sends, and a discover
pinger. Standard library only.

    fpp_peer.py master --name show.fseq --frames 3600 --step-ms 17 [--to multicast|ADDR ...]
                       [--iface-addr A] [--port 32320] [--ping] [--report F]
    fpp_peer.py listen --seconds 10 [--iface-addr A] [--discover multicast|ADDR [--discover-after S]]
                       [--report F]
    fpp_peer.py discover --to ADDR|multicast [--iface-addr A] [--wait 1.0]

The layouts (all integers little-endian unless said otherwise):

    header   0..3 "FPPD"  4 type  5..6 u16 length of what follows; datagram = 7 + length
    sync (1) 7 action (0 start, 1 stop, 2 sync, 3 open)  8 file type (0 sequence, 1 media)
             9..12 u32 frame  13..16 f32 seconds  17.. file name, NUL-terminated
             (length = 11 + len(name): the NUL is counted)
    ping (4) v3 is 301 bytes: 7 version  8 discover  9 system type  10..11 major (big-endian)
             12..13 minor (big-endian)  14 mode  15..18 IPv4  19..82 host name (64)  83 NUL
             84..123 version (40)  124 NUL  125..164 model (40)  165 NUL
             166..285 channel ranges "a-b,c-d" (120)  286..300 zero
"""

from __future__ import annotations

import argparse
import json
import re
import select
import socket
import struct
import sys
import time
from dataclasses import asdict, dataclass, field

PORT = 32320
GROUP = "239.70.80.80"
MAGIC = b"FPPD"
HEADER_LEN = 7

T_COMMAND, T_SYNC, T_EVENT, T_BLANK, T_PING, T_PLUGIN, T_FPPCOMMAND = range(7)
TYPE_NAMES = {0: "command", 1: "sync", 2: "event", 3: "blank", 4: "ping", 5: "plugin", 6: "fppcommand"}

A_START, A_STOP, A_SYNC, A_OPEN = 0, 1, 2, 3
ACTION_NAMES = {0: "start", 1: "stop", 2: "sync", 3: "open"}
FILE_SEQUENCE, FILE_MEDIA = 0, 1
SYNC_FIXED = 11  # action, file type, frame, seconds and the name's terminating NUL

PING_V3_LEN = 301
PING_V3_EXTRA = PING_V3_LEN - HEADER_LEN  # 294
# (offset in the datagram, width) of the ping's text fields; a NUL byte follows each.
PING_TEXT = {"hostname": (19, 64), "version": (84, 40), "model": (125, 40), "ranges": (166, 120)}
PING_TAIL = 286  # zero from here to the end
MODE_BRIDGE, MODE_PLAYER, MODE_REMOTE = 0x01, 0x02, 0x08
MODE_SENDS_MULTISYNC = 0x04
RANGES_RE = re.compile(r"^(\d+-\d+(,\d+-\d+)*)?$")


class PacketError(ValueError):
    pass


# ---------------------------------------------------------------------------- encoding
def header(ptype: int, extra_len: int) -> bytes:
    return MAGIC + struct.pack("<BH", ptype, extra_len)


def sync_packet(action: int, name: str, frame: int = 0, seconds: float = 0.0, file_type: int = FILE_SEQUENCE) -> bytes:
    body = struct.pack("<BBIf", action, file_type, frame, seconds) + name.encode() + b"\x00"
    return header(T_SYNC, len(body)) + body


def blank_packet() -> bytes:
    return header(T_BLANK, 0)


def _field(text: str, width: int) -> bytes:
    raw = text.encode()[:width]
    return raw + b"\x00" * (width - len(raw))


def ping_v3(
    ip: str,
    hostname: str,
    discover: bool = False,
    system_type: int = 0x01,
    major: int = 9,
    minor: int = 0,
    mode: int = MODE_PLAYER,
    version: str = "9.0",
    model: str = "fpp_peer",
    ranges: str = "",
) -> bytes:
    b = bytearray(PING_V3_LEN)
    b[0:HEADER_LEN] = header(T_PING, PING_V3_EXTRA)
    b[7] = 3
    b[8] = 1 if discover else 0
    b[9] = system_type
    b[10:12] = struct.pack(">H", major)
    b[12:14] = struct.pack(">H", minor)
    b[14] = mode
    b[15:19] = socket.inet_aton(ip)
    for key, text in (("hostname", hostname), ("version", version), ("model", model), ("ranges", ranges)):
        off, width = PING_TEXT[key]
        b[off : off + width] = _field(text, width)
    return bytes(b)


# ---------------------------------------------------------------------------- decoding
def parse_header(data: bytes) -> tuple[int, int]:
    """(type, length of what follows), or PacketError for what FPP would drop."""
    if len(data) < HEADER_LEN:
        raise PacketError(f"{len(data)} bytes, shorter than the 7-byte header")
    if data[0:4] != MAGIC:
        raise PacketError(f"bytes 0..3 are {data[0:4]!r}, not 'FPPD'")
    ptype, extra = struct.unpack_from("<BH", data, 4)
    if len(data) != HEADER_LEN + extra:
        raise PacketError(f"header says 7 + {extra} bytes, the datagram has {len(data)}")
    return ptype, extra


@dataclass
class Sync:
    action: int
    file_type: int
    frame: int
    seconds: float
    name: str

    @property
    def action_name(self) -> str:
        return ACTION_NAMES.get(self.action, f"action {self.action}")


def parse_sync(data: bytes) -> Sync:
    ptype, extra = parse_header(data)
    if ptype != T_SYNC:
        raise PacketError(f"type {ptype}, not sync (1)")
    if extra < SYNC_FIXED:
        raise PacketError(f"sync body of {extra} bytes, shorter than 11")
    action, ftype, frame, seconds = struct.unpack_from("<BBIf", data, HEADER_LEN)
    raw = data[17:]
    if raw[-1:] != b"\x00":
        raise PacketError("file name not NUL-terminated at the end of the datagram")
    name = raw[:-1]
    if b"\x00" in name:
        at = 17 + name.index(b"\x00")
        raise PacketError(f"NUL inside the file name at byte {at}")
    return Sync(action, ftype, frame, seconds, name.decode("utf-8", "replace"))


def _text(data: bytes, key: str) -> str:
    off, width = PING_TEXT[key]
    return data[off : off + width].split(b"\x00", 1)[0].decode("utf-8", "replace")


def parse_ping(data: bytes) -> dict:
    ptype, extra = parse_header(data)
    if ptype != T_PING:
        raise PacketError(f"type {ptype}, not ping (4)")
    if extra < 169:
        raise PacketError(f"ping body of {extra} bytes, shorter than a v1 ping (169)")
    d = {
        "version": data[7],
        "discover": data[8],
        "system_type": data[9],
        "major": struct.unpack_from(">H", data, 10)[0],
        "minor": struct.unpack_from(">H", data, 12)[0],
        "mode": data[14],
        "ip": socket.inet_ntoa(data[15:19]),
        "hostname": _text(data, "hostname"),
        "version_str": _text(data, "version"),
        "model": _text(data, "model"),
    }
    if extra > 169:
        d["ranges"] = _text(data, "ranges")
    return d


def check_ping_v3(data: bytes, expect_ip: str | None = None, expect_discover: int | None = None) -> list[str]:
    """Every byte of a v3 ping against the layout; returns the problems (empty: it is right)."""
    bad: list[str] = []
    if len(data) != PING_V3_LEN:
        return [f"length {len(data)}, a v3 ping is {PING_V3_LEN} bytes"]
    if data[0:4] != MAGIC:
        bad.append(f"bytes 0..3: {data[0:4]!r}, want b'FPPD'")
    if data[4] != T_PING:
        bad.append(f"byte 4 (type): {data[4]}, want 4")
    extra = struct.unpack_from("<H", data, 5)[0]
    if extra != PING_V3_EXTRA:
        bad.append(f"bytes 5..6 (length, little-endian): {extra}, want 294")
    if data[7] != 3:
        bad.append(f"byte 7 (ping version): {data[7]}, want 3")
    if data[8] not in (0, 1):
        bad.append(f"byte 8 (discover flag): {data[8]}, want 0 or 1")
    elif expect_discover is not None and data[8] != expect_discover:
        bad.append(f"byte 8 (discover flag): {data[8]}, want {expect_discover}")
    mode = data[14]
    if mode & ~MODE_SENDS_MULTISYNC not in (MODE_BRIDGE, MODE_PLAYER, MODE_REMOTE):
        bad.append(f"byte 14 (mode): 0x{mode:02x}, want 0x01, 0x02 or 0x08, optionally | 0x04")
    ip = socket.inet_ntoa(data[15:19])
    if expect_ip is not None and ip != expect_ip:
        bad.append(f"bytes 15..18 (IPv4): {ip}, want {expect_ip}")
    for key, (off, width) in PING_TEXT.items():
        raw = data[off : off + width]
        text, _, pad = raw.partition(b"\x00")
        if pad.strip(b"\x00"):
            bad.append(f"bytes {off}..{off + width - 1} ({key}): bytes after the first NUL are not all NUL")
        if any(c < 0x20 or c > 0x7E for c in text):
            bad.append(f"bytes {off}..{off + width - 1} ({key}): not printable ASCII: {text!r}")
        if data[off + width] != 0 and off + width < PING_TAIL:
            bad.append(f"byte {off + width} (after {key}): 0x{data[off + width]:02x}, want 0")
        if key == "hostname" and not text:
            bad.append("bytes 19..82 (hostname): empty")
        if key == "ranges" and not RANGES_RE.match(text.decode("ascii", "replace")):
            bad.append(f"bytes 166..285 (channel ranges): {text!r} is not start-end[,start-end...]")
    for part in filter(None, _text(data, "ranges").split(",")):
        first, _, last = part.partition("-")
        if first.isdigit() and last.isdigit() and int(first) > int(last):
            bad.append(f"channel range {part}: start after end")
    tail = data[PING_TAIL:]
    if tail.strip(b"\x00"):
        bad.append(f"bytes {PING_TAIL}..300: not all zero")
    return bad


# ---------------------------------------------------------------------------- sockets
def open_socket(iface_addr: str = "0.0.0.0", port: int = PORT, join: bool = True) -> socket.socket:
    """Bound to 0.0.0.0:port like an FPP unit (shared with SO_REUSEPORT), joined to the group."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_UDP)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 1)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 0)
    if iface_addr != "0.0.0.0":
        s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(iface_addr))
    s.bind(("0.0.0.0", port))
    if join:
        s.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, socket.inet_aton(GROUP) + socket.inet_aton(iface_addr))
    return s


def destinations(to: list[str], port: int) -> list[tuple[str, int]]:
    return [(GROUP if t == "multicast" else t, port) for t in (to or ["multicast"])]


# ---------------------------------------------------------------------------- master
def sync_frames(frames: int) -> list[int]:
    """The frames at which an FPP master sends a sync: every 4 up to 32, every 10 after."""
    out, last = [], -1
    for f in range(frames):
        diff = f - last
        if f > 32:
            if diff < 10:
                continue
        elif f and diff < 4:
            continue
        out.append(f)
        last = f
    return out


def run_master(a) -> int:
    # Sent from an ephemeral port: a receiver on this host keeps the MultiSync port to itself.
    s = open_socket(a.iface_addr, 0, join=False)
    dests = destinations(a.to, a.port)
    sent = {"open": 0, "start": 0, "sync": 0, "stop": 0, "ping": 0}

    def send(pkt: bytes, what: str) -> None:
        for d in dests:
            try:
                s.sendto(pkt, d)
                sent[what] += 1
            except OSError as e:
                print(f"fpp_peer master: send to {d[0]}:{d[1]} failed: {e}", file=sys.stderr)

    if a.ping:
        send(ping_v3(a.iface_addr, a.hostname, mode=MODE_PLAYER | MODE_SENDS_MULTISYNC), "ping")
    step = a.step_ms / 1000.0
    wanted = set(sync_frames(a.frames))
    send(sync_packet(A_OPEN, a.name), "open")
    time.sleep(a.open_lead)
    send(sync_packet(A_START, a.name), "start")
    t0 = time.monotonic()
    started_wall = time.time()
    last = -1
    try:
        for f in range(a.frames):
            t = t0 + f * step
            delay = t - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            if f in wanted:
                send(sync_packet(A_SYNC, a.name, f, f * step), "sync")
                last = f
    except KeyboardInterrupt:
        pass
    send(sync_packet(A_STOP, a.name), "stop")
    rep = {"started_at": started_wall, "frames": a.frames, "step_ms": a.step_ms, "last_sync_frame": last,
           "sent": sent, "to": [f"{h}:{p}" for h, p in dests]}  # fmt: skip
    if a.report:
        with open(a.report, "w") as fh:
            json.dump(rep, fh, indent=1)
    return 0


# ---------------------------------------------------------------------------- receiver
@dataclass
class Received:
    syncs: list[dict] = field(default_factory=list)
    pings: list[dict] = field(default_factory=list)
    blanks: int = 0
    others: dict = field(default_factory=dict)
    dropped: list[str] = field(default_factory=list)  # what FPP would drop, and why


def decode_into(rx: Received, data: bytes, src: str, t: float, expect_ip_from_src: bool = True) -> None:
    try:
        ptype, _ = parse_header(data)
        if ptype == T_SYNC:
            sp = parse_sync(data)
            rx.syncs.append({"t": t, "src": src, **asdict(sp), "action_name": sp.action_name})
        elif ptype == T_PING:
            p = parse_ping(data)
            problems = check_ping_v3(data, expect_ip=src if expect_ip_from_src else None) if p["version"] == 3 else []
            rx.pings.append({"t": t, "src": src, "len": len(data), **p, "problems": problems, "hex": data.hex()})
        elif ptype == T_BLANK:
            rx.blanks += 1
        else:
            name = TYPE_NAMES.get(ptype, str(ptype))
            rx.others[name] = rx.others.get(name, 0) + 1
    except PacketError as e:
        if len(rx.dropped) < 50:
            rx.dropped.append(f"from {src}: {e}")


def receive(sock: socket.socket, seconds: float, rx: Received, own: str | None = None) -> None:
    end = time.monotonic() + seconds
    while True:
        left = end - time.monotonic()
        if left <= 0:
            return
        r, _, _ = select.select([sock], [], [], left)
        if not r:
            continue
        data, (src, _port) = sock.recvfrom(65536)
        if own is not None and src == own:
            continue
        decode_into(rx, data, src, time.time())


def summary(rx: Received) -> dict:
    by_action: dict[str, int] = {}
    for s in rx.syncs:
        by_action[s["action_name"]] = by_action.get(s["action_name"], 0) + 1
    return {"sync_by_action": by_action, "names": sorted({s["name"] for s in rx.syncs}),
            "sources": sorted({s["src"] for s in rx.syncs} | {p["src"] for p in rx.pings}),
            "pings": len(rx.pings), "blanks": rx.blanks, "others": rx.others, "dropped": rx.dropped}  # fmt: skip


def run_listen(a) -> int:
    s = open_socket(a.iface_addr, a.port)
    rx = Received()
    waited, sent_at = 0.0, None
    if a.discover:
        waited = min(a.discover_after, a.seconds)
        receive(s, waited, rx, own=a.iface_addr)
        sent_at = time.time()
        for d in destinations([a.discover], a.port):
            s.sendto(ping_v3(a.iface_addr, a.hostname, discover=True, mode=MODE_PLAYER), d)
    receive(s, a.seconds - waited, rx, own=a.iface_addr)
    # An answer to the discover ping is a ping that arrives after it (a unit also pings unasked).
    out = {"summary": summary(rx), "discover_sent_at": sent_at, "syncs": rx.syncs, "pings": rx.pings}
    text = json.dumps(out, indent=1)
    if a.report:
        with open(a.report, "w") as fh:
            fh.write(text + "\n")
    else:
        print(json.dumps(out["summary"], indent=1))
    return 0


def run_discover(a) -> int:
    s = open_socket(a.iface_addr, a.port)
    for d in destinations(a.to, a.port):
        s.sendto(ping_v3(a.iface_addr, a.hostname, discover=True, mode=MODE_PLAYER), d)
    rx = Received()
    receive(s, a.wait, rx, own=a.iface_addr)
    for p in rx.pings:
        verdict = "ok" if not p["problems"] else "; ".join(p["problems"])
        print(f"{p['src']}: {p['hostname']} v{p['version']} mode 0x{p['mode']:02x} {p['version_str']} ({verdict})")
    return 0 if rx.pings and all(not p["problems"] for p in rx.pings) else 1


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("master", "listen", "discover"):
        p = sub.add_parser(name)
        p.add_argument("--iface-addr", default="0.0.0.0", help="this host's address on the show network")
        p.add_argument("--port", type=int, default=PORT)
        p.add_argument("--hostname", default=f"fpp-peer-{socket.gethostname()}"[:64])
        if name == "master":
            p.add_argument("--name", required=True, help="sequence file name the remotes play")
            p.add_argument("--frames", type=int, required=True)
            p.add_argument("--step-ms", type=float, required=True)
            p.add_argument("--to", action="append", help="multicast (default) or an address; repeatable")
            p.add_argument("--open-lead", type=float, default=0.2, help="seconds between open and start")
            p.add_argument("--ping", action="store_true", help="send a v3 ping first")
            p.add_argument("--report")
        elif name == "listen":
            p.add_argument("--seconds", type=float, required=True)
            p.add_argument("--discover", help="send a v3 discover ping: multicast or an address")
            p.add_argument("--discover-after", type=float, default=0.0, help="seconds of listening before it")
            p.add_argument("--report")
        else:
            p.add_argument("--to", action="append", help="multicast (default) or an address")
            p.add_argument("--wait", type=float, default=1.0)
    a = ap.parse_args(argv)
    return {"master": run_master, "listen": run_listen, "discover": run_discover}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
