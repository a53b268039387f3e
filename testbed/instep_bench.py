#!/usr/bin/env python3
"""A master's live action across a synced site, measured (docs/testbed.md, "In step").

One master and N-1 remotes are network-namespace hosts on one bridge, each player in its own
time namespace, all sending DDP to one pole-simulator host that tells them apart by source
address and timestamps every datagram on arrival (SO_TIMESTAMPNS); an all-zero frame is black.
Each try: every unit lit, then `blackout` on the master's control socket (as its agent sends
it); the first black frame from each unit is found in the pole's log. Then `resume`, and the
next try waits until every unit is lit again. One attempt per try; a try whose guard fails is
UNMEASURABLE with the reason.

    instep_bench.py run --player BIN [--units 20] [--tries 20] [--fps 40] [--json F] [--out DIR]
                        [--via socket|fleet|fleet-new] [--no-sync]
    instep_bench.py down --id PID            # remove what the killed run PID left (instepPID-*)
    instep_bench.py down                     # remove every instep* namespace on the host,
                                             # other runs' too: an operator's, never a suite's

Figures per try: `latency_ms` from the request to the last unit's first black frame at the
pole; `spread_ms` between the first and the last unit's first black frame (and in frames);
`told_to_last_ms` from the master's answered frame stamp to the last unit's first black frame.

`--via fleet` times the whole operator's path instead: each unit also runs a real sshd whose
key's forced command is the unit's agent (`pfx-agent dispatch`), `pfx-fleet hold --site` keeps
a connection to every unit, and each try is `pfx-fleet control blackout --site` (then
`control resume --site`), timed from before pfx-fleet starts. `--via fleet-new` is the same
without `hold` (a new SSH connection per unit per command). `--no-sync`: every unit plays
the sequence on its own (no MultiSync), so each goes black when its own request arrives.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import sync_bench  # noqa: E402

PREFIX = "instep"
SUBNET = "10.81.0"
POLE_ADDR = f"{SUBNET}.250"
SYNC_PORT = 32320
SEQ_NAME = sync_bench.SEQ_NAME
# A unit counts as lit when its last frame at the pole is a sequence frame this recent.
LIT_WITHIN_US = 300_000
# How long a try waits for every unit's first black frame.
BLACK_WITHIN_S = 2.0
# How long it waits for every unit to light again after `resume`.
RELIGHT_WITHIN_S = 8.0
# Two operators at once: how long after the later action's stamped time the units have to
# show it before their last frames are judged.
SHOW_WITHIN_S = 1.0
# The guard: a try is not the player's figure when a unit sent no frame for more than
# MAX_GAP_FRAMES frames between the request and its change (it missed a tick: its render
# thread did not run, and no design can show a change at a tick that did not happen).
# The host's CPU pressure over the try ("some": the share of time a runnable task waited for
# a CPU) is recorded beside each try.
MAX_GAP_FRAMES = 1.5
# A `play` starts its sequence again: a frame numbered below this after the request is the
# new start (every try begins long after the show's first frames).
RESTART_BELOW = 4


def unit_names(n: int) -> list[str]:
    return ["m"] + [f"r{i}" for i in range(1, n)]


def unit_addr(i: int) -> str:
    return f"{SUBNET}.{i + 1}"


# ---------------------------------------------------------------------------- pure: the log
def parse_pole(lines) -> list[tuple[str, int, str]]:
    """`src rx_us tag` lines (sync_bench's pole) as (src, rx_us, tag); a torn line is skipped."""
    out = []
    for line in lines:
        p = line.split()
        if len(p) == 3 and p[1].isdigit():
            out.append((p[0], int(p[1]), p[2]))
    return out


def lit_now(rows: list[tuple[str, int, str]], srcs: list[str], now_us: int) -> list[str]:
    """The sources NOT lit now: whose last datagram is not a sequence frame received within
    LIT_WITHIN_US of `now_us`."""
    last: dict[str, tuple[int, str]] = {}
    for src, t, tag in rows:
        last[src] = (t, tag)
    dark = []
    for s in srcs:
        t, tag = last.get(s, (0, "B"))
        if not tag.isdigit() or now_us - t > LIT_WITHIN_US:
            dark.append(s)
    return dark


def first_black(rows: list[tuple[str, int, str]], srcs: list[str], after_us: int) -> dict[str, int | None]:
    """Per source, the arrival of its first black datagram after `after_us` that no lit frame
    follows before the end of the rows (a black frame between two lit ones is not the change)."""
    out: dict[str, int | None] = {s: None for s in srcs}
    for src, t, tag in rows:
        if src not in out or t < after_us:
            continue
        if tag == "B":
            if out[src] is None:
                out[src] = t
        else:
            out[src] = None
    return out


def first_restart(rows: list[tuple[str, int, str]], srcs: list[str], after_us: int) -> dict[str, int | None]:
    """Per source, when it showed the restarted sequence's frame K after `after_us`: K is
    the highest of the units' first frames below RESTART_BELOW (a remote that joins its
    master's new sequence a moment late shows frame 1 first, at the master's frame 1; in
    step means the same frame at the same time). Pure."""
    firsts: dict[str, int] = {}
    for src, _t, tag in rows:
        if src in srcs and _t >= after_us and src not in firsts and tag.isdigit() and int(tag) < RESTART_BELOW:
            firsts[src] = int(tag)
    if len(firsts) < len(srcs):
        # Unmeasurable: judge_try names the units that never restarted (None).
        return {s: (after_us if s in firsts else None) for s in srcs}
    out: dict[str, int | None] = {s: None for s in srcs}
    k = str(max(firsts.values()))
    for src, t, tag in rows:
        if src in out and t >= after_us and out[src] is None and tag == k:
            out[src] = t
    return out


def stalled(rows: list[tuple[str, int, str]], firsts: dict[str, int | None], after_us: int,
            period_ms: float, unit_of: dict[str, str]) -> str | None:
    """The first unit that sent nothing for more than MAX_GAP_FRAMES frames between
    `after_us` and its first black frame (its render thread did not run: the host's doing),
    said as a reason; None when every unit kept its frame rate."""
    for src, fb in firsts.items():
        if fb is None:
            continue
        ts = [t for s_, t, _ in rows if s_ == src and after_us - 100_000 <= t <= fb]
        gaps = [b - a for a, b in zip(ts, ts[1:])]
        if gaps and max(gaps) > MAX_GAP_FRAMES * period_ms * 1000:
            return (f"unit {unit_of.get(src, src)} sent no frame for {max(gaps) / 1000:.1f} ms around "
                    f"the change (more than {MAX_GAP_FRAMES:g} frames): the host did not carry it")
    return None


def cpu_pressure_total_us() -> int | None:
    """/proc/pressure/cpu's `some total=` (µs), None without PSI."""
    try:
        for line in Path("/proc/pressure/cpu").read_text().splitlines():
            if line.startswith("some"):
                return int(line.rsplit("total=", 1)[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def judge_try(t_cmd_us: int, stamp_us: int | None, firsts: dict[str, int | None], period_ms: float,
              unit_of: dict[str, str]) -> dict:
    """One try's figures, or `unmeasurable` naming the unit that never went black."""
    missing = [unit_of.get(s, s) for s, t in firsts.items() if t is None]
    if missing:
        return {"unmeasurable": f"no black frame within {BLACK_WITHIN_S} s from {', '.join(missing[:5])}"}
    ts = [t for t in firsts.values() if t is not None]
    last, first = max(ts), min(ts)
    spread = (last - first) / 1000.0
    return {
        "unmeasurable": None,
        "latency_ms": round((last - t_cmd_us) / 1000.0, 3),
        "spread_ms": round(spread, 3),
        "spread_frames": round(spread / period_ms, 3),
        "told_to_last_ms": None if stamp_us is None else round((last - stamp_us) / 1000.0, 3),
        "last_unit": unit_of.get(max(firsts, key=lambda s: firsts[s] or 0)),
    }


def summarize(tries: list[dict]) -> dict:
    good = [t for t in tries if t.get("unmeasurable") is None]
    out: dict = {"tries": len(tries), "measured": len(good)}
    keys = ["latency_ms", "spread_ms", "spread_frames", "told_to_last_ms"]
    if any("fleet_cpu_ms" in t for t in tries):
        keys.append("fleet_cpu_ms")
    for k in keys:
        xs = [t[k] for t in good if t.get(k) is not None]
        out[k] = {"p50": sync_bench.percentile(xs, 50), "p99": sync_bench.percentile(xs, 99),
                  "max": max(xs) if xs else None}  # fmt: skip
    return out


# ---------------------------------------------------------------------------- the testbed
class Bed(sync_bench.Bed):
    def __init__(self, run_dir: Path, tb_id: str, units: list[str]):
        super().__init__(run_dir, tb_id, prefix=PREFIX)
        self.units = units

    def hosts(self) -> list[tuple[str, str]]:
        return [(u, unit_addr(i)) for i, u in enumerate(self.units)] + [("pole", POLE_ADDR)]


def ask(sock: Path, action: str, timeout: float = 20.0) -> dict:
    """One request on a player's control socket, as the agent sends it."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(str(sock))
        s.sendall(json.dumps({"action": action, "by": "instep-bench", "from": "local"}).encode() + b"\n")
        buf = b""
        while not buf.endswith(b"\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
    finally:
        s.close()
    return json.loads(buf.decode() or "{}")


def read_rows(path: Path) -> list[tuple[str, int, str]]:
    try:
        with open(path) as fh:
            return parse_pole(fh)
    except OSError:
        return []


def unit_yaml(unit: str, d: Path, fps: int, sync: dict, seq: str | None) -> str:
    y = sync_bench.unit_yaml(unit, d, fps, sync, seq)
    return y.replace(f"{sync_bench.POLE[1]}:", f"{POLE_ADDR}:").replace("unit_id: synctest-", "unit_id: instep-")


# ---------------------------------------------------------------------------- the fleet path
class Fleet:
    """The operator's side for `--via fleet*`: one sshd per unit (in the unit's network
    namespace, its key's forced command the unit's agent), a fleet config and database, and
    for `--via fleet` a running `pfx-fleet hold`. pfx-fleet runs in the pole's namespace (on
    the same bridge as the units)."""

    def __init__(self, bed, a, run_dir: Path, units: list[str], socks: dict, srcs: dict):
        self.bed, self.a, self.units = bed, a, units
        self.bin = Path(a.fleet_bin).resolve()
        self.d = run_dir / "fleet"
        self.d.mkdir(exist_ok=True)
        self.held_dir = self.d / "held"
        self.cfg = self.d / "fleet.yaml"
        self.db = self.d / "fleet.db"
        for key in ("id", "hostkey"):
            for f in (self.d / key, self.d / f"{key}.pub"):
                f.unlink(missing_ok=True)  # a reused --out directory
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(self.d / key)], check=True)
        hostkey = " ".join((self.d / "hostkey.pub").read_text().split()[:2])
        Path("/run/sshd").mkdir(exist_ok=True)
        # The units' fleet account has /bin/sh and an empty home (the image's); so has root
        # for these sshds (a passwd bound over /etc/passwd in their own mount namespace).
        # The build host's root shell would be bash, which reads ~/.bashrc under sshd: that
        # costs ~100 ms a command here and is not a unit's.
        (self.d / "home").mkdir(exist_ok=True)
        rows = [ln for ln in Path("/etc/passwd").read_text().splitlines() if not ln.startswith("root:")]
        (self.d / "passwd").write_text("\n".join(rows + [f"root:x:0:0:root:{self.d / 'home'}:/bin/sh"]) + "\n")
        known = []
        for u in units:
            ud = self.d / u
            (ud / "data").mkdir(parents=True, exist_ok=True)
            (ud / "data" / ".pfx-data").write_text("")
            cfg = ud / "agent.yaml"
            cfg.write_text(f"iface: lo\nunit_id: {u}\nsystemd: false\nstore_root: {ud / 'data'}\n"
                           f"control_socket: {socks[u]}\naudit_log: {ud / 'audit.log'}\n")
            forced = f"SUDO_USER=pfx {self.bin.parent / 'pfx-agent'} dispatch --config {cfg}"
            opkey = (self.d / "id.pub").read_text().strip()
            (ud / "authorized_keys").write_text(f'restrict,command="{forced}" {opkey}\n')
            (ud / "sshd_config").write_text(
                f"ListenAddress {srcs[u]}\nPort 22\nHostKey {self.d / 'hostkey'}\nPidFile none\n"
                f"AuthorizedKeysFile {ud / 'authorized_keys'}\nPermitRootLogin forced-commands-only\n"
                "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n"
                "MaxStartups 100\nMaxSessions 50\nLogLevel ERROR\n")  # fmt: skip
            bed.spawn(f"sshd-{u}", u, ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
                                       'mount --bind "$1" /etc/passwd && exec /usr/sbin/sshd -D -f "$2" -E "$3"', "sh",
                                       str(self.d / "passwd"), str(ud / "sshd_config"), str(ud / "sshd.log")])  # fmt: skip
            known.append(f"{srcs[u]} {hostkey}\n")
        (self.d / "known_hosts").write_text("".join(known))
        self.cfg.write_text(
            f"ssh:\n  user: root\n  identity: {self.d / 'id'}\n  known_hosts: {self.d / 'known_hosts'}\n"
            "  command_timeout_s: 20\nsites:\n  - name: instep\n    units:\n"
            + "".join(f"      - {{id: {u}, host: {srcs[u]}}}\n" for u in units))  # fmt: skip

    def argv(self, *words: str) -> list[str]:
        return ["ip", "netns", "exec", self.bed.ns("pole"), "env", f"PFX_FLEET_HELD_DIR={self.held_dir}",
                str(self.bin), "--config", str(self.cfg), "--db", str(self.db), *words]  # fmt: skip

    def hold(self, within: float) -> str | None:
        """Starts `pfx-fleet hold --site` and waits until every unit is held; None when
        they are, else why not."""
        p = self.bed.spawn("hold", "pole", self.argv("hold", "--site", "instep", "--json")[4:])
        end = time.time() + within
        held: set[str] = set()
        while time.time() < end and p.poll() is None:
            time.sleep(0.2)
            held = set()
            for line in self.bed.log_text("hold").splitlines():
                try:
                    e = json.loads(line)
                except ValueError:
                    continue
                if e.get("event") == "held":
                    held.add(e.get("unit"))
                elif e.get("event") == "lost":
                    held.discard(e.get("unit"))
            if held >= set(self.units):
                return None
        missing = sorted(set(self.units) - held)
        return f"hold: not every unit held within {within} s ({', '.join(missing[:5])}): {self.bed.log_tail('hold')}"

    def control(self, *action: str, unit: str | None = None) -> dict:
        env = dict(os.environ, USER="instep-bench")
        env.pop("SUDO_USER", None)  # the operator's name is $SUDO_USER, else $USER
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        target = ["--unit", unit] if unit else ["--site", "instep"]
        r = subprocess.run(self.argv("control", *action, *target, "--json"),
                           capture_output=True, text=True, timeout=60, env=env)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        # The fleet host's CPU for the command: pfx-fleet and its ssh clients (each waited
        # for, so counted here), and `ip netns exec`. The units' side is not in it.
        self.last_cpu_ms = round(1000 * (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime), 1)
        try:
            return json.loads(r.stdout)
        except ValueError:
            return {"error": f"pfx-fleet control printed no JSON (exit {r.returncode}): {r.stderr[-300:]}"}


def play_cell(fleet: Fleet, pole_log: Path, srcs: dict, unit_of: dict, period_ms: float, tries: int) -> dict:
    """`play` on the master is a MultiSync sequence change: `pfx-fleet control play content
    --unit m` (a remote refuses `play`: it is its master's), then each unit's first frame of
    the sequence from its start at the pole; then `resume --unit m`."""
    out: dict = {"cell": "play", "tries": []}
    for _ in range(tries):
        dark = wait_lit(pole_log, list(srcs.values()), RELIGHT_WITHIN_S)
        if dark:
            out["tries"].append({"unmeasurable": "not every unit lit before the try: "
                                 + ", ".join(unit_of[x] for x in dark[:5])})  # fmt: skip
            continue
        t_cmd = time.time_ns() // 1000
        r = fleet.control("play", "content", unit="m")
        row = next(iter(r.get("units") or []), {})
        if not row.get("accepted"):
            out["tries"].append({"unmeasurable": f"the master did not take play: {row.get('reason') or r.get('error')}"})
            continue
        window_then_flush(fleet.bed, pole_log, t_cmd)
        rows = [x for x in read_rows(pole_log) if x[1] <= t_cmd + int(BLACK_WITHIN_S * 1e6)]
        firsts = first_restart(rows, list(srcs.values()), t_cmd)
        res = judge_try(t_cmd, row.get("effective_unix_us"), firsts, period_ms, unit_of)
        if res["unmeasurable"] is None:
            why = stalled(rows, firsts, t_cmd, period_ms, unit_of)
            if why:
                res["unmeasurable"] = f"{why} (spread {res['spread_ms']} ms)"
        res["unmeasurable"] = res["unmeasurable"] and res["unmeasurable"].replace("black frame", "restarted frame")
        fleet.control("resume", unit="m")
        out["tries"].append(res)
    out["summary"] = summarize(out["tries"])
    return out


def shows_cell(fleet: Fleet, units: list[str]) -> dict:
    """`pfx-fleet shows` says what each unit holds: a site blackout, then `shows --site`
    (each unit's agent reads its player's /profile), then `resume`."""
    out = fleet.control("blackout")
    if out.get("done") != len(units):
        return {"cell": "shows", "unmeasurable": f"the blackout was not taken by every unit: {json.dumps(out)[:300]}"}
    r = subprocess.run(fleet.argv("shows", "--site", "instep", "--json"), capture_output=True, text=True, timeout=60)
    fleet.control("resume")
    try:
        rows = {x.get("unit"): x for x in json.loads(r.stdout)}
    except ValueError:
        return {"cell": "shows", "unmeasurable": f"pfx-fleet shows printed no JSON (exit {r.returncode}): {r.stderr[-300:]}"}
    checks = [(str((rows.get(u) or {}).get("override") or "").startswith("blackout by instep-bench"),
               f"{u}: shows holds {(rows.get(u) or {}).get('override')!r}") for u in units]  # fmt: skip
    return {"cell": "shows", "unmeasurable": None, "checks": checks}


def fleet_act(fleet: Fleet, action: str) -> tuple[dict, int]:
    """One action through pfx-fleet: (the master's row as a control-socket answer, how many
    units went over a held connection)."""
    out = fleet.control(action)
    if "error" in out:
        return {"accepted": False, "error": out["error"]}, 0
    rows = out.get("units", [])
    held = sum(1 for r in rows if r.get("held_connection"))
    m = next((r for r in rows if r.get("unit") == "m"), {})
    bad = [f"{r.get('unit')}: {r.get('reason')}" for r in rows if r.get("state") != "done"]
    ans = {"accepted": bool(m.get("accepted")) and not bad, "effective_unix_us": m.get("effective_unix_us"),
           "error": "; ".join(bad[:3]) or None,
           "told_unix_us": {r.get("unit"): r.get("effective_unix_us") for r in rows}}  # fmt: skip
    return ans, held


def run(a) -> int:
    if os.geteuid() != 0:
        print("skipped: needs root (network namespaces, time namespaces)")
        return 77
    if not Path(a.player).is_file():
        print(f"instep_bench: no player binary at {a.player}; build it (cargo build -p pfx-player) or pass --player")
        return 2
    run_dir = Path(a.out or f"/tmp/{PREFIX}-{os.getpid()}")
    run_dir.mkdir(parents=True, exist_ok=True)
    units = unit_names(a.units)
    bed = Bed(run_dir, str(os.getpid()), units)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    step_ms = round(1000 / a.fps)
    period_ms = 1000.0 / a.fps
    seq_dir = run_dir / "seq"
    seq_dir.mkdir(exist_ok=True)
    # Long enough for every try (the show plays on under a blackout).
    sync_bench.write_fseq(seq_dir / SEQ_NAME, int((60 + a.tries * 6) * 1000 / step_ms), step_ms)
    (run_dir / "profiles").mkdir(exist_ok=True)
    (run_dir / "profiles" / "synctest-ddp.yaml").write_text(
        sync_bench.PROFILE_YAML.replace(f"{sync_bench.POLE[1]}:", f"{POLE_ADDR}:"))
    pole_log = run_dir / "pole.log"
    pole_log.unlink(missing_ok=True)
    Path(str(pole_log) + ".flushed").unlink(missing_ok=True)  # a reused --out directory
    srcs = {u: unit_addr(i) for i, u in enumerate(units)}
    unit_of = {ip: u for u, ip in srcs.items()}
    result: dict = {"units": a.units, "fps": a.fps, "tries": []}
    try:
        bed.up()
        p = bed.spawn("pole", "pole", [sys.executable, str(HERE / "sync_bench.py"), "pole", "--out", str(pole_log)])
        sync_bench.wait_file(Path(str(pole_log) + ".ready"), 5, p)
        socks = {}
        for i, u in enumerate(units):
            d = run_dir / "cell1" / u
            d.mkdir(parents=True, exist_ok=True)
            if a.no_sync:
                sync = None
            elif u == "m":
                sync = {"role": "master", "port": SYNC_PORT, "transport": "multicast"}
            else:
                sync = {"role": "remote", "port": SYNC_PORT, "sequences": str(seq_dir),
                        "master_lost": {"after_s": 5, "then": "stop"}}  # fmt: skip
            plays = u == "m" or a.no_sync
            (d / "show.yaml").write_text(unit_yaml(u, d, a.fps, sync, str(seq_dir / SEQ_NAME) if plays else None))
            socks[u] = d / "control.sock"
            if u != "m":
                bed.spawn(u, u, [a.player, "run", "--config", str(d / "show.yaml"),
                                 "--control-socket", str(socks[u])], mono_offset=10_000 + 1000 * i)  # fmt: skip
        why = remotes_ready(bed, units, socks, SYNC_PORT if not a.no_sync else None)
        if why:
            result["unmeasurable"] = why
            return finish(result, a)
        bed.spawn("m", "m", [a.player, "run", "--config", str(run_dir / "cell1" / "m" / "show.yaml"),
                             "--control-socket", str(socks["m"])], mono_offset=10_000)  # fmt: skip
        dark = wait_lit(pole_log, list(srcs.values()), 15.0 + 0.5 * a.units)
        if dark:
            result["unmeasurable"] = ("not every unit lit after the start: "
                                      + ", ".join(unit_of[s] for s in dark[:5])
                                      + f" ({bed.log_tail(unit_of[dark[0]])})")  # fmt: skip
            return finish(result, a)
        fleet = None
        if a.via != "socket":
            fleet = Fleet(bed, a, run_dir, units, socks, srcs)
            why = fleet.hold(10.0 + 0.5 * a.units) if a.via == "fleet" else None
            # pfx-fleet learns each unit's MultiSync part from its answers (it tells known
            # remotes after their master): one `resume` (nothing is held yet) teaches it.
            learned = fleet.control("resume")
            if not why and learned.get("done") != a.units:
                why = f"the first resume was not taken by every unit: {json.dumps(learned)[:300]}"
            if why:
                result["unmeasurable"] = why
                return finish(result, a)
        result["via"], result["sync"] = a.via, not a.no_sync
        time.sleep(a.warmup)
        for n in range(a.tries):
            result["tries"].append(one_try(bed, socks["m"], pole_log, srcs, unit_of, period_ms, n, fleet))
            print(f"try {n + 1}: {json.dumps(result['tries'][-1])}", flush=True)
        dead = [u for u in units if u in bed.procs and bed.procs[u].poll() is not None]
        if dead:
            result["unmeasurable"] = f"unit {dead[0]} exited during the run: {bed.log_tail(dead[0])}"
        result["load"] = os.getloadavg()
        if fleet is not None and not a.no_sync and a.play_tries:
            try:
                result["play"] = play_cell(fleet, pole_log, srcs, unit_of, period_ms, a.play_tries)
            except Exception as e:  # one attempt: reported, not retried
                result["play"] = {"cell": "play", "unmeasurable": f"testbed error: {e}", "tries": []}
        if fleet is not None:
            try:
                result["shows"] = shows_cell(fleet, units)
            except Exception as e:  # one attempt: reported, not retried
                result["shows"] = {"cell": "shows", "unmeasurable": f"testbed error: {e}", "checks": []}
        if a.laptops:
            try:
                result["own"] = own_action_cell(bed, socks, srcs, unit_of, pole_log)
            except Exception as e:  # one attempt: reported, not retried
                result["own"] = {"cell": "own", "unmeasurable": f"testbed error: {e}", "checks": []}
            try:
                result["laptops"] = laptops_cell(bed, a, run_dir, units, socks, srcs, pole_log)
            except Exception as e:  # one attempt: reported, not retried
                result["laptops"] = {"cell": "laptops", "unmeasurable": f"testbed error: {e}"}
    finally:
        bed.down()
    return finish(result, a)


def sleep_until(t_unix: float) -> None:
    """Until a window under test has passed (the frames in it are what is judged): a
    duration, not an ordering."""
    time.sleep(max(0.0, t_unix - time.time()))


def window_then_flush(bed, pole_log: Path, t_cmd_us: int) -> None:
    """The BLACK_WITHIN_S after the request have passed and the pole has written out every
    frame of them (instead of a sleep of the window plus 0.6 s for the pole's own flush)."""
    sleep_until(t_cmd_us / 1e6 + BLACK_WITHIN_S)
    sync_bench.flush_pole(bed, pole_log)


def remotes_ready(bed, units: list[str], socks: dict, sync_port: int | None, timeout: float = 30.0) -> str | None:
    """Until every remote has its control socket and (when synced) listens for MultiSync, so
    the master's first packets reach them (was a sleep of 1 s + 50 ms a unit); None when they
    do, else why not."""
    try:
        for u in units:
            if u == "m":
                continue
            sync_bench.wait_until(f"{u}'s control socket", socks[u].exists, timeout, bed.procs[u])
            if sync_port is not None:
                sync_bench.wait_sync_listening(bed, u, sync_port, bed.procs[u], timeout)
    except RuntimeError as e:
        return f"a remote did not come up: {e} ({bed.log_tail(u)})"
    return None


def wait_lit(pole_log: Path, srcs: list[str], within: float) -> list[str]:
    end = time.time() + within
    dark = srcs
    while time.time() < end:
        time.sleep(0.6)  # the pole flushes its log every half second
        dark = lit_now(read_rows(pole_log), srcs, time.time_ns() // 1000 - 600_000)
        if not dark:
            return []
    return dark


def one_try(bed, msock: Path, pole_log: Path, srcs: dict, unit_of: dict, period_ms: float, n: int,
            fleet: Fleet | None = None) -> dict:
    dark = wait_lit(pole_log, list(srcs.values()), RELIGHT_WITHIN_S)
    if dark:
        return {"unmeasurable": "not every unit lit before the try: " + ", ".join(unit_of[s] for s in dark[:5])}
    t_cmd = time.time_ns() // 1000
    psi0 = cpu_pressure_total_us()
    held = None
    try:
        if fleet is None:
            ans = ask(msock, "blackout")
        else:
            ans, held = fleet_act(fleet, "blackout")
    except (OSError, ValueError, subprocess.TimeoutExpired) as e:
        return {"unmeasurable": f"the master's control socket: {e}"}
    if not ans.get("accepted"):
        return {"unmeasurable": f"the master did not take it: {ans.get('error')}"}
    window_then_flush(bed, pole_log, t_cmd)
    rows = [r for r in read_rows(pole_log) if r[1] <= t_cmd + int(BLACK_WITHIN_S * 1e6)]
    firsts = first_black(rows, list(srcs.values()), t_cmd)
    res = judge_try(t_cmd, ans.get("effective_unix_us"), firsts, period_ms, unit_of)
    psi1 = cpu_pressure_total_us()
    if psi0 is not None and psi1 is not None:
        share = (psi1 - psi0) / (time.time_ns() // 1000 - t_cmd)
        # Recorded, not a guard: twenty players on two cores make this pressure themselves.
        res["cpu_pressure"] = round(share, 3)
    if held is not None:
        res["held_connections"] = held
        # When each unit's own request took effect, from the command's start: the fleet leg.
        told = {u: round((t - t_cmd) / 1000.0, 1) for u, t in (ans.get("told_unix_us") or {}).items() if t}
        res["told_ms"] = told
        res["fleet_cpu_ms"] = fleet.last_cpu_ms
    if res["unmeasurable"] is None:
        why = stalled(rows, firsts, t_cmd, period_ms, unit_of)
        if why:
            res["unmeasurable"] = f"{why} (spread {res['spread_ms']} ms)"
    try:
        r = ask(msock, "resume") if fleet is None else fleet_act(fleet, "resume")[0]
        if not r.get("accepted"):
            res.setdefault("note", f"resume not taken: {r.get('error')}")
    except (OSError, ValueError, subprocess.TimeoutExpired) as e:
        res.setdefault("note", f"resume: {e}")
    return res


SSH_STANDIN = """#!/bin/sh
# ssh ... HOST -- WORDS, as pfx-fleet calls it: the unit's forced command run here instead of
# over a network (the agent, its root-owned config, the request in SSH_ORIGINAL_COMMAND).
prev=; cmd=; after=; host=
for a; do
  if [ -n "$after" ]; then cmd="$cmd${cmd:+ }$a"; elif [ "$a" = -- ]; then after=1; host=$prev; else prev=$a; fi
done
case "$host" in
%s
  *) echo "ssh: connect to host $host port 22: Connection refused" >&2; exit 255;;
esac
SSH_ORIGINAL_COMMAND="$cmd" SSH_CLIENT="$LAPTOP 40000 22" SUDO_USER=pfx exec %s dispatch --config "$cfg"
"""


def final_states(bed, units: list[str]) -> dict[str, str | None]:
    """Each unit's held content action from its own /profile (None: nothing held, or no answer)."""
    out = {}
    for u in units:
        doc = bed.profile(u) or {}
        c = doc.get("control") or {}
        out[u] = (c.get("content") or {}).get("action")
    return out


def judge_laptops(runs: dict[str, dict], finals: dict[str, str | None], last_tags: dict[str, str]) -> list[tuple[bool, str]]:
    """Per unit: both operators' actions taken, the unit holds the one it stamped later, and
    its pole shows it (black for a blackout, a lit frame for the test). Pure."""
    checks = []
    for u, final in finals.items():
        got = {}
        for who, r in runs.items():
            row = next((x for x in r.get("units", []) if x.get("unit") == u), None)
            if row and row.get("state") == "done" and row.get("effective_unix_us"):
                got[who] = (row["effective_unix_us"], r["action"])
        if len(got) != len(runs):
            checks.append((False, f"{u}: both actions taken ({sorted(got)})"))
            continue
        last = max(got.values())[1]
        shown = {"blackout": "B"}.get(last, "X")
        checks.append((final == last and last_tags.get(u) == shown,
                       f"{u}: holds the later stamped action {last!r} (holds {final!r}, pole shows {last_tags.get(u)!r})"))
    return checks


def laptops_cell(bed, a, run_dir: Path, units: list[str], socks: dict, srcs: dict, pole_log: Path) -> dict:
    """Two operators at once: two pfx-fleet processes (each its own database, as two laptops
    are), one `blackout --site`, the other `test red --site`, started together, against the
    same units through the real agent."""
    fleet_bin = Path(a.fleet_bin)
    d = run_dir / "laptops"
    d.mkdir(exist_ok=True)
    cases = []
    for i, u in enumerate(units):
        ud = d / u
        (ud / "data").mkdir(parents=True, exist_ok=True)
        (ud / "data" / ".pfx-data").write_text("")
        cfg = ud / "agent.yaml"
        cfg.write_text(f"iface: lo\nunit_id: {u}\nsystemd: false\nstore_root: {ud / 'data'}\n"
                       f"control_socket: {socks[u]}\naudit_log: {ud / 'audit.log'}\n")
        cfg.chmod(0o644)
        cases.append(f"  *127.0.1.{i + 1}) cfg={cfg};;")
    ssh = d / "ssh"
    ssh.write_text(SSH_STANDIN % ("\n".join(cases), fleet_bin.parent / "pfx-agent"))
    ssh.chmod(0o755)
    fleet = d / "fleet.yaml"
    fleet.write_text(f"ssh:\n  ssh: {ssh}\n  known_hosts: {d}/known_hosts\n  command_timeout_s: 20\n"
                     "sites:\n  - name: instep\n    units:\n"
                     + "".join(f"      - {{id: {u}, host: 127.0.1.{i + 1}}}\n" for i, u in enumerate(units)))  # fmt: skip
    procs = {}
    for who, action, addr in (("alice", ["blackout"], "10.9.9.1"), ("bob", ["test", "red"], "10.9.9.2")):
        env = dict(os.environ, USER=who, LAPTOP=addr)
        env.pop("SUDO_USER", None)
        procs[who] = (" ".join(action), subprocess.Popen(
            [str(fleet_bin), "--config", str(fleet), "--db", str(d / f"{who}.db"), "control", *action,
             "--site", "instep", "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env))  # fmt: skip
    runs = {}
    for who, (action, p) in procs.items():
        out, err = p.communicate(timeout=60)
        try:
            runs[who] = json.loads(out) | {"action": action.split()[0]}
        except json.JSONDecodeError:
            return {"cell": "laptops", "unmeasurable": f"{who}'s pfx-fleet printed no JSON (exit {p.returncode}): {err[-300:]}"}
    # Each action takes effect at its stamped time: the units have SHOW_WITHIN_S after the
    # later stamp to show it (a duration), then the pole writes out what it received.
    stamps = [x["effective_unix_us"] for r in runs.values() for x in r.get("units", []) if x.get("effective_unix_us")]
    sleep_until(max(stamps, default=time.time_ns() // 1000) / 1e6 + SHOW_WITHIN_S)
    sync_bench.flush_pole(bed, pole_log)
    rows = read_rows(pole_log)
    last_tags = {}
    for u in units:
        mine = [tag for s_, _t, tag in rows if s_ == srcs[u]]
        last_tags[u] = mine[-1] if mine else None
    finals = final_states(bed, units)
    return {"cell": "laptops", "unmeasurable": None, "checks": judge_laptops(runs, finals, last_tags),
            "stamps": {who: {x["unit"]: x.get("effective_unix_us") for x in r.get("units", [])} for who, r in runs.items()}}  # fmt: skip


def own_action_cell(bed, socks: dict, srcs: dict, unit_of: dict, pole_log: Path) -> dict:
    """A remote's own blackout against its master's: r1 blacked out on its own socket, then
    the master's blackout and resume. r1 must stay black (its own layer) while every other
    unit lights again, and light with them once its own resume comes."""
    checks = []
    others = [ip for u, ip in srcs.items() if u != "r1"]
    r1 = srcs["r1"]
    if wait_lit(pole_log, list(srcs.values()), RELIGHT_WITHIN_S):
        return {"cell": "own", "unmeasurable": "not every unit lit before the cell", "checks": []}
    for sock, action in ((socks["r1"], "blackout"), (socks["m"], "blackout"), (socks["m"], "resume")):
        ans = ask(sock, action)
        if not ans.get("accepted"):
            return {"cell": "own", "unmeasurable": f"{action} not taken: {ans.get('error')}", "checks": []}
    dark = wait_lit(pole_log, others, RELIGHT_WITHIN_S)
    checks.append((not dark, f"after the master's resume every other unit lit ({[unit_of[d] for d in dark]} dark)"))
    sync_bench.flush_pole(bed, pole_log)  # r1's frames up to now, with the others' lit ones
    rows = read_rows(pole_log)
    mine = [tag for s_, _t, tag in rows if s_ == r1]
    checks.append((bool(mine) and mine[-1] == "B", f"r1 still black under its own blackout (last frame {mine[-1] if mine else None!r})"))
    ans = ask(socks["r1"], "resume")
    dark = wait_lit(pole_log, [r1], RELIGHT_WITHIN_S) if ans.get("accepted") else [r1]
    checks.append((not dark, "r1 lit after its own resume"))
    return {"cell": "own", "unmeasurable": None, "checks": checks}


def finish(result: dict, a) -> int:
    result["summary"] = summarize(result["tries"])
    s = result["summary"]
    how = {"socket": "on the master's control socket", "fleet": "by pfx-fleet control --site over held connections",
           "fleet-new": "by pfx-fleet control --site, a new connection per unit"}[a.via]  # fmt: skip
    print(f"\nblackout {how}, {a.units}-unit {'unsynced' if a.no_sync else 'synced'} site, {a.fps} fps "
          f"(one frame {1000 / a.fps:.1f} ms), {s['measured']} of {s['tries']} tries measured")  # fmt: skip
    if result.get("unmeasurable"):
        print(f"UNMEASURABLE: {result['unmeasurable']}")
    for k in ("latency_ms", "told_to_last_ms", "spread_ms", "spread_frames", "fleet_cpu_ms"):
        if k not in s:
            continue
        v = s[k]
        if v["p50"] is None:
            print(f"{k:16s} UNMEASURABLE: no try measured")
        else:
            print(f"{k:16s} p50 {v['p50']:8.3f}  p99 {v['p99']:8.3f}  max {v['max']:8.3f}")
    for i, t in enumerate(result["tries"]):
        if t.get("unmeasurable"):
            print(f"try {i + 1}: UNMEASURABLE: {t['unmeasurable']}")
    own = result.get("own")
    if own:
        print("\na remote's own blackout against its master's blackout and resume")
        if own.get("unmeasurable"):
            print(f"  UNMEASURABLE: {own['unmeasurable']}")
        for ok, what in own.get("checks", []):
            print(f"  {'ok  ' if ok else 'FAIL'} {what}")
    pl = result.get("play")
    if pl:
        ps = pl.get("summary") or summarize([])
        print(f"\nplay on the master (a sequence change), {ps['measured']} of {ps['tries']} tries measured")
        if pl.get("unmeasurable"):
            print(f"  UNMEASURABLE: {pl['unmeasurable']}")
        for k in ("latency_ms", "spread_ms", "spread_frames"):
            v = ps[k]
            print(f"  {k:16s} " + ("UNMEASURABLE: no try measured" if v["p50"] is None
                                   else f"p50 {v['p50']:8.3f}  p99 {v['p99']:8.3f}  max {v['max']:8.3f}"))  # fmt: skip
        for i, t in enumerate(pl.get("tries", [])):
            if t.get("unmeasurable"):
                print(f"  try {i + 1}: UNMEASURABLE: {t['unmeasurable']}")
    sh = result.get("shows")
    if sh:
        print("\nwhat each unit holds, by pfx-fleet shows (a site blackout held)")
        if sh.get("unmeasurable"):
            print(f"  UNMEASURABLE: {sh['unmeasurable']}")
        for ok, what in sh.get("checks", []):
            print(f"  {'ok  ' if ok else 'FAIL'} {what}")
    lp = result.get("laptops")
    if lp:
        print("\ntwo operators at once (two pfx-fleet processes, blackout and test red, same units)")
        if lp.get("unmeasurable"):
            print(f"  UNMEASURABLE: {lp['unmeasurable']}")
        for ok, what in lp.get("checks", []):
            print(f"  {'ok  ' if ok else 'FAIL'} {what}")
    if a.json:
        Path(a.json).write_text(json.dumps(result, indent=1, default=str) + "\n")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--player", default=os.environ.get("PFX_PLAYER", str(HERE.parent / "target/debug/pfx-player")))
    r.add_argument("--units", type=int, default=20)
    r.add_argument("--tries", type=int, default=20)
    r.add_argument("--fps", type=int, default=40)
    r.add_argument("--warmup", type=float, default=2.0)
    r.add_argument("--json")
    r.add_argument("--out", help="run directory (default /tmp/instep-PID)")
    r.add_argument("--laptops", action="store_true",
                   help="after the tries: two pfx-fleet processes act on the same units at once")
    r.add_argument("--fleet-bin", default=os.environ.get("PFX_FLEET", str(HERE.parent / "target/debug/pfx-fleet")),
                   help="pfx-fleet (its pfx-agent beside it)")
    r.add_argument("--via", choices=["socket", "fleet", "fleet-new"], default="socket",
                   help="how each try's blackout is sent (socket: the master's control socket; fleet: "
                   "pfx-fleet control --site over pfx-fleet hold's connections; fleet-new: without hold)")
    r.add_argument("--no-sync", action="store_true", help="every unit plays on its own (no MultiSync)")
    r.add_argument("--play-tries", type=int, default=5,
                   help="--via fleet on a synced site: then this many `play` tries on the master (0: none)")
    d = sub.add_parser("down")
    d.add_argument("--id", help="the run's id (its pid): remove that run's namespaces only")
    a = ap.parse_args(argv)
    if a.cmd == "run":
        return run(a)
    return sync_bench.down(PREFIX, a.id)


if __name__ == "__main__":
    sys.exit(main())
