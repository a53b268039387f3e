#!/usr/bin/env bash
# The dashboard's pixel view in a real browser (testbed/pixels_browser.py): the real player on
# loopback with two DDP poles received here, live control through its control socket (the
# show at brightness 0.5, `test red`, `test id`, `blackout`, `resume` at brightness 0.4), and
# after each, headless Chromium's canvases read back (`--dump-dom` of the dashboard with
# ?readback=3) must equal a frame each pole received just then. Then one viewer's rate
# (>= 10 new frames/s) and 40 viewers at once (only 200 and 503, memory bounded).
# Loopback only: no root needed. About 20 seconds.
set -uo pipefail
top=${PFX_TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
player=${PFX_PLAYER:-$top/target/debug/pfx-player}
if [ ! -x "$player" ]; then echo "FAILED: no player at $player (cargo build -p pfx-player)"; exit 1; fi
# Chromium writes D-Bus complaints on a host without a session bus; keep them out of the log.
python3 "$top/testbed/pixels_browser.py" --player "$player" 2> >(grep -v 'dbus\|^e: $' >&2)
rc=$?
case $rc in
  0) echo "57-pixels: the canvases equal what the poles received" ;;
  2) echo "FAILED: 57-pixels could not measure (see UNMEASURABLE above)"; exit 1 ;;
  *) echo "FAILED: 57-pixels"; exit 1 ;;
esac
