# Sourced by the image suite (60-image.sh) and the boot bench (bench/boot.sh): the VM
# they boot a vm-arm64 image in, and how they talk to it. One definition, so the bench
# measures exactly the boot the suite asserts on.
#
# The VM: qemu-system-aarch64 -M virt -cpu cortex-a72 -smp 2 -m 1024 (TCG), e1000 NIC,
# virtio-blk disk, virtio-rng. It boots the kernel, initramfs and cmdline.txt read from the
# image's own FAT partition.
#
#   vm_boot_files IMG MANIFEST DIR     copies the kernel, initrd and cmdline.txt out of IMG
#                                      into DIR; sets vm_kernel, vm_initrd, vm_cmdline
#   vm_inject_inspect IMG MANIFEST PUB DIR
#                                      gives IMG (a copy that boots, never the verified
#                                      image) a test-only root sshd on port 2222 that takes
#                                      only the key PUB
#   vm_ports                           sets http_port ssh_port inspect_port fppc_port
#   start_vm SERIAL_LOG                boots $vm_disk (-snapshot); sets qemu_pid, boot_start
#   monitor CMD                        one QEMU monitor command (system_reset)
#   stop_vm                            a clean power-off, then qemu gone
#   vm ARGS / fleet_ssh ARGS           ssh as root (inspection key) / with the fleet key
#   profile_ok                         GET /profile into $vm_work/profile.json
#   wait_profile SERIAL_LOG            sets profile_s (qemu start -> /profile answers)
#   wait_frame                         sets frame_s (qemu start -> the first frame, from the
#                                      answer that shows it) and frame_seen_s (-> that answer)
#
# In: vm_work (a scratch directory), vm_kernel/vm_initrd/vm_cmdline, vm_disk, vm_mac,
# ssh_opts, vm_key (inspection key), vm_fleet_key; vm_poll (seconds between polls, 1 by
# default). The caller defines fail().

# The caller's fail() wins; a caller that defines none gets check.sh's, fatal (each VM step
# needs the one before).
if ! declare -F fail > /dev/null; then
  declare -F die > /dev/null || . "$(dirname "${BASH_SOURCE[0]}")/check.sh"
  fail() { die "$*"; }
fi

# vm_image_yaml TREE KEYFILE: the image YAML of the suite's VM (vm-arm64, the example show
# and the three profiles of checkout TREE, fleet key KEYFILE), one definition for the suite
# and the boot bench.
vm_image_yaml() {
  cat << YAML
target: vm-arm64
hostname_prefix: pfx
ssh_authorized_keys_files: [$2]
show: $1/examples/unit-show.yaml
profiles:
  - $1/profiles/gen3-bigpacket.yaml
  - $1/profiles/legacy-2018-2023-sacn.yaml
  - $1/profiles/bench-ddp.yaml
image_size_mib: 3584
YAML
}

vm_mac=${vm_mac:-52:54:00:ab:cd:ef}
vm_poll=${vm_poll:-1}

# py_json FILE EXPR: one value from a JSON file (EXPR over `m`).
py_json() { python3 -c "import json,sys; m=json.load(open(sys.argv[1])); print($2)" "$1"; }

vm_boot_files() {
  local img=$1 manifest=$2 dir=$3 boot_off kfile ifile
  boot_off=$(py_json "$manifest" 'm["partitions"][0]["start_sector"]*512')
  # The kernel raspi-firmware's hook put on the FAT (config.txt itself starts U-Boot).
  kfile=$(py_json "$manifest" '"vmlinuz-" + m["kernel_version"]')
  ifile=$(py_json "$manifest" 'm["initramfs_file"]')
  export MTOOLS_SKIP_CHECK=1
  mcopy -o -n -i "$img@@$boot_off" "::$kfile" "$dir/vmlinuz"
  mcopy -o -n -i "$img@@$boot_off" "::$ifile" "$dir/initrd"
  mcopy -o -n -i "$img@@$boot_off" ::cmdline.txt "$dir/cmdline.txt"
  vm_kernel=$dir/vmlinuz vm_initrd=$dir/initrd
  vm_cmdline=$(tr '\n' ' ' < "$dir/cmdline.txt")
  vm_kfile=$kfile vm_ifile=$ifile
}

vm_inject_inspect() {
  local img=$1 manifest=$2 pub=$3 dir=$4 root_off
  mkdir -p "$dir"
  cp "$pub" "$dir/keys"
  printf 'Port 2222\nHostKey /etc/ssh/ssh_host_ed25519_key\nPidFile /run/pfx-test-inspect.pid\nPermitRootLogin prohibit-password\nAuthorizedKeysFile /etc/ssh/pfx-test-inspect.keys\nPasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM yes\n' > "$dir/conf"
  printf '[Unit]\nDescription=pfx image suite: root inspection sshd (the booted test copy only)\nAfter=pfx-ssh-hostkeys.service network.target\nWants=pfx-ssh-hostkeys.service\n\n[Service]\nExecStartPre=/bin/mkdir -p /run/sshd\nExecStart=/usr/sbin/sshd -D -f /etc/ssh/pfx-test-inspect.conf\n' > "$dir/unit"
  chmod 600 "$dir/keys" "$dir/conf"; chmod 644 "$dir/unit"
  root_off=$(py_json "$manifest" '[x for x in m["partitions"] if x["kind"]==0x83][0]["start_sector"]*512')
  printf '%s\n' "write $dir/keys /etc/ssh/pfx-test-inspect.keys" "write $dir/conf /etc/ssh/pfx-test-inspect.conf" \
    "write $dir/unit /etc/systemd/system/pfx-test-inspect.service" \
    "symlink /etc/systemd/system/multi-user.target.wants/pfx-test-inspect.service /etc/systemd/system/pfx-test-inspect.service" > "$dir/cmds"
  debugfs -w -f "$dir/cmds" "$img?offset=$root_off" > "$dir/log" 2>&1 || fail "inject the inspection sshd: $(cat "$dir/log")"
}

vm_free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
vm_ports() { http_port=$(vm_free_port); ssh_port=$(vm_free_port); inspect_port=$(vm_free_port); fppc_port=$(vm_free_port); }

# -snapshot: the guest's writes (its first-boot SSH host keys) last for this QEMU process,
# across a guest reboot, and the image file stays as it was. virtio-rng: the guest's entropy
# comes from the host, as a Pi's comes from its hardware RNG. The monitor socket is for hard
# resets (system_reset).
#
# vm_boot=uboot (default kernel): the firmware path a unit takes. QEMU starts Debian's
# U-Boot for the virt machine (u-boot-qemu), which runs the image's boot.scr from the FAT
# partition: it picks root slot A or B by the boot environment and loads that slot's own
# kernel, initramfs and command line. An i6300esb watchdog is there for systemd to arm.
# vm_snapshot=0: no -snapshot, so the guest's writes land in $vm_disk (the update suite
# reads the slots and the boot environment back from the file).
vm_uboot_bin=${vm_uboot_bin:-/usr/lib/u-boot/qemu_arm64/u-boot.bin}
start_vm() {
  rm -f "$vm_work/monitor.sock"
  local boot=() snap=(-snapshot)
  if [ "${vm_boot:-kernel}" != uboot ]; then
    boot=(-kernel "$vm_kernel" -initrd "$vm_initrd" -append "$vm_cmdline")
  else
    [ -f "$vm_uboot_bin" ] || fail "no U-Boot for qemu's virt machine at $vm_uboot_bin (apt-get install u-boot-qemu)"
    boot=(-bios "$vm_uboot_bin" -device i6300esb)
  fi
  [ "${vm_snapshot:-1}" = 1 ] || snap=()
  local args=(-cpu cortex-a72 -smp 2 -m 1024 -display none
    -monitor "unix:$vm_work/monitor.sock,server=on,wait=off"
    -serial "file:$1" "${snap[@]}"
    "${boot[@]}"
    -drive "file=$vm_disk,if=none,format=raw,id=d0" -device virtio-blk-pci,drive=d0
    -netdev "user,id=n0,hostfwd=tcp:127.0.0.1:$http_port-:8080,hostfwd=tcp:127.0.0.1:$ssh_port-:22,hostfwd=tcp:127.0.0.1:$inspect_port-:2222,hostfwd=tcp:127.0.0.1:$fppc_port-:80"
    -device "e1000,netdev=n0,mac=$vm_mac,romfile="
    -object rng-random,filename=/dev/urandom,id=rng0 -device virtio-rng-pci,rng=rng0)
  local dtb=()
  if [ "${vm_boot:-kernel}" = uboot ] && [ "${vm_bootdelay:-0}" = 0 ]; then
    # U-Boot's 2 s boot delay, gone as on a unit (docs/update.md): U-Boot reads
    # /config/bootdelay from its control device tree, here QEMU's own, dumped with the very
    # options of this boot (a tree dumped without -bios differs, and the kernel prints
    # nothing with it) and fresh for each start, so its rng-seed and kaslr-seed are new.
    qemu-system-aarch64 -M "virt,dumpdtb=$vm_work/virt.dtb" "${args[@]}" > "$vm_work/dumpdtb.log" 2>&1 \
      && fdtput -c "$vm_work/virt.dtb" /config && fdtput -t i "$vm_work/virt.dtb" /config bootdelay 0 \
      || fail "dumping QEMU's device tree for U-Boot: $(cat "$vm_work/dumpdtb.log")"
    rm -f "$vm_work/monitor.sock"
    dtb=(-dtb "$vm_work/virt.dtb")
  fi
  qemu-system-aarch64 -M virt "${args[@]}" "${dtb[@]}" &
  qemu_pid=$!
  boot_start=$(date +%s.%N)
}

# The monitor prints "(qemu) " when it is ready for a command and again when the command
# is done: the command is sent after the first prompt and the socket closed after the second,
# so a system_reset has happened when this returns (a closed socket or 10 s without the
# prompt is a failure, not a guess).
monitor() { python3 - "$vm_work/monitor.sock" "$1" <<'PY' || fail "QEMU monitor: $1 not confirmed"
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(10)
s.connect(sys.argv[1])
def prompt(seen=b""):
    while b"(qemu)" not in seen:
        got = s.recv(65536)
        if not got:
            sys.exit("the monitor closed before its prompt")
        seen += got
prompt()
s.sendall((sys.argv[2] + "\n").encode())
prompt()
s.close()
PY
}

stop_vm() {
  vm systemctl poweroff || true
  for _ in $(seq 1 60); do kill -0 "$qemu_pid" 2>/dev/null || break; sleep 1; done
  kill -0 "$qemu_pid" 2>/dev/null && kill "$qemu_pid"
  wait "$qemu_pid" 2>/dev/null || true
  qemu_pid=""
}

vm() { ssh "${ssh_opts[@]}" -o IdentitiesOnly=yes -i "$vm_key" -p "$inspect_port" root@127.0.0.1 "$@"; }
fleet_ssh() { ssh -F /dev/null "${ssh_opts[@]}" -o IdentitiesOnly=yes -i "$vm_fleet_key" -p "$ssh_port" "$@"; }
profile_ok() { curl -fsS --max-time 3 "http://127.0.0.1:$http_port/profile" -o "$vm_work/profile.json" 2>/dev/null; }
vm_since() { python3 -c "import time; print(round(time.time()-$1,2))"; }

# Boot to /profile answering on the forwarded port (the player's first HTTP answer).
wait_profile() {
  local n
  profile_s=""
  n=$(python3 -c "print(int(300/$vm_poll))")
  for _ in $(seq 1 "$n"); do
    kill -0 "$qemu_pid" 2>/dev/null || { tail -50 "$1"; fail "qemu exited during boot"; }
    if profile_ok; then profile_s=$(vm_since "$boot_start"); break; fi
    sleep "$vm_poll"
  done
  [ -n "$profile_s" ] || { tail -80 "$1"; fail "/profile did not answer on 127.0.0.1:$http_port within 300 s"; }
}

# First frame. The poll sees the frame counter leave 0 some time after the frame: the
# forwarded port refuses or stalls a poll (up to --max-time) until the player listens,
# and the polls are vm_poll apart. So the first frame's own time comes from the answer
# that shows it: the answer's arrival, less the age of the newest frame in it and the
# player's span from its first frame to that one (since_start.loop_s; published every
# 50 ms, so this errs late by at most that). Sets frame_s (qemu start -> the first frame,
# so derived) and frame_seen_s (qemu start -> the poll that saw it).
wait_frame() {
  local n t
  frame_s="" frame_seen_s=""
  n=$(python3 -c "print(int(120/$vm_poll))")
  for _ in $(seq 1 "$n"); do
    if profile_ok; then
      t=$(vm_since "$boot_start")
      if frame_s=$(python3 -c '
import json, sys
m = json.load(open(sys.argv[1]))
if m.get("frames", 0) <= 0:
    sys.exit(1)
age = (m.get("last_frame_age_ms") or 0.0) / 1000.0
span = m.get("since_start", {}).get("loop_s", 0.0)
print(round(float(sys.argv[2]) - age - span, 1))' "$vm_work/profile.json" "$t"); then
        frame_seen_s=$t; break
      fi
      frame_s=""
    fi
    sleep "$vm_poll"
  done
  [ -n "$frame_s" ] || fail "the player answered /profile but rendered no frame within 120 s: $(head -c 300 "$vm_work/profile.json")"
}
