#!/usr/bin/env bash
# Fleet suite: units as network-namespace hosts (veth to a bridge), each with a REAL
# sshd (own config, host key, authorized_keys) bound to its netns address, in its own
# mount namespace where the image's fleet account exists (`pfx`, its own passwd, shadow and
# sudoers bound over /etc): the fleet key carries `restrict,command="sudo -n pfx-agent
# dispatch ..."` as on an image, the agent's settings come from a root-owned agent.yaml
# per unit, with the MOCK NIC backend (veth has no PAUSE; a debug build), persisting
# through a REAL overlay (lower: tmpfs mounted read-only, upper: tmpfs). Poles: the
# testbed's pole simulator (testbed/pole_sim.py; fleet/tests/pole_stub.py where it is
# absent), each in its own netns.
#
#   bash scripts/tests.d/70-fleet.sh          # every section, in order
#   bash scripts/tests.d/70-fleet.sh 5 8      # only sections 5 and 8, after the common setup
#   bash scripts/tests.d/70-fleet.sh bench    # + push to 100 simulated units (docs/perf/fleet.md)
#   bash scripts/tests.d/70-fleet.sh bench-only   # the benchmark alone, after the setup
#   bash scripts/tests.d/70-fleet.sh update-only  # section 13 alone (the same as `13`)
#   bash scripts/tests.d/70-fleet.sh update-bench-only   # push update to 200 units
#
# Sections (the common setup first: the network, units u1..u4 with their sshd, poles p1..p3):
#   1 rollout refused while the gate is closed   2 a unit killed mid-push
#   3 SIGTERM inside the agent's window          3b two agents at once on one unit
#   4 an unknown host key                        5 the re-run resumes, the gate opens
#   6 a second apply changes nothing             7 rollout: canary, a stop, the resume
#   8 kill -9 of pfx-fleet mid-push              8b agent status over SSH
#   9 status and history                         9b the fleet key opens the agent only
#   9c push show                                 10 an offline unit closes the gate
#   11 pfx-fleet top                             12 SSH connection reuse
#   13 push update (A/B, the RAUC test double)
# Each section makes the state it needs itself (the state_* functions below, which do
# nothing when the state already holds: a section run after the one that leaves it costs
# nothing more), so any one runs alone and any selection runs; selected sections run in
# the order above, whatever the order of the arguments. `bench` may be given with sections.
#
# PFX_FLEET_BIN: where pfx-fleet is (target/debug); PFX_AGENT: the units' agent, a test
# (debug) build for the mock NIC backend (default: the one beside pfx-fleet), so a release
# pfx-fleet is measured with PFX_FLEET_BIN=target/release PFX_AGENT=target/debug/pfx-agent.
# PFX_FLEET_KEEP=1 keeps the temporary directory.
set -uo pipefail
top="${PFX_TOP:-$(cd "$(dirname "$0")/../.." && pwd)}"
# shellcheck source=../lib/check.sh
. "$top/scripts/lib/check.sh"
# shellcheck source=../lib/netns.sh
. "$top/scripts/lib/netns.sh"

SECTIONS=(1 2 3 3b 4 5 6 7 8 8b 9 9b 9c 10 11 12 13)
MODE=suite BENCH=0 WANT=()
for a in "$@"; do
  case $a in
    bench) BENCH=1 ;;
    bench-only | update-bench-only) MODE=$a ;;
    update-only) WANT+=(13) ;;
    *)
      [[ " ${SECTIONS[*]} " = *" $a "* ]] \
        || die "unknown argument '$a' (sections: ${SECTIONS[*]}; or bench, bench-only, update-only, update-bench-only)"
      WANT+=("$a") ;;
  esac
done
[ ${#WANT[@]} -gt 0 ] || WANT=("${SECTIONS[@]}")
wanted() { [[ " ${WANT[*]} " = *" $1 "* ]]; }

need_root "network namespaces, mounts, sshd"
need_cmds fleet.apt /usr/sbin/sshd ssh ssh-keygen scp sftp ssh-agent nsenter unshare findmnt python3 ip sudo visudo
bin="${PFX_FLEET_BIN:-$top/target/debug}"
FLEET="$bin/pfx-fleet"
AGENT="${PFX_AGENT:-$bin/pfx-agent}"
[ -x "$FLEET" ] && [ -x "$AGENT" ] || die "build first (cargo build -p pfx-fleet): $FLEET $AGENT"
# The testbed's pole simulator (docs/pole-api.md) by default; the stub only when it is absent.
if [ -f "$top/testbed/pole_sim.py" ]; then POLE_SIM="${PFX_POLE_SIM:-$top/testbed/pole_sim.py}"; else POLE_SIM="${PFX_POLE_SIM:-$top/fleet/tests/pole_stub.py}"; fi

T=$(mktemp -d /tmp/pfx-fleet-test.XXXXXX)
chmod 755 "$T"
# pfx-fleet's per-run SSH control directories go in here, not in /tmp (the kill -9 of
# section 8 leaves its empty one behind).
mkdir -m 700 "$T/tmp"; export TMPDIR="$T/tmp"; unset XDG_RUNTIME_DIR
PIDS=()
MOUNTS=()

# A process has ended once it is no process, or a zombie (its files and sockets closed).
gone() { [ ! -e "/proc/$1" ] || [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" = Z ]; }
all_gone() { local p; for p in "$@"; do gone "$p" || return 1; done; }
stop_pids() { # what pid...: SIGTERM, then wait until each has ended
  local what=$1; shift
  [ $# -gt 0 ] || return 0
  kill "$@" 2>/dev/null
  wait_for 10 "$what ended" all_gone "$@"
}
cleanup() {
  set +e
  local stuck="" i
  # This run's namespaces hold every unit's sshd, agent, player and every pole: gone with
  # them. What this suite started outside them (the benches' mount-namespace holders) next.
  ns_cleanup
  stop_pids "the suite's own processes" "${PIDS[@]}" || stuck=1
  for ((i=${#MOUNTS[@]}-1; i>=0; i--)); do umount -l "${MOUNTS[$i]}" 2>/dev/null; done
  if [ -n "${PFX_FLEET_KEEP:-}" ]; then echo "kept $T"; else rm -rf "$T"; fi
  # A FAIL printed here must not end in a passing exit code.
  [ -z "$stuck" ] || exit 1
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ns_path() { echo "/run/netns/$(ns_name "$1")"; }
own_mnt_ns() { [ "$(readlink "/proc/$1/ns/mnt")" != "$(readlink /proc/self/ns/mnt)" ]; }
# A JSON document (or the last line of JSON lines) and a Python expression over it, as d.
jtrue() {
  python3 -c '
import json,sys
t = open(sys.argv[1]).read()
try: d = json.loads(t)
except ValueError: d = json.loads(t.strip().splitlines()[-1])
sys.exit(0 if eval(sys.argv[2]) else 1)' "$1" "$2"
}
jget() {
  python3 -c '
import json,sys
t = open(sys.argv[1]).read()
try: d = json.loads(t)
except ValueError: d = json.loads(t.strip().splitlines()[-1])
print(eval(sys.argv[2]))' "$1" "$2"
}

# --- the network: an operator netns holding the bridge, one netns per unit/pole ----
ns_init fl
ns_bridge op 10.77.0.1/16 || die "the operator's namespace and its bridge"

mkdir -p /run/sshd
ssh-keygen -q -t ed25519 -N '' -C pfx-fleet-test -f "$T/id_ed25519"
cp "$T/id_ed25519.pub" "$T/authorized_keys"
: > "$T/known_hosts"

# The image's fleet account, for the units' mount namespaces only (the host's own /etc is
# never touched): a system-like uid no host account or group uses.
FUID=61700
while getent passwd "$FUID" > /dev/null || getent group "$FUID" > /dev/null; do FUID=$((FUID+1)); done
mkdir -p "$T/etc" "$T/home"
{ grep -v '^pfx:' /etc/passwd; echo "pfx:x:$FUID:$FUID:pfx fleet agent:$T/home:/bin/sh"; } > "$T/etc/passwd"
{ grep -v '^pfx:' /etc/group; echo "pfx:x:$FUID:"; } > "$T/etc/group"
printf 'root:*:19000:0:99999:7:::\npfx:*:19000:0:99999:7:::\n' > "$T/etc/shadow"
chmod 644 "$T/etc/passwd" "$T/etc/group"; chmod 600 "$T/etc/shadow"
# The image's own sudoers file (what `pfx-image build` writes, read from its plan), with
# this build's agent for the image's path and each unit's config after the grant's command.
IMAGE_SUDOERS=$("${PFX_IMAGE:-$top/target/debug/pfx-image}" show-config "$top/examples/image-vm-amd64.yaml" --file /etc/sudoers.d/pfx-agent) \
  || die "pfx-image show-config --file /etc/sudoers.d/pfx-agent"
grep -q '/usr/bin/pfx-agent dispatch$' <<<"$IMAGE_SUDOERS" || die "no grant of /usr/bin/pfx-agent dispatch in the image's sudoers: $IMAGE_SUDOERS"
{
  echo "Defaults env_reset"
  echo 'Defaults secure_path="/usr/sbin:/usr/bin:/sbin:/bin"'
  echo "root ALL=(ALL:ALL) ALL"
  grep -v 'pfx-agent dispatch$' <<<"$IMAGE_SUDOERS" | sed "s#/usr/bin/pfx-agent#$AGENT#g"
  for u in u1 u2 u3 u4; do
    grep 'pfx-agent dispatch$' <<<"$IMAGE_SUDOERS" | sed "s#/usr/bin/pfx-agent dispatch\$#$AGENT dispatch --config $T/$u/agent.yaml#"
  done
} > "$T/etc/sudoers"
chmod 440 "$T/etc/sudoers"
visudo -c -q -f "$T/etc/sudoers" || die "visudo refuses the test sudoers"
FORCED() { echo "/usr/bin/sudo -n $AGENT dispatch --config $1/agent.yaml"; }

agent_yaml() { # dir unit-id [extra line ...]: the unit's root-owned agent config
  local d=$1 id=$2; shift 2
  {
    echo "iface: eth0"; echo "lower: $d/lower"; echo "nic_backend: mock"; echo "mock_nic_dir: $d/nic"
    echo "unit_id: $id"; echo "image_version_file: $d/merged/etc/pfx/image-version"; echo "audit_log: $d/dispatch.log"
    for l in "$@"; do echo "$l"; done
  } > "$d/agent.yaml.tmp"
  chmod 644 "$d/agent.yaml.tmp"; mv "$d/agent.yaml.tmp" "$d/agent.yaml"
}

sshd_up() { [ -s "$1/sshd.pid" ] && kill -0 "$(cat "$1/sshd.pid")" 2>/dev/null; }
exec_sshd() { # i: the unit's sshd in its own mount namespace, where the account files are
  # bound over /etc. The unit's lower root is mounted before, so this namespace holds its
  # own copy of that mount.
  local d="$T/u$1"
  in_ns "u$1" unshare --mount --propagation private -- sh -c '
    for f in passwd group shadow sudoers; do mount --bind "$1/etc/$f" "/etc/$f" || exit 1; done
    exec /usr/sbin/sshd -f "$2/sshd_config" -E "$2/sshd.log"' sh "$T" "$d" || return 1
  # sshd writes its pid file once it has forked away from the command above.
  wait_for 10 "u$1's sshd up (its pid file)" sshd_up "$d"
}

start_sshd() { # i addr known(1|0)
  local d="$T/u$1" addr=$2
  ssh-keygen -q -t ed25519 -N '' -f "$d/hostkey"
  mkdir -p "$d/keys"
  echo "restrict,command=\"$(FORCED "$d")\" $(cat "$T/id_ed25519.pub")" > "$d/keys/pfx"
  # As if root had the fleet key too: sshd itself must still refuse root.
  cp "$T/id_ed25519.pub" "$d/keys/root"
  # The account part of the image's sshd settings (image/src/plan.rs). Not its
  # daemon-wide DisableForwarding/PermitTTY/PermitUserRC: the suite shows that the key's
  # own options close those (pfx-image verify checks both layers on an image).
  cat > "$d/sshd_config" <<CFG
ListenAddress $addr
Port 22
HostKey $d/hostkey
PidFile $d/sshd.pid
PermitRootLogin no
AllowUsers pfx
AuthorizedKeysFile $d/keys/%u
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
# The suite's files are under /tmp (mode 1777), which StrictModes refuses; images keep it on.
StrictModes no
Subsystem sftp /usr/lib/openssh/sftp-server
MaxStartups 200
MaxSessions 50
LogLevel ERROR
CFG
  exec_sshd "$1" || return 1
  [ "$3" = 1 ] && echo "$addr $(cut -d' ' -f1,2 "$d/hostkey.pub")" >> "$T/known_hosts"
  return 0
}

make_lower() { # dir: lower (tmpfs, read-only), upper (tmpfs), merged (overlay)
  local d=$1
  mkdir -p "$d/lower" "$d/upper" "$d/merged" "$d/nic"
  mount -t tmpfs -o size=2m tmpfs "$d/lower"; MOUNTS+=("$d/lower")
  mkdir -p "$d/lower/etc/pfx"; echo "pfx-test-image 1" > "$d/lower/etc/pfx/image-version"
  mount -o remount,ro "$d/lower"
  mount -t tmpfs -o size=2m tmpfs "$d/upper"; MOUNTS+=("$d/upper")
  mkdir -p "$d/upper/up" "$d/upper/work"
  mount -t overlay overlay -o "lowerdir=$d/lower,upperdir=$d/upper/up,workdir=$d/upper/work" "$d/merged"
  MOUNTS+=("$d/merged")
}

agent_cmd() { # unit-id dir
  echo "$AGENT --lower $2/lower --nic-backend mock --mock-nic-dir $2/nic --unit-id $1 --image-version-file $2/merged/etc/pfx/image-version"
}

lower_ro() { # dir: read in the unit's own mount namespace (its sshd's) when it has one
  local mnt=()
  [ -s "$1/sshd.pid" ] && mnt=(nsenter --mount="/proc/$(cat "$1/sshd.pid")/ns/mnt" --)
  [ "$("${mnt[@]}" findmnt -n -o OPTIONS -M "$1/lower" | cut -d, -f1)" = ro ]
}
expected_file() {
  printf '%s\n' "# Written by pfx-agent apply pause-off; read at boot by pfx-eth-no-pause@eth0.service." \
    "interface: eth0" "pause:" "  autoneg: false" "  rx: false" "  tx: false"
}
expected_file > "$T/expected.yaml"
persisted_is() { # dir new|old-or-new
  local f="$1/lower/etc/pfx/nic.d/eth0.yaml"
  case $2 in
    new) cmp -s "$f" "$T/expected.yaml" ;;
    old-or-new) [ ! -e "$f" ] || cmp -s "$f" "$T/expected.yaml" ;;
  esac
}
db_q() { python3 -c 'import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); [print("|".join("" if v is None else str(v) for v in r)) for r in c.execute(sys.argv[2])]' "$@"; }
latest_state() { # db unit
  [ -f "$1" ] || return 0
  db_q "$1" "SELECT state FROM unit_events WHERE unit_id='$2' ORDER BY id DESC LIMIT 1"
}
db_intact() { [ "$(db_q "$1" "PRAGMA integrity_check")" = ok ]; }

start=$(date +%s)
# --- units u1..u3 (site hall-a), u4 (site hall-b, host key NOT in known_hosts) ------
for i in 1 2 3 4; do
  d="$T/u$i"; mkdir -p "$d"
  ns_port op "u$i" "10.77.0.1$i/16" || die "the namespace of u$i"
  known=1; [ $i = 4 ] && known=0
  make_lower "$d"
  agent_yaml "$d" "u$i"
  start_sshd "$i" "10.77.0.1$i" $known || die "sshd u$i: $(cat "$d/sshd.log")"
done
# --- poles p1 (canary), p2 (accepts the PUT, does not take it), p3 -----------------
head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$T/hall-a.token"
chmod 600 "$T/hall-a.token"; TOKEN=$(cat "$T/hall-a.token")
pole_get() { # n -> prints the status JSON (a plain GET, no token)
  in_ns op python3 -c 'import sys,urllib.request;print(urllib.request.urlopen(sys.argv[1],timeout=3).read().decode())' \
    "http://10.77.0.5$1:8081/api/v1/status"
}
pole_is() { # n enabled(true|false) revision
  pole_get "$1" | python3 -c 'import json,sys;s=json.load(sys.stdin);sys.exit(0 if (str(s["fallback"]["enabled"]).lower(),s["config_revision"])==(sys.argv[1],int(sys.argv[2])) else 1)' "$2" "$3"
}
poles_are() { # enabled revision (p1) enabled revision (p2) enabled revision (p3)
  pole_is 1 "$1" "$2" && pole_is 2 "$3" "$4" && pole_is 3 "$5" "$6"
}
start_pole() { # n [faulty]
  local n=$1 args=()
  # The stub and testbed/pole_sim.py (PFX_POLE_SIM=...) take different flags.
  if [ "$(basename "$POLE_SIM")" = pole_sim.py ]; then
    args=(--protocol bigpacket --listen "10.77.0.5$n" --iface-addr "10.77.0.5$n" --api-listen "10.77.0.5$n" --api-port 8081 --name "p$n" --token-file "$T/hall-a.token")
    [ "${2:-}" = faulty ] && args+=(--ignore-fallback-write)
  else
    args=(--bind "10.77.0.5$n" --port 8081 --pole-id "p$n" --token-file "$T/hall-a.token" --log "$T/p$n.log")
    [ "${2:-}" = faulty ] && args+=(--ignore-fallback)
  fi
  # nsenter directly (not the in_ns function): $! must be the pole's own pid.
  nsenter --net="$(ns_path "p$n")" -- python3 "$POLE_SIM" "${args[@]}" > "$T/p$n.out" 2>&1 &
  PIDS+=($!)
  eval "POLE_PID_$n=$! POLE_FAULTY_$n=${2:-no}"
  wait_for 10 "pole p$n answering" pole_get "$n" || { sed 's/^/    pole: /' "$T/p$n.out"; exit 1; }
}
restart_pole() { # n [faulty]: a new pole process, its state as at its start
  local pid; pid=$(eval echo "\$POLE_PID_$1")
  stop_pids "pole p$1 ($pid)" "$pid" || exit 1
  wait "$pid" 2>/dev/null
  start_pole "$@"
}
for n in 1 2 3; do ns_port op "p$n" "10.77.0.5$n/16" || die "the namespace of p$n"; done
start_pole 1; start_pole 2 faulty; start_pole 3

write_config() { # the fleet config: pfx-fleet's defaults (user pfx, the bare verb)
  {
    echo "ssh: {identity: $T/id_ed25519, known_hosts: $T/known_hosts, connect_timeout_s: 3, command_timeout_s: 30}"
    echo "sites:"
    echo "  - name: hall-a"
    echo "    token_file: $T/hall-a.token"
    echo "    units:"
    for i in 1 2 3; do
      echo "      - {id: u$i, host: 10.77.0.1$i}"
    done
    echo "    poles:"
    echo "      - {id: p2, url: 'http://10.77.0.52:8081'}"
    echo "      - {id: p1, url: 'http://10.77.0.51:8081', canary: true}"
    echo "      - {id: p3, url: 'http://10.77.0.53:8081'}"
    echo "  - name: hall-b"
    echo "    units:"
    echo "      - {id: u4, host: 10.77.0.14}"
  } > "$T/fleet.yaml"
}
write_config
fleet() { in_ns op "$FLEET" --config "$T/fleet.yaml" --db "$DB" "$@"; }
DB="$T/fleet.db"
# prof (sections 9c, 13): a unit's /profile show section, as JSON, from its player on 8090.
prof() {
  in_ns op python3 -c 'import json,sys,urllib.request; print(json.dumps(json.load(urllib.request.urlopen(sys.argv[1], timeout=2)).get("show")))' "http://10.77.0.1$1:8090/profile" 2>/dev/null
}
prof_up() { [ -n "$(prof "$1")" ]; }
echo "setup: $(( $(date +%s) - start ))s"

# --- the state a section needs ------------------------------------------------------
# Each makes one state and does nothing when it already holds; a FAIL names a state that
# could not be made (the section's own checks then fail too, and say what).
note() { echo "# state: $*"; }

state_sshd() { # i...: these units' sshd running (section 10 stops u3's)
  local i
  for i; do
    sshd_up "$T/u$i" && continue
    note "starting u$i's sshd again (same host key, same account namespace)"
    exec_sshd "$i" || fail "state: restarting u$i's sshd"
  done
}

state_applied() { # i...: the pause-off file persisted on these units' lower roots
  local i need=() u=()
  for i; do persisted_is "$T/u$i" new || { need+=(--unit "u$i"); u+=("u$i"); }; done
  [ ${#need[@]} = 0 ] && return 0
  note "pushing pause-off to ${u[*]}"
  state_sshd "${@}"
  DB="$T/fleet.db" fleet push pause-off "${need[@]}" --force --json > "$T/state-applied.json" 2> "$T/state-applied.err" \
    || fail "state: push pause-off to ${u[*]} ($(tail -2 "$T/state-applied.err"))"
}

gate_open() { DB="$T/fleet.db" fleet gate fallback --site hall-a > /dev/null 2>&1; }
state_gate_open() { # every hall-a unit verified in fleet.db: the gate open
  gate_open && return 0
  note "pushing pause-off to hall-a until its gate opens"
  state_sshd 1 2 3
  DB="$T/fleet.db" fleet push pause-off --site hall-a --json > "$T/state-gate.json" 2> "$T/state-gate.err"
  gate_open || fail "state: the gate of hall-a does not open ($(tail -3 "$T/state-gate.err"))"
}

state_poles_pristine() { # p1, p3 as started and p2 the faulty one, every one off at revision 1
  local n
  for n in 1 2 3; do
    if pole_is $n false 1 && { [ $n != 2 ] || [ "$POLE_FAULTY_2" = faulty ]; }; then continue; fi
    note "starting pole p$n afresh"
    if [ $n = 2 ]; then restart_pole 2 faulty; else restart_pole $n; fi
  done
}

# Section 2's push: u2's agent killed (SIGKILL) half-way through its write, inside the
# read-write window. Sets HELD (u2's agent reached the write), HELD_RW (its lower was then
# read-write), PUSH1_RC; u2's agent config is its plain one again after.
interrupt_u2_push() {
  local fpid
  HELD=0 HELD_RW=0
  rm -f "$T/u2/hold.pid"
  agent_yaml "$T/u2" u2 "test_hold_in_write_ms: 15000" "test_hold_pidfile: $T/u2/hold.pid"
  nsenter --net="$(ns_path op)" -- "$FLEET" --config "$T/fleet.yaml" --db "$T/fleet.db" push pause-off --site hall-a --parallel 4 > "$T/push1.out" 2> "$T/push1.err" &
  fpid=$!
  if wait_for 30 "u2's agent reaching the write" test -s "$T/u2/hold.pid"; then
    HELD=1
    lower_ro "$T/u2" || HELD_RW=1
    kill -9 "$(cat "$T/u2/hold.pid")"
  else
    sed 's/^/    push1.err: /' "$T/push1.err"
  fi
  wait $fpid; PUSH1_RC=$?
  agent_yaml "$T/u2" u2
}
interrupted_u2_holds() {
  local s; s=$(latest_state "$T/fleet.db" u2)
  { [ "$s" = failed ] || [ "$s" = pending ]; } && [ "$(latest_state "$T/fleet.db" u1)" = done ] && [ "$(latest_state "$T/fleet.db" u3)" = done ]
}
state_interrupted_u2() { # fleet.db: u1 and u3 done, u2's push interrupted (section 2's state)
  interrupted_u2_holds && return 0
  note "a push to hall-a with u2's agent killed mid-write (as section 2)"
  [ -z "$(latest_state "$T/fleet.db" u2)" ] || { fail "state: u2 was pushed already: its push cannot be interrupted again"; return; }
  interrupt_u2_push
  interrupted_u2_holds || fail "state: u1, u3 done and u2 interrupted (u2: $(latest_state "$T/fleet.db" u2))"
  wait_for 5 "u2's lower root read-only again (guardian)" lower_ro "$T/u2"
}

state_u4_refused() { # fleet.db: u4's push refused for its unknown host key (section 4's state)
  [ "$(latest_state "$T/fleet.db" u4)" = failed ] && return 0
  note "a push to hall-b with u4's host key unknown (as section 4)"
  grep -q '^10.77.0.14 ' "$T/known_hosts" && { fail "state: u4's host key is known already"; return; }
  DB="$T/fleet.db" fleet push pause-off --site hall-b > "$T/state-u4.out" 2> "$T/state-u4.err"
  [ "$(latest_state "$T/fleet.db" u4)" = failed ] || fail "state: u4 recorded failed"
}

p2_failure_recorded() { [ "$(db_q "$T/fleet.db" "SELECT COUNT(*) FROM pole_events WHERE pole_id='p2' AND state='failed'" 2>/dev/null)" -ge 1 ] 2>/dev/null; }
state_rollout_stopped() { # fleet.db: a rollout that stopped at the faulty p2 (section 7's first run)
  p2_failure_recorded && return 0
  note "a rollout that stops at the faulty p2 (as section 7)"
  state_gate_open
  state_poles_pristine
  DB="$T/fleet.db" fleet rollout fallback --site hall-a > "$T/state-r.out" 2> "$T/state-r.err"
  p2_failure_recorded || fail "state: a rollout stopped at p2 ($(tail -2 "$T/state-r.err"))"
}

state_sig_unit() { # section 3's lone unit: a lower root, no sshd, no push through the fleet
  [ -d "$T/sig/merged" ] && return 0
  mkdir -p "$T/sig"; make_lower "$T/sig"
}

u1_stub_listens() { in_ns u1 python3 -c 'import socket; socket.create_connection(("127.0.0.1", 8080), 0.2).close()' 2> /dev/null; }
state_u1_player_stub() { # a fake player on u1's 127.0.0.1:8080 serving the golden /profile document
  u1_stub_listens && return 0
  nsenter --net="$(ns_path u1)" -- python3 -c '
import http.server, json, sys
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_GET(self):
        d = json.load(open(sys.argv[1])); d.update({"fps": 59.94, "deadline_misses": 3, "frames": 1000})
        b = json.dumps(d).encode()
        self.send_response(200); self.send_header("Content-Length", str(len(b))); self.end_headers(); self.wfile.write(b)
http.server.HTTPServer(("127.0.0.1", 8080), H).serve_forever()' "$top/api/tests/golden/profile.json" > /dev/null 2>&1 &
  PIDS+=($!)
  # Until it listens (a fixed half second was too short for Python's start at load 10).
  wait_for 20 "u1's player stub listening on 127.0.0.1:8080" u1_stub_listens
}

rc_is() { local want=$1 got=$2; shift 2; [ "$got" = "$want" ] && "$@"; }
op_listens() { in_ns op python3 -c 'import socket,sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 0.2).close()' "$1"; }
op_fetches() { in_ns op python3 -c 'import sys,urllib.request; urllib.request.urlopen(sys.argv[1], timeout=1).read()' "$1"; }

# --- the scale benchmark (bench, bench-only; docs/perf/fleet.md) ----------------------
# PFX_FLEET_BENCH_UNITS units (default 100) behind PFX_FLEET_BENCH_HOSTS real sshd (default
# 4, at most 254 units each). Each unit has its own address, 10.78.H.N: every address of
# 10.78.H.0/24 is local on host H (one local route), which the operator reaches through
# host H's own address, so 1,000 units need neither 1,000 addresses nor 1,000 neighbours.
# One forced command per key cannot pick a unit, so the bench logs in as root and runs the
# agent's CLI with the unit's own lower root and mock NIC (agent_command); root's shell
# there is /bin/sh with an empty home, as the image's fleet account has.
# Cells: PFX_FLEET_BENCH_PARALLEL (default: "default", pfx-fleet's own --parallel).
# PFX_FLEET_BENCH_SSH_OPTS (a what-if, never the default): extra ssh options through a
# wrapper given as ssh.ssh, e.g. "-o KexAlgorithms=curve25519-sha256".
run_bench() {
  local B="$T/bench" nunits=${PFX_FLEET_BENCH_UNITS:-100} nhosts=${PFX_FLEET_BENCH_HOSTS:-4}
  [ $(( (nunits + nhosts - 1) / nhosts )) -le 254 ] || { fail "bench: $nunits units need more than $nhosts hosts"; return; }
  mkdir -p "$B/home" "$B/tmp"
  # One private mount namespace holds the units' lower roots and the sshds: nothing of it
  # shows in the host's mount table, and it goes with its last process.
  unshare --mount --propagation private -- sleep infinity &
  local holder=$!; PIDS+=($holder)
  wait_for 5 "the bench's own mount namespace" own_mnt_ns "$holder" || return
  inb() { nsenter --mount="/proc/$holder/ns/mnt" -- "$@"; }
  { grep -v '^root:' /etc/passwd; echo "root:x:0:0:root:$B/home:/bin/sh"; } > "$B/passwd"
  inb mount --bind "$B/passwd" /etc/passwd
  : > "$B/known_hosts"
  local h n i d
  for h in $(seq 1 $nhosts); do
    d="$B/h$h"; mkdir -p "$d"
    ns_port op "b$h" "10.77.1.$h/16" || { fail "bench host b$h"; return; }
    in_ns "b$h" ip route add local "10.78.$h.0/24" dev lo
    in_ns op ip route add "10.78.$h.0/24" via "10.77.1.$h"
    ssh-keygen -q -t ed25519 -N '' -f "$d/hostkey"
    cat > "$d/sshd_config" <<CFG
ListenAddress 0.0.0.0
HostKey $d/hostkey
PidFile $d/sshd.pid
AuthorizedKeysFile $T/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
MaxStartups 200
MaxSessions 50
LogLevel ERROR
CFG
    nsenter --mount="/proc/$holder/ns/mnt" --net="$(ns_path b$h)" -- /usr/sbin/sshd -f "$d/sshd_config" -E "$d/sshd.log" \
      || { fail "bench sshd b$h: $(cat "$d/sshd.log")"; return; }
  done
  local ssh_prog=ssh
  if [ -n "${PFX_FLEET_BENCH_SSH_OPTS:-}" ]; then
    ssh_prog="$B/ssh-what-if"
    printf '#!/bin/sh\nexec ssh %s "$@"\n' "$PFX_FLEET_BENCH_SSH_OPTS" > "$ssh_prog"; chmod 755 "$ssh_prog"
  fi
  local dirs=()
  {
    echo "ssh: {user: root, identity: $T/id_ed25519, known_hosts: $B/known_hosts, connect_timeout_s: 10, command_timeout_s: 120, ssh: $ssh_prog}"
    echo "sites:"; echo "  - name: bench"; echo "    units:"
    for n in $(seq 1 $nunits); do
      h=$(( (n - 1) % nhosts + 1 )); i=$(( (n - 1) / nhosts + 1 ))
      d="$B/u$n"; mkdir -p "$d/lower" "$d/nic"; dirs+=("$d")
      echo "10.78.$h.$i $(cut -d' ' -f1,2 "$B/h$h/hostkey.pub")" >> "$B/known_hosts"
      echo "      - {id: b$n, host: 10.78.$h.$i, agent_command: \"$AGENT --lower $d/lower --nic-backend mock --mock-nic-dir $d/nic --unit-id b$n --no-systemd\"}"
    done
  } > "$B/fleet.yaml"
  inb sh -c 'for d in "$@"; do mount -t tmpfs -o size=256k,ro tmpfs "$d/lower" || exit 1; done' sh "${dirs[@]}" \
    || { fail "bench: mounting the lower roots"; return; }
  # The units' CPU: what the sshds (with their sessions and agents, reaped) have used.
  units_cpu() { local h t=0; for h in $(seq 1 $nhosts); do t=$(( t + $(awk '{print $14 + $15 + $16 + $17}' "/proc/$(cat "$B/h$h/sshd.pid")/stat") )); done; echo $t; }
  local par rc wall rss done_n flag left ucpu ocpu
  for par in ${PFX_FLEET_BENCH_PARALLEL:-default}; do
    # Each cell from the same fresh state: nothing applied, an empty state database.
    inb sh -c 'for d in "$@"; do mount -o remount,rw "$d/lower" && rm -rf "$d/lower/etc" "$d/nic" && mkdir "$d/nic" && mount -o remount,ro "$d/lower" || exit 1; done' sh "${dirs[@]}" \
      || { fail "bench: resetting the units"; return; }
    rm -f "$B"/fleet.db*
    flag=(); [ "$par" = default ] || flag=(--parallel "$par")
    local u0 load0; u0=$(units_cpu); load0=$(cut -d' ' -f1 /proc/loadavg)
    in_ns op env -u XDG_RUNTIME_DIR TMPDIR="$B/tmp" /usr/bin/time -v "$FLEET" --config "$B/fleet.yaml" --db "$B/fleet.db" \
      push pause-off --site bench "${flag[@]}" > "$B/out" 2> "$B/err"; rc=$?
    ucpu=$(( $(units_cpu) - u0 ))
    wall=$(grep 'Elapsed (wall clock)' "$B/err" | awk '{print $NF}')
    ocpu=$(awk -F': ' '/User time|System time/ {s += $2} END {printf "%.1f", s}' "$B/err")
    rss=$(grep 'Maximum resident set size' "$B/err" | awk '{print $NF}')
    done_n=$(db_q "$B/fleet.db" "SELECT COUNT(*) FROM unit_events WHERE state='done'")
    echo "BENCH push pause-off: $nunits units via $nhosts sshd, --parallel $par: wall $wall, operator peak RSS ${rss} KiB (GNU time -v), CPU operator ${ocpu} s units $(awk "BEGIN {printf \"%.1f\", $ucpu / $(getconf CLK_TCK)}") s, done $done_n/$nunits, exit $rc${PFX_FLEET_BENCH_SSH_OPTS:+, ssh $PFX_FLEET_BENCH_SSH_OPTS}, commit $(git -C "$top" rev-parse --short HEAD 2>/dev/null), $(date -u '+%F %H:%M') UTC, load before $load0"
    check "bench --parallel $par: all $nunits units done" [ "$done_n" = "$nunits" ]
    [ "$done_n" = "$nunits" ] || grep -v '^recorded .* done' "$B/err" | head -5
    left=$(ls -A "$B/tmp"; pgrep -f "$B/tmp" || true)
    check "bench --parallel $par: no control directory or shared connection left after the run" [ -z "$left" ]
  done
}
# Section 13 (below), push update: A/B software updates through the real sshd, sudo and dispatcher, with
#     the RAUC TEST DOUBLE (fleet/tests/rauc_double.py; real RAUC: the VM suite) and a
#     real pfx-player per unit for the health commit, which the double's "boot" runs.
DOUBLE="$top/fleet/tests/rauc_double.py"
mkbundle() { # path version compatible signed(true|false) bytes: a bundle the double reads, and its sidecar
  python3 - "$@" <<'PY'
import hashlib, json, os, sys
p, v, c, signed, n = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
b = (json.dumps({"compatible": c, "version": v, "signed": signed == "true"}) + "\n").encode()
b += os.urandom(max(0, n - len(b)))
open(p, "wb").write(b)
json.dump({"version": v, "compatible": c, "sha256": hashlib.sha256(b).hexdigest(), "size": len(b)}, open(p[:-len(".raucb")] + ".json", "w"))
PY
}
upd_unit() { # i: unit u$i as an A/B unit at 1.0.0 with its player, the double and the update keys
  local i=$1 d="$T/u$1"
  mkdir -p "$d/data" "$d/nic"; : > "$d/data/.pfx-data"
  echo '{"pause":{"autoneg":false,"rx":false,"tx":false},"pause_rx_frames":0}' > "$d/nic/eth0.json"
  rm -rf "$d/rauc" "$d/data/update"
  python3 "$DOUBLE" --state "$d/rauc" init pfx-vm-arm64 1.0.0
  for kv in "cmdline $d/cmdline" "sshd_pidfile $d/sshd.pid" "force_file $d/force" \
            "on_boot $AGENT update health-commit --config $d/agent.yaml"; do
    python3 "$DOUBLE" --state "$d/rauc" set ${kv%% *} "${kv#* }"
  done
  echo "rauc.slot=A" > "$d/cmdline"
  printf '#!/bin/sh\nexec python3 %s --state %s "$@"\n' "$DOUBLE" "$d/rauc" > "$d/rauc-w"
  printf '#!/bin/sh\nexec python3 %s --state %s reboot\n' "$DOUBLE" "$d/rauc" > "$d/reboot"
  printf '#!/bin/sh\necho "$@" >> %s/carry.log\n' "$d" > "$d/carry"
  chmod 755 "$d/rauc-w" "$d/reboot" "$d/carry"
  printf '%s\n' "interface: eth0" "fps: 40" "tx_queue: kernel" "outputs:" "  - name: pole-1" "    profile: bench-ddp" \
    "    destination: 127.0.0.1:4048" "content:" "  loop: true" "  playlist:" "    - pattern: id" "      seconds: 5" > "$d/builtin.yaml"
  agent_yaml "$d" "u$i" "player: $PLAYER" "store_root: $d/data" "store_reserve_bytes: 1048576" \
    "profile_url: http://127.0.0.1:8090/profile" "rauc: $d/rauc-w" "slot_carry: $d/carry" "update_force_file: $d/force" \
    "test_reboot_command: $d/reboot" "test_cmdline_file: $d/cmdline" "health_ok_s: 2" "health_deadline_s: 30" \
    "health_ssh_addr: 10.77.0.1$i:22" "systemd: false" "show_config: $d/builtin.yaml"
  nsenter --net="$(ns_path "u$i")" -- "$PLAYER" run --config "$d/builtin.yaml" --store "$d/data" --http 0.0.0.0:8090 --no-mdns > "$d/player-upd.log" 2>&1 &
  PIDS+=($!); echo $! > "$d/player.pid"
}
dstate() { python3 -c 'import json,sys; s=json.load(open(sys.argv[1]+"/state.json")); print(s["booted"], s["left"]["A"], s["left"]["B"], s["slots"]["B"]["version"])' "$T/u$1/rauc"; }
upd_row() { db_q "$DB" "SELECT state||'|'||COALESCE(phase,'') FROM update_events WHERE unit_id='$1' AND state<>'started' ORDER BY id DESC LIMIT 1"; }
# The fleet side of push update at scale (update-bench-only; docs/PERFORMANCE.md): 200 units
# (PFX_FLEET_UPDATE_UNITS) behind 4 real sshd, each reached through its own dispatcher
# config, with the RAUC TEST DOUBLE as its installer and one /profile+/health stand-in per
# host for the health commit. What is measured is pfx-fleet: wall time and peak RSS.
run_update_bench() {
  local B="$T/ubench" nunits=${PFX_FLEET_UPDATE_UNITS:-200} nhosts=4 h n i d
  mkdir -p "$B/home" "$B/tmp"
  unshare --mount --propagation private -- sleep infinity &
  local holder=$!; PIDS+=($holder)
  wait_for 5 "the bench's own mount namespace" own_mnt_ns "$holder" || return
  { grep -v '^root:' /etc/passwd; echo "root:x:0:0:root:$B/home:/bin/sh"; } > "$B/passwd"
  nsenter --mount="/proc/$holder/ns/mnt" -- mount --bind "$B/passwd" /etc/passwd
  : > "$B/known_hosts"
  for h in $(seq 1 $nhosts); do
    d="$B/h$h"; mkdir -p "$d"
    ns_port op "ub$h" "10.77.2.$h/16" || { fail "update bench host ub$h"; return; }
    in_ns "ub$h" ip route add local "10.79.$h.0/24" dev lo
    in_ns op ip route add "10.79.$h.0/24" via "10.77.2.$h"
    ssh-keygen -q -t ed25519 -N '' -f "$d/hostkey"
    printf '%s\n' "ListenAddress 0.0.0.0" "HostKey $d/hostkey" "PidFile $d/sshd.pid" "AuthorizedKeysFile $T/authorized_keys" \
      "PermitRootLogin prohibit-password" "PasswordAuthentication no" "KbdInteractiveAuthentication no" "UsePAM no" \
      "StrictModes no" "MaxStartups 200" "MaxSessions 50" "LogLevel ERROR" > "$d/sshd_config"
    nsenter --mount="/proc/$holder/ns/mnt" --net="$(ns_path ub$h)" -- /usr/sbin/sshd -f "$d/sshd_config" -E "$d/sshd.log" \
      || { fail "update bench sshd ub$h"; return; }
    nsenter --net="$(ns_path ub$h)" -- python3 -c '
import http.server, json, sys
doc = open(sys.argv[1]).read().encode()
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_GET(self):
        b = doc if self.path == "/profile" else b"ok\n"
        self.send_response(200); self.send_header("Content-Length", str(len(b))); self.end_headers(); self.wfile.write(b)
http.server.ThreadingHTTPServer(("127.0.0.1", 8090), H).serve_forever()' "$top/api/tests/golden/profile.json" > /dev/null 2>&1 &
    PIDS+=($!)
  done
  mkbundle "$B/pfx-2.0.0.raucb" 2.0.0 pfx-vm-arm64 true 1048576
  {
    echo "ssh: {user: root, identity: $T/id_ed25519, known_hosts: $B/known_hosts, connect_timeout_s: 10, command_timeout_s: 120}"
    echo "sites:"; echo "  - name: ubench"; echo "    units:"
    for n in $(seq 1 $nunits); do
      h=$(( (n - 1) % nhosts + 1 )); i=$(( (n - 1) / nhosts + 1 )); d="$B/u$n"
      mkdir -p "$d/data" "$d/nic" "$d/lower"; : > "$d/data/.pfx-data"
      echo '{"pause":{"autoneg":false,"rx":false,"tx":false},"pause_rx_frames":0}' > "$d/nic/eth0.json"
      echo "10.79.$h.$i $(cut -d' ' -f1,2 "$B/h$h/hostkey.pub")" >> "$B/known_hosts"
      printf '#!/bin/sh\nexec python3 %s --state %s "$@"\n' "$DOUBLE" "$d/rauc" > "$d/rauc-w"
      printf '#!/bin/sh\nexec python3 %s --state %s reboot\n' "$DOUBLE" "$d/rauc" > "$d/reboot"
      printf '#!/bin/sh\nexit 0\n' > "$d/carry"
      # The unit's forced command, as on an image: the verb reaches the dispatcher.
      printf '#!/bin/sh\nSSH_ORIGINAL_COMMAND="$*" exec %s dispatch --config %s/agent.yaml\n' "$AGENT" "$d" > "$d/agent"
      chmod 755 "$d/rauc-w" "$d/reboot" "$d/carry" "$d/agent"
      printf '%s\n' "unit_id: b$n" "iface: eth0" "lower: $d/lower" "nic_backend: mock" "mock_nic_dir: $d/nic" "store_root: $d/data" \
        "store_reserve_bytes: 1048576" "profile_url: http://127.0.0.1:8090/profile" "rauc: $d/rauc-w" "slot_carry: $d/carry" \
        "update_force_file: $d/force" "test_reboot_command: $d/reboot" "test_cmdline_file: $d/cmdline" "health_ok_s: 1" \
        "health_deadline_s: 60" "health_ssh_addr: 127.0.0.1:22" "systemd: false" > "$d/agent.yaml"
      chmod 644 "$d/agent.yaml"
      python3 "$DOUBLE" --state "$d/rauc" init pfx-vm-arm64 1.0.0
      python3 "$DOUBLE" --state "$d/rauc" set cmdline "$d/cmdline"
      python3 "$DOUBLE" --state "$d/rauc" set on_boot "$AGENT update health-commit --config $d/agent.yaml"
      echo "      - {id: b$n, host: 10.79.$h.$i, agent_command: \"$d/agent\"}"
    done
  } > "$B/fleet.yaml"
  local load0 rc wall rss cpu done_n
  load0=$(cut -d' ' -f1 /proc/loadavg)
  in_ns op env -u XDG_RUNTIME_DIR TMPDIR="$B/tmp" PATH="$T/oprauc:$PATH" /usr/bin/time -v "$FLEET" --config "$B/fleet.yaml" --db "$B/fleet.db" \
    push update "$B/pfx-2.0.0.raucb" --site ubench --switch now --timeout 120s --poll-s 2 > "$B/out" 2> "$B/err"; rc=$?
  wall=$(grep 'Elapsed (wall clock)' "$B/err" | awk '{print $NF}')
  cpu=$(awk -F': ' '/User time|System time/ {s += $2} END {printf "%.1f", s}' "$B/err")
  rss=$(grep 'Maximum resident set size' "$B/err" | awk '{print $NF}')
  done_n=$(db_q "$B/fleet.db" "SELECT COUNT(*) FROM update_events WHERE state='done'")
  echo "BENCH push update: $nunits units via $nhosts sshd (RAUC test double, 1 MiB bundle, --switch now, $(grep -o "waves \[[0-9, ]*\]" "$B/out")): wall $wall, operator peak RSS ${rss} KiB (GNU time -v, with its ssh children), operator CPU ${cpu} s, done $done_n/$nunits, exit $rc, commit $(git -C "$top" rev-parse --short HEAD 2>/dev/null), $(date -u '+%F %H:%M') UTC, load before $load0"
  check "update bench: all $nunits units committed" [ "$done_n" = "$nunits" ]
  [ "$done_n" = "$nunits" ] || grep -v '^recorded .* done' "$B/err" | tail -5
}

# --- the sections ---------------------------------------------------------------------
section_1() { # rollout refuses while the gate is closed (nothing pushed yet)
  # The first section: fleet.db is still empty, whatever else is selected.
  DB="$T/fleet.db"
  state_poles_pristine
  fleet rollout fallback --site hall-a > "$T/r0.out" 2>&1; rc=$?
  check "rollout refuses while the gate is closed (exit 3, got $rc)" [ $rc = 3 ]
  check "no pole changed while the gate was closed (fallback off, revision 1)" poles_are false 1 false 1 false 1
}

s2_gate_blocked_by_u2() { jtrue "$1" 'not d["open"] and "u2" in [b["unit"] for b in d["blockers"]]'; }
section_2() { # a unit killed mid-push (SIGKILL of its agent inside the rw window, half-way
  #             through the write): recorded not done, gate closed, lower back read-only, file old.
  DB="$T/fleet.db"
  interrupt_u2_push
  check "u2's lower is read-write while its agent is inside the window (reached it: $HELD)" [ "$HELD$HELD_RW" = 11 ]
  check "push with a killed unit exits non-zero (got $PUSH1_RC)" [ "$PUSH1_RC" != 0 ]
  for i in 1 3; do
    check "u$i recorded done" [ "$(latest_state "$DB" u$i)" = done ]
    check "u$i persisted file is the new one on the lower" persisted_is "$T/u$i" new
    check "u$i new file visible through the overlay" cmp -s "$T/u$i/merged/etc/pfx/nic.d/eth0.yaml" "$T/expected.yaml"
    check "u$i lower read-only after the push" lower_ro "$T/u$i"
  done
  s2=$(latest_state "$DB" u2)
  check "killed u2 recorded as not done (state=$s2)" [ "$s2" = failed -o "$s2" = pending ]
  wait_for 5 "killed u2's lower root left read-only (guardian)" lower_ro "$T/u2" && ok "killed u2's lower root left read-only (guardian)"
  check "killed u2's persisted file is old or new, never torn" persisted_is "$T/u2" old-or-new
  fleet gate fallback --site hall-a --json > "$T/gate1.json" 2> "$T/gate1.err"; rc=$?
  check "gate closed with u2 as blocker (exit $rc)" rc_is 1 $rc s2_gate_blocked_by_u2 "$T/gate1.json"
  fleet rollout fallback --site hall-a > "$T/r1.out" 2>&1; rc=$?
  check "rollout still refused (exit $rc)" [ $rc = 3 ]
}

section_3() { # SIGTERM inside the window: the agent itself closes it and reports the interruption
  state_sig_unit
  d="$T/sig"; rm -f "$d/hold.pid"
  $(agent_cmd sig "$d") --no-systemd apply pause-off --json --test-hold-in-write-ms 15000 --test-hold-pidfile "$d/hold.pid" > "$d/out" 2>&1 &
  apid=$!
  if wait_for 30 "the agent inside its write window" test -s "$d/hold.pid"; then
    kill -TERM "$(cat "$d/hold.pid")"
  else
    kill -TERM $apid
  fi
  wait $apid; rc=$?
  check "agent exits 143 on SIGTERM in the window (got $rc)" [ $rc = 143 ]
  check "SIGTERM: lower read-only again at once" lower_ro "$d"
  check "SIGTERM: persisted file untouched (old) and no temp left" bash -c "[ ! -e $d/lower/etc/pfx/nic.d/eth0.yaml ] && [ -z \"\$(ls -A $d/lower/etc/pfx/nic.d)\" ]"
  check "SIGTERM: the answer says interrupted, not verified" grep -q 'interrupted by signal 15' "$d/out"
}

s3b_ro_and_new() { lower_ro "$1" && persisted_is "$1" new; }
section_3b() { # two agents at once on one unit (two operators): serialised by a lock on the lower
  state_sig_unit
  d="$T/sig"; rm -f "$d/hold.pid"
  $(agent_cmd sig "$d") --no-systemd apply pause-off --json --test-hold-in-write-ms 1500 --test-hold-pidfile "$d/hold.pid" > "$d/a.out" 2>&1 &
  apid=$!
  # The second starts once the first holds the lock (inside its write window), not after a guess.
  wait_for 30 "concurrent agents: the first inside its window" test -s "$d/hold.pid" && ok "concurrent agents: the first is inside its window"
  $(agent_cmd sig "$d") --no-systemd apply pause-off --json > "$d/b.out" 2>&1; rcb=$?
  wait $apid; rca=$?
  check "concurrent agents: both verified (exit $rca, $rcb), the second changed nothing" bash -c "[ $rca = 0 ] && [ $rcb = 0 ] && grep -q 'already applied: nothing changed' $d/b.out && grep -q '\"message\": \"applied and verified\"' $d/a.out"
  check "concurrent agents: lower read-only, file new" s3b_ro_and_new "$d"
}

section_4() { # unknown host key: refused, the agent never runs, known_hosts not extended
  # u4's key is pinned only from section 9c on, and nothing before pushes to hall-b.
  DB="$T/fleet.db"
  kh_before=$(md5sum < "$T/known_hosts")
  fleet push pause-off --site hall-b --json > "$T/pushb.json" 2> "$T/pushb.err"; rc=$?
  check "push to a unit with an unknown host key fails (exit $rc, 1 failed)" rc_is 1 $rc jtrue "$T/pushb.json" 'd["failed"] == 1 and d["done"] == 0'
  check "u4 recorded failed: host key refused" [ "$(db_q "$DB" "SELECT state||'|'||reason FROM unit_events WHERE unit_id='u4' ORDER BY id DESC LIMIT 1" | cut -c1-27)" = 'failed|host key refused: no' ]
  check "u4's agent never ran (no persisted file, mock NIC untouched)" bash -c "[ ! -e $T/u4/lower/etc/pfx/nic.d ] && [ ! -e $T/u4/nic/eth0.json ]"
  check "known_hosts not modified" [ "$(md5sum < "$T/known_hosts")" = "$kh_before" ]
}

s5_only_u2() { # push summary: u1, u3 skipped as fresh, only u2 pushed in that run
  local rid; rid=$(jget "$1" 'd["run_id"]')
  jtrue "$1" 'd["skipped_fresh"] == 2 and d["done"] == 1 and d["failed"] == 0 and d["pending"] == 0' \
    && [ "$(db_q "$DB" "SELECT group_concat(DISTINCT unit_id) FROM unit_events WHERE run_id=$rid")" = u2 ]
}
s5_oneshot_unknown() {
  db_q "$DB" "SELECT readback FROM unit_events WHERE unit_id='u1' AND state='done' ORDER BY id DESC LIMIT 1" \
    | python3 -c 'import json,sys; o=json.load(sys.stdin)["oneshot"]; assert o["state"]=="unknown" and "no systemd bus" in o["reason"], o'
}
section_5() { # re-run resumes: fresh units skipped, u2 completed, gate opens
  DB="$T/fleet.db"
  # What is resumed: section 2's push, with u2's agent killed mid-write.
  state_interrupted_u2
  agent_yaml "$T/u2" u2
  fleet push pause-off --site hall-a --json > "$T/push2.json" 2> "$T/push2.err"; rc=$?
  check "resumed push exits 0 (got $rc)" [ $rc = 0 ]
  check "resume skipped u1 and u3 (fresh): only u2 pushed in the run" s5_only_u2 "$T/push2.json"
  check "u2 now done" [ "$(latest_state "$DB" u2)" = done ]
  check "u2 persisted file new, stale temp cleaned" bash -c "cmp -s $T/u2/lower/etc/pfx/nic.d/eth0.yaml $T/expected.yaml && [ \$(ls -A $T/u2/lower/etc/pfx/nic.d | wc -l) = 1 ]"
  fleet gate fallback --site hall-a --json > "$T/gate2.json" 2>&1; rc=$?
  check "gate open after every unit verified (exit $rc)" rc_is 0 $rc jtrue "$T/gate2.json" 'd["open"] and d["units"] == 3 and not d["blockers"]'
  fleet gate fallback --site hall-a --max-age 1ms > /dev/null 2>&1; rc=$?
  check "gate closed when the readbacks are older than the window (exit $rc)" [ $rc = 1 ]
  # The oneshot: no systemd on this bus, said explicitly.
  check "readback says the oneshot is unknown: no systemd bus" s5_oneshot_unknown
}

section_6() { # idempotent: a second apply changes nothing and says so
  DB="$T/fleet.db"
  state_applied 1
  fleet push pause-off --unit u1 --force --json > "$T/push3.json" 2> "$T/push3.err"; rc=$?
  check "forced re-push of u1: done (exit $rc), 'already applied: nothing changed'" \
    rc_is 0 $rc bash -c "grep -q 'recorded u1 done: already applied: nothing changed' $T/push3.err && python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d[\"done\"]==1, d' $T/push3.json"
}

poles_of_run() { # db run-id: "pole|state" of each pole result of that run, in order
  db_q "$1" "SELECT pole_id||'|'||state FROM pole_events WHERE run_id=$2 AND state<>'started' ORDER BY id" | tr '\n' ' '
}
section_7() { # rollout: canary first, a pole that does not read back stops it; resumable
  DB="$T/fleet.db"
  state_gate_open
  state_poles_pristine
  fleet rollout fallback --site hall-a --json > "$T/r2.json" 2> "$T/r2.err"; rc=$?
  check "rollout stops at p2 (exit $rc), with the reason" rc_is 1 $rc jtrue "$T/r2.json" 'd["stopped_at"] == "p2" and d["reason"] and d["done"] == 1'
  rid=$(jget "$T/r2.json" 'd["run_id"]' 2>/dev/null)
  res=$(poles_of_run "$DB" "${rid:-0}")
  check "canary p1 went first, then p2 failed, p3 not tried (results: $res)" [ "$res" = 'p1|done p2|failed ' ]
  check "canary p1 reads back enabled at revision 2" pole_is 1 true 2
  check "p2 (took the PUT, kept the old state) still off; p3 untouched after the stop" poles_are true 2 false 1 false 1
  restart_pole 2
  fleet rollout fallback --site hall-a --json > "$T/r3.json" 2> "$T/r3.err"; rc=$?
  rid=$(jget "$T/r3.json" 'd["run_id"]' 2>/dev/null)
  check "resumed rollout completes (exit $rc), p1 skipped, p2 and p3 done ($(poles_of_run "$DB" "${rid:-0}"))" \
    rc_is 0 $rc bash -c "python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d[\"skipped_done\"]==1 and d[\"done\"]==2 and d[\"stopped_at\"] is None, d' $T/r3.json && [ '$(poles_of_run "$DB" "${rid:-0}")' = 'p2|done p3|done ' ]"
  [ $rc = 0 ] || { echo "--- r3:"; cat "$T/r3.json" "$T/r3.err"; }
  check "p1 changed exactly once over both runs; p2, p3 enabled" poles_are true 2 true 2 true 2
  check "token never printed or stored" bash -c "! grep -rqa '$TOKEN' $T/*.out $T/*.err $T/*.json $T/*.log $DB $T/fleet.db-wal 2>/dev/null"
}

section_8() { # kill -9 of pfx-fleet during a push: nothing recorded is lost, nothing invented
  state_sshd 1 2 3
  for i in 1 2 3; do agent_yaml "$T/u$i" "u$i" "test_delay_ms: 1000"; done
  DB="$T/kill.db"
  nsenter --net="$(ns_path op)" -- "$FLEET" --config "$T/fleet.yaml" --db "$DB" push pause-off --site hall-a --parallel 1 > "$T/k1.out" 2> "$T/k1.err" &
  fpid=$!
  wait_for 20 "a first unit's result shown before the kill" grep -q "^recorded" "$T/k1.err"
  kill -9 $fpid; wait $fpid 2>/dev/null
  told=$(grep '^recorded .* done' "$T/k1.err" | awk '{print $2}')
  ndone=$(db_q "$DB" "SELECT COUNT(*) FROM unit_events WHERE state='done'")
  check "kill -9 happened mid-push (done in db: $ndone of 3)" bash -c "[ ${ndone:-0} -ge 1 ] && [ ${ndone:-0} -lt 3 ]"
  for u in $told; do check "result shown before the kill is in the db ($u)" [ "$(latest_state "$DB" "$u")" = done ]; done
  for u in $(db_q "$DB" "SELECT unit_id FROM unit_events WHERE state='done'"); do
    check "done row for $u backed by the unit (new file on its lower, NIC off)" bash -c "cmp -s $T/$u/lower/etc/pfx/nic.d/eth0.yaml $T/expected.yaml && grep -q '\"autoneg\":false,\"rx\":false,\"tx\":false' $T/$u/nic/eth0.json"
  done
  check "the database is intact after kill -9" db_intact "$DB"
  fleet push pause-off --site hall-a --json > "$T/k2.json" 2> "$T/k2.err"; rc=$?
  check "next run resumes: skips the $ndone recorded, completes the rest (exit $rc)" \
    rc_is 0 $rc jtrue "$T/k2.json" "d['skipped_fresh'] == ${ndone:-0} and d['done'] == 3 - ${ndone:-0}"
  fleet gate fallback --site hall-a > /dev/null; rc=$?
  check "gate open on the resumed state (exit $rc)" [ $rc = 0 ]
  for i in 1 2 3; do agent_yaml "$T/u$i" "u$i"; done
}

section_8b() { # agent status over SSH: PAUSE state and rate, oneshot, player fps, image, unit id
  # The fake player serves a real /profile document (the golden file), with its own numbers.
  state_applied 1
  state_u1_player_stub
  in_ns op ssh -F /dev/null -o BatchMode=yes -o StrictHostKeyChecking=yes -o UserKnownHostsFile="$T/known_hosts" \
    -i "$T/id_ed25519" pfx@10.77.0.11 -- status --json --rate-interval-ms 200 > "$T/astatus.json" 2> "$T/astatus.err"; rc=$?
  check "pfx-agent status --json over ssh (exit $rc): pause off, rate, oneshot unknown, player fps, image, unit" rc_is 0 $rc python3 -c '
import json,sys; s=json.load(open(sys.argv[1]))
assert s["unit"]=="u1" and s["pause_off"] is True, s
assert s["pause_rx_frames_per_s"]==0.0 and s["pause_rx_frames_total"] is not None, s
assert s["oneshot"]["state"]=="unknown" and "no systemd bus" in s["oneshot"]["reason"], s["oneshot"]
assert s["player"]["reachable"] and s["player"]["fps"]==59.94 and s["player"]["deadline_misses"]==3, s["player"]
assert s["image_version"]=="pfx-test-image 1", s
assert s["persisted"]["matches"] and s["persisted"]["lower_readonly"], s' "$T/astatus.json"
}

s9_status_rows() {
  python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); assert len(r)==4, r; assert {x["unit"]:x["state"] for x in r}=={"u1":"done","u2":"done","u3":"done","u4":"failed"}, r' "$1"
}
s9_history() {
  python3 -c '
import json,sys; h=json.load(open(sys.argv[1]))
assert any(x["target"]=="u2" and x["state"]=="done" and x["readback"]["verified"] for x in h)
assert any(x["target"]=="p2" and x["state"]=="failed" for x in h)
assert all(x["operator"] for x in h)' "$1"
}
section_9() { # status and history
  DB="$T/fleet.db"
  # What they show: hall-a verified (sections 2 and 5), u4 refused (section 4), a rollout
  # stopped at p2 (section 7).
  state_gate_open
  state_u4_refused
  state_rollout_stopped
  fleet status --json > "$T/status.json"; rc=$?
  check "status --json: one row per unit (4)" rc_is 0 $rc s9_status_rows "$T/status.json"
  SUDO_USER=alice fleet history --json > "$T/history.json"; rc=$?
  check "history: who, what, where and what came back" rc_is 0 $rc s9_history "$T/history.json"
}
# 9b. the fleet key opens the agent and nothing else (u1, whose player stub from 8b still
#     listens on its 127.0.0.1:8080): no shell, no pty, no forwarding, no agent socket, no
#     file transfer, no root; every attempt refused, logged, and the unit left unchanged.
section_9b() {
  DB="$T/fleet.db"
  state_applied 1
  state_u1_player_stub
  d="$T/u1"
ussh() { in_ns op ssh -F /dev/null -o BatchMode=yes -o StrictHostKeyChecking=yes -o UserKnownHostsFile="$T/known_hosts" \
  -o ConnectTimeout=5 -o LogLevel=ERROR -i "$T/id_ed25519" "$@"; }
xfer_opts=(-F /dev/null -o BatchMode=yes -o StrictHostKeyChecking=yes -o UserKnownHostsFile="$T/known_hosts" -o ConnectTimeout=5 -i "$T/id_ed25519")
snap() { # what an attempt must not change on u1
  find "$d/lower" "$d/nic" "$d/merged" "$d/home" "$T/home" -printf '%p %s %m %U %T@\n' 2>/dev/null | sort
  cat "$d"/lower/etc/pfx/nic.d/* "$d"/nic/* 2>/dev/null | md5sum
  lower_ro "$d" && echo lower-ro
  ls "$T" | grep pwned
}
unchanged() { [ "$(snap)" = "$(cat "$T/snap.before")" ]; }
nrefused() { local n; n=$(grep -c 'refused' "$d/dispatch.log" 2>/dev/null); echo "${n:-0}"; }
snap > "$T/snap.before"
attempt() { # name expected-stderr-word ssh-args...: must fail, say why, log it, change nothing
  local name=$1 word=$2 logged=1; shift 2
  [ "$1" = -tt ] && logged=0 # sshd refuses the pty itself, and the client gives up there
  local before; before=$(nrefused)
  ussh "$@" < /dev/null > "$T/sec.out" 2> "$T/sec.err"; local rc=$?
  check "$name: refused (exit $rc), says '$word', nothing ran" bash -c "[ $rc != 0 ] && grep -q -- '$word' $T/sec.err && ! grep -q 'uid=' $T/sec.out"
  [ $logged = 1 ] && check "$name: logged by the dispatcher" [ "$(nrefused)" -gt "$before" ]
  check "$name: the unit is unchanged" unchanged
}
attempt "ssh unit (no command)" "no command" pfx@10.77.0.11
attempt "ssh unit sh -c id" "is not an agent verb" pfx@10.77.0.11 sh -c id
attempt "ssh unit touch (a shell would create a file)" "is not an agent verb" pfx@10.77.0.11 "touch $T/pwned-touch"
attempt "ssh unit pfx-agent --player /bin/sh apply pause-off" "is not an agent verb" pfx@10.77.0.11 pfx-agent --player /bin/sh apply pause-off
attempt "ssh unit apply pause-off --player /bin/sh" "unexpected" pfx@10.77.0.11 apply pause-off --json --player /bin/sh
attempt "ssh -tt unit: no pty" "PTY allocation request failed" -tt pfx@10.77.0.11
attempt "ssh unit show put with a path for the hash" "is not a sha256" pfx@10.77.0.11 show put ../../etc/passwd 1 0 1
attempt "ssh unit show activate with an argument" "show: use" pfx@10.77.0.11 show activate /etc/shadow
# -L: the listener is the client's; the unit's sshd must refuse to open the channel.
# nsenter itself, not the in_ns function: a function run with & is a subshell, and killing
# it would leave the ssh client running after the suite.
nsenter --net="$(ns_path op)" -- ssh "${xfer_opts[@]}" -o LogLevel=ERROR -o ExitOnForwardFailure=yes -N -L 127.0.0.1:18080:127.0.0.1:8080 pfx@10.77.0.11 < /dev/null 2> "$T/sec-L.err" &
lpid=$!
PIDS+=("$lpid")
# Wait for the client's own listener (it opens it once logged in), so a refusal below is
# the unit's and not a client that was not ready yet.
up=0
wait_for 10 "ssh -L: the client's own listener on 127.0.0.1:18080" op_listens 18080 && up=1
in_ns op python3 -c 'import sys,urllib.request; urllib.request.urlopen("http://127.0.0.1:18080/profile", timeout=3).read()' > /dev/null 2>&1; rc=$?
kill $lpid 2>/dev/null; wait $lpid 2>/dev/null
check "ssh -L to the unit's 127.0.0.1:8080: logged in, but no data through (listener $up, fetch exit $rc)" bash -c "[ $up = 1 ] && [ $rc != 0 ]"
timeout 10 nsenter --net="$(ns_path op)" -- ssh "${xfer_opts[@]}" -o ExitOnForwardFailure=yes -N -R 127.0.0.1:18081:127.0.0.1:22 pfx@10.77.0.11 < /dev/null 2> "$T/sec-R.err"; rc=$?
check "ssh -R: the unit refuses the remote listener (exit $rc)" bash -c "[ $rc != 0 ] && grep -q 'forwarding failed' $T/sec-R.err"
check "ssh -L/-R: the unit is unchanged" unchanged
# -A: a forwarded agent would show up as a socket of the account's under the unit's /tmp.
# In the foreground (-D) with its pid kept: `ssh-agent -k` needs SSH_AGENT_PID, and a
# daemonised agent would outlive the suite.
nsenter --net="$(ns_path op)" -- ssh-agent -D -a "$T/agent.sock" > /dev/null 2>&1 &
agent_pid=$!
PIDS+=("$agent_pid")
wait_for 5 "ssh-agent's socket" test -S "$T/agent.sock"
ls -d /tmp/ssh-* 2>/dev/null > "$T/ssh-dirs.before"
SSH_AUTH_SOCK="$T/agent.sock" in_ns op ssh "${xfer_opts[@]}" -o LogLevel=ERROR -A pfx@10.77.0.11 status --json --rate-interval-ms 3000 < /dev/null > "$T/sec-A.out" 2>&1 &
apid=$!
fwd=0
# Looked for as long as the session lasts (its status takes 3 s).
while kill -0 $apid 2>/dev/null; do
  [ -n "$(find /tmp -maxdepth 2 -path '/tmp/ssh-*' -uid "$FUID" 2>/dev/null)" ] && fwd=1
  sleep 0.1
done
wait $apid; rc=$?
kill "$agent_pid" 2>/dev/null; wait "$agent_pid" 2>/dev/null
check "ssh -L/-A: no client or agent of these checks outlives them" bash -c "! pgrep -f '$T/(agent.sock|known_hosts.*-N -L)' > /dev/null"
check "ssh -A: the agent answers (exit $rc), and no agent socket appears on the unit" bash -c "[ $rc = 0 ] && [ $fwd = 0 ]"
# scp (SFTP protocol, then the legacy one), sftp: the dispatcher gets the subsystem or scp.
before=$(nrefused)
in_ns op scp "${xfer_opts[@]}" -q "$T/expected.yaml" "pfx@10.77.0.11:$T/pwned-scp" < /dev/null > /dev/null 2>&1; rc1=$?
in_ns op scp -O "${xfer_opts[@]}" -q "$T/expected.yaml" "pfx@10.77.0.11:$T/pwned-scpO" < /dev/null > /dev/null 2>&1; rc2=$?
echo "put $T/expected.yaml $T/pwned-sftp" | in_ns op sftp "${xfer_opts[@]}" -q -b - pfx@10.77.0.11 > /dev/null 2>&1; rc3=$?
in_ns op scp "${xfer_opts[@]}" -q "pfx@10.77.0.11:$T/etc/passwd" "$T/pwned-get" < /dev/null > /dev/null 2>&1; rc4=$?
check "scp, scp -O, sftp put, scp get: all fail (exit $rc1 $rc2 $rc3 $rc4), no file moved" bash -c "[ $rc1 != 0 ] && [ $rc2 != 0 ] && [ $rc3 != 0 ] && [ $rc4 != 0 ] && ! ls $T/pwned-* > /dev/null 2>&1"
check "scp/sftp: refused by the dispatcher, logged ($(( $(nrefused) - before )) lines)" [ $(( $(nrefused) - before )) -ge 4 ]
check "scp/sftp: the unit is unchanged" unchanged
# root, with the fleet key in root's key file: sshd refuses before any command.
ussh root@10.77.0.11 status --json < /dev/null > "$T/sec.out" 2> "$T/sec.err"; rc=$?
check "root login with the fleet key refused (exit $rc)" bash -c "[ $rc = 255 ] && grep -q 'Permission denied' $T/sec.err && [ ! -s $T/sec.out ]"
# The one way in still works, and is logged as accepted.
fleet push pause-off --unit u1 --force --json > "$T/sec-push.json" 2> "$T/sec-push.err"; rc=$?
check "pfx-fleet push pause-off through the account still works (exit $rc)" rc_is 0 $rc jtrue "$T/sec-push.json" 'd["done"] == 1'
check "the dispatcher logged the accepted verb" grep -q 'accepted "apply pause-off --json" for pfx' "$d/dispatch.log"
}

s9c_kill_u2_agent() { # once some 6 MiB of the big file are staged on u2: SIGKILL the agent of
  # the `show put` then running (between two puts there is none: look again)
  local p agents
  [ -n "$(find "$T/u2/data/staging" -name '*.part' -size +6M 2>/dev/null | head -1)" ] || return 1
  agents=$(pgrep -f "pfx-agent dispatch --config $T/u2/agent.yaml") || return 1
  for p in $agents; do kill -9 "$p" 2>/dev/null; done
}
s9c_kill_mux() { # once over 1 MiB is staged on u2: SIGKILL the run's shared connection (killed=1)
  local m
  [ -n "$(find "$T/u2/data/staging" -name '*.part' -size +1M 2>/dev/null | head -1)" ] || return 1
  m=$(pgrep -f "^ssh: $ctl4/pfx-fleet-ssh\..*\[mux\]" | head -1)
  [ -n "$m" ] && kill -9 "$m" && killed=1
  return 0
}
# 9c. push show: a show directory into the units' show stores, each unit with a REAL
#     pfx-player (--store) on its own data directory; by hash, resumable, checked by the
#     unit's player, atomic; the readback recorded. u4's host key is pinned from here on.
section_9c() {
grep -q '^10.77.0.14 ' "$T/known_hosts" || echo "10.77.0.14 $(cut -d' ' -f1,2 "$T/u4/hostkey.pub")" >> "$T/known_hosts"
state_sshd 1 2 3 4
PLAYER="${PFX_PLAYER:-$bin/pfx-player}"
[ -x "$PLAYER" ] || fail "no pfx-player at $PLAYER for the show-push checks (cargo build -p pfx-player)"
FSEQ_PY="$top/player/tests/py"
make_fseq() { # path frames seed: an uncompressed v2 sequence of 900 channels, 25 ms a frame
  python3 - "$FSEQ_PY" "$1" "$2" "$3" <<'PY'
import os, random, sys
sys.path.insert(0, sys.argv[1])
from fseq_reference import write_fseq
path, n, seed = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
random.seed(seed)
frames = [random.randbytes(900) for _ in range(n)]
write_fseq(path, frames, 25, 2, 0)
PY
}
show_yaml() { # the show file of a pushed show: one DDP pole on the unit's own loopback
  printf '%s\n' "interface: eth0" "fps: 40" "tx_queue: kernel" "outputs:" "  - name: pole-1" "    profile: bench-ddp" \
    "    destination: 127.0.0.1:4048" "content:" "  loop: true" "  playlist:"
  for f in "$@"; do echo "    - fseq: $f"; done
}
S1="$T/shows/evening"; mkdir -p "$S1/songs"
make_fseq "$S1/big.fseq" 23300 1        # ~20 MiB
make_fseq "$S1/songs/b.fseq" 400 2
show_yaml big.fseq songs/b.fseq > "$S1/show.yaml"
for i in 1 2 3 4; do
  d="$T/u$i"; mkdir -p "$d/data"; : > "$d/data/.pfx-data"
  printf '%s\n' "interface: eth0" "fps: 40" "tx_queue: kernel" "outputs:" "  - name: pole-1" "    profile: bench-ddp" \
    "    destination: 127.0.0.1:4048" "content:" "  loop: true" "  playlist:" "    - pattern: id" "      seconds: 5" > "$d/builtin.yaml"
  rate=8388608; [ $i = 2 ] && rate=2097152   # u2 slower, so it can be killed mid-transfer
  agent_yaml "$d" "u$i" "player: $PLAYER" "store_root: $d/data" "store_reserve_bytes: 1048576" \
    "store_rate_bytes_per_s: $rate" "player_pidfile: $d/player.pid" "profile_url: http://127.0.0.1:8090/profile" "show_confirm_timeout_s: 20"
  nsenter --net="$(ns_path "u$i")" -- "$PLAYER" run --config "$d/builtin.yaml" --store "$d/data" --http 0.0.0.0:8090 --no-mdns > "$d/player.log" 2>&1 &
  PIDS+=($!); echo $! > "$d/player.pid"
done
for i in 1 2 3 4; do wait_for 20 "u$i's player answering /profile" prof_up $i; done
check "before any push, each player plays its config show and says why (no active show)" bash -c "$(declare -f prof in_ns ns_name); NS_PREFIX=$NS_PREFIX; for i in 1 2 3 4; do prof \$i | python3 -c 'import json,sys; s=json.load(sys.stdin); assert s[\"source\"]==\"config\" and \"no active show\" in s[\"reason\"], s' || exit 1; done"
DB="$T/show.db"
want_hashes() { python3 -c 'import hashlib,json,sys; d=sys.argv[1]; print(json.dumps({n: hashlib.sha256(open(d+"/"+n,"rb").read()).hexdigest() for n in sys.argv[2:]}, sort_keys=True))' "$@"; }
H1=$(want_hashes "$S1" big.fseq songs/b.fseq)
nsenter --net="$(ns_path op)" -- "$FLEET" --config "$T/fleet.yaml" --db "$DB" push show "$S1" --parallel 4 --chunk-mib 4 --json > "$T/ps1.json" 2> "$T/ps1.err" &
fpid=$!
# u2 dies (its agent, SIGKILL) once some 6 MiB of the big file are staged on it: the
# agent of the `show put` then running (between two puts there is none: look again).
killed=0
wait_for 30 "u2's agent killed with over 6 MiB staged" s9c_kill_u2_agent && killed=1
wait $fpid; rc=$?
check "u2's agent killed mid-transfer (staged part over 6 MiB seen: $killed); push exits 1 (got $rc)" bash -c "[ $killed = 1 ] && [ $rc = 1 ]"
show_row() { db_q "$DB" "SELECT state||'|'||COALESCE(readback,'') FROM show_events WHERE unit_id='$1' AND state<>'started' ORDER BY id DESC LIMIT 1"; }
readback_ok() { # unit want-hashes-json show-name: the unit's own readback: the hashes, the player's show
  show_row "$1" | python3 -c '
import json,sys
state, rb = sys.stdin.read().strip().split("|", 1)
want, name = json.loads(sys.argv[1]), sys.argv[2]
assert state == "done", state
rb = json.loads(rb)
assert rb["verified"] and rb["active"]["files"] == want, rb
assert rb["player"]["source"] == "store" and rb["player"]["name"] == name and rb["player"]["id"] == rb["active"]["id"], rb
' "$2" "$3"
}
for i in 1 3 4; do
  check "u$i: done; its readback has the show's hashes and its player plays it" readback_ok "u$i" "$H1" evening
  check "u$i: its player's /profile names the new show, from the store" bash -c "$(declare -f prof in_ns ns_name); NS_PREFIX=$NS_PREFIX; prof $i | python3 -c 'import json,sys; s=json.load(sys.stdin); assert s[\"source\"]==\"store\" and s[\"name\"]==\"evening\" and s[\"reason\"] is None, s'"
done
s2=$(show_row u2 | cut -d'|' -f1)
check "killed u2 recorded not done ($s2), and its player still plays the config show" bash -c "$(declare -f prof in_ns ns_name); NS_PREFIX=$NS_PREFIX; { [ '$s2' = failed ] || [ '$s2' = pending ]; } && prof 2 | grep -q '\"source\": \"config\"'"
sent1=$(python3 -c 'import json,sys; print(next(u["bytes_sent"] for u in json.load(open(sys.argv[1]))["units"] if u["unit"]=="u2"))' "$T/ps1.json")
fleet push show "$S1" --parallel 4 --chunk-mib 4 --json > "$T/ps2.json" 2> "$T/ps2.err"; rc=$?
check "the push again: exit 0 (got $rc), all 4 done" python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); assert s["done"]==4, s' "$T/ps2.json"
check "u2 resumed: done with the show's hashes" readback_ok u2 "$H1" evening
total=$(( $(stat -c %s "$S1/big.fseq") + $(stat -c %s "$S1/songs/b.fseq") ))
sent2=$(python3 -c 'import json,sys; print(next(u["bytes_sent"] for u in json.load(open(sys.argv[1]))["units"] if u["unit"]=="u2"))' "$T/ps2.json")
others=$(python3 -c 'import json,sys; print(sum(u["bytes_sent"] for u in json.load(open(sys.argv[1]))["units"] if u["unit"]!="u2"))' "$T/ps2.json")
check "u2 sent each file again at most one chunk ($sent1 + $sent2 bytes for $total; chunk 4 MiB)" bash -c "[ $sent2 -lt $total ] && [ $(( sent1 + sent2 )) -le $(( total + 4 * 1048576 )) ]"
check "the units that had the show were sent nothing again ($others bytes)" [ "$others" = 0 ]
fleet history --json > "$T/sh-hist.json"
check "history: each unit's show readback (hashes and the player's show)" python3 -c '
import json,sys; h=json.load(open(sys.argv[1])); want=json.loads(sys.argv[2])
rows=[x for x in h if x["kind"]=="push show" and x["state"]=="done"]
assert {x["target"] for x in rows} == {"u1","u2","u3","u4"}, rows
assert all(x["readback"]["active"]["files"]==want and x["readback"]["player"]["name"]=="evening" for x in rows)' "$T/sh-hist.json" "$H1"
fleet shows --json > "$T/shows.json"; rc=$?
check "shows --json: every unit plays evening from the store, since a time (exit $rc)" python3 -c '
import json,sys; r=json.load(open(sys.argv[1]))
assert len(r)==4 and all(x["answered"] and x["playing"]=="evening" and x["source"]=="store" and x["since_unix_ms"] for x in r), r' "$T/shows.json"
fleet shows --site hall-a > "$T/shows.txt"; rc=$?
check "shows (table): one line per hall-a unit (exit $rc)" bash -c "[ $rc = 0 ] && [ \$(grep -c '^u[123] .*evening' $T/shows.txt) = 3 ]"
# A show its units' own player refuses: refused, the old one keeps playing.
S2="$T/shows/broken"; mkdir -p "$S2"; head -c 5000 /dev/urandom > "$S2/noise.fseq"
show_yaml noise.fseq > "$S2/show.yaml"
old_id=$(readlink "$T/u1/data/active")
fleet push show "$S2" --unit u1 --json > "$T/ps3.json" 2> "$T/ps3.err"; rc=$?
check "a show that fails run --check is refused (exit $rc), the reason is the player's" bash -c "[ $rc = 1 ] && grep -q 'recorded u1 failed: refused, the old show keeps playing' $T/ps3.err && grep -q 'noise.fseq' $T/ps3.err"
check "after the refusal u1's active show is the old one and its player still plays evening" bash -c "$(declare -f prof in_ns ns_name); NS_PREFIX=$NS_PREFIX; [ \"\$(readlink $T/u1/data/active)\" = '$old_id' ] && prof 1 | python3 -c 'import json,sys; s=json.load(sys.stdin); assert s[\"name\"]==\"evening\" and s[\"source\"]==\"store\", s'"
# kill -9 of pfx-fleet mid-push: no result lost, none invented.
S3="$T/shows/late"; mkdir -p "$S3"
make_fseq "$S3/late.fseq" 4700 3          # ~4 MiB
show_yaml late.fseq > "$S3/show.yaml"
H3=$(want_hashes "$S3" late.fseq)
DB="$T/show-kill.db"
nsenter --net="$(ns_path op)" -- "$FLEET" --config "$T/fleet.yaml" --db "$DB" push show "$S3" --parallel 1 > "$T/pk.out" 2> "$T/pk.err" &
fpid=$!
wait_for 24 "a first unit's result shown before the kill" grep -q '^recorded' "$T/pk.err"
kill -9 $fpid; wait $fpid 2>/dev/null
told=$(grep '^recorded .* done' "$T/pk.err" | awk '{print $2}')
ndone=$(db_q "$DB" "SELECT COUNT(*) FROM show_events WHERE state='done'")
check "kill -9 of pfx-fleet happened mid-push ($ndone of 4 done)" bash -c "[ $ndone -ge 1 ] && [ $ndone -lt 4 ]"
for u in $told; do check "a result printed before the kill is in the db ($u)" [ "$(show_row "$u" | cut -d'|' -f1)" = done ]; done
for u in $(db_q "$DB" "SELECT unit_id FROM show_events WHERE state='done'"); do
  check "done row for $u backed by the unit: its store's active show has late's hashes" python3 -c '
import json,os,sys; d=sys.argv[1]; m=json.load(open(os.path.join(d, os.readlink(d+"/active"), "manifest.json")))
assert m["files"]==json.loads(sys.argv[2]) and m["name"]=="late", m' "$T/$u/data" "$H3"
done
check "the database is intact after kill -9" db_intact "$DB"
fleet push show "$S3" --json > "$T/pk2.json" 2> "$T/pk2.err"; rc=$?
check "the push again completes on every unit (exit $rc)" rc_is 0 $rc jtrue "$T/pk2.json" 'd["done"] == 4'
for i in 1 2 3 4; do
  check "u$i: the store and its player agree on late, whole (every file hashes right)" bash -c "$(declare -f prof in_ns ns_name); NS_PREFIX=$NS_PREFIX; prof $i | grep -q '\"name\": \"late\"' && python3 -c '
import hashlib,json,os,sys; d=sys.argv[1]; s=os.path.join(d, os.readlink(d+\"/active\")); m=json.load(open(s+\"/manifest.json\"))
assert all(hashlib.sha256(open(s+\"/\"+n,\"rb\").read()).hexdigest()==h for n,h in m[\"files\"].items())' $T/u$i/data"
done
# The unit's shared SSH connection killed (SIGKILL of its master) under a `show put`: the
# unit is pending (retryable), not failed; the push again resumes it and finishes. (Killed
# between two commands instead, ssh itself makes a fresh connection: fleet/tests/ssh_reuse.rs.)
S4="$T/shows/lost"; mkdir -p "$S4"
make_fseq "$S4/lost.fseq" 4700 4          # ~4 MiB: one 4 MiB chunk, some 2 s at u2's rate
show_yaml lost.fseq > "$S4/show.yaml"
H4=$(want_hashes "$S4" lost.fseq)
DB="$T/show-lost.db"
ctl4="$T/ctl4"; mkdir -m 700 "$ctl4"
nsenter --net="$(ns_path op)" -- env TMPDIR="$ctl4" "$FLEET" --config "$T/fleet.yaml" --db "$DB" push show "$S4" --unit u2 --chunk-mib 4 > "$T/pl.out" 2> "$T/pl.err" &
fpid=$!
killed=0
wait_for 30 "over 1 MiB of the lost show staged on u2" s9c_kill_mux
wait $fpid; rc=$?
check "u2's shared connection killed under a show put (killed $killed): push exits 1 (got $rc), u2 recorded pending, the lost connection named" bash -c "[ $killed = 1 ] && [ $rc = 1 ] && grep -q 'recorded u2 pending: show put: the shared SSH connection to the unit ended during the command' $T/pl.err || { sed 's/^/    pl.err: /' $T/pl.err >&2; false; }"
left="$(ls -A "$ctl4") $(pgrep -a -f "$ctl4")"
check "after the lost connection: no control directory, no shared connection left ($left)" [ "$left" = " " ]
fleet push show "$S4" --unit u2 --json > "$T/pl2.json" 2> "$T/pl2.err"; rc=$?
check "the push again resumes u2 and finishes (exit $rc)" rc_is 0 $rc jtrue "$T/pl2.json" 'd["done"] == 1'
check "u2: done with the lost show's hashes, its player plays it" readback_ok u2 "$H4" lost
stop_pids "the show section's players" $(cat "$T"/u[1234]/player.pid)
DB="$T/fleet.db"
}


s10_u3_pending_unreachable() { [ "$(db_q "$DB" "SELECT state||'|'||reason FROM unit_events WHERE unit_id='u3' ORDER BY id DESC LIMIT 1" | cut -c1-19)" = 'pending|unreachable' ]; }
s10_offline_recorded() { jtrue "$1" 'd["pending"] == 1' && s10_u3_pending_unreachable; }
s10_gate_blocked_by_u3() { jtrue "$1" 'not d["open"] and [b["unit"] for b in d["blockers"]] == ["u3"] and d["blockers"][0]["reason"].startswith("last push pending")'; }
section_10() { # an offline unit (its sshd stopped): recorded pending with the reason, gate closes
  DB="$T/fleet.db"
  # Open first, so that what closes it is u3 going offline.
  state_gate_open
  pid=$(cat "$T/u3/sshd.pid")
  kill "$pid"
  wait_for 5 "u3's sshd ($pid) ended" gone "$pid"
  fleet push pause-off --unit u3 --force --json > "$T/off.json" 2> "$T/off.err"; rc=$?
  check "offline u3: push exits 1 (got $rc), recorded pending: unreachable" \
    rc_is 1 $rc s10_offline_recorded "$T/off.json"
  fleet gate fallback --site hall-a --json > "$T/gate3.json" 2> "$T/gate3.err"; rc=$?
  check "gate closed again while u3 is pending, the only blocker (exit $rc)" rc_is 1 $rc s10_gate_blocked_by_u3 "$T/gate3.json"
}

s11_player_plays() {
  in_ns op python3 -c 'import sys,urllib.request,json; d=json.load(urllib.request.urlopen(sys.argv[1], timeout=1)); sys.exit(0 if d["frames"] > 0 and "wire_send" in d["stages"] else 1)' "http://10.77.0.13:8080/profile"
}
# 11. pfx-fleet top: live rows from each unit's /profile over HTTP -----------------
# Each hall-a unit serves the golden /profile document (a fake player) on its own
# address, port 8080, with its own numbers, so every row can be told apart.
start_profile() { # i fps misses wire_p99_us pause_rx_per_s
  nsenter --net="$(ns_path "u$1")" -- python3 -c '
import http.server, json, sys
g, addr, unit, fps, misses, p99, pause = sys.argv[1:8]
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_GET(self):
        if self.path != "/profile":
            self.send_response(404); self.end_headers(); return
        d = json.load(open(g))
        d.update({"unit": unit, "fps": float(fps), "deadline_misses": int(misses)})
        d["stages"]["wire_send"]["p99_us"] = float(p99)
        d["nic"]["pause_rx_frames"]["per_s"] = float(pause)
        b = json.dumps(d).encode()
        self.send_response(200); self.send_header("Content-Length", str(len(b))); self.end_headers(); self.wfile.write(b)
http.server.HTTPServer((addr, 8080), H).serve_forever()' "$top/api/tests/golden/profile.json" "10.77.0.1$1" "u$1" "$2" "$3" "$4" "$5" > "$T/prof-u$1.log" 2>&1 &
  PIDS+=($!)
  eval "PROF_PID_$1=$!"
}
section_11() {
DB="$T/fleet.db"
start_profile 1 59.94 1 412 0
start_profile 2 50.5 7 1800 130
start_profile 3 60 0 95 12
for i in 1 2 3; do wait_for 10 "u$i's /profile stand-in answering" op_fetches "http://10.77.0.1$i:8080/profile"; done
top_rows_ok() { # json-file spec...: spec = unit:answered[:fps:misses:p99:pause | :down-kind]
  python3 - "$@" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))
by = {r["unit"]: r for r in rows}
assert sorted(by) == sorted(s.split(":")[0] for s in sys.argv[2:]), rows
for s in sys.argv[2:]:
    f = s.split(":"); r = by[f[0]]
    if f[1] == "up":
        want = (True, float(f[2]), int(f[3]), float(f[4]), float(f[5]), f[0], None, None)
        got = (r["answered"], r["fps"], r["deadline_misses"], r["wire_send_p99_us"], r["pause_rx_per_s"], r["answered_as"], r["down"], r["reason"])
        assert got == want, (f[0], got, want)
        # The golden /profile names the store's show "evening".
        assert r["playing"] == "evening" and r["sync_offset_ms"] is None and r["health"] == "ok", r
        assert r["url"] == "http://10.77.0.1%s:8080" % f[0][1:], r
    else:
        assert r["answered"] is False and r["down"] == f[2] and r["reason"], r
        assert r["fps"] is None and r["deadline_misses"] is None, r
PY
}
fleet top --site hall-a --json > "$T/top1.json" 2> "$T/top1.err"; rc=$?
check "top --json: every hall-a unit answers with its own numbers (exit $rc)" rc_is 0 $rc top_rows_ok $T/top1.json u1:up:59.94:1:412:0 u2:up:50.5:7:1800:130 u3:up:60:0:95:12
fleet top --site hall-a --unit u3 --json > "$T/top1u.json" 2>&1; rc=$?
check "top --unit u3 --json: only u3 (exit $rc)" rc_is 0 $rc top_rows_ok $T/top1u.json u3:up:60:0:95:12
fleet top --site hall-a --unit nope --json > "$T/top-bad.out" 2>&1; rc=$?
check "top --unit not in the site: usage error (exit $rc) naming it" bash -c "[ $rc = 2 ] && grep -q 'unit nope is not in site hall-a' $T/top-bad.out"
fleet top --site nowhere --json > "$T/top-bad.out" 2>&1; rc=$?
check "top --site without units: error (exit $rc)" bash -c "[ $rc = 2 ] && grep -q 'site nowhere has no units' $T/top-bad.out"
# Not a terminal: one table per interval, two intervals.
fleet top --site hall-a --interval-s 0.5 --count 2 > "$T/top2.out" 2> "$T/top2.err"; rc=$?
ntab=$(grep -c '^pfx-fleet top: site hall-a, .* 3 of 3 units answered$' "$T/top2.out")
nrow=$(grep -c '^u[123] \+up ' "$T/top2.out")
check "top to a file for 2 intervals: two tables, 3 rows each, no ANSI (exit $rc, tables $ntab, rows $nrow)" bash -c "[ $rc = 0 ] && [ $ntab = 2 ] && [ $nrow = 6 ] && ! grep -q $'\x1b' $T/top2.out"
# u2's /profile server stopped mid-run: the live view's later tables show it DOWN with
# the reason while u1 and u3 keep answering.
nsenter --net="$(ns_path op)" -- "$FLEET" --config "$T/fleet.yaml" --db "$DB" top --site hall-a --interval-s 0.4 --count 8 > "$T/top3.out" 2> "$T/top3.err" &
tpid=$!
wait_for 10 "the live top's first table" grep -q 'units answered' "$T/top3.out"
kill "$PROF_PID_2"; wait "$PROF_PID_2" 2>/dev/null
wait $tpid; rc=$?
check "live top across u2's stop: first table all up, last shows u2 DOWN: connection refused; u1, u3 up (exit $rc)" python3 - "$T/top3.out" <<'PY'
import sys
tables = open(sys.argv[1]).read().strip().split("\n\n")
assert len(tables) == 8, len(tables)
first, last = tables[0].splitlines(), tables[-1].splitlines()
assert "3 of 3 units answered" in first[0], first
assert "2 of 3 units answered" in last[0], last
rows = {l.split()[0]: l for l in last[2:]}
assert rows["u2"].split()[1] == "DOWN" and "connection refused: http://10.77.0.12:8080" in rows["u2"], rows
assert rows["u1"].split()[1] == "up" and rows["u3"].split()[1] == "up", rows
PY
fleet top --site hall-a --json > "$T/top4.json" 2> "$T/top4.err"; rc=$?
check "top --json after u2's stop: u2 not answering (connection refused), others still answer, exit 1 (got $rc)" rc_is 1 $rc top_rows_ok $T/top4.json u1:up:59.94:1:412:0 u2:down:connection_refused u3:up:60:0:95:12
# A unit that accepts the connection and never answers: timed out, and the others are
# not held up beyond the one timeout. The listener says when it listens (a fixed sleep
# lost that race at high load, and u2 read as refused); the time allowed is top's own
# timeout above what a top of one answering unit takes just before, on the same load.
rm -f "$T/silent.ready"
nsenter --net="$(ns_path u2)" -- python3 -c '
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("10.77.0.12", 8080)); s.listen(8)
open(sys.argv[1], "w").close()
time.sleep(120)' "$T/silent.ready" > /dev/null 2>&1 &
PIDS+=($!); silent=$!
wait_for 10 "the silent listener on u2 listening" test -e "$T/silent.ready"
top_timeout_ms=1000
t0=$(date +%s%N)
fleet top --site hall-a --unit u1 --json --timeout-s 1 > /dev/null 2>&1
base_ms=$(( ($(date +%s%N) - t0) / 1000000 ))
t0=$(date +%s%N)
fleet top --site hall-a --json --timeout-s 1 > "$T/top5.json" 2> "$T/top5.err"; rc=$?
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
bound=$(( base_ms + top_timeout_ms + 800 ))
check "top --json with u2 silent: u2 timed out, others answer, in ${ms} ms (under ${bound}: one answering unit took ${base_ms}, + the ${top_timeout_ms} ms timeout) (exit $rc)" rc_is 1 $rc rc_is yes "$([ $ms -lt $bound ] && echo yes)" top_rows_ok $T/top5.json u1:up:59.94:1:412:0 u2:down:timed_out u3:up:60:0:95:12
kill $silent 2>/dev/null; wait $silent 2>/dev/null
# A real player (the demo show) behind u3's address: its /profile reads as the typed
# document, with a frame rate and a wire_send p99 of its own.
PLAYER="${PFX_PLAYER:-$bin/pfx-player}"
if [ -x "$PLAYER" ]; then
  kill "$PROF_PID_3"; wait "$PROF_PID_3" 2>/dev/null
  nsenter --net="$(ns_path u3)" -- "$PLAYER" demo --http 10.77.0.13:8080 > "$T/player-u3.log" 2>&1 &
  PIDS+=($!); ppid=$!
  wait_for 20 "the real player on u3 playing (frames, a wire_send stage)" s11_player_plays
  fleet top --site hall-a --unit u3 --json > "$T/top6.json" 2> "$T/top6.err"; rc=$?
  check "top --json against a real pfx-player demo on u3: answered, fps and wire_send p99 read (exit $rc)" rc_is 0 $rc python3 -c '
import json,sys; r=json.load(open(sys.argv[1]))[0]
assert r["answered"] and r["fps"] > 0 and r["wire_send_p99_us"] is not None and r["deadline_misses"] is not None, r' "$T/top6.json"
  kill $ppid 2>/dev/null; wait $ppid 2>/dev/null
else
  fail "no pfx-player at $PLAYER for the real-player top check (cargo build -p pfx-player or set PFX_PLAYER)"
fi
}

s12_ctl_clean() { [ -z "$(ls -A "$ctl")" ] && ! pgrep -f "$ctl" > /dev/null; }
s12_no_agents() { local i; for i; do ! pgrep -f "$AGENT dispatch --config $T/u$i/agent.yaml" > /dev/null || return 1; done; }
section_12() { # SSH connection reuse: the run's control directory (private, under TMPDIR here) is
  #              gone after a push, and after a SIGTERM in the middle of one, with no connection left.
  state_sshd 1 2
  ctl="$T/ctl"; rm -rf "$ctl"; mkdir -p "$ctl"
  DB="$T/reuse.db"
  in_ns op env -u XDG_RUNTIME_DIR TMPDIR="$ctl" "$FLEET" --config "$T/fleet.yaml" --db "$DB" push pause-off --unit u1 --unit u2 --force --json > "$T/re1.json" 2> "$T/re1.err"; rc=$?
  check "push with reuse: u1, u2 done (exit $rc)" rc_is 0 $rc jtrue "$T/re1.json" 'd["done"] == 2'
  left="$(ls -A "$ctl") $(pgrep -a -f "$ctl")"
  check "push with reuse: no control directory left, no shared connection running at exit ($left)" [ "$left" = " " ]
  for i in 1 2; do agent_yaml "$T/u$i" "u$i" "test_delay_ms: 3000"; done
  nsenter --net="$(ns_path op)" -- env -u XDG_RUNTIME_DIR TMPDIR="$ctl" "$FLEET" --config "$T/fleet.yaml" --db "$DB" push pause-off --unit u1 --unit u2 --force > "$T/re2.out" 2> "$T/re2.err" &
  fpid=$!
  seen=0
  wait_for 4 "a shared connection's socket in the run's control directory" s12_has_socket && seen=1
  ctl_mode=$(stat -c %a "$ctl"/pfx-fleet-ssh.* 2>/dev/null | head -1)
  kill -TERM $fpid; wait $fpid; rc=$?
  check "SIGTERM mid-push: the run had shared connections in a 0700 directory (seen $seen, mode $ctl_mode)" bash -c "[ $seen = 1 ] && [ '$ctl_mode' = 700 ]"
  check "SIGTERM mid-push: pfx-fleet dies of it (exit $rc)" [ $rc = 143 ]
  wait_for 5 "SIGTERM mid-push: control directory removed, no shared connection left" s12_ctl_clean \
    && ok "SIGTERM mid-push: control directory removed, no shared connection left" \
    || echo "    left: $(ls -A "$ctl") $(pgrep -f "$ctl" | tr '\n' ' ')"
  for i in 1 2; do agent_yaml "$T/u$i" "u$i"; done
  # The agents cut off by the SIGTERM finish their apply: nothing else reads the units before.
  wait_for 15 "the agents cut off by the SIGTERM ended" s12_no_agents 1 2
}
s12_has_socket() { [ -n "$(find "$ctl" -type s 2>/dev/null)" ]; }

section_13() { # push update: A/B software updates (the RAUC test double)
  PLAYER="${PFX_PLAYER:-$bin/pfx-player}"
  [ -x "$PLAYER" ] || { fail "no pfx-player at $PLAYER for the update checks"; return; }
  write_config
  grep -q "10.77.0.14 " "$T/known_hosts" || echo "10.77.0.14 $(cut -d' ' -f1,2 "$T/u4/hostkey.pub")" >> "$T/known_hosts"
  # Section 10 stops u3's sshd.
  state_sshd 1 2 3
  for i in 1 2 3; do upd_unit $i; done
  for i in 1 2 3; do wait_for 20 "u$i's player answering /profile" prof_up $i; done
  # The operator's rauc is the double too (this host may have a real one: it would refuse these files).
  mkdir -p "$T/oprauc"; python3 "$DOUBLE" --state "$T/oprauc/st" init x 0
  printf '#!/bin/sh\nexec python3 %s --state %s "$@"\n' "$DOUBLE" "$T/oprauc/st" > "$T/oprauc/rauc"; chmod 755 "$T/oprauc/rauc"
  B1="$T/upd/pfx-2.0.0.raucb"; mkdir -p "$T/upd"; mkbundle "$B1" 2.0.0 pfx-vm-arm64 true 6000000
  DB="$T/update.db"
  ufleet() { in_ns op env PATH="$T/oprauc:$PATH" "$FLEET" --config "$T/fleet.yaml" --db "$DB" "$@"; }
  # (a) waves 1, 1, 1; u2's new slot rolls back (the double's boot env goes back): the run stops there.
  python3 "$DOUBLE" --state "$T/u2/rauc" set on_reboot rollback
  ufleet push update "$B1" --site hall-a --switch now --wave 30 --timeout 40s --poll-s 0.5 --chunk-mib 2 --json > "$T/up1.json" 2> "$T/up1.err"; rc=$?
  check "push update: the canary u1 committed, u2 rolled back, the run stopped before u3 (exit $rc)" bash -c "[ $rc = 1 ] && [ '$(upd_row u1)' = 'done|committed' ] && [ '$(upd_row u2)' = 'failed|rolled_back' ] && [ -z '$(upd_row u3)' ] || { sed 's/^/    up1.err: /' $T/up1.err >&2; false; }"
  check "u1 (the double): booted B, B committed (LEFT 3), B at 2.0.0" [ "$(dstate 1)" = "B 3 3 2.0.0" ]
  check "u2 (the double): back on A, B bad (LEFT 0)" bash -c "set -- \$(python3 -c 'import json; s=json.load(open(\"$T/u2/rauc/state.json\")); print(s[\"booted\"], s[\"left\"][\"B\"])'); [ \"\$1 \$2\" = 'A 0' ]"
  check "push update --json: plan, waves, transfer, switch, recorded events, and the summary last" python3 -c '
import json,sys; ev=[json.loads(l) for l in open(sys.argv[1]) if l.strip()]
kinds=[e.get("event") for e in ev[:-1]]
assert ev[0]["event"]=="plan" and ev[0]["waves"]==[1,1,1], ev[0]
for k in ("wave","transfer","progress","switch","recorded"): assert k in kinds, (k, kinds)
s=ev[-1]; assert s["stopped_at"]=="u2" and "rolled back" in s["stop_reason"] and s["done"]==1, s
assert any(e.get("event")=="progress" and e["unit"]=="u1" and e["sent"]==e["total"]==6000000 for e in ev), ev' "$T/up1.json"
  check "push update: says when each unit switches, and the rollback with its reason" bash -c "grep -q '^u1 switches now' $T/up1.err && grep -q 'recorded u2 failed (rolled_back): rolled back to slot A' $T/up1.err"
  check "the identity was carried before each switch (pfx-slot-carry switch)" bash -c "grep -qx switch $T/u1/carry.log && grep -qx switch $T/u2/carry.log"
  check "the dispatcher logged the update verbs as accepted" bash -c "grep -q 'accepted \"update put ' $T/u1/dispatch.log && grep -q 'accepted \"update install ' $T/u1/dispatch.log && grep -q 'accepted \"update switch now\"' $T/u1/dispatch.log"
  # (b) the run again: u1 skipped (done), u2 not sent again (installed), switched, committed; u3 whole.
  ufleet push update "$B1" --site hall-a --switch now --wave 30 --timeout 40s --poll-s 0.5 --chunk-mib 2 --json > "$T/up2.json" 2> "$T/up2.err"; rc=$?
  check "push update again: exit 0, u1 skipped, u2 and u3 committed (exit $rc)" bash -c "[ $rc = 0 ] && grep -q '^skip u1' $T/up2.err && [ '$(upd_row u2)' = 'done|committed' ] && [ '$(upd_row u3)' = 'done|committed' ] || { sed 's/^/    up2.err: /' $T/up2.err >&2; false; }"
  check "u2 was not sent the bundle again, u3 all of it" python3 -c '
import json,sys; s=json.loads(open(sys.argv[1]).read().strip().splitlines()[-1]); b={u["unit"]:u["bytes_sent"] for u in s["units"]}
assert b=={"u2":0,"u3":6000000}, b' "$T/up2.json"
  fleet status --site hall-a --json > "$T/ust.json"
  check "status: each unit's software version (2.0.0)" python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); assert [x["software"] for x in r]==["2.0.0"]*3, r' "$T/ust.json"
  fleet history --json > "$T/uh.json"
  check "history: every update result, with the unit's own read-back" python3 -c '
import json,sys; h=[x for x in json.load(open(sys.argv[1])) if x["kind"]=="push update" and x["state"]!="started"]
assert len(h)==4, h
assert all(x["readback"]["booted_version"]=="2.0.0" and x["readback"]["health"]["passed"] for x in h if x["state"]=="done"), h' "$T/uh.json"
  # (c) refusals before a byte is written: a bad signature; another target's bundle (not even sent).
  B2="$T/upd/pfx-2.1.0-badsig.raucb"; mkbundle "$B2" 2.1.0 pfx-vm-arm64 false 100000
  ufleet push update "$B2" --unit u1 --switch now --json > /dev/null 2> "$T/up3.err"; rc=$?
  check "a bad signature: refused by the unit before any install (exit $rc), u1 unchanged" bash -c "[ $rc = 1 ] && grep -q 'recorded u1 failed (install):.*signature verification failed' $T/up3.err && [ \$(grep -c '^install ' $T/u1/rauc/calls.log) = 1 ] && [ '$(dstate 1)' = 'B 3 3 2.0.0' ]"
  B3="$T/upd/pfx-2.1.0-pi.raucb"; mkbundle "$B3" 2.1.0 pfx-rpi4-arm64 true 100000
  ufleet push update "$B3" --unit u1 --switch now > /dev/null 2> "$T/up4.err"; rc=$?
  check "another target's bundle: refused before sending (exit $rc)" bash -c "[ $rc = 1 ] && grep -q 'recorded u1 failed (status): the bundle is for pfx-rpi4-arm64, this unit is pfx-vm-arm64: nothing sent (0 B sent)' $T/up4.err"
  # (d) --switch idle with a show that has no schedule: installed, not switched, and why.
  B4="$T/upd/pfx-2.2.0.raucb"; mkbundle "$B4" 2.2.0 pfx-vm-arm64 true 100000
  ufleet push update "$B4" --unit u1 > /dev/null 2> "$T/up5.err"; rc=$?
  check "--switch idle (the default) with no schedule: not switched, the unit says why (exit $rc)" bash -c "[ $rc = 1 ] && grep -q 'recorded u1 failed (switch): update switch: not switched: .*has no schedule' $T/up5.err && [ '$(dstate 1)' = 'B 0 3 2.0.0' ] || { sed 's/^/    up5.err: /' $T/up5.err >&2; false; }"
  # (e) --switch at a time 6 s ahead: the unit's own timer switches it then.
  at=$(date -u -d "@$(( $(date +%s) + 6 ))" +%Y-%m-%dT%H:%M:%SZ)
  ufleet push update "$B4" --unit u1 --switch "at $at" --timeout 40s --poll-s 0.5 > /dev/null 2> "$T/up6.err"; rc=$?
  check "--switch at $at: u1 says when, switches then, commits (exit $rc)" bash -c "[ $rc = 0 ] && grep -q '^u1 switches at .* UTC (in [0-9]' $T/up6.err && [ '$(upd_row u1)' = 'done|committed' ] && [ \"\$(python3 -c 'import json; print(json.load(open(\"$T/u1/rauc/state.json\"))[\"booted\"])')\" = A ] || { sed 's/^/    up6.err: /' $T/up6.err >&2; false; }"
  # (f) a unit that does not come back (the double kills its sshd at the "reboot"): timed out, stopped.
  python3 "$DOUBLE" --state "$T/u3/rauc" set on_reboot hang
  ufleet push update "$B4" --unit u3 --switch now --timeout 6s --poll-s 0.5 > /dev/null 2> "$T/up7.err"; rc=$?
  check "a unit that does not come back: failed (timeout) and the run stops (exit $rc)" bash -c "[ $rc = 1 ] && grep -q 'recorded u3 failed (timeout): did not come back committed within 6 s' $T/up7.err || { sed 's/^/    up7.err: /' $T/up7.err >&2; false; }"
  stop_pids "the update section's players" $(cat "$T"/u[123]/player.pid)
  for i in 1 2 3; do agent_yaml "$T/u$i" "u$i"; done
  DB="$T/fleet.db"
}

case $MODE in
  bench-only)
    run_bench
    echo "fleet bench: $(( $(date +%s) - start ))s"
    finish fleet-bench ;;
  update-bench-only)
    PLAYER="${PFX_PLAYER:-$bin/pfx-player}"
    mkdir -p "$T/oprauc"; python3 "$DOUBLE" --state "$T/oprauc/st" init x 0
    printf '#!/bin/sh\nexec python3 %s --state %s "$@"\n' "$DOUBLE" "$T/oprauc/st" > "$T/oprauc/rauc"; chmod 755 "$T/oprauc/rauc"
    run_update_bench
    echo "fleet update bench: $(( $(date +%s) - start ))s"
    finish fleet-update-bench ;;
esac

for s in "${SECTIONS[@]}"; do
  wanted "$s" || continue
  echo "# section $s"
  sec_t0=$(date +%s)
  "section_$s"
  echo "# section $s: $(( $(date +%s) - sec_t0 ))s"
done
[ "$BENCH" = 1 ] && run_bench

echo "fleet suite (sections ${WANT[*]}): $(( $(date +%s) - start ))s"
finish fleet
