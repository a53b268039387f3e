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
# shellcheck source=../lib/check.sh
. "$top/scripts/lib/check.sh"
need_cmds pixels.apt python3 chromium
player=${PFX_PLAYER:-$top/target/debug/pfx-player}
[ -x "$player" ] || die "no player at $player (cargo build -p pfx-player)"
log=$(mktemp /tmp/pfx-pixels.XXXXXX)
trap 'rm -f "$log"' EXIT
# pixels_browser.py prints one line per check, "ok   WHAT" or "FAIL WHAT", and
# "UNMEASURABLE WHAT" where it could not measure (a failure here too); its exit status is
# 0 when every check held, 1 when one did not, 2 when it could not measure.
# Chromium writes D-Bus complaints on a host without a session bus; keep them out of the log.
python3 "$top/testbed/pixels_browser.py" --player "$player" > "$log" 2> >(grep -v 'dbus\|^e: $' >&2)
rc=$?
while IFS= read -r line; do
  case $line in
    "ok   "*) ok "${line#ok   }" ;;
    "FAIL "*) fail "${line#FAIL }" ;;
    UNMEASURABLE*) what=${line#UNMEASURABLE}; what=${what#:}; fail "could not measure: ${what# }" ;;
    *) echo "$line" ;;
  esac
done < "$log"
check "pixels_browser.py: every check held (exit $rc; 1 a check failed, 2 could not measure)" [ "$rc" = 0 ]
finish 57-pixels
