#!/usr/bin/env bash
# Update suite: A/B updates with real RAUC in the vm-arm64 image, the VM booted through
# U-Boot (qemu -bios u-boot.bin running the image's boot.scr), never with -kernel.
#
# One image (version 1.0.0, a throwaway CA's certificate) and bundles made from copies of
# it by `pfx-image bundle`: 2.0.0 (the image with its version file rewritten: a build
# differs in more bytes, not in kind), 0.9.0 (older), one whose player exits at start, one
# for another target, one signed under another CA, and one tampered after signing. The
# fleet (`pfx-fleet push update`) drives the unit over its fleet account, with the strict
# host key check, as it would in the field.
#
# Cases (docs/update.md): refusals before a byte is written (bad signature, tampered
# payload, other target, older version) with slot B's bytes and the boot environment
# unchanged and no reboot; update -> trial boot -> health commit -> the new version plays,
# same host key, same show, PAUSE-off carried; a bundle whose player crashes rolls back by
# itself and the fleet stops, and so does one whose root hangs (the watchdog); a power cut (QEMU system_reset) during the transfer, the slot
# write, between install and switch, during the trial boot and right after the commit each
# leaves a unit that boots, plays and takes the update again; one environment copy erased:
# the unit still boots.
#
# Env: PFX_CACHE, PFX_IMAGE_PLAYER/PFX_IMAGE_AGENT (as 60-image), PFX_UPDATE_KEEP=1,
# PFX_UPDATE_CASES (space-separated subset of: refuse update crash hang cuts env, or all;
# default: all but cuts).
set -euo pipefail
top=${PFX_TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$top"
# shellcheck source=../lib/check.sh
. "$top/scripts/lib/check.sh"
need_root "mmdebstrap, chroot, binfmt, qemu, debugfs"
export PFX_CACHE=${PFX_CACHE:-/var/cache/pfx}
# The fleet prints switch times in UTC; --switch at HH:MM is this machine's local time.
export TZ=UTC
# CI (scripts/test-all) runs the default set, about 20 minutes on 2 cores; the power cuts
# (five more boots and three more installs, about 12 minutes) run with
# PFX_UPDATE_CASES=cuts or =all (README, Tests).
cases=${PFX_UPDATE_CASES:-refuse update crash hang env}
[ "$cases" = all ] && cases="refuse update crash hang cuts env"
want_case() { case " $cases " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
suite_start=$(date +%s)
lap_start=$suite_start
lap() { local now; now=$(date +%s); printf 'TIMING %-44s %4d s (suite %4d s)\n' "$1" $((now - lap_start)) $((now - suite_start)); lap_start=$now; }
# Each case builds on its unit's state: a failed check ends the suite (fatal), after the
# serial log's end, which says what the unit was doing.
fail() { [ -n "${vm_work:-}" ] && [ -f "$vm_work/serial.log" ] && tail -40 "$vm_work/serial.log" >&2; die "$*"; }
# shellcheck source=../lib/vm.sh
. "$top/scripts/lib/vm.sh"
need_cmds image.apt rauc mksquashfs mkimage openssl debugfs mcopy
[ -f /usr/lib/u-boot/qemu_arm64/u-boot.bin ] || fail "u-boot-qemu is missing (scripts/deps/image.apt)"

work=$(mktemp -d /var/tmp/pfx-update-test.XXXXXX)
qemu_pid=""
cleanup() {
  if [ -n "$qemu_pid" ] && kill -0 "$qemu_pid" 2>/dev/null; then kill "$qemu_pid"; wait "$qemu_pid" 2>/dev/null || true; fi
  if [ "${PFX_UPDATE_KEEP:-0}" = 1 ]; then echo "work dir kept: $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
export MTOOLS_SKIP_CHECK=1
py_json() { python3 -c "import json,sys; m=json.load(open(sys.argv[1])); print($2)" "$1"; }

# ---------------------------------------------------------------- 1. keys (throwaway)
ca() { # DIR NAME: a CA and a signing certificate under it, as docs/update.md makes them
  mkdir -p "$1"
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=$2 CA" -keyout "$1/ca.key" -out "$1/ca.pem" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -subj "/CN=$2 signing" -keyout "$1/signing.key" -out "$1/signing.csr" 2>/dev/null
  printf 'basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\n' > "$1/signing.ext"
  openssl x509 -req -in "$1/signing.csr" -CA "$1/ca.pem" -CAkey "$1/ca.key" -CAcreateserial -days 2 \
    -extfile "$1/signing.ext" -out "$1/signing.pem" 2>/dev/null
}
ca "$work/keys" "pfx test"
ca "$work/evil" "not the operator's"
lap "keys"

# ---------------------------------------------------------------- 2. image and bundles
# The image's aarch64 player is cross-built (as 60-image does) unless one is given.
if [ -z "${PFX_IMAGE_PLAYER:-}" ] && ! rustup target list --installed 2>/dev/null | grep -qx aarch64-unknown-linux-gnu; then
  rustup target add aarch64-unknown-linux-gnu
fi
cargo build --release --locked -q -p pfx-image || fail "cargo build pfx-image"
cargo build -q --locked -p pfx-fleet || fail "cargo build pfx-fleet"
img_bin=$top/target/release/pfx-image
player_args=()
[ -n "${PFX_IMAGE_PLAYER:-}" ] && player_args=(--player "$PFX_IMAGE_PLAYER")
[ -n "${PFX_IMAGE_AGENT:-}" ] && player_args+=(--agent "$PFX_IMAGE_AGENT")
ssh-keygen -q -t ed25519 -N '' -C pfx-update-test -f "$work/id"
ssh-keygen -q -t ed25519 -N '' -C pfx-update-inspect -f "$work/inspect"
{ vm_image_yaml "$top" "$work/id.pub"; echo "version: 1.0.0"; echo "update_cert: $work/keys/ca.pem"; } > "$work/image.yaml"
"$img_bin" build "$work/image.yaml" -o "$work/v1.img" "${player_args[@]}" || fail "vm-arm64 build"
m=$work/v1.img.manifest.json
[ "$(py_json "$m" 'm["update"]["version"]')" = 1.0.0 ] || fail "the image's version is not 1.0.0"
[ "$(py_json "$m" 'm["update"]["keyring"]')" = True ] || fail "the image has no keyring"
# The copy that boots gets the inspection sshd (in slot A; the bundles are made from it,
# so every slot the suite boots has it).
cp --sparse=always "$work/v1.img" "$work/unit.img"
vm_inject_inspect "$work/unit.img" "$m" "$work/inspect.pub" "$work/inject"
slot_a_off=$(py_json "$m" 'm["update"]["slot_a"]["start_sector"]*512')
# variant NAME CMDS: a copy of the boot copy with debugfs commands applied to slot A.
variant() {
  cp --sparse=always "$work/unit.img" "$work/$1.img"
  printf '%s\n' "${@:2}" > "$work/$1.cmds"
  debugfs -w -f "$work/$1.cmds" "$work/$1.img?offset=$slot_a_off" > "$work/$1.debugfs" 2>&1 || fail "variant $1: $(cat "$work/$1.debugfs")"
}
bundle() { # NAME IMG KEYDIR
  "$img_bin" bundle "$2" -o "$work/$1.raucb" --cert "$3/signing.pem" --key "$3/signing.key" > "$work/$1.bundle.log" 2>&1 \
    || fail "bundle $1: $(cat "$work/$1.bundle.log")"
}
echo 2.0.0 > "$work/v2.version"; echo 3.0.0 > "$work/v3.version"
# The crashing bundle is newer than 2.0.0 (a unit already at a bundle's version is done
# without more), older than the cuts' 3.0.0.
echo 2.1.0 > "$work/crash.version"
printf '#!/bin/sh\necho "pfx-player: test bundle: exits at start" >&2\nexit 1\n' > "$work/crash.player"; chmod 755 "$work/crash.player"
variant v2 "rm /etc/pfx/image-version" "write $work/v2.version /etc/pfx/image-version"
variant v3 "rm /etc/pfx/image-version" "write $work/v3.version /etc/pfx/image-version"
# The hanging bundle (2.2.0): 3 s into its boot it freezes PID 1 and every service
# (cgroup freezer), the player and the health check among them: a unit that answers
# nothing, as a kernel or userspace deadlock leaves it. Only the hardware watchdog, which
# systemd no longer pings, can end that trial.
echo 2.2.0 > "$work/hang.version"
cat > "$work/hang.service" <<'UNIT'
[Unit]
Description=pfx test bundle: hang the whole unit 3 s into the boot
DefaultDependencies=no
After=sysinit.target
[Service]
Type=oneshot
ExecStart=/bin/sh -c 'sleep 3; echo "<2>pfx test bundle: freezing every service and PID 1" > /dev/kmsg; for g in user.slice init.scope system.slice; do [ -e /sys/fs/cgroup/$$g/cgroup.freeze ] && echo 1 > /sys/fs/cgroup/$$g/cgroup.freeze; done'
[Install]
WantedBy=sysinit.target
UNIT
variant hang "rm /etc/pfx/image-version" "write $work/hang.version /etc/pfx/image-version" \
  "write $work/hang.service /etc/systemd/system/pfx-test-hang.service" \
  "mkdir /etc/systemd/system/sysinit.target.wants" \
  "symlink /etc/systemd/system/sysinit.target.wants/pfx-test-hang.service /etc/systemd/system/pfx-test-hang.service"
variant crash "rm /etc/pfx/image-version" "write $work/crash.version /etc/pfx/image-version" "rm /usr/bin/pfx-player" "write $work/crash.player /usr/bin/pfx-player"
bundle v2 "$work/v2.img" "$work/keys"
bundle v3 "$work/v3.img" "$work/keys"
bundle crash "$work/crash.img" "$work/keys"
want_case hang && bundle hang "$work/hang.img" "$work/keys"
# The refusals need no whole root: a unit must refuse them before it writes a byte, so a
# small image of the same layout (its slot A holds only what `bundle` reads: the RAUC
# config and the version) makes bundles that are refused for the same reasons, in
# seconds. Were one taken, the unit would be left with a root that cannot boot, and the
# case fails either way.
tiny_image() { # NAME VERSION COMPATIBLE
  local d=$work/tiny-$1
  mkdir -p "$d/root/etc/rauc" "$d/root/etc/pfx"
  debugfs -R "cat /etc/rauc/system.conf" "$work/unit.img?offset=$slot_a_off" 2>/dev/null \
    | sed "s/^compatible=.*/compatible=$3/" > "$d/root/etc/rauc/system.conf"
  echo "$2" > "$d/root/etc/pfx/image-version"
  truncate -s 64M "$d/t.img"
  printf 'label: dos\nlabel-id: 0x70667801\nunit: sectors\n\nstart=8192, size=16384, type=c, bootable\nstart=24576, size=32768, type=83\nstart=57344, size=32768, type=83\nstart=90112, size=32768, type=83\n' \
    | sfdisk -q "$d/t.img" || fail "sfdisk for the $1 image"
  truncate -s 16M "$d/a.ext4"; mke2fs -q -F -t ext4 -d "$d/root" "$d/a.ext4" || fail "mke2fs for the $1 image"
  dd if="$d/a.ext4" of="$d/t.img" bs=512 seek=24576 conv=notrunc status=none
  bundle "$1" "$d/t.img" "$work/keys"
}
tiny_image old 0.9.0 pfx-vm-arm64
tiny_image other 3.0.0 pfx-rpi4-arm64
# The signature cases from a small bundle the unit would otherwise take (3.0.0, this
# target): the signature covers the payload's digest whatever its size, and the transfer
# of a whole root (twice at the unit's rate cap, about 3 minutes) proves nothing more.
tiny_image small 3.0.0 pfx-vm-arm64
# Signed under another CA: the bundle re-signed, payload untouched.
rauc resign --cert="$work/evil/signing.pem" --key="$work/evil/signing.key" --keyring="$work/evil/ca.pem" --no-verify \
  "$work/small.raucb" "$work/evil.raucb" > "$work/evil.log" 2>&1 || fail "rauc resign: $(cat "$work/evil.log")"
python3 - "$work/small.raucb.json" "$work/evil.raucb" > "$work/evil.raucb.json" <<'PY'
import hashlib, json, sys
m = json.load(open(sys.argv[1])); b = open(sys.argv[2], "rb").read()
m.update(bundle="evil.raucb", sha256=hashlib.sha256(b).hexdigest(), size=len(b)); print(json.dumps(m))
PY
[ "$(py_json "$work/v2.raucb.json" 'm["version"]')" = 2.0.0 ] || fail "v2's sidecar: $(cat "$work/v2.raucb.json")"
[ "$(py_json "$work/other.raucb.json" 'm["compatible"]')" = pfx-rpi4-arm64 ] || fail "other's sidecar: $(cat "$work/other.raucb.json")"
# Tampered: one byte of the payload (the squashfs, inside its first half) flipped after
# signing; its sidecar keeps the signed bundle's hash.
cp "$work/small.raucb" "$work/tampered.raucb"
python3 - "$work/tampered.raucb" <<'PY'
import sys
p = sys.argv[1]; d = bytearray(open(p, "rb").read()); i = len(d) // 3; d[i] ^= 0x40; open(p, "wb").write(d)
PY
python3 - "$work/small.raucb.json" "$work/tampered.raucb" > "$work/tampered.raucb.json" <<'PY'
import hashlib, json, sys
m = json.load(open(sys.argv[1])); b = open(sys.argv[2], "rb").read()
m.update(bundle="tampered.raucb", sha256=hashlib.sha256(b).hexdigest(), size=len(b)); print(json.dumps(m))
PY
rauc info --keyring="$work/keys/ca.pem" "$work/v2.raucb" > /dev/null 2>&1 || fail "rauc info refuses the good bundle on the host"
# The small bundle is good: what the unit refuses in evil and tampered is their signature.
rauc info --keyring="$work/keys/ca.pem" "$work/small.raucb" > /dev/null 2>&1 || fail "rauc info refuses the small bundle on the host"
if rauc info --keyring="$work/keys/ca.pem" "$work/evil.raucb" > /dev/null 2>&1; then fail "rauc info took the bundle signed under another CA"; fi
if rauc info --keyring="$work/keys/ca.pem" "$work/tampered.raucb" > /dev/null 2>&1; then fail "rauc info took the tampered bundle"; fi
echo "BUNDLE v2: $(py_json "$work/v2.raucb.json" 'm["size"]') bytes, slot $(py_json "$work/v2.raucb.json" 'm["slot_bytes"]') bytes"
lap "image and bundles"

# ---------------------------------------------------------------- 3. boot through U-Boot
vm_work=$work vm_disk=$work/unit.img vm_key=$work/inspect vm_fleet_key=$work/id vm_boot=uboot vm_snapshot=0
truncate -s +512M "$work/unit.img"
vm_ports
ssh_opts=(-o BatchMode=yes -o ConnectTimeout=5 -o StrictHostKeyChecking=accept-new
          -o UserKnownHostsFile="$work/known_hosts" -o LogLevel=ERROR)
cat > "$work/fleet.yaml" <<YAML
ssh:
  identity: $work/id
  known_hosts: $work/known_hosts
  connect_timeout_s: 10
  command_timeout_s: 600
state_db: $work/fleet.db
sites:
  - name: vm
    units:
      - {id: pfx-abcdef, host: 127.0.0.1, port: $ssh_port}
YAML
fleet() { "$top/target/debug/pfx-fleet" --config "$work/fleet.yaml" "$@"; }
# wait_up: the player's first frame, then root (inspection) and the fleet key answer.
wait_up() {
  wait_profile "$work/serial.log"
  wait_frame
  local up=0
  for _ in $(seq 1 90); do vm true 2>/dev/null && fleet_ssh pfx@127.0.0.1 status --json > /dev/null 2>&1 && { up=1; break; }; sleep 2; done
  [ $up = 1 ] || fail "ssh did not answer after the boot"
}
booted() { vm "grep -o 'rauc.slot=[AB]' /proc/cmdline | cut -d= -f2"; }
version() { vm cat /etc/pfx/image-version; }
boot_id() { vm cat /proc/sys/kernel/random/boot_id; }
# Host-side reads of the disk file: slot B's bytes and the boot environment's.
slot_b_sum() { python3 - "$work/unit.img" "$(py_json "$m" 'm["update"]["slot_b"]["start_sector"]*512')" "$(py_json "$m" 'm["update"]["slot_b"]["sectors"]*512')" <<'PY'
import hashlib, sys
f = open(sys.argv[1], "rb"); f.seek(int(sys.argv[2])); n = int(sys.argv[3]); h = hashlib.sha256()
while n > 0:
    b = f.read(min(n, 1 << 22)); h.update(b); n -= len(b)
print(h.hexdigest())
PY
}
boot_off=$(py_json "$m" 'm["partitions"][0]["start_sector"]*512')
env_sum() { for f in pfxenv.a pfxenv.b; do mcopy -n -i "$work/unit.img@@$boot_off" "::$f" - ; done | sha256sum | cut -c1-64; }
start_vm "$work/serial.log"
wait_up
grep -q "U-Boot" "$work/serial.log" || fail "the VM did not boot through U-Boot"
[ "$(booted)" = A ] || fail "the first boot is on slot $(booted), expected A"
[ "$(version)" = 1.0.0 ] || fail "slot A runs version $(version)"
hostkey0=$(vm cat /media/root-ro/etc/ssh/ssh_host_ed25519_key.pub)
echo "BOOT (U-Boot, slot A): first frame $frame_s s after qemu start"
vm rauc status --detailed > "$work/rauc-status0.txt" 2>&1 || fail "rauc status on the unit: $(cat "$work/rauc-status0.txt")"
ok "boots through U-Boot into slot A (1.0.0); rauc status answers"
fleet push pause-off --site vm > "$work/pause.txt" 2>&1 || { cat "$work/pause.txt"; fail "push pause-off"; }
lap "boot 1 (U-Boot, slot A)"
# push_update BUNDLE ARGS...: the fleet's rollout to the one unit; output in $work/push.out.
push_update() { fleet push update "$@" --site vm > "$work/push.out" 2>&1; }
# push_until_said PATTERN BUNDLE ARGS...: a push whose switch is hours ahead (the fleet
# waits for it by design, a wave's readback included) runs until it says PATTERN, that is
# until the unit has installed and armed its switch; then it is stopped (SIGTERM: the
# unit keeps its pending switch, the run is recorded as stopped).
push_until_said() {
  local pattern=$1 i; shift
  fleet push update "$@" --site vm > "$work/push.out" 2>&1 &
  local pid=$!
  for i in $(seq 1 1800); do
    grep -q "$pattern" "$work/push.out" 2>/dev/null && break
    kill -0 "$pid" 2>/dev/null || { cat "$work/push.out"; fail "the push ended without saying: $pattern"; }
    sleep 0.5
  done
  grep -q "$pattern" "$work/push.out" || { kill "$pid"; cat "$work/push.out"; fail "the push did not say within 900 s: $pattern"; }
  kill -TERM "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}
# wait_reboot OLD_BOOT_ID: the unit went down and came back.
wait_reboot() {
  local i
  for i in $(seq 1 300); do
    b=$(vm cat /proc/sys/kernel/random/boot_id 2>/dev/null || true)
    [ -n "$b" ] && [ "$b" != "$1" ] && break
    sleep 2
  done
  wait_up
}
show_of() { python3 -c 'import json,sys; s=json.load(open(sys.argv[1])).get("show",{}); print(s.get("source",""), s.get("id",""))' "$work/profile.json"; }

# ---------------------------------------------------------------- 4. refusals
if want_case refuse; then
  sumb0=$(slot_b_sum); env0=$(env_sum); bid0=$(boot_id)
  for b in "evil:signature verification failed" "tampered:signature verification failed" \
           "other:is for pfx-rpi4-arm64" "old:older than the booted 1.0.0"; do
    name=${b%%:*} why=${b#*:}
    if push_update "$work/$name.raucb" --switch now; then cat "$work/push.out"; fail "the unit took the $name bundle"; fi
    grep -qi "$why" "$work/push.out" || { cat "$work/push.out"; fail "the $name bundle was refused, but not because it $why"; }
    echo "refused $name: $(grep -i "$why" "$work/push.out" | head -1)"
    # The fleet may refuse before sending (it reads the unit's compatible and version); the
    # unit must refuse on its own too: the bundle staged by hand, then the dispatcher's
    # install verb over the fleet account.
    grep -q "nothing sent" "$work/push.out" || continue
    h=$(py_json "$work/$name.raucb.json" 'm["sha256"]')
    vm "mkdir -p /var/lib/pfx/update && cat > /var/lib/pfx/update/$h.raucb" < "$work/$name.raucb"
    if fleet_ssh pfx@127.0.0.1 update install "$h" > "$work/install-$name.json" 2>&1; then
      cat "$work/install-$name.json"; fail "the unit's install verb took the $name bundle"
    fi
    grep -q "refused before writing anything" "$work/install-$name.json" && grep -qi "$why" "$work/install-$name.json" \
      || { cat "$work/install-$name.json"; fail "the unit's install verb refused the $name bundle, but not before writing, or not because it $why"; }
    echo "  and by the unit's own install verb: $(py_json "$work/install-$name.json" 'm["message"]')"
    vm rm -f "/var/lib/pfx/update/$h.raucb"
  done
  [ "$(slot_b_sum)" = "$sumb0" ] || fail "a refused bundle changed slot B's bytes"
  [ "$(env_sum)" = "$env0" ] || fail "a refused bundle changed the boot environment"
  [ "$(boot_id)" = "$bid0" ] || fail "the unit rebooted during the refusals"
  ok "refused before writing a byte: a bundle signed under another CA, a tampered payload, another target's bundle, an older version; slot B and the boot environment unchanged, no reboot"
  lap "refusals"
fi

# ---------------------------------------------------------------- 5. update and commit
if want_case update; then
  profile_ok; show0=$(show_of)
  nic0=$(vm cat /media/root-ro/etc/pfx/nic.d/eth0.yaml)
  bid0=$(boot_id)
  # The show comes first: what sending and installing cost it, side by side with a window
  # of the same show without them. The player's counters since its start: a baseline of
  # 60 s, then across a push that switches only in 6 hours; then the same push again with
  # --switch now, which skips what is done and switches. Printed, not asserted: under TCG
  # on a shared host a guest's deadlines measure the host as much as the unit (the
  # figures and their reading: docs/PERFORMANCE.md, "Updates").
  since() { python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))["since_start"]; print(s["frames"], s["deadline_misses"], s["skipped_ticks"])' "$work/profile.json"; }
  profile_ok || fail "/profile before the baseline"; read -r fb mb kb <<< "$(since)"
  sleep 60 # the baseline is 60 s of show (a duration measured, not an ordering)
  profile_ok || fail "/profile before the push"; read -r f0 m0 k0 <<< "$(since)"
  echo "SHOW baseline (60 s, no push): $((f0 - fb)) frames, $((m0 - mb)) deadline misses, $((k0 - kb)) skipped ticks"
  t0=$(date +%s.%N)
  push_until_said "switches at" "$work/v2.raucb" --switch "at $(date -d '+6 hours' +%H:%M)"
  t1=$(date +%s.%N)
  cat "$work/push.out"
  [ "$(boot_id)" = "$bid0" ] || fail "the unit rebooted before its switch time"
  profile_ok || fail "/profile after the install"; read -r f1 m1 k1 <<< "$(since)"
  [ "$f1" -gt "$f0" ] || fail "the player made no frame during the push ($f0 -> $f1)"
  echo "SHOW during send+install ($(python3 -c "print(round($t1-$t0,1))") s): $((f1 - f0)) frames, $((m1 - m0)) deadline misses, $((k1 - k0)) skipped ticks"
  vm "systemctl show -p CPUSchedulingPolicy -p IOSchedulingClass rauc.service" | tr '\n' ' ' | sed 's/^/  rauc.service: /'; echo
  push_update "$work/v2.raucb" --switch now || { cat "$work/push.out"; fail "push update v2"; }
  t2=$(date +%s.%N)
  cat "$work/push.out"
  [ "$(boot_id)" != "$bid0" ] || fail "the fleet reported the update done without a reboot"
  profile_ok
  [ "$(booted)" = B ] || fail "after the update the unit runs slot $(booted), expected B"
  [ "$(version)" = 2.0.0 ] || fail "after the update the unit runs version $(version)"
  [ "$(vm cat /media/root-ro/etc/ssh/ssh_host_ed25519_key.pub)" = "$hostkey0" ] || fail "the host key changed with the update"
  [ "$(vm cat /media/root-ro/etc/pfx/nic.d/eth0.yaml)" = "$nic0" ] || fail "the persisted PAUSE-off setting was not carried into slot B"
  [ "$(show_of)" = "$show0" ] || fail "the unit plays $(show_of) after the update, before it $show0"
  vm rauc status --detailed --output-format=json > "$work/rauc-status1.json"
  python3 - "$work/rauc-status1.json" <<'PY' || fail "rauc status after the commit: $(cat "$work/rauc-status1.json")"
import json, sys
s = json.load(open(sys.argv[1])); slots = {list(x)[0]: list(x.values())[0] for x in s["slots"]}
b = slots["rootfs.1"]; assert s["booted"] == "B" and b["boot_status"] == "good", (s["booted"], b)
PY
  echo "UPDATE one unit: transfer and install $(python3 -c "print(round($t1-$t0,1))") s, switch, trial boot and commit $(python3 -c "print(round($t2-$t1,1))") s"
  ok "update to 2.0.0: trial boot of slot B, committed good, same host key (strict check), PAUSE-off carried, the same show plays"
  lap "update v2 (boot 2)"
fi
# ---------------------------------------------------------------- 6. a crashing player
if want_case crash; then
  slot0=$(booted) ver0=$(version); profile_ok; show0=$(show_of)
  if push_update "$work/crash.raucb" --switch now; then cat "$work/push.out"; fail "the fleet called the crashing bundle a success"; fi
  cat "$work/push.out"
  grep -qi "rolled back" "$work/push.out" || fail "the fleet did not say the unit rolled back"
  profile_ok
  [ "$(booted)" = "$slot0" ] && [ "$(version)" = "$ver0" ] || fail "after the failed trial the unit runs slot $(booted) $(version), expected $slot0 $ver0"
  [ "$(show_of)" = "$show0" ] || fail "after the rollback the unit plays $(show_of), before it $show0"
  vm rauc status --detailed --output-format=json > "$work/rauc-status2.json"
  python3 - "$work/rauc-status2.json" "$slot0" <<'PY' || fail "rauc status after the rollback: $(cat "$work/rauc-status2.json")"
import json, sys
s = json.load(open(sys.argv[1])); slots = {list(x)[0]: list(x.values())[0] for x in s["slots"]}
bad = [v for v in slots.values() if v.get("bootname") != sys.argv[2]][0]
assert s["booted"] == sys.argv[2] and bad["boot_status"] == "bad", (s["booted"], bad)
PY
  # The record as the operator reads it. (Read as `history --json`, the newest push-update
  # record's read-back, this check passed the crash case alone but failed in a whole run
  # on 2026-12-03: which record it must pick there is not yet understood, so the text stays.)
  fleet history > "$work/history.txt" 2>&1 || true
  grep -qi "rolled back\|rollback" "$work/history.txt" || { cat "$work/history.txt"; fail "history does not record the rollback"; }
  ok "a bundle whose player exits at start: the trial failed its health check, the unit went back to slot $slot0 ($ver0) by itself, the old show plays, the fleet stopped and recorded it"
  lap "crashing bundle (boots 3-4)"
fi

# ---------------------------------------------------------------- 6b. a hanging root
if want_case hang; then
  slot0=$(booted) ver0=$(version); profile_ok; show0=$(show_of)
  t0=$(date +%s.%N)
  if push_update "$work/hang.raucb" --switch now; then cat "$work/push.out"; fail "the fleet called the hanging bundle a success"; fi
  cat "$work/push.out"
  grep -qi "rolled back" "$work/push.out" || fail "the fleet did not say the unit rolled back"
  grep -q "pfx test bundle: freezing" "$work/serial.log" || fail "the hanging bundle's trial boot never froze (the case tested nothing)"
  profile_ok
  [ "$(booted)" = "$slot0" ] && [ "$(version)" = "$ver0" ] || fail "after the hung trial the unit runs slot $(booted) $(version), expected $slot0 $ver0"
  [ "$(show_of)" = "$show0" ] || fail "after the hung trial the unit plays $(show_of), before it $show0"
  echo "UPDATE hang: push to rollback recorded $(python3 -c "import time; print(round(time.time()-$t0,1))") s"
  ok "a bundle whose root hangs 3 s into its trial boot (PID 1 and every service frozen): the watchdog reset it, U-Boot went back to slot $slot0 ($ver0) by itself, the old show plays, the fleet stopped and said rolled back"
  lap "hanging bundle (boots)"
fi

# ---------------------------------------------------------------- 7. power cuts
# cut_when COND_CMD: system_reset (a power cut: the guest's unflushed writes are lost) as
# soon as COND_CMD succeeds, polled every 0.5 s for at most 600 s.
cut_when() {
  local i
  for i in $(seq 1 1200); do
    if eval "$1" > /dev/null 2>&1; then monitor system_reset; return 0; fi
    sleep 0.5
  done
  fail "cut_when: never saw: $1"
}
after_cut() { # WHAT: the unit boots and plays after the cut
  wait_up
  echo "CUT ($1): back on slot $(booted), version $(version), first frame $frame_s s after the cut"
}
if want_case cuts; then
  # Each cut, then the same rollout run again: it must take the update (3.0.0) after every
  # one, resuming what was done.
  target_bundle=$work/v3.raucb
  # a) during the transfer
  bid=$(boot_id)
  push_update "$target_bundle" --switch now &
  push_pid=$!
  cut_when "vm 'find /var/lib/pfx/update/staging -name \"*.part\" -size +20M | grep -q .'"
  wait $push_pid 2>/dev/null || true
  after_cut "transfer"
  # b) during the slot write
  push_update "$target_bundle" --switch now &
  push_pid=$!
  cut_when "vm 'pgrep -f \"rauc install\" || journalctl -u rauc --no-pager -o cat -n 20 | grep -qi \"copying\\|writing\"'"
  wait $push_pid 2>/dev/null || true
  after_cut "slot write"
  # c) after the install, before the switch (switch far ahead)
  sw_at=$(date -d '+6 hours' +%H:%M)
  push_until_said "switches at" "$target_bundle" --switch "at $sw_at"
  grep -q "T$sw_at:00Z" "$work/push.out" || { cat "$work/push.out"; fail "the fleet did not say when the unit will switch"; }
  slot_c=$(booted)
  monitor system_reset
  after_cut "installed, not switched"
  [ "$(booted)" = "$slot_c" ] || fail "a cut before the switch changed the booted slot from $slot_c to $(booted)"
  # d) during the trial boot: reset once U-Boot has started the trial slot's kernel
  trials_seen=$(grep -c 'pfx.trial=1' "$work/serial.log" || true)
  push_update "$target_bundle" --switch now &
  push_pid=$!
  cut_when "grep -q 'pfx.trial=1' '$work/serial.log' && [ \$(grep -c 'pfx.trial=1' '$work/serial.log') -gt $trials_seen ]"
  wait $push_pid 2>/dev/null || true
  after_cut "trial boot"
  [ "$(booted)" = "$slot_c" ] || fail "after a cut during the trial boot the unit runs slot $(booted), expected the old $slot_c"
  # e) right after the commit: the committed slot stays
  push_update "$target_bundle" --switch now || { cat "$work/push.out"; fail "the update after the cuts"; }
  slot_e=$(booted)
  [ "$slot_e" != "$slot_c" ] || fail "the update after the cuts did not switch slots"
  monitor system_reset
  after_cut "after the commit"
  [ "$(booted)" = "$slot_e" ] || fail "a cut right after the commit went back to slot $(booted)"
  ok "power cuts during the transfer, the slot write, between install and switch, during the trial boot and after the commit: each time the unit boots and plays, and takes the update again"
  lap "power cuts"
fi

# ---------------------------------------------------------------- 8. one env copy erased
if want_case env; then
  slot0=$(booted)
  for copy in pfxenv.a pfxenv.b; do
    vm "dd if=/dev/zero of=/boot/firmware/$copy bs=16384 count=1 conv=notrunc,fsync status=none"
    bid=$(boot_id)
    vm systemctl reboot || true
    wait_reboot "$bid"
    [ "$(booted)" = "$slot0" ] || fail "with $copy erased the unit booted slot $(booted), expected $slot0"
    vm pfx-agent bootenv print --json > "$work/env-$copy.json" || fail "bootenv print after erasing $copy"
  done
  ok "one boot environment copy erased (each in turn): the unit still boots slot $slot0 and plays"
  lap "env copy erased"
fi
stop_vm
echo "suite 65-update: $(( $(date +%s) - suite_start )) s"
finish 65-update
