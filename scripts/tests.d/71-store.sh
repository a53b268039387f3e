#!/usr/bin/env bash
# Show store suite: the store keeps its promise under kill -9 (agent, player),
# power cuts and pushes that meet, and a pushed show names only its own files.
#
# One unit: a root-owned agent.yaml, the show store on a REAL ext4 file system (a loop
# device), a REAL `pfx-player run --store` playing it in the suite's own network
# namespace (DDP to that namespace's loopback), and every command a REAL
# `pfx-agent dispatch` with the verb in SSH_ORIGINAL_COMMAND, as the fleet account's
# forced command runs it (sshd itself is the fleet suite's, 70-fleet.sh). The pushes,
# kills and cuts are store/tests/push_driver.py's; a power cut is FS_IOC_SHUTDOWN without
# a log flush, then the file system is checked (e2fsck -p, as the unit's boot does) and
# mounted again.
#
#   bash scripts/tests.d/71-store.sh                 # a new seed
#   PFX_STORE_SEED=N bash scripts/tests.d/71-store.sh   # replay a run
# PFX_STORE_KILL_ROUNDS (12), PFX_STORE_CUT_ROUNDS (8), PFX_STORE_RACE_ROUNDS (6);
# PFX_STORE_KEEP=1 keeps the temporary directory. About a minute.
set -uo pipefail
top="${PFX_TOP:-$(cd "$(dirname "$0")/../.." && pwd)}"
if [ "$(id -u)" != 0 ]; then
  echo "skipped: needs root (a network namespace, a loop-mounted ext4)" >&2
  exit 77
fi
for t in ip nsenter unshare losetup mkfs.ext4 e2fsck mount umount python3; do
  command -v "$t" >/dev/null || { echo "FAILED: $t missing (scripts/deps/store.apt)"; exit 1; }
done
# In a mount namespace of its own: the store's mount is then in no other namespace (one
# made meanwhile by another test would hold a copy of it, and the power cut's unmount
# would leave the cut file system alive there).
if [ -z "${PFX_STORE_PRIVATE_NS:-}" ]; then
  exec unshare --mount --propagation private env PFX_STORE_PRIVATE_NS=1 bash "$0" "$@"
fi
bin="${PFX_FLEET_BIN:-$top/target/debug}"
AGENT="${PFX_AGENT:-$bin/pfx-agent}"
PLAYER="${PFX_PLAYER:-$bin/pfx-player}"
[ -x "$AGENT" ] && [ -x "$PLAYER" ] || { echo "FAILED: build first (cargo build -p pfx-fleet -p pfx-player): $AGENT $PLAYER"; exit 1; }
SEED="${PFX_STORE_SEED:-$(( $(date +%s) % 1000000 ))}"
echo "seed $SEED (replay: PFX_STORE_SEED=$SEED bash scripts/tests.d/71-store.sh)"

T=$(mktemp -d /tmp/pfx-store-test.XXXXXX)
chmod 755 "$T"
NS="pfxst$$"
cleanup() {
  set +e
  [ -f "$T/player.pid" ] && kill -9 "$(cat "$T/player.pid")" 2>/dev/null
  sleep 0.2
  mountpoint -q "$T/data" && umount "$T/data" 2>/dev/null || umount -l "$T/data" 2>/dev/null
  ip netns del "$NS" 2>/dev/null
  if [ -n "${PFX_STORE_KEEP:-}" ]; then echo "kept $T"; else rm -rf "$T"; fi
}
trap cleanup EXIT INT TERM

ip netns add "$NS" && ip -n "$NS" link set lo up || { echo "FAILED: network namespace"; exit 1; }
# The data partition: ext4 with the image's options as far as they matter here (journal,
# data=ordered), 192 MiB.
truncate -s 192M "$T/data.img"
mkfs.ext4 -q -F -L pfx-data "$T/data.img" || { echo "FAILED: mkfs.ext4"; exit 1; }
mkdir "$T/data"
mount -o loop "$T/data.img" "$T/data" || { echo "FAILED: loop mount (is the loop module there?)"; exit 1; }
: > "$T/data/.pfx-data"
# The agent's config: root's, 0644, in root's 0755 directories, as on an image.
mkdir -m 755 "$T/etc"
RATE=4194304   # the agent's store_rate_bytes_per_s: a push of a few MiB takes about a second
cat > "$T/etc/agent.yaml" <<EOF
unit_id: st1
player: $PLAYER
store_root: $T/data
store_reserve_bytes: 4194304
store_rate_bytes_per_s: $RATE
player_pidfile: $T/player.pid
profile_url: http://127.0.0.1:8093/profile
show_confirm_timeout_s: 15
systemd: false
audit_log: $T/dispatch.log
EOF
chmod 644 "$T/etc/agent.yaml"
printf '%s\n' "interface: lo" "fps: 40" "tx_queue: kernel" "outputs:" "  - name: pole-1" "    profile: bench-ddp" \
  "    destination: 127.0.0.1:4048" "content:" "  loop: true" "  playlist:" "    - pattern: id" "      seconds: 5" > "$T/builtin.yaml"

AGENT="$AGENT" CONFIG="$T/etc/agent.yaml" NS="$NS" ROOT="$T/data" IMG="$T/data.img" PLAYER="$PLAYER" \
  T="$T" HTTP=127.0.0.1:8093 RATE="$RATE" FSEQ_PY="$top/player/tests/py" TOP="$top" \
  python3 "$top/store/tests/push_driver.py" "$SEED"
rc=$?
if [ $rc != 0 ]; then
  echo "FAILED (seed $SEED: replay with PFX_STORE_SEED=$SEED bash scripts/tests.d/71-store.sh)"
  tail -20 "$T/player.log" 2>/dev/null
  exit 1
fi
echo "71-store: passed (seed $SEED)"
