#!/usr/bin/env python3
"""TEST DOUBLE of RAUC 1.8 for pfx's fleet tests. Not RAUC: the real one is proved by
the VM suite (docs/update.md). It implements only what pfx-agent calls, with RAUC 1.8's
JSON shapes (src/main.c), and a boot environment modelled on docs/update.md's (BOOT_ORDER,
BOOT_x_LEFT; good iff LEFT > 0), with its state in a directory:

  rauc_double.py --state DIR init COMPATIBLE VERSION     slot A booted with VERSION, B empty
  rauc_double.py --state DIR set KEY VALUE               fail_install true|false,
                                                         on_reboot normal|rollback|hang,
                                                         install_delay_s N, force_file PATH,
                                                         sshd_pidfile PATH, cmdline PATH,
                                                         on_boot 'CMD ...' (run after a boot)
  rauc_double.py --state DIR info --output-format=json BUNDLE
  rauc_double.py --state DIR install BUNDLE
  rauc_double.py --state DIR status [--detailed] --output-format=json
  rauc_double.py --state DIR status mark-active|mark-good|mark-bad [booted|other|SLOT]
  rauc_double.py --state DIR reboot                      what the boot script would do

A bundle for the double is any file whose first line is JSON
{"compatible": ..., "version": ..., "signed": true}; "signed": false is a bad signature.
on_reboot rollback: the switched-to slot fails its trial (LEFT 0), the old one boots;
on_reboot hang: the unit does not come back (its sshd is killed). Both act once.
"""
import datetime
import json
import os
import shlex
import signal
import subprocess
import sys
import time

SLOTS = {"A": "rootfs.0", "B": "rootfs.1"}


def die(msg, code=1):
    print(msg, file=sys.stderr)
    sys.exit(code)


def load(d):
    try:
        with open(os.path.join(d, "state.json")) as f:
            return json.load(f)
    except FileNotFoundError:
        die("rauc (test double): no state; run init first")


def save(d, st):
    tmp = os.path.join(d, "state.json.tmp")
    with open(tmp, "w") as f:
        json.dump(st, f, indent=1)
    os.replace(tmp, os.path.join(d, "state.json"))


def other(b):
    return "B" if b == "A" else "A"


def primary(st):
    for s in st["order"]:
        if st["left"][s] > 0:
            return s
    return None


def header(path):
    try:
        with open(path, "rb") as f:
            h = json.loads(f.readline().decode())
        assert isinstance(h, dict) and "compatible" in h
        return h
    except Exception:
        die(f"rauc info: Failed to load bundle {path}: not a bundle (invalid header)")


def check_sig(path):
    h = header(path)
    if not h.get("signed", False):
        die("Failed to verify bundle: signature verification failed: certificate verify failed")
    return h


def resolve(st, which):
    if which in (None, "booted"):
        return st["booted"]
    if which == "other":
        return other(st["booted"])
    for b, n in SLOTS.items():
        if which in (b, n):
            return b
    die(f"rauc status: no slot {which}")


def status_json(st):
    slots = []
    for b in ("B", "A"):
        s = st["slots"][b]
        entry = {
            "class": "rootfs",
            "device": f"/dev/disk/by-partuuid/1234abcd-0{2 if b == 'A' else 3}",
            "type": "ext4",
            "bootname": b,
            "state": "booted" if st["booted"] == b else "inactive",
            "parent": None,
            "mountpoint": "/" if st["booted"] == b else None,
            "boot_status": "good" if st["left"][b] > 0 else "bad",
        }
        if s["version"] is not None:
            entry["slot_status"] = {
                "bundle": {"compatible": st["compatible"], "version": s["version"]},
                "installed": {"timestamp": s["installed"], "count": 1},
                "status": "ok",
            }
        slots.append({SLOTS[b]: entry})
    p = primary(st)
    return {
        "compatible": st["compatible"],
        "variant": None,
        "booted": st["booted"],
        "boot_primary": SLOTS[p] if p else None,
        "slots": slots,
    }


def main():
    a = sys.argv[1:]
    if len(a) < 3 or a[0] != "--state":
        die("usage: rauc_double.py --state DIR COMMAND ...", 2)
    d, cmd, rest = a[1], a[2], a[3:]
    log = os.path.join(d, "calls.log")
    if cmd != "init":
        with open(log, "a") as f:
            f.write(" ".join([cmd] + rest) + "\n")
    if cmd == "init":
        os.makedirs(d, exist_ok=True)
        save(d, {
            "compatible": rest[0],
            "booted": "A",
            "order": ["A", "B"],
            "left": {"A": 3, "B": 0},
            "slots": {"A": {"version": rest[1], "installed": "2026-12-01T00:00:00Z"},
                      "B": {"version": None, "installed": None}},
            "fail_install": False, "on_reboot": "normal", "install_delay_s": 0,
            "force_file": None, "sshd_pidfile": None, "cmdline": None, "on_boot": None,
            "installs": [],
        })
        return
    st = load(d)
    if cmd == "set":
        k, v = rest
        if k in ("fail_install",):
            st[k] = v == "true"
        elif k == "install_delay_s":
            st[k] = float(v)
        else:
            st[k] = v
        save(d, st)
    elif cmd == "info":
        path = [x for x in rest if not x.startswith("--")][0]
        h = check_sig(path)
        print(json.dumps({"compatible": h["compatible"], "version": h.get("version"),
                          "description": None, "build": None, "hooks": [], "images": []}))
    elif cmd == "install":
        path = [x for x in rest if not x.startswith("--")][0]
        h = check_sig(path)
        if h["compatible"] != st["compatible"]:
            die(f"Compatible mismatch: Expected '{st['compatible']}' but bundle manifest has '{h['compatible']}'")
        tgt = other(st["booted"])
        forced = bool(st.get("force_file")) and os.path.exists(st["force_file"])
        st["installs"].append({"version": h.get("version"), "slot": tgt, "forced": forced})
        # RAUC marks the target bad before it writes.
        st["left"][tgt] = 0
        save(d, st)
        time.sleep(st.get("install_delay_s", 0))
        if st["fail_install"]:
            die("Installation error: Failed updating slot rootfs.1: failed to write image (test double)")
        st["slots"][tgt] = {"version": h.get("version"),
                            "installed": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}
        save(d, st)
        print("installing: 100% Installing done.")
    elif cmd == "status":
        if rest and rest[0].startswith("mark-"):
            which = resolve(st, rest[1] if len(rest) > 1 else None)
            if rest[0] == "mark-active":
                st["order"] = [which, other(which)]
                st["left"][which] = 1
            elif rest[0] == "mark-good":
                st["left"][which] = 3
            elif rest[0] == "mark-bad":
                st["left"][which] = 0
            else:
                die(f"unknown subcommand {rest[0]}")
            save(d, st)
            print(f"rauc status: marked slot {SLOTS[which]} as {rest[0][5:]}")
        else:
            if "--output-format=json" not in rest:
                die("the test double prints JSON only")
            print(json.dumps(status_json(st)))
    elif cmd == "reboot":
        mode = st.get("on_reboot", "normal")
        st["on_reboot"] = "normal"
        if mode == "hang":
            save(d, st)
            pf = st.get("sshd_pidfile")
            if pf and os.path.exists(pf):
                os.kill(int(open(pf).read().strip()), signal.SIGTERM)
            return
        pick = primary(st)
        if pick is None:
            st["left"] = {"A": 3, "B": 3}
            pick = st["order"][0]
        if mode == "rollback" and pick != st["booted"]:
            # The new slot's trial boot never got healthy: its one attempt is used up.
            st["left"][pick] = 0
            pick = primary(st) or st["booted"]
        trial = st["left"][pick] == 1
        st["left"][pick] -= 1
        st["booted"] = pick
        save(d, st)
        if st.get("cmdline"):
            with open(st["cmdline"], "w") as f:
                f.write(f"root=PARTUUID=1234abcd-0{2 if pick == 'A' else 3} rauc.slot={pick}{' pfx.trial=1' if trial else ''}\n")
        if st.get("on_boot"):
            subprocess.Popen(shlex.split(st["on_boot"]), stdin=subprocess.DEVNULL,
                             stdout=open(os.path.join(d, "boot.log"), "a"), stderr=subprocess.STDOUT,
                             start_new_session=True)
    else:
        die(f"rauc (test double): {cmd} is not implemented")


if __name__ == "__main__":
    main()
