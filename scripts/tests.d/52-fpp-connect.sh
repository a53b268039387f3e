#!/usr/bin/env bash
# xLights FPP Connect against the real player (docs/fpp-connect.md), in two network
# namespaces the suite makes: "unit" (the player) and "xlights" (the independent client
# testbed/fpp_connect_client.py and two DDP pole simulators). Discovery by ping and mDNS,
# 401 without/with a wrong password and the lockout, hostile Upload-Names and an oversize
# upload refused with nothing staged, a >16 MiB upload in chunks, a playlist that the
# poles then show, and a sparse upload whose channels land where the poles expect them.
# The unit plays from the show store (--store), as the image's service does. About 20 s.
set -uo pipefail
top="${PFX_TOP:-$(cd "$(dirname "$0")/../.." && pwd)}"
if [ "$(id -u)" != 0 ]; then
  echo "skipped: needs root" >&2
  exit 77
fi
python3 -c 'import zeroconf' || { echo "FAILED: python3-zeroconf missing (scripts/deps/profiler.apt)"; exit 1; }
bin="${PFX_PLAYER:-$top/target/debug/pfx-player}"
[ -x "$bin" ] || (cd "$top" && cargo build -q -p pfx-player --locked) || { echo "FAILED: building pfx-player"; exit 1; }
tb="$top/testbed"
id=$$
nu="fppc-u$id"; nx="fppc-x$id"; vu="fppcu$id"; vx="fppcx$id"
work=$(mktemp -d /tmp/pfx-fppc.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
  ip netns del "$nu" 2>/dev/null; ip netns del "$nx" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ip netns add "$nu" && ip netns add "$nx" || { echo "FAILED: netns"; exit 1; }
ip link add "$vu" type veth peer name "$vx"
ip link set "$vu" netns "$nu"; ip link set "$vx" netns "$nx"
ip -n "$nu" addr add 10.88.0.1/24 dev "$vu"
ip -n "$nx" addr add 10.88.0.2/24 dev "$vx"
ip -n "$nx" addr add 10.88.0.3/24 dev "$vx"
for n in "$nu" "$nx"; do ip -n "$n" link set lo up; done
ip -n "$nu" link set "$vu" up; ip -n "$nx" link set "$vx" up
ip -n "$nu" route add default dev "$vu"; ip -n "$nx" route add default dev "$vx"
ip -n "$nu" route add 224.0.0.0/4 dev "$vu"; ip -n "$nx" route add 224.0.0.0/4 dev "$vx"

pw="pole-$id-secret"
hash=$(printf '%s\n' "$pw" | "$bin" fpp-connect hash-password) || { echo "FAILED: hash-password"; exit 1; }
data="$work/data"           # the data partition: the show store (docs/show-store.md)
mkdir -p "$data" "$work/etc"
: >"$data/.pfx-data"
cat >"$work/etc/show.yaml" <<YAML
interface: $vu
fps: 20
unit_id: fppc-unit
profiles_dir: $top/profiles
outputs:
  - {name: a, profile: bench-ddp, destination: "239.255.70.1:4048", start_channel: 1}
  - {name: b, profile: bench-ddp, destination: "239.255.70.2:4048", start_channel: 1801}
content:
  playlist:
    - {pattern: solid, color: "#010203", seconds: 2}
fpp_connect:
  enabled: true
  password_hash: "$hash"
  http: "10.88.0.1:80"
YAML

for pole in a b; do
  g=1; [ "$pole" = b ] && g=2
  ip netns exec "$nx" python3 "$tb/pole_sim.py" --protocol ddp --listen "239.255.70.$g" --group "239.255.70.$g" --iface-addr 10.88.0.2 \
    --pixels 300 --dump-frames "$work/pole-$pole.jsonl" --report "$work/pole-$pole.json" >"$work/pole-$pole.log" 2>&1 &
  pids+=($!)
done
ip netns exec "$nu" env PFX_LOG=info "$bin" run --store "$data" --config "$work/etc/show.yaml" --http 10.88.0.1:8080 \
  >"$work/player.log" 2>&1 &
pids+=($!)
for _ in $(seq 50); do
  ip netns exec "$nu" ss -ltn | grep -q '10.88.0.1:80 ' && break
  sleep 0.2
done
ip netns exec "$nu" ss -ltn | grep -q '10.88.0.1:80 ' || { cat "$work/player.log"; echo "FAILED: FPP Connect is not listening on port 80"; exit 1; }

# FPP Connect's threads run at background priority (nice 19; idle I/O is set beside it).
ppid=$(ip netns pids "$nu" | head -1)
bad_nice=0; seen=0
for t in /proc/"$ppid"/task/*; do
  case "$(cat "$t/comm")" in
    pfx-fppc*) seen=$((seen + 1)); n=$(awk '{print $19}' "$t/stat")
      [ "$n" = 19 ] || { echo "FAILED: thread $(cat "$t/comm") at nice $n"; bad_nice=1; } ;;
  esac
done
[ "$seen" -ge 2 ] || { echo "FAILED: no FPP Connect threads found in the player ($seen)"; exit 1; }
[ "$bad_nice" = 0 ] || exit 1
echo "FPP Connect threads at nice 19: $seen"

python3 -m pytest -q "$tb/tests/test_fpp_connect_client.py" || { echo "FAILED: pytest test_fpp_connect_client.py"; exit 1; }
rc=0
ip netns exec "$nx" python3 "$tb/fpp_connect_e2e.py" --unit 10.88.0.1 --bind 10.88.0.2 --other-source 10.88.0.3 \
  --password "$pw" --data "$data" --pole-a "$work/pole-a.jsonl" --pole-b "$work/pole-b.jsonl" || rc=1
if [ "$rc" != 0 ]; then
  echo "--- player log (tail)"; tail -40 "$work/player.log"
  echo "FAILED: FPP Connect end to end"
  exit 1
fi
grep -q 'new show active' "$work/player.log" || { echo "FAILED: the player log does not say the new show became active"; exit 1; }
# Main became active once, waiting for the item's end; the same playlist posted twice more
# changed nothing; SparseOnly switched at once.
n=$(grep -c 'new show active' "$work/player.log")
[ "$n" = 2 ] || { grep 'FPP Connect' "$work/player.log"; echo "FAILED: $n show switches (want 2: Main, SparseOnly)"; exit 1; }
grep -q 'new show active; it starts when the current item ends' "$work/player.log" || { echo "FAILED: Main did not wait for the item's end"; exit 1; }
grep -q 'new show active; it starts now' "$work/player.log" || { echo "FAILED: ?switch=now did not switch at once"; exit 1; }
grep -q 'SIGHUP: new show accepted; it starts when the current item ends' "$work/player.log" || { echo "FAILED: the supervisor did not hand Main over at the item's end"; exit 1; }
[ "$(grep -c 'is the show playing now; nothing changes' "$work/player.log")" -ge 2 ] || { echo "FAILED: the same playlist posted again was not a no-op"; exit 1; }
[ "$(grep -c 'SIGHUP: new show accepted' "$work/player.log")" = 2 ] || { echo "FAILED: the player reloaded other than twice"; exit 1; }
grep -q 'universeOutputs\|output table kept' "$work/player.log" || { echo "FAILED: the log says nothing of xLights' output table"; exit 1; }
# The store's own view: its active show is the last playlist, holding the sparse sequence.
man="$data/active/manifest.json"
python3 - "$man" <<'PY' || { echo "FAILED: the store's active show is not the posted playlist"; exit 1; }
import json, sys
m = json.load(open(sys.argv[1]))
print("store active show:", m["name"], sorted(m["files"]))
assert m["name"] == "SparseOnly" and sorted(m["files"]) == ["Sparse.fseq"], m
PY
echo "fpp-connect: ok"
