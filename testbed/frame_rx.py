#!/usr/bin/env python3
"""A receiver for one large sACN output: records, for every datagram, when the kernel received
it, which universe it was for and which frame it carried (marked_show.py's marks), so that the
bench can count complete frames, each universe's frame rate and every frame's age.

    frame_rx.py --first-universe 1 --universes 170 --iface-addr 10.77.0.12 --out /tmp/rx

Writes OUT.bin (records: int64 receive time in µs, uint16 universe, uint32 frame or sync
sequence, uint8 kind 0 data / 1 sync) and OUT.json (counts, malformed reasons) on SIGTERM.

The E1.31-2018 parsing is written here from the standard (section 4: the root layer, the
framing layer of a data packet and of a synchronization packet, the DMP layer) with `struct`,
not with the player's encoder nor the `sacn` package: it must keep up with 40,000 datagrams a
second on a shared machine. Joining 1,000 groups needs `net.ipv4.igmp_max_memberships`
raised; this is a namespace of the testbed's, so it raises it there.
"""

from __future__ import annotations

import argparse
import array
import json
import signal
import socket
import struct
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import marked_show  # noqa: E402

SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
ACN_ID = b"ASC-E1.17\x00\x00\x00"
VECTOR_ROOT_DATA = 0x00000004
VECTOR_ROOT_EXTENDED = 0x00000008
VECTOR_FRAMING_DATA = 0x00000002
VECTOR_FRAMING_SYNC = 0x00000001
VECTOR_DMP_SET_PROPERTY = 0x02
DATA_OFFSET = 126  # the first slot after the start code
SYNC_LEN = 49
KIND_DATA, KIND_SYNC = 0, 1


class Malformed(Exception):
    pass


def parse(buf: memoryview, n: int) -> tuple[int, int, int, bytes | None]:
    """(kind, universe or sync address, sequence, slots or None) of an E1.31 datagram."""
    if n < SYNC_LEN:
        raise Malformed("short datagram")
    pre, post = struct.unpack_from(">HH", buf, 0)
    if pre != 0x0010 or post != 0 or bytes(buf[4:16]) != ACN_ID:
        raise Malformed("not an ACN root layer")
    fl, vector = struct.unpack_from(">HI", buf, 16)
    if fl >> 12 != 0x7 or fl & 0x0FFF != n - 16:
        raise Malformed("root layer flags/length")
    fl2, fvec = struct.unpack_from(">HI", buf, 38)
    if fl2 >> 12 != 0x7 or fl2 & 0x0FFF != n - 38:
        raise Malformed("framing layer flags/length")
    if vector == VECTOR_ROOT_EXTENDED:
        if fvec != VECTOR_FRAMING_SYNC or n != SYNC_LEN:
            raise Malformed("extended packet that is not a sync packet")
        seq, addr = struct.unpack_from(">BH", buf, 44)
        return KIND_SYNC, addr, seq, None
    if vector != VECTOR_ROOT_DATA or fvec != VECTOR_FRAMING_DATA:
        raise Malformed("unknown vector")
    if n < DATA_OFFSET:
        raise Malformed("short data packet")
    seq, options, universe = struct.unpack_from(">BBH", buf, 111)
    fl3, dvec, atype, first, inc, count = struct.unpack_from(">HBBHHH", buf, 115)
    if fl3 >> 12 != 0x7 or fl3 & 0x0FFF != n - 115:
        raise Malformed("DMP layer flags/length")
    if dvec != VECTOR_DMP_SET_PROPERTY or atype != 0xA1 or first != 0 or inc != 1:
        raise Malformed("DMP layer fields")
    if count < 1 or count > 513 or n != DATA_OFFSET - 1 + count:
        raise Malformed("property value count")
    if options & 0x40:
        return KIND_DATA, universe, seq, None  # stream terminated
    if buf[125] != 0:
        raise Malformed("non-zero start code")
    return KIND_DATA, universe, seq, bytes(buf[DATA_OFFSET : DATA_OFFSET + 6])


def rx_us(anc) -> int:
    for level, typ, data in anc:
        if level == socket.SOL_SOCKET and typ == SO_TIMESTAMPNS and len(data) >= 16:
            sec, nsec = struct.unpack("qq", data[:16])
            return sec * 1_000_000 + nsec // 1000
    raise Malformed("no kernel timestamp")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--first-universe", type=int, default=1)
    ap.add_argument("--universes", type=int, required=True)
    ap.add_argument("--port", type=int, default=5568)
    ap.add_argument("--iface-addr", required=True)
    ap.add_argument("--out", required=True, help="path prefix of OUT.bin and OUT.json")
    ap.add_argument("--rcvbuf", type=int, default=64 << 20)
    ap.add_argument("--sync-universe", type=int, help="also join this universe's group (E1.31 synchronization)")
    a = ap.parse_args(argv)
    unis = range(a.first_universe, a.first_universe + a.universes)
    try:
        Path("/proc/sys/net/ipv4/igmp_max_memberships").write_text(str(a.universes + 64))
    except OSError as e:
        print(f"frame_rx: cannot raise igmp_max_memberships ({e})", file=sys.stderr)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.setsockopt(socket.SOL_SOCKET, 33, a.rcvbuf)  # SO_RCVBUFFORCE (root)
    except OSError:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, a.rcvbuf)
    s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    s.bind(("0.0.0.0", a.port))
    for u in list(unis) + ([a.sync_universe] if a.sync_universe else []):
        group = f"239.255.{u >> 8}.{u & 0xFF}"
        s.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, socket.inet_aton(group) + socket.inet_aton(a.iface_addr))
    s.settimeout(0.2)
    t_rx, t_uni, t_val, t_kind = array.array("q"), array.array("H"), array.array("I"), array.array("B")
    malformed: Counter[str] = Counter()
    other = terminated = unmarked = 0
    stop = {"flag": False}
    signal.signal(signal.SIGTERM, lambda *_: stop.update(flag=True, at=time.monotonic()))
    signal.signal(signal.SIGINT, lambda *_: stop.update(flag=True, at=time.monotonic()))
    Path(a.out + ".ready").write_text("ready\n")
    buf = bytearray(2048)
    view = memoryview(buf)
    anc_size = socket.CMSG_SPACE(16)
    lo, hi = a.first_universe, a.first_universe + a.universes
    # On SIGTERM, read on until the socket has been empty for the 0.2 s timeout: a receiver
    # that fell behind (40,000 datagrams/s into Python on a busy host) still holds seconds of
    # them in its buffer, and leaving them unread would read as frames lost at the end
    # (a likely cause of one run's "recovered" 3.3 s after the lift at 1,000 universes under
    # 88 % CPU pressure). The bench stops the sender first; `drain_s` says how far behind.
    while True:
        try:
            n, anc, _flags, _addr = s.recvmsg_into([buf], anc_size)
        except TimeoutError:
            if stop["flag"]:
                break
            continue
        except InterruptedError:
            continue
        try:
            kind, uni, seq, mark = parse(view, n)
            t = rx_us(anc)
        except Malformed as e:
            malformed[str(e)] += 1
            continue
        if kind == KIND_SYNC:
            t_rx.append(t), t_uni.append(uni), t_val.append(seq), t_kind.append(KIND_SYNC)
            continue
        if not lo <= uni < hi:
            other += 1
            continue
        if mark is None:
            terminated += 1
            continue
        m = marked_show.parse_mark(mark)
        if m is None or m[1] != uni - lo:
            unmarked += 1
            continue
        t_rx.append(t), t_uni.append(uni), t_val.append(m[0]), t_kind.append(KIND_DATA)
    with open(a.out + ".bin", "wb") as f:
        for arr in (t_rx, t_uni, t_val, t_kind):
            arr.tofile(f)
    Path(a.out + ".json").write_text(json.dumps({
        "records": len(t_rx), "drain_s": round(time.monotonic() - stop.get("at", time.monotonic()), 3),
        "malformed": dict(malformed), "other_universe": other,
        "stream_terminated": terminated, "unmarked": unmarked,
        "first_universe": a.first_universe, "universes": a.universes,
    }, indent=1) + "\n")  # fmt: skip
    return 0


def load(prefix: str) -> tuple[array.array, array.array, array.array, array.array]:
    """The records OUT.bin holds, as four arrays of equal length."""
    raw = Path(prefix + ".bin").read_bytes()
    per = 8 + 2 + 4 + 1
    n = len(raw) // per
    out = []
    at = 0
    for code, size in (("q", 8), ("H", 2), ("I", 4), ("B", 1)):
        arr = array.array(code)
        arr.frombytes(raw[at : at + n * size])
        out.append(arr)
        at += n * size
    return tuple(out)  # type: ignore[return-value]


if __name__ == "__main__":
    sys.exit(main())
