#!/usr/bin/env bash
# The profiler suite (30) again, against the real player: `pfx-player demo` serving its own
# live /profile, /metrics, dashboard and mDNS advertisement.
set -uo pipefail
top=${PFX_TOP:?}
player=${PFX_PLAYER:-$top/target/debug/pfx-player}
PFX_PROFILER_CMD="$player demo --http 127.0.0.1:\$PORT" PFX_DASHBOARD_PNG="$top/target/player-dashboard.png" \
  exec bash "$top/scripts/tests.d/30-profiler.sh"
