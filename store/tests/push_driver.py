#!/usr/bin/env python3
"""The show store under kills, power cuts and pushes that meet (scripts/tests.d/71-store.sh).

Every command is a real `pfx-agent dispatch` run as the fleet account's forced command
runs it: SSH_ORIGINAL_COMMAND holds the verb, the settings come from a root-owned
agent.yaml, the store is an ext4 file system on a loop device, and a real
`pfx-player run --store` plays its active show (in the suite's own network namespace,
on its loopback). Only sshd is left out; the fleet suite (70-fleet.sh) has it.

The push is what `pfx-fleet push show` does (show missing, show put chunk by chunk from
the unit's offset, show activate), written out here so that the test can stop it at any
point: kill -9 of the agent or of the player, or a power cut (FS_IOC_SHUTDOWN without a
log flush: what was not committed to the journal is lost, as when the power goes).

usage: push_driver.py SEED   (the rest from the environment the suite sets)
Prints `ok   - ...` / `FAIL - ...` lines and exits 1 on any failure; every random choice
comes from SEED, so a failing run is replayed with the same seed.
"""
import fcntl
import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time

E = os.environ
AGENT, CONFIG, NS = E["AGENT"], E["CONFIG"], E["NS"]
ROOT, IMG, PLAYER, T = E["ROOT"], E["IMG"], E["PLAYER"], E["T"]
HTTP = E["HTTP"]
RATE = int(E["RATE"])
ROUNDS_KILL = int(E.get("PFX_STORE_KILL_ROUNDS", "12"))
ROUNDS_CUT = int(E.get("PFX_STORE_CUT_ROUNDS", "8"))
ROUNDS_RACE = int(E.get("PFX_STORE_RACE_ROUNDS", "6"))
sys.path.insert(0, E["FSEQ_PY"])
from fseq_reference import write_fseq  # noqa: E402

fails = 0


def check(ok, what):
    global fails
    print(("ok   - " if ok else "FAIL - ") + what, flush=True)
    if not ok:
        fails += 1
    return ok


def sha(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


class Cmd:
    """One dispatcher run: the verb in SSH_ORIGINAL_COMMAND, stdin from `data`."""

    current = None  # the running one, for a killer thread

    def __init__(self, verb, data=b""):
        env = {"PATH": E["PATH"], "SSH_ORIGINAL_COMMAND": verb,
               "SSH_CLIENT": "10.99.0.1 40000 22", "SUDO_USER": "pfx"}
        self.p = subprocess.Popen(["nsenter", f"--net=/run/netns/{NS}", "--", AGENT, "dispatch", "--config", CONFIG],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, env=env)
        Cmd.current = self
        out, err = self.p.communicate(data, timeout=300)
        Cmd.current = None
        self.rc, self.err = self.p.returncode, err.decode(errors="replace")
        try:
            self.answer = json.loads(out)
        except ValueError:
            self.answer = None


def dispatch(verb, data=b""):
    return Cmd(verb, data)


# --- shows ------------------------------------------------------------------------------
def make_show(dirname, seed, mb):
    """A show directory: show.yaml and two sequences (about `mb` MiB), DDP to loopback."""
    d = os.path.join(T, "shows", dirname)
    os.makedirs(os.path.join(d, "songs"), exist_ok=True)
    rnd = random.Random(seed)
    n = int(mb * (1 << 20) / 900)
    write_fseq(os.path.join(d, "big.fseq"), [rnd.randbytes(900) for _ in range(n)], 25, 2, 0)
    write_fseq(os.path.join(d, "songs/b.fseq"), [rnd.randbytes(900) for _ in range(40)], 25, 2, 0)
    yaml = show_yaml(["big.fseq", "songs/b.fseq"])
    open(os.path.join(d, "show.yaml"), "w").write(yaml)
    return load_show(d, dirname)


def show_yaml(fseqs, extra="", profile="bench-ddp"):
    return ("interface: lo\nfps: 40\ntx_queue: kernel\noutputs:\n  - name: pole-1\n"
            f"    profile: {profile}\n    destination: 127.0.0.1:4048\n{extra}"
            "content:\n  loop: true\n  playlist:\n" + "".join(f"    - fseq: {f}\n" for f in fseqs))


def load_show(d, name, yaml=None, names=("big.fseq", "songs/b.fseq")):
    files = [{"name": n, "path": os.path.join(d, n), "hash": sha(os.path.join(d, n)),
              "size": os.path.getsize(os.path.join(d, n))} for n in names]
    return {"name": name, "yaml": yaml or open(os.path.join(d, "show.yaml")).read(), "files": files}


def manifest(show):
    return json.dumps({"name": show["name"], "show_yaml": show["yaml"],
                       "files": {f["name"]: f["hash"] for f in show["files"]}}).encode()


class Stopped(Exception):
    pass


def push(show, chunk=1 << 20, stop=None):
    """pfx-fleet's push; `stop`: an Event set when the push must give up (it was cut)."""
    r = {"sent": 0, "missing_bytes": 0, "activate": None}
    c = dispatch("show missing", json.dumps([{"hash": f["hash"], "size": f["size"]}
                                            for f in show["files"]]).encode())
    if c.answer is None or c.rc != 0:
        raise Stopped(f"show missing: rc {c.rc} {c.err.strip()}")
    for m in c.answer["missing"]:
        r["missing_bytes"] += m["size"] - m["offset"]
    for m in c.answer["missing"]:
        f = next(f for f in show["files"] if f["hash"] == m["hash"])
        off = m["offset"]
        while True:
            if stop is not None and stop.is_set():
                raise Stopped("cut")
            n = min(chunk, f["size"] - off)
            with open(f["path"], "rb") as fh:
                fh.seek(off)
                data = fh.read(n)
            p = dispatch(f"show put {f['hash']} {f['size']} {off} {n}", data)
            if p.answer is None:
                raise Stopped(f"show put: rc {p.rc} {p.err.strip()}")
            errs = [e for e in p.answer["errors"] if not e.startswith("could not lower")]
            if errs:
                raise Stopped(f"show put: {errs}")
            r["sent"] += n
            if p.answer["stored"]:
                break
            off = p.answer["have"]
    if stop is not None and stop.is_set():
        raise Stopped("cut")
    a = dispatch("show activate", manifest(show))
    r["activate"] = (a.rc, a.answer)
    if a.answer is None:
        raise Stopped(f"show activate: rc {a.rc} {a.err.strip()}")
    return r


# --- the unit: its player and its data partition --------------------------------------
player_proc = None


def start_player():
    global player_proc
    log = open(os.path.join(T, "player.log"), "ab")
    player_proc = subprocess.Popen(["nsenter", f"--net=/run/netns/{NS}", "--", PLAYER, "run", "--config",
                                    os.path.join(T, "builtin.yaml"), "--store", ROOT,
                                    "--http", HTTP, "--no-mdns"],
                                   stdout=log, stderr=log, stdin=subprocess.DEVNULL)
    open(os.path.join(T, "player.pid"), "w").write(str(player_proc.pid))
    for _ in range(200):
        if profile_show() is not None:
            return
        time.sleep(0.05)
    check(False, "the player answers /profile after its start")


def kill_player():
    global player_proc
    if player_proc is not None:
        player_proc.kill()
        player_proc.wait()
        player_proc = None


def http_get(path):
    # The player listens in the suite's namespace: ask from there.
    out = subprocess.run(["nsenter", f"--net=/run/netns/{NS}", "--", "python3", "-c",
                          "import sys,urllib.request;r=urllib.request.urlopen(sys.argv[1],timeout=2);"
                          "sys.stdout.write(r.read().decode())", f"http://{HTTP}{path}"],
                         capture_output=True, text=True)
    return out.stdout if out.returncode == 0 else None


def profile_show():
    t = http_get("/profile")
    return json.loads(t).get("show") if t else None


def mount():
    subprocess.run(["e2fsck", "-p", IMG], capture_output=True)
    subprocess.run(["mount", "-o", "loop", IMG, ROOT], check=True)


def users_of(path):
    """Pids of the processes with a file, directory or mapping under `path` (ours: the
    agent's `pfx-player run --check` child outlives a kill -9 of the agent for a moment)."""
    pids = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            links = [os.readlink(f"/proc/{pid}/cwd")]
            links += [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
        except OSError:
            continue
        if any(l == path or l.startswith(path + "/") for l in links):
            pids.append(int(pid))
    return pids


def umount():
    for _ in range(100):
        if subprocess.run(["umount", ROOT], capture_output=True).returncode == 0:
            break
        for pid in users_of(ROOT):
            cmd = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace")
            # Only what this suite started: its agent, its player (their paths are in T).
            if T in cmd or AGENT in cmd or PLAYER in cmd:
                print(f"# power cut: ending pid {pid} still using the store: {cmd[:120]}", flush=True)
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        time.sleep(0.1)
    else:
        raise RuntimeError(f"cannot unmount {ROOT}: still used by {users_of(ROOT)}")
    # A mount of the same image would reuse a loop device still attached to it, and with
    # it the file system that was cut: none may be left.
    left = subprocess.run(["losetup", "-j", IMG], capture_output=True, text=True).stdout.strip()
    for _ in range(50):
        if not left:
            break
        time.sleep(0.1)
        left = subprocess.run(["losetup", "-j", IMG], capture_output=True, text=True).stdout.strip()
    if left:
        holders = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                if ROOT in open(f"/proc/{pid}/mountinfo").read():
                    holders.append((pid, open(f"/proc/{pid}/cmdline", "rb").read()[:100]))
            except OSError:
                pass
        raise RuntimeError(f"the image is still attached after the unmount: {left}; mounted in {holders}")


def power_cut():
    """FS_IOC_SHUTDOWN, EXT4_GOING_FLAGS_NOLOGFLUSH: the file system stops where it is and
    what its journal had not committed is gone, as when the power goes."""
    fd = os.open(ROOT, os.O_RDONLY)
    try:
        fcntl.ioctl(fd, 0x8004587D, (2).to_bytes(4, "little"))
    finally:
        os.close(fd)


# --- what must hold -------------------------------------------------------------------
def active_state():
    """(show id, name) of the active show, after checking every file of it; or why not."""
    link = os.path.join(ROOT, "active")
    if not os.path.islink(link):
        return None, "no active link"
    target = os.readlink(link)
    d = os.path.join(ROOT, target)
    try:
        m = json.load(open(os.path.join(d, "manifest.json")))
    except (OSError, ValueError) as e:
        return None, f"active -> {target}: manifest: {e}"
    for n, h in m["files"].items():
        p = os.path.join(d, n)
        if not os.path.isfile(p) or sha(p) != h:
            return None, f"active show {m['id']}: {n} does not hash to {h}"
    return m["id"], m["name"]


def store_clean():
    """No stored file whose content is not its name."""
    d = os.path.join(ROOT, "store/sha256")
    bad = [n for n in os.listdir(d) if sha(os.path.join(d, n)) != n]
    return bad


def age_shows():
    """Shows made minutes ago are kept anyway (a push may be about to activate one); age
    them, so that only the promise (the active show and the one before it) keeps them."""
    d = os.path.join(ROOT, "shows")
    old = time.time() - 3600
    for n in os.listdir(d):
        os.utime(os.path.join(d, n), (old, old))


# --- the cases ------------------------------------------------------------------------
def case_bad_offset(rnd):
    h = "%064x" % rnd.getrandbits(256)
    c = dispatch(f"show put {h} 100 10 10", b"0123456789")
    part = os.path.join(ROOT, "staging", h + ".part")
    check(c.rc == 1 and c.answer and any("not 10" in e for e in c.answer["errors"]),
          f"a put at OFFSET 10 with nothing staged is refused (rc {c.rc}): {c.answer and c.answer['errors']}")
    check(not os.path.exists(part), "and it leaves no .part in staging")


def case_race(rnd, rounds):
    """Issue 25's reproduction: two `show put`s of one new file at once, each the whole file
    after 0.3 s (an operator's retry while the first push runs, two laptops)."""
    for r in range(rounds):
        size = rnd.randrange(1_000_000, 2_000_000)
        path = os.path.join(T, f"race{r}.bin")
        open(path, "wb").write(rnd.randbytes(size))
        h = sha(path)
        procs = []
        env = dict(E, SSH_ORIGINAL_COMMAND=f"show put {h} {size} 0 {size}")
        for i in range(2):
            sh = f"sleep {0.3 + rnd.random() * 0.02:.3f}; cat {path}"
            procs.append(subprocess.Popen(
                f"({sh}) | nsenter --net=/run/netns/{NS} -- {AGENT} dispatch --config {CONFIG}",
                shell=True, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE))
        outs = [p.communicate(timeout=120) for p in procs]
        answers = [json.loads(o) if o else {} for o, _ in outs]
        blob = os.path.join(ROOT, "store/sha256", h)
        ok = os.path.isfile(blob) and os.path.getsize(blob) == size and sha(blob) == h
        stored = sum(1 for a in answers if a.get("stored"))
        refused = [e for a in answers for e in a.get("errors", []) if "another transfer" in e]
        check(ok, f"race {r}: two puts of a {size}-byte file at once: the stored file is {size} bytes and hashes to its name")
        check(stored >= 1 and stored + len(refused) == 2,
              f"race {r}: one stored it, the other was refused as a second writer or found it stored ({stored} stored, refusals {refused[:1]})")
        miss = dispatch("show missing", json.dumps([{"hash": h, "size": size}]).encode())
        check(miss.answer and miss.answer["missing"] == [], f"race {r}: show missing does not ask for it")
        check(not os.path.exists(os.path.join(ROOT, "staging", h + ".part")), f"race {r}: no .part left")
    # Four writers, each resuming from what `show missing` says, 64 KiB at a time.
    size = 3_000_000
    path = os.path.join(T, "race4.bin")
    open(path, "wb").write(rnd.randbytes(size))
    h = sha(path)
    seeds = [rnd.getrandbits(32) for _ in range(4)]
    busy = [0]

    def writer(seed):
        w = random.Random(seed)
        for _ in range(2000):
            m = dispatch("show missing", json.dumps([{"hash": h, "size": size}]).encode()).answer
            if not m or not m["missing"]:
                return
            off = m["missing"][0]["offset"]
            n = min(w.choice([1 << 16, 3 << 15, 1 << 17]), size - off)
            with open(path, "rb") as f:
                f.seek(off)
                data = f.read(n)
            p = dispatch(f"show put {h} {size} {off} {n}", data).answer or {}
            if any("another transfer" in e for e in p.get("errors", [])):
                busy[0] += 1
            time.sleep(w.random() * 0.01)

    ts = [threading.Thread(target=writer, args=(s,)) for s in seeds]
    [t.start() for t in ts]
    [t.join() for t in ts]
    blob = os.path.join(ROOT, "store/sha256", h)
    check(os.path.isfile(blob) and sha(blob) == h and os.path.getsize(blob) == size,
          f"four writers resuming one file in 64-128 KiB puts: stored whole, under its hash ({busy[0]} puts refused as a second writer)")
    check(store_clean() == [], "no stored file anywhere holds other content than its name")


def case_closed(rnd, good):
    """Hand-written shows that name files outside themselves, pushed through the dispatcher:
    each refused by the unit's own check, the active show unchanged."""
    before = active_state()
    outside = os.path.join(T, "outside.fseq")
    write_fseq(outside, [rnd.randbytes(900) for _ in range(20)], 25, 2, 0)
    prof_src = os.path.join(E["TOP"], "profiles", "bench-ddp.yaml")
    d = os.path.join(T, "shows", "hand")
    os.makedirs(d, exist_ok=True)
    mine = os.path.join(d, "mine.yaml")
    open(mine, "wb").write(open(prof_src, "rb").read())
    seq = good["files"][1]
    files = [seq]
    cases = [
        ("profiles_dir: /etc", "profiles_dir: /etc\n" + show_yaml(["songs/b.fseq"]), "profiles_dir: /etc is refused"),
        ("fseq: an absolute path outside the store", show_yaml([outside]), f"`{outside}` must be relative"),
        ("fseq: ../.. out of the show", show_yaml(["../../../outside.fseq"]), "`..` component"),
        ("fseq: a file the show does not hold", show_yaml(["songs/other.fseq"]), "is not a file of this show"),
        ("profile: an absolute path", show_yaml(["songs/b.fseq"], profile=prof_src), "outputs[0].profile"),
        ("profile: a file not in the show", show_yaml(["songs/b.fseq"], profile="mine.yaml"), "`mine.yaml` is not a file of this show"),
        ("sync.sequences: /etc", show_yaml(["songs/b.fseq"], extra="") + "sync:\n  role: remote\n  sequences: /etc\n", "sync.sequences"),
    ]
    for what, yaml, want in cases:
        show = {"name": "hand", "yaml": yaml, "files": files}
        try:
            r = push(show)
        except Stopped as e:
            check(False, f"{what}: the push itself failed: {e}")
            continue
        rc, a = r["activate"]
        msg = (a or {}).get("message", "")
        check(rc == 1 and not a["verified"] and want in msg and "refused" in msg,
              f"pushed show with {what}: refused by the unit's check (rc {rc}): {msg[:160]}")
    check(active_state() == before, "after the refusals the active show is the one before, whole")
    # The same hand-written show with the profile as its own file: accepted and played.
    pf = {"name": "mine.yaml", "path": mine, "hash": sha(mine), "size": os.path.getsize(mine)}
    show = {"name": "hand", "yaml": show_yaml(["songs/b.fseq"], profile="mine.yaml"), "files": [seq, pf]}
    r = push(show)
    rc, a = r["activate"]
    check(rc == 0 and a["verified"], f"a hand-written show naming only its own files plays (rc {rc}): {a.get('message')}")


def case_quarantine(show):
    """A stored file that does not match its name (as the race used to leave one): found,
    quarantined, reported, asked for again, and the next push repairs the show."""
    r = push(show)
    check(r["activate"][0] == 0, "the show is active before the damage")
    f = show["files"][0]
    blob = os.path.join(ROOT, "store/sha256", f["hash"])
    with open(blob, "ab") as b:
        b.write(open(f["path"], "rb").read())
    miss = dispatch("show missing", json.dumps([{"hash": x["hash"], "size": x["size"]} for x in show["files"]]).encode())
    asked = [m["hash"] for m in (miss.answer or {}).get("missing", [])]
    check(asked == [f["hash"]], f"show missing asks for the damaged file again ({asked})")
    q = [n for n in os.listdir(os.path.join(ROOT, "quarantine")) if not n.endswith(".why")]
    check(len(q) == 1 and q[0].startswith(f["hash"]), f"it is in quarantine/ ({q})")
    health = http_get("/health") or ""
    check("quarantined" in health, f"/health says so: {health.strip()!r}")
    st = dispatch("show status").answer or {}
    check("quarantined" in st.get("message", ""), f"show status says so: {st.get('message')}")
    a = dispatch("show activate", manifest(show))
    check(a.rc == 1 and "send it first" in (a.answer or {}).get("message", ""),
          f"an activation naming it without sending it is refused: {(a.answer or {}).get('message', '')[:120]}")
    r = push(show)
    check(r["activate"][0] == 0 and r["sent"] == f["size"],
          f"the next push sends that file alone ({r['sent']} bytes) and plays the show again")
    sid, _ = active_state()
    check(sid is not None, "the active show's files all hash to their names")


def case_activate_reverifies(rot, a):
    """`show activate` claims the files hash to their names: it reads them back. A stored
    file changed in place (its size and time kept, so the store's record of hashed files
    still covers it, as bit rot would) is caught there, quarantined, and the old show
    keeps playing."""
    check(push(rot)["activate"][0] == 0 and push(a)["activate"][0] == 0, "two shows pushed")
    f = rot["files"][0]
    blob = os.path.join(ROOT, "store/sha256", f["hash"])
    st = os.stat(blob)
    with open(blob, "r+b") as b:
        b.seek(100)
        x = b.read(1)
        b.seek(100)
        b.write(bytes([x[0] ^ 0xFF]))
    os.utime(blob, ns=(st.st_atime_ns, st.st_mtime_ns))
    before = active_state()
    c = dispatch("show activate", manifest(rot))
    msg = (c.answer or {}).get("message", "")
    check(c.rc == 1 and not c.answer["verified"] and "quarantined" in msg and f["hash"] in msg,
          f"activating a show whose stored file went bad is refused (rc {c.rc}): {msg[:200]}")
    check(active_state() == before, "and the show before keeps playing")
    r = push(rot)
    check(r["activate"][0] == 0 and r["sent"] == f["size"], f"a push again sends that file ({r['sent']} bytes) and plays")


def case_two_pushes(a, b):
    """Two whole pushes of different shows at once (two laptops): each ends with an answer,
    the active show is one of them, whole, and no stored file is wrong."""
    age_shows()
    res = {}

    def go(show):
        try:
            res[show["name"]] = push(show)["activate"]
        except Stopped as e:
            res[show["name"]] = (None, str(e))

    ts = [threading.Thread(target=go, args=(s,)) for s in (a, b)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    sid, name = active_state()
    check(sid is not None and name in ("alpha", "beta"),
          f"two pushes at once: the active show is one of them, whole ({name}; answers {[(k, v[0]) for k, v in res.items()]})")
    check(store_clean() == [], "two pushes at once: every stored file hashes to its name")
    r = push(a)
    check(r["activate"][0] == 0, "after them, a push of alpha plays")


def case_killed_after_the_switch(show):
    """Issue 25's third finding, made to happen every time: the agent of `show activate` is
    killed right after it switched `active` (while it waits for the player), and the push
    resumes. The show before must be kept (it used to be removed at once)."""
    age_shows()
    old = active_state()
    # Send the files, then activate by hand so that the kill lands after the switch.
    c = dispatch("show missing", json.dumps([{"hash": f["hash"], "size": f["size"]} for f in show["files"]]).encode())
    for m in c.answer["missing"]:
        f = next(f for f in show["files"] if f["hash"] == m["hash"])
        data = open(f["path"], "rb").read()
        dispatch(f"show put {f['hash']} {f['size']} 0 {f['size']}", data)
    link = os.path.join(ROOT, "active")
    before = os.readlink(link)
    env = {"PATH": E["PATH"], "SSH_ORIGINAL_COMMAND": "show activate"}
    p = subprocess.Popen(["nsenter", f"--net=/run/netns/{NS}", "--", AGENT, "dispatch", "--config", CONFIG],
                         stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    p.stdin.write(manifest(show))
    p.stdin.close()
    switched = False
    for _ in range(20000):
        if os.readlink(link) != before:
            switched = True
            break
        if p.poll() is not None:
            break
        time.sleep(0.0005)
    p.kill()
    p.wait()
    check(switched, f"the activation's agent was killed after the switch (active {before} -> {os.readlink(link)})")
    r = push(show)
    check(r["activate"][0] == 0, "the resumed push is verified")
    check(os.path.isfile(os.path.join(ROOT, "shows", old[0], "manifest.json")),
          f"after a resumed activation the show before ({old[1]} {old[0]}) is kept")


def round_interrupted(rnd, show, cut, label):
    """Push `show` and stop it at a random moment: kill -9 of the agent running then (or of
    the player), or a power cut. Then: the active show is the old or the new one, whole;
    the push resumes sending no more than was missing; the show before is kept."""
    old = active_state()
    age_shows()
    stop = threading.Event()
    # Anywhere in the push: the transfer at the agent's rate, then the activation (the
    # player's check, the re-read, the switch, the player's confirmation: under a second).
    est = sum(f["size"] for f in show["files"]) / RATE + 0.8
    at = rnd.uniform(0.05, est)
    how = "power cut" if cut else rnd.choice(["kill -9 agent", "kill -9 agent", "kill -9 player"])
    done = {}

    def run():
        try:
            done["r"] = push(show, chunk=rnd.choice([1 << 19, 1 << 20, 3 << 19]), stop=stop)
        except Stopped as e:
            done["stopped"] = str(e)
        except Exception as e:  # the cut makes commands fail any way they like
            done["stopped"] = repr(e)

    th = threading.Thread(target=run)
    th.start()
    th.join(at)
    what = "finished first"
    if th.is_alive():
        c = Cmd.current
        if how == "kill -9 player":
            kill_player()
            what = "player killed"
        else:
            if cut:
                power_cut()
            stop.set()
            if c is not None:
                try:
                    os.kill(c.p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            what = how
        th.join(300)
    if cut and what == how:
        kill_player()
        umount()
        mount()
    if player_proc is None:
        start_player()
    sid, name = active_state()
    check(sid is not None and name in (old[1], show["name"]),
          f"{label} ({what} at {at:.2f} s): active is the old or the new show, whole ({name}: {sid or old})")
    bad = store_clean()
    check(bad == [], f"{label}: every stored file hashes to its name ({len(bad)} do not)")
    # Resume: no more than what is missing is sent, and the show before is kept.
    try:
        r = push(show, chunk=1 << 20)
    except Stopped as e:
        check(False, f"{label}: the resumed push: {e}")
        return
    rc, a = r["activate"]
    check(rc == 0 and a["verified"], f"{label}: the resumed push is verified (rc {rc}): {a.get('message')}")
    check(r["sent"] == r["missing_bytes"],
          f"{label}: the resume sent {r['sent']} bytes, what show missing said was missing ({r['missing_bytes']})")
    prev = old[0]
    if prev and prev != a["active"]["id"]:
        check(os.path.isfile(os.path.join(ROOT, "shows", prev, "manifest.json")),
              f"{label}: the show before ({old[1]} {prev}) is kept")


def main():
    seed = int(sys.argv[1])
    rnd = random.Random(seed)
    start_player()
    a = make_show("alpha", seed + 1, 3.0)
    b = make_show("beta", seed + 2, 3.0)
    case_bad_offset(rnd)
    r = push(a)
    check(r["activate"][0] == 0 and r["activate"][1]["verified"], f"a first push plays: {r['activate'][1].get('message')}")
    case_race(rnd, ROUNDS_RACE)
    case_closed(rnd, a)
    case_quarantine(b)
    case_two_pushes(a, b)
    case_activate_reverifies(make_show("rot", seed + 4, 1.0), a)
    case_killed_after_the_switch(make_show("switched", seed + 3, 1.0))
    # Each round pushes a new show (so there is a transfer to stop) over the last one.
    for i in range(ROUNDS_KILL + ROUNDS_CUT):
        cut = i >= ROUNDS_KILL
        show = make_show(f"round{i}", seed + 100 + i, rnd.uniform(1.5, 4.0))
        label = f"power-cut round {i - ROUNDS_KILL}" if cut else f"kill round {i}"
        round_interrupted(rnd, show, cut, label)
    kill_player()
    print(f"push_driver: seed {seed}: {fails} failed", flush=True)
    return 1 if fails else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    finally:
        kill_player()
