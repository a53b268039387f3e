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
# shellcheck source=../lib/check.sh
. "$top/scripts/lib/check.sh"
# shellcheck source=../lib/netns.sh
. "$top/scripts/lib/netns.sh"
need_root "network namespaces"
python3 -c 'import zeroconf' || die "python3-zeroconf missing (scripts/deps/profiler.apt)"
bin="${PFX_PLAYER:-$top/target/debug/pfx-player}"
[ -x "$bin" ] || (cd "$top" && cargo build -q -p pfx-player --locked) || die "building pfx-player"
tb="$top/testbed"
id=$$
work=$(mktemp -d /tmp/pfx-fppc.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
  ns_cleanup
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# One veth: the unit's eth0 (10.88.0.1) and xLights' eth0, which also carries 10.88.0.3 (the
# "other source" whose requests the unit must tell apart from 10.88.0.2's).
ns_init fppc
ns_pair unit 10.88.0.1/24 xlights 10.88.0.2/24 || die "netns"
ip -n "$(ns_name xlights)" addr add 10.88.0.3/24 dev eth0
ip -n "$(ns_name unit)" route add default dev eth0
ip -n "$(ns_name xlights)" route add default dev eth0

pw="pole-$id-secret"
hash=$(printf '%s\n' "$pw" | "$bin" fpp-connect hash-password) || die "hash-password"
data="$work/data"           # the data partition: the show store (docs/show-store.md)
mkdir -p "$data" "$work/etc"
: >"$data/.pfx-data"
cat >"$work/etc/show.yaml" <<YAML
interface: eth0
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
  ns_exec xlights python3 "$tb/pole_sim.py" --protocol ddp --listen "239.255.70.$g" --group "239.255.70.$g" --iface-addr 10.88.0.2 \
    --pixels 300 --dump-frames "$work/pole-$pole.jsonl" --report "$work/pole-$pole.json" >"$work/pole-$pole.log" 2>&1 &
  pids+=($!)
done
ns_exec unit env PFX_LOG=info "$bin" run --store "$data" --config "$work/etc/show.yaml" --http 10.88.0.1:8080 \
  >"$work/player.log" 2>&1 &
pids+=($!)
port80() { ns_exec unit ss -ltn | grep -q '10.88.0.1:80 '; }
# wait_for has printed the FAIL; the rest needs the listener.
wait_for 10 "FPP Connect listening on port 80" port80 || { cat "$work/player.log"; exit 1; }

# FPP Connect's threads run at background priority (nice 19; idle I/O is set beside it).
ppid=$(ip netns pids "$(ns_name unit)" | head -1)
seen=0
for t in /proc/"$ppid"/task/*; do
  case "$(cat "$t/comm")" in
    pfx-fppc*) seen=$((seen + 1)); n=$(awk '{print $19}' "$t/stat")
      [ "$n" = 19 ] && ok "thread $(cat "$t/comm") at nice 19" || fail "thread $(cat "$t/comm") at nice $n (want 19)" ;;
  esac
done
[ "$seen" -ge 2 ] || die "no FPP Connect threads found in the player ($seen)"
ok "FPP Connect threads found in the player: $seen"

check "pytest test_fpp_connect_client.py" python3 -m pytest -q "$tb/tests/test_fpp_connect_client.py"
if ! ns_exec xlights python3 "$tb/fpp_connect_e2e.py" --unit 10.88.0.1 --bind 10.88.0.2 --other-source 10.88.0.3 \
  --password "$pw" --data "$data" --pole-a "$work/pole-a.jsonl" --pole-b "$work/pole-b.jsonl"; then
  echo "--- player log (tail)"; tail -40 "$work/player.log"
  die "FPP Connect end to end"
fi
ok "FPP Connect end to end"
# The player's log is what an operator reads of a show switch: these lines are the behaviour.
log="$work/player.log"
check "the player log says the new show became active" grep -q 'new show active' "$log"
# Main became active once, waiting for the item's end; the same playlist posted twice more
# changed nothing; SparseOnly switched at once.
n=$(grep -c 'new show active' "$log")
[ "$n" = 2 ] && ok "2 show switches (Main, SparseOnly)" || { grep 'FPP Connect' "$log"; fail "$n show switches (want 2: Main, SparseOnly)"; }
check "Main waited for the item's end" grep -q 'new show active; it starts when the current item ends' "$log"
check "?switch=now switched at once" grep -q 'new show active; it starts now' "$log"
check "the supervisor handed Main over at the item's end" grep -q 'SIGHUP: new show accepted; it starts when the current item ends' "$log"
check "the same playlist posted again was a no-op" [ "$(grep -c 'is the show playing now; nothing changes' "$log")" -ge 2 ]
check "the player reloaded twice" [ "$(grep -c 'SIGHUP: new show accepted' "$log")" = 2 ]
check "the log speaks of xLights' output table" grep -q 'universeOutputs\|output table kept' "$log"
# The store's own view: its active show is the last playlist, holding the sparse sequence.
man="$data/active/manifest.json"
check "the store's active show is the posted playlist" python3 - "$man" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
print("store active show:", m["name"], sorted(m["files"]))
assert m["name"] == "SparseOnly" and sorted(m["files"]) == ["Sparse.fseq"], m
PY
finish fpp-connect
