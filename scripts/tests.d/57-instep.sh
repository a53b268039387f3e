#!/usr/bin/env bash
# Show-night actions in step across a synced site (docs/testbed.md, "In step"): one master and
# PFX_INSTEP_UNITS-1 remotes (default 5 units) in network namespaces, each player in its own
# time namespace, a pole simulator timestamping every unit's frames. PFX_INSTEP_TRIES (default
# 5) blackouts on the master's control socket, each followed by a resume. Fails when no try is
# measurable (a try whose unit stalled on the host is UNMEASURABLE), when the spread between the units' first black frames exceeds one frame
# (p99), or when the last unit's first black frame comes later than 250 ms after the request
# (p99); then a remote's own blackout against its master's (it stays black through the
# master's resume, lights at its own); then two operators at once: two pfx-fleet processes (two databases, as two laptops),
# `blackout --site` and `test red --site` started together through the real agent: each unit
# must hold the action it stamped later, and its pole show it. Then the same site again through
# the whole operator's path (a real sshd per unit, `pfx-fleet hold`, `pfx-fleet control
# blackout --site`): the same two targets, every action over a held connection, and
# `play` on the master (a sequence change) shown by every unit at the same frame, and
# `pfx-fleet shows` naming each unit's held blackout. The 20-unit, 20-try figures in
# docs/PERFORMANCE.md are the bench commands in README.md.
set -uo pipefail
top=${PFX_TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
# shellcheck source=../lib/check.sh
. "$top/scripts/lib/check.sh"
need_root "network and time namespaces"
player=${PFX_PLAYER:-$top/target/debug/pfx-player}
fleet=${PFX_FLEET:-${PFX_FLEET_BIN:-$top/target/debug}/pfx-fleet}
[ -x "$fleet" ] || die "build first (cargo build -p pfx-player -p pfx-fleet): $fleet"
out=$(mktemp -d /tmp/pfx-instep.XXXXXX)
# Each bench run names its namespaces instep<its pid>-ROLE and removes them itself (also on
# SIGINT and SIGTERM). Should one be killed before its teardown, `down --id PID` removes that
# run's namespaces and no other: a plain `instep_bench.py down` would remove every instep*
# namespace on the host, a concurrent run's too.
bench=""
cleanup() {
  if [ -n "$bench" ]; then
    kill "$bench" 2>/dev/null
    wait "$bench" 2>/dev/null
    python3 "$top/testbed/instep_bench.py" down --id "$bench" >/dev/null 2>&1
  fi
  rm -rf "$out"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# One bench run, in the background so that a signal to the suite reaches cleanup at once.
instep() {
  local rc
  python3 "$top/testbed/instep_bench.py" run --player "$player" --units "${PFX_INSTEP_UNITS:-5}" \
    --tries "${PFX_INSTEP_TRIES:-5}" --fleet-bin "$fleet" "$@" &
  bench=$!
  wait "$bench"
  rc=$?
  python3 "$top/testbed/instep_bench.py" down --id "$bench" >/dev/null 2>&1
  bench=""
  return "$rc"
}


echo "--- pytest testbed/tests/test_instep_bench.py"
check "pytest test_instep_bench.py" python3 -m pytest -q "$top/testbed/tests/test_instep_bench.py"

instep --laptops --json "$out/instep.json" --out "$out/run" || die "instep_bench.py run"
ok "instep_bench.py run"
# The whole operator's path: a real sshd per unit (its key's forced command the unit's agent),
# `pfx-fleet hold --site`, then each try `pfx-fleet control blackout --site` / `resume --site`;
# then `pfx-fleet shows --site` with a site blackout held.
instep --via fleet --json "$out/fleet.json" --out "$out/fleet" || die "instep_bench.py run --via fleet"
ok "instep_bench.py run --via fleet"
# The judge (check.sh's `judge`) prints "ok<TAB>WHAT" or "fail<TAB>WHAT" per check.
judge "judging instep.json and fleet.json" python3 - "$out/instep.json" "$out/fleet.json" <<'PY'
import json, sys
def check(cond, what):
    print(("ok" if cond else "fail") + "\t" + what.replace("\n", " | "))
r = json.load(open(sys.argv[2]))
s = r["summary"]
print("--- pfx-fleet control --site over held connections")
check(r.get("unmeasurable") is None, f"fleet: the site came up, every unit held ({r.get('unmeasurable')})")
check(s["measured"] > 0, f"fleet: tries measured: {s['measured']} of {s['tries']}")
sf, lat = s["spread_frames"]["p99"], s["latency_ms"]["p99"]
check(sf is not None and sf <= 1.0, f"fleet: spread between units p99 {sf} frames <= 1 (the remotes told after their master)")
check(lat is not None and lat <= 250, f"fleet: pfx-fleet control to the last pole black p99 {lat} ms <= 250 ms")
held = [t.get("held_connections") for t in r["tries"] if t.get("unmeasurable") is None]
check(bool(held) and all(h == r["units"] for h in held), f"fleet: every unit's action over its held connection ({held})")
pl = r.get("play") or {"unmeasurable": "not run"}
ps = pl.get("summary") or {"measured": 0, "tries": 0, "spread_frames": {"p99": None}}
check(pl.get("unmeasurable") is None and ps["measured"] > 0, f"play: tries measured: {ps['measured']} of {ps['tries']} ({pl.get('unmeasurable')})")
pf = ps["spread_frames"]["p99"]
check(pf is not None and pf <= 1.0, f"play: every unit shows the restarted sequence's frame within p99 {pf} frames of each other <= 1")
sh = r.get("shows") or {"unmeasurable": "not run"}
check(sh.get("unmeasurable") is None and bool(sh.get("checks")), f"shows: measurable ({sh.get('unmeasurable')})")
for good, what in sh.get("checks", []):
    check(good, f"shows: {what}")
print("--- the master's control socket")
r = json.load(open(sys.argv[1]))
s = r["summary"]
check(r.get("unmeasurable") is None, f"the site came up and stayed up ({r.get('unmeasurable')})")
if s["measured"] == 0:
    print(f"UNMEASURABLE: no try measured of {s['tries']} (each try's reason is printed above)")
check(s["measured"] > 0, f"tries measured: {s['measured']} of {s['tries']} (the others UNMEASURABLE, reasons above)")
sf = s["spread_frames"]["p99"]
check(sf is not None and sf <= 1.0, f"spread between units p99 {sf} frames <= 1 ({s['spread_ms']['p99']} ms)")
lat = s["latency_ms"]["p99"]
check(lat is not None and lat <= 250, f"request to the last pole black p99 {lat} ms <= 250 ms")
own = r.get("own") or {"unmeasurable": "not run"}
check(own.get("unmeasurable") is None, f"a remote's own action: measurable ({own.get('unmeasurable')})")
for good, what in own.get("checks", []):
    check(good, f"a remote's own action: {what}")
lp = r.get("laptops") or {"unmeasurable": "not run"}
check(lp.get("unmeasurable") is None, f"two operators at once: measurable ({lp.get('unmeasurable')})")
for good, what in lp.get("checks", []):
    check(good, f"two operators at once: {what}")
PY
finish 57-instep
