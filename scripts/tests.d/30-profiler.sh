#!/usr/bin/env bash
# Profiler over HTTP with live data, checked by programs we did not write, all inside a
# loopback-only network namespace this suite creates and removes:
#   (a) /metrics through prometheus_client's text parser (and promtool, if installed);
#   (b) the dashboard in headless Chromium: the screenshot must show the chart's lines;
#   (c) the mDNS advertisement found by python-zeroconf in another process;
#   (d) the real player on a sequence with a corrupt block: frames keep going out, and
#       /profile, the dashboard's source tile and the journal say so.
# Plus /profile's schema and /health's semantics.
#
# The server is $PFX_PROFILER_CMD (run through bash in the namespace, $PORT expanded),
# default the synthetic example; e.g. for the real player:
#   PFX_PROFILER_CMD='target/debug/pfx-player demo --http 127.0.0.1:$PORT' scripts/test-all 30
set -uo pipefail
top=${PFX_TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$top"
# shellcheck source=../lib/check.sh
. "$top/scripts/lib/check.sh"
# shellcheck source=../lib/netns.sh
. "$top/scripts/lib/netns.sh"
need_root "network namespace"
need_cmds profiler.apt ip python3 chromium
python3 -c 'import prometheus_client, PIL, zeroconf' \
  || die "python modules missing (scripts/deps/profiler.apt: python3-prometheus-client python3-pil python3-zeroconf)"

export PORT=18080
default_cmd="$top/target/debug/examples/profiler_demo --http 127.0.0.1:\$PORT --mdns --fake-nic --unit-id suite-unit-$$"
cmd="${PFX_PROFILER_CMD:-$default_cmd}"
if [ -z "${PFX_PROFILER_CMD:-}" ] && [ ! -x "$top/target/debug/examples/profiler_demo" ]; then
  cargo build -q -p pfx-player --example profiler_demo --locked || die "cargo build --example profiler_demo"
fi

work=$(mktemp -d)
server=""
cleanup() {
  set +e
  [ -n "$server" ] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null
  ns_cleanup
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
ns_init prof
ns_new lo || die "network namespace"
ip -n "$(ns_name lo)" route add 224.0.0.0/4 dev lo || die "multicast route on lo"
inns() { ns_exec lo "$@"; }

echo "server: $cmd (in netns $(ns_name lo))"
inns bash -c "exec $cmd" >"$work/server.log" 2>&1 &
server=$!
base="http://127.0.0.1:$PORT"

# The server answers, then holds a few seconds of history: the dashboard's charts span a
# 60 s window, so their lines are as long as the history is (the line-pixel floor below
# counts on 6 points, one a second). Waited for as points, not as seconds.
history_points() { # N: /history holds at least N points and /profile counts frames
  inns python3 - "$base" "$1" <<'PY'
import json, sys, urllib.request
base, n = sys.argv[1], int(sys.argv[2])
p = json.load(urllib.request.urlopen(base + "/profile", timeout=2))
h = json.load(urllib.request.urlopen(base + "/history", timeout=2))
sys.exit(0 if p["frames"] > 0 and len(h["points"]) >= n else 1)
PY
}
wait_for 30 "the server answering /profile" history_points 0 || { cat "$work/server.log"; die "server did not answer"; }
ok "the server answers /profile"
wait_for 60 "6 points in /history" history_points 6 || { cat "$work/server.log"; die "no history"; }

echo "--- /profile, /health, /history"
check "/profile's schema, /health's semantics, /history's points" inns python3 - "$base" <<'PY'
import json, sys, urllib.request, urllib.error
base = sys.argv[1]
p = json.load(urllib.request.urlopen(base + "/profile", timeout=5))
for k in ["unit", "version", "health", "window_s", "stages", "frames", "deadline_misses", "skipped_ticks", "fps",
          "fps_target", "since_start", "samples_lost", "source_late", "source_errors", "last_frame_age_ms", "uptime_s", "outputs", "nic"]:
    assert k in p, f"/profile lacks {k}"
for s in ["background", "source", "geometry", "wire_send", "frame", "lateness"]:
    for f in ["p50_us", "p95_us", "p99_us", "max_us", "count"]:
        assert isinstance(p["stages"][s][f], (int, float)), (s, f)
        assert isinstance(p["since_start"]["stages"][s][f], (int, float)), (s, f)
assert p["frames"] > 0 and p["since_start"]["frames"] >= p["frames"], p["frames"]
assert p["fps"] > 0, p["fps"]
w = p["stages"]["wire_send"]
print(f"frames {p['frames']} fps {p['fps']:.1f} wire_send p50 {w['p50_us']:.0f} p95 {w['p95_us']:.0f} p99 {w['p99_us']:.0f} max {w['max_us']:.0f} us; health: {p['health']}")
try:
    r = urllib.request.urlopen(base + "/health", timeout=5)
    code, body = r.status, r.read().decode()
except urllib.error.HTTPError as e:
    code, body = e.code, e.read().decode()
assert (code == 200 and body == "ok\n") or (code == 503 and len(body.strip()) > 3), (code, body)
assert (p["health"] == "ok") == (code == 200), (p["health"], code)
print(f"/health: {code} {body.strip()}")
h = json.load(urllib.request.urlopen(base + "/history", timeout=5))
assert len(h["points"]) >= 2, h
pt = h["points"][-1]
assert pt["stages"]["wire_send"]["p99_us"] >= pt["stages"]["wire_send"]["p50_us"] > 0, pt
print(f"/history: {len(h['points'])} points")
PY

echo "--- (a) /metrics through prometheus_client's parser"
check "(a) /metrics through prometheus_client's parser" inns python3 - "$base" "$work/metrics.txt" <<'PY'
import sys, urllib.request
from prometheus_client.parser import text_string_to_metric_families
r = urllib.request.urlopen(sys.argv[1] + "/metrics", timeout=5)
assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4"), r.headers["Content-Type"]
text = r.read().decode()
open(sys.argv[2], "w").write(text)
fams = {f.name: f for f in text_string_to_metric_families(text)}
for name in ["pfx_stage_seconds", "pfx_stage_since_start_seconds", "pfx_frames", "pfx_deadline_misses", "pfx_fps",
             "pfx_healthy", "pfx_output_frames_dropped", "pfx_samples_lost", "pfx_source_late", "pfx_source_errors"]:
    assert name in fams, f"missing family {name}; have {sorted(fams)}"
assert fams["pfx_frames"].type == "counter"
assert fams["pfx_source_late"].type == "counter" and fams["pfx_source_errors"].type == "counter"
stages = {(s.labels["stage"], s.labels["quantile"]): s.value for s in fams["pfx_stage_seconds"].samples}
for st in ["background", "source", "geometry", "wire_send", "frame", "lateness"]:
    for q in ["0.5", "0.95", "0.99", "1"]:
        assert (st, q) in stages, (st, q)
assert stages[("wire_send", "0.99")] >= stages[("wire_send", "0.5")]
frames = [s.value for s in fams["pfx_frames"].samples if s.name == "pfx_frames_total"]
assert frames and frames[0] > 0, frames
print(f"parsed {len(fams)} families, {sum(len(f.samples) for f in fams.values())} samples; "
      f"pfx_frames_total {frames[0]:.0f}; wire_send p99 {stages[('wire_send', '0.99')]} s")
if "pfx_nic_pause_frames_per_second" in fams:
    print("PAUSE frames/s:", [(s.labels, s.value) for s in fams["pfx_nic_pause_frames_per_second"].samples])
PY
if command -v promtool >/dev/null; then
  check "(a) promtool check metrics" promtool check metrics <"$work/metrics.txt"
else
  echo "promtool not installed (Debian 'prometheus' is ~96 MB): prometheus_client's parser only"
fi

echo "--- (b) dashboard in headless Chromium"
shot="${PFX_DASHBOARD_PNG:-$top/target/profiler-dashboard.png}"
mkdir -p "$top/target"
rm -f "$shot"
inns timeout 90 chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync \
  --user-data-dir="$work/chrome" --window-size=1280,900 --virtual-time-budget=4000 \
  --screenshot="$shot" "$base/" >"$work/chromium.log" 2>&1 \
  || { tail -20 "$work/chromium.log"; fail "(b) chromium --screenshot"; }
check "(b) the dashboard's screenshot shows the charts' lines" python3 - "$shot" <<'PY'
import sys
from PIL import Image
im = Image.open(sys.argv[1]).convert("RGB")
raw = im.tobytes()
px = list(zip(raw[0::3], raw[1::3], raw[2::3]))
colours = len(set(px))
bg = max(set(px[::97]), key=px[::97].count)
non_bg = sum(1 for p in px if p != bg)
def near(c, tol=60):
    return sum(1 for p in px if sum(abs(a - b) for a, b in zip(p, c)) < tol)
# the chart's p50/p95/p99 line colours (#1f77b4, #ff7f0e, #d62728), beyond what the legend alone draws
lines = {name: near(c) for name, c in [("p50", (0x1f, 0x77, 0xb4)), ("p95", (0xff, 0x7f, 0x0e)), ("p99", (0xd6, 0x27, 0x28))]}
print(f"screenshot {im.size[0]}x{im.size[1]}: {colours} colours, {non_bg} non-background pixels, line pixels {lines}")
assert colours > 50, "looks blank"
assert non_bg > 20000, "looks blank"
# The legend alone has ~42 pixels of each colour; the lines of six charts add more, though
# where two percentiles coincide the later line hides the earlier (seen: p95 at 145 px when
# the synthetic feed's p95 equals its p50). Twice the legend is the floor.
assert all(v > 90 for v in lines.values()), f"chart lines missing: {lines}"
PY
echo "dashboard screenshot: $shot"
# The rendered DOM: the interface-queue tile says what /profile says of the interface's
# queue (the synthetic feed: pfifo_head_drop and a drop count; the real demo on loopback:
# whatever lo has), where a stall's drops go once the player's head-drop queue is in place.
inns timeout 90 chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync \
  --user-data-dir="$work/chrome2" --virtual-time-budget=4000 --dump-dom "$base/" \
  >"$work/dom.html" 2>"$work/chromium-dom.log" || { tail -20 "$work/chromium-dom.log"; fail "(b) chromium --dump-dom"; }
check "(b) the queue tile says what /profile says of the interface's queue" inns python3 - "$work/dom.html" "$base/profile" "${PFX_PROFILER_CMD:-synthetic}" <<'PY'
import json, re, sys, urllib.request
dom = open(sys.argv[1]).read()
nic = json.load(urllib.request.urlopen(sys.argv[2], timeout=5)).get("nic") or {}
kind = re.search(r'id="qkind">([^<]*)<', dom)
drops = re.search(r'id="qdrops">([^<]*)<', dom)
print(f"queue tile: {drops and drops.group(1)!r} {kind and kind.group(1)!r}; /profile nic.qdisc {nic.get('qdisc')!r}")
assert kind and kind.group(1) == f"queue drops ({nic.get('qdisc') or '?'})", "queue tile does not name /profile's qdisc"
want = "unknown" if nic.get("qdisc_drops") is None else None
assert drops and (drops.group(1) == want if want else drops.group(1).isdigit()), "queue tile's drop count"
if sys.argv[3] == "synthetic":
    assert nic.get("qdisc") == "pfifo_head_drop", "the synthetic feed names pfx's queue"
PY

echo "--- (c) mDNS: python-zeroconf browsing from another process in the namespace"
check "(c) the mDNS advertisement, found by python-zeroconf" inns python3 - "$PORT" <<'PY'
import sys, time
from zeroconf import Zeroconf, ServiceBrowser, ServiceStateChange
port = int(sys.argv[1])
zc = Zeroconf()
found = []
def on_change(zeroconf, service_type, name, state_change):
    if state_change is ServiceStateChange.Added:
        found.append(name)
ServiceBrowser(zc, "_pfx._tcp.local.", handlers=[on_change])
deadline = time.time() + 15
info = None
while time.time() < deadline and info is None:
    for name in list(found):
        i = zc.get_service_info("_pfx._tcp.local.", name, timeout=2000)
        if i and i.port == port:
            info = i
    time.sleep(0.2)
zc.close()
assert info is not None, f"no _pfx._tcp service on port {port} (saw {found})"
txt = {k.decode(): (v.decode() if v is not None else None) for k, v in info.properties.items()}
print(f"found {info.name} port {info.port} addresses {info.parsed_addresses()} TXT {txt}")
for k in ["unit", "version", "http_port", "profiles"]:
    assert k in txt, f"TXT lacks {k}: {txt}"
assert txt["http_port"] == str(port), txt
PY
echo "--- (d) a corrupt block mid-show: the real player keeps sending, /profile and the dashboard count it"
# Suite 31 reruns this file against the demo; the corrupt-sequence show runs here once.
if [ -n "${PFX_PROFILER_CMD:-}" ]; then
  echo "(d) runs in suite 30 itself, skipped on this rerun"
else
  player="${PFX_PLAYER:-$top/target/debug/pfx-player}"
  [ -x "$player" ] || cargo build -q -p pfx-player --locked || die "cargo build -p pfx-player"
  python3 -c 'import zstandard' || die "python3 zstandard missing (scripts/deps/fseq.pip)"
  show="$work/corrupt"
  mkdir -p "$show/profiles"
  # A 60 s sequence (zstd, 16 frames a block, written by the independent Python writer) with
  # block 5 (frames 80..95, 2.0-2.4 s in) overwritten: the decoder fails there.
  python3 - "$player" "$show" <<'PY' || die "(d) writing the corrupt sequence (block 5 from seq inspect --json)"
import json, subprocess, sys
sys.path.insert(0, "player/tests/py")
from fseq_reference import write_fseq
player, d = sys.argv[1], sys.argv[2]
path = f"{d}/corrupt-copy.fseq"
frames = [bytes((f * 7 + c * 13) % 251 for c in range(30)) for f in range(2400)]
write_fseq(path, frames, 25, 2, 1, frames_per_block=16, reserved=0)
blocks = json.loads(subprocess.check_output([player, "seq", "inspect", "--json", path]))["blocks"]
b = blocks[5]
assert b["first_frame"] == 80, b
data = bytearray(open(path, "rb").read())
data[b["offset"] + 4:b["offset"] + b["len"]] = b"\xff" * (b["len"] - 4)
open(path, "wb").write(data)
print(f"corrupt-copy.fseq: block 5 (frames 80..95, bytes {b['offset']}+{b['len']}) overwritten")
PY
  cat >"$show/profiles/t.yaml" <<'YAML'
name: t
protocol: ddp
pixels: 10
pixel_format: rgb8
color_order: rgb
destination: 127.0.0.1:4048
ddp:
  data_type: 0x0B
  destination_id: 1
YAML
  port2=$((PORT + 1))
  cat >"$show/show.yaml" <<YAML
interface: lo
fps: 40
http: 127.0.0.1:$port2
unit_id: corrupt-$$
outputs:
  - name: p
    profile: t
content:
  playlist:
    - fseq: $show/corrupt-copy.fseq
YAML
  base2="http://127.0.0.1:$port2"
  # The receiver is up before the show starts; it reports what arrived after the errors.
  inns python3 - "$base2" "$show/corrupt-copy.fseq" "$work/receiver.ready" >"$work/receiver.log" 2>&1 <<'PY' &
import json, socket, sys, time, urllib.request
base = sys.argv[1]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.1", 4048))
s.settimeout(0.2)
open(sys.argv[3], "w").write("bound\n")  # the show may start now
def profile():
    try:
        return json.load(urllib.request.urlopen(base + "/profile", timeout=2))
    except OSError:
        return None
end = time.time() + 30
while time.time() < end:
    try:
        s.recv(2048)
    except socket.timeout:
        pass
    p = profile()
    if p and p["source_errors"] > 0:
        break
else:
    print("FAILED: no source_errors within 30 s"); sys.exit(1)
# Two seconds after the errors: datagrams keep arriving and the frames change. (A duration:
# what is measured is how much arrives in it, not an ordering.)
got, t0, f0 = [], time.time(), p["since_start"]["frames"]
while time.time() < t0 + 2:
    try:
        got.append(s.recv(2048)[10:])
    except socket.timeout:
        pass
p2 = profile()
print(f"after the errors: {len(got)} datagrams in 2 s, {len(set(got))} distinct frames; "
      f"/profile frames {f0} -> {p2['since_start']['frames']}, source_errors {p2['source_errors']}")
assert len(got) >= 40 and len(set(got)) >= 20, "the show did not go on"
assert p2["since_start"]["frames"] >= f0 + 40, "the loop did not go on"
PY
  receiver=$!
  # The player starts once the receiver is bound, not after a guess.
  wait_for 10 "(d) the receiver bound" test -s "$work/receiver.ready" || { cat "$work/receiver.log"; die "(d) no receiver"; }
  inns "$player" run --config "$show/show.yaml" --no-mdns >"$work/player.log" 2>&1 &
  player_pid=$!
  wait "$receiver"
  rc=$?
  cat "$work/receiver.log"
  [ "$rc" = 0 ] || tail -20 "$work/player.log"
  check "(d) after the decode errors the player keeps sending and its loop goes on (receiver exit $rc)" [ "$rc" = 0 ]
  inns timeout 90 chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --user-data-dir="$work/chrome3" --virtual-time-budget=4000 --dump-dom "$base2/" \
    >"$work/dom-corrupt.html" 2>"$work/chromium-dom3.log" || { tail -20 "$work/chromium-dom3.log"; fail "(d) chromium --dump-dom"; }
  check "(d) the source tile, /profile and the journal name the decode error" \
    inns python3 - "$work/dom-corrupt.html" "$base2/profile" "$work/player.log" "$show/corrupt-copy.fseq" <<'PY'
import json, re, sys, urllib.request
dom = open(sys.argv[1]).read()
p = json.load(urllib.request.urlopen(sys.argv[2], timeout=5))
log = open(sys.argv[3]).read()
late = re.search(r'id="srclate">([^<]*)<', dom)
err = re.search(r'id="srcerr">([^<]*)<', dom)
tile = re.search(r'class="([^"]*)" id="srctile"|id="srctile" class="([^"]*)"', dom)
print(f"source tile: late {late and late.group(1)!r} errors {err and err.group(1)!r} ({tile and tile.group(0)}); "
      f"/profile source_late {p['source_late']} source_errors {p['source_errors']}")
assert err and err.group(1) == str(p["source_errors"]) and p["source_errors"] > 0, "tile's decode errors"
assert late and late.group(1).isdigit() and int(late.group(1)) <= p["source_late"], "tile's late frames"
assert tile and "bad" in tile.group(0), "the tile is not marked bad"
lines = [l for l in log.splitlines() if "cannot be decoded" in l]
assert lines, "no journal line for the decode error:\n" + log
assert sys.argv[4] in lines[0] and re.search(r"frame (8\d|9[0-5]) ", lines[0]), lines[0]
print("journal:", lines[0][:200])
PY
  kill "$player_pid" 2>/dev/null; wait "$player_pid" 2>/dev/null || true
fi

finish "${PFX_PROFILER_SUITE:-30-profiler}"
