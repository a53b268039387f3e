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
# shellcheck source=../lib/check.sh
. "$top/scripts/lib/check.sh"
# shellcheck source=../lib/netns.sh
. "$top/scripts/lib/netns.sh"
need_root "a network namespace, a loop-mounted ext4"
need_cmds store.apt ip nsenter unshare losetup mkfs.ext4 e2fsck mount umount python3
# In a mount namespace of its own: the store's mount is then in no other namespace (one
# made meanwhile by another test would hold a copy of it, and the power cut's unmount
# would leave the cut file system alive there).
if [ -z "${PFX_STORE_PRIVATE_NS:-}" ]; then
  exec unshare --mount --propagation private env PFX_STORE_PRIVATE_NS=1 bash "$0" "$@"
fi
bin="${PFX_FLEET_BIN:-$top/target/debug}"
AGENT="${PFX_AGENT:-$bin/pfx-agent}"
PLAYER="${PFX_PLAYER:-$bin/pfx-player}"
[ -x "$AGENT" ] && [ -x "$PLAYER" ] || die "build first (cargo build -p pfx-fleet -p pfx-player): $AGENT $PLAYER"
SEED="${PFX_STORE_SEED:-$(( $(date +%s) % 1000000 ))}"
echo "seed $SEED (replay: PFX_STORE_SEED=$SEED bash scripts/tests.d/71-store.sh)"

T=$(mktemp -d /tmp/pfx-store-test.XXXXXX)
chmod 755 "$T"
ns_init st
NS=$(ns_name unit)
# The player has ended once it is no process, or a zombie (whose files on the store are
# closed): then the store can be unmounted.
gone() { [ ! -e "/proc/$1" ] || [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" = Z ]; }
cleanup() {
  set +e
  local pid stuck=""
  if [ -f "$T/player.pid" ]; then
    pid=$(cat "$T/player.pid")
    kill -9 "$pid" 2>/dev/null
    wait_for 5 "the player ($pid) gone after kill -9" gone "$pid" || stuck=1
  fi
  mountpoint -q "$T/data" && umount "$T/data" 2>/dev/null || umount -l "$T/data" 2>/dev/null
  ns_cleanup
  if [ -n "${PFX_STORE_KEEP:-}" ]; then echo "kept $T"; else rm -rf "$T"; fi
  # A FAIL printed here must not end in a passing exit code.
  [ -z "$stuck" ] || exit 1
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ns_new unit || die "network namespace"
# The data partition: ext4 with the image's options as far as they matter here (journal,
# data=ordered), 192 MiB.
truncate -s 192M "$T/data.img"
mkfs.ext4 -q -F -L pfx-data "$T/data.img" || die "mkfs.ext4"
mkdir "$T/data"
mount -o loop "$T/data.img" "$T/data" || die "loop mount (is the loop module there?)"
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
if [ $rc = 0 ]; then
  ok "push_driver.py: the store kept its promise (seed $SEED)"
else
  fail "push_driver.py (seed $SEED: replay with PFX_STORE_SEED=$SEED bash scripts/tests.d/71-store.sh)"
  tail -20 "$T/player.log" 2>/dev/null
fi
finish 71-store
