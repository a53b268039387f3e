#!/usr/bin/env bash
# What a dashboard viewer of the pixels costs the render thread (docs/PERFORMANCE.md,
# "Pixel view"): one release player, 1,000 sACN universes (170,000 RGB pixels, one output)
# on loopback multicast playing a rainbow, and in the same run six phases of PHASE seconds,
# alternating without and with a viewer (off, on, off, on, off, on). The viewer polls
# /pixels as the dashboard does (one request after the other, at most 12.5 a second).
# At each phase's end /profile's rolling window (PHASE - 1 s, all inside the phase) gives
# each stage's and the frame's p50/p95/p99; the table has each phase and the median of the
# three phases of each kind, with the ratio on/off. One attempt; a phase whose guard fails
# (too few frames in the window, a viewer that got fewer than 10 new frames a second, or
# copies made while nobody watched) prints UNMEASURABLE with the reason.
#
#   bench/pixels.sh [PHASE_SECONDS]     (default 11; release build)
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
phase=${1:-11}
out=$(mktemp -d /tmp/pfx-bench-pixels.XXXXXX)
trap 'rm -rf "$out"' EXIT
cargo build --release -q -p pfx-player --bin pfx-player || { echo "build failed"; exit 1; }
bin=$top/target/release/pfx-player
port=18197
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "date: $(date -u +%Y-%m-%dT%H:%MZ)  commit: $(git rev-parse --short HEAD)  phase: $phase s"
mkdir -p "$out/profiles"
cat > "$out/profiles/big.yaml" <<Y
name: big
protocol: sacn
pixels: $(( 1000 * 170 ))
pixel_format: rgb8
color_order: rgb
destination: 239.255.0.1:5568
sacn:
  first_universe: 20000
Y
cat > "$out/show.yaml" <<Y
interface: lo
http: 127.0.0.1:$port
unit_id: bench-pixels
profile_window_s: $(( phase - 1 ))
outputs:
  - name: big
    profile: big
content:
  playlist:
    - pattern: rainbow
      seconds: 3600
Y
"$bin" run --no-mdns --no-control --config "$out/show.yaml" --duration $(( phase * 6 + 10 )) >"$out/player.log" 2>&1 &
pid=$!
python3 - "$port" "$phase" <<'PY'
import json, statistics, sys, threading, time, urllib.request
port, phase = int(sys.argv[1]), float(sys.argv[2])
base = f"http://127.0.0.1:{port}"

def profile():
    return json.load(urllib.request.urlopen(base + "/profile", timeout=5))

for _ in range(100):
    try:
        profile(); break
    except OSError:
        time.sleep(0.1)
else:
    print("UNMEASURABLE: the player's /profile never answered"); sys.exit(0)
time.sleep(2)  # past start-up

def seq_now():
    # One request is itself one copy: read the counter from a request's answer.
    b = urllib.request.urlopen(base + "/pixels", timeout=5).read()
    return int.from_bytes(b[4:12], "little")

KEYS = ("background", "source", "geometry", "wire_send", "frame")
rows = []
for i, kind in enumerate(["off", "on"] * 3):
    stop = threading.Event()
    views = {"n": 0, "seqs": set()}
    def viewer():
        while not stop.is_set():
            t = time.monotonic()
            b = urllib.request.urlopen(base + "/pixels", timeout=5).read()
            views["n"] += 1
            views["seqs"].add(int.from_bytes(b[4:12], "little"))
            time.sleep(max(0.0, 0.08 - (time.monotonic() - t)))
    s0 = seq_now()
    th = threading.Thread(target=viewer) if kind == "on" else None
    if th: th.start()
    time.sleep(phase)
    p = profile()
    stop.set()
    if th: th.join()
    s1 = seq_now()
    fps_t = p["fps_target"]
    want = (phase - 1) * fps_t
    problem = None
    if p["frames"] < 0.9 * want:
        problem = f"{p['frames']} frames in the window, want about {want:.0f}"
    elif kind == "on" and len(views["seqs"]) / phase < 10:
        problem = f"the viewer got {len(views['seqs']) / phase:.1f} new frames/s (< 10)"
    elif kind == "off" and s1 - s0 > 1:
        problem = f"{s1 - s0 - 1} copies while nobody watched"
    st = {k: p["stages"].get(k, {}) for k in KEYS}
    rows.append((kind, problem, st, p["frames"], p["deadline_misses"], len(views["seqs"]) / phase))
    print(f"phase {i + 1} viewer {kind}: " + (f"UNMEASURABLE: {problem}" if problem else
          f"{p['frames']} frames, {p['deadline_misses']} misses"
          + (f", viewer {len(views['seqs']) / phase:.1f} new frames/s" if kind == "on" else "") + "; "
          + "; ".join(f"{k} {st[k].get('p50_us', 0):.0f}/{st[k].get('p95_us', 0):.0f}/{st[k].get('p99_us', 0):.0f}"
                      for k in KEYS) + " us (p50/p95/p99)"))
good = [r for r in rows if r[1] is None]
if not any(r[0] == "on" for r in good) or not any(r[0] == "off" for r in good):
    print("UNMEASURABLE: no measurable phase of one kind"); sys.exit(0)
print("median over the measurable phases (us), on/off ratio:")
print(f"{'stage':<11} {'off p50':>8} {'off p95':>8} {'off p99':>8} {'on p50':>8} {'on p95':>8} {'on p99':>8}  ratio p50/p95/p99")
for k in KEYS:
    med = {kind: [statistics.median(r[2][k].get(f, 0) for r in good if r[0] == kind) for f in ("p50_us", "p95_us", "p99_us")]
           for kind in ("off", "on")}
    ratio = "/".join(f"{a / b:.2f}" if b else "-" for a, b in zip(med["on"], med["off"]))
    print(f"{k:<11} " + " ".join(f"{v:8.0f}" for v in med["off"] + med["on"]) + f"  {ratio}")
PY
kill "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
