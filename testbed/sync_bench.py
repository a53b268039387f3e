#!/usr/bin/env python3
"""Frame sync across units, measured (docs/sync-bench.md). One master and three remotes are
network-namespace hosts on one bridge, each player in its own time namespace (a different
CLOCK_MONOTONIC offset), all sending DDP to one pole-simulator host that tells them apart by
source address. The test sequence's pixels encode the frame number. One attempt per cell, in
one run; a cell whose guard fails is UNMEASURABLE with the reason.

    sync_bench.py run --player BIN [--seconds 60] [--cells clean,loss,restart,control,interop]
                      [--json F] [--out DIR]
    sync_bench.py down --id PID              # remove what the killed run PID left (synctestPID-*)
    sync_bench.py down                       # remove every synctest* namespace on the host,
                                             # other runs' too: an operator's, never a suite's

Cells: clean; loss (1 % loss and 0-4 ms delay, i.e. 2 ms +- 2 ms, on the sync path only);
restart (the master killed half-way and started again 1 s later); control (the same units
standalone, started 100 ms apart); interop (an FPP-layout master drives a pfx remote; an
FPP-layout receiver decodes a pfx master's packets and checks its v3 ping byte by byte).

Internal subcommands, run inside the namespaces: `pole` (the receiver) and `relay` (the
sync-path impairment).
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import random
import select
import signal
import socket
import struct
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import fpp_peer  # noqa: E402
import netns  # noqa: E402

PREFIX = "synctest"
SUBNET = "10.79.0"
UNITS = {"m": f"{SUBNET}.1", "r1": f"{SUBNET}.2", "r2": f"{SUBNET}.3", "r3": f"{SUBNET}.4"}
POLE = ("pole", f"{SUBNET}.100")
RELAY = ("relay", f"{SUBNET}.50")
PEER = ("peer", f"{SUBNET}.60")
DDP_PORT = 4048
SYNC_PORT = 32320
RELAYED_PORT = 32321  # the loss cell's remotes listen here; only the relay sends to it
PIXELS = 4
SEQ_NAME = "synctest.fseq"
SHORT_NAME = "synctest-short.fseq"
TAG = bytes([0x5A, 0xA5, 0x3C])
MARGIN_MS = 4.0  # a frame is measured when its start lies this far from the master's ticks
MATCH_WINDOW_S = 1.0  # the same frame on two units is matched within this much of the master's
WANT_RANGES = f"0-{PIXELS * 3 - 1}"  # the units' one output: start_channel 1, PIXELS x 3 channels


# ---------------------------------------------------------------------------- the sequence
def frame_pixels(f: int) -> bytes:
    """Pixel 0 = the frame number (24 bits, big-endian), pixel 1 its complement, pixel 2 a
    tag, pixel 3 the number again: a frame the player altered does not decode."""
    n = bytes([(f >> 16) & 0xFF, (f >> 8) & 0xFF, f & 0xFF])
    return n + bytes(255 - b for b in n) + TAG + n


def decode_pixels(data: bytes) -> int | None:
    if len(data) < 12 or data[6:9] != TAG:
        return None
    n = data[0:3]
    if data[3:6] != bytes(255 - b for b in n) or data[9:12] != n:
        return None
    return (n[0] << 16) | (n[1] << 8) | n[2]


def write_fseq(path: Path, frames: int, step_ms: int) -> None:
    """Uncompressed FSEQ v2.0 (docs/formats.md): no block table, no sparse ranges, no
    variable headers; frame f at 32 + f x channels."""
    chans = PIXELS * 3
    hdr = b"PSEQ" + struct.pack("<HBBHIIBB", 32, 0, 2, 32, chans, frames, step_ms, 0)
    hdr += struct.pack("<BBBBQ", 0, 0, 0, 0, int(time.time() * 1e6))
    assert len(hdr) == 32
    with open(path, "wb") as fh:
        fh.write(hdr)
        for f in range(frames):
            fh.write(frame_pixels(f))


# ---------------------------------------------------------------------------- analysis (pure)
def percentile(xs: list[float], q: float) -> float | None:
    if not xs:
        return None
    s = sorted(xs)
    k = min(len(s) - 1, max(0, int(round(q / 100.0 * (len(s) - 1)))))
    return s[k]


def episodes(packets: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """(rx_us, frame) of every packet whose frame differs from the one before: when each
    frame was first shown."""
    out, last = [], None
    for t, f in packets:
        if f != last:
            out.append((t, f))
            last = f
    return out


def median_interval_us(packets: list[tuple[int, int]]) -> float | None:
    d = [b[0] - a[0] for a, b in zip(packets, packets[1:]) if 0 < b[0] - a[0] < 200_000]
    return percentile(d, 50)


def robust_frames(master_eps: list[tuple[int, int]], step_us: float, period_us: float, margin_us: float) -> dict:
    """The master's episodes whose frame starts at least `margin_us` from either neighbouring
    tick: there a unit's first tick showing the frame does not depend on a timeline error
    smaller than the margin, so the arrival spread is the units' tick alignment. Per segment
    (a new segment where the frame goes back, or after a gap of half a second), the timeline's
    zero is the earliest `rx - frame x step` (a tick never precedes its frame's start).
    When the step is the period (within 50 us) every tick shows its own frame and nothing
    aliases: every frame is measured. Returns {(segment, frame): rx_us}."""
    segs: list[list[tuple[int, int]]] = []
    for t, f in master_eps:
        if not segs or f < segs[-1][-1][1] or t - segs[-1][-1][0] > 500_000:
            segs.append([])
        segs[-1].append((t, f))
    out = {}
    for i, seg in enumerate(segs):
        t0 = min(t - f * step_us for t, f in seg)
        for t, f in seg:
            m = t - f * step_us - t0
            if abs(step_us - period_us) < 50 or margin_us <= m <= period_us - margin_us:
                out[(i, f)] = t
    return out


def spread_cell(by_unit: dict[str, list[tuple[int, int]]], master: str, step_ms: float, margin_ms: float = MARGIN_MS) -> dict:
    """Per measured frame, max - min of the four units' first-arrival times (ms)."""
    res: dict = {"unmeasurable": None}
    for u, pk in by_unit.items():
        if not pk:
            res["unmeasurable"] = f"unit {u}: no frames reached the pole"
            return res
    eps = {u: episodes(pk) for u, pk in by_unit.items()}
    period = median_interval_us(by_unit[master]) or 1e6 / 60
    rob = robust_frames(eps[master], step_ms * 1000, period, margin_ms * 1000)
    index = {u: {} for u in eps}
    for u, e in eps.items():
        for t, f in e:
            index[u].setdefault(f, []).append(t)
    spreads, offsets, missing = [], {u: [] for u in eps if u != master}, 0
    for (_seg, f), tm in sorted(rob.items(), key=lambda kv: kv[1]):
        row = {}
        for u in eps:
            near = [t for t in index[u].get(f, []) if abs(t - tm) <= MATCH_WINDOW_S * 1e6]
            if not near:
                break
            row[u] = min(near, key=lambda t: abs(t - tm))
        else:
            spreads.append((max(row.values()) - min(row.values())) / 1000.0)
            for u in offsets:
                offsets[u].append((row[u] - row[master]) / 1000.0)
            continue
        missing += 1
    res.update(
        frames_master=len(eps[master]), measured=len(spreads), not_on_every_unit=missing,
        period_ms=round(period / 1000, 3),
        p50=_r(percentile(spreads, 50)), p99=_r(percentile(spreads, 99)), max=_r(max(spreads) if spreads else None),
        offset_p50={u: _r(percentile(o, 50)) for u, o in offsets.items()},
    )  # fmt: skip
    if len(spreads) < 50:
        res["unmeasurable"] = f"only {len(spreads)} frames shown by every unit (need 50)"
    return res


def _r(v):
    return None if v is None else round(v, 3)


# ---------------------------------------------------------------------------- in-namespace tools
def run_pole(a) -> int:
    """Every DDP datagram: `src rx_us frame` (B for an all-zero frame, X for undecodable).
    On SIGUSR1 it reads what is already queued, flushes, and writes the request's count to
    <out>.flushed: the bench's flush_pole() waits for that instead of for the half-second
    flush."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    s.setsockopt(socket.SOL_SOCKET, getattr(socket, "SO_TIMESTAMPNS", 35), 1)
    s.bind(("0.0.0.0", a.port))
    out = open(a.out, "a", buffering=1 << 16)
    stop = {"flag": False}
    asked = {"n": 0}
    signal.signal(signal.SIGTERM, lambda *_: stop.update(flag=True))
    signal.signal(signal.SIGUSR1, lambda *_: asked.update(n=asked["n"] + 1))
    Path(a.out + ".ready").write_text("1\n")
    last_flush = time.monotonic()
    done = 0
    while not stop["flag"]:
        try:
            r, _, _ = select.select([s], [], [], 0.2)
        except InterruptedError:
            continue
        if r:
            pole_record(s, out)
        if asked["n"] != done:
            done = asked["n"]
            # What arrived before the request is in the file when the bench reads it.
            for _ in range(100_000):
                if not select.select([s], [], [], 0)[0]:
                    break
                pole_record(s, out)
            out.flush()
            Path(a.out + ".flushed").write_text(f"{done}\n")
            last_flush = time.monotonic()
        elif time.monotonic() - last_flush > 0.5:
            out.flush()
            last_flush = time.monotonic()
    out.close()
    return 0


def pole_record(s: socket.socket, out) -> None:
    """One datagram from `s`, written as its `src rx_us frame` line."""
    data, anc, _fl, (src, _p) = s.recvmsg(2048, 256)
    rx = time.time_ns() // 1000
    for level, typ, d in anc:
        if level == socket.SOL_SOCKET and len(d) >= 16:
            sec, ns = struct.unpack("qq", d[:16])
            rx = sec * 1_000_000 + ns // 1000
    payload = data[10:] if len(data) >= 10 and not data[0] & 0x10 else data[14:]
    f = decode_pixels(payload)
    if f is not None:
        tag = str(f)
    else:
        tag = "B" if not payload.strip(b"\x00") else "X"
    out.write(f"{src} {rx} {tag}\n")


def _ip_udp(src: str, dst: str, sport: int, dport: int, payload: bytes) -> bytes:
    udp = struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload  # no UDP checksum (IPv4)
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 0, 0x4000, 64, 17, 0,
                     socket.inet_aton(src), socket.inet_aton(dst))  # fmt: skip
    return ip + udp  # the kernel fills the IP id and checksum


def run_relay(a) -> int:
    """The sync path's impairment (this kernel has no netem): every MultiSync datagram from
    the master, to each remote on its own, is dropped with probability --loss or delayed
    uniformly in [0, 2 x --jitter-ms] ms, and re-sent with the master's source address."""
    rx = fpp_peer.open_socket(a.iface_addr, a.port)
    raw = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    rng = random.Random(a.seed)
    targets = [(t.split(":")[0], int(t.split(":")[1])) for t in a.to]
    queue: list[tuple[float, int, bytes, str]] = []
    n = 0
    stats = {"received": 0, "dropped": 0, "sent": 0}
    stop = {"flag": False}
    signal.signal(signal.SIGTERM, lambda *_: stop.update(flag=True))
    Path(a.report + ".ready").write_text("1\n")
    while not stop["flag"]:
        now = time.monotonic()
        while queue and queue[0][0] <= now:
            _, _, pkt, dst = heapq.heappop(queue)
            try:
                raw.sendto(pkt, (dst, 0))
                stats["sent"] += 1
            except OSError:
                pass
        wait = 0.2 if not queue else max(0.0, queue[0][0] - time.monotonic())
        try:
            r, _, _ = select.select([rx], [], [], wait)
        except InterruptedError:
            continue
        if not r:
            continue
        data, (src, sport) = rx.recvfrom(2048)
        if src != a.master:
            continue
        stats["received"] += 1
        for dst, dport in targets:
            if rng.random() < a.loss:
                stats["dropped"] += 1
                continue
            n += 1
            due = time.monotonic() + rng.uniform(0.0, 2 * a.jitter_ms) / 1000.0
            heapq.heappush(queue, (due, n, _ip_udp(src, dst, sport, dport, data), dst))
    Path(a.report).write_text(json.dumps(stats) + "\n")
    return 0


# ---------------------------------------------------------------------------- the testbed
class Bed:
    """One bridge in <prefix><id>-sw; hosts m, r1..r3, pole, relay, peer. Built and torn down
    by netns.Namespaces: deleting exactly the namespaces this run made removes every link."""

    def __init__(self, run_dir: Path, tb_id: str, prefix: str = PREFIX):
        self.id = tb_id
        self.name = f"{prefix}{tb_id}"
        self.nets = netns.Namespaces(self.name)
        self.run_dir = run_dir
        self.procs: dict[str, subprocess.Popen] = {}
        self.up_ = False

    def ns(self, role: str) -> str:
        return self.nets.name(role)

    def hosts(self) -> list[tuple[str, str]]:
        return list(UNITS.items()) + [POLE, RELAY, PEER]

    def up(self) -> None:
        if netns.list_namespaces(self.name + "-"):
            raise RuntimeError(f"{self.name} already exists: `{Path(sys.argv[0]).name} down --id {self.id}` first")
        self.up_ = True
        self.nets.bridge("sw", ["mcast_snooping", "0"])
        for role, addr in self.hosts():
            self.nets.port("sw", role, f"{addr}/24")

    def down(self) -> None:
        for name in list(self.procs):
            self.stop(name)
        if self.up_:
            self.nets.teardown()
            self.up_ = False

    def spawn(self, name: str, role: str, argv: list[str], mono_offset: int | None = None) -> subprocess.Popen:
        pre = ["ip", "netns", "exec", self.ns(role)]
        if mono_offset is not None:
            # Its own time namespace: CLOCK_MONOTONIC (and BOOTTIME) differ from every other unit's.
            pre += ["unshare", "--time", "--fork", f"--monotonic={mono_offset}", f"--boottime={mono_offset}", "--"]
        log = open(self.run_dir / f"{name}.log", "w")
        p = subprocess.Popen(pre + argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        self.procs[name] = p
        return p

    def stop(self, name: str, sig: int = signal.SIGTERM, timeout: float = 5.0) -> int | None:
        p = self.procs.pop(name, None)
        if p is None:
            return None
        if p.poll() is None:
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                pass
            try:
                p.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        return p.returncode

    def log_text(self, name: str) -> str:
        try:
            return (self.run_dir / f"{name}.log").read_text()
        except OSError:
            return ""

    def log_tail(self, name: str, n: int = 300) -> str:
        try:
            return (self.run_dir / f"{name}.log").read_text()[-n:].strip().replace("\n", " | ")
        except OSError:
            return ""

    def profile(self, role: str) -> dict | None:
        code = ("import sys,urllib.request;sys.stdout.write(urllib.request.urlopen("
                "'http://127.0.0.1:8080/profile',timeout=2).read().decode())")  # fmt: skip
        try:
            r = subprocess.run(["ip", "netns", "exec", self.ns(role), sys.executable, "-c", code],
                               capture_output=True, text=True, timeout=6)  # fmt: skip
            return json.loads(r.stdout) if r.returncode == 0 else None
        except (subprocess.TimeoutExpired, json.JSONDecodeError):
            return None


def wait_file(path: Path, timeout: float, proc: subprocess.Popen) -> None:
    end = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None or time.monotonic() > end:
            raise RuntimeError(f"{path.name} never appeared")
        time.sleep(0.05)


def wait_until(what: str, cond, timeout: float, proc: subprocess.Popen | None = None) -> None:
    """Polls `cond()` every 50 ms until it holds. A RuntimeError naming `what` when `proc`
    exits first or after `timeout` s (the cell is then UNMEASURABLE with that reason):
    waiting for the condition, never for a time that a loaded host may overrun."""
    end = time.monotonic() + timeout
    while not cond():
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{what}: the process exited ({proc.returncode})")
        if time.monotonic() > end:
            raise RuntimeError(f"{what}: not within {timeout:.0f} s")
        time.sleep(0.05)


def sync_listening(proc_net: str, port: int, group: str) -> bool:
    """From a namespace's /proc/net/udp and /proc/net/igmp (one text): a socket bound to UDP
    `port` and `group` joined, i.e. MultiSync sent now reaches the host."""
    bound = any(len(f) > 1 and f[1].endswith(f":{port:04X}") for f in (ln.split() for ln in proc_net.splitlines()))
    # /proc/net/igmp prints the group's network-order bytes as a host-order integer.
    joined = f"{struct.unpack('=I', socket.inet_aton(group))[0]:08X}" in proc_net.split()
    return bound and joined


def wait_sync_listening(bed, role: str, port: int, proc: subprocess.Popen, timeout: float = 10.0) -> None:
    """Until `role`'s sync socket is bound and joined (a remote or FPP receiver ready for
    its master's first packet)."""

    def ready() -> bool:
        r = subprocess.run(["ip", "netns", "exec", bed.ns(role), "cat", "/proc/net/udp", "/proc/net/igmp"],
                           capture_output=True, text=True)  # fmt: skip
        return sync_listening(r.stdout, port, fpp_peer.GROUP)

    wait_until(f"{role} listening for MultiSync on {port}", ready, timeout, proc)


def flush_pole(bed, pole_log: Path, timeout: float = 5.0) -> None:
    """Until the pole has written out every datagram received so far (see run_pole)."""
    flushed = Path(str(pole_log) + ".flushed")

    def count() -> int:
        try:
            return int(flushed.read_text())
        except (OSError, ValueError):
            return 0

    before = count()
    bed.procs["pole"].send_signal(signal.SIGUSR1)
    wait_until("the pole's log flushed", lambda: count() > before, timeout, bed.procs["pole"])


PROFILE_YAML = f"""name: synctest-ddp
description: sync bench pole, {PIXELS} pixels of DDP
protocol: ddp
pixels: {PIXELS}
pixel_format: rgb8
color_order: rgb
destination: {POLE[1]}:{DDP_PORT}
"""


def unit_yaml(unit: str, cfg_dir: Path, fps: int, sync: dict | None, seq: str | None) -> str:
    y = [f"# Written by testbed/sync_bench.py for unit {unit}.",
         "interface: eth0", f"fps: {fps}", "http: 127.0.0.1:8080", "tx_queue: kernel",
         f"profiles_dir: {cfg_dir.parent.parent / 'profiles'}", f"unit_id: synctest-{unit}",
         "outputs:", "  - name: pole", "    profile: synctest-ddp",
         f"    destination: {POLE[1]}:{DDP_PORT}", "    start_channel: 1"]  # fmt: skip
    if seq is not None:
        y += ["content:", "  loop: false", "  playlist:", f"    - fseq: {seq}"]
    if sync is not None:
        y.append("sync:")
        for k, v in sync.items():
            y.append(f"  {k}: {json.dumps(v) if not isinstance(v, str) else v}")
    return "\n".join(y) + "\n"


# ---------------------------------------------------------------------------- cells
@dataclass
class Ctx:
    bed: Bed
    a: argparse.Namespace
    seq_dir: Path
    pole_log: Path
    cell_no: int = 0
    results: list = field(default_factory=list)


def read_pole(path: Path, t0_us: int, t1_us: int) -> dict[str, list[tuple[int, int]]]:
    by: dict[str, list[tuple[int, int]]] = {}
    with open(path) as fh:
        for line in fh:
            parts = line.split()
            if len(parts) != 3:
                continue
            src, t, tag = parts[0], int(parts[1]), parts[2]
            if t0_us <= t <= t1_us and tag.isdigit():
                by.setdefault(src, []).append((t, int(tag)))
    return by


def start_unit(c: Ctx, unit: str, sync: dict | None, with_content: bool, offset: int, name: str | None = None) -> None:
    d = c.bed.run_dir / f"cell{c.cell_no}" / unit
    d.mkdir(parents=True, exist_ok=True)
    seq = str(c.seq_dir / SEQ_NAME) if with_content else None
    (d / "show.yaml").write_text(unit_yaml(unit, d, c.a.fps, sync, seq))
    c.bed.spawn(name or unit, unit, [c.a.player, "run", "--config", str(d / "show.yaml")], mono_offset=offset)


def synced_cell(c: Ctx, cell: str) -> dict:
    a, bed = c.a, c.bed
    c.cell_no += 1
    (bed.run_dir / f"cell{c.cell_no}").mkdir(exist_ok=True)
    (bed.run_dir / "profiles").mkdir(exist_ok=True)
    (bed.run_dir / "profiles" / "synctest-ddp.yaml").write_text(PROFILE_YAML)
    base = 1000 * c.cell_no * 10
    res: dict = {"cell": cell}
    remote_port = RELAYED_PORT if cell == "loss" else SYNC_PORT
    try:
        if cell == "loss":
            rep = bed.run_dir / f"cell{c.cell_no}-relay.json"
            p = bed.spawn("relay", RELAY[0], [sys.executable, str(HERE / "sync_bench.py"), "relay",
                          "--iface-addr", RELAY[1], "--master", UNITS["m"], "--loss", "0.01", "--jitter-ms", "2",
                          "--seed", "14", "--report", str(rep)]
                          + sum([["--to", f"{UNITS[r]}:{RELAYED_PORT}"] for r in ("r1", "r2", "r3")], []))  # fmt: skip
            wait_file(Path(str(rep) + ".ready"), 5, p)
        remotes = ["r1", "r2", "r3"]
        if cell == "control":
            # The same units, unsynced: each plays the show itself, started 100 ms apart.
            for i, u in enumerate(["m"] + remotes):
                start_unit(c, u, None, True, base + 1000 * (i + 1))
                time.sleep(0.1)  # the offset under test, not an ordering
        else:
            for i, u in enumerate(remotes):
                start_unit(c, u, {"role": "remote", "port": remote_port, "sequences": str(c.seq_dir),
                                  "master_lost": {"after_s": 5, "then": "stop"}}, False, base + 1000 * (i + 2))  # fmt: skip
            for u in remotes:
                wait_sync_listening(bed, u, remote_port, bed.procs[u])
            start_unit(c, "m", {"role": "master", "port": SYNC_PORT, "transport": "multicast"}, True, base + 1000)
        time.sleep(a.warmup)
        t0 = time.time()
        if cell == "restart":
            time.sleep(a.seconds / 2)
            bed.stop("m", sig=signal.SIGKILL)  # a crash: no stop packet
            res["master_killed_at_s"] = round(time.time() - t0, 2)
            time.sleep(1.0)  # the outage under test: started again 1 s later
            start_unit(c, "m", {"role": "master", "port": SYNC_PORT, "transport": "multicast"}, True,
                       base + 1000 * 7, name="m")  # fmt: skip
            time.sleep(max(0.0, a.seconds - (time.time() - t0)))
        else:
            time.sleep(a.seconds)
        t1 = time.time()
        dead = [u for u in UNITS if u in bed.procs and bed.procs[u].poll() is not None]
        res["profiles"] = {u: (bed.profile(u) or {}).get("sync") for u in UNITS}
    finally:
        logs = {u: bed.log_tail(u) for u in UNITS}
        for u in UNITS:
            bed.stop(u)
        if cell == "loss":
            bed.stop("relay")
            try:
                res["relay"] = json.loads((bed.run_dir / f"cell{c.cell_no}-relay.json").read_text())
            except (OSError, json.JSONDecodeError):
                res["relay"] = None
    flush_pole(bed, c.pole_log)
    by_ip = read_pole(c.pole_log, int(t0 * 1e6), int(t1 * 1e6))
    by_unit = {u: by_ip.get(ip, []) for u, ip in UNITS.items()}
    res.update(spread_cell(by_unit, "m", a.step_ms))
    if dead and res["unmeasurable"] is None:
        u = dead[0]
        res["unmeasurable"] = f"unit {u} exited during the cell: {logs[u]}"
    if res["unmeasurable"] and any(not by_unit[u] for u in UNITS):
        u = next(u for u in UNITS if not by_unit[u])
        res["unmeasurable"] += f" (its log: {logs[u] or 'empty'})"
    res["seconds"] = round(t1 - t0, 1)
    return res


def unit_profile(bed, unit: str) -> dict | None:
    """The unit's own /profile (its HTTP on 127.0.0.1:8080 inside its namespace)."""
    code = ("import urllib.request,sys;"
            "sys.stdout.write(urllib.request.urlopen('http://127.0.0.1:8080/profile',timeout=3).read().decode())")
    try:
        out = subprocess.run(["ip", "netns", "exec", bed.ns(unit), sys.executable, "-c", code],
                             capture_output=True, text=True, timeout=10).stdout
        return json.loads(out)
    except (OSError, ValueError, subprocess.SubprocessError):
        return None


def interop_cells(c: Ctx) -> list[dict]:
    a, bed = c.a, c.bed
    out = []
    # 1. An FPP-layout master (this file's peer) drives a pfx remote.
    c.cell_no += 1
    res: dict = {"cell": "interop/fpp-master->pfx-remote", "unmeasurable": None, "checks": []}
    frames = int(8000 / a.step_ms)
    rep = bed.run_dir / "fpp-master.json"
    start_unit(c, "r1", {"role": "remote", "port": SYNC_PORT, "sequences": str(c.seq_dir),
                         "master_lost": {"after_s": 5, "then": "stop"}}, False, 55_000)  # fmt: skip
    wait_sync_listening(bed, "r1", SYNC_PORT, bed.procs["r1"])
    t0 = time.time()
    m = bed.spawn("fpp-master", PEER[0], [sys.executable, str(HERE / "fpp_peer.py"), "master", "--name", SEQ_NAME,
                  "--frames", str(frames), "--step-ms", str(a.step_ms), "--iface-addr", PEER[1], "--ping",
                  "--report", str(rep)])  # fmt: skip
    m.wait(frames * a.step_ms / 1000 + 10)
    t_stop = time.time()
    time.sleep(1.5)  # the 1.5 s after the master's stop under test (the remote sends nothing)
    r1_alive = bed.procs["r1"].poll() is None
    log = bed.log_tail("r1")
    prof = unit_profile(bed, "r1")
    bed.stop("r1")
    bed.stop("fpp-master")
    flush_pole(bed, c.pole_log)
    try:
        started = json.loads(rep.read_text())["started_at"]
    except (OSError, json.JSONDecodeError, KeyError):
        started = None
    pk = read_pole(c.pole_log, int(t0 * 1e6), int((t_stop + 1.5) * 1e6)).get(UNITS["r1"], [])
    if started is None:
        res["unmeasurable"] = "the FPP-layout master wrote no report"
    elif not pk:
        res["unmeasurable"] = f"the pfx remote sent no frames to the pole (its log: {log or 'empty'})"
    else:
        step = a.step_ms / 1000
        during = [(t / 1e6, f) for t, f in pk if t / 1e6 <= t_stop]
        errs = [f - (t - started) / step for t, f in during]
        within = sum(1 for e in errs if abs(e) <= 2)
        after = [f for t, f in pk if t / 1e6 > t_stop + 0.5]
        shown = {f for _, f in during}
        res.update(frames_seen=len(shown), frame_error_p50=_r(percentile(errs, 50)),
                   frame_error_p99=_r(percentile([abs(e) for e in errs], 99)))  # fmt: skip
        since = (prof or {}).get("since_start", {})
        skipped = since.get("skipped_ticks")
        res["checks"] = [
            (len(shown) >= 0.8 * frames * (1 - 1.0 / 8), f"the remote showed {len(shown)} of the master's {frames} frames"),
            # It followed the master and went back to its own clock at the stop: neither
            # is a skip (docs/profile-api.md). A loaded host may really skip a few.
            (skipped is not None and skipped <= max(10, frames // 50),
             f"the remote's /profile counts {skipped} skipped ticks in {since.get('frames')} frames (want few, not one per frame followed)"),
            (within >= 0.95 * len(errs), f"{within} of {len(errs)} frames within 2 frames of the master's timeline"),
            (not after, f"after the master's stop the remote sent {len(after)} numbered frames (want 0)"),
            # A master's stop ends the remote's following, not the remote: it plays on.
            (r1_alive, f"the remote {'is still running' if r1_alive else 'exited'} after the master's stop"),
        ]
    out.append(res)

    # 2. An FPP-layout receiver decodes a pfx master: open, start, syncs, stop; a discover
    #    ping gets a v3 answer that is right byte by byte.
    c.cell_no += 1
    res = {"cell": "interop/pfx-master->fpp-receiver", "unmeasurable": None, "checks": []}
    rep = bed.run_dir / "fpp-receiver.json"
    short_s = 4.0
    lis = bed.spawn("fpp-listen", PEER[0], [sys.executable, str(HERE / "fpp_peer.py"), "listen", "--seconds",
                    str(short_s + 5), "--iface-addr", PEER[1], "--discover", "multicast", "--discover-after", "2.5",
                    "--report", str(rep)])  # fmt: skip
    wait_sync_listening(bed, PEER[0], SYNC_PORT, lis)
    d = bed.run_dir / f"cell{c.cell_no}" / "m"
    d.mkdir(parents=True, exist_ok=True)
    y = unit_yaml("m", d, a.fps, {"role": "master", "port": SYNC_PORT, "transport": "multicast"},
                  str(c.seq_dir / SHORT_NAME))  # fmt: skip
    (d / "show.yaml").write_text(y)
    bed.spawn("m", "m", [a.player, "run", "--config", str(d / "show.yaml")], mono_offset=66_000)
    lis.wait(short_s + 15)
    log = bed.log_tail("m")
    bed.stop("m")
    bed.stop("fpp-listen")
    try:
        got = json.loads(rep.read_text())
    except (OSError, json.JSONDecodeError) as e:
        res["unmeasurable"] = f"the FPP-layout receiver wrote no report ({e})"
        out.append(res)
        return out
    syncs = [s for s in got["syncs"] if s["src"] == UNITS["m"]]
    pings = [p for p in got["pings"] if p["src"] == UNITS["m"]]
    if not syncs and not pings:
        res["unmeasurable"] = f"nothing from the pfx master (its log: {log or 'empty'}); dropped: {got['summary']['dropped']}"
        out.append(res)
        return out
    acts = [s["action_name"] for s in syncs]
    frames_synced = [s["frame"] for s in syncs if s["action_name"] == "sync"]
    names = {s["name"] for s in syncs}
    gaps = [b - a_ for a_, b in zip(frames_synced, frames_synced[1:])]
    early = [g for f, g in zip(frames_synced[1:], gaps) if f <= 32]
    late = [g for f, g in zip(frames_synced[1:], gaps) if f > 42]
    secs_ok = all(abs(s["seconds"] - s["frame"] * a.step_ms / 1000) <= a.step_ms / 1000 for s in syncs
                  if s["action_name"] == "sync")  # fmt: skip
    asked = got.get("discover_sent_at") or float("inf")
    discover_answers = [p for p in pings if p["t"] >= asked]
    v3_answers = [p for p in discover_answers if p["version"] == 3 and p["discover"] == 0]
    v3_ok = [p for p in v3_answers if not p["problems"] and p["len"] == fpp_peer.PING_V3_LEN]
    res["syncs"] = {k: acts.count(k) for k in set(acts)}
    res["ping_problems"] = [p["problems"] for p in pings if p["problems"]][:3]
    res["ping_hex"] = v3_answers[0]["hex"] if v3_answers else None
    first = lambda k: acts.index(k) if k in acts else None  # noqa: E731
    res["checks"] = [
        (names == {SHORT_NAME}, f"file name in every sync packet: {sorted(names)} (want ['{SHORT_NAME}'])"),
        (first("open") is not None and first("start") is not None and first("open") < first("start"),
         f"open before start (order seen: {acts[:3]})"),
        (len(frames_synced) >= short_s * 2, f"{len(frames_synced)} sync packets in {short_s} s"),
        (bool(early) and max(early) <= 4, f"syncs every <= 4 frames up to frame 32 (gaps {early[:8]})"),
        (bool(late) and all(9 <= g <= 11 for g in late), f"then about every 10 frames (gaps {sorted(set(late))})"),
        (secs_ok, "seconds elapsed = frame x step time in every sync"),
        ("stop" in acts and acts.index("stop") > acts.index("start") if "start" in acts else False,
         "a stop after the sequence ends"),
        (not got["summary"]["dropped"], f"no datagram FPP would drop ({got['summary']['dropped'][:2]})"),
        (bool(v3_ok), f"the master answers a discover ping with a v3 ping, right byte by byte ({len(v3_ok)} of "
                      f"{len(discover_answers)} pings after it; problems {res['ping_problems']})"),
        (any(p["mode"] & fpp_peer.MODE_SENDS_MULTISYNC for p in v3_ok), "its mode byte says it sends MultiSync (0x04)"),
        # FPP's ranges are zero-based channel numbers: start_channel 1 with 12 channels is 0-11.
        (any(p.get("ranges") == WANT_RANGES for p in v3_answers),
         f"its channel ranges are FPP's zero-based {WANT_RANGES!r} (got {sorted({p.get('ranges') for p in v3_answers})})"),
    ]  # fmt: skip
    out.append(res)
    return out


def print_results(results: list[dict], a) -> None:
    print(f"\nsync spread across 4 units, per frame number (ms), {a.seconds:.0f} s per cell, "
          f"{a.fps} fps, sequence step {a.step_ms} ms")  # fmt: skip
    print(f"{'cell':10s} {'p50':>8s} {'p99':>8s} {'max':>8s} {'frames':>7s} {'missing':>7s}  remote offsets p50 (ms)")
    for r in results:
        if r["cell"].startswith("interop"):
            continue
        if r.get("unmeasurable"):
            print(f"{r['cell']:10s} UNMEASURABLE: {r['unmeasurable']}")
            continue
        off = " ".join(f"{u}:{v}" for u, v in r["offset_p50"].items())
        print(f"{r['cell']:10s} {r['p50']:8.3f} {r['p99']:8.3f} {r['max']:8.3f} {r['measured']:7d} "
              f"{r['not_on_every_unit']:7d}  {off}"
              f"{'  relay ' + json.dumps(r['relay']) if r.get('relay') else ''}")  # fmt: skip
        for u, sy in (r.get("profiles") or {}).items():
            if sy:
                print(f"{'':10s}   {u} /profile sync: {json.dumps(sy, sort_keys=True)[:300]}")
    for r in results:
        if not r["cell"].startswith("interop"):
            continue
        print(f"\n{r['cell']}")
        if r.get("unmeasurable"):
            print(f"  UNMEASURABLE: {r['unmeasurable']}")
        for ok, what in r.get("checks", []):
            print(f"  {'ok  ' if ok else 'FAIL'} {what}")


def run(a) -> int:
    if os.geteuid() != 0:
        print("skipped: needs root (network namespaces, time namespaces)")
        return 77
    if not Path(a.player).is_file():
        print(f"sync_bench: no player binary at {a.player}; build it (cargo build -p pfx-player) or pass --player")
        return 2
    run_dir = Path(a.out or f"/tmp/{PREFIX}-{os.getpid()}")
    run_dir.mkdir(parents=True, exist_ok=True)
    bed = Bed(run_dir, str(os.getpid()))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    seq_dir = run_dir / "seq"
    seq_dir.mkdir(exist_ok=True)
    cells = a.cells.split(",")
    # Long enough for warm-up, the cell and the restart's replay from frame 0.
    write_fseq(seq_dir / SEQ_NAME, int((a.warmup + a.seconds + 10) * 1000 / a.step_ms), a.step_ms)
    write_fseq(seq_dir / SHORT_NAME, int(4000 / a.step_ms), a.step_ms)
    pole_log = run_dir / "pole.log"
    pole_log.unlink(missing_ok=True)
    Path(str(pole_log) + ".flushed").unlink(missing_ok=True)
    c = Ctx(bed, a, seq_dir, pole_log)
    results = []
    try:
        bed.up()
        p = bed.spawn("pole", POLE[0], [sys.executable, str(HERE / "sync_bench.py"), "pole", "--out", str(pole_log)])
        wait_file(Path(str(pole_log) + ".ready"), 5, p)
        for cell in cells:
            if cell == "interop":
                try:
                    results += interop_cells(c)
                except Exception as e:  # one attempt: reported, not retried
                    results.append({"cell": "interop", "unmeasurable": f"testbed error: {e}", "checks": []})
                continue
            print(f"--- cell {cell} ({a.seconds:.0f} s)", flush=True)
            try:
                results.append(synced_cell(c, cell))
            except Exception as e:
                results.append({"cell": cell, "unmeasurable": f"testbed error: {e}"})
    finally:
        bed.down()
    print_results(results, a)
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=1, default=str) + "\n")
    return 0


def down(prefix: str, tb_id: str | None) -> int:
    """`down --id ID`: the namespaces of run ID (named <prefix>ID-<role>); without: all <prefix>*."""
    gone = netns.down_all(f"{prefix}{tb_id}-" if tb_id else prefix)
    print(f"removed {len(gone)} namespace(s)")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--player", default=os.environ.get("PFX_PLAYER", str(HERE.parent / "target/debug/pfx-player")))
    r.add_argument("--seconds", type=float, default=60.0, help="measured seconds per cell")
    r.add_argument("--warmup", type=float, default=5.0, help="seconds after the master starts, not measured")
    r.add_argument("--cells", default="clean,loss,restart,control,interop")
    r.add_argument("--fps", type=int, default=60)
    r.add_argument("--step-ms", type=int, default=17, help="the test sequence's step time")
    r.add_argument("--json")
    r.add_argument("--out", help="run directory (default /tmp/synctest-PID)")
    d = sub.add_parser("down")
    d.add_argument("--id", help="the run's id (its pid): remove that run's namespaces only")
    p = sub.add_parser("pole")
    p.add_argument("--port", type=int, default=DDP_PORT)
    p.add_argument("--out", required=True)
    y = sub.add_parser("relay")
    y.add_argument("--iface-addr", required=True)
    y.add_argument("--port", type=int, default=SYNC_PORT)
    y.add_argument("--master", required=True)
    y.add_argument("--to", action="append", required=True, help="REMOTE:PORT, repeatable")
    y.add_argument("--loss", type=float, default=0.01)
    y.add_argument("--jitter-ms", type=float, default=2.0)
    y.add_argument("--seed", type=int, default=1)
    y.add_argument("--report", required=True)
    a = ap.parse_args(argv)
    if a.cmd == "run":
        return run(a)
    if a.cmd == "down":
        return down(PREFIX, a.id)
    if a.cmd == "pole":
        return run_pole(a)
    return run_relay(a)


if __name__ == "__main__":
    sys.exit(main())
