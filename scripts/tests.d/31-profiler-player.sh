#!/usr/bin/env bash
# The profiler suite (30) again, against the real player: `pfx-player demo` serving its own
# live /profile, /metrics, dashboard and mDNS advertisement.
set -uo pipefail
top=${PFX_TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
# shellcheck source=../lib/check.sh
. "$top/scripts/lib/check.sh"
player=${PFX_PLAYER:-$top/target/debug/pfx-player}
[ -x "$player" ] || die "no player at $player (cargo build -p pfx-player)"
PFX_TOP="$top" PFX_PROFILER_SUITE=31-profiler-player \
  PFX_PROFILER_CMD="$player demo --http 127.0.0.1:\$PORT" PFX_DASHBOARD_PNG="$top/target/player-dashboard.png" \
  exec bash "$top/scripts/tests.d/30-profiler.sh"
