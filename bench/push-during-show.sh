#!/usr/bin/env bash
# Push during a show (docs/PERFORMANCE.md, "Push during a show"), one attempt per cell, no
# retries, both cells in one run on the same unit:
#   B. a 3-pole show (bigPacket, sACN, DDP; an FSEQ from the unit's show store, 40 fps)
#      while `pfx-fleet push show` lands a 500 MB sequence on the unit (real sshd, the
#      agent's dispatcher, the store's staging, the switch to the new show at the end),
#      from 3 s before the push until 3 s after it;
#   A. then the same show for as long, with no push.
# Per cell: frames, deadline misses, skipped ticks, frame p99 and max, wire_send p99,
# source_late; for B also how long the push took and how many bytes went.
# The unit is a network namespace with its own sshd; the player runs as root (SCHED_FIFO,
# as pfx-player.service's CAP_SYS_NICE allows). The operator's copy of the show and the
# unit's store are on the same disk here: the unit's disk also serves the operator's reads.
#
#   sudo bench/push-during-show.sh [MB]     (default 500 MB; release build)
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
mb=${1:-500}
secs=100000   # the warm-up player's limit; cell B stops its player itself
. "$top/scripts/lib/check.sh"
. "$top/scripts/lib/netns.sh"
need_root "network namespaces, sshd"
need_cmds fleet.apt /usr/sbin/sshd ssh ssh-keygen ip nsenter python3
nice cargo build --release -q -p pfx-player -p pfx-fleet || die "cargo build --release -p pfx-player -p pfx-fleet"
rel=$top/target/release
B=$(mktemp -d /tmp/pfx-bench-push.XXXXXX)
chmod 755 "$B"
ns_init storebench
PIDS=()
cleanup() {
  set +e
  for p in "${PIDS[@]}"; do kill "$p" 2> /dev/null; done
  [ -f "$B/sshd.pid" ] && kill "$(cat "$B/sshd.pid")" 2> /dev/null
  ns_cleanup
  rm -rf "$B"
}
trap cleanup EXIT INT TERM

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "date: $(date -u +%Y-%m-%dT%H:%MZ)  commit: $(git rev-parse --short HEAD)  push: $mb MB"

# --- the unit and the operator, joined by a veth pair -------------------------------
ns_pair op 10.78.0.1/24 un 10.78.0.2/24 || die "the operator's and the unit's namespaces"
mkdir -p /run/sshd
ssh-keygen -q -t ed25519 -N '' -f "$B/id"; ssh-keygen -q -t ed25519 -N '' -f "$B/hostkey"
echo "10.78.0.2 $(cut -d' ' -f1,2 "$B/hostkey.pub")" > "$B/known_hosts"
echo "restrict,command=\"$rel/pfx-agent dispatch --config $B/agent.yaml\" $(cat "$B/id.pub")" > "$B/keys"
cat > "$B/sshd_config" << CFG
ListenAddress 10.78.0.2
HostKey $B/hostkey
PidFile $B/sshd.pid
AuthorizedKeysFile $B/keys
PermitRootLogin forced-commands-only
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
LogLevel ERROR
CFG
in_ns un /usr/sbin/sshd -f "$B/sshd_config" -E "$B/sshd.log" || { cat "$B/sshd.log"; die "sshd in the unit's namespace"; }
mkdir -p "$B/data"; : > "$B/data/.pfx-data"
cat > "$B/agent.yaml" << Y
iface: eth0
player: $rel/pfx-player
unit_id: bench-unit
systemd: false
store_root: $B/data
store_reserve_bytes: 67108864
player_pidfile: $B/player.pid
profile_url: http://127.0.0.1:8090/profile
show_confirm_timeout_s: 60
Y
chmod 644 "$B/agent.yaml"
cat > "$B/fleet.yaml" << Y
ssh: {user: root, identity: $B/id, known_hosts: $B/known_hosts, connect_timeout_s: 5, command_timeout_s: 120}
sites:
  - name: bench
    units:
      - {id: bench-unit, host: 10.78.0.2}
Y

# --- the shows: 3 poles, 2700 channels, 40 fps ------------------------------------
fseq() { # path frames: an uncompressed FSEQ v2 of 2700 channels, 25 ms a frame, random data
  python3 - "$1" "$2" << 'PY'
import struct, sys
path, n = sys.argv[1], int(sys.argv[2])
cc, step = 2700, 25
table = b"\0" * 16                                  # two reserved (empty) block entries
hdr_len = 32 + len(table)
off = (hdr_len + 3) // 4 * 4
head = b"PSEQ" + struct.pack("<HBBHIIBB", off, 1, 2, hdr_len, cc, n, step, 0)
head += bytes([0, 2, 0, 0]) + struct.pack("<Q", 1)
blob = head + table
blob += b"\0" * (off - len(blob))
with open(path, "wb") as f:
    f.write(blob)
    left = cc * n
    with open("/dev/urandom", "rb") as r:
        while left:
            k = min(left, 1 << 22)
            f.write(r.read(k)); left -= k
PY
}
show_yaml() { # fseq-name
  cat << Y
interface: eth0
fps: 40
tx_queue: kernel
outputs:
  - {name: gen3-1, profile: gen3-bigpacket, destination: "127.0.0.1:4049", start_channel: 1}
  - {name: legacy-1, profile: legacy-2018-2023-sacn, destination: "127.0.0.1:5568", start_channel: 901}
  - {name: bench-1, profile: bench-ddp, destination: "127.0.0.1:4048", start_channel: 1801}
content:
  loop: true
  playlist:
    - fseq: $1
Y
}
mkdir -p "$B/base" "$B/big"
fseq "$B/base/base.fseq" 4800                       # 2 minutes, 13 MB
show_yaml base.fseq > "$B/base/show.yaml"
fseq "$B/big/big.fseq" $(( mb * 1000000 / 2700 ))
show_yaml big.fseq > "$B/big/show.yaml"
show_yaml base.fseq > "$B/builtin.yaml"; sed -i "s|fseq: base.fseq|fseq: $B/base/base.fseq|" "$B/builtin.yaml"
fleet() { in_ns op "$rel/pfx-fleet" --config "$B/fleet.yaml" --db "$B/fleet.db" "$@"; }

player() { # summary-file: the unit's player for SECONDS, pid in player.pid
  in_ns un "$rel/pfx-player" run --config "$B/builtin.yaml" --store "$B/data" \
    --http 127.0.0.1:8090 --no-mdns --duration "$secs" --summary "$1" > "$B/player.log" 2>&1 &
  echo $! > "$B/player.pid"; PIDS+=($!)
  wait_for 10 "the unit's player answering /profile" in_ns un python3 -c \
    'import urllib.request; urllib.request.urlopen("http://127.0.0.1:8090/profile", timeout=1)' \
    || die "the player did not start: $(cat "$B/player.log")"
}
# The base show into the store first (a player must be there to confirm the switch).
player "$B/warm.json"
fleet push show "$B/base" > "$B/push0.out" 2> "$B/push0.err" || die "base push: $(cat "$B/push0.err")"
kill "$(cat "$B/player.pid")"; wait "$(cat "$B/player.pid")" 2> /dev/null

report() { # name summary.json [push-line]
  python3 - "$@" << 'PY'
import json, sys
name, summ = sys.argv[1:3]
extra = sys.argv[3] if len(sys.argv) > 3 else ""
try:
    s = json.load(open(summ))
except Exception as e:
    print(f"cell {name}: UNMEASURABLE: no summary from the player ({e})"); sys.exit(0)
ss = s["since_start"]
if not ss.get("frames"):
    print(f"cell {name}: UNMEASURABLE: the player rendered no frames"); sys.exit(0)
fr, ws = ss["stages"].get("frame", {}), ss["stages"].get("wire_send", {})
print(f"cell {name}: frames {ss['frames']} over {ss['loop_s']:.1f} s = {ss['fps']:.2f} fps; "
      f"deadline misses {ss['deadline_misses']}; skipped ticks {ss['skipped_ticks']}; "
      f"frame p99 {fr.get('p99_us', 0):.0f} us max {fr.get('max_us', 0):.0f} us; "
      f"wire_send p99 {ws.get('p99_us', 0):.0f} us; source_late {s.get('source_late')}"
      + (f"; {extra}" if extra else ""))
PY
}

# B first: the player runs until the push has landed (and 3 s more); A then plays the
# same show for as long, with no push. Both from the same store, one after the other.
echo "--- B. the show while a $mb MB push lands"
secs=100000
player "$B/b.json"
sleep 3 # the cell's 3 s of show before the push (a duration, not an ordering)
t0=$(date +%s.%N)
fleet push show "$B/big" --json > "$B/push.json" 2> "$B/push.err"; prc=$?
t1=$(date +%s.%N)
sleep 3 # and 3 s after it
kill "$(cat "$B/player.pid")"; wait "$(cat "$B/player.pid")" 2> /dev/null
line=$(python3 - "$B/push.json" "$t1" "$t0" << 'PY' 2> /dev/null || echo "push exit $prc: $(tail -2 "$B/push.err")"
import json, sys
s = json.load(open(sys.argv[1]))
u = s["units"][0]
took = float(sys.argv[2]) - float(sys.argv[3])
print(f"push {u['state']} in {took:.1f} s ({u['bytes_sent'] / took / 1e6:.1f} MB/s), {u['bytes_sent'] / 1e6:.0f} MB sent: {u['reason']}")
PY
)
report B "$B/b.json" "$line"
secs=$(python3 -c 'import json,sys; print(max(10, round(json.load(open(sys.argv[1]))["since_start"]["loop_s"])))' "$B/b.json" 2> /dev/null || echo 60)

echo "--- A. the same show, no push, for as long ($secs s)"
player "$B/a.json"
wait "$(cat "$B/player.pid")" 2> /dev/null
report A "$B/a.json"
