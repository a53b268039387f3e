#!/usr/bin/env bash
# Frame sync across units, measured (docs/sync-bench.md): one master and three remotes in
# network namespaces, each player in its own time namespace, a pole simulator receiving from
# all four. Cells clean, loss (1 % + 2 ms jitter on the sync path only), restart (the master
# killed half-way) and control (the same units standalone, 100 ms apart), one attempt each;
# then interop with FPP-layout peers (a master driving a pfx remote; a receiver decoding a pfx
# master and checking its v3 ping byte by byte). Fails when the clean cell's p99 spread exceeds
# one frame period, when the control does not show the spread the measure must catch, or when
# an interop check fails. PFX_SYNC_SECONDS (default 20) per cell, PFX_SYNC_FPS and
# PFX_SYNC_STEP_MS (default 60 fps, 17 ms); the figures in docs/PERFORMANCE.md are 60 s cells.
set -uo pipefail
top=${PFX_TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
# shellcheck source=../lib/check.sh
. "$top/scripts/lib/check.sh"
need_root "network and time namespaces"
player=${PFX_PLAYER:-$top/target/debug/pfx-player}
out=$(mktemp -d /tmp/pfx-sync.XXXXXX)
# The bench names its namespaces synctest<its pid>-ROLE and removes them itself (also on
# SIGTERM). Should it be killed before its teardown, `down --id PID` removes that run's
# namespaces and no other: a plain `down` would remove every synctest* namespace on the
# host, a concurrent run's too.
bench=""
cleanup() {
  if [ -n "$bench" ]; then
    kill "$bench" 2>/dev/null
    wait "$bench" 2>/dev/null
    python3 "$top/testbed/sync_bench.py" down --id "$bench" >/dev/null 2>&1
  fi
  rm -rf "$out"
}
trap cleanup EXIT
trap 'exit 130' INT TERM


echo "--- pytest testbed/tests/test_fpp_peer.py test_sync_bench.py"
check "pytest test_fpp_peer.py test_sync_bench.py" \
  python3 -m pytest -q "$top/testbed/tests/test_fpp_peer.py" "$top/testbed/tests/test_sync_bench.py"

python3 "$top/testbed/sync_bench.py" run --player "$player" --seconds "${PFX_SYNC_SECONDS:-20}" \
  --fps "${PFX_SYNC_FPS:-60}" --step-ms "${PFX_SYNC_STEP_MS:-17}" \
  --json "$out/sync.json" --out "$out/run" &
bench=$!
wait "$bench"
rc=$?
# Whatever a bench that failed left behind; its own names only.
python3 "$top/testbed/sync_bench.py" down --id "$bench" >/dev/null 2>&1
bench=""
[ "$rc" = 0 ] || die "sync_bench.py run (exit $rc)"
ok "sync_bench.py run"
# The judge (check.sh's `judge`) prints "ok<TAB>WHAT" or "fail<TAB>WHAT" per check.
judge "judging sync.json" python3 - "$out/sync.json" <<'PY'
import json, sys
cells = {c["cell"]: c for c in json.load(open(sys.argv[1]))}
def check(cond, what):
    print(("ok" if cond else "fail") + "\t" + what.replace("\n", " | "))
import os
period = 1000 / int(os.environ.get("PFX_SYNC_FPS", "60"))
c = cells.get("clean", {})
check(c.get("unmeasurable") is None, f"clean: measurable ({c.get('unmeasurable')})")
check((c.get("p99") if c.get("p99") is not None else 1e9) <= period,
      f"clean: p99 spread {c.get('p99')} ms <= one frame period ({period:.1f} ms)")
k = cells.get("control", {})
check(k.get("unmeasurable") is None and (k.get("p50") or 0) > 50,
      f"control (unsynced, 100 ms apart): the measure sees it, p50 spread {k.get('p50')} ms > 50 ms")
for name in ("loss", "restart"):
    r = cells.get(name, {})
    print(f"info {name}: p50 {r.get('p50')} p99 {r.get('p99')} max {r.get('max')} ms"
          + (f" UNMEASURABLE: {r['unmeasurable']}" if r.get("unmeasurable") else ""))
for name, r in cells.items():
    if not name.startswith("interop"):
        continue
    check(r.get("unmeasurable") is None, f"{name}: measurable ({r.get('unmeasurable')})")
    for good, what in r.get("checks", []):
        check(good, f"{name}: {what}")
PY
finish 56-sync
