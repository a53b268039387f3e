#!/usr/bin/env python3
"""The network testbed: a venue in network namespaces. See docs/testbed.md.

    testbed/testbed up [--switch managed|unmanaged] [--fast-port] [--id ID]
    testbed/testbed down [--id ID]          # without --id: everything named pfxtb*
    testbed/testbed status
    testbed/testbed run SCENARIO [args]     # smoke | latency2x2 | stall | all (bench.py)

Every namespace is named pfxtb<ID>-<role>; the bridge and all veth ends live inside them and
nothing is created in the host's namespace, so deleting the namespaces removes every link and
qdisc. `run` tears down on exit, on an exception, on Ctrl-C and on SIGTERM; `down` (no --id)
removes whatever a killed run left behind.

Topology (all in 10.77.0.0/24, inside the namespaces only):

    pfxtb<ID>-player 10.77.0.1 eth0 ── p-player ┐
    pfxtb<ID>-flood  10.77.0.2 eth0 ── p-flood  ├─ br0 in pfxtb<ID>-sw (the venue switch)
    pfxtb<ID>-bp     10.77.0.11 eth0 ── p-bp    │  (tbf 10 Mbit/s toward the pole unless --fast-port)
    pfxtb<ID>-sacn   10.77.0.12 eth0 ── p-sacn  │
    pfxtb<ID>-ddp    10.77.0.13 eth0 ── p-ddp   ┘
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
PREFIX = "pfxtb"
STATE_DIR = Path("/run/pfx-testbed")
SUBNET = "10.77.0"


@dataclass(frozen=True)
class Host:
    role: str
    addr: str


# Runs in the player's namespace during bursty stalls: one datagram per input line (see
# stall_bursty).
KICK_CLASS = "2:2"
KICKER = """
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(sys.argv[1]))
# SO_PRIORITY 2:2 (0x00020002): HTB 2: puts the datagram in its own class, so it never takes
# a place in the leaf queue under test.
s.setsockopt(socket.SOL_SOCKET, socket.SO_PRIORITY, 0x00020002)
for _ in sys.stdin:
    try:
        s.sendto(b"k", ("239.77.0.9", 9))
    except OSError:
        pass
"""
STALL_PARENT = "2:1"  # where the leaf queue sits under the stall qdiscs (see stall injection)
PLAYER = Host("player", f"{SUBNET}.1")
FLOOD = Host("flood", f"{SUBNET}.2")
POLE_BP = Host("bp", f"{SUBNET}.11")
POLE_SACN = Host("sacn", f"{SUBNET}.12")
POLE_DDP = Host("ddp", f"{SUBNET}.13")
HOSTS = [PLAYER, FLOOD, POLE_BP, POLE_SACN, POLE_DDP]
POLES = {"bigpacket": POLE_BP, "sacn": POLE_SACN, "ddp": POLE_DDP}

# Where each pole listens (the player's profiles use the same groups and ports).
POLE_GROUPS = {
    "bigpacket": ("239.255.80.1", 5599),
    "sacn": ("239.255.0.1", 5568),  # universes 1 and 2: 239.255.0.1, 239.255.0.2
    "ddp": ("239.255.70.1", 4048),
}
POLE_PIXELS = 300
POLE_API_PORT = 8081

# The 10BASE-T fallback port: 10 Mbit/s with a 32,000-byte queue, i.e. a 25.6 ms latency floor
# once the queue is full (32000 x 8 / 10e6).
SLOW_RATE = "10mbit"
SLOW_LIMIT_BYTES = 32000


def run(cmd: list[str], check: bool = True, capture: bool = False) -> subprocess.CompletedProcess:
    r = subprocess.run(cmd, text=True, stdout=subprocess.PIPE if capture else None, stderr=subprocess.PIPE)
    if check and r.returncode != 0:
        raise RuntimeError(f"`{' '.join(cmd)}` failed ({r.returncode}): {r.stderr.strip()}")
    return r


def list_namespaces(prefix: str = PREFIX) -> list[str]:
    r = run(["ip", "netns", "list"], capture=True, check=False)
    names = [line.split()[0] for line in r.stdout.splitlines() if line.strip()]
    return [n for n in names if n.startswith(prefix)]


def kill_namespace(ns: str) -> None:
    """Ends the processes inside one of our namespaces (by pid), then deletes it."""
    r = run(["ip", "netns", "pids", ns], capture=True, check=False)
    pids = [int(p) for p in r.stdout.split() if p.isdigit()]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        alive = []
        for p in pids:
            try:
                os.kill(p, sig)
                alive.append(p)
            except ProcessLookupError:
                pass
        if not alive:
            break
        end = time.monotonic() + 1.5
        while time.monotonic() < end and any(_alive(p) for p in alive):
            time.sleep(0.05)
        pids = [p for p in alive if _alive(p)]
    run(["ip", "netns", "del", ns], check=False)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie child of ours still answers kill(0); reap it if it is ours.
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        return done == 0
    except ChildProcessError:
        return Path(f"/proc/{pid}").exists() and "Z" not in _proc_state(pid)


def _proc_state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return "Z"


def down_all(prefix: str = PREFIX) -> list[str]:
    gone = list_namespaces(prefix)
    for ns in gone:
        kill_namespace(ns)
    if STATE_DIR.exists():
        for f in STATE_DIR.glob(f"{prefix}*.json"):
            f.unlink(missing_ok=True)
    return gone


class Namespaces:
    """Network namespaces named <prefix>-<role>, made by this object and torn down by it: exactly
    the ones it made, never another run's that happens to share a name pattern. The one way the
    Python testbeds (Testbed, sync_bench, instep_bench) build a venue:

        nets = Namespaces("synctest1234")
        nets.bridge("sw", ["mcast_snooping", "0"])   # br0 in synctest1234-sw
        nets.port("sw", "m", "10.79.0.1/24")         # synctest1234-m, eth0 a port of br0 (p-m)
        ...
        nets.teardown()

    Every link lives inside the namespaces, so deleting them removes every link and qdisc."""

    def __init__(self, prefix: str):
        self.prefix = prefix
        self.made: list[str] = []

    def name(self, role: str) -> str:
        return f"{self.prefix}-{role}"

    def new(self, role: str) -> str:
        """A namespace with lo up and no IPv6 (keeps router solicitations and MLD out of the counts)."""
        ns = self.name(role)
        run(["ip", "netns", "add", ns])
        self.made.append(ns)
        run(["ip", "-n", ns, "link", "set", "lo", "up"])
        run(["ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"], check=False)
        return ns

    def bridge(self, role: str, options: list[str], querier: bool = False) -> str:
        """A namespace holding br0 (no STP; `options` are the rest of `ip link add ... type
        bridge`), up. `querier`: the bridge is also the IGMP querier, set by a second command
        before it comes up: the kernel applies `mcast_querier` before the intervals within one
        request, so set together the querier would wait the default 10 s response interval."""
        ns = self.new(role)
        run(["ip", "-n", ns, "link", "add", "br0", "type", "bridge", "stp_state", "0"] + options)
        if querier:
            run(["ip", "-n", ns, "link", "set", "br0", "type", "bridge", "mcast_querier", "1"])
        run(["ip", "-n", ns, "link", "set", "br0", "up"])
        return ns

    def port(self, sw_role: str, role: str, addr: str) -> str:
        """A namespace `role` whose eth0 (ADDR/PREFIX) is a port of `sw_role`'s br0, the switch
        side named p-<role>; multicast routed over eth0."""
        sw = self.name(sw_role)
        hn = self.new(role)
        port = f"p-{role}"
        run(["ip", "-n", sw, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", hn])
        run(["ip", "-n", sw, "link", "set", port, "master", "br0"])
        run(["ip", "-n", sw, "link", "set", port, "up"])
        run(["ip", "-n", hn, "addr", "add", addr, "dev", "eth0"])
        run(["ip", "-n", hn, "link", "set", "eth0", "up"])
        run(["ip", "-n", hn, "route", "add", "224.0.0.0/4", "dev", "eth0"])
        return hn

    def teardown(self) -> None:
        """Ends the processes in each namespace this object made, then deletes it; idempotent."""
        while self.made:
            kill_namespace(self.made.pop())


class Testbed:
    """One venue. Use as a context manager; `down()` is idempotent and runs at exit."""

    def __init__(
        self,
        switch: str = "unmanaged",
        slow_port: bool = True,
        tb_id: str | None = None,
        run_dir: str | None = None,
    ):
        if switch not in ("managed", "unmanaged"):
            raise ValueError("switch is `managed` or `unmanaged`")
        self.switch = switch
        self.slow_port = slow_port
        self.id = tb_id or str(os.getpid())
        self.name = f"{PREFIX}{self.id}"
        self.run_dir = Path(run_dir or f"/tmp/{self.name}")
        self.procs: dict[str, subprocess.Popen] = {}
        self._stall_thread: threading.Thread | None = None
        self._stall_stop = threading.Event()
        self._is_up = False
        self.nets = Namespaces(self.name)
        atexit.register(self.down)

    def ns(self, host: Host | str) -> str:
        return self.nets.name(host.role if isinstance(host, Host) else host)

    # ------------------------------------------------------------------ life cycle
    def up(self) -> "Testbed":
        if list_namespaces(self.name + "-"):
            raise RuntimeError(f"testbed {self.name} already exists; `testbed down --id {self.id}` first")
        self._is_up = True
        self.run_dir.mkdir(parents=True, exist_ok=True)
        if self.switch == "unmanaged":
            opts = ["mcast_snooping", "0"]
        else:
            # Snooping with the bridge as querier; a short response interval so the querier counts
            # as present (and stops flooding unknown groups) 1 s after it starts instead of 10 s.
            opts = [
                "mcast_snooping", "1",
                "mcast_query_response_interval", "100", "mcast_startup_query_interval", "100",
                "mcast_query_interval", "1000",
            ]  # fmt: skip
        sw = self.nets.bridge("sw", opts, querier=self.switch == "managed")
        for h in HOSTS:
            self.nets.port("sw", h.role, f"{h.addr}/24")
        if self.slow_port:
            # Egress of the switch port toward the pole: what a 10BASE-T link drains.
            run(["tc", "-n", sw, "qdisc", "add", "dev", "p-bp", "root", "tbf",
                 "rate", SLOW_RATE, "burst", "1600", "limit", str(SLOW_LIMIT_BYTES)])  # fmt: skip
        self._write_state()
        if self.switch == "managed":
            # The querier's start-up delay (response interval, 1 s): a kernel timer whose end
            # the bridge does not report (no querier state in `ip -d link`), so a duration.
            time.sleep(1.5)
        return self

    def down(self) -> None:
        if not self._is_up:
            return
        self._is_up = False
        self.stop_stall()
        for name in list(self.procs):
            self.stop(name)
        self.nets.teardown()
        (STATE_DIR / f"{self.name}.json").unlink(missing_ok=True)

    def __enter__(self) -> "Testbed":
        return self.up()

    def __exit__(self, *exc) -> None:
        self.down()

    def _write_state(self) -> None:
        STATE_DIR.mkdir(parents=True, exist_ok=True)
        st = {
            "name": self.name,
            "switch": self.switch,
            "slow_port": self.slow_port,
            "namespaces": [self.ns("sw")] + [self.ns(h) for h in HOSTS],
            "hosts": {h.role: h.addr for h in HOSTS},
            "run_dir": str(self.run_dir),
            "pids": {k: p.pid for k, p in self.procs.items()},
        }
        (STATE_DIR / f"{self.name}.json").write_text(json.dumps(st, indent=1) + "\n")

    # ------------------------------------------------------------------ processes
    def spawn(self, name: str, host: Host | str, argv: list[str], log: Path | None = None) -> subprocess.Popen:
        log = log or self.run_dir / f"{name}.log"
        out = open(log, "w")
        p = subprocess.Popen(
            ["ip", "netns", "exec", self.ns(host)] + argv,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: we stop exactly what we started
        )
        out.close()
        self.procs[name] = p
        self._write_state()
        return p

    def stop(self, name: str, timeout: float = 5.0) -> int | None:
        p = self.procs.pop(name, None)
        if p is None:
            return None
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                p.wait(timeout)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait()
        return p.returncode

    def signal(self, name: str, sig: int) -> None:
        p = self.procs.get(name)
        if p is not None and p.poll() is None:
            os.killpg(p.pid, sig)

    def pole_report_path(self, protocol: str) -> Path:
        return self.run_dir / f"pole-{protocol}.json"

    def start_poles(self, dump_frames: bool = False, timeout: float = 10.0, extra: dict | None = None) -> None:
        token = self.run_dir / "site-token"
        token.write_text("testbed-site-token\n")
        token.chmod(0o600)
        for proto, host in POLES.items():
            group, port = POLE_GROUPS[proto]
            argv = [
                sys.executable, str(HERE / "pole_sim.py"), "--protocol", proto,
                "--port", str(port), "--iface-addr", host.addr, "--pixels", str(POLE_PIXELS),
                "--pole-id", "0", "--name", f"pole-{proto}",
                "--api-port", str(POLE_API_PORT), "--token-file", str(token),
                "--link-speed", "10" if (proto == "bigpacket" and self.slow_port) else "100",
                "--report", str(self.pole_report_path(proto)),
            ]  # fmt: skip
            if proto != "sacn":
                argv += ["--group", group]
            if dump_frames:
                argv += ["--dump-frames", str(self.run_dir / f"pole-{proto}.frames")]
            argv += (extra or {}).get(proto, [])
            self.pole_report_path(proto).unlink(missing_ok=True)
            self.spawn(f"pole-{proto}", host, argv)
        # Ready = the socket is bound and joined (the simulator writes its first report then).
        end = time.monotonic() + timeout
        for proto in POLES:
            while not self.pole_report_path(proto).exists():
                p = self.procs[f"pole-{proto}"]
                if p.poll() is not None:
                    log = (self.run_dir / f"pole-{proto}.log").read_text()[-500:]
                    raise RuntimeError(f"pole simulator {proto} exited ({p.returncode}): {log}")
                if time.monotonic() > end:
                    raise RuntimeError(f"pole simulator {proto} not ready after {timeout} s")
                time.sleep(0.05)

    def reset_pole_stats(self) -> None:
        for proto in POLES:
            self.signal(f"pole-{proto}", signal.SIGUSR1)

    def stop_poles(self) -> dict[str, dict | None]:
        out = {}
        for proto in POLES:
            self.stop(f"pole-{proto}")
            try:
                out[proto] = json.loads(self.pole_report_path(proto).read_text())
            except (OSError, json.JSONDecodeError):
                out[proto] = None
        return out

    def start_flood(self, mbps: float, seconds: float = 3600.0) -> Path:
        rep = self.run_dir / "flood.json"
        rep.unlink(missing_ok=True)
        self.spawn(
            "flood",
            FLOOD,
            [sys.executable, str(HERE / "flood.py"), "--mbps", str(mbps), "--iface-addr", FLOOD.addr,
             "--seconds", str(seconds), "--report", str(rep)],
        )  # fmt: skip
        return rep

    def mdb(self) -> str:
        return run(["bridge", "-n", self.ns("sw"), "mdb", "show"], capture=True, check=False).stdout

    def qdisc_stats(self, host: Host | str, dev: str = "eth0") -> str:
        ns = self.ns(host)
        return run(["tc", "-n", ns, "-s", "qdisc", "show", "dev", dev], capture=True, check=False).stdout

    # ------------------------------------------------------------------ stall injection
    # The stall is a tbf at the root of the player's eth0 whose rate is changed (a tbf change
    # refills its tokens, so a stall ends when it is lifted; an HTB class would carry the slow
    # rate's token debt into the fast phase). Under it, an unshaped HTB class (10 Gbit/s) holds
    # the leaf queue at STALL_PARENT: tbf resizes a fifo child on every change, but not an HTB,
    # so the leaf survives the rate changes. (This machine's kernel has only the htb, tbf and
    # fifo qdiscs; prio or drr would do the same job.) The leaf stands for the interface's own queue (what a
    # PAUSEd NIC backs up into), so the player's tx-queue policy, installed at STALL_PARENT, is
    # what gets tested. The testbed's default leaf is a 4 MB bfifo, larger than any socket
    # buffer, like a kernel default queue (a blocking sendto stalls rather than the queue
    # dropping silently).
    def _stall_root(self, rate: str, limit: str) -> list[str]:
        tbf = ["qdisc", "replace", "dev", "eth0", "root", "handle", "1:", "tbf", "burst", "3000",
               "limit", "64kb", "rate"]  # fmt: skip
        batch = "\n".join([
            " ".join(tbf + [rate]),
            "qdisc replace dev eth0 parent 1:1 handle 2: htb default 1",
            "class replace dev eth0 parent 2: classid 2:1 htb rate 10gbit quantum 1514",
            # the wake-up datagrams' own class (see stall_bursty), beside the leaf, not in it
            f"class replace dev eth0 parent 2: classid {KICK_CLASS} htb rate 10gbit quantum 1514",
            f"qdisc replace dev eth0 parent {STALL_PARENT} handle 10: bfifo limit {limit}",
        ]) + "\n"  # fmt: skip
        subprocess.run(["tc", "-n", self.ns(PLAYER), "-batch", "-"], input=batch, text=True, check=True)
        return tbf

    def stall_sustained(self, rate: str, limit: str = "4mb") -> None:
        """Egress of the player's own link slower than the offered load."""
        self._stall_root(rate, limit)

    def stall_bursty(
        self, stall_ms: float, hz: float, fast: str = "1gbit", slow: str = "8kbit", limit: str = "4mb"
    ) -> None:
        """Stalls of `stall_ms` at `hz`: one long-lived `tc -batch -` (no fork per change) switches
        the root tbf between `fast` and a near-zero `slow` rate."""
        ns = self.ns(PLAYER)
        change = " ".join(self._stall_root(fast, limit))
        # When PAUSE lifts, a NIC's TX-completion interrupt wakes the queue and it drains at
        # once. A tbf rate change wakes nothing: the backlog would wait for the next enqueue,
        # and a sender whose sockets are all full (EAGAIN) enqueues nothing, so the emulated
        # stall would outlast the real one. A one-byte datagram to a group nobody joined, out of
        # the player's eth0 right after each lift, is that wake-up; it goes through its own HTB
        # class (KICK_CLASS) so it cannot push a show packet out of a full head-drop leaf.
        kick = subprocess.Popen(
            ["ip", "netns", "exec", ns, sys.executable, "-c", KICKER, PLAYER.addr],
            stdin=subprocess.PIPE, text=True, stdout=subprocess.DEVNULL,
        )  # fmt: skip
        tc = subprocess.Popen(
            ["tc", "-n", ns, "-batch", "-"], stdin=subprocess.PIPE, text=True, stdout=subprocess.DEVNULL
        )
        self._stall_stop.clear()
        self.stall_log: list[tuple[float, float]] = []

        def loop():
            period = 1.0 / hz
            start = time.monotonic()
            k = 1
            try:
                while not self._stall_stop.is_set():
                    t = start + k * period
                    if self._stall_stop.wait(max(0.0, t - time.monotonic())):
                        break
                    t0 = time.monotonic()
                    tc.stdin.write(f"{change} {slow}\n")
                    tc.stdin.flush()
                    self._stall_stop.wait(stall_ms / 1000.0)
                    tc.stdin.write(f"{change} {fast}\n")
                    tc.stdin.flush()
                    kick.stdin.write("\n")
                    kick.stdin.flush()
                    self.stall_log.append((t0, time.monotonic()))
                    k += 1
            except (BrokenPipeError, ValueError):
                pass
            finally:
                for p in (tc, kick):
                    try:
                        p.stdin.close()
                    except BrokenPipeError:
                        pass
                    p.wait(5)

        self._stall_thread = threading.Thread(target=loop, name="stall", daemon=True)
        self._stall_thread.start()

    def stop_stall(self) -> None:
        if self._stall_thread is not None:
            self._stall_stop.set()
            self._stall_thread.join(5)
            self._stall_thread = None
        if self._is_up:
            run(["tc", "-n", self.ns(PLAYER), "qdisc", "del", "dev", "eth0", "root"], check=False)


def smoke(seconds: float = 5.0) -> int:
    """Up, the stand-in sender to all three poles for a few seconds, reports, down."""
    with Testbed(switch="unmanaged", slow_port=True) as tb:
        tb.start_poles()
        tb.spawn(
            "sender",
            PLAYER,
            [sys.executable, str(HERE / "send_test.py"), "--bigpacket", "239.255.80.1:5599", "--sacn", "multicast",
             "--ddp", "239.255.70.1:4048", "--iface-addr", PLAYER.addr, "--seconds", str(seconds),
             "--report", str(tb.run_dir / "sender.json")],
        )  # fmt: skip
        tb.procs["sender"].wait(seconds + 10)
        reports = tb.stop_poles()
    bad = 0
    for proto, r in reports.items():
        if r is None or not r.get("ok"):
            bad += 1
            print(f"{proto:9s} FAILED: {r and r.get('reason') or 'no report'}")
        else:
            age = r.get("frame_age_ms") or {}
            print(f"{proto:9s} frames {r['frames']:5d}  lost {r['sequence']['lost']:3d}  "
                  f"interval p50 {r['interval_ms']['p50']} ms  age p50 {age.get('p50', '-')} ms")  # fmt: skip
    return 1 if bad else 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    u = sub.add_parser("up", help="build a testbed and leave it running (with poles)")
    u.add_argument("--switch", choices=["managed", "unmanaged"], default="unmanaged")
    u.add_argument("--fast-port", action="store_true", help="no 10 Mbit/s limit on the bigPacket pole's port")
    u.add_argument("--id", default=None)
    u.add_argument("--no-poles", action="store_true")
    d = sub.add_parser("down", help="remove a testbed (all pfxtb* namespaces without --id)")
    d.add_argument("--id", default=None)
    sub.add_parser("status", help="list testbed namespaces")
    r = sub.add_parser("run", help="one scenario, torn down at the end: smoke | latency2x2 | stall | all")
    r.add_argument("scenario")
    r.add_argument("rest", nargs=argparse.REMAINDER)
    a = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("testbed: needs root (network namespaces)", file=sys.stderr)
        return 77
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if a.cmd == "up":
        tb = Testbed(switch=a.switch, slow_port=not a.fast_port, tb_id=a.id)
        try:
            tb.up()
            if not a.no_poles:
                tb.start_poles()
        except BaseException:
            tb.down()
            raise
        # Leave it running: forget our handles so exit does not tear it down.
        tb._is_up = False
        for p in tb.procs.values():
            p.returncode = 0
        print(f"testbed {tb.name} up ({a.switch} switch, bigPacket pole port "
              f"{'fast' if a.fast_port else SLOW_RATE}); reports in {tb.run_dir}")  # fmt: skip
        print(f"  player netns: {tb.ns(PLAYER)} (eth0 {PLAYER.addr}); flood: {tb.ns(FLOOD)}")
        print(f"  tear down: {HERE / 'testbed'} down --id {tb.id}")
        return 0
    if a.cmd == "down":
        prefix = f"{PREFIX}{a.id}-" if a.id else PREFIX
        gone = down_all(prefix)
        print(f"removed {len(gone)} namespace(s)" + (f": {' '.join(gone)}" if gone else ""))
        left = list_namespaces(prefix)
        return 1 if left else 0
    if a.cmd == "status":
        for ns in list_namespaces():
            print(ns)
        return 0
    if a.cmd == "run":
        if a.scenario == "smoke":
            return smoke()
        import bench

        return bench.main([a.scenario] + a.rest)
    return 2


if __name__ == "__main__":
    sys.exit(main())
